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
last 15 s (from 10 ms samples) and the time-averaged total latency rate. Writes
``experiments/results/fluid_six_policies/results.json``.

    .venv/bin/python experiments/fluid_six_policies.py
"""

from __future__ import annotations

from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

from lbtheory.costs import cell_cost_prime  # noqa: E402
from lbtheory.equilibrium import solve_equilibrium  # noqa: E402
from lbtheory.fluid import simulate_fluid_batch  # noqa: E402
from lbtheory.io import run_manifest, write_json_atomic  # noqa: E402
from lbtheory.models import MM1Latency  # noqa: E402
from lbtheory.network import Arc, Cell, CellNetwork  # noqa: E402

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
OUT = Path(__file__).resolve().parents[1] / "experiments" / "results" / "fluid_six_policies"


def rule_stepsize(net, eq, cost) -> float:
    """min over frontends of THEORY §7.6's rule μ'_j/(Λ_j f'_j 2τ̄_i) (empirical, not a theorem)."""
    S = eq.routing > 1e-6
    mup = net.models.rate_prime(eq.workload)
    fp = cell_cost_prime(cost, net.models, eq.workload, net.replicas)
    lam = net.arrival_rates
    Lj = (lam[:, None] * S).sum(0)
    return min(mup[j] / (Lj[j] * fp[j] * 2 * max(net.delays[i][S[i]].max(), 1e-3))
               for i in range(net.n) if lam[i] > 0 for j in np.flatnonzero(S[i]))


def network(delay: float) -> CellNetwork:
    """Two frontends at one-way delay ``delay`` (s) from two heterogeneous hyperbolic cells."""
    cells = [Cell(name, 1, 0.0, MM1Latency(**p)) for name, p in CONFIG["cells"].items()]
    svc = MM1Latency(10.0, 5.0)  # frontends have no self-arc: their own service is never used
    cells += [Cell(f, 1, CONFIG["frontend_rate"], svc) for f in ("f1", "f2")]
    arcs = [Arc(f, c, delay) for f in ("f1", "f2") for c in CONFIG["cells"]]
    return CellNetwork(cells, arcs)


def tail_amplitude(t: np.ndarray, W: np.ndarray, window: float) -> float:
    """Peak-to-peak of N_j over the last ``window`` seconds, max over cells (requests)."""
    tail = W[t >= t[-1] - window]
    return float(np.max(tail.max(axis=0) - tail.min(axis=0)))


def main() -> dict:
    nets = [network(d) for d in CONFIG["delays_s"]]
    base = nets[0]
    runs = []
    for cost in CONFIG["costs"]:
        eqs = [solve_equilibrium(nt, cost) for nt in nets]
        eta = CONFIG["stepsize_fraction_of_rule"] * rule_stepsize(nets[-1], eqs[-1], cost)
        for mech in CONFIG["mechanisms"]:
            sol = simulate_fluid_batch(nets, mechanism=mech, cost=cost,
                                       stepsize=eta if mech == "flow" else None,
                                       t1=CONFIG["t1"], dt=CONFIG["dt"],
                                       save_every=CONFIG["save_every"], equilibrium=eqs,
                                       N0=CONFIG["N0"])
            for b, delay in enumerate(CONFIG["delays_s"]):
                keep = slice(0, int(np.searchsorted(sol.t, CONFIG["stored_window_s"],
                                                    side="right")), CONFIG["stored_stride"])
                runs.append({
                    "mechanism": mech, "cost": cost, "delay": delay,
                    "stepsize": eta if mech == "flow" else None,
                    "t": sol.t[keep], "workload": sol.workload[b][keep, :2],
                    "distance_to_equilibrium": sol.distance_to_equilibrium[b][keep],
                    "equilibrium_workload": eqs[b].workload,
                    "tail_amplitude": tail_amplitude(sol.t, sol.workload[b],
                                                     CONFIG["tail_window_s"]),
                    "final_distance": float(sol.distance_to_equilibrium[b][-1]),
                    "mean_total_latency_rate": float(sol.mean_total_latency_rate[b]),
                    "status": str(sol.status[b].value),
                })
                r = runs[-1]
                print(f"{mech:>8} {cost:>8} τ={delay:<5g} final ‖N−N*‖ = {r['final_distance']:.2e}"
                      f"  tail amplitude {r['tail_amplitude']:.3f}  J = "
                      f"{r['mean_total_latency_rate']:.4f}")
    result = {"cells": list(base.names), "runs": runs, "manifest": run_manifest(CONFIG)}
    write_json_atomic(OUT / "results.json", result, indent=None)
    return result


if __name__ == "__main__":
    main()
