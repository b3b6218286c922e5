"""Gradient projection (lbtheory.games.tap) versus the project's bi-conjugate Frank–Wolfe.

Seeded synthetic networks of the sizes of Sioux Falls (24 nodes, 76 links, 24 zones), Anaheim
(416, 914, 38) and Chicago-Sketch (933, 2,950, 387) from
:func:`lbtheory.games.synthetic.synthetic_network`, or real TNTP files (``--tntp NET TRIPS``).
For each: wall time and peak traced memory (tracemalloc, numpy buffers included) to relative gap
1e-6 and 1e-10 with gradient projection (each target a separate cold solve after a warm-up that
compiles/loads the numba kernels; tracemalloc does not see buffers numba allocates itself, so the
process's peak resident set size after each network is printed too — cumulative, networks run
in ascending size), and BFW to 1e-6 with a time cap (``--bfw-cap`` s; when the cap
is hit, the gap it reached is printed and the ratio is a lower bound, marked ">"). Medians over
``--repeats`` runs; the ratio is BFW time / GP time to 1e-6, measured in the same run. The load
average is printed: the machine may be shared.

Run: ``.venv/bin/python benchmarks/bench_tap.py`` (``--sizes sioux_falls anaheim`` for a subset).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
import tracemalloc

from lbtheory.games import frank_wolfe
from lbtheory.games.synthetic import SIZES, synthetic_network
from lbtheory.games.tap import gradient_projection
from lbtheory.games.tntp import load_tntp_game


def measure(fn):
    """(seconds, peak MiB, value) of one call, memory traced with tracemalloc."""
    tracemalloc.start()
    t = time.perf_counter()
    out = fn()
    sec = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return sec, peak, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--tntp", nargs=2, action="append", default=[], metavar=("NET", "TRIPS"))
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--bfw-cap", type=float, default=300.0, help="BFW time cap, seconds")
    ap.add_argument("--time-limit", type=float, default=600.0, help="GP time cap, seconds")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}, cpus: {os.cpu_count()}")
    gradient_projection(synthetic_network("sioux_falls")[0], tol=1e-6)  # compile/load kernels
    cases = [(f"synthetic {s} {SIZES[s]}", lambda s=s: synthetic_network(s, seed=0)[0])
             for s in args.sizes]
    cases += [(f"TNTP {net}", lambda n=net, t=trips: load_tntp_game(n, t))
              for net, trips in args.tntp]
    print("| network | nodes/links/origins | GP 1e-6 s (MiB) | GP 1e-10 s (MiB) | "
          "GP Beckmann at 1e-10 | BFW 1e-6 s (gap reached) | BFW/GP at 1e-6 | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for name, make in cases:
        game = make()
        d = game.describe()
        row = {}
        for tol in (1e-6, 1e-10):
            runs = [measure(lambda tol=tol, g=game: gradient_projection(
                g, tol=tol, throw=False, time_limit=args.time_limit)[0])
                for _ in range(args.repeats)]
            sec = statistics.median(r[0] for r in runs)
            res = runs[-1][2]
            flag = "" if res.relative_gap <= tol else f" (gap {res.relative_gap:.2g}!)"
            row[tol] = (sec, max(r[1] for r in runs), res, flag)
        bsec, _, (bres, _) = measure(lambda g=game: frank_wolfe(g, tol=1e-6,
                                                                 time_limit=args.bfw_cap))
        capped = bres.relative_gap > 1e-6
        gp6 = row[1e-6][0]
        ratio = f"{'>' if capped else ''}{bsec / gp6:.1f}x"
        print(f"| {name} | {d['nodes']}/{d['arcs']}/{d['origins']} | "
              f"{gp6:.2f} ({row[1e-6][1]:.0f}){row[1e-6][3]} | "
              f"{row[1e-10][0]:.2f} ({row[1e-10][1]:.0f}){row[1e-10][3]} | "
              f"{row[1e-10][2].beckmann_objective:.10g} | "
              f"{bsec:.2f} ({bres.relative_gap:.2g}) | {ratio} | "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} |", flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
