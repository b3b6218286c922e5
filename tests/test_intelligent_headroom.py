"""Headroom routers and Knowl setups (issue 35): the rollout routers never lose to their base
policy (JSQ) — the cost-improvement property of rollout; the calibration runs round robin only
and lands within 10 % of its target; the CLI's --setup and evaluation-only policies."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from lbtheory.cli import main as cli_main
from lbtheory.intelligent import ClusterConfig, _setups, simulate
from lbtheory.intelligent._headroom import simulate_headroom
from lbtheory.intelligent._setups import SETUPS, bisect_log, calibrate_output_scale, rr_mean_e2e
from lbtheory.registry import make_router
from lbtheory.workloads import workload_from_arrays


def _wl(seed: int, n: int = 120):
    rng = np.random.default_rng(seed)
    return workload_from_arrays(np.sort(rng.uniform(0, 3.0, n)), rng.integers(1, 400, n),
                                rng.integers(1, 300, n))


@pytest.mark.parametrize("cfg", [
    ClusterConfig(n_instances=3, kv_budget_tokens=1500, max_batch=16),
    _setups.vllm_cluster("v100", 3, kv_budget_tokens=2048, max_batch=16),
], ids=["legacy", "vllm"])
def test_rollout_routers_never_lose_to_their_base_policy(cfg):
    wl = _wl(1)
    jsq = simulate(wl, make_router("jsq", "instances"), cfg)
    for policy in ("clairvoyant", "oracle-defer"):
        r = simulate_headroom(wl, cfg, policy)
        assert r.completed == len(wl)
        assert np.array_equal(r.generated_tokens, wl.output_tokens)
        # each decision keeps the best JSQ-completed episode, JSQ's own choice among them
        assert r.e2e_s.sum() <= jsq.e2e_s.sum() + 1e-9
    assert simulate_headroom(wl, cfg, "clairvoyant").e2e_s.sum() < jsq.e2e_s.sum()


def test_calibration_runs_round_robin_only_and_meets_its_target(monkeypatch):
    st = dataclasses.replace(SETUPS["k4"], requests=80, output_scale=1.0)
    target = rr_mean_e2e(st, 3.0)
    st = dataclasses.replace(st, paper_rr_s=target)
    names = []
    import lbtheory.registry as reg

    original = reg.make_router

    def spy(name, *a, **k):
        names.append(name)
        return original(name, *a, **k)
    monkeypatch.setattr(reg, "make_router", spy)
    out = calibrate_output_scale(st)
    assert set(names) == {"rr"} and len(names) == 2 * len(out["probes"])
    assert out["within_10pct"] and abs(out["rr_e2e_s"] / target - 1) <= 0.10
    assert out["probes"][0][0] == 16.0 and out["probes"][1][0] == 0.25


def test_setups_are_the_seed_s_operating_points():
    k4 = SETUPS["k4"]
    assert (k4.instances, k4.rate_rps, k4.requests, k4.paper_rr_s) == (4, 20.0, 2000, 168.0)
    cfg = k4.cluster()
    assert (cfg.block_tokens, cfg.total_blocks, cfg.watermark_blocks) == (16, 1704, 17)
    assert cfg.prefill_priority and not cfg.chunked_prefill
    k7 = SETUPS["k7"].cluster()
    assert k7.chunked_prefill and k7.max_prefill_tokens == 1024
    assert (SETUPS["k8"].instances, SETUPS["k8"].rate_rps, SETUPS["k8"].requests) == (8, 40.0,
                                                                                      4000)


def test_cli_setup_and_headroom_policies(capsys):
    rc = cli_main(["intelligent", "evaluate", "--setup", "k4", "--requests", "60",
                   "--policy", "jsq,clairvoyant", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)["routers"]
    for r in out.values():
        assert r["requests"] == r["completed"] == 60
        assert {"var_p50", "var_p99"} <= set(r["tbt"]) and "preemptions_per_request" in r
    assert out["clairvoyant"]["latency"]["mean"] <= out["jsq"]["latency"]["mean"] + 1e-9
    assert cli_main(["intelligent", "evaluate", "--requests", "5"]) == 2


def test_cli_setup_with_a_trace_serves_the_trace_on_the_setups_cluster(capsys):
    """``--setup k7 TRACE``: the setup's cluster (chunked prefill, KV blocks) and rate, the
    trace's requests — the same figures as simulating the mixed trace on ``SETUPS['k7']``'s
    cluster directly."""
    from lbtheory.workloads import mix_traces, read_trace

    trace = "examples/traces/AzureLLMInferenceTrace_code.csv"
    rc = cli_main(["intelligent", "evaluate", "--setup", "k7", trace, "--requests", "50",
                   "--seed", "3", "--policy", "rr,jsq", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    wl = mix_traces([read_trace(trace)], n_requests=50, seed=3, rate_rps=SETUPS["k7"].rate_rps)
    assert out["offered_load"]["mean_prompt_tokens"] == pytest.approx(wl.prompt_tokens.mean())
    for r in ("rr", "jsq"):
        s = simulate(wl, make_router(r, "instances"), SETUPS["k7"].cluster()).summary()
        assert out["routers"][r]["latency"]["mean"] == pytest.approx(s["latency"]["mean"],
                                                                     rel=1e-12)
        assert out["routers"][r]["completed"] == 50
    assert cli_main(["intelligent", "evaluate", "--setup", "k7", trace, "--requests", "20",
                     "--policy", "rr"]) == 0
    assert "20 requests (AzureLLMInferenceTrace_code on setup k7)" in capsys.readouterr().out
    # more requests than the trace holds: a clear error, exit 2
    assert cli_main(["intelligent", "evaluate", "--setup", "k7", trace, "--requests",
                     "9000", "--policy", "rr"]) == 2
    assert "exceeds the 8819 request(s)" in capsys.readouterr().err


def test_bisect_log_finds_closed_form_targets_and_stops_outside_the_range():
    probes = []

    def rising(x):  # 10 x: the target 50 lies at x = 5
        probes.append(x)
        return 10.0 * x
    bisect_log(rising, 0.25, 16.0, 50.0, within=0.01)
    assert probes[:2] == [16.0, 0.25] and abs(probes[-1] / 5.0 - 1) <= 0.01
    probes.clear()

    def falling(x):  # 100 / x: the target 20 lies at x = 5, the larger value at the low end
        probes.append(x)
        return 100.0 / x
    bisect_log(falling, 1.0, 32.0, 20.0, rising=False, within=0.01)
    assert probes[:2] == [1.0, 32.0] and abs(probes[-1] / 5.0 - 1) <= 0.01
    probes.clear()
    bisect_log(rising, 0.25, 16.0, 1000.0)  # 160 at most: out of reach, both ends only
    assert probes == [16.0, 0.25]
    probes.clear()
    bisect_log(rising, 0.25, 16.0, 50.0, steps=3)  # 3 halvings, then it stops
    assert len(probes) == 5
