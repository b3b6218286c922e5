"""The command line every paper figure script shares (not a figure script itself).

``--results DIR`` (default the committed :data:`RESULTS`; ``out/results`` holds what ``--quick``
sweeps write) and ``--out DIR`` (default :data:`OUT`). The scripts are programs, so they draw
on matplotlib's non-interactive Agg backend (the library never chooses one). Results that are
missing end the script with exit code 2 and one ``error:`` line naming the sweep that writes
them and about how long it takes, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the committed results every figure is drawn from by default
RESULTS = ROOT / "experiments" / "results"
OUT = ROOT / "paper_figures" / "out"


class MissingResults(Exception):
    """A results file a figure needs does not exist."""


#: where ``lbtheory sweep --quick`` writes (smoke runs never touch the committed results)
QUICK = ROOT / "out" / "results"


def require(results: Path, *files: str, sweep: str, minutes: float,
            profile: str | None = None) -> list[Path]:
    """``results / f`` for every file; :class:`MissingResults` naming the first missing one and
    the sweep command that writes it: the committed profile's (``profile``, default the
    experiment's own; ``minutes`` of wall time on this project's 2-core machine) for the
    committed results, the quick one for any other folder."""
    paths = [Path(results) / f for f in files]
    for p in paths:
        if p.is_file():
            continue
        if Path(results).resolve() == RESULTS.resolve():
            took = f"~{minutes:g} min" if minutes >= 1 else f"~{60 * minutes:.0f} s"
            cmd = f"lbtheory sweep {sweep}" + (f" --profile {profile}" if profile else "")
            raise MissingResults(f"{p} not found: run `{cmd}` ({took} on 2 cores) to write it, "
                                 f"or pass --results DIR")
        out = "" if Path(results).resolve() == QUICK.resolve() else f" --out {results}"
        raise MissingResults(f"{p} not found: run `lbtheory sweep {sweep} --quick{out}` (a "
                             f"smoke run, seconds to minutes) to write it, or drop --results "
                             f"for the committed results")
    return paths


def save(fig, path: Path) -> Path:
    """Write ``fig`` with the one save path (:func:`lbtheory.io.save_figure_atomic`), close it
    (a notebook that imports a script then shows only what was saved) and print the path."""
    import matplotlib.pyplot as plt

    from lbtheory import io as lbio

    out = lbio.save_figure_atomic(fig, path)
    plt.close(fig)
    print(out)
    return out


def run(main: Callable[[Path, Path], object], doc: str | None) -> None:
    """Parse ``--results``/``--out``, choose the Agg backend, call ``main(results, out)`` and
    exit: 0, or 2 with one line when results are missing."""
    ap = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    ap.add_argument("--results", type=Path, default=RESULTS, metavar="DIR",
                    help="results root to read (default: the committed experiments/results; "
                         "out/results holds what --quick sweeps write)")
    ap.add_argument("--out", type=Path, default=OUT, metavar="DIR",
                    help="folder the PNGs are written to (default paper_figures/out)")
    a = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")  # a script writes files and shows no window
    try:
        main(a.results, a.out)
    except MissingResults as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.exit(0)
