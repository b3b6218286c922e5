"""The six DLB policies (flow/discrete × rif/latency/gradient) in the delayed fluid model.

Topology: two frontends (7 req/s each) equidistant from two *heterogeneous* hyperbolic cells
(c1: μ̄ = 10, K = 5; c2: μ̄ = 16, K = 4) — like THEORY §7.5's symmetric example, but the three
costs now have three different equilibria (RIF equalises N, latency equalises (N + K)/μ̄,
gradient equalises (N + K)²/(μ̄K)), all interior. Every policy is simulated for 120 s from
N = (8, 2), with the one-way delay τ = 0.025, 0.05, 0.1, 0.2 s on every arc. Flow
routing uses, per cost, half of THEORY §7.6's empirical stepsize rule evaluated at the *largest*
delay (so it is expected to be safe at every delay; the rule is not a theorem). Discrete
routing has no stepsize. For each run we store the cell workloads and the distance ‖N(t) − N*‖ to
the cost's CVXPY equilibrium over the first 30 s (every 20 ms), the peak-to-peak workload over the
last 15 s (from 10 ms samples) and the time-averaged total latency rate. One sweep cell
per (cost, mechanism) — its four delays run as one batch — cached and resumable (see
:mod:`lbtheory.sweep`). Writes ``experiments/results/fluid-six-policies/results.json``.

    .venv/bin/lbtheory sweep fluid-six-policies
    .venv/bin/python experiments/fluid_six_policies.py      (the same, as a script)

The ``quick`` profile runs the same six cells over 30 s instead of 120 s.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from lbtheory.io import run_manifest, write_json_atomic
from lbtheory.models import MM1Latency
from lbtheory.network import Arc, Cell, CellNetwork
from lbtheory.sweep import CellField, Experiment, script_main

CONFIG = {
    "cells": {"c1": {"capacity": 10.0, "K": 5.0}, "c2": {"capacity": 16.0, "K": 4.0}},
    "frontend_rate": 7.0,
    "delays_s": [0.025, 0.05, 0.1, 0.2],
    "N0": [8.0, 2.0, 0.0, 0.0],
    "costs": ["rif", "latency", "gradient"],
    "mechanisms": ["flow", "discrete"],
    "t1": 120.0,
    "dt": 1e-3,
    "save_every": 10,
    "stored_window_s": 30.0,
    "stored_stride": 2,
    "stepsize_fraction_of_rule": 0.5,
    "tail_window_s": 15.0,
}
#: horizon t1 (s) of each profile; everything else is CONFIG.
HORIZON_S = {"quick": 30.0, "full": 120.0}


def rule_stepsize(net, eq, cost) -> float:
    """min over frontends of THEORY §7.6's rule μ'_j/(Λ_j f'_j 2τ̄_i) (empirical, not a theorem)."""
    from lbtheory.costs import cell_cost_prime

    S = eq.routing > 1e-6
    mup = net.models.rate_prime(eq.workload)
    fp = cell_cost_prime(cost, net.models, eq.workload, net.replicas)
    lam = net.arrival_rates
    Lj = (lam[:, None] * S).sum(0)
    return min(mup[j] / (Lj[j] * fp[j] * 2 * max(net.delays[i][S[i]].max(), 1e-3))
               for i in range(net.n) if lam[i] > 0 for j in np.flatnonzero(S[i]))


def network(delay: float, config: dict = CONFIG) -> CellNetwork:
    """Two frontends at one-way delay ``delay`` (s) from two heterogeneous hyperbolic cells."""
    cells = [Cell(name, 1, 0.0, MM1Latency(**p)) for name, p in config["cells"].items()]
    svc = MM1Latency(10.0, 5.0)  # frontends have no self-arc: their own service is never used
    cells += [Cell(f, 1, config["frontend_rate"], svc) for f in ("f1", "f2")]
    arcs = [Arc(f, c, delay) for f in ("f1", "f2") for c in config["cells"]]
    return CellNetwork(cells, arcs)


def tail_amplitude(t: np.ndarray, W: np.ndarray, window: float) -> float:
    """Peak-to-peak of N_j over the last ``window`` seconds, max over cells (requests)."""
    tail = W[t >= t[-1] - window]
    return float(np.max(tail.max(axis=0) - tail.min(axis=0)))


def grid(profile: str) -> list[dict]:
    """One config per (cost, mechanism), in the order of CONFIG; all delays run in the cell.

    Each config carries every parameter of CONFIG, so changing one changes the cache key."""
    base = {k: v for k, v in CONFIG.items() if k not in ("costs", "mechanisms")}
    return [base | {"cost": cost, "mechanism": mech, "t1": HORIZON_S[profile]}
            for cost in CONFIG["costs"] for mech in CONFIG["mechanisms"]]


def cell(config: dict) -> dict:
    """Simulate one policy at every delay of ``config`` (fluid model, float64)."""
    from lbtheory.equilibrium import solve_equilibrium
    from lbtheory.fluid import simulate_fluid_batch

    cost, mech = config["cost"], config["mechanism"]
    nets = [network(d, config) for d in config["delays_s"]]
    eqs = [solve_equilibrium(nt, cost) for nt in nets]
    eta = config["stepsize_fraction_of_rule"] * rule_stepsize(nets[-1], eqs[-1], cost)
    sol = simulate_fluid_batch(nets, mechanism=mech, cost=cost,
                               stepsize=eta if mech == "flow" else None, t1=config["t1"],
                               dt=config["dt"], save_every=config["save_every"],
                               equilibrium=eqs, N0=config["N0"])
    keep = slice(0, int(np.searchsorted(sol.t, config["stored_window_s"], side="right")),
                 config["stored_stride"])
    runs = []
    for b, delay in enumerate(config["delays_s"]):
        runs.append({
            "mechanism": mech, "cost": cost, "delay": delay,
            "stepsize": eta if mech == "flow" else None,
            "t": sol.t[keep], "workload": sol.workload[b][keep, :2],
            "distance_to_equilibrium": sol.distance_to_equilibrium[b][keep],
            "equilibrium_workload": eqs[b].workload,
            "tail_amplitude": tail_amplitude(sol.t, sol.workload[b], config["tail_window_s"]),
            "final_distance": float(sol.distance_to_equilibrium[b][-1]),
            "mean_total_latency_rate": float(sol.mean_total_latency_rate[b]),
            "status": str(sol.status[b].value),
        })
    return {"cells": list(nets[0].names), "runs": runs}


def collect(rows: list, out_dir: Path, profile: str) -> None:
    """Write ``results.json``: the runs of every cell in grid order, and the manifest."""
    conf = CONFIG | {"t1": rows[0][0]["t1"], "profile": profile}
    result = {"cells": rows[0][1]["cells"], "runs": [run for _, r in rows for run in r["runs"]],
              "manifest": run_manifest(conf)}
    write_json_atomic(out_dir / "results.json", result, indent=None)


EXPERIMENT = Experiment(name="fluid-six-policies", description="the six DLB policies (flow/"
                        "discrete x rif/latency/gradient) in the delayed fluid model, 4 delays",
                        grid=grid, cell=cell, collect=collect,
                        cell_schema={"cells": CellField("list"), "runs": CellField("list")})

if __name__ == "__main__":
    sys.exit(script_main(EXPERIMENT))
