"""One topology, one answer (issue 33): a topology simulated on its own service models (``rate``
servers, the default without a ``simulation:`` section) reproduces ``equilibrium``'s per-cell
latencies ℓ_j(N*_j) when routed at the equilibrium and the queues are large (low noise)."""

from __future__ import annotations

import numpy as np

from lbtheory.equilibrium import solve_equilibrium
from lbtheory.routers._contract import Stateless, cumulative, sample_index
from lbtheory.sim import ServerKind, scenario_from_dict, simulate

#: three families; K, the softplus knee region and the exp scale are large (tens to hundreds of
#: requests in flight), so the stochastic queue's mean is within ~1.5 % of the fluid value
TOPOLOGY = {"cells": [
    {"name": "a", "replicas": 4, "arrival_rate": 300.0,
     "service": {"model": "mm1", "capacity": 400.0, "K": 100.0}},
    {"name": "b", "replicas": 2, "arrival_rate": 100.0,
     "service": {"model": "softplus", "base_latency": 0.5, "slope": 0.0025, "knee": 40.0,
                 "softness": 5.0}},
    {"name": "c", "replicas": 2, "arrival_rate": 0.0,
     "service": {"model": "exp", "capacity": 200.0, "K": 60.0}}],
    "arcs": [{"from": "a", "to": "a"}, {"from": "a", "to": "b", "delay": 0.01},
             {"from": "a", "to": "c", "delay": 0.02}, {"from": "b", "to": "b"},
             {"from": "b", "to": "a", "delay": 0.01}]}


class FixedRouting(Stateless):
    """Each request of source i goes to j with probability x_ij (a fixed routing matrix)."""

    name = "fixed"

    def __init__(self, x: np.ndarray) -> None:
        self.cum = [cumulative(row) for row in x]

    def route(self, state, view, rng):
        return sample_index(self.cum[view.source], rng), state


def birth_death_mean_latency(model, rate: float, n_max: int = 5000) -> float:
    """Exact mean sojourn (s) of a queue with Poisson arrivals at ``rate`` and completions at
    μ(N) (the rate server): π(n) ∝ Π_{m ≤ n} rate/μ(m), then Little's law E[N]/rate."""
    n = np.arange(1, n_max, dtype=float)
    logp = np.concatenate([[0.0], np.cumsum(np.log(rate) - np.log(np.asarray(model.rate(n))))])
    p = np.exp(logp - logp.max())
    return float((np.arange(n_max) * p).sum() / p.sum() / rate)


def test_rate_servers_at_the_equilibrium_give_equilibrium_latencies():
    sc = scenario_from_dict(TOPOLOGY)  # no simulation section: rate servers
    assert {s.kind for s in sc.servers} == {ServerKind.RATE}
    assert sc.cells_off_service_model() == ()
    net = sc.network
    eq = solve_equilibrium(net, "latency")
    fluid = np.asarray(net.models.latency(eq.workload), dtype=float)
    # a Wardrop equilibrium: each source's used arcs have the least ℓ_j + 2τ_ij (b spills to
    # a; a to c): latencies 494 / 514 / 454 ms
    cost = fluid[None, :] + 2.0 * net.delays
    for i in (0, 1):
        used = eq.routing[i] > 1e-6
        assert np.allclose(cost[i, used], cost[i, net.adjacency[i]].min(), atol=1e-6)
    assert np.allclose(fluid, [0.49361, 0.51361, 0.45361], atol=1e-5)
    exact = np.array([birth_death_mean_latency(m, y) for m, y in zip(net.services, eq.inflow)])
    # the queueing noise the fluid model ignores: +1.0 %, +0.9 %, +1.4 % here (for mm1 exactly
    # (K + 1)/K: 101/100)
    assert np.all((exact / fluid > 1.0) & (exact / fluid < 1.02))
    res = simulate(sc, FixedRouting(eq.routing), duration_s=300.0, seed=3)
    sim = res.serving_latency()
    # measured (seed 3): 1.021, 1.016, 1.006 × equilibrium; the criterion is 5 %
    assert np.all(np.abs(sim / fluid - 1.0) < 0.05), sim / fluid
    # and the simulator agrees with the exact queue to 3 % (its own noise, 300 s of ~80k requests)
    assert np.all(np.abs(sim / exact - 1.0) < 0.03), sim / exact
    # routed as asked: cell inflows within 2 % of the equilibrium's
    assert np.allclose(res.routed.sum(axis=0) / 300.0, eq.inflow, rtol=0.02)


def test_mm1_rate_server_matches_its_closed_form():
    """Oracle: a rate server for ℓ(N) = (N + K)/μ̄ at arrival rate λ has mean sojourn
    (K + 1)/(μ̄ − λ), the fluid model K/(μ̄ − λ) (negative-binomial stationary law)."""
    from lbtheory.models import MM1Latency

    m = MM1Latency(capacity=400.0, K=100.0)
    assert abs(birth_death_mean_latency(m, 197.41) - 101.0 / (400.0 - 197.41)) < 1e-9
