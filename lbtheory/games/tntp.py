"""Reader for the TNTP "Transportation Networks" format (``*_net.tntp``, ``*_trips.tntp``,
optional ``*_flow.tntp``), producing a :class:`~lbtheory.games.RoutingGame`.

DESIGN.md puts the TNTP reader in ``io.py``; it lives here to keep ``io.py`` small.

Handled quirks: ``~`` comment lines and trailing ``~`` comments, metadata tags ``<KEY> value``
up to ``<END OF METADATA>``, ``;`` terminators (separate or glued to the last number), the first
thru node (zones numbered below it may be an origin or destination but never a through-node),
blocked links (capacity 0: the BPR cost would be infinite for any flow, so such a link is
removed — our convention [R], the format does not define it), zero free-flow times (zero-cost
links), powers of 0 (constant cost t0·(1 + B)) and non-integer powers, and tiny B (kept exactly).
Link costs are the generalised cost of the format, t0·(1 + B·(x/c)^p) + toll_factor·toll +
distance_factor·length, in the file's own units, with ``<TOLL FACTOR>`` and ``<DISTANCE FACTOR>``
from the metadata (0 when absent, i.e. plain BPR travel time); speed is read but not used. B may
be any non-negative number, including values like 1e-71 that some files use for "no congestion"
(kept exactly: the congestion coefficient is t0·B and the power term is scaled by c).
Malformed input raises :class:`~lbtheory.errors.DataFormatError`
naming the file, the line and the field.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .._checks import check_int, check_option, check_real
from ..errors import DataFormatError, Engine
from ._tntp_write import write_tntp
from .arccosts import ArcCostBank, Polynomial
from .game import RoutingGame, reaches

__all__ = ["TNTPNetwork", "TNTPTrips", "read_tntp_network", "read_tntp_trips",
           "read_tntp_flow", "read_tntp_metadata", "load_tntp_game", "write_tntp", "LINK_FIELDS"]

#: Column names of a link line, in file order.
LINK_FIELDS = ("init_node", "term_node", "capacity", "length", "free_flow_time", "b", "power",
               "speed", "toll", "link_type")
#: Link columns that must be ≥ 0.
_NON_NEGATIVE = frozenset({"capacity", "length", "free_flow_time", "b", "power", "toll"})
_TAG = re.compile(r"^\s*<([^>]+)>\s*(.*)$")


@dataclasses.dataclass(frozen=True)
class TNTPNetwork:
    """A parsed ``*_net.tntp`` file.

    Attributes:
        path: the file; zones, nodes, first_thru_node: metadata; links: (L × 10) float array in
        :data:`LINK_FIELDS` order, file order; lines: the line number of each link;
        toll_factor, distance_factor: ``<TOLL FACTOR>``/``<DISTANCE FACTOR>`` (cost units per
        toll unit / per length unit; 0 when absent).
    """

    path: str
    zones: int
    nodes: int
    first_thru_node: int
    links: np.ndarray
    lines: np.ndarray
    toll_factor: float = 0.0
    distance_factor: float = 0.0

    @property
    def blocked(self) -> np.ndarray:
        """Links with capacity 0 (carry no flow)."""
        return self.links[:, 2] == 0


@dataclasses.dataclass(frozen=True)
class TNTPTrips:
    """A parsed ``*_trips.tntp`` file: OD entries (origin, destination, demand, line)."""

    path: str
    zones: int
    origins: np.ndarray
    destinations: np.ndarray
    demand: np.ndarray
    lines: np.ndarray


#: The longest line a TNTP file may have (characters): real files have lines under 1 kB (a
#: trips line holds a few entries); a longer one is not TNTP text (a binary file, or a file
#: without newlines that would otherwise be read into memory whole).
MAX_LINE_CHARS: int = 1 << 20


def _content_lines(path: str):
    """(line number, text without comments) for non-empty lines, read lazily (a metadata-only
    read stops at ``<END OF METADATA>``); a line longer than :data:`MAX_LINE_CHARS` or holding
    NUL bytes is a DataFormatError (never read whole into memory)."""
    try:
        fh = open(path, encoding="utf-8-sig", errors="replace")
    except FileNotFoundError:
        raise DataFormatError("file not found", path=path) from None
    except IsADirectoryError:
        raise DataFormatError("is a directory, expected a TNTP file", path=path) from None
    with fh:
        for no, line in enumerate(iter(lambda: fh.readline(MAX_LINE_CHARS), ""), start=1):
            if len(line) >= MAX_LINE_CHARS and not line.endswith("\n"):
                raise DataFormatError(f"line longer than {MAX_LINE_CHARS} characters: not a "
                                      f"TNTP text file", path=path, line=no, field="line")
            if "\0" in line:
                raise DataFormatError("NUL bytes: a binary file, not a TNTP text file",
                                      path=path, line=no, field="line")
            text = line.split("~", 1)[0].strip()
            if text:
                yield no, text


def _tags(path: str, lines) -> dict[str, tuple[str, int]]:
    """The metadata tags ``{KEY: (value, line)}`` of ``lines``, consumed up to and including
    ``<END OF METADATA>``."""
    meta: dict[str, tuple[str, int]] = {}
    for no, text in lines:
        m = _TAG.match(text)
        if not m:
            raise DataFormatError(f"expected a metadata tag or <END OF METADATA>, got {text[:80]!r}"
                                  f"{'…' if len(text) > 80 else ''}",
                                  path=path, line=no, field="metadata")
        key = m.group(1).strip().upper()
        if key == "END OF METADATA":
            return meta
        meta[key] = (m.group(2).strip(), no)
    raise DataFormatError("missing <END OF METADATA>", path=path, field="END OF METADATA")


def read_tntp_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The metadata tags of a TNTP file (``{"NUMBER OF ZONES": "1790", ...}``, keys upper-case),
    reading only up to ``<END OF METADATA>``.

    Raises:
        DataFormatError: a line other than a tag before ``<END OF METADATA>``, or none at all.
    """
    path = str(path)
    return {k: v for k, (v, _) in _tags(path, _content_lines(path)).items()}


def _metadata(path: str, lines, required: tuple[str, ...],
              optional: tuple[str, ...] = ()) -> tuple[dict, list]:
    lines = iter(lines)
    meta = _tags(path, lines)
    return _meta_values(path, meta, required, optional), list(lines)


def _meta_values(path: str, meta: dict[str, tuple[str, int]], required: tuple[str, ...],
                 optional: tuple[str, ...] = ()) -> dict:
    """The required (non-negative integer) and optional (non-negative number) tags' values."""
    out = {}
    for key in required:
        if key not in meta:
            raise DataFormatError(f"missing metadata <{key}>", path=path, field=key)
        value, no = meta[key]
        out[key] = check_int(_number(path, no, key, value, name=f"<{key}>"), f"<{key}>", low=0,
                             integral_float=True, error=_bad(path, no, key))
    for key in optional:
        if key in meta:
            value, no = meta[key]
            out[key] = _number(path, no, key, value, name=f"<{key}>", low=0.0)
    return out


def _bad(path: str, no: int, field: str) -> Callable[[str], DataFormatError]:
    """The error of a bad number at ``path``:``no`` (for the checks of :mod:`lbtheory._checks`)."""
    return lambda msg: DataFormatError(msg, path=path, line=no, field=field)


def _number(path: str, no: int, field: str, token: str, *, name: str | None = None,
            low: float | None = None) -> float:
    """The number ``token`` (a finite float, ≥ ``low`` when given), else DataFormatError."""
    name = name or field
    try:
        v = float(token)
    except ValueError:
        raise DataFormatError(f"{name} must be a number, got {token!r}", path=path, line=no,
                              field=field) from None
    return check_real(v, name, low=low, error=_bad(path, no, field))


def read_tntp_network(path: str | os.PathLike, *,
                      engine: Engine | str = Engine.AUTO) -> TNTPNetwork:
    """Parse a ``*_net.tntp`` file (see the module docstring for the quirks handled).

    ``engine``: ``"auto"`` (default) parses the canonical layout in blocks
    (see below, ~20× faster) and anything else with the reference line-by-line
    parser, ``"reference"`` always with the reference; both give the same arrays and errors.

    Raises:
        DataFormatError: missing metadata, a link line without 10 columns, an unknown node,
            a negative capacity / free-flow time / B / power, or a link count that disagrees
            with ``<NUMBER OF LINKS>``.
    """
    path = str(path)
    if _fast(engine):
        net = _fast_network(path)
        if net is not None:
            return net
    req = ("NUMBER OF ZONES", "NUMBER OF NODES", "FIRST THRU NODE", "NUMBER OF LINKS")
    meta, body = _metadata(path, _content_lines(path), req,
                           optional=("TOLL FACTOR", "DISTANCE FACTOR"))
    n_nodes = meta["NUMBER OF NODES"]
    rows, lines = [], []
    for no, text in body:
        tokens = text.replace(";", " ; ").split()
        if tokens and tokens[-1] == ";":
            tokens = tokens[:-1]
        if len(tokens) != len(LINK_FIELDS):
            raise DataFormatError(f"a link line needs {len(LINK_FIELDS)} columns "
                                  f"({' '.join(LINK_FIELDS)}), got {len(tokens)}",
                                  path=path, line=no, field="columns")
        vals = [_number(path, no, f, t, low=0.0 if f in _NON_NEGATIVE else None)
                for f, t in zip(LINK_FIELDS, tokens)]
        for f in ("init_node", "term_node"):
            v = vals[LINK_FIELDS.index(f)]
            if not (v.is_integer() and 1 <= v <= n_nodes):
                raise DataFormatError(f"unknown node {tokens[LINK_FIELDS.index(f)]} (nodes are "
                                      f"1..{n_nodes})", path=path, line=no, field=f)
        rows.append(vals)
        lines.append(no)
    if len(rows) != meta["NUMBER OF LINKS"]:
        raise DataFormatError(f"<NUMBER OF LINKS> says {meta['NUMBER OF LINKS']} but the file "
                              f"has {len(rows)} link lines", path=path, field="NUMBER OF LINKS")
    _check_node_count(path, meta, len(rows))
    return TNTPNetwork(path, meta["NUMBER OF ZONES"], n_nodes, meta["FIRST THRU NODE"],
                       np.asarray(rows, dtype=float).reshape(-1, len(LINK_FIELDS)),
                       np.asarray(lines, dtype=int), float(meta.get("TOLL FACTOR", 0.0)),
                       float(meta.get("DISTANCE FACTOR", 0.0)))


def _check_node_count(path: str, meta: dict, n_links: int) -> None:
    """Refuse node and zone counts the links cannot use, before anything is sized by them: every
    node is a zone or an end of a link, so ``nodes ≤ zones + 2·links``, and zones are nodes
    (``<NUMBER OF NODES> 1e12`` on a 5-link file would have the solvers allocate 7 TiB)."""
    nodes, zones = meta["NUMBER OF NODES"], meta["NUMBER OF ZONES"]
    if zones > nodes:
        raise DataFormatError(f"<NUMBER OF ZONES> {zones} exceeds <NUMBER OF NODES> {nodes}: "
                              f"zones are nodes 1..zones", path=path, field="NUMBER OF ZONES")
    if nodes > zones + 2 * n_links:
        raise DataFormatError(f"<NUMBER OF NODES> {nodes} cannot be right: {n_links} links and "
                              f"{zones} zones touch at most {zones + 2 * n_links} nodes",
                              path=path, field="NUMBER OF NODES")


def read_tntp_trips(path: str | os.PathLike, *,
                    engine: Engine | str = Engine.AUTO) -> TNTPTrips:
    """Parse a ``*_trips.tntp`` file (``Origin k`` blocks of ``dest : demand;`` entries);
    ``engine`` as :func:`read_tntp_network`.

    Raises:
        DataFormatError: missing ``<NUMBER OF ZONES>``, an entry before any ``Origin`` line, a
            malformed entry, a zone outside 1..zones, or a negative demand.
    """
    path = str(path)
    if _fast(engine):
        trips = _fast_trips(path)
        if trips is not None:
            return trips
    meta, body = _metadata(path, _content_lines(path), ("NUMBER OF ZONES",))
    zones = meta["NUMBER OF ZONES"]
    o_l, d_l, q_l, n_l = [], [], [], []
    origin = None
    for no, text in body:
        if text.lower().startswith("origin"):
            tok = text.split()
            if len(tok) != 2:
                raise DataFormatError(f"expected 'Origin <zone>', got {text!r}", path=path,
                                      line=no, field="origin")
            origin = _zone(path, no, "origin", tok[1], zones)
            continue
        if origin is None:
            raise DataFormatError(f"demand entry before any 'Origin' line: {text!r}",
                                  path=path, line=no, field="origin")
        for entry in filter(None, (e.strip() for e in text.split(";"))):
            parts = [p.strip() for p in entry.split(":")]
            if len(parts) != 2:
                raise DataFormatError(f"expected 'destination : demand', got {entry!r}",
                                      path=path, line=no, field="entry")
            dest = _zone(path, no, "destination", parts[0], zones)
            q = _number(path, no, "demand", parts[1], low=0.0)
            o_l.append(origin)
            d_l.append(dest)
            q_l.append(q)
            n_l.append(no)
    return TNTPTrips(path, zones, np.asarray(o_l, dtype=int), np.asarray(d_l, dtype=int),
                     np.asarray(q_l, dtype=float), np.asarray(n_l, dtype=int))


def _fast(engine: Engine | str) -> bool:
    """Whether ``engine`` asks for the block parser first (auto/compiled) or not (reference)."""
    return check_option(Engine, engine, "engine") is not Engine.REFERENCE


def _zone(path: str, no: int, field: str, token: str, zones: int) -> int:
    v = _number(path, no, field, token)
    if not (v.is_integer() and 1 <= v <= zones):
        raise DataFormatError(f"unknown zone {token} (zones are 1..{zones})", path=path, line=no,
                              field=field)
    return int(v)


def read_tntp_flow(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parse a ``*_flow.tntp`` file: ``(tail, head, volume)`` arrays (cost column ignored).

    Raises:
        DataFormatError: a data line with fewer than 3 numbers.
    """
    path = str(path)
    tails, heads, vols = [], [], []
    for no, text in _content_lines(path):
        tokens = text.replace(";", " ").split()
        if not tokens or not re.match(r"^[0-9]", tokens[0]):
            continue  # header line ("From To Volume Cost")
        if len(tokens) < 3:
            raise DataFormatError(f"a flow line needs from, to, volume; got {text!r}",
                                  path=path, line=no, field="columns")
        for field, tok, out in (("from", tokens[0], tails), ("to", tokens[1], heads)):
            out.append(check_int(_number(path, no, field, tok), field, low=1,
                                 integral_float=True, error=_bad(path, no, field)))
        vols.append(_number(path, no, "volume", tokens[2]))
    return np.asarray(tails), np.asarray(heads), np.asarray(vols, dtype=float)


def _check_reachable(net: TNTPNetwork, trips: TNTPTrips) -> None:
    """The game's own arc-use rule and reachability, reported against the trips file's line
    (the first unreachable entry of the lowest such origin)."""
    n = net.nodes
    tails = net.links[:, 0].astype(int) - 1
    heads = net.links[:, 1].astype(int) - 1
    non_through = np.arange(n) < net.first_thru_node - 1  # zones below the first thru node
    sel = np.flatnonzero((trips.demand > 0) & (trips.destinations != trips.origins))
    ok = reaches(n, tails, heads, net.blocked, non_through, trips.origins[sel] - 1,
                 trips.destinations[sel] - 1)
    if not ok.all():
        bad = sel[~ok]
        e = bad[trips.origins[bad] == trips.origins[bad].min()][0]
        o = trips.origins[e]
        raise DataFormatError(
            f"demand {trips.demand[e]:g} from zone {o} to zone {trips.destinations[e]}, "
            f"which cannot be reached from it in {Path(net.path).name} (blocked links and "
            f"the first thru node {net.first_thru_node} considered)",
            path=trips.path, line=int(trips.lines[e]), field="destination")


def load_tntp_game(net_path: str | os.PathLike, trips_path: str | os.PathLike):
    """Read a TNTP network and trip table into a :class:`~lbtheory.games.RoutingGame`.

    Arc costs are the generalised cost t0·(1 + B·(x/c)^p) + toll_factor·toll +
    distance_factor·length (see the module docstring).

    Nodes are the integers 1..N; arcs are the links in file order (blocked links kept, marked
    ``blocked``); zones below the first thru node are non-through nodes. Intra-zonal demand
    (origin = destination) is dropped.

    Raises:
        DataFormatError: as the readers, and for demand to a node that cannot be reached
            (naming the trips file, the line and the ``destination`` field), or more zones in
            the trips file than nodes in the network.
    """
    net = read_tntp_network(net_path)
    trips = read_tntp_trips(trips_path)
    if trips.zones > net.nodes:
        raise DataFormatError(f"<NUMBER OF ZONES> {trips.zones} exceeds the network's "
                              f"{net.nodes} nodes", path=trips.path, field="NUMBER OF ZONES")
    _check_reachable(net, trips)
    keep = trips.origins != trips.destinations
    total = float(trips.demand[keep].sum())
    if not total > 0:
        what = ("only intra-zonal demand (origin = destination, which is dropped)"
                if (trips.demand > 0).any() else "no positive demand")
        raise DataFormatError(f"the trip table has {what}: nothing to assign",
                              path=trips.path, field="demand")
    if not np.isfinite(total):
        raise DataFormatError(f"the total demand overflows float64 ({total}); rescale the trip "
                              "table's units", path=trips.path, field="demand")
    links = net.links
    game = RoutingGame.from_arrays(
        net.nodes, links[:, 0].astype(int) - 1, links[:, 1].astype(int) - 1, _link_costs(net),
        net.blocked, trips.origins[keep] - 1, trips.destinations[keep] - 1, trips.demand[keep],
        np.arange(net.nodes) < net.first_thru_node - 1)
    _check_finite_costs(net, game, total)
    return game


def _link_costs(net: TNTPNetwork) -> ArcCostBank:
    """The links' generalised costs t0·(1 + B·(x/c)^p) + toll_factor·toll +
    distance_factor·length, grouped by power (blocked links: the constant t0 + the extra
    terms), as the bank of ``[bpr(...) or constant(...) per link]`` would group them."""
    L = net.links
    fft, b, cap, power = L[:, 4], L[:, 5], L[:, 2], L[:, 6]
    extra = net.toll_factor * L[:, 8] + net.distance_factor * L[:, 3]
    blocked = net.blocked
    a = fft + extra
    coef = np.where(blocked, 0.0, fft * b)
    scale = np.where(blocked, 1.0, cap)
    key = np.where(blocked, 1.0, power)
    keys, first = np.unique(key, return_index=True)
    groups = []
    for k in keys[np.argsort(first)]:  # in order of first appearance, as ArcCostBank groups
        idx = np.flatnonzero(key == k)
        # (a one-arc group keeps scalar parameters, as ArcCostBank's stacking does)
        pa, pb, ps = (v[idx] if idx.size > 1 else np.asarray(v[idx[0]]) for v in (a, coef, scale))
        groups.append((Polynomial(pa, pb, ps, float(k)), idx))
    return ArcCostBank.from_groups(len(L), groups)


def _check_finite_costs(net: TNTPNetwork, game, total: float) -> None:
    """Every link's cost and marginal cost at any flow up to the total demand, and every
    objective value (≤ links × total demand × the largest cost), is a finite float64 (no flow on
    one link exceeds the total demand; BPR costs increase with flow), else DataFormatError naming
    the first such link's line: 1e308 free-flow times, 1e-300 capacities or 1e308 demands would
    reach the solvers as inf/NaN."""
    x = np.full(game.n_arcs, total)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        cost, marginal = game.costs.cost(x), game.costs.marginal(x)
        bad = ~(np.isfinite(marginal) & np.isfinite(cost * total * game.n_arcs))
    if bad.any():
        a = int(np.flatnonzero(bad)[0])
        t, h, cap, _, fft, b, power = net.links[a, :7]
        raise DataFormatError(
            f"link {int(t)}→{int(h)}: its cost at the total demand {total:g}, or that cost × "
            f"the demand × {game.n_arcs} links, is not a finite float64 (free-flow time "
            f"{fft:g}, capacity {cap:g}, B {b:g}, power {power:g}); "
            f"rescale the units ({int(bad.sum())} link(s) affected)",
            path=net.path, line=int(net.lines[a]), field="cost")


#: columns (of :data:`LINK_FIELDS`) that must be ≥ 0
_NONNEG_COLS = np.array([LINK_FIELDS.index(f) for f in ("capacity", "length", "free_flow_time",
                                                         "b", "power", "toll")])


_ORIGIN = re.compile(r"^[ \t]*origin[ \t]+(\S+)[ \t]*$", re.IGNORECASE | re.MULTILINE)


#: Files above this size (bytes) skip the block parser, which reads a file whole: the largest
#: public TNTP files are ~100 MB; a larger one is read line by line by the reference parser.
FAST_MAX_BYTES: int = 1 << 30


def _body(path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()):
    """``(metadata, first body line number, body text without comments)``, the metadata read and
    checked by the reference code; ``None`` when the file cannot be read."""
    try:
        if os.path.getsize(path) > FAST_MAX_BYTES:
            return None  # the reference streams it, line by line with a line-length limit
        with open(path, encoding="utf-8-sig", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    if "\0" in text:
        return None  # binary: the reference names the line
    raw = text.split("\n")
    if max(map(len, raw)) >= MAX_LINE_CHARS:
        return None  # the reference refuses the overlong line by number
    # (text mode translates \r\n and \r: the same lines as the reference's file iteration)
    end = [0]

    def content():
        for no, line in enumerate(raw, start=1):
            text = line.split("~", 1)[0].strip()
            if text:
                end[0] = no
                yield no, text

    meta = _meta_values(path, _tags(path, content()), required, optional)
    body = "\n".join(raw[end[0]:])
    if "~" in body:
        body = re.sub(r"~[^\n]*", "", body)
    return meta, end[0] + 1, body


def _fast_network(path: str) -> TNTPNetwork | None:
    """The network of ``path`` as :func:`read_tntp_network` reads it, or ``None`` when its body
    is not the canonical layout (see above)."""
    req = ("NUMBER OF ZONES", "NUMBER OF NODES", "FIRST THRU NODE", "NUMBER OF LINKS")
    got = _body(path, req, ("TOLL FACTOR", "DISTANCE FACTOR"))
    if got is None:
        return None
    meta, first, body = got
    width = len(LINK_FIELDS)
    tokens: list[str] = []
    lines: list[int] = []
    for no, line in enumerate(body.split("\n"), start=first):
        text = line.strip()
        if not text:
            continue
        tok = text.replace(";", " ").split()
        if len(tok) != width or text.count(";") > 1 or (";" in text and text[-1] != ";"):
            return None
        tokens += tok
        lines.append(no)
    if len(lines) != meta["NUMBER OF LINKS"]:
        return None
    try:
        links = np.array(tokens, dtype=float).reshape(-1, width)
    except ValueError:
        return None
    n = meta["NUMBER OF NODES"]
    nodes = links[:, :2]
    if not (np.isfinite(links).all() and (links[:, _NONNEG_COLS] >= 0).all()
            and (nodes == np.floor(nodes)).all() and (nodes >= 1).all() and (nodes <= n).all()):
        return None
    _check_node_count(path, meta, len(lines))
    return TNTPNetwork(path, meta["NUMBER OF ZONES"], n, meta["FIRST THRU NODE"], links,
                       np.asarray(lines, dtype=int), float(meta.get("TOLL FACTOR", 0.0)),
                       float(meta.get("DISTANCE FACTOR", 0.0)))


def _fast_trips(path: str) -> TNTPTrips | None:
    """The trip table of ``path`` as :func:`read_tntp_trips` reads it, or ``None`` when its body
    is not the canonical layout: ``Origin z`` lines, and lines of ``d : q;`` entries each ending
    with its ``;`` (the reference also takes a last entry without one)."""
    got = _body(path, ("NUMBER OF ZONES",))
    if got is None:
        return None
    zones, first, body = got[0]["NUMBER OF ZONES"], got[1], got[2]
    parts = _ORIGIN.split(body)  # [before, zone, block, zone, block, ...]
    if parts[0].strip():
        return None  # entries before any origin line (or an unusual origin line)
    blocks = parts[2::2]
    text = "".join(parts[0::2])  # the body without the origin lines' text, every newline kept
    tok = text.replace(":", " : ").replace(";", " ; ").split()
    e = len(tok) // 4
    if len(tok) != 4 * e or tok[1::4].count(":") != e or tok[3::4].count(";") != e:
        return None
    # one array element per character (bytes when ASCII, the usual case: 4× less to scan)
    chars = (np.frombuffer(text.encode("ascii"), dtype=np.uint8) if text.isascii() else
             np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32))
    newline = np.cumsum(chars == 10)
    ink = np.flatnonzero((chars != 32) & ((chars < 9) | (chars > 13)))  # not ASCII space
    last = ink[np.append(newline[ink[1:]] != newline[ink[:-1]], True)]  # of each line
    if not np.all(chars[last] == ord(";")):
        return None  # an entry without its ';', or one across lines
    try:
        origins = np.array(parts[1::2], dtype=float)
        vals = np.array(tok[0::2], dtype=float)  # destination, demand, destination, …
    except ValueError:
        return None
    dest, q = vals[0::2], vals[1::2]
    zs = np.concatenate([origins, dest])
    if not (np.isfinite(zs).all() and (zs == np.floor(zs)).all() and (zs >= 1).all()
            and (zs <= zones).all() and np.isfinite(q).all() and (q >= 0).all()):
        return None
    # the line of each entry is the line of its ';'; an origin's entries are its block's
    semis = np.flatnonzero(chars == ord(";"))
    lines = first + newline[semis]
    ends = len(parts[0]) + np.cumsum([len(b) for b in blocks])
    counts = np.diff(np.searchsorted(semis, ends), prepend=0)
    return TNTPTrips(path, zones, np.repeat(origins.astype(int), counts), dest.astype(int), q,
                     lines.astype(int))
