"""Event simulator against queueing theory (Erlang C, M/M/1, M/M/1/K), hand-checked service times,
the fluid herding oracle of THEORY §3/§12, conservation, residency and determinism — each oracle
on both engines (the compiled one and the reference, fixture ``sim``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lbtheory.errors import DataFormatError, ParameterError, TopologyError
from lbtheory.registry import make_router
from lbtheory.routers import FlowRouter
from lbtheory.sim import appendix_b_scenario, generate_arrivals, scenario_from_dict, simulate


@pytest.fixture(params=["compiled", "reference"])
def sim(request):
    """``simulate`` on one engine (issue 21: every oracle runs on both); checks it ran there."""
    def run(*args, **kwargs):
        res = simulate(*args, engine=request.param, **kwargs)
        assert res.engine == request.param and not res.engine_note
        return res
    return run


def one_cell(lam, slots, mean_s, queue_limit=None, k=1):
    return scenario_from_dict({
        "cells": [{"name": "a", "replicas": k, "arrival_rate": lam,
                   "service": {"model": "mm1", "capacity": slots * k / mean_s, "K": 1.0}}],
        "arcs": [{"from": "a", "to": "a", "delay": 0.0}],
        "simulation": {"server": {"kind": "mmc", "slots": slots, "mean_service_s": mean_s,
                                  "queue_limit": queue_limit}, "probe_period_s": 1.0}})


def erlang_c_wait(c, lam, mu):
    """Mean wait in queue of M/M/c (textbook Erlang C): Wq = C(c, a) / (cμ − λ), a = λ/μ."""
    a = lam / mu
    top = a ** c / math.factorial(c) * c / (c - a)
    C = top / (sum(a ** k / math.factorial(k) for k in range(c)) + top)
    return C / (c * mu - lam)


@pytest.mark.parametrize("c, rho, duration", [(1, 0.5, 4000.0), (1, 0.9, 16000.0),
                                              (4, 0.5, 1000.0), (4, 0.9, 2400.0)])
def test_mmc_mean_wait_matches_erlang_c(c, rho, duration, sim):
    mu = 10.0                       # per slot (mean service 0.1 s)
    lam = rho * c * mu
    exact = erlang_c_wait(c, lam, mu)
    if c == 1:                      # M/M/1 closed form, independently: Wq = ρ/(μ − λ)
        assert exact == pytest.approx(rho / (mu - lam), rel=1e-12)
    # R independent replications (the waits of one run are strongly autocorrelated near
    # ρ = 0.9 and heavy-tailed, so batch means underestimate the error); 10% warm-up dropped
    R = 16
    waits, sojourns, utils = [], [], []
    for k in range(R):
        res = sim(one_cell(lam, c, 1.0 / mu), make_router("rand"), duration_s=duration / R,
                       seed=700 + k)
        wait, lat = res.wait_s[res.done], res.latency_s[res.done]  # in arrival order
        warm = len(wait) // 10
        waits.append(wait[warm:].mean())
        sojourns.append(lat[warm:].mean())
        utils.append(res.utilisation[0])
    est, se = float(np.mean(waits)), float(np.std(waits, ddof=1) / np.sqrt(R))
    assert abs(est - exact) < 3.3 * se, (est, exact, se)   # t(15), two-sided 99.5%
    assert se < 0.25 * exact        # informative (heavy tails near ρ = 0.9 widen it)
    assert np.mean(utils) == pytest.approx(rho, rel=0.03)
    # no network: latency = wait + service, mean 1/μ more than the wait
    assert np.mean(sojourns) - est == pytest.approx(1 / mu, rel=0.03)


def test_mm1k_overflow_rate_and_conservation(sim):
    # M/M/1 with room for 1 in service + 2 waiting (K = 3), ρ = 2:
    # blocking P_K = (1 − ρ) ρ^K / (1 − ρ^{K+1}) = (−1)(8)/(−15) = 8/15
    res = sim(one_cell(20.0, 1, 0.1, queue_limit=2), make_router("rand"),
                   duration_s=1500.0, seed=3)
    p = res.errors / res.requests
    assert abs(p - 8 / 15) < 4 * np.sqrt(p * (1 - p) / res.requests) + 0.005
    assert res.requests == res.completed + res.errors + res.in_flight
    assert 0 <= res.in_flight <= 3


def two_cell_appendix_b(lam=0.05, tau=0.02, probe_period_s=10.0):
    return scenario_from_dict({
        "cells": [{"name": "a", "replicas": 1, "arrival_rate": lam,
                   "service": {"model": "mm1", "capacity": 6.0, "K": 2.0}},
                  {"name": "b", "replicas": 1, "arrival_rate": 0.0,
                   "service": {"model": "mm1", "capacity": 6.0, "K": 2.0}}],
        "arcs": [{"from": "a", "to": "b", "delay": tau}],
        "simulation": {"cells": {"b": {"prefill_s_per_token": 0.001,
                                       "decode_s_per_token": 0.02}},
                       "probe_period_s": probe_period_s}})


def test_appendix_b_server_latency_is_network_plus_prefill_plus_decode(sim):
    sc = two_cell_appendix_b()
    res = sim(sc, make_router("rand"), duration_s=4000.0, seed=11)
    arr = generate_arrivals(sc, 4000.0, 11)
    done = np.isfinite(res.latency_s)
    assert res.completed > 150 and done.sum() == res.completed
    np.testing.assert_array_equal(done, res.done)
    # by hand: a request alone on the server takes 2τ + P·t_p + D·t_d; per-request arrays are
    # in workload order, so request k's latency is the k-th arrival's
    R = res.requests
    assert R == arr.arrival_s.size and res.arrival_s.tobytes() == arr.arrival_s.tobytes()
    expected = 2 * 0.02 + arr.prompt_tokens[:R] * 0.001 + arr.output_tokens[:R] * 0.02
    alone = res.wait_s == 0.0
    assert alone.sum() > 0.9 * res.completed
    np.testing.assert_allclose(res.latency_s[alone], expected[alone], rtol=1e-12)
    np.testing.assert_allclose(res.network_s[done], 0.04)
    # completion_s is at the cell (the answer's way back, τ, is in the latency):
    # completion − latency + τ is the request's own arrival time
    np.testing.assert_allclose(res.completion_s[done] - res.latency_s[done] + 0.02,
                               res.arrival_s[done], rtol=0, atol=1e-9)


def test_same_seed_is_bit_identical_and_other_seed_differs(sim):
    sc = two_cell_appendix_b(lam=1.0, probe_period_s=0.05)
    r1 = sim(sc, make_router("flow-grad"), duration_s=40.0, seed=5)
    r2 = sim(sc, make_router("flow-grad"), duration_s=40.0, seed=5)
    r3 = sim(sc, make_router("flow-grad"), duration_s=40.0, seed=6)
    assert r1.latency_s.tobytes() == r2.latency_s.tobytes()
    assert r1.series_workload.tobytes() == r2.series_workload.tobytes()
    assert (r1.requests, r1.events) == (r2.requests, r2.events)
    assert r1.latency_s.tobytes() != r3.latency_s.tobytes()


def three_cells_with_residency():
    cells = [{"name": n, "replicas": k, "arrival_rate": lam,
              "service": {"model": "mm1", "capacity": 40.0 * k, "K": 4.0 * k}}
             for n, k, lam in (("eu", 2, 60.0), ("us", 3, 40.0), ("asia", 1, 20.0))]
    arcs = [{"from": "eu", "to": "eu", "delay": 0.0},      # eu may not leave the EU
            {"from": "us", "to": "us", "delay": 0.0}, {"from": "us", "to": "eu", "delay": 0.04},
            {"from": "us", "to": "asia", "delay": 0.09}, {"from": "asia", "to": "asia", "delay": 0},
            {"from": "asia", "to": "us", "delay": 0.09}]
    return scenario_from_dict({"cells": cells, "arcs": arcs, "simulation": {
        "server": {"kind": "mmc", "slots": 8, "mean_service_s": 0.2, "queue_limit": 20},
        "probe_period_s": 0.02}})


@pytest.mark.parametrize("policy", ["disc-lat", "flow-grad", "rand", "mnlb", "rr", "jsq", "p2c"])
def test_residency_is_never_violated_and_conservation_holds(policy, sim):
    sc = three_cells_with_residency()
    res = sim(sc, make_router(policy), duration_s=12.0, seed=2)
    assert res.routed[0, 1] == 0 and res.routed[0, 2] == 0 and res.routed[2, 0] == 0
    assert res.routed.sum() == res.requests
    assert res.requests == res.completed + res.errors + res.in_flight
    assert res.completed > 0.9 * res.requests


def herding_scenario():
    """One frontend, two identical cells at τ = 0.05 s (T = 2τ = 0.1 s). Each cell has 200
    slots of mean 0.1 s, so μ(N) = 10 N exactly in the range visited: a = μ' = 10 /s, aT = 1."""
    cell = {"model": "mm1", "capacity": 2000.0, "K": 1.0}
    return scenario_from_dict({
        "cells": [{"name": "f", "replicas": 1, "arrival_rate": 1200.0, "service": cell},
                  {"name": "a", "replicas": 1, "arrival_rate": 0.0, "service": cell},
                  {"name": "b", "replicas": 1, "arrival_rate": 0.0, "service": cell}],
        "arcs": [{"from": "f", "to": "a", "delay": 0.05}, {"from": "f", "to": "b", "delay": 0.05}],
        "simulation": {"server": {"kind": "mmc", "slots": 200, "mean_service_s": 0.1,
                                  "queue_limit": None}, "probe_period_s": 0.002}})


def test_discrete_routing_herds_and_flow_routing_does_not(sim):
    sc = herding_scenario()
    lam, a, T = 1200.0, 10.0, 0.1
    kw = dict(duration_s=6.0, seed=4, record_period_s=0.002)
    disc = sim(sc, make_router("disc-rif"), **kw)
    # flow: the loop is s² + a s + ηλ e^{−sT}; THEORY §12: K_crit T² = 1.134915 at aT = 1,
    # i.e. η_crit = 0.0946; we run at η = 0.03 (K T² = 0.36)
    flow = sim(sc, FlowRouter("rif", stepsize=0.03), **kw)
    keep = disc.series_t >= 2.0
    d_disc = (disc.series_workload[:, 1] - disc.series_workload[:, 2])[keep]
    d_flow = (flow.series_workload[:, 1] - flow.series_workload[:, 2])[keep]
    # relay limit cycle of THEORY §3: peak |N_a − N_b| ≈ (λ/a)(1 − e^{−aT}) = 75.85
    peak = (lam / a) * (1 - math.exp(-a * T))
    assert np.percentile(np.abs(d_disc), 95) == pytest.approx(peak, rel=0.2)
    # period: the relay switches T after each zero crossing of N_a − N_b; from the peak it decays
    # towards −λ/a and crosses zero after s = ln(2 − e^{−aT})/a (by hand: solve
    # −λ/a + (peak + λ/a) e^{−as} = 0). Period = 2(T + s) = 0.298 s here; → 4T as aT → 0,
    # THEORY §12's value. Count sign changes of the difference (two per period).
    signs = np.sign(d_disc[np.abs(d_disc) > 15])
    crossings = np.count_nonzero(np.diff(signs) != 0)
    period = 2 * (disc.series_t[keep][-1] - disc.series_t[keep][0]) / crossings
    assert period == pytest.approx(2 * (T + math.log(2 - math.exp(-a * T)) / a), rel=0.1)
    # flow routing keeps only Poisson noise: sd of N_a − N_b ≈ √(2·60) ≈ 11 ≪ the herding swing
    assert np.std(d_flow) < 20 < 40 < np.std(d_disc)


def test_outage_shifts_rand_by_replicas_and_bursts_add_arrivals(sim):
    sc = scenario_from_dict({
        "cells": [{"name": "a", "replicas": 4, "arrival_rate": 30.0,
                   "service": {"model": "mm1", "capacity": 40.0, "K": 4.0}},
                  {"name": "b", "replicas": 4, "arrival_rate": 0.0,
                   "service": {"model": "mm1", "capacity": 40.0, "K": 4.0}}],
        "arcs": [{"from": "a", "to": "a", "delay": 0.0}, {"from": "a", "to": "b", "delay": 0.01}],
        "simulation": {"server": {"kind": "mmc", "slots": 4, "mean_service_s": 0.4},
                       "probe_period_s": 0.01,
                       "outages": [{"cell": "a", "start_s": 100.0, "end_s": 200.0,
                                    "replicas": 1}],
                       "bursts": [{"cell": "a", "start_s": 200.0, "end_s": 300.0,
                                   "factor": 2.0}]}})
    res = sim(sc, make_router("rand"), duration_s=300.0, seed=9)
    # λ·t: 30·200 + 60·100 = 12000 arrivals expected (Poisson sd ≈ 110)
    assert abs(res.requests - 12000) < 4 * math.sqrt(12000)
    # share to a: 1/2 outside the outage, 1/5 during it (replicas 1 vs 4):
    # (0.5·30·100 + 0.2·30·100 + 0.5·60·100) / 12000 = 0.425
    share = res.routed[0, 0] / res.requests
    assert abs(share - 0.425) < 4 * math.sqrt(0.425 * 0.575 / res.requests) + 0.01


def test_bad_scenarios_raise_typed_errors_naming_the_field():
    sc = two_cell_appendix_b()
    with pytest.raises(DataFormatError, match=r"bursts\[0\].end_s.*outside the horizon"):
        bad = scenario_from_dict({**_base_dict(), "simulation": {"bursts": [
            {"cell": "a", "start_s": 10.0, "end_s": 500.0, "factor": 2.0}]}})
        simulate(bad, make_router("rand"), duration_s=100.0, seed=0)
    with pytest.raises(DataFormatError, match="prefill_s_per_token: expected a positive"):
        scenario_from_dict({**_base_dict(), "simulation": {"server": {
            "prefill_s_per_token": -1.0}}})
    with pytest.raises(DataFormatError, match="mean_service_s must be finite"):
        scenario_from_dict({**_base_dict(), "simulation": {"server": {
            "mean_service_s": float("nan")}}})
    with pytest.raises(TopologyError, match="replicas must be an integer"):
        d = _base_dict()
        d["cells"][1]["replicas"] = 0
        scenario_from_dict(d)
    with pytest.raises(TopologyError, match="no outgoing arc"):
        d = _base_dict()
        d["cells"][1]["arrival_rate"] = 1.0
        scenario_from_dict(d)
    with pytest.raises(ParameterError, match="duration_s"):
        simulate(sc, make_router("rand"), duration_s=-1.0, seed=0)


def _base_dict():
    return {"cells": [{"name": "a", "replicas": 1, "arrival_rate": 1.0,
                       "service": {"model": "mm1", "capacity": 6.0, "K": 2.0}},
                      {"name": "b", "replicas": 1, "arrival_rate": 0.0,
                       "service": {"model": "mm1", "capacity": 6.0, "K": 2.0}}],
            "arcs": [{"from": "a", "to": "b", "delay": 0.01}]}


# ----------------------------------------------------------------------------- Appendix B
def _server_rate(spec, EP, ED):
    """THEORY §11.1 item 6, written out here: min(1/(E[P] t_p), 8/(E[D] t_d)) req/s."""
    return min(1.0 / (EP * spec.prefill_s_per_token), 8.0 / (ED * spec.decode_s_per_token))


def test_appendix_b_generator_follows_theory_11_1():

    sizes, ratios_p, ratios_d = set(), [], []
    EP, ED = 16 + 1.5 * 300, 4 + 1.2 * 40            # shifted-Gamma means (item 5 defaults)
    for seed in range(30):
        sc = appendix_b_scenario(seed)
        net = sc.network
        sizes.add(net.n)
        assert 2 <= net.n <= 10
        cap = np.array([c.replicas * _server_rate(s, EP, ED)
                        for c, s in zip(net.cells, sc.servers)])
        assert net.arrival_rates.sum() == pytest.approx(0.8 * cap.sum(), rel=1e-12)
        np.testing.assert_allclose(net.max_rates, cap, rtol=1e-12)   # fitted μ̄ = 1/θ1
        assert all(c.replicas >= 1 for c in net.cells)
        assert all(s.decode_engines * s.slots_per_engine == 8 and s.queue_limit == 32
                   for s in sc.servers)
        d = net.delays
        assert np.all(np.diag(d) == 0) and net.adjacency.all()
        off = d[~np.eye(net.n, dtype=bool)]
        assert np.all(((off >= 0.0005) & (off <= 0.0025)) | ((off >= 0.015) & (off <= 0.125)))
        ratios_p += [s.prefill_s_per_token / 0.25e-3 for s in sc.servers]
        ratios_d += [s.decode_s_per_token / 25e-3 for s in sc.servers]
    assert len(sizes) >= 6
    r = np.array(ratios_p + ratios_d)                  # LogNormal, mean 1, sd 0.2 (item 4)
    assert abs(r.mean() - 1.0) < 4 * 0.2 / np.sqrt(r.size)
    assert r.std() == pytest.approx(0.2, rel=0.15)
    a, b = appendix_b_scenario(7), appendix_b_scenario(7)
    assert a.network.names == b.network.names and a.servers == b.servers
    np.testing.assert_array_equal(a.network.arrival_rates, b.network.arrival_rates)
    assert appendix_b_scenario(8).servers != a.servers


def test_appendix_b_burst_and_outage_reach_95_percent():

    EP, ED = 16 + 1.5 * 300, 4 + 1.2 * 40
    for seed in range(5):
        sc = appendix_b_scenario(seed, burst=True, outage=True, duration_s=600.0)
        net = sc.network
        rate = np.array([_server_rate(s, EP, ED) for s in sc.servers])
        cap = np.array([c.replicas for c in net.cells]) * rate
        (b,) = sc.bursts
        assert (b.start_s, b.end_s) == (180.0, 420.0)
        lam = net.arrival_rates.copy()
        lam[b.cell] *= b.factor
        assert lam.sum() / cap.sum() == pytest.approx(0.95, rel=1e-9)
        online = np.array([c.replicas for c in net.cells], dtype=float)
        for o in sc.outages:
            assert (o.start_s, o.end_s, o.replicas) == (180.0, 420.0, 1)
            online[o.cell] = 1
        assert net.arrival_rates.sum() / (online * rate).sum() > 0.95


# ----------------------------------------------------------------------------- estimation
def test_latency_estimation_recovers_the_mmc_conditional_mean(sim):
    # FIFO M/M/c, c = 8 slots of mean s = 1 s: a request that finds itself the m-th in the cell
    # waits for m − c departures at rate c/s, so E[latency | m] = s + max(0, m − c)·s/c — a hinge
    # with base s = 1 s, slope 1/μ̄ = s/c = 0.125 s and knee c = 8. The declared model is 10× off.
    d = {"cells": [{"name": "a", "replicas": 1, "arrival_rate": 7.0,
                    "service": {"model": "mm1", "capacity": 80.0, "K": 1.0}}],
         "arcs": [{"from": "a", "to": "a", "delay": 0.0}],
         "simulation": {"server": {"kind": "mmc", "slots": 8, "mean_service_s": 1.0,
                                   "queue_limit": None}, "probe_period_s": 1.0,
                        "estimation": {"window": 2000, "period_s": 50.0}}}
    res = sim(scenario_from_dict(d), make_router("rand"), duration_s=600.0, seed=1)
    (fit,) = res.models
    assert float(fit.base_latency) == pytest.approx(1.0, rel=0.06)
    assert float(fit.max_rate) == pytest.approx(8.0, rel=0.06)
    assert float(fit.knee) == pytest.approx(8.0, rel=0.15)


def test_perturbed_model_scales_its_parameters_and_flow_lat_runs_with_estimation(sim):
    from lbtheory.models import MM1Latency, SoftplusLatency
    from lbtheory.routers import perturb_model

    # every parameter × f (DLB App. B's noise): for a softplus ℓ'(N) = fθ0 + f²(ℓ(N/f) − θ0)
    N = np.linspace(0.0, 50.0, 11)
    m = SoftplusLatency(1.4, 0.04, 30.0, 3.0)
    np.testing.assert_allclose(perturb_model(m, 0.7).latency(N),
                               0.7 * 1.4 + 0.49 * (m.latency(N / 0.7) - 1.4))
    np.testing.assert_allclose(perturb_model(MM1Latency(10.0, 2.0), 0.7).latency(N),
                               (N + 1.4) / 7.0)
    d = {"cells": [{"name": n, "replicas": 1, "arrival_rate": lam,
                    "service": {"model": "mm1", "capacity": 10.0, "K": 1.0}}
                   for n, lam in (("a", 9.0), ("b", 3.0))],
         "arcs": [{"from": "a", "to": "a", "delay": 0.0}, {"from": "a", "to": "b", "delay": 0.01},
                  {"from": "b", "to": "b", "delay": 0.0}],
         "simulation": {"server": {"kind": "mmc", "slots": 4, "mean_service_s": 0.4,
                                   "queue_limit": 50}, "probe_period_s": 0.05,
                        "estimation": {"period_s": 5.0, "noise_eps": 0.3}}}
    res = sim(scenario_from_dict(d), make_router("flow-lat"), duration_s=60.0, seed=2)
    assert res.requests == res.completed + res.errors + res.in_flight
    assert res.routed[0, 1] > 0.1 * res.routed[0].sum()   # a (90% busy alone) spills to b
    # true M/M/4 with mean 0.4 s: ℓ ≈ 0.4 s up to 4 requests, then slope 1/μ̄ = 0.1 s.
    # a runs near its knee (slope identified); b is lightly loaded, only its base is identified.
    # The window holds completed requests only: the long ones that arrived at a high N are
    # still in flight when the cell refits, so the slope comes out low (DLB §6 names this
    # censoring bias) — by ≈10 % on this one minute of data.
    a, b = res.models
    assert float(a.max_rate) == pytest.approx(10.0, rel=0.15)
    assert float(a.base_latency) == pytest.approx(0.4, rel=0.1)
    # b saw ≈150 requests: the mean of ≈150 Exp(0.4 s) is known to ±8 % (1 sd)
    assert float(b.latency(1.0)) == pytest.approx(0.4, rel=0.2)


def failing_cell_scenario():
    """b: 2 servers × 4 slots of mean 4 s = 2 req/s with 1 queue place; Rand sends it 6 req/s."""
    return scenario_from_dict({
        "cells": [{"name": n, "replicas": 2, "arrival_rate": lam,
                   "service": {"model": "mm1", "capacity": 20.0, "K": 1.0}}
                  for n, lam in (("a", 12.0), ("b", 0.0))],
        "arcs": [{"from": "a", "to": "a", "delay": 0.0}, {"from": "a", "to": "b", "delay": 0.01}],
        "simulation": {"server": {"kind": "mmc", "slots": 4, "mean_service_s": 0.4,
                                  "queue_limit": 10},
                       "cells": {"b": {"mean_service_s": 4.0, "queue_limit": 1}},
                       "probe_period_s": 0.05}})


def test_error_aversion_steers_away_from_an_overflowing_cell(sim):
    sc = failing_cell_scenario()
    plain = sim(sc, make_router("rand"), duration_s=200.0, seed=3)
    averse = sim(sc, make_router("rand", error_aversion=True), duration_s=200.0, seed=3)
    # without aversion b receives half (6 req/s) and overflows: error rate ≥ (6 − 2)/12 = 1/3 − …
    assert plain.routed[0, 1] / plain.requests == pytest.approx(0.5, abs=0.02)
    assert plain.error_rate > 0.25
    # with aversion b keeps about p_explore/2 = 2.5% of the traffic once a_ab saturates at 0.95
    assert averse.routed[0, 1] / averse.requests < 0.05
    assert averse.errors < 0.05 * plain.errors


# ----------------------------------------------------------------------------- fluid limit
def _fluid_scenario(m: float):
    """λ × m, μ̄ × m, K × m: the "rate" cells complete at m·μ(N/m), so N/m follows the fluid
    model (8) as m grows, and latency/gradient costs are invariant under the scaling."""
    cell = lambda lam, cap, K: {"replicas": 1, "arrival_rate": lam * m,  # noqa: E731
                                "service": {"model": "mm1", "capacity": cap * m, "K": K * m}}
    return scenario_from_dict({
        "cells": [{"name": "a", **cell(9.0, 10.0, 2.0)}, {"name": "b", **cell(1.0, 6.0, 1.0)}],
        "arcs": [{"from": "a", "to": "a", "delay": 0.0}, {"from": "a", "to": "b", "delay": 0.05},
                 {"from": "b", "to": "b", "delay": 0.0}],
        "simulation": {"server": {"kind": "rate"}, "probe_period_s": 0.1}})


@pytest.mark.parametrize("cost", ["gradient", "latency"])
def test_fluid_limit_workloads_approach_the_cvxpy_equilibrium(cost, sim):
    from lbtheory.equilibrium import solve_equilibrium

    eq = solve_equilibrium(_fluid_scenario(1.0).network, cost)   # CVXPY, scale-free
    errs = []
    for m in (1.0, 4.0, 16.0):
        res = sim(_fluid_scenario(m), FlowRouter(cost, stepsize=1.0), duration_s=120.0,
                       seed=1)
        errs.append(float(np.max(np.abs(res.mean_workload / m - eq.workload))))
    # the error falls with m (≈ 1/m: the birth–death chain's mean vs the fluid N*)
    assert errs[0] > errs[1] > errs[2], errs
    assert errs[2] < 0.1 * float(np.max(eq.workload)) and errs[2] < 0.3 * errs[0], errs


# ----------------------------------------------------------------------------- affinity
def _affinity_scenario(followup, active, lam=(0.05, 0.0), tau=0.02, to_b=True):
    d = {"cells": [{"name": n, "replicas": 1, "arrival_rate": l,
                    "service": {"model": "mm1", "capacity": 6.0, "K": 2.0}}
                   for n, l in zip(("a", "b"), lam)],
         "arcs": [{"from": "a", "to": "a", "delay": tau}]
         + ([{"from": "a", "to": "b", "delay": tau}] if to_b else []),
         "simulation": {"probe_period_s": 1.0,
                        "affinity": {"followup_fraction": followup, "active_sessions": active,
                                     "prefill_saving": 0.45},
                        "server": {"prefill_s_per_token": 0.002, "decode_s_per_token": 0.01}}}
    return scenario_from_dict(d)


def test_prefix_cache_cuts_prefill_by_the_saving(sim):
    # one session (active_sessions = 1, every request a follow-up) and one reachable cell:
    # every request after the first finds its prefix cached
    sc = _affinity_scenario(1.0, 1, to_b=False)
    res = sim(sc, make_router("rand"), duration_s=3000.0, seed=4)
    arr = generate_arrivals(sc, 3000.0, 4)
    assert res.cache_hits == res.requests - 1
    # by hand, a request alone on its server: 2τ + (1 − 0.45)·P·t_p + D·t_d when cached
    cached = 2 * 0.02 + 0.55 * arr.prompt_tokens * 0.002 + arr.output_tokens * 0.01
    got = np.round(np.sort(res.latency_s[res.wait_s == 0.0]), 9)
    assert np.isin(got, np.round(cached, 9)).mean() > 0.95


def test_affinity_router_keeps_sessions_where_their_cache_is(sim):
    # two identical idle cells: Rand sends a follow-up to its session's cell w.p. 1/2, so the
    # hit ratio is 0.65 × 1/2 = 0.325; affinity keeps (almost) every follow-up: ≈ 0.65
    sc = _affinity_scenario(0.65, 20, lam=(0.5, 0.0))
    plain = sim(sc, make_router("rand"), duration_s=2000.0, seed=6)
    sticky = sim(sc, make_router("rand", affinity=True), duration_s=2000.0, seed=6)
    n = plain.requests
    assert abs(plain.cache_hits / n - 0.325) < 4 * np.sqrt(0.325 * 0.675 / n) + 0.01
    # default Ŝ = 0.05 s < one request's latency step 1/6 s: it leaves when its cell is busier
    assert sticky.cache_hits / n > 0.5
    assert np.mean(sticky.latency_s[sticky.done]) < np.mean(plain.latency_s[plain.done])
    # Ŝ = 10 s: every follow-up stays, the hit ratio is the follow-up fraction 0.65
    from lbtheory.routers import AffinityRouter

    always = sim(sc, AffinityRouter(make_router("rand"), saving_s=10.0), duration_s=2000.0,
                      seed=6)
    assert abs(always.cache_hits / n - 0.65) < 4 * np.sqrt(0.65 * 0.35 / n)


def test_wrapped_routers_respect_residency_too(sim):
    import dataclasses

    from lbtheory.sim import Affinity

    sc = dataclasses.replace(three_cells_with_residency(), affinity=Affinity())
    for policy in ("flow-lat", "rand"):
        res = sim(sc, make_router(policy, error_aversion=True, affinity=True),
                       duration_s=10.0, seed=8)
        assert res.routed[0, 1] == 0 and res.routed[0, 2] == 0 and res.routed[2, 0] == 0
        assert res.cache_hits > 0
        assert res.requests == res.completed + res.errors + res.in_flight


def test_appendix_b_y_scaling_keeps_utilisation():

    a, b = appendix_b_scenario(4, y=1.0), appendix_b_scenario(4, y=10.0)
    np.testing.assert_allclose(b.network.arrival_rates, 10 * a.network.arrival_rates)
    for sa, sb in zip(a.servers, b.servers):
        assert sb.decode_s_per_token == pytest.approx(sa.decode_s_per_token / 10)
        assert sb.prefill_s_per_token == pytest.approx(sa.prefill_s_per_token / 10)
    np.testing.assert_allclose(b.network.max_rates, 10 * a.network.max_rates)
