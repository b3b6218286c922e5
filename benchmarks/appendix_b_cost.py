"""Cost of the Appendix-B sweeps from the cached cells, and the full protocol's extrapolated cost.

Reads the runner's ``wall_s`` of every cached cell of the ``reduced`` profile under
``experiments/results/appendix-b-*/cells/``, converts it into worker-seconds per simulated
policy-minute, and scales that rate to the ``full`` grid (DLB's protocol). Run it after
``lbtheory sweep appendix-b --profile reduced``:

    .venv/bin/python benchmarks/appendix_b_cost.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RES = ROOT / "experiments" / "results"


def _policy_runs(cfg: dict) -> int:
    """Policy-runs of one cell: its policies, plus exp 7's flow routers at each stepsize."""
    n = len(cfg["policies"])
    if cfg.get("eta_costs"):
        n += len(cfg["eta_costs"]) * (1 + len(cfg["eta_factors"]))
    return n


def main() -> None:
    sys.path.insert(0, str(ROOT / "experiments"))
    import appendix_b  # noqa: PLC0415 (an experiment file, not a package module)

    tot_full = tot_red = 0.0
    print(f"{'experiment':>24} {'cells':>5} {'wall s (sum)':>12} {'policy-runs':>11} "
          f"{'s per simulated policy-minute':>29} {'full: policy-runs':>17} "
          f"{'full: core-h (est)':>18}")
    for e in appendix_b.EXPERIMENTS:
        reduced = e.configs("reduced")
        cells = [json.loads(p.read_text()) for p in (RES / e.name / "cells").glob("*.json")]
        cells = [c for c in cells if c["config"] in reduced]
        if not cells:
            continue
        wall = sum(c["wall_s"] for c in cells)
        runs = sum(len(c["result"]["runs"]) for c in cells)
        rate = wall / sum(len(c["result"]["runs"]) * c["config"]["duration_s"] / 60 for c in cells)
        full = e.configs("full")
        full_s = rate * sum(_policy_runs(c) * c["duration_s"] / 60 for c in full)
        tot_full += full_s
        tot_red += wall
        print(f"{e.name:>24} {len(cells):5d} {wall:12.0f} {runs:11d} {rate:29.2f} "
              f"{sum(_policy_runs(c) for c in full):17d} {full_s / 3600:18.1f}")
    print(f"reduced total: {tot_red:.0f} worker-s; full protocol (est.): {tot_full / 3600:.1f} "
          f"worker-hours = {tot_full / 3600 / 2:.1f} h wall on 2 workers")


if __name__ == "__main__":
    main()
