"""Benchmark: cell-network equilibria, the default dual Newton route vs the CVXPY program,
measured in the same run (issue 13, part 3).

For full-mesh networks of n cells (``lbtheory.instances.full_mesh``, seed 0: M/M/1 cells, or
with ``--family mixed`` half softplus, half M/M/1 via ``random_network(softplus_share=0.5)``) and
the three programs (Wardrop = latency cost, system optimum = gradient cost, RIF):

* cold: build + solve, from the network object (``EquilibriumProblem(net, cost).solve()``);
* re-solve: the same problem object after a demand change (arrival rates × 1.02, × 0.98, ...),
  i.e. the warm start;
* the Definition-1 residual of every answer, and the route that produced it.

Routes: ``dual`` = the default (``solver=None``: dual Newton continuation + KKT polish, CVXPY
only as fallback); ``cvxpy`` = the CVXPY program with Clarabel (``solver="CLARABEL"``), the
previous default, run where ``--cvxpy-max-n`` allows (n = 300 takes minutes for RIF).
Ratios are cvxpy / dual of medians in this run.

Usage:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_equilibrium.py [--sizes 100 300 1000]
        [--repeat R] [--cvxpy-max-n 300] [--family mm1|mixed]
Prints one line per case and a markdown table.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from lbtheory.equilibrium import EquilibriumProblem  # noqa: E402
from lbtheory.errors import SolverError  # noqa: E402
from lbtheory.instances import full_mesh, random_network  # noqa: E402

COSTS = {"latency": "Wardrop", "gradient": "system optimum", "rif": "RIF"}


def network(n: int, family: str):
    """The benchmark network: full mesh of n cells (seed 0), M/M/1 or mixed models."""
    if family == "mixed":
        return random_network(n, seed=0, arc_prob=1.1, softplus_share=0.5)
    return full_mesh(n, seed=0, family=family)


def bench(n: int, cost: str, solver: str | None, repeat: int, family: str = "mm1") -> dict:
    """Median cold (build + solve) and warm re-solve times (s), worst residual, route."""
    cold, warm, resid, routes = [], [], [], set()
    for _ in range(repeat):
        net = network(n, family)
        t = time.perf_counter()
        try:
            prob = EquilibriumProblem(net, cost, solver=solver)
            res = prob.solve()
        except SolverError as exc:
            return {"error": str(exc)[:120]}
        cold.append(time.perf_counter() - t)
        resid.append(res.residual)
        routes.add(res.solver)
        for scale in (1.02, 0.98, 1.01):
            t = time.perf_counter()
            try:
                res = prob.solve(arrival_rates=net.arrival_rates * scale)
            except SolverError as exc:
                return {"cold_s": cold[-1], "error": "re-solve: " + str(exc)[:100]}
            warm.append(time.perf_counter() - t)
            resid.append(res.residual)
            routes.add(res.solver)
    return {"cold_s": float(np.median(cold)), "warm_s": float(np.median(warm)),
            "residual": float(max(resid)), "route": "+".join(sorted(routes))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cvxpy-max-n", type=int, default=300)
    ap.add_argument("--family", choices=["mm1", "softplus", "mixed"], default="mm1",
                    help="service models of the cells (default M/M/1)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    rows = []
    for n in args.sizes:
        for cost in COSTS:
            rep = args.repeat if n <= 100 else 1
            d = bench(n, cost, None, rep, args.family)
            c = bench(n, cost, "CLARABEL", rep, args.family) if n <= args.cvxpy_max_n else None
            rows.append((n, cost, d, c))
            print(f"n={n:5d} {args.family} {cost:9s} dual {d}  cvxpy {c}", flush=True)
    print("\n| n | program | dual cold (s) | dual re-solve (s) | dual residual | CVXPY cold (s) | "
          "CVXPY re-solve (s) | CVXPY residual | cold ratio | re-solve ratio |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, cost, d, c in rows:
        def cell(r, key, fmt):
            return "—" if r is None or key not in r else format(r[key], fmt)

        ratio = ratio_w = "—"
        if c is not None and "cold_s" in c and "cold_s" in d:
            ratio = f"{c['cold_s'] / d['cold_s']:.1f}×"
        if c is not None and "warm_s" in c and "warm_s" in d:
            ratio_w = f"{c['warm_s'] / d['warm_s']:.1f}×"
        cerr = "" if c is None or "error" not in c else f" (failed: {c['error']})"
        print(f"| {n} | {COSTS[cost]} | {cell(d, 'cold_s', '.3f')} | {cell(d, 'warm_s', '.3f')} "
              f"| {cell(d, 'residual', '.1e')} | {cell(c, 'cold_s', '.3f')}{cerr} | "
              f"{cell(c, 'warm_s', '.3f')} | {cell(c, 'residual', '.1e')} | {ratio} | "
              f"{ratio_w} |")


if __name__ == "__main__":
    main()
