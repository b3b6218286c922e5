"""Stability chart of flow routing: stepsize vs mean network delay (issue 5, THEORY §7.5–7.6).

Run:  .venv/bin/lbtheory sweep stability-chart [--quick]
      (or .venv/bin/python experiments/stability_chart.py [--quick])

One sweep cell per symmetric delay, per delay scale, and per random survey instance (cached,
resumable; see :mod:`lbtheory.sweep`). Writes
``experiments/results/stability-chart/stability_chart.json`` (atomically) with its config and
:func:`lbtheory.io.run_manifest`:

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

import math
import os
import sys
from pathlib import Path

# one BLAS thread: the eigenproblems are small, and threaded OpenBLAS on a shared machine is
# up to ~100x slower (measured); must be set before numpy is imported (Dask workers set it too)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from lbtheory.io import run_manifest, write_json_atomic  # noqa: E402
from lbtheory.models import MM1Latency  # noqa: E402
from lbtheory.network import Arc, Cell, CellNetwork  # noqa: E402
from lbtheory.sweep import Experiment, script_main  # noqa: E402

TAUS = [0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5]
FACTORS = [0.8, 1.25]
SCALED_SEED = 7
PROFILES = {  # simulated taus, number of delay scales, survey instances per cost family
    "quick": ([0.05], 5, {"gradient": 12, "gradient-bipartite": 12, "latency": 6, "rif": 6}),
    "full": ([0.01, 0.05, 0.2], 9,
             {"gradient": 80, "gradient-bipartite": 80, "latency": 40, "rif": 40}),
}


def grid(profile: str) -> list[dict]:
    """Cells: ``symmetric`` per τ, ``scaled`` per delay scale, ``survey`` per (family, seed)."""
    sim_taus, n_scales, costs = PROFILES[profile]
    cells = [{"part": "symmetric", "tau": tau,
              "factors": FACTORS if tau in sim_taus else []} for tau in TAUS]
    cells += [{"part": "scaled", "seed": SCALED_SEED, "scale": float(s)}
              for s in np.geomspace(0.1, 10.0, n_scales)]
    cells += [{"part": "survey", "family": name, "seed": 1000 + k}
              for name, count in costs.items() for k in range(count)]
    return cells


def cell(config: dict) -> dict:
    """One cell of :func:`grid` (float64 JAX, scoped: no global setting is changed)."""
    import jax

    with jax.enable_x64(True):  # near-critical rates need float64 fluid runs
        part = config["part"]
        if part == "symmetric":
            return symmetric_row(config["tau"], config["factors"])
        if part == "scaled":
            return scaled_row(config["seed"], config["scale"])
        return survey_row(config["family"], config["seed"])


def symmetric_row(tau: float, factors: list[float]) -> dict:
    """Exact, closed-form and rule thresholds at one-way delay ``tau`` (s); fluid runs at
    ``factors`` × the threshold."""
    from lbtheory.instances import symmetric_two_cell
    from lbtheory.stability import critical_stepsize, empirical_check, symmetric_threshold

    net = symmetric_two_cell(delay=tau)
    cr = critical_stepsize(net, "gradient")
    closed = symmetric_threshold(net, cr.linearisation.point)
    row = {"tau": tau, "mean_delay": tau, "critical": cr.critical_stepsize,
           "closed_form": closed.eta_crit, "lower_bound": closed.eta_lower,
           "upper_bound": closed.eta_upper, "rule": cr.empirical_rule,
           "period": cr.period, "simulated": []}
    for f in factors:
        t1 = float(min(400.0, max(80.0, 30 * cr.period)))
        ec = empirical_check(net, "gradient", f * cr.critical_stepsize,
                             linearisation=cr.linearisation, t1=round(t1), perturbation=1e-3)
        row["simulated"].append({"factor": f, "stepsize": ec.stepsize,
                                 "predicted_rate": ec.predicted_rate,
                                 "measured_rate": ec.measured_rate,
                                 "verdict": ec.verdict, "t1": round(t1)})
    return row


def scaled_row(seed: int, scale: float) -> dict:
    """Exact threshold of the random 4-cell network ``seed`` with every delay × ``scale``."""
    from lbtheory.errors import LBTheoryError
    from lbtheory.instances import random_network
    from lbtheory.stability import critical_stepsize, theorem1_form

    base = random_network(4, seed=seed, utilisation=0.8, arc_prob=0.7,
                          max_delay=0.1)
    net = base.with_delays(base.delays * scale)
    try:
        cr = critical_stepsize(net, "gradient")
    except LBTheoryError as exc:
        return {"scale": scale, "error": str(exc)}
    th = theorem1_form(net, cr.linearisation.point)
    return {"scale": scale, "mean_delay": th.rate_weighted_delay, "max_delay": th.max_delay,
            "critical": cr.critical_stepsize, "rule": cr.empirical_rule, "period": cr.period}


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


def survey_row(family: str, seed: int) -> dict:
    """One random instance of survey ``family``: critical/rule ratio, or why it was skipped."""
    from lbtheory.errors import LBTheoryError
    from lbtheory.instances import random_network
    from lbtheory.stability import critical_stepsize

    cost = family.split("-")[0]
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 6))
    if family.endswith("bipartite"):
        net = bipartite(rng)
    else:
        net = random_network(n, seed=rng, utilisation=float(rng.uniform(0.5, 0.95)), arc_prob=0.6,
                             max_delay=0.2)
    try:
        cr = critical_stepsize(net, cost)
    except LBTheoryError as exc:
        return {"seed": seed, "skipped": type(exc).__name__}
    if not math.isfinite(cr.critical_stepsize):
        return {"seed": seed, "skipped": "stable for every stepsize"}
    return {"seed": seed, "n": n, "ratio": cr.rule_ratio, "critical": cr.critical_stepsize,
            "rule": cr.empirical_rule}


def survey(rows: list[dict], costs: dict[str, int]) -> dict:
    """Per family: how often the rule is below the exact threshold, and the counter-examples."""
    out = {}
    for name in costs:
        mine = [r for c, r in rows if c["family"] == name]
        ratios = [r["ratio"] for r in mine if "skipped" not in r]
        skipped = [{"seed": r["seed"], "reason": r["skipped"]} for r in mine if "skipped" in r]
        counter = [{k: r[k] for k in ("seed", "n", "ratio", "critical", "rule")}
                   for r in mine if "skipped" not in r and r["ratio"] <= 1.0]
        out[name] = {"instances": len(ratios), "rule_below_critical": int(np.sum(
            np.array(ratios) > 1.0)), "min_ratio": float(min(ratios)) if ratios else None,
            "median_ratio": float(np.median(ratios)) if ratios else None, "ratios": ratios,
            "counter_examples": counter, "skipped": skipped}
    return out


def collect(rows: list, out_dir: Path, profile: str) -> None:
    """Assemble ``stability_chart.json`` from the cells (same keys as before the runner)."""
    sim_taus, n_scales, costs = PROFILES[profile]
    sym = [r for c, r in rows if c["part"] == "symmetric"]
    scaled = [r for c, r in rows if c["part"] == "scaled"]
    scales = [c["scale"] for c, _ in rows if c["part"] == "scaled"]
    conf = {"symmetric": {"capacity": 10.0, "K": 5.0, "total_rate": 12.0, "taus": TAUS,
                          "simulated_taus": sim_taus, "factors": FACTORS, "dt": 1e-3,
                          "perturbation": 1e-3},
            "scaled": {"seed": SCALED_SEED, "n": 4, "utilisation": 0.8, "scales": scales},
            "survey": {"costs": costs, "seeds": "1000 + k", "n": "U{2..5}",
                       "utilisation": "U[0.5, 0.95]", "max_delay": 0.2,
                       "bipartite": "1-2 frontends, 2 hyperbolic backends (capacity U[5,50], "
                                    "K U[0.5,10]), delays log-U[1 ms, 300 ms], util U[0.3,0.97]"},
            "cost": "gradient", "quick": profile == "quick", "profile": profile}
    result = {"config": conf, "manifest": run_manifest(conf, seed=SCALED_SEED),
              "symmetric": sym, "scaled": scaled,
              "practice": {"symmetric": practice(sym, TAUS.index(0.05)),
                           "scaled": practice(scaled, len(scales) // 2)},
              "survey": survey([(c, r) for c, r in rows if c["part"] == "survey"], costs)}
    write_json_atomic(out_dir / "stability_chart.json", result)


EXPERIMENT = Experiment(name="stability-chart", description="flow-routing stability chart: exact "
                        "critical stepsize vs delay, closed form, DLB practice, rule survey",
                        grid=grid, cell=cell, collect=collect)

if __name__ == "__main__":
    sys.exit(script_main(EXPERIMENT))
