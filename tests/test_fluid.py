"""Fluid model: convergence to the CVXPY equilibria, conservation, non-negativity, input errors."""

import numpy as np
import pytest

from lbtheory.costs import CostKind, cell_cost_prime
from lbtheory.equilibrium import solve_equilibrium
from lbtheory.errors import DynamicsStatus, ModelError, ParameterError, TopologyError, UnstableError
from lbtheory.fluid import DelayMode, Mechanism, simulate_fluid
from lbtheory.instances import random_network, symmetric_two_cell
from lbtheory.io import load_topology
from lbtheory.models import MM1Latency
from lbtheory.network import Arc, Cell, CellNetwork

THREE = "examples/three_cells.yaml"


def _three():
    return load_topology(THREE)


def _rand():
    net = random_network(4, seed=4, max_delay=0.05)
    return net.with_delays(np.round(net.delays, 3))


def _safe_stepsize(net, eq, cost):
    """Half of THEORY §7.6's empirical rule min_j μ'_j/(Λ_j f'_j 2τ̄_i) (per frontend)."""
    N, S = eq.workload, eq.routing > 1e-6
    mup = net.models.rate_prime(N)
    fp = cell_cost_prime(cost, net.models, N, net.replicas)
    lam = net.arrival_rates
    Lj = (lam[:, None] * S).sum(0)
    rule = [min(mup[j] / (Lj[j] * fp[j] * 2 * max(net.delays[i][S[i]].max(), 1e-3))
                for j in np.flatnonzero(S[i]))
            for i in range(net.n) if lam[i] > 0]
    return 0.5 * min(rule)


CASES = [(name, cost) for name in ("three", "sym2", "rand")
         for cost in ("gradient", "latency", "rif")]


@pytest.mark.parametrize("name, cost", CASES)
def test_flow_routing_converges_to_cvxpy_equilibrium(name, cost):
    """gradient → system optimum, latency → Wardrop, rif → RIF equilibrium (THEORY §5)."""
    net = {"three": _three, "sym2": lambda: symmetric_two_cell(frontends=2), "rand": _rand}[name]()
    eq = solve_equilibrium(net, cost)
    eta = _safe_stepsize(net, eq, cost)
    sol = simulate_fluid(net, cost=cost, stepsize=eta, t1=120.0, N0=0.5 * eq.workload,
                         equilibrium=eq)
    N, x = sol.workload[-1], sol.routing[-1]
    assert sol.status is DynamicsStatus.CONVERGED
    np.testing.assert_allclose(N, eq.workload, rtol=1e-3, atol=1e-9)
    z = (net.arrival_rates[:, None] * x).sum(0)
    np.testing.assert_allclose(z, eq.inflow, rtol=1e-3, atol=1e-9)
    if cost != "rif" and name != "sym2":  # RIF (ignores τ) and sym2 have non-unique routing
        np.testing.assert_allclose(x, eq.routing, atol=1e-3)
    assert sol.final_distance_to_equilibrium < 1e-3 * np.linalg.norm(eq.workload)
    assert not np.any(x[~net.adjacency])  # residency respected


@pytest.mark.parametrize("mechanism", ["flow", "discrete"])
def test_conservation_every_step(mechanism):
    """Λt + in transit(0) − departures = ΣN(t) − ΣN(0) + in transit(t) (trapezoidal transit)."""
    net = _three()
    dt = 1e-3
    sol = simulate_fluid(net, mechanism=mechanism, cost="latency", stepsize=2.0, t1=1.0, dt=dt,
                         save_every=1, N0=[3.0, 1.0, 6.0])
    lam = net.arrival_rates
    d = np.round(net.delays / dt).astype(int)
    X = sol.routing
    K = len(X) - 1
    hist = lambda m: X[max(m, 0)]  # noqa: E731  constant history x(s) = x0 for s ≤ 0

    def transit(k):
        tot = 0.0
        for i, j in zip(*np.nonzero(net.adjacency)):
            if d[i, j] == 0:
                continue
            vals = np.array([hist(m)[i, j] for m in range(k - d[i, j], k + 1)])
            tot += lam[i] * dt * (vals.sum() - 0.5 * (vals[0] + vals[-1]))
        return tot

    W = sol.workload.sum(axis=1)
    for k in range(0, K + 1, 97):
        lhs = lam.sum() * k * dt + transit(0) - sol.departed[k].sum()
        rhs = W[k] - W[0] + transit(k)
        assert abs(lhs - rhs) < 1e-9 * max(1.0, abs(rhs))


def test_workloads_stay_nonnegative_with_stiff_drain():
    """hμ'(0) = 100 ≫ 1: departures are capped so N never goes below 0 (THEORY §2)."""
    svc = MM1Latency(capacity=1000.0, K=0.1)
    net = CellNetwork([Cell("a", 1, 1.0, svc), Cell("b", 1, 0.0, svc)],
                      [Arc("a", "a", 0.0), Arc("a", "b", 0.02)])
    sol = simulate_fluid(net, cost="latency", stepsize=1.0, t1=1.0, dt=0.01, save_every=1,
                         N0=[50.0, 50.0])
    assert sol.workload.min() >= 0.0
    assert sol.workload[-1].max() < 0.1


def test_nonfinite_state_names_step_and_cell():
    net = symmetric_two_cell()
    with pytest.raises(UnstableError, match=r"step 0 .* cell 'c2'"):
        simulate_fluid(net, stepsize=1.0, t1=0.1, N0=[1.0, 1e200, 0.0])
    sol = simulate_fluid(net, stepsize=1.0, t1=0.1, N0=[1.0, 1e200, 0.0], throw=False)
    assert sol.status is DynamicsStatus.DIVERGED and sol.bad_cell == "c2"


def test_json_contract_keys():
    sol = simulate_fluid(symmetric_two_cell(), stepsize=0.3, t1=1.0, equilibrium="auto")
    d = sol.to_dict()
    for key in ("t", "workload", "routing", "total_latency_rate",
                "final_distance_to_equilibrium"):
        assert key in d
    np.testing.assert_allclose(d["t"][-1], 1.0)
    assert d["workload"].shape == (len(d["t"]), 3)


BAD = [
    (dict(t1=1.0005, dt=1e-3), ModelError, "whole number of steps"),
    (dict(t1=1.0, dt=-1.0), ModelError, "dt: expected a positive finite"),
    (dict(t1="x"), ModelError, "t1: expected a positive number"),
    (dict(save_every=3), ParameterError, "must divide the number of steps"),
    (dict(save_every=0), ParameterError, r"save_every must be an integer >= 1 \(steps\), got 0"),
    (dict(save_every=2.0), ParameterError, r"save_every must be an integer >= 1 .*got 2.0"),
    (dict(dt=3e-3, t1=0.999), ModelError, "not a multiple of dt"),
    (dict(delay_mode="nearest"), ModelError,
     "delay_mode must be 'snap' or 'interpolate', got 'nearest'"),
    (dict(stepsize=None), ModelError, "flow routing needs a stepsize"),
    (dict(stepsize=[1.0, 2.0]), ModelError, "stepsize: expected a scalar or 3 values"),
    (dict(stepsize=-1.0), ModelError, "stepsize: expected positive finite"),
    (dict(N0=[1.0, 2.0]), ModelError, "N0: expected 3 workloads"),
    (dict(N0=[1.0, -2.0, 0.0]), ModelError, "workload of cell 'eu-west' must be finite"),
    (dict(x0=np.eye(2)), ModelError, r"x0: expected an 3×3 routing matrix"),
    (dict(x0=-np.eye(3)), ModelError, "x0: routing entries must be finite and ≥ 0"),
    (dict(x0=np.full((3, 3), 1 / 3)), TopologyError, "no arc eu-west -> asia-se"),
    (dict(x0=np.diag([1.0, 0.5, 1.0])), ModelError, "row of source 'eu-west' sums to 0.5"),
    (dict(mechanism="greedy"), ModelError,
     "mechanism must be 'flow' or 'discrete', got 'greedy'"),
    (dict(cost="queue"), ParameterError,
     r"cost must be one of 'rif', 'latency', 'gradient', got 'queue'"),
    (dict(equilibrium="cvx"), ModelError, "equilibrium: expected None, 'auto'"),
    (dict(equilibrium=[1.0]), ModelError, "equilibrium: expected 3 finite"),
]


@pytest.mark.parametrize("kwargs, exc, match", BAD)
def test_bad_inputs_raise_typed_errors(kwargs, exc, match):
    base = dict(stepsize=1.0, t1=1.0, dt=1e-3)
    base.update(kwargs)
    with pytest.raises(exc, match=match):
        simulate_fluid(_three(), **base)


def test_net_must_be_a_cell_network():
    with pytest.raises(TopologyError, match="net: expected a CellNetwork"):
        simulate_fluid("three_cells.yaml", stepsize=1.0, t1=1.0)


def test_interpolated_half_step_delay_matches_a_fine_grid_reference():
    """τ = 50.5·dt: with interpolation the dt = 1 ms run stays within 1e-5 requests of a
    dt = 0.1 ms run where τ is on the grid (second order: measured 7e-7); dropping the
    half step (τ → 50 or 51 steps) is off by 1.5e-3, so the test needs the interpolation."""
    net = symmetric_two_cell()
    net = net.with_delays(np.where(net.adjacency, 0.0505, 0.0))
    kw = dict(stepsize=0.3, t1=5.0, N0=[8.0, 7.0, 0.0])
    ref = simulate_fluid(net, dt=1e-4, save_every=1000, **kw)  # τ = 505 steps, snapped exactly
    sol = simulate_fluid(net, dt=1e-3, save_every=100, delay_mode="interpolate", **kw)
    np.testing.assert_allclose(sol.t, ref.t, rtol=1e-12)
    assert np.max(np.abs(sol.workload - ref.workload)) < 1e-5
    assert np.max(np.abs(sol.routing - ref.routing)) < 1e-5


def test_options_accept_the_enum_or_its_value():
    """Mechanism/CostKind/DelayMode members and their string values give identical runs."""
    net = _three()
    kw = dict(stepsize=2.0, t1=0.5, N0=[3.0, 1.0, 6.0])
    a = simulate_fluid(net, mechanism=Mechanism.DISCRETE, cost=CostKind.LATENCY,
                       delay_mode=DelayMode.INTERPOLATE, **kw)
    b = simulate_fluid(net, mechanism="discrete", cost="latency", delay_mode="interpolate", **kw)
    assert np.array_equal(a.workload, b.workload) and a.mechanism is Mechanism.DISCRETE
    assert a.to_dict()["mechanism"] == "discrete" and a.to_dict()["cost"] == "latency"
