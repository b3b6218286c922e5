"""What DLB's full Appendix-B protocol (``lbtheory sweep appendix-b --profile full``) costs.

A timed partial run: ``--per-experiment`` cells of each experiment's ``full`` grid (drawn with a
seeded generator) run exactly as the sweep runs them (:func:`appendix_b_cell`, 600 simulated s
with issue 25's protocol — fitted latency models, time-varying arrivals, error aversion —, every
policy, on the compiled engine, the default). The full grid's cost is then estimated by
a ratio estimator: seconds per expected request-run (the expected Poisson arrivals of a cell's
scenario × its policy runs, computed for every cell of the grid without simulating) measured on
each experiment's sample, times that experiment's total; the spread of the ratio within each
sample gives the uncertainty (± 1.96 standard errors, combined over experiments). Printed as
Markdown, with the machine's load average (other processes share the cores: the per-cell times
are wall seconds under that load).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/appendix_b_cost.py             # ~5 min
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/appendix_b_cost.py --per-experiment 1
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _policy_runs(cfg: dict) -> int:
    """Policy-runs of one cell: its policies, plus exp 7's flow routers at each stepsize."""
    n = len(cfg["policies"])
    if cfg.get("eta_costs"):
        n += len(cfg["eta_costs"]) * (1 + len(cfg["eta_factors"]))
    return n


def _work(cfg: dict) -> float:
    """Expected request-runs of a cell (expected arrivals × policy runs)."""
    from _appendix_b_protocol import cell_scenario, check_cell_config

    full = check_cell_config(cfg)
    return cell_scenario(full).expected_requests(float(full["duration_s"])) * _policy_runs(full)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-experiment", type=int, default=2, help="cells timed per experiment")
    ap.add_argument("--seed", type=int, default=21, help="seed of the sample of cells")
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 16],
                    help="worker counts to convert worker-hours to wall hours")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "experiments"))
    import appendix_b  # noqa: PLC0415 (an experiment file, not a package module)
    from _appendix_b_protocol import appendix_b_cell

    rng = np.random.default_rng(args.seed)
    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| experiment | full cells | policy-runs | expected request-runs | sampled cells | "
          "sample wall s | s per M request-runs | est. worker-h |")
    print("|---|---|---|---|---|---|---|---|")
    appendix_b_cell({"scenario": 0, "n_cells": 2, "duration_s": 1.0, "warmup_s": 0.0,
                     "policies": ["rand", "flow-grad", "mnlb"]})  # compile / load caches
    total = var = 0.0
    tot_work, tot_runs, tot_cells, longest, sampled = 0.0, 0, 0, 0.0, 0
    for e in appendix_b.EXPERIMENTS:
        full = e.configs("full")
        work = np.array([_work(c) for c in full])
        pick = rng.choice(len(full), size=min(args.per_experiment, len(full)), replace=False)
        walls = []
        for k in pick:
            t0 = time.perf_counter()
            appendix_b_cell(full[k])
            walls.append(time.perf_counter() - t0)
        r = [w / work[k] for w, k in zip(walls, pick)]
        est = statistics.mean(r) * work.sum()
        if len(r) > 1:
            var += (statistics.stdev(r) / math.sqrt(len(r)) * work.sum()) ** 2
        runs = sum(_policy_runs(c) for c in full)
        total += est
        longest = max(longest, statistics.mean(r) * work.max())
        tot_work += work.sum()
        tot_runs += runs
        tot_cells += len(full)
        sampled += len(pick)
        print(f"| {e.name} | {len(full)} | {runs:,} | {work.sum() / 1e6:,.0f} M | {len(pick)} | "
              f"{sum(walls):.1f} | {1e6 * statistics.mean(r):.2f} | {est / 3600:.2f} |")
    half = 1.96 * math.sqrt(var)
    print(f"| **all** | {tot_cells:,} | {tot_runs:,} | {tot_work / 1e6:,.0f} M | {sampled} | | "
          f"{1e6 * total / tot_work:.2f} | **{total / 3600:.2f} ± {half / 3600:.2f}** |")
    print(f"\nload average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"full protocol ≈ {total / 3600:.2f} ± {half / 3600:.2f} worker-hours; longest cell "
          f"≈ {longest / 60:.1f} min")
    for w in args.workers:
        wall = max(total / w, longest)
        print(f"  on {w} workers: ≈ {wall / 3600:.2f} h wall (cells are independent; the "
              f"longest cell bounds it)")


if __name__ == "__main__":
    main()
