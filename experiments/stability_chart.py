"""Stability chart of flow routing: stepsize vs mean network delay (issue 5, THEORY §7.5–7.6).

Run:  .venv/bin/python experiments/stability_chart.py [--quick]

Writes ``experiments/results/stability_chart/stability_chart.json`` (atomically) with its config
and :func:`lbtheory.io.run_manifest`:

* ``symmetric``: the §7.5 two-cell family (μ̄ = 10, K = 5, Λ = 12, gradient cost) over one-way
  delays τ — exact critical stepsize (collocation + Newton), closed form θ tan θ = aT, the
  sufficient/necessary bounds a/T ≤ K_crit ≤ (π/2)a/T, the empirical rule, and simulated fluid
  runs at 0.8× and 1.25× the threshold (measured envelope rate vs the rightmost root).
* ``scaled``: one random 4-cell network with all delays scaled by s ∈ [0.1, 10] — exact threshold
  vs the rate-weighted mean delay.
* ``practice``: DLB's practice η = κ / mean delay, κ calibrated at the reference delay to half the
  exact threshold, checked against the exact boundary on both families.
* ``survey``: random topologies — how often the empirical rule stays below the exact threshold
  (THEORY says it held in ~210 instances but is unproven; counter-examples are listed).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

# one BLAS thread: the eigenproblems are small, and threaded OpenBLAS on a shared machine is
# up to ~100x slower (measured); must be set before numpy is imported
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402
import numpy as np  # noqa: E402

from lbtheory.errors import LBTheoryError  # noqa: E402
from lbtheory.instances import random_network, symmetric_two_cell  # noqa: E402
from lbtheory.io import run_manifest, write_json_atomic  # noqa: E402
from lbtheory.models import MM1Latency  # noqa: E402
from lbtheory.network import Arc, Cell, CellNetwork  # noqa: E402
from lbtheory.stability import (  # noqa: E402
    critical_stepsize,
    empirical_check,
    symmetric_threshold,
    theorem1_form,
)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "stability_chart"


def symmetric_family(taus: list[float], sim_taus: list[float], factors: list[float]) -> list:
    rows = []
    for tau in taus:
        net = symmetric_two_cell(delay=tau)
        cr = critical_stepsize(net, "gradient")
        closed = symmetric_threshold(net, cr.linearisation.point)
        row = {"tau": tau, "mean_delay": tau, "critical": cr.critical_stepsize,
               "closed_form": closed.eta_crit, "lower_bound": closed.eta_lower,
               "upper_bound": closed.eta_upper, "rule": cr.empirical_rule,
               "period": cr.period, "simulated": []}
        if tau in sim_taus:
            for f in factors:
                t1 = float(min(400.0, max(80.0, 30 * cr.period)))
                ec = empirical_check(net, "gradient", f * cr.critical_stepsize,
                                     linearisation=cr.linearisation, t1=round(t1),
                                     perturbation=1e-3)
                row["simulated"].append({"factor": f, "stepsize": ec.stepsize,
                                         "predicted_rate": ec.predicted_rate,
                                         "measured_rate": ec.measured_rate,
                                         "verdict": ec.verdict, "t1": round(t1)})
        rows.append(row)
        print(f"tau={tau:6.3f}  eta_crit={cr.critical_stepsize:.6g}  closed={closed.eta_crit:.6g}"
              f"  rule={cr.empirical_rule:.6g}  sims={[s['verdict'] for s in row['simulated']]}")
    return rows


def scaled_family(seed: int, scales: np.ndarray) -> list:
    base = random_network(np.random.default_rng(seed), 4, utilisation=0.8, arc_prob=0.7,
                          max_delay=0.1)
    rows = []
    for s in scales:
        net = base.with_delays(base.delays * s)
        try:
            cr = critical_stepsize(net, "gradient")
        except LBTheoryError as exc:
            rows.append({"scale": float(s), "error": str(exc)})
            continue
        th = theorem1_form(net, cr.linearisation.point)
        rows.append({"scale": float(s), "mean_delay": th.rate_weighted_delay,
                     "max_delay": th.max_delay, "critical": cr.critical_stepsize,
                     "rule": cr.empirical_rule, "period": cr.period})
    return rows


def practice(rows: list, ref_index: int) -> dict:
    """η = κ/mean delay, κ = half the exact threshold × mean delay at the reference point."""
    ok = [r for r in rows if "critical" in r and math.isfinite(r["critical"])]
    ref = ok[ref_index]
    kappa = 0.5 * ref["critical"] * ref["mean_delay"]
    ratios = [kappa / r["mean_delay"] / r["critical"] for r in ok]
    return {"kappa": kappa, "reference_mean_delay": ref["mean_delay"],
            "mean_delay": [r["mean_delay"] for r in ok], "ratio_to_critical": ratios,
            "always_below": bool(max(ratios) < 1.0)}


def bipartite(rng: np.random.Generator) -> CellNetwork:
    """THEORY §7.6-style adversarial instance: 1–2 frontends, 2 hyperbolic backends, one-way
    delays log-uniform in [1 ms, 300 ms], utilisation U[0.3, 0.97]."""
    backs = [MM1Latency(rng.uniform(5, 50), rng.uniform(0.5, 10)) for _ in range(2)]
    nf = int(rng.integers(1, 3))
    total = rng.uniform(0.3, 0.97) * sum(b.capacity for b in backs)
    share = rng.dirichlet(np.ones(nf))
    cells = [Cell(f"b{j}", 1, 0.0, b) for j, b in enumerate(backs)]
    cells += [Cell(f"f{i}", 1, float(total * share[i]), backs[0]) for i in range(nf)]
    arcs = [Arc(f"f{i}", f"b{j}", float(np.exp(rng.uniform(np.log(1e-3), np.log(0.3)))))
            for i in range(nf) for j in range(2)]
    return CellNetwork(cells, arcs)


def survey(costs: dict[str, int]) -> dict:
    out = {}
    for name, count in costs.items():
        cost = name.split("-")[0]
        ratios, skipped, counter = [], [], []
        for seed in range(count):
            rng = np.random.default_rng(1000 + seed)
            n = int(rng.integers(2, 6))
            if name.endswith("bipartite"):
                net = bipartite(rng)
            else:
                net = random_network(rng, n, utilisation=float(rng.uniform(0.5, 0.95)),
                                     arc_prob=0.6, max_delay=0.2)
            try:
                cr = critical_stepsize(net, cost)
            except LBTheoryError as exc:
                skipped.append({"seed": 1000 + seed, "reason": type(exc).__name__})
                continue
            if not math.isfinite(cr.critical_stepsize):
                skipped.append({"seed": 1000 + seed, "reason": "stable for every stepsize"})
                continue
            ratios.append(cr.rule_ratio)
            if cr.rule_ratio <= 1.0:
                counter.append({"seed": 1000 + seed, "n": n, "ratio": cr.rule_ratio,
                                "critical": cr.critical_stepsize, "rule": cr.empirical_rule})
        out[name] = {"instances": len(ratios), "rule_below_critical": int(np.sum(
            np.array(ratios) > 1.0)), "min_ratio": float(min(ratios)) if ratios else None,
            "median_ratio": float(np.median(ratios)) if ratios else None, "ratios": ratios,
            "counter_examples": counter, "skipped": skipped}
        print(f"survey {name}: rule below exact threshold in {out[name]['rule_below_critical']}"
              f"/{len(ratios)} instances, min critical/rule {out[name]['min_ratio']}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer delays, runs and instances")
    args = ap.parse_args()
    jax.config.update("jax_enable_x64", True)  # near-critical rates need float64 fluid runs
    t0 = time.perf_counter()
    taus = [0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5]
    sim_taus = [0.01, 0.05, 0.2] if not args.quick else [0.05]
    factors = [0.8, 1.25]
    scales = np.geomspace(0.1, 10.0, 5 if args.quick else 9)
    costs = {"gradient": 12, "gradient-bipartite": 12, "latency": 6, "rif": 6} if args.quick \
        else {"gradient": 80, "gradient-bipartite": 80, "latency": 40, "rif": 40}
    sym = symmetric_family(taus, sim_taus, factors)
    scaled = scaled_family(7, scales)
    conf = {"symmetric": {"capacity": 10.0, "K": 5.0, "total_rate": 12.0, "taus": taus,
                          "simulated_taus": sim_taus, "factors": factors, "dt": 1e-3,
                          "perturbation": 1e-3},
            "scaled": {"seed": 7, "n": 4, "utilisation": 0.8, "scales": scales.tolist()},
            "survey": {"costs": costs, "seeds": "1000 + k", "n": "U{2..5}",
                       "utilisation": "U[0.5, 0.95]", "max_delay": 0.2,
                       "bipartite": "1-2 frontends, 2 hyperbolic backends (capacity U[5,50], "
                                    "K U[0.5,10]), delays log-U[1 ms, 300 ms], util U[0.3,0.97]"},
            "cost": "gradient", "quick": args.quick}
    result = {"config": conf, "manifest": run_manifest(conf, seed=7),
              "symmetric": sym, "scaled": scaled,
              "practice": {"symmetric": practice(sym, taus.index(0.05)),
                           "scaled": practice(scaled, len(scales) // 2)},
              "survey": survey(costs), "elapsed_s": None}
    result["elapsed_s"] = time.perf_counter() - t0
    for k, p in result["practice"].items():
        print(f"DLB practice ({k}): eta = {p['kappa']:.4g}/mean delay, practice/critical in "
              f"[{min(p['ratio_to_critical']):.3f}, {max(p['ratio_to_critical']):.3f}]")
    write_json_atomic(OUT / "stability_chart.json", result)
    print(f"wrote {OUT / 'stability_chart.json'} in {result['elapsed_s']:.0f} s")


if __name__ == "__main__":
    main()
