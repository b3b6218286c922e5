"""Bush-based Algorithm B and gradient projection (lbtheory.games): time to a relative gap, the
system optimum against the equilibrium, one thread against two, peak memory, and bi-conjugate
Frank–Wolfe as a baseline.

Networks: seeded synthetic networks (:func:`lbtheory.games.synthetic.synthetic_network`) of the
classic TNTP sizes (Sioux Falls … Chicago-Sketch) and the regional sizes (``austin``: 7,466
nodes, 18,710 links, 1,117 zones; ``chicago_regional``: 12,982, 39,018, 1,790), or real TNTP
files (``--tntp NET TRIPS``). Each network is built once in this process and pickled; every
measured solve runs in a **fresh process** (numba kernels loaded and warmed on a small network
first), so its peak resident memory (``os.wait4``) is that solve's own: the game, the solver's
origin × arc arrays and numba's buffers, which tracemalloc does not see.

Bush solver (``--solvers bush``): one solve per objective × thread count to the tightest gap of
``--gaps``; the time to each looser gap is read from the same run's certificate history
(``state.history``: the same trajectory a cold solve to that gap follows, minus the final
independent check). Gradient projection (``gp``) has no history: one cold solve per gap.
Printed per network: seconds to each gap and iterations, peak RSS, and the ratios measured in
the same run — system optimum / Wardrop (same threads) and 1 thread / N threads (same
objective). Medians over ``--repeats``. BFW to 1e-6 with a time cap (``--bfw-cap``, 0 skips).
The load average is printed at the start, per network and at the end: the machine may be shared,
and a 2-thread speed-up needs 2 idle cores.

Run: ``.venv/bin/python benchmarks/bench_tap.py --sizes anaheim chicago_sketch austin
--threads 1 2 --repeats 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time

#: the child's program: warm the kernels, load the game, solve, print one JSON line
CHILD = r"""
import json, pickle, sys, time
from lbtheory.games import bush_assignment, gradient_projection, frank_wolfe
from lbtheory.games.synthetic import synthetic_network
path, solver, objective, threads, tol, limit, bfw = sys.argv[1:8]
threads, tol, limit, bfw = int(threads), float(tol), float(limit), float(bfw)
warm = synthetic_network("anaheim")[0]
bush_assignment(warm, tol=1e-6, threads=threads)
gradient_projection(warm, tol=1e-6)
with open(path, "rb") as fh:
    game = pickle.load(fh)
t = time.perf_counter()
if solver == "bfw":
    res = frank_wolfe(game, objective=objective, tol=tol, throw=False, time_limit=bfw)
    history = [[res.iterations, time.perf_counter() - t, res.relative_gap]]
elif solver == "gp":
    res = gradient_projection(game, objective=objective, tol=tol, throw=False,
                              time_limit=limit)
    history = [[res.iterations, time.perf_counter() - t, res.relative_gap]]
else:
    res = bush_assignment(game, objective=objective, tol=tol, threads=threads,
                          throw=False, time_limit=limit)
    history = [list(h) for h in res.state.history]
print(json.dumps({"seconds": time.perf_counter() - t, "history": history,
                  "iterations": res.iterations, "gap": res.relative_gap,
                  "beckmann": res.beckmann_objective, "tstt": res.total_travel_time}))
"""


def child(path: str, solver: str, objective: str, threads: int, tol: float, limit: float,
          bfw: float) -> dict:
    """One solve in a fresh process: its JSON, plus its peak RSS (MiB)."""
    cmd = [sys.executable, "-c", CHILD, path, solver, objective, str(threads), repr(tol),
           repr(limit), repr(bfw)]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        out.seek(0)
        err.seek(0)
        text, etext = out.read().decode(), err.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{solver} {objective} threads={threads} failed:\n{etext}")
    rep = json.loads(text.strip().splitlines()[-1])
    rep["rss"] = usage.ru_maxrss / 1024
    return rep


def time_to(rep: dict, gap: float) -> float | None:
    """Seconds until the history first shows a gap ≤ ``gap`` (None: never)."""
    return next((t for _, t, g in rep["history"] if g <= gap), None)


def fmt(sec: float | None) -> str:
    return "—" if sec is None else f"{sec:.2f}"


def main() -> None:
    from lbtheory.games.synthetic import SIZES, synthetic_network
    from lbtheory.games.tntp import load_tntp_game

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", default=["anaheim", "barcelona", "winnipeg",
                                                    "chicago_sketch"], choices=list(SIZES))
    ap.add_argument("--tntp", nargs=2, action="append", default=[], metavar=("NET", "TRIPS"))
    ap.add_argument("--solvers", nargs="+", default=["bush"], choices=["bush", "gp"])
    ap.add_argument("--objectives", nargs="+", default=["wardrop", "system_optimum"],
                    choices=["wardrop", "system_optimum"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1], help="thread counts")
    ap.add_argument("--gaps", nargs="+", type=float, default=[1e-6, 1e-10])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--bfw-cap", type=float, default=0.0, help="BFW time cap, s (0: skip)")
    ap.add_argument("--time-limit", type=float, default=1800.0, help="per solve, s")
    args = ap.parse_args()
    gaps = sorted(args.gaps, reverse=True)
    print(f"load average at start: {os.getloadavg()}, cpus: {os.cpu_count()}", flush=True)
    cases = [(f"synthetic {s}", lambda s=s: synthetic_network(s, seed=0)[0]) for s in args.sizes]
    cases += [(f"TNTP {os.path.basename(n)}", lambda n=n, t=t: load_tntp_game(n, t))
              for n, t in args.tntp]
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in cases:
            t = time.perf_counter()
            game = make()
            built = time.perf_counter() - t
            path = os.path.join(tmp, "game.pkl")
            with open(path, "wb") as fh:
                pickle.dump(game, fh)
            d = game.describe()
            print(f"\n## {name}: {d['nodes']} nodes, {d['arcs']} links, {d['origins']} origins, "
                  f"demand {d['total_demand']:.6g} (built in {built:.1f} s); load "
                  f"{os.getloadavg()[0]:.2f}", flush=True)
            print("| solver | objective | threads | " + " | ".join(f"s to {g:g}" for g in gaps)
                  + " | iterations | gap reached | Beckmann | peak RSS MiB |")
            print("|---" * (len(gaps) + 7) + "|")
            med: dict = {}
            for solver in args.solvers:
                for objective in args.objectives:
                    for threads in args.threads if solver == "bush" else [1]:
                        reps = []
                        for _ in range(args.repeats):
                            if solver == "gp":
                                reps.append([child(path, solver, objective, 1, g,
                                                   args.time_limit, 0) for g in gaps])
                            else:
                                reps.append([child(path, solver, objective, threads, gaps[-1],
                                                   args.time_limit, 0)])
                        times = [statistics.median(
                            [s for s in ((time_to(r[i if solver == "gp" else 0], g))
                                         for r in reps) if s is not None] or [float("nan")])
                            for i, g in enumerate(gaps)]
                        last = reps[-1][-1]
                        med[solver, objective, threads] = times
                        print(f"| {solver} | {objective} | {threads} | "
                              + " | ".join(fmt(s) for s in times)
                              + f" | {last['iterations']} | {last['gap']:.2g} | "
                              f"{last['beckmann']:.10g} | "
                              f"{max(r[-1]['rss'] for r in reps):.0f} |", flush=True)
            for (solver, objective, threads), times in med.items():
                ue = med.get((solver, "wardrop", threads))
                if objective == "system_optimum" and ue:
                    print(f"ratio {solver} system optimum / Wardrop, {threads} thread(s): "
                          + ", ".join(f"{g:g}: {s / u:.2f}x" for g, s, u in zip(gaps, times, ue)))
                one = med.get((solver, objective, 1))
                if threads > 1 and one:
                    print(f"speed-up {solver} {objective}, 1 → {threads} threads: "
                          + ", ".join(f"{g:g}: {u / s:.2f}x" for g, s, u in zip(gaps, times, one)))
            if args.bfw_cap > 0:
                rep = child(path, "bfw", "wardrop", 1, 1e-6, 0, args.bfw_cap)
                first = med.get((args.solvers[0], "wardrop", args.threads[0]))
                capped = rep["gap"] > 1e-6
                ratio = f"{'>' if capped else ''}{rep['seconds'] / first[0]:.1f}x" if first \
                    and gaps[0] == 1e-6 else "—"
                print(f"BFW to 1e-6: {rep['seconds']:.2f} s (gap {rep['gap']:.2g}"
                      f"{', capped' if capped else ''}); BFW / {args.solvers[0]} at 1e-6: "
                      f"{ratio}", flush=True)
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
