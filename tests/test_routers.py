"""DLB routers on hand-checkable two- and three-cell views (numbers worked out by hand below)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lbtheory.costs import CostKind
from lbtheory.errors import LBTheoryError, ParameterError, StepsizeError
from lbtheory.models import MM1Latency, ModelBank
from lbtheory.registry import POLICY_NAMES, make_router
from lbtheory.routers import (
    CellView,
    CostTables,
    DiscreteRouter,
    FlowRouter,
    JSQRouter,
    MNLBProgram,
    MNLBRouter,
    PowerOfDRouter,
    RandomRouter,
    RoundRobinRouter,
    cost_matrix,
    cost_row,
    scale_to_replicas,
)

# Two cells. Cell 0: μ̄ = 10, K = 2, k = 1, N̂ = 3; cell 1: μ̄ = 4, K = 1, k = 2, N̂ = 1; τ01 = 0.1 s.
# From source 0, by hand:
#   RIF      c = (3/1, 1/2)                          = (3, 0.5)   -> cell 1
#   latency  ℓ = (N+K)/μ̄ + 2τ: (5/10, 2/4 + 0.2)    = (0.5, 0.7) -> cell 0
#   gradient (N+K)²/(μ̄K) + 2τ: (25/20, 4/4 + 0.2)   = (1.25, 1.2) -> cell 1
MODELS = ModelBank([MM1Latency(10.0, 2.0), MM1Latency(4.0, 1.0)])
DELAYS = np.array([[0.0, 0.1], [0.1, 0.0]])


def view(t=0.0, workload=(3.0, 1.0), replicas=(1.0, 2.0), mask=None, delays=DELAYS, **kw):
    n = len(workload)
    mask = np.ones((n, n), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    return CellView(time=t, workload=np.asarray(workload, float),
                    replicas=np.asarray(replicas, float), delays=np.asarray(delays, float),
                    mask=mask, models=kw.pop("models", MODELS), **kw)


def at(v, source):
    """The same view as seen by ``source``'s root router."""
    return dataclasses.replace(v, source=source)


def draws(router, v, source, n=4000, seed=1):
    rng = np.random.default_rng(seed)
    v = at(v, source)
    state = router.init(0)
    state = router.observe(state, v)
    out = np.empty(n, dtype=int)
    for k in range(n):
        out[k], state = router.route(state, v, rng)
    return out


@pytest.mark.parametrize("cost, expected", [("rif", 1), ("latency", 0), ("gradient", 1)])
def test_discrete_router_picks_the_hand_computed_cheapest_cell(cost, expected):
    assert set(draws(DiscreteRouter(cost), view(), 0, n=200)) == {expected}


def test_discrete_router_splits_ties_evenly():
    # equal RIF per replica: 2/1 = 4/2 -> a tie, each cell about half the requests
    d = draws(DiscreteRouter("rif"), view(workload=(2.0, 4.0)), 0, n=4000)
    assert abs(d.mean() - 0.5) < 4 * np.sqrt(0.25 / 4000)


def test_flow_router_one_step_matches_hand_projection():
    # x starts at Rand's weights ∝ replicas (1, 2): (1/3, 2/3). η = 1, δ = 0.1 s, latency costs
    # (0.5, 0.7): v = (1/3, 2/3) − 0.1·(0.5, 0.7) = (0.28333…, 0.59666…), sum 0.88; the
    # projection onto the simplex adds (1 − 0.88)/2 = 0.06: x = (0.34333…, 0.65666…).
    r = FlowRouter("latency", stepsize=1.0)
    s = r.observe(r.init(0), view(t=0.0))
    np.testing.assert_allclose(s.x[0], [1 / 3, 2 / 3])
    s = r.observe(s, view(t=0.1))
    np.testing.assert_allclose(s.x[0], [1 / 3 - 0.05 + 0.06, 2 / 3 - 0.07 + 0.06], atol=1e-12)
    rng = np.random.default_rng(3)
    picks = [r.route(s, view(t=0.1), rng)[0] for _ in range(20000)]
    p0 = 1 / 3 + 0.01
    assert abs(np.mean(np.asarray(picks) == 0) - p0) < 4 * np.sqrt(p0 * (1 - p0) / 20000)
    # a source whose residency row excludes a cell starts ∝ replicas on its row only
    row = r.initial_row(view(workload=(1.0, 1.0, 1.0), replicas=(1.0, 2.0, 5.0),
                             delays=np.zeros((3, 3)), mask=[[1, 0, 1]] * 3), 0)
    np.testing.assert_allclose(row, [1 / 6, 0.0, 5 / 6])


def test_flow_router_default_stepsize_is_per_cost_over_the_feedback_delay():
    # mean one-way delay over arcs with τ > 0 is 0.1 s; probes every 0.02 s add δ/2 = 0.01 s:
    # η = constant(cost) / 0.11
    from lbtheory.routers import DEFAULT_STEPSIZE_SCALES

    for cost in ("rif", "latency", "gradient"):
        c = DEFAULT_STEPSIZE_SCALES[CostKind.parse(cost)]
        assert FlowRouter(cost).eta(view()) == pytest.approx(c / 0.1)
        assert FlowRouter(cost).eta(view(probe_period_s=0.02)) == pytest.approx(c / 0.11)
    # the costs' critical stepsizes differ ≈10-fold: so do the constants
    assert DEFAULT_STEPSIZE_SCALES[CostKind.LATENCY] > 5 * DEFAULT_STEPSIZE_SCALES[CostKind.RIF]
    assert FlowRouter("gradient", stepsize_scale=0.5).eta(view()) == pytest.approx(5.0)
    # no delay at all: the probe period alone sets the feedback delay (1-s probes: 0.5 s)
    zero = view(delays=np.zeros((2, 2)), probe_period_s=1.0)
    assert FlowRouter("gradient", stepsize_scale=0.5).eta(zero) == pytest.approx(1.0)
    with pytest.raises(StepsizeError, match="stepsize"):
        FlowRouter("rif", stepsize=-1.0)


def test_flow_router_large_step_goes_to_the_vertex():
    # RIF costs (3, 0.5), step η·δ = 10·1 = 10: v = (0.5 − 30, 0.5 − 5) -> x = (0, 1)
    r = FlowRouter("rif", stepsize=10.0)
    s = r.observe(r.observe(r.init(0), view(t=0.0)), view(t=1.0))
    np.testing.assert_allclose(s.x[0], [0.0, 1.0])


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_every_router_respects_residency_and_leaves_its_source(name):
    # Source 0 may use cell 0 (itself, heavily loaded) and cell 2 (lightly loaded, 10 ms away);
    # cell 1 is cheapest by every measure but not admissible. Every policy must stay within
    # {0, 2} *and* use cell 2 (a router that never leaves its source fails; so does one that
    # ignores the mask). MNLB: λ_0 = 15 req/s exceeds cell 0's usable 9 req/s, so it spills.
    mask = [[True, False, True], [True, True, True], [False, True, True]]
    d3 = np.array([[0.0, 0.001, 0.01], [0.001, 0.0, 0.01], [0.01, 0.01, 0.0]])
    models = ModelBank([MM1Latency(10.0, 2.0)] * 3)
    r = make_router(name)
    s = r.init(0)
    rng = np.random.default_rng(0)
    seen = []
    for t in np.linspace(0.0, 30.0, 301):
        vt = view(t=float(t), workload=(9.0, 0.0, 5.0), replicas=(1.0, 5.0, 1.0), mask=mask,
                  delays=d3, models=models, capacity=np.array([10.0, 10.0, 10.0]),
                  arrival_rates=np.array([15.0, 1.0, 1.0]))
        s = r.observe(s, vt)
        j, s = r.route(s, vt, rng)
        seen.append(j)
    assert set(seen) <= {0, 2}
    assert seen.count(2) >= 30, f"{name} sent {seen.count(2)} of 301 requests off its source"


def test_random_router_is_proportional_to_replicas():
    d = draws(RandomRouter(), view(replicas=(1.0, 3.0)), 0, n=8000)
    assert abs(d.mean() - 0.75) < 4 * np.sqrt(0.75 * 0.25 / 8000)


def test_round_robin_cycles_over_admissible_cells():
    mask = [[True, False, True], [True, True, True], [True, True, True]]
    d = draws(RoundRobinRouter(), view(workload=(0, 0, 0), replicas=(1, 1, 1), mask=mask,
                                       delays=np.zeros((3, 3))), 0, n=5)
    assert d.tolist() == [0, 2, 0, 2, 0]


def test_jsq_and_power_of_two():
    v = view(workload=(1.0, 2.0, 3.0), replicas=(1.0, 1.0, 1.0), delays=np.zeros((3, 3)))
    assert set(draws(JSQRouter(), v, 0, n=100)) == {0}
    # pairs {0,1}->0, {0,2}->0, {1,2}->1, each with probability 1/3: P = (2/3, 1/3, 0)
    d = draws(PowerOfDRouter(d=2), v, 0, n=9000)
    freq = np.bincount(d, minlength=3) / d.size
    sd = np.sqrt(2 / 9 / 9000)
    assert abs(freq[0] - 2 / 3) < 4 * sd and abs(freq[1] - 1 / 3) < 4 * sd and freq[2] == 0
    # JSQ per replica: loads (1/1, 2/4, 3/1) -> cell 1
    v2 = view(workload=(1.0, 2.0, 3.0), replicas=(1.0, 4.0, 1.0), delays=np.zeros((3, 3)))
    assert set(draws(JSQRouter(per_replica=True), v2, 0, n=50)) == {1}


MNLB_DELAYS = np.array([[0.0, 0.05], [0.05, 0.0]])


@pytest.mark.parametrize("lam, expected_x0", [
    # capacity 10 each, headroom 0.8 -> 8 usable. λ = (12, 2): a keeps 8 and sends 4 to b.
    ((12.0, 2.0), [8 / 12, 4 / 12]),
    # λ = (10, 5): a keeps 8, sends 2; b's 5 + 2 = 7 ≤ 8.
    ((10.0, 5.0), [0.8, 0.2]),
    # λ = (20, 2) > 16 usable: the overload 22/16 = 1 + σ, σ = 0.375, raises both caps to
    # 11 (spilled in proportion to the capped capacities, issue 36): a keeps 11, sends 9 (it
    # kept 14 and sent 6 when the overflow could sit on the local cell).
    ((20.0, 2.0), [11 / 20, 9 / 20]),
    # λ = (5, 5): no spill, everyone local.
    ((5.0, 5.0), [1.0, 0.0]),
])
def test_mnlb_lp_matches_hand_solution(lam, expected_x0):
    prog = MNLBProgram(np.ones((2, 2), bool), MNLB_DELAYS, rho_max=0.8)
    x = prog.solve(np.array(lam), np.array([10.0, 10.0]))
    np.testing.assert_allclose(x[0], expected_x0, atol=1e-5)
    np.testing.assert_allclose(x[1], [0.0, 1.0], atol=1e-5)


def test_mnlb_router_holds_weights_and_resolves_with_estimated_rates():
    r = MNLBRouter(period_s=10.0, rho_max=0.8)
    cap = np.array([10.0, 10.0])

    def v(t):
        return view(t=t, workload=(0.0, 0.0), replicas=(1.0, 1.0), delays=MNLB_DELAYS,
                    capacity=cap, arrival_rates=np.array([12.0, 2.0]))

    rng = np.random.default_rng(0)
    s = r.init(0)
    _, s = r.route(s, v(0.0), rng)  # first solve with the nominal rates (12, 2)
    np.testing.assert_allclose(np.diff(np.r_[0.0, s.cum[0]]), [8 / 12, 4 / 12], atol=1e-5)
    # 100 requests from a and 50 from b in [0, 10): λ̂ = (10, 5) at the next solve
    for k in range(99):
        _, s = r.route(s, v(0.05 * k), rng)
    for k in range(50):
        _, s = r.route(s, at(v(5.0 + 0.05 * k), 1), rng)
    assert s.solves == 1  # weights held for the whole period
    _, s = r.route(s, v(10.0), rng)
    assert s.solves == 2
    np.testing.assert_allclose(np.diff(np.r_[0.0, s.cum[0]]), [0.8, 0.2], atol=1e-5)


def test_make_router_rejects_unknown_policy_and_option():
    with pytest.raises(ParameterError, match="unknown policy 'fastest'"):
        make_router("fastest")
    with pytest.raises(ParameterError, match="unknown policy 'br0' for the cells simulator"):
        make_router("br0")
    with pytest.raises(LBTheoryError, match="bad option"):
        make_router("rand", colour="red")
    with pytest.raises(ParameterError, match="period_s"):
        MNLBRouter(period_s=0.0)


def test_a_baseline_on_a_source_without_arcs_declines_and_cost_routers_raise():
    mask = [[False, False], [True, True]]
    rng = np.random.default_rng(0)
    for r in (RandomRouter(), RoundRobinRouter(), JSQRouter(), PowerOfDRouter()):
        assert r.route(r.init(0), view(mask=mask), rng)[0] is None  # nowhere to go: wait
    with pytest.raises(LBTheoryError, match="reaches no cell"):
        DiscreteRouter("rif").route(DiscreteRouter("rif").init(0), view(mask=mask), rng)


@pytest.mark.parametrize("router", [FlowRouter("gradient", stepsize=0.7), FlowRouter("rif"),
                                    DiscreteRouter("latency")])
def test_observe_round_equals_observe_per_source(router):
    # the simulator's vectorised probe round must give what each source's own update gives
    d3 = np.array([[0.0, 0.02, 0.09], [0.02, 0.0, 0.05], [0.09, 0.05, 0.0]])
    mask = np.array([[True, True, False], [True, True, True], [False, True, True]])
    models = ModelBank([MM1Latency(10.0, 2.0), MM1Latency(6.0, 1.0), MM1Latency(20.0, 4.0)])
    loads = {0: (4.0, 2.0, 9.0), 1: (5.0, 1.0, 8.0), 2: (3.0, 3.0, 7.0)}

    def views(t, shift):
        return [view(t=t, workload=np.add(loads[i], shift), replicas=(1.0, 2.0, 3.0), mask=mask,
                     delays=d3, models=models, source=i) if i != 1 or t == 0.0 else None
                for i in range(3)]

    a = b = router.init(0)
    for t, shift in ((0.0, 0.0), (0.05, 1.0), (0.15, -2.0)):
        vs = views(t, shift)
        a = router.observe_round(a, vs)
        for v in vs:
            if v is not None:
                b = router.observe(b, v)
    for i in range(3):
        np.testing.assert_allclose(a.cum[i], b.cum[i], rtol=1e-12, atol=1e-15)


def test_error_aversion_control_loop_by_hand():
    # Rand over (k = 1, 1) wrapped in error aversion; cell 1 reports 30% errors.
    # First update: a_01 = min(1, 0 + κ_up·(0.3 − 0)) = 1 -> capped at 1 − p_explore = 0.95.
    # Routing: Rand picks 1 w.p. 1/2, kept w.p. 0.05 -> P(1) = 0.025.
    r = make_router("rand", error_aversion=True)
    bad = view(t=0.0, replicas=(1.0, 1.0), error_rate=np.array([0.0, 0.3]))
    s = r.observe(r.init(0), bad)
    np.testing.assert_allclose(s.aversion[0], [0.0, 0.95])
    rng = np.random.default_rng(5)
    picks = np.array([r.route(s, bad, rng)[0] for _ in range(20000)])
    assert abs(picks.mean() - 0.025) < 4 * np.sqrt(0.025 * 0.975 / 20000)
    # recovery: errors gone; each period (1 s) the aversion decays by κ_down = 0.05
    good = view(t=1.0, replicas=(1.0, 1.0), error_rate=np.array([0.0, 0.0]))
    s = r.observe(s, good)
    np.testing.assert_allclose(s.aversion[0], [0.0, 0.90])
    s = r.observe(s, view(t=1.5, replicas=(1.0, 1.0), error_rate=np.zeros(2)))
    np.testing.assert_allclose(s.aversion[0], [0.0, 0.90])   # not yet a new period


def test_models_rescaled_to_online_servers():
    # k = 10 servers, 4 online: each carries N/4 instead of N/10, i.e. ℓ'(N) = ℓ(2.5 N)
    from lbtheory.models import SoftplusLatency

    N = np.linspace(0.0, 200.0, 21)
    for m in (SoftplusLatency(1.4, 0.004, 80.0, 8.0), MM1Latency(100.0, 20.0)):
        s = scale_to_replicas(m, 10, 4)
        np.testing.assert_allclose(s.latency(N), m.latency(2.5 * N), rtol=1e-12)
        assert float(s.max_rate) == pytest.approx(float(m.max_rate) * 0.4)
        assert scale_to_replicas(m, 10, 10) is m


def test_mnlb_lp_matches_scipy_highs_on_random_networks():
    # independent oracle: the same LP written for scipy's HiGHS; compare optimal objectives
    from scipy.optimize import linprog

    rng = np.random.default_rng(3)
    for _ in range(3):
        n = 4
        mask = rng.random((n, n)) < 0.7
        np.fill_diagonal(mask, True)
        tau = rng.uniform(0.005, 0.1, (n, n)) * ~np.eye(n, dtype=bool)
        lam, cap = rng.uniform(1, 10, n), rng.uniform(5, 15, n)
        x = MNLBProgram(mask, tau, rho_max=0.9).solve(lam, cap)
        src, dst = np.nonzero(mask)
        m = len(src)
        # variables: the arc flows, then the one overload factor σ (caps × (1 + σ))
        A_eq = np.zeros((n, m + 1))
        A_eq[src, np.arange(m)] = 1.0
        A_ub = np.zeros((n, m + 1))
        A_ub[dst, np.arange(m)] = 1.0
        A_ub[:, m] = -0.9 * cap
        c = np.concatenate([tau[src, dst], [1e3 * 0.9 * cap.sum()]])
        ref = linprog(c, A_ub=A_ub, b_ub=0.9 * cap, A_eq=A_eq, b_eq=lam, method="highs")
        f = lam[:, None] * x
        sigma = max(float(np.max(f.sum(axis=0) / (0.9 * cap))) - 1.0, 0.0)
        ours = float((tau * f).sum() + 1e3 * 0.9 * cap.sum() * sigma)
        assert ours == pytest.approx(ref.fun, rel=1e-5, abs=1e-5)  # Clarabel: interior point
        assert np.all(x[~mask] == 0) and np.allclose(x.sum(axis=1), 1.0)


def test_tabulated_costs_match_closed_forms_for_counts_and_fallback():
    """cost_row/cost_matrix look integer workloads up in a table (the simulator's probes are
    request counts); the values must equal the closed forms, also past the first table size,
    and fractional workloads must take the direct path with the same closed forms."""
    import math

    from lbtheory.models import SoftplusLatency

    t0, t1, t2, t3 = 1.2, 0.02, 40.0, 4.0
    bank = ModelBank([SoftplusLatency(t0, t1, t2, t3), MM1Latency(10.0, 2.0)])

    def hand(kind, j, N):
        if j == 1:
            return (N + 2.0) / 10.0 if kind == "latency" else (N + 2.0) ** 2 / 20.0
        u = (N - t2) / t3
        lat = t0 + t1 * t3 * math.log1p(math.exp(u))
        d1 = t1 / (1.0 + math.exp(-u))
        return lat if kind == "latency" else lat * lat / (lat - N * d1)

    tables = CostTables(bank)
    for kind in ("latency", "gradient"):
        for w, tab in (((0.0, 3.0), tables), ((39.0, 41.0), tables), ((250.0, 7.0), tables),
                       ((12.5, 3.0), tables), ((39.0, 41.0), None)):
            v = view(workload=w, models=bank, tables=tab)
            row = cost_row(CostKind(kind), v, 0)
            mat = cost_matrix(CostKind(kind), [v, v])
            for j in range(2):
                expect = hand(kind, j, w[j]) + 2.0 * DELAYS[0, j]
                assert row[j] == pytest.approx(expect, rel=1e-12)
                assert mat[1, j] == pytest.approx(hand(kind, j, w[j]) + 2.0 * DELAYS[1, j],
                                                  rel=1e-12)
        # the integer workloads really went through the table (grown past N = 250)
        assert tables.get(CostKind(kind)).table.shape[0] > 250
