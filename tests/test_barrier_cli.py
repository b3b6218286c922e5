"""``lbtheory barrier``: JSON keys, table output, bad input → ``error: ...`` and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lbtheory.cli import main

CONV = str(Path(__file__).resolve().parents[1] / "examples" / "traces"
           / "AzureLLMInferenceTrace_conv.csv")


def test_json_keys(capsys):
    rc = main(["barrier", CONV, "--replicas", "4", "--requests", "150", "--policy",
               "random,rr,p2c,jsq,br0,brh-oracle,brh-survival", "--json", "--horizon", "8"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["requests"] == 150 and out["config"]["replicas"] == 4
    assert set(out["policies"]) == {"random", "rr", "p2c", "jsq", "br0", "brh-oracle",
                                    "brh-survival"}
    for summary in out["policies"].values():
        for key in ("mean_imbalance", "idle_fraction", "throughput", "tpot_p95", "tpot_p50"):
            assert isinstance(summary[key], float)
        assert 0.0 <= summary["idle_fraction"] < 1.0
    # the printed numbers are the definitions applied to the simulated loads, recomputed here
    # from the per-replica load matrix (I(k) = G·M(k) − Σ_g L_g(k); idle = Σ I / Σ G·M)
    from lbtheory.barrier import DecodeConfig, simulate_decode
    from lbtheory.registry import make_router
    from lbtheory.workloads import read_trace

    tr = read_trace(CONV).head(150)
    for name in ("jsq", "br0"):
        res = simulate_decode(tr, make_router(name, "replicas"),
                              config=DecodeConfig(replicas=4, record_loads=True))
        L = res.loads[:res.measure_steps].astype(float)
        imb = 4 * L.max(axis=1) - L.sum(axis=1)
        got = out["policies"][name]
        assert got["mean_imbalance"] == pytest.approx(imb.mean(), rel=1e-12)
        assert got["idle_fraction"] == pytest.approx(imb.sum() / (4 * L.max(axis=1)).sum(),
                                                     rel=1e-12)
    assert out["policies"]["br0"]["mean_imbalance"] < out["policies"]["jsq"]["mean_imbalance"]


def test_table(capsys):
    assert main(["barrier", CONV, "--requests", "100", "--policy", "jsq,br0"]) == 0
    out = capsys.readouterr().out
    assert "imbalance (tok)" in out and "\nbr0 " in out


@pytest.mark.parametrize("argv, message", [
    (["--policy", "jsq,nope"], "error: unknown policy 'nope'"),
    (["--replicas", "0"],
     "error: number of replicas G (DecodeConfig.replicas) must be an integer >= 1, got 0"),
    (["--slots", "0"],
     "error: slot capacity per replica (DecodeConfig.slots) must be an integer >= 1, got 0"),
    (["--time-scale", "0"], "error: time_scale must be positive, got 0.0"),
    (["--kv-budget", "0"], "error: kv_budget (DecodeConfig.kv_budget) must be an integer >= 1"),
    (["--kv-budget", "100"], "error: kv_budget 100 tokens is smaller than the longest prompt"),
])
def test_bad_arguments(capsys, argv, message):
    assert main(["barrier", CONV, "--requests", "50"] + argv) == 2
    assert capsys.readouterr().err.startswith(message)


def test_bad_trace(tmp_path, capsys):
    p = tmp_path / "bad.csv"
    p.write_text("TIMESTAMP,ContextTokens\n0,1\n")
    assert main(["barrier", str(p)]) == 2
    assert "missing column for output" in capsys.readouterr().err
    assert main(["barrier", str(tmp_path / "absent.csv")]) == 2


def test_kv_budget_is_recorded_and_binds(capsys):
    # 50 requests, G = 2: a 6 000-token budget per replica holds the queue back (the JSQ run
    # without it admits everything at once), and the JSON records the budget and the peak ratio
    argv = ["barrier", CONV, "--requests", "50", "--replicas", "2", "--policy", "jsq", "--json"]
    assert main(argv) == 0
    free = json.loads(capsys.readouterr().out)
    assert main(argv + ["--kv-budget", "6000"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["kv_budget"] == 6000 and free["config"]["kv_budget"] is None
    assert 0.5 < out["policies"]["jsq"]["kv_peak_ratio"]
    assert out["policies"]["jsq"]["steps"] > free["policies"]["jsq"]["steps"]
