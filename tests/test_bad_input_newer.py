"""Bad input to the newer commands (simulate, intelligent, barrier on new formats, scenario files,
checkpoints, traces) → one ``error:`` line, exit code 2, nothing on stdout, nothing written;
and extreme-but-legal input → a ``warning:`` line, exit code 0 (issue 23).

The harness is :func:`test_bad_input._check_bad` semantics, restated here for the newer cases.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from test_bad_input import check_one_error_line

from lbtheory.cli import main

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "sim_two_cells.yaml"
CODE = ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_code.csv"


def _scenario(tmp: Path, edit: Callable[[dict], None] | None = None, name: str = "s.yaml") -> str:
    data = yaml.safe_load(SCENARIO.read_text())
    if edit is not None:
        edit(data)
    path = tmp / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _file(tmp: Path, name: str, data: bytes | str) -> str:
    path = tmp / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


def _set(path: str, value) -> Callable[[dict], None]:
    def edit(d: dict) -> None:
        node = d
        keys = path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {}) if not k.isdigit() else node[int(k)]
        node[keys[-1]] = value
    return edit


def _checkpoint(tmp: Path, config: str | bytes) -> str:
    ck = tmp / "ck"
    ck.mkdir()
    (ck / "config.json").write_bytes(config.encode() if isinstance(config, str) else config)
    return str(ck)


def _dir(tmp: Path) -> str:
    (tmp / "d").mkdir()
    return str(tmp / "d")


BOMB = "a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nname: *c\n"
SIM = ["simulate"]
EV = ["intelligent", "evaluate", str(CODE), "--requests", "20"]
TR = ["intelligent", "train", str(CODE), "--requests", "20", "--episodes", "1"]

#: id → (argv builder from tmp_path, expected fragments of the error line)
CASES: dict[str, tuple[Callable[[Path], list[str]], tuple[str, ...]]] = {
    # scenario files: encodings, syntax, aliases, absurd sizes
    "UTF-16 scenario": (lambda t: SIM + [_file(t, "u.yaml", "cells: []\n".encode("utf-16"))],
                        ("u.yaml", "UTF-16")),
    "binary scenario": (lambda t: SIM + [_file(t, "b.yaml", bytes(range(128, 256)))],
                        ("b.yaml", "not a text file")),
    "YAML syntax error": (lambda t: SIM + [_file(t, "y.yaml", "cells:\n  - [a\n")],
                          ("y.yaml:3", "not valid YAML")),
    "YAML alias bomb": (lambda t: SIM + [_file(t, "a.yaml", BOMB)],
                        ("a.yaml:2", "aliases")),
    "probe period 1 ns": (lambda t: SIM + [_scenario(t, _set("simulation.probe_period_s", 1e-9)),
                                           "--duration", "100"],
                          ("probe_period_s", "probe rounds", "1e+09")),
    "refit period 1 ns": (lambda t: SIM + [_scenario(t, _set("simulation.estimation",
                                                              {"period_s": 1e-9})),
                                           "--duration", "100"],
                          ("estimation.period_s", "refits")),
    "decode engines 1e9": (lambda t: SIM + [_scenario(t, _set("simulation.server.decode_engines",
                                                               10**9))],
                           ("slots", "65,536")),
    "burst factor 1e9": (lambda t: SIM + [_scenario(t, _set("simulation.bursts", [
        {"cell": "near", "start_s": 40, "end_s": 60, "factor": 1e9}])), "--duration", "120"],
        ("expected requests", "GiB", "LBTHEORY_MAX_MEMORY_GB")),
    "duration 1e12": (lambda t: SIM + [str(SCENARIO), "--duration", "1e12"],
                      ("simulation duration", "ticks")),
    "seed -1": (lambda t: SIM + [str(SCENARIO), "--seed", "-1", "--duration", "100"],
                ("seed must be an integer in [0,",)),
    "appendix-b seed -1": (lambda t: SIM + ["--appendix-b", "-1"], ("appendix_b.seed",)),
    "appendix-b 5000 cells": (lambda t: SIM + ["--appendix-b", "1", "--cells", "5000"],
                              ("5000 cells", "GiB")),
    "appendix-b utilisation 1e6": (lambda t: SIM + ["--appendix-b", "1", "--utilisation", "1e6"],
                                   ("--utilisation 1e6", "fraction", "accepted up to 2")),
    "generator option with a scenario file": (lambda t: SIM + [str(SCENARIO), "--cells", "3"],
                                              ("--cells", "--appendix-b")),
    "duplicate policy": (lambda t: SIM + [str(SCENARIO), "--policy", "rand,rand"],
                         ("--policy", "listed twice")),
    "policy of another simulator": (lambda t: SIM + [str(SCENARIO), "--policy", "br0"],
                                    ("unknown policy 'br0' for the cells simulator",)),
    # intelligent: seeds, sizes, rates, outputs, training options, checkpoints
    "evaluate --seed -1": (lambda t: EV + ["--seed", "-1"], ("seed",)),
    "evaluate --instances 1e10": (lambda t: EV + ["--instances", "10000000000"],
                                  ("instances", "GiB")),
    "evaluate --rate 1e-300": (lambda t: EV + ["--rate", "1e-300"], ("ticks", "arrival span")),
    "evaluate --output is a directory": (lambda t: EV + ["--output", _dir(t)],
                                         ("--output", "existing directory")),
    "evaluate checkpoint []": (lambda t: EV + ["--routers", f"rl={_checkpoint(t, '[]')}"],
                               ("config.json", "'cluster'")),
    "evaluate checkpoint without cluster": (
        lambda t: EV + ["--routers", f"rl={_checkpoint(t, json.dumps({'dqn': {}}))}"],
        ("'cluster'",)),
    "evaluate checkpoint extra field": (
        lambda t: EV + ["--routers", "rl=" + _checkpoint(t, json.dumps(
            {"cluster": {"timing": {}, "colour": 1}, "dqn": {}, "env": {"buckets": {}}}))],
        ("unknown field(s) ['colour']", "'cluster'")),
    "evaluate checkpoint UTF-16": (
        lambda t: EV + ["--routers", "rl=" + _checkpoint(t, "{}".encode("utf-16"))],
        ("cannot read checkpoint config",)),
    "train --out is a file": (lambda t: TR + ["--out", _file(t, "f", "x")],
                              ("--out", "regular file")),
    "train --lr nan": (lambda t: TR + ["--lr", "nan", "--out", str(t / "o")], ("lr",)),
    "train --lr -0.001": (lambda t: TR + ["--lr", "-0.001", "--out", str(t / "o")],
                          ("lr", "positive")),
    "train --eps-decay-steps -5": (lambda t: TR + ["--eps-decay-steps", "-5", "--out",
                                                   str(t / "o")], ("eps_decay_steps",)),
    "train --learning-starts -1": (lambda t: TR + ["--learning-starts", "-1", "--out",
                                                   str(t / "o")], ("learning_starts",)),
    # barrier and traces
    "barrier --replicas 1e7": (lambda t: ["barrier", str(CODE), "--replicas", "10000000"],
                               ("10000000 replicas", "GiB")),
    "barrier duplicate policy": (lambda t: ["barrier", str(CODE), "--policies", "br0,br0"],
                                 ("listed twice",)),
    "trace year 99999": (lambda t: ["barrier", _file(t, "y.csv", "timestamp,prompt_tokens,"
                                                     "output_tokens\n99999-01-01 00:00:00,3,4\n")],
                         ("y.csv:2", "1900", "2200")),
    "trace JSON true as a count": (
        lambda t: ["barrier", _file(t, "b.jsonl", '{"timestamp": 1, "prompt_tokens": true, '
                                                  '"output_tokens": 3}\n')],
        ("b.jsonl:1", "prompt_tokens value True is not a number")),
    "UTF-16 trace": (lambda t: ["barrier", _file(t, "u.csv", "TIMESTAMP,ContextTokens,"
                                                 "GeneratedTokens\n1,3,4\n".encode("utf-16"))],
                     ("u.csv", "UTF-16")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_error_line(case, tmp_path, capsys):
    build, fragments = CASES[case]
    check_one_error_line(case, build(tmp_path), fragments, tmp_path, capsys)


def test_a_utf8_bom_trace_is_read(tmp_path, capsys):
    path = _file(tmp_path, "bom.csv", b"\xef\xbb\xbfTIMESTAMP,ContextTokens,GeneratedTokens\n"
                                      b"1,3,4\n2,5,6\n")
    assert main(["barrier", path, "--replicas", "2", "--policies", "jsq", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 2


def test_mooncake_without_hash_ids_reads_milliseconds_and_warns(tmp_path, capsys):
    path = _file(tmp_path, "m.jsonl", '{"timestamp": 1000, "input_length": 5, "output_length": 3}'
                                      '\n{"timestamp": 3500, "input_length": 5, '
                                      '"output_length": 3}\n')
    from lbtheory.workloads import TraceFormatWarning, read_trace

    with pytest.warns(TraceFormatWarning, match="milliseconds"):
        tr = read_trace(path)
    assert tr.arrival_s.tolist() == [0.0, 2.5]  # (3500 − 1000) ms
    assert main(["barrier", path, "--replicas", "2", "--policies", "jsq"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("warning: ") and "milliseconds" in err[0]


def test_overloaded_cluster_warns_and_counts_requests_in_flight(tmp_path, capsys):
    # near's demand tripled and unbounded queues: no overflow errors, but a large share of the
    # requests is still queued at the horizon — the table says so, and a warning explains it
    path = _scenario(tmp_path, lambda d: (d["cells"][0].update(arrival_rate=80.0),
                                          d["simulation"]["server"].update(queue_limit=None)))
    assert main(["simulate", path, "--policy", "rand", "--duration", "100"]) == 0
    out, err = capsys.readouterr()
    row = next(line for line in out.splitlines() if line.startswith("rand"))
    in_flight = int(row.split()[-1])
    assert in_flight > 0
    assert err.startswith("warning: rand:") and "still in flight" in err
    assert main(["simulate", path, "--policy", "rand", "--duration", "100", "--json"]) == 0
    pol = json.loads(capsys.readouterr().out)["policies"]["rand"]
    assert pol["in_flight"] == in_flight and pol["status"] == "truncated"
    assert pol["requests"] == pol["completed"] + pol["errors"] + pol["in_flight"]


def test_no_arrivals_prints_dashes_not_nan(tmp_path, capsys):
    def zero(d):
        for c in d["cells"]:
            c["arrival_rate"] = 0.0
    assert main(["simulate", _scenario(tmp_path, zero), "--duration", "100"]) == 0
    out, err = capsys.readouterr()
    assert "nan" not in out and "—" in out and "0 requests" in out
    assert err.startswith("warning: no request arrived")


@pytest.mark.parametrize("argv", [["simulate"], ["intelligent", "evaluate"],
                                  ["intelligent", "train"], ["tntp", "fetch"], ["barrier"]])
def test_help_has_an_example_and_no_doubled_defaults(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "\nexample" in text and f"lbtheory {' '.join(argv)}" in text.split("\nexample")[-1]
    assert "(default: None)" not in text and text.count("(default:") == \
        len(set(line for line in text.splitlines() if "(default:" in line))
    for line in text.splitlines():
        assert line.count("(default:") <= 1, line


BAD_EXPERIMENTS = '''
import sys
from lbtheory.sweep import Experiment


def _raise(p):
    raise KeyError("no such profile data")


def _exit(c):
    sys.exit(0)


def _collect_fails(rows, out, profile):
    raise ValueError("collect broken")


def _collect(rows, out, profile):
    pass


EXPERIMENTS = [
    Experiment(name="bad-grid", description="d", grid=_raise, cell=lambda c: {}, collect=_collect,
               profiles=("full",)),
    Experiment(name="bad-cell", description="d", grid=lambda p: [{"a": 1}], cell=_exit,
               collect=_collect, profiles=("full",)),
    Experiment(name="bad-collect", description="d", grid=lambda p: [{"a": 1}],
               cell=lambda c: {"x": 1}, collect=_collect_fails, profiles=("full",)),
]
'''


@pytest.mark.parametrize("name, fragment", [
    ("bad-grid", "grid('full') raised KeyError"),
    ("bad-cell", "the cell called sys.exit(0)"),
    ("bad-collect", "collect raised ValueError: collect broken"),
])
def test_experiment_code_that_raises_or_exits_is_one_error_line(name, fragment, tmp_path,
                                                                  capsys):
    d = tmp_path / "exps"
    d.mkdir()
    (d / "bad.py").write_text(BAD_EXPERIMENTS)
    code = main(["sweep", name, "--experiments-dir", str(d), "--scheduler", "serial",
                 "--out", str(tmp_path / "res"), "--no-progress"])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and fragment in err[0]


def test_sys_exit_at_import_is_an_error_not_a_silent_exit(tmp_path, capsys):
    d = tmp_path / "exps"
    d.mkdir()
    (d / "quits.py").write_text("import sys\nsys.exit(0)\n")
    for argv in (["sweep", "--list"], ["sweep", "anything"]):
        assert main([*argv, "--experiments-dir", str(d)]) == 2
        err = capsys.readouterr().err
        assert "called sys.exit(0) at import" in err and err.count("\n") == 1


def test_a_quick_run_never_writes_the_committed_results(tmp_path, monkeypatch, capsys):
    committed = ROOT / "experiments" / "results"
    before = {p: p.stat().st_mtime_ns for p in committed.rglob("*") if p.is_file()}
    monkeypatch.chdir(tmp_path)
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    assert main(["sweep", "poa-braess", "--quick", "--scheduler", "serial", "--no-progress"]) == 0
    assert "-> out/results/poa-braess" in capsys.readouterr().out
    assert (tmp_path / "out" / "results" / "poa-braess" / "sweep_quick.json").is_file()
    after = {p: p.stat().st_mtime_ns for p in committed.rglob("*") if p.is_file()}
    assert after == before  # nothing under experiments/results was written or touched


# ---------------------------------------------------------------- TNTP numeric edges (kind 4)
_TNTP_HEAD = ("<NUMBER OF ZONES> 2\n<NUMBER OF NODES> {n}\n<FIRST THRU NODE> 1\n"
              "<NUMBER OF LINKS> 3\n<END OF METADATA>\n~ init term cap len fft b power speed toll "
              "type ;\n")


def _tntp_net(tmp: Path, *, n: str = "3", cap: str = "100", fft: str = "1", power: str = "4",
              b: str = "0.15", others: tuple[str, str] = ("1", "3")) -> str:
    """Zones 1, 2; links 1→3 (the edited one), 3→2 and 1→2 (free-flow times ``others``)."""
    rows = [f"1\t3\t{cap}\t1\t{fft}\t{b}\t{power}\t0\t0\t1\t;",
            f"3\t2\t100\t1\t{others[0]}\t{b}\t4\t0\t0\t1\t;",
            f"1\t2\t100\t1\t{others[1]}\t{b}\t4\t0\t0\t1\t;"]
    return _file(tmp, "n_net.tntp", _TNTP_HEAD.format(n=n) + "\n".join(rows) + "\n")


def _tntp_trips(tmp: Path, body: str = "Origin 1\n 2 : 50.0;\n") -> str:
    return _file(tmp, "n_trips.tntp",
                 f"<NUMBER OF ZONES> 2\n<TOTAL OD FLOW> 0\n<END OF METADATA>\n{body}")


@pytest.mark.parametrize("case, net, trips, fragments", [
    ("nodes inf", {"n": "inf"}, None, ("n_net.tntp:2", "<NUMBER OF NODES>", "finite")),
    ("nodes 4.7", {"n": "4.7"}, None, ("n_net.tntp:2", "integer", "4.7")),
    ("free-flow 1e308", {"fft": "1e308"}, None,
     ("n_net.tntp:7", "link 1→3", "not a finite float64", "free-flow time 1e+308")),
    ("capacity 1e-300", {"cap": "1e-300"}, None,
     ("n_net.tntp:7", "link 1→3", "capacity 1e-300", "rescale")),
    ("demand 1e308", {}, "Origin 1\n 2 : 1e308;\n", ("total demand 1e+308", "not a finite")),
    ("all-zero demand", {}, "Origin 1\n 2 : 0.0;\n", ("n_trips.tntp", "no positive demand")),
    ("intra-zonal only", {}, "Origin 1\n 1 : 5.0;\n", ("n_trips.tntp", "only intra-zonal")),
    ("undeclared zone", {}, "Origin 1\n 7 : 5.0;\n", ("n_trips.tntp:5", "unknown zone 7")),
])
def test_tntp_numeric_edges_are_one_error_line(case, net, trips, fragments, tmp_path, capsys):
    """Issue 23 kind 4: each once reached the solvers as inf/NaN or a numpy traceback."""
    argv = ["equilibrium", _tntp_net(tmp_path, **net), "--trips",
            _tntp_trips(tmp_path, *(() if trips is None else (trips,)))]
    check_one_error_line(case, argv, fragments, tmp_path, capsys)


def test_tntp_zero_cost_network_has_price_of_anarchy_one(tmp_path, capsys):
    """Every flow costs nothing: both totals are 0 and the ratio is 1 by convention (it divided
    by zero); the JSON is finite."""
    net = _tntp_net(tmp_path, fft="0", b="0", others=("0", "0"))
    argv = ["equilibrium", net, "--trips", _tntp_trips(tmp_path), "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["price_of_anarchy"] == 1.0
    eq = data["equilibria"]
    assert eq["wardrop"]["total_travel_time"] == eq["system_optimum"]["total_travel_time"] == 0


def test_tntp_power_1000_is_solved_without_warnings(tmp_path, capsys):
    """power: 1000 (a step-like BPR) solves with a power cone and prints no cvxpy warnings; at 50
    of capacity 100 the (1/2)^1000 term vanishes: all 50 on the two-link path (cost ≈ 2 < 3)."""
    argv = ["equilibrium", _tntp_net(tmp_path, power="1000"), "--trips", _tntp_trips(tmp_path),
            "--json"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == ""
    data = json.loads(out)
    # 50 × (1 + 1·(1 + 0.15·(50/100)^4)) on 1→3→2; the direct link costs 3
    assert data["equilibria"]["wardrop"]["total_travel_time"] == pytest.approx(
        50 * (2 + 0.15 / 16), rel=1e-6)


def test_equilibrium_api_refuses_a_network_without_arrivals():
    """All arrival rates 0 reached the dual Newton route with no state (AttributeError); the
    CLI already refused it, the API now says why too (found through `simulate`'s η_crit line)."""
    from lbtheory.equilibrium import solve_equilibrium
    from lbtheory.errors import ParameterError
    from lbtheory.io import load_topology

    net = load_topology(str(ROOT / "examples" / "three_cells.yaml"))
    zero = net.with_arrival_rates([0.0] * net.n)
    with pytest.raises(ParameterError, match="every arrival_rate is 0"):
        solve_equilibrium(zero, "gradient")
