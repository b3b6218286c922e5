"""Benchmark: CVXPY equilibria of full-mesh cell networks vs baselines measured in the same run.

For n = 10, 100, 300 cells (full mesh, MM1 and softplus service models) and the system optimum
(gradient cost) and Wardrop equilibrium (latency cost):

* lbtheory: build + solve (first call, includes CVXPY's DPP compilation) and DPP re-solve with new
  arrival rates; the Definition-1 residual reached;
* baseline 1: scipy ``minimize`` (SLSQP, analytic gradient) on the same potential, arc-flow form
  (only where it has ≤ 2,000 variables: SLSQP is dense);
* baseline 2: bi-conjugate Frank–Wolfe (``lbtheory.games.frank_wolfe``) on the equivalent routing
  game: time to relative gap 1e-3 and 1e-5 (or the gap reached within its time limit).

Usage:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_equilibrium.py [--quick] [--repeat R]
Prints one line per case and a markdown table (medians and ratios).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.optimize import minimize  # noqa: E402

from lbtheory.costs import CostKind, flow_cost, flow_potential  # noqa: E402
from lbtheory.equilibrium import EquilibriumProblem  # noqa: E402
from lbtheory.instances import full_mesh  # noqa: E402
from lbtheory.stats import median_wall_time  # noqa: E402


def bench_lbtheory(net, cost: str, repeat: int) -> dict:
    def build_solve():
        prob = EquilibriumProblem(net, cost)
        return prob, prob.solve()

    t_first, (prob, res) = median_wall_time(build_solve, repeat)
    scales = iter(np.linspace(0.8, 1.0, 3 * repeat + 3))
    t_re, res2 = median_wall_time(
        lambda: prob.solve(arrival_rates=net.arrival_rates * next(scales)), max(3, repeat))
    return {"first_s": t_first, "resolve_s": t_re, "residual": max(res.residual, res2.residual),
            "tlr": res.total_latency_rate}


def bench_slsqp(net, cost: str) -> dict | None:
    src, dst = net.arc_pairs
    if len(src) > 2000:
        return None
    kind = CostKind.parse(cost)
    lam = net.arrival_rates
    g = 2.0 * net.delays[src, dst]

    def psi(f):
        z = np.bincount(dst, f, net.n)
        if np.any(z >= net.max_rates):
            return 1e12
        return float(sum(flow_potential(kind, net.services[j], z[j]) for j in range(net.n))
                     + g @ f)

    def grad(f):
        z = np.minimum(np.bincount(dst, f, net.n), net.max_rates * (1 - 1e-12))
        fc = np.array([float(flow_cost(kind, net.services[j], z[j])) for j in range(net.n)])
        return fc[dst] + g

    # start: proportional to capacity (feasible at the generator's utilisation)
    share = net.max_rates[dst] * net.adjacency[src, dst]
    f0 = lam[src] * share / np.bincount(src, share, net.n)[src]
    cons = [{"type": "eq", "fun": (lambda f, i=i: f[src == i].sum() - lam[i]),
             "jac": (lambda f, i=i: (src == i).astype(float))} for i in range(net.n)]
    t = time.perf_counter()
    res = minimize(psi, f0, jac=grad, constraints=cons, bounds=[(0, None)] * len(src),
                   method="SLSQP", options={"ftol": 1e-12, "maxiter": 2000})
    elapsed = time.perf_counter() - t
    z = np.bincount(dst, res.x, net.n)
    return {"time_s": elapsed, "success": bool(res.success), "tlr_z": z}


def bench_fw(net, cost: str, time_limit: float) -> dict | None:
    try:
        from lbtheory.games import frank_wolfe, to_routing_game
    except ImportError:  # pragma: no cover
        return None
    game = to_routing_game(net, cost=cost)
    # feasible start (the free-flow all-or-nothing start overloads cells): capacity-proportional
    # split, utilisation = Λ/Σμ̄ < 1 in every cell of a full mesh. Game arcs: the network's arcs
    # of sources with arrivals, then one congestion arc per cell (to_routing_game's layout).
    lam = net.arrival_rates
    srcs = np.flatnonzero(lam > 0)
    share = net.max_rates / net.max_rates.sum()
    start = np.zeros((len(srcs), game.n_arcs))
    k_of = {int(i): k for k, i in enumerate(srcs)}
    a_idx = 0
    for a in net.arcs:
        i, j = net.index(a.source), net.index(a.target)
        if lam[i] > 0:
            start[k_of[i], a_idx] = lam[i] * share[j]
            start[k_of[i], game.n_arcs - net.n + j] += lam[i] * share[j]
            a_idx += 1
    t = time.perf_counter()
    _res, trace = frank_wolfe(game, objective="wardrop", method="bfw", tol=1e-5,
                              time_limit=time_limit, start=start)
    total = time.perf_counter() - t
    secs, gaps = np.asarray(trace.seconds), np.asarray(trace.relative_gap)

    def first(th):
        hit = np.flatnonzero(gaps <= th)
        return float(secs[hit[0]]) if len(hit) else None

    return {"t_1e-3": first(1e-3), "t_1e-5": first(1e-5), "best_gap": float(gaps.min()),
            "total_s": total}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="n = 10, 100 only")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fw-time", type=float, default=20.0, help="Frank–Wolfe time limit (s)")
    ap.add_argument("--softplus-max-n", type=int, default=300,
                    help="skip softplus networks larger than this")
    ap.add_argument("--softplus-300", action="store_true",
                    help="also run softplus at n = 300 (several minutes)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    sizes = {"mm1": (10, 100) if args.quick else (10, 100, 300),
             "softplus": (10, 100) if args.quick or not args.softplus_300 else (10, 100, 300)}
    sizes["softplus"] = tuple(n for n in sizes["softplus"] if n <= args.softplus_max_n)
    rows = []
    for family in ("mm1", "softplus"):
        for n in sizes[family]:
            net = full_mesh(n, seed=0, family=family)
            for cost in ("gradient", "latency"):
                rep = 1 if n >= 300 else args.repeat
                lb = bench_lbtheory(net, cost, rep)
                sq = bench_slsqp(net, cost)
                fw = bench_fw(net, cost, args.fw_time)
                row = {"family": family, "n": n, "cost": cost, **lb,
                       "slsqp_s": None if sq is None else sq["time_s"],
                       "fw": fw}
                rows.append(row)
                print(f"{family:8s} n={n:4d} {cost:8s} first {lb['first_s']:.3f}s "
                      f"re-solve {lb['resolve_s']:.3f}s residual {lb['residual']:.1e}  "
                      f"SLSQP {row['slsqp_s'] if sq is None else round(sq['time_s'], 3)}s  "
                      f"FW {fw}", flush=True)
    print("\n| model | n | program | build+solve (s) | DPP re-solve (s) | residual | "
          "SLSQP (s) | SLSQP / lbtheory | BFW to 1e-3 (s) | BFW to 1e-5 (s) | BFW best gap |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        prog = "system optimum" if r["cost"] == "gradient" else "Wardrop"
        sl = "—" if r["slsqp_s"] is None else f"{r['slsqp_s']:.3f}"
        ratio = "—" if r["slsqp_s"] is None else f"{r['slsqp_s'] / r['first_s']:.1f}×"
        fw = r["fw"] or {}

        def fmt(v):
            return "not reached" if v is None else f"{v:.3f}"

        print(f"| {r['family']} | {r['n']} | {prog} | {r['first_s']:.3f} | {r['resolve_s']:.3f} "
              f"| {r['residual']:.1e} | {sl} | {ratio} | {fmt(fw.get('t_1e-3'))} | "
              f"{fmt(fw.get('t_1e-5'))} | {fw.get('best_gap', float('nan')):.1e} |")


if __name__ == "__main__":
    main()
