"""Bush-based Algorithm B and gradient projection (lbtheory.games) versus bi-conjugate Frank–Wolfe.

Seeded synthetic networks of the sizes of Sioux Falls (24 nodes, 76 links, 24 zones), Anaheim
(416, 914, 38) and Chicago-Sketch (933, 2,950, 387) from
:func:`lbtheory.games.synthetic.synthetic_network`, or real TNTP files (``--tntp NET TRIPS``).
For each network and each solver of ``--solvers`` (``bush``:
:func:`lbtheory.games.bush_assignment`, ``gp``: :func:`lbtheory.games.gradient_projection`):
wall time and peak traced memory (tracemalloc, numpy buffers included) to relative gap 1e-6 and
1e-10, each target a separate cold solve after a warm-up that compiles/loads the numba kernels
(tracemalloc does not see buffers numba allocates itself, so the process's peak resident set
size after each network is printed too — cumulative, networks run in ascending size); then BFW
to 1e-6 with a time cap (``--bfw-cap`` s; when the cap is hit, the gap it reached is printed and
the ratio is a lower bound, marked ">"). Medians over ``--repeats`` runs; the ratio is BFW time
/ the first solver's time to 1e-6, measured in the same run. A solver that misses a target
within ``--time-limit`` s is flagged with the gap it reached. The load average is printed: the
machine may be shared.

Run: ``.venv/bin/python benchmarks/bench_tap.py`` (``--sizes sioux_falls anaheim`` for a subset,
``--solvers bush`` for one solver).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
import tracemalloc

from lbtheory.games import bush_assignment, frank_wolfe, gradient_projection
from lbtheory.games.synthetic import SIZES, synthetic_network
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


SOLVERS = {"bush": bush_assignment, "gp": gradient_projection}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--tntp", nargs=2, action="append", default=[], metavar=("NET", "TRIPS"))
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--bfw-cap", type=float, default=300.0, help="BFW time cap, seconds")
    ap.add_argument("--solvers", nargs="+", default=list(SOLVERS), choices=list(SOLVERS))
    ap.add_argument("--time-limit", type=float, default=600.0,
                    help="time cap of the bush/GP solves, seconds")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}, cpus: {os.cpu_count()}")
    for solve in SOLVERS.values():  # compile/load the kernels
        solve(synthetic_network("sioux_falls")[0], tol=1e-6)
    cases = [(f"synthetic {s} {SIZES[s]}", lambda s=s: synthetic_network(s, seed=0)[0])
             for s in args.sizes]
    cases += [(f"TNTP {net}", lambda n=net, t=trips: load_tntp_game(n, t))
              for net, trips in args.tntp]
    cols = [f"{name} {tol:g} s (MiB)" for name in args.solvers for tol in (1e-6, 1e-10)]
    first = args.solvers[0]
    print(f"| network | nodes/links/origins | {' | '.join(cols)} | {first} Beckmann at 1e-10 | "
          f"BFW 1e-6 s (gap reached) | BFW/{first} at 1e-6 | peak RSS MiB |")
    print("|---" * (len(cols) + 6) + "|")
    for name, make in cases:
        game = make()
        d = game.describe()
        row = {}
        for solver in args.solvers:
            for tol in (1e-6, 1e-10):
                runs = [measure(lambda tol=tol, g=game, f=SOLVERS[solver]: f(
                    g, tol=tol, throw=False, time_limit=args.time_limit)[0])
                    for _ in range(args.repeats)]
                sec = statistics.median(r[0] for r in runs)
                res = runs[-1][2]
                flag = "" if res.relative_gap <= tol else f" (gap {res.relative_gap:.2g}!)"
                row[solver, tol] = (sec, max(r[1] for r in runs), res, flag)
        bsec, _, (bres, _) = measure(lambda g=game: frank_wolfe(g, tol=1e-6, throw=False,
                                                                 time_limit=args.bfw_cap))
        capped = bres.relative_gap > 1e-6
        ratio = f"{'>' if capped else ''}{bsec / row[first, 1e-6][0]:.1f}x"
        cells = " | ".join(f"{row[k][0]:.2f} ({row[k][1]:.0f}){row[k][3]}"
                           for k in ((s, t) for s in args.solvers for t in (1e-6, 1e-10)))
        print(f"| {name} | {d['nodes']}/{d['arcs']}/{d['origins']} | {cells} | "
              f"{row[first, 1e-10][2].beckmann_objective:.10g} | "
              f"{bsec:.2f} ({bres.relative_gap:.2g}) | {ratio} | "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} |", flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
