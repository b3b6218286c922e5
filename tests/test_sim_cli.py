"""`lbtheory simulate`: the JSON contract, same arrivals across policies, typed errors, plots."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from lbtheory.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sim_two_cells.yaml"
POLICY_KEYS = {"requests", "completed", "errors", "in_flight", "error_rate", "latency",
               "per_cell", "events", "wall_seconds"}


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_json_contract_two_policies_on_the_same_arrivals(capsys, tmp_path):
    png = tmp_path / "sim.png"
    out = run_json(capsys, "simulate", str(EXAMPLE), "--policy", "rand,jsq", "--duration", "100",
                   "--seed", "3", "--json", "--plot", str(png))
    assert set(out) == {"scenario", "servers", "policies"} and out["scenario"] == "sim_two_cells"
    # the example's simulation section runs appendix_b servers, not its service models
    assert out["servers"]["kinds"] == {"near": "appendix_b", "far": "appendix_b"}
    assert out["servers"]["service_models"] is False
    assert list(out["policies"]) == ["rand", "jsq"]
    reqs = set()
    for pol in out["policies"].values():
        # the contract's keys, plus the status and (issue 21) the engine that ran
        assert set(pol) == POLICY_KEYS | {"status", "engine", "latency_goodput", "probe_age_s"}
        assert pol["status"] == ("truncated" if pol["in_flight"] else "completed")
        assert pol["engine"] == "compiled"
        assert set(pol["latency"]) == {"mean", "p50", "p90", "p99"}
        assert pol["requests"] == pol["completed"] + pol["errors"] + pol["in_flight"]
        assert pol["latency"]["p50"] <= pol["latency"]["p90"] <= pol["latency"]["p99"]
        # serving alone takes ≥ E-min tokens: 17 prefill·0.25 ms + 5 decode·25 ms > 0.12 s
        assert pol["latency"]["p50"] > 0.12
        assert [c["name"] for c in pol["per_cell"]] == ["near", "far"]
        assert sum(c["routed"] for c in pol["per_cell"]) == pol["requests"]
        reqs.add(pol["requests"])
    assert len(reqs) == 1                       # each policy saw the same arrivals
    assert png.stat().st_size > 10_000


def test_appendix_b_cli_is_deterministic(capsys):
    argv = ["simulate", "--appendix-b", "5", "--cells", "3", "--duration", "8", "--policy",
            "flow-lat,p2c", "--json"]
    a, b = run_json(capsys, *argv), run_json(capsys, *argv)
    for pol in ("flow-lat", "p2c"):
        a["policies"][pol].pop("wall_seconds")
        b["policies"][pol].pop("wall_seconds")
    assert a == b
    assert len(a["policies"]["p2c"]["per_cell"]) == 3
    # generated Appendix-B servers: the service models are fits to them, and the line says so
    assert a["servers"]["service_models"] is False
    assert "fitted to them" in a["servers"]["note"]
    assert "stepsize" in a["policies"]["flow-lat"]
    assert a["policies"]["flow-lat"]["stepsize"]["eta_rule"].startswith("default 0.011/(")


def _bad(capsys, tmp_path, argv, match):
    png = tmp_path / "never.png"
    assert main([*argv, "--plot", str(png)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and match in err[0], err
    assert not png.exists()


def _scenario_file(tmp_path, edit):
    data = yaml.safe_load(EXAMPLE.read_text())
    edit(data)
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


def test_bad_input_is_one_error_line_and_nothing_written(capsys, tmp_path):
    _bad(capsys, tmp_path, ["simulate", str(EXAMPLE), "--policy", "rand,fastest"],
         "unknown policy 'fastest'")
    _bad(capsys, tmp_path, ["simulate", str(EXAMPLE), "--duration", "nan"], "--duration")

    def no_servers(d):
        d["cells"][1]["replicas"] = 0
    _bad(capsys, tmp_path, ["simulate", _scenario_file(tmp_path, no_servers)],
         "replicas must be an integer")

    def negative_time(d):
        d["simulation"]["server"]["decode_s_per_token"] = -0.025
    _bad(capsys, tmp_path, ["simulate", _scenario_file(tmp_path, negative_time)],
         "simulation.server.decode_s_per_token must be positive, got -0.025")

    def nan_time(d):
        d["simulation"]["probe_period_s"] = float("nan")
    _bad(capsys, tmp_path, ["simulate", _scenario_file(tmp_path, nan_time)],
         "simulation.probe_period_s must be finite and positive, got nan")

    def stranded(d):
        d["arcs"] = [a for a in d["arcs"] if a["from"] != "near"]
    _bad(capsys, tmp_path, ["simulate", _scenario_file(tmp_path, stranded)],
         "no outgoing arc")
    _bad(capsys, tmp_path, ["simulate"], "exactly one of a SCENARIO file or --appendix-b")


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = capsys.readouterr().out
    assert "default: 60.0" in text and "flow-grad" in text and "disc-rif" in text


def test_text_output_lists_each_policy(capsys):
    assert main(["simulate", str(EXAMPLE), "--policy", "rr,mnlb", "--duration", "100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("scenario sim_two_cells: 2 cells")
    assert lines[1].startswith("servers: appendix_b at near, far — not the file's service "
                               "models")
    assert [ln.split()[0] for ln in lines[3:5]] == ["rr", "mnlb"]
    assert np.isfinite([float(x) for x in lines[3].split()[1:5]]).all()
    # idealised probes: age = mean_j τ_ij (both sources: (0 + 0.04)/2) + P/2 (P = 10 ms)
    assert lines[5].startswith("probe age")
    assert float(lines[5].split("mean ")[1].split()[0]) == pytest.approx(0.025, abs=5e-4)


def test_events_beyond_the_duration_are_clipped_with_one_warning(capsys):
    # issue 33: `--duration 10` used to fail on the example's burst at 40–60 s
    assert main(["simulate", str(EXAMPLE), "--policy", "rand", "--duration", "10"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if "before the scenario" in ln]
    assert err == ["warning: --duration 10 s ends before the scenario's events: bursts[0] "
                   "(near, 40–60 s) dropped; outages[0] (far, 70–90 s) dropped (pass a longer "
                   "--duration to simulate them)"]
    # cut, not dropped: the burst (×1.3 at near, 28 req/s) runs on [40, 50) only, so the run
    # has the same requests as one whose file ends the burst at 50 s
    assert main(["simulate", str(EXAMPLE), "--policy", "rand", "--duration", "50"]) == 0
    assert ("bursts[0] (near, 40–60 s) cut at 50 s; outages[0] (far, 70–90 s) dropped"
            in capsys.readouterr().err)
    from lbtheory.sim import generate_arrivals, load_scenario

    sc = load_scenario(EXAMPLE)
    clipped, notes = sc.clipped(50.0)
    assert len(notes) == 2 and [(b.start_s, b.end_s) for b in clipped.bursts] == [(40.0, 50.0)]
    assert clipped.outages == ()
    a = generate_arrivals(clipped, 50.0, 4)
    # E[arrivals] = (28 + 12)·50 + 28·0.3·10 = 2084 (Poisson sd ≈ 46)
    assert abs(len(a) - 2084) < 5 * 46
    assert sc.clipped(100.0) == (sc, [])


def test_a_topology_without_simulation_section_simulates_its_service_models(capsys, tmp_path):
    data = yaml.safe_load(EXAMPLE.read_text())
    del data["simulation"]
    p = tmp_path / "topo.yaml"
    p.write_text(yaml.safe_dump(data))
    out = run_json(capsys, "simulate", str(p), "--policy", "rand", "--duration", "5", "--json")
    assert out["servers"]["kinds"] == {"near": "rate", "far": "rate"}
    assert out["servers"]["service_models"] is True
    assert main(["simulate", str(p), "--policy", "rand", "--duration", "5"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith(
        "servers: rate — each cell completes requests at μ_j(N_j) of its service model")


def test_trace_replay_and_normalised_output(capsys):
    import csv
    import datetime as dt

    trace = EXAMPLE.parents[0] / "traces" / "AzureLLMInferenceTrace_conv.csv"
    with trace.open() as fh:
        rows = list(csv.DictReader(fh))
    stamps = [dt.datetime.fromisoformat(r["TIMESTAMP"][:26]) for r in rows]
    within = sum((s - stamps[0]).total_seconds() < 100.0 for s in stamps)
    out = run_json(capsys, "simulate", str(EXAMPLE), "--policy", "rand", "--duration", "100",
                   "--trace", str(trace), "--json")
    assert out["policies"]["rand"]["requests"] == within
    assert main(["simulate", str(EXAMPLE), "--policy", "rand,jsq", "--duration", "100",
                 "--trace", str(trace), "--normalise"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "mean/rand" in lines[2] and lines[3].split()[-2:] == ["1.000", "1.000"]
    assert main(["simulate", str(EXAMPLE), "--policy", "jsq", "--normalise"]) == 2
    assert "add 'rand' to --policy" in capsys.readouterr().err


def test_engine_flag_picks_the_engine_and_both_give_the_same_numbers(capsys):
    argv = ["simulate", str(EXAMPLE), "--policy", "flow-grad,p2c", "--duration", "100", "--json"]
    comp = run_json(capsys, *argv)
    ref = run_json(capsys, *argv, "--engine", "reference")
    for pol in ("flow-grad", "p2c"):
        assert (comp["policies"][pol].pop("engine"), ref["policies"][pol].pop("engine")) == \
            ("compiled", "reference")
        comp["policies"][pol].pop("wall_seconds")
        ref["policies"][pol].pop("wall_seconds")
    assert comp == ref


def test_a_run_over_the_memory_limit_is_one_error_line(capsys):
    assert main(["simulate", str(EXAMPLE), "--duration", "1e6"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "LBTHEORY_MAX_MEMORY_GB" in err[0]


def _four_cells_no_delay(tmp_path):
    """Issue 25 item 9: 4 M/M/c cells, every delay 0, probes every 1 s."""
    lam = {"a": 9.0, "b": 5.0, "c": 4.0, "d": 6.0}
    data = {"cells": [{"name": n, "replicas": 2, "arrival_rate": v,
                       "service": {"model": "mm1", "capacity": 8.0, "K": 4.0}}
                      for n, v in lam.items()],
            "arcs": [{"from": i, "to": j, "delay": 0.0} for i in lam for j in lam],
            "simulation": {"server": {"kind": "mmc", "slots": 2, "mean_service_s": 0.5,
                                      "queue_limit": 10}, "probe_period_s": 1.0}}
    p = tmp_path / "four.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


def test_flow_stepsize_is_reported_beside_the_fluid_critical_stepsize(capsys, tmp_path):
    """`simulate` reports each flow policy's η next to the fluid model's η_crit (probe period in
    the feedback delay; computed here independently) and warns on stderr — exit code 0 — when η
    is beyond it. The old default 0.01/max(mean delay, 1 ms) = 10/s on this zero-delay,
    1-s-probe topology jumps to a corner every round and overflows; the per-cost default over
    (delay + δ/2) does not."""
    from lbtheory.sim import load_scenario
    from lbtheory.stability import critical_stepsize

    path = _four_cells_no_delay(tmp_path)
    net = load_scenario(path).network
    crit = critical_stepsize(net, "latency", probe_period_s=1.0).critical_stepsize
    assert main(["simulate", path, "--policy", "rand,flow-lat", "--duration", "300", "--seed",
                 "2", "--json", "--stepsize", "10"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    st = out["policies"]["flow-lat"]["stepsize"]
    assert "stepsize" not in out["policies"]["rand"]
    assert st["eta"] == 10.0 and st["eta_crit"] == pytest.approx(crit, rel=1e-9)
    assert st["eta_over_crit"] == pytest.approx(10.0 / crit, rel=1e-9) and st["eta_over_crit"] > 1
    assert "warning: flow-lat: stepsize η = 10" in cap.err and "η_crit" in cap.err
    bad, rand = out["policies"]["flow-lat"], out["policies"]["rand"]
    assert bad["error_rate"] > 0.005 and bad["error_rate"] > 10 * rand["error_rate"]
    assert main(["simulate", path, "--policy", "rand,flow-lat", "--duration", "300", "--seed",
                 "2", "--json"]) == 0
    cap = capsys.readouterr()
    good = json.loads(cap.out)["policies"]["flow-lat"]
    assert cap.err == ""
    assert good["stepsize"]["eta_over_crit"] < 1
    assert good["error_rate"] < 0.2 * bad["error_rate"]
    # the text table prints the same numbers
    assert main(["simulate", path, "--policy", "flow-lat", "--duration", "50"]) == 0
    text = capsys.readouterr().out
    assert f"fluid-model η_crit = {crit:.4g} with feedback delay τ + δ/2, probe period δ = 1 s" \
        in text
    # the probe period is why `lbtheory stepsize` (continuous updates) differs, and these mmc
    # servers are not the service models the fluid model has: both said on the line
    assert "`lbtheory stepsize --cost latency --probe-period 1` reports the same" in text
    assert "not of these servers" in text
    # ... and `lbtheory stepsize` on the same file with that probe period prints that number
    assert main(["stepsize", path, "--cost", "latency", "--probe-period", "1", "--json"]) in (0, 1)
    rep = json.loads(capsys.readouterr().out)
    assert rep["critical_stepsize"] == pytest.approx(crit, rel=1e-9)
    assert rep["probe_period_s"] == 1.0
