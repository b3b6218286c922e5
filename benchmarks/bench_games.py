"""Routing-game solvers: CVXPY (Clarabel) versus Frank–Wolfe baselines (FW, CFW, BFW).

Time to relative gap 1e-4 and 1e-6 on the Braess example and on seeded synthetic BPR grids of
growing size (the 4 × 6 grid with 24 origins has Sioux Falls' size: 24 nodes, 76 arcs). CVXPY
solves once at its own accuracy (no FW polish): its time counts for a target gap if the gap it
reached is below it. Medians over ``--repeats`` runs; ratios are against CVXPY in the same run.

Run: ``.venv/bin/python benchmarks/bench_games.py`` (``--quick`` for the two small cases).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from lbtheory.equilibrium import solve_wardrop
from lbtheory.games import FWMethod, frank_wolfe, grid_game
from lbtheory.games.tntp import load_tntp_game

ROOT = Path(__file__).resolve().parents[1]
TARGETS = (1e-4, 1e-6)


def cases(quick: bool):
    ex = ROOT / "examples" / "tntp" / "Braess-Example"
    yield "braess (5 arcs)", load_tntp_game(ex / "Braess_net.tntp", ex / "Braess_trips.tntp")
    yield "grid 4x6, 24 origins (Sioux-Falls size)", grid_game(4, 6, seed=0)
    if quick:
        return
    yield "grid 10x10, 20 origins", grid_game(10, 10, seed=0, n_origins=20)
    yield "grid 20x20, 10 origins", grid_game(20, 20, seed=0, n_origins=10)
    yield "grid 25x25, 10 origins", grid_game(25, 25, seed=0, n_origins=10)


def time_to(trace, target: float) -> float:
    hit = np.flatnonzero(trace.relative_gap <= target)
    return float(trace.seconds[hit[0]]) if hit.size else float("nan")


def run_case(game, repeats: int, limit: float) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = solve_wardrop(game, polish=False)
        dt = time.perf_counter() - t0
        for tgt in TARGETS:
            out.setdefault(f"cvxpy@{tgt:g}", []).append(dt if res.relative_gap <= tgt
                                                        else float("nan"))
        for m in FWMethod:
            tr = frank_wolfe(game, method=m, tol=min(TARGETS), throw=False,
                             time_limit=limit).stats
            for tgt in TARGETS:
                out.setdefault(f"{m}@{tgt:g}", []).append(time_to(tr, tgt))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=float, default=20.0, help="FW time limit per run (s)")
    args = ap.parse_args()
    print(f"{'case':42} {'target':>7} {'solver':>6} {'median s':>10} {'ratio':>8}")
    for name, game in cases(args.quick):
        reps = args.repeats if game.n_arcs < 500 else 1
        res = run_case(game, reps, args.limit)
        for tgt in TARGETS:
            base = statistics.median(res[f"cvxpy@{tgt:g}"])
            for m in ("cvxpy", *FWMethod):
                med = statistics.median(res[f"{m}@{tgt:g}"])
                txt = f"{med:10.3f}" if np.isfinite(med) else f"{'>' + str(args.limit):>10}"
                ratio = med / base if np.isfinite(med) and np.isfinite(base) else float("nan")
                print(f"{name:42} {tgt:7.0e} {m:>6} {txt} {ratio:8.2f}")
        print(f"  ({game.n_arcs} arcs, {len(game.origins)} origins, {reps} repeat(s))")


if __name__ == "__main__":
    main()
