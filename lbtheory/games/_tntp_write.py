"""Write a network and trip table in the TNTP format (split from :mod:`.tntp`, whose readers it
mirrors, to keep modules small)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["write_tntp"]


def write_tntp(net_path: str | os.PathLike, trips_path: str | os.PathLike,
               data: dict, *, first_thru_node: int | None = None) -> None:
    """Write a network and trip table in TNTP format (e.g. a synthetic network's ``data`` from
    :func:`lbtheory.games.synthetic.synthetic_network`).

    Args:
        data: ``tail``, ``head`` (1-based nodes), ``capacity``, ``free_flow_time``, ``b``,
            ``power`` per link, and ``trips`` (Z × Z demand, zone i+1 to zone j+1).
        first_thru_node: the ``<FIRST THRU NODE>`` tag (default ``data["first_thru_node"]``,
            else 1: every node is a through node).
    """
    if first_thru_node is None:
        first_thru_node = int(data.get("first_thru_node", 1))
    tails, heads = np.asarray(data["tail"], int), np.asarray(data["head"], int)
    trips = np.asarray(data["trips"], dtype=float)
    n = int(max(tails.max(), heads.max(), trips.shape[0]))
    lines = [f"<NUMBER OF ZONES> {trips.shape[0]}", f"<NUMBER OF NODES> {n}",
             f"<FIRST THRU NODE> {first_thru_node}", f"<NUMBER OF LINKS> {tails.size}",
             "<END OF METADATA>", "",
             "~ init_node term_node capacity length free_flow_time b power speed toll "
             "link_type ;"]
    for t, h, c, f, b, p in zip(tails, heads, data["capacity"], data["free_flow_time"],
                                data["b"], data["power"]):
        lines.append(f"\t{t}\t{h}\t{float(c)!r}\t{float(f)!r}\t{float(f)!r}\t{float(b)!r}\t"
                     f"{float(p)!r}\t0\t0\t1\t;")
    Path(net_path).write_text("\n".join(lines) + "\n")
    out = [f"<NUMBER OF ZONES> {trips.shape[0]}", f"<TOTAL OD FLOW> {float(trips.sum())!r}",
           "<END OF METADATA>", ""]
    for o in range(trips.shape[0]):
        out.append(f"Origin {o + 1}")
        ents = [f"{d + 1} : {float(trips[o, d])!r};" for d in np.flatnonzero(trips[o] > 0)]
        for i in range(0, len(ents), 5):
            out.append("  " + "  ".join(ents[i:i + 5]))
        out.append("")
    Path(trips_path).write_text("\n".join(out) + "\n")


# ------------------------------------------------------------------ the fast readers
# Fast TNTP readers: block parsing of the canonical layout, the reference reader for the rest.
#
# :func:`_fast_network` and :func:`_fast_trips` read a ``*_net.tntp`` / ``*_trips.tntp`` file as
# :func:`~lbtheory.games.tntp.read_tntp_network` / :func:`~lbtheory.games.tntp.read_tntp_trips`
# (the reference twins) do, but convert the numbers of the whole body at once (numpy) instead of
# one checked ``float`` per field: Python touches each line once (comments stripped, tokens split,
# the layout checked), never each number. They accept only what the reference accepts with the
# same values — a network body of lines of exactly 10 numbers, and trips bodies of ``Origin z``
# lines and lines of ``d : q ;`` entries (the ``;`` of the last entry of a line may be missing) —
# and return ``None`` for anything else (a non-number, a zone out of range, a negative value, an
# unusual layout …): the caller then runs the reference reader, which gives the same answer or
# its error message naming the file, the line and the field. So both readers agree on every file
# (tests/test_tntp_fast.py checks the arrays on every bundled network and the messages on the
# malformed ones).
