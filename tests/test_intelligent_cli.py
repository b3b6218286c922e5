"""``lbtheory intelligent evaluate``: the JSON contract, a hand-computed run, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lbtheory.cli import main

ROOT = Path(__file__).resolve().parents[1]
CODE = ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_code.csv"
CONV = ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_conv.csv"


def _csv(tmp_path: Path, rows: str, name: str = "t.csv") -> str:
    p = tmp_path / name
    p.write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)
    return str(p)


def _run(capsys, argv):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_json_contract_on_the_azure_mix(capsys):
    rc, out, err = _run(capsys, ["intelligent", "evaluate", str(CODE), str(CONV), "--requests",
                                 "120", "--instances", "2", "--seed", "1", "--json",
                                 "--policy", "rr,jsq,minmin,maxcap,heuristic"])
    assert rc == 0, err
    data = json.loads(out)
    assert list(data) == ["routers", "offered_load"]  # keys are only ever added
    assert list(data["routers"]) == ["rr", "jsq", "minmin", "maxcap", "heuristic"]
    # the Azure mix at 20 req/s on 2 instances is far beyond capacity: said on stderr, exit 0
    load = data["offered_load"]
    assert load["overloaded"] is True and load["utilisation"] > 2
    assert load["utilisation"] == pytest.approx(load["prefill_demand"] + load["decode_demand"])
    assert "warning: the cluster is overloaded" in err
    for r in data["routers"].values():
        assert set(r) == {"requests", "completed", "preemptions", "latency", "ttft",
                          "router_wait", "tbt", "preemptions_per_request"}
        assert set(r["latency"]) == {"mean", "p50", "p90", "p99"}
        assert set(r["ttft"]) == {"mean", "p99"}
        assert set(r["router_wait"]) == {"mean"}
        assert r["requests"] == r["completed"] == 120
        # a request waits at most one 20 ms epoch at the router (heuristics never wait)
        assert 0.0 <= r["router_wait"]["mean"] <= 0.02
        assert r["ttft"]["mean"] < r["latency"]["mean"]


@pytest.mark.parametrize("engine", ["auto", "reference"])
def test_one_request_by_hand_with_the_documented_defaults(tmp_path, capsys, engine):
    # default model: 15 ms + 0.2 ms/prefill token + 8e-9 s/token² + 0.1 ms/seq + 0.6 µs/ctx token
    trace = _csv(tmp_path, "0.0,4,3\n")
    rc, out, err = _run(capsys, ["intelligent", "evaluate", trace, "--requests", "1", "--rate",
                                 "0", "--json", "--policy", "rr", "--engine", engine])
    assert rc == 0, err
    r = json.loads(out)["routers"]["rr"]
    t1 = 0.015 + 2e-4 * 4 + 8e-9 * 16
    t2 = 0.015 + 1e-4 + 6e-7 * 5
    t3 = 0.015 + 1e-4 + 6e-7 * 6
    assert r["ttft"]["mean"] == pytest.approx(t1, abs=1e-12)
    assert r["latency"]["mean"] == pytest.approx(t1 + t2 + t3, abs=1e-12)
    assert r["latency"]["p99"] == pytest.approx(t1 + t2 + t3, abs=1e-12)
    assert r["router_wait"]["mean"] == 0.0 and r["preemptions"] == 0


def test_offered_load_by_hand_and_no_warning_below_capacity(tmp_path, capsys):
    from lbtheory.intelligent import ClusterConfig, IterationTimeModel, offered_load
    from lbtheory.workloads import workload_from_arrays

    # 3 requests in 2 s (λ = 1 req/s), p = 100, d = 10 on one instance with a_p = 1e-3 s/token:
    # ρ_p = 1 · 0.1 = 0.1; k̄ = E[d (p + d/2)] / E[d] = 105 tokens, n* = min(8, 1000/105) = 8,
    # t(n*, C*) = 0.01 + 0.002 · 8 + 1e-4 · 8 · 105 = 0.11 s, ρ_d = 1 · 10 · 0.11 / 8 = 0.1375
    tm = IterationTimeModel(base_s=0.01, prefill_s_per_token=1e-3, attention_s_per_token2=0.0,
                            decode_s_per_seq=0.002, context_s_per_token=1e-4)
    cfg = ClusterConfig(n_instances=1, kv_budget_tokens=1000, max_batch=8, timing=tm)
    load = offered_load(workload_from_arrays([0.0, 1.0, 2.0], [100] * 3, [10] * 3), cfg)
    assert load.rate_rps == 1.0 and load.decode_batch == 8
    assert load.prefill_demand == pytest.approx(0.1)
    assert load.decode_demand == pytest.approx(0.1375)
    assert load.decode_tps == pytest.approx(1 / 0.11)
    assert not load.overloaded and load.warning() is None
    # five times the rate on half the KV: n* = 500 / 105, and ρ = 5 (0.1 + 10 t / n*) > 1
    over = offered_load(workload_from_arrays([0.0, 0.2, 0.4], [100] * 3, [10] * 3),
                        ClusterConfig(n_instances=1, kv_budget_tokens=500, max_batch=8,
                                      timing=tm))
    n_star = 500 / 105
    t = 0.01 + 0.002 * n_star + 1e-4 * 500
    assert over.utilisation == pytest.approx(5 * (0.1 + 10 * t / n_star))
    assert over.overloaded and "overloaded" in over.warning()
    # the command: light load, no warning, the block in the JSON and the text
    trace = _csv(tmp_path, "0.0,4,3\n10.0,4,3\n20.0,4,3\n")
    rc, out, err = _run(capsys, ["intelligent", "evaluate", trace, "--requests", "3", "--rate",
                                 "0", "--json", "--policy", "rr"])
    assert rc == 0 and err == ""
    assert json.loads(out)["offered_load"]["rate_rps"] == pytest.approx(0.1)
    rc, out, err = _run(capsys, ["intelligent", "evaluate", trace, "--requests", "3", "--rate",
                                 "0", "--policy", "rr"])
    assert rc == 0 and "offered load: 0.1 req/s" in out and "below capacity" in out


def test_out_file_written_atomically_with_manifest(tmp_path, capsys):
    out_file = tmp_path / "res.json"
    rc, out, err = _run(capsys, ["intelligent", "evaluate", str(CONV), "--requests", "30",
                                 "--policy", "rr,jsq", "--output", str(out_file)])
    assert rc == 0, err
    data = json.loads(out_file.read_text())
    assert set(data["routers"]) == {"rr", "jsq"} and "manifest" in data
    assert "offered_load" in data
    assert "rr" in out and "jsq" in out


@pytest.mark.parametrize("extra, rows, match", [
    (["--policy", "rr,bogus"], "0.0,4,3\n", "--policy: unknown router 'bogus'"),
    (["--instances", "0"], "0.0,4,3\n", "--instances must be an integer >= 1, got 0"),
    (["--kv-budget", "5"], "0.0,4,3\n", "kv_budget_tokens = 5 is smaller than request 0"),
    ([], "0.0,-4,3\n", "negative token count -4 in prompt_tokens"),
    ([], "0.0,,3\n", "empty prompt_tokens"),
    ([], "0.0,4,-1\n", "negative token count -1 in output_tokens"),
    (["--engine", "numba"], "0.0,4,3\n", "--engine must be one of 'auto', 'compiled', "
                                         "'reference', got 'numba'"),
])
def test_bad_input_one_error_line_exit_2_nothing_written(tmp_path, capsys, extra, rows, match):
    trace = _csv(tmp_path, rows)
    out_file = tmp_path / "res.json"
    rc, out, err = _run(capsys, ["intelligent", "evaluate", trace, "--requests", "1", "--rate",
                                 "0", "--output", str(out_file), *extra])
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and match in lines[0]
    assert not out_file.exists()


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["intelligent", "evaluate", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for needle in ("(default: 4)", "(default: 2000)", "(default: 32768)", "(default: 20.0)",
                   "(default: 0.02)", "rr,jsq,minmin,maxcap,heuristic"):
        assert needle in text


def test_histogram_predictor_runs_on_disjoint_halves(capsys):
    rc, out, err = _run(capsys, ["intelligent", "evaluate", str(CODE), str(CONV), "--requests",
                                 "60", "--predictor", "histogram", "--policy", "heuristic,minmin",
                                 "--json"])
    assert rc == 0, err
    r = json.loads(out)["routers"]
    assert r["heuristic"]["completed"] == r["minmin"]["completed"] == 60


def test_admission_flag_selects_the_batcher(tmp_path, capsys):
    # A (p 60, d 2), B (50, 1), C (30, 5), D (10, 1) at t = 0 on one instance of 100 KV tokens:
    # FCFS admits A alone first, bin packing A and C (tests/test_intelligent_batchers.py), so
    # the makespans differ; each run equals the library's simulation with that batcher.
    from lbtheory.commands.intelligent import ADMISSIONS
    from lbtheory.intelligent import Admission, ClusterConfig, simulate
    from lbtheory.registry import make_router
    from lbtheory.workloads import workload_from_arrays

    assert ADMISSIONS == tuple(a.value for a in Admission)
    trace = _csv(tmp_path, "0.0,60,2\n0.0,50,1\n0.0,30,5\n0.0,10,1\n")
    wl = workload_from_arrays([0.0] * 4, [60, 50, 30, 10], [2, 1, 5, 1])
    means = {}
    for flag, adm in (("--admission", "fcfs"), ("--admission", "bin-packing"),
                      ("--admission", "lwl")):
        rc, out, err = _run(capsys, ["intelligent", "evaluate", trace, "--requests", "4",
                                     "--rate", "0", "--instances", "1", "--kv-budget", "100",
                                     "--json", "--policy", "rr", flag, adm])
        assert rc == 0, err
        means[adm] = json.loads(out)["routers"]["rr"]["latency"]["mean"]
        lib = simulate(wl, make_router("rr", "instances"),
                       ClusterConfig(n_instances=1, kv_budget_tokens=100, admission=adm))
        assert means[adm] == pytest.approx(lib.summary()["latency"]["mean"], rel=1e-12)
    assert len(set(means.values())) == 3
    with pytest.raises(SystemExit) as exc:  # argparse's choices, as --predictor's
        main(["intelligent", "evaluate", trace, "--admission", "sjf"])
    assert exc.value.code == 2 and "argument --admission: invalid choice" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["intelligent", "evaluate", "--help"])
    assert "bin-packing" in capsys.readouterr().out
