"""The compiled engine against the reference engine (issue 21).

The oracle is the reference engine itself (an independent implementation: a ``heapq`` loop over
Python objects, the numpy routers of :mod:`lbtheory.routers`): same scenario, router, seed and
arrivals ⇒ the same per-request records, bit for bit, for every cell policy of the registry,
every server kind, both leaf policies, bursts, outages, error aversion, affinity, estimation
and a user's numba kernel — and through every pause of the compiled loop (growing arrays, new
cost tables, the leaf stream's refills, MNLB's LP, refits). Then the choice of engine, the run
limits, and the numba twins of numpy's random draws.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numba
import numpy as np
import pytest

from lbtheory.errors import ParameterError, TopologyError
from lbtheory.models import model_to_dict
from lbtheory.registry import make_router, policy_names
from lbtheory.routers import FlowRouter, JSQRouter, PowerOfDRouter
from lbtheory.routers._baselines import integers_below
from lbtheory.sim import (
    Affinity,
    Estimation,
    KernelRouter,
    _compiled,
    appendix_b_scenario,
    scenario_from_dict,
    simulate,
)
from lbtheory.sim import _kernels_state as ks

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_sim import _fluid_scenario, three_cells_with_residency  # noqa: E402

ARRAYS = ("latency_s", "wait_s", "network_s", "completion_s", "error_s", "routed",
          "cell_errors", "utilisation", "mean_workload", "series_t", "series_workload",
          "routing_t", "routing_x", "arrival_s", "arrival_workload", "outcome", "cell")
COUNTS = ("requests", "completed", "errors", "in_flight", "events", "cache_hits", "status")


def assert_same_run(a, b):
    """Every per-request and per-cell record equal to the last bit, and the same models."""
    assert (a.engine, b.engine) == ("compiled", "reference")
    for k in COUNTS:
        assert getattr(a, k) == getattr(b, k), k
    for k in ARRAYS:
        x, y = np.asarray(getattr(a, k)), np.asarray(getattr(b, k))
        assert x.shape == y.shape and x.tobytes() == y.tobytes(), k
    assert [model_to_dict(m) for m in a.models] == [model_to_dict(m) for m in b.models]


def both(sc, make, duration, seed=7, **kw):
    """(compiled, reference) runs of a fresh router from ``make()``."""
    return (simulate(sc, make(), duration_s=duration, seed=seed, engine="compiled", **kw),
            simulate(sc, make(), duration_s=duration, seed=seed, engine="reference", **kw))


# the formula model and constant rates: its outage overflows queues under every policy
APPB = appendix_b_scenario(3, n_cells=4, burst=True, outage=True, duration_s=20.0,
                           fit_latency=False, rate_variation=None)


@pytest.mark.parametrize("policy", policy_names("cells"))
def test_every_cell_policy_bursts_and_outages(policy):
    """Appendix-B servers, p2c leaves, a burst and outages (the models rescale, MNLB re-solves,
    RIF's replicas change): the registry's twelve cell policies."""
    a, b = both(APPB, lambda: make_router(policy), 20.0)
    assert_same_run(a, b)
    assert a.requests > 4000 and a.errors > 0  # the outage overflows some queues


CASES = {
    "mmc cells, residency, disc-lat": (three_cells_with_residency(),
                                       lambda: make_router("disc-lat"), 12.0),
    "mmc cells, residency, flow-grad": (three_cells_with_residency(),
                                        lambda: make_router("flow-grad"), 12.0),
    "mmc, leaf round robin, jsq": (dataclasses.replace(three_cells_with_residency(),
                                                       leaf_policy="rr"),
                                   lambda: make_router("jsq"), 12.0),
    "jsq per replica, lowest ties": (three_cells_with_residency(),
                                     lambda: JSQRouter(per_replica=True, ties="lowest"), 12.0),
    "power of three per replica": (three_cells_with_residency(),
                                   lambda: PowerOfDRouter(d=3, per_replica=True), 12.0),
    "rate cells, flow-grad": (_fluid_scenario(4.0), lambda: FlowRouter("gradient", stepsize=1.0),
                              60.0),
    "rate cells, disc-lat": (_fluid_scenario(4.0), lambda: make_router("disc-lat"), 60.0),
    "10 cells (numpy's pairwise sums), flow-lat": (appendix_b_scenario(2, n_cells=10),
                                                   lambda: make_router("flow-lat"), 8.0),
    "10 cells, disc-rif": (appendix_b_scenario(2, n_cells=10),
                           lambda: make_router("disc-rif"), 8.0),
    "error aversion, flow-grad": (APPB, lambda: make_router("flow-grad", error_aversion=True),
                                  20.0),
    "affinity and aversion, flow-rif": (dataclasses.replace(APPB, affinity=Affinity()),
                                        lambda: make_router("flow-rif", error_aversion=True,
                                                            affinity=True), 20.0),
    "affinity, mnlb": (dataclasses.replace(APPB, affinity=Affinity()),
                       lambda: make_router("mnlb", affinity=True), 20.0),
    "estimation with noise, flow-lat": (
        dataclasses.replace(APPB, estimation=Estimation(period_s=3.0, noise_eps=0.3)),
        lambda: make_router("flow-lat"), 20.0),
    "estimation, affinity, disc-grad": (
        dataclasses.replace(APPB, estimation=Estimation(period_s=3.0), affinity=Affinity()),
        lambda: make_router("disc-grad", affinity=True), 20.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_server_kinds_leaves_wrappers_and_estimation(case):
    sc, make, T = CASES[case]
    a, b = both(sc, make, T)
    assert_same_run(a, b)
    assert a.completed > 500
    if sc.affinity is not None:
        assert a.cache_hits > 0
    if sc.estimation is not None:  # the fits moved away from the declared models
        assert [model_to_dict(m) for m in a.models] != \
            [model_to_dict(c.service) for c in sc.network.cells]


def busy_pair(kind="mmc"):
    """One busy source and a far cell: ~4,000 req/s, ~400 requests on the wire, ~100 at each
    cell, hundreds of workload changes per probe delay — every array of the compiled engine
    outgrows its first size."""
    cell = {"replicas": 4, "service": {"model": "mm1", "capacity": 4800.0, "K": 40.0}}
    return scenario_from_dict({
        "cells": [{"name": "a", "arrival_rate": 4000.0, **cell},
                  {"name": "b", "arrival_rate": 0.0, **cell}],
        "arcs": [{"from": "a", "to": "a", "delay": 0.05}, {"from": "a", "to": "b", "delay": 0.1}],
        "simulation": {"server": {"kind": kind, "slots": 60, "mean_service_s": 0.05,
                                  "queue_limit": None}, "probe_period_s": 0.005}})


def test_every_pause_of_the_compiled_loop(monkeypatch):
    """Heap, history, series, routing record and cost table grow; the leaf stream refills;
    the records stay bit-identical to the reference engine's."""
    seen = []
    loop = _compiled._Run.loop

    def spy(self):
        loop(self)
        seen.append(dict(self.pauses))

    monkeypatch.setattr(_compiled._Run, "loop", spy)
    kw = dict(record_period_s=0.001, record_routing_every=1)
    a, b = both(busy_pair(), lambda: make_router("flow-lat"), 10.0, **kw)
    assert_same_run(a, b)
    (p,) = seen
    for code in (ks.P_GROW_HEAP, ks.P_GROW_HISTORY, ks.P_GROW_SERIES, ks.P_GROW_ROUTING,
                 ks.P_COST_TABLE, ks.P_LEAF_STREAM):
        assert p.get(code, 0) >= 1, (code, p)
    assert a.requests > 35_000 and a.series_t.size > 9_000
    assert a.mean_workload.max() > 64  # beyond the first cost table


def test_rate_table_refits_outages_and_lp_pauses(monkeypatch):
    seen = []
    loop = _compiled._Run.loop
    monkeypatch.setattr(_compiled._Run, "loop", lambda self: (loop(self),
                                                              seen.append(dict(self.pauses))))
    a, b = both(_fluid_scenario(32.0), lambda: make_router("flow-grad"), 20.0)
    assert_same_run(a, b)
    sc = dataclasses.replace(APPB, estimation=Estimation(period_s=2.0))
    assert_same_run(*both(sc, lambda: make_router("mnlb"), 20.0))
    assert_same_run(*both(APPB, lambda: make_router("disc-lat"), 20.0))
    rate, refit, outage = seen
    assert rate.get(ks.P_RATE_TABLE, 0) >= 1 and a.mean_workload.max() > 64
    # refits every 2 s; MNLB's LP at 0 and 10 s
    assert refit.get(ks.P_REFIT) == 9 and refit.get(ks.P_MNLB_SOLVE) == 2
    assert outage.get(ks.P_OUTAGE, 0) == 2 * len(APPB.outages)


@numba.njit
def _least_loaded(t, source, workload, replicas, delays, mask, state, rng):
    """A user kernel: the least probed requests per replica (random ties); state[0] counts
    decisions; with state[2] > 0 it breaks residency on purpose."""
    best, best_w = -1, np.inf
    for j in range(workload.shape[0]):
        if mask[source, j]:
            w = workload[j] / replicas[j] + 1e-9 * rng.random()
            if w < best_w:
                best, best_w = j, w
    state[0] += 1.0
    if state[2] > 0:
        for j in range(workload.shape[0]):
            if not mask[source, j]:
                return j
    return best


@numba.njit
def _count_rounds(t, W, replicas, delays, mask, sources, state):
    state[1] += W[sources[0]].sum() * 0.0 + 1.0  # allocates: the user loop may


def test_user_kernel_router_runs_compiled_and_matches_the_reference():
    sc = three_cells_with_residency()
    make = lambda: KernelRouter(_least_loaded, _count_rounds, np.zeros(3), "least")  # noqa: E731
    a, b = both(sc, make, 8.0)
    assert_same_run(a, b)
    assert a.policy == "least" and a.completed > 800
    bad = KernelRouter(_least_loaded, _count_rounds, np.array([0.0, 0.0, 1.0]), "rogue")
    msgs = []
    for engine in ("compiled", "reference"):
        with pytest.raises(TopologyError, match="router rogue sent a request from cell 2 to "
                                                "cell 0, which is not an admissible arc") as e:
            simulate(sc, bad, duration_s=8.0, seed=7, engine=engine)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
    with pytest.raises(ParameterError, match="numba.njit function"):
        KernelRouter(lambda *a: 0)


class PythonRouter:
    """A user's Python router (the contract): runs on the reference engine only."""

    name = "first"

    def init(self, seed):
        return None

    def observe(self, state, view):
        return state

    def route(self, state, view, rng):
        return int(np.flatnonzero(view.eligible)[0]), state


def test_auto_falls_back_to_the_reference_and_says_why():
    sc = three_cells_with_residency()
    res = simulate(sc, PythonRouter(), duration_s=2.0, seed=1)
    assert res.engine == "reference" and "PythonRouter has no compiled kernel" in \
        res.engine_note
    # each source's first admissible cell: eu → eu, us → eu, asia → us
    np.testing.assert_array_equal(res.routed.sum(axis=1), res.routed[[0, 1, 2], [0, 0, 1]])
    with pytest.raises(ParameterError, match="engine='compiled' cannot run this: first"):
        simulate(sc, PythonRouter(), duration_s=2.0, seed=1, engine="compiled")
    tokens = JSQRouter(load="tokens")
    with pytest.raises(ParameterError, match="no token loads"):  # the reference's own error
        simulate(sc, tokens, duration_s=2.0, seed=1)
    with pytest.raises(ParameterError, match="engine"):
        simulate(sc, PythonRouter(), duration_s=2.0, seed=1, engine="fast")
    assert simulate(sc, make_router("rand"), duration_s=2.0, seed=1).engine == "compiled"


def test_runs_over_the_limits_are_refused_before_anything_is_generated(monkeypatch):
    """The house limits (Scenario.check_run, LBTHEORY_MAX_MEMORY_GB) hold on both engines, and
    the compiled engine's cost tables count against the memory limit too."""
    sc = three_cells_with_residency()        # 120 req/s
    for engine in ("compiled", "reference"):
        with pytest.raises(ParameterError, match="expected requests .* more than the 8 GiB "
                                                 "limit .LBTHEORY_MAX_MEMORY_GB"):
            simulate(sc, make_router("rand"), duration_s=1e7, seed=0, engine=engine)
        with pytest.raises(ParameterError, match="a workload series sampled every 1e-09 s .* "
                                                 "more than the 8 GiB limit"):
            simulate(sc, make_router("rand"), duration_s=100.0, seed=0, record_period_s=1e-9,
                     engine=engine)
    from lbtheory._checks import check_memory

    def tables_limited(need, what):  # the limit as if it were 64 rows of 2 cells
        with monkeypatch.context() as m:
            m.setenv("LBTHEORY_MAX_MEMORY_GB", str(64 * 2 * 8 / 2**30))
            check_memory(need, what)

    monkeypatch.setattr(_compiled, "check_memory", tables_limited)
    with pytest.raises(ParameterError, match="a cost table for a queue of 127 requests .* more "
                                             "than the"):
        simulate(busy_pair(), make_router("flow-lat"), duration_s=2.0, seed=0)


@pytest.mark.parametrize("k", [1, 2, 3, 7, 10, 1000, 2**20 + 3, 2**31, 2**32 - 1])
def test_integers_below_is_numpys_integers(k):
    """The shared kernels' allocation-free draw, interleaved with doubles (32-bit draws are
    buffered halves of 64-bit ones)."""
    r1, r2 = np.random.default_rng(k), np.random.default_rng(k)
    mine = [(integers_below(r1, k), r1.random()) for _ in range(200)]
    numpys = [(int(r2.integers(k)), r2.random()) for _ in range(200)]
    assert mine == numpys


def test_weighted_draw_is_a_bisection_of_numpys_cumsum():
    """The one weighted draw (``cumulative`` / ``sample_index``, both engines) against an oracle:
    numpy's cumsum, one ``rng.random()`` × the total, ``bisect_right``, and the last positive
    weight when rounding lands on the total."""
    import bisect

    from lbtheory.routers import cumulative, cumulative_kernel, sample_index, sample_index_kernel

    def oracle(cum, rng):
        u = rng.random() * cum[-1]
        j = min(bisect.bisect_right(cum, u), len(cum) - 1)
        while j > 0 and cum[j - 1] == cum[j] and u >= cum[-1]:
            j -= 1
        return j

    rng0 = np.random.default_rng(3)
    drawn = np.zeros(12, int)
    for _ in range(300):
        w = rng0.random(int(rng0.integers(1, 12))) * (rng0.random() < 0.8)
        w[rng0.random(w.size) < 0.3] = 0.0
        if not w.any():
            w[-1] = 1.0
        out = np.empty(w.size)
        cumulative_kernel(w, out)
        assert out.tolist() == np.cumsum(w).tolist() == cumulative(w).tolist()
        seed = int(rng0.integers(1 << 30))
        r1, r2, r3 = (np.random.default_rng(seed) for _ in range(3))
        got = [sample_index_kernel(out, r1) for _ in range(5)]
        assert got == [sample_index(cumulative(w), r2) for _ in range(5)] == \
            [oracle(np.cumsum(w).tolist(), r3) for _ in range(5)]
        assert all(w[j] > 0 for j in got)  # a zero weight is never drawn
        np.add.at(drawn, got, 1)
    assert drawn[:5].min() > 0


def test_heap_pops_in_heapq_order_with_ties():
    """The compiled clock against the reference's ``heapq`` of (time, sequence, …): many equal
    times (push order must break them), pushes and pops interleaved."""
    import heapq

    from lbtheory.sim._kernels_state import I_HEAP_N, N_I, heap_pop, heap_push

    rng = np.random.default_rng(5)
    h_t, h_i, ci = np.zeros(512), np.zeros((512, 4), np.int64), np.zeros(N_I, np.int64)
    ref, seq, mine, theirs = [], 0, [], []
    for step in range(3000):
        if rng.random() < 0.55 or not ref:
            t, kind = float(rng.integers(0, 20)), int(rng.integers(0, 9))
            seq += 1
            heapq.heappush(ref, (t, seq, kind, step, -step))
            heap_push(h_t, h_i, ci, t, kind, step, -step)
        else:
            theirs.append(heapq.heappop(ref)[2:])
            mine.append((int(h_i[0, 1]), int(h_i[0, 2]), int(h_i[0, 3])))
            heap_pop(h_t, h_i, ci)
        assert ci[I_HEAP_N] == len(ref)
    assert mine == theirs and len(mine) > 1000


def test_routing_records_are_a_flow_routers_wrapped_or_not_and_nobody_elses():
    sc = dataclasses.replace(APPB, affinity=Affinity())
    wrapped = both(sc, lambda: make_router("flow-grad", error_aversion=True, affinity=True),
                   20.0, record_routing_every=7)
    assert_same_run(*wrapped)
    # a round at 0 and every 10 ms: every 7th of ≈ 2,000 rounds
    assert wrapped[0].routing_t.size in (285, 286) and wrapped[0].routing_sources == (0, 1, 2, 3)
    plain = both(sc, lambda: make_router("rand"), 20.0, record_routing_every=7)
    assert_same_run(*plain)
    assert plain[0].routing_t.size == 0
