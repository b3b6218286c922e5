"""One result schema for the three simulators (issue 32, item 4): per-request arrays in workload
order with an outcome per request, one policy field, one ``summary()`` with common keys, and a
``status`` that means something — checked against hand-computed runs."""

from __future__ import annotations

import numpy as np
import pytest

from lbtheory.barrier import DecodeConfig, StepTimeModel, simulate_decode
from lbtheory.errors import ParameterError, RequestOutcome, RunStatus
from lbtheory.intelligent import ClusterConfig, IterationTimeModel, make_sim, result_of
from lbtheory.intelligent import simulate as simulate_instances
from lbtheory.registry import make_router
from lbtheory.sim import scenario_from_dict
from lbtheory.sim import simulate as simulate_cells
from lbtheory.stats import LATENCY_QUANTILES, SUMMARY_KEYS
from lbtheory.workloads import trace_from_arrays, workload_from_arrays

LATENCY_KEYS = {"mean"} | {f"p{q:g}" for q in LATENCY_QUANTILES}


def overflowing_cell(queue_limit=2):
    """One M/M/1 cell with room for 3 at ρ = 2: errors, completions and requests in flight."""
    return scenario_from_dict({
        "cells": [{"name": "a", "replicas": 1, "arrival_rate": 20.0,
                   "service": {"model": "mm1", "capacity": 10.0, "K": 1.0}}],
        "arcs": [{"from": "a", "to": "a", "delay": 0.0}],
        "simulation": {"server": {"kind": "mmc", "slots": 1, "mean_service_s": 0.1,
                                  "queue_limit": queue_limit}, "probe_period_s": 1.0}})


def instance_config():
    # base 10 ms, 1 ms per prefill token, 2 ms per decoding request, 0.1 ms per context token
    timing = IterationTimeModel(base_s=0.01, prefill_s_per_token=0.001,
                                attention_s_per_token2=0.0, decode_s_per_seq=0.002,
                                context_s_per_token=1e-4)
    return ClusterConfig(n_instances=1, kv_budget_tokens=1000, max_batch=8,
                         max_prefill_tokens=1000, epoch_s=0.02, timing=timing)


def hand_trace():
    """Prompts (10, 4, 6), decode steps (2, 1, 1) on 2 replicas × 1 slot: tick 0 places r0 → g0,
    r1 → g1 (loads 10, 4; r1 ends); tick 1 places r2 → g1 (loads 11, 6); r0 and r2 end."""
    return trace_from_arrays(np.zeros(3), [10, 4, 6], [2, 1, 1])


HAND = dict(replicas=2, slots=1, window=3, step_model=StepTimeModel(1e-3, 0.5))


def check_schema(res, policy):
    """The shared part, whatever the simulator."""
    s = res.summary()
    assert set(SUMMARY_KEYS) <= set(s) and set(s["latency"]) == LATENCY_KEYS
    assert res.policy == policy and s["status"] == res.status.value
    n = s["requests"]
    assert res.outcome.shape == res.latency_s.shape == (n,) and res.outcome.dtype == np.int8
    done = res.outcome == RequestOutcome.COMPLETED
    assert s["completed"] == res.completed == int(done.sum())
    assert np.isfinite(res.latency_s[done]).all() and np.isnan(res.latency_s[~done]).all()
    lat = res.latency_s[done]
    if lat.size:
        assert s["latency"]["mean"] == pytest.approx(float(np.mean(lat)), rel=1e-12)
        for q in LATENCY_QUANTILES:
            assert s["latency"][f"p{q:g}"] == pytest.approx(float(np.percentile(lat, q)),
                                                             rel=1e-12)
    else:  # nothing finished: every latency statistic is nan, not an error
        assert all(np.isnan(v) for v in s["latency"].values())
    assert s["errors"] == res.errors == int((res.outcome == RequestOutcome.ERROR).sum())
    unfinished = int((res.outcome == RequestOutcome.UNFINISHED).sum())
    assert (res.status is RunStatus.TRUNCATED) == (unfinished > 0)
    assert n == s["completed"] + s["errors"] + unfinished
    return s


def test_cells_schema_outcomes_and_arrival_order():
    res = simulate_cells(overflowing_cell(), make_router("rand"), duration_s=200.0, seed=3)
    s = check_schema(res, "rand")
    assert res.errors > 100 and res.in_flight > 0 and res.status is RunStatus.TRUNCATED
    assert int((res.outcome == RequestOutcome.UNFINISHED).sum()) == res.in_flight
    # workload order: arrival times ascend; completion_s − latency_s (no network) is each
    # request's own arrival
    assert np.all(np.diff(res.arrival_s) >= 0)
    done = res.done
    np.testing.assert_allclose(res.completion_s[done] - res.latency_s[done], res.arrival_s[done],
                               rtol=0, atol=1e-9)
    # FIFO on one server: requests complete in arrival order, so completion order is index order
    np.testing.assert_array_equal(res.completion_order(), np.flatnonzero(done))
    assert (res.cell[done] == 0).all()
    assert s["in_flight"] == res.in_flight  # the CLI's JSON keys stay


def test_instances_schema_on_a_hand_computed_timeline():
    # A (p=4, d=3) at 0 and B (p=6, d=2) at 1 ms finish at 45.1 and 57.8 ms (see
    # test_intelligent_sim's timeline by hand): E2E 45.1 and 56.8 ms
    wl = workload_from_arrays([0.0, 0.001], [4, 6], [3, 2])
    res = simulate_instances(wl, make_router("rr", "instances"), instance_config())
    s = check_schema(res, "rr")
    assert res.status is RunStatus.COMPLETED and s["errors"] == 0
    np.testing.assert_allclose(res.latency_s, [0.0451, 0.0568], atol=1e-12)
    assert s["latency"]["p90"] == pytest.approx(0.0451 + 0.9 * (0.0568 - 0.0451), abs=1e-12)


def test_a_stopped_instance_run_is_truncated():
    wl = workload_from_arrays([0.0, 0.001], [4, 6], [3, 2])
    sim = make_sim(wl, instance_config(), engine="reference")
    assert sim.advance()  # the first epoch: nothing dispatched yet
    res = result_of(sim, "stopped")
    check_schema(res, "stopped")
    assert res.status is RunStatus.TRUNCATED and res.completed == 0
    assert (res.outcome == RequestOutcome.UNFINISHED).all()


def test_decode_schema_on_the_hand_computed_run():
    res = simulate_decode(hand_trace(), make_router("jsq", "replicas"), **HAND)
    s = check_schema(res, "jsq")
    assert res.status is RunStatus.COMPLETED and s["requests"] == 3
    # decode latency = Σ of the request's step times: t(0) = 0.51 s, t(1) = 0.511 s
    np.testing.assert_allclose(res.latency_s, [1.021, 0.51, 0.511], rtol=1e-12)


def test_a_decode_run_that_hits_its_step_limit_is_not_completed():
    res = simulate_decode(hand_trace(), make_router("jsq", "replicas"), max_steps=1, **HAND)
    s = check_schema(res, "jsq")
    # one step: r1 (one decode step) finished, r0 is mid-decode, r2 was never scheduled
    assert res.status is RunStatus.TRUNCATED and s["status"] == "truncated"
    assert res.outcome.tolist() == [RequestOutcome.UNFINISHED, RequestOutcome.COMPLETED,
                                    RequestOutcome.UNFINISHED]
    assert res.start_step.tolist() == [0, 0, -1] and s["steps"] == 1.0
    np.testing.assert_allclose(res.latency_s, [np.nan, 0.51, np.nan], rtol=1e-12)
    assert np.isnan(res.tpot_s()[[0, 2]]).all()
    # a limit the run does not reach changes nothing
    full = simulate_decode(hand_trace(), make_router("jsq", "replicas"), max_steps=2, **HAND)
    assert full.status is RunStatus.COMPLETED and full.completed == 3
    assert DecodeConfig(max_steps=5).to_dict()["max_steps"] == 5
    assert "max_steps" not in DecodeConfig().to_dict()  # manifests of full runs unchanged
    with pytest.raises(ParameterError, match="max_steps"):
        DecodeConfig(max_steps=0)


def test_old_names_warn_and_give_the_same_numbers():
    res = simulate_cells(overflowing_cell(), make_router("rand"), duration_s=20.0, seed=1)
    with pytest.warns(DeprecationWarning, match=r"SimResult.latency_summary\(\) is deprecated"):
        old = res.latency_summary()
    assert old == res.summary()["latency"]
    with pytest.warns(DeprecationWarning, match=r"SimResult.to_dict\(\) is deprecated"):
        assert res.to_dict()["latency"] == old
    wl = workload_from_arrays([0.0], [4], [2])
    ir = simulate_instances(wl, make_router("jsq", "instances"), instance_config())
    with pytest.warns(DeprecationWarning, match="InstanceResult.router is deprecated"):
        assert ir.router == "jsq"
