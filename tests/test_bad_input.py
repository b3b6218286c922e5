"""Bad input → one ``error:`` line, exit code 2, nothing printed on stdout, nothing written.

A parametrised table: each row builds the files of one malformed input (in ``tmp_path``), runs the
command in-process and checks the exit code, that stderr is exactly one ``error:`` line containing
the expected fragments (the file/field and what was expected), that stdout is empty (a failing
``--plot`` must not print the JSON first), that no warning was raised (no ``RuntimeWarning`` or
solver warning leaks) and that no file was written. Any other exception fails the test (it would
be a traceback for the user).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from lbtheory.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "three_cells.yaml"
BRAESS = ROOT / "examples" / "tntp" / "Braess-Example"
TRACE = ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_conv.csv"


def _topology(**edits) -> dict:
    """The bundled three-cell example with ``cells[0]`` / ``arcs[1]`` / service edits."""
    data = yaml.safe_load(EXAMPLE.read_text())
    for key, value in edits.items():
        if key == "delay":
            data["arcs"][1]["delay"] = value
        elif key == "zero_demand":
            for c in data["cells"]:
                c["arrival_rate"] = 0.0
        elif key in ("replicas", "arrival_rate"):
            data["cells"][0][key] = value
        elif key == "base_latency":
            data["cells"][2]["service"][key] = value
        else:
            data["cells"][0]["service"][key] = value
    return data


def _json_file(tmp: Path, data: dict, name: str = "net.json") -> str:
    path = tmp / name
    path.write_text(json.dumps(data))
    return str(path)


def _bytes_file(tmp: Path, name: str, data: bytes) -> str:
    path = tmp / name
    path.write_bytes(data)
    return str(path)


def _dir(tmp: Path) -> str:
    (tmp / "figdir").mkdir()
    return str(tmp / "figdir")


GARBAGE = bytes(range(128, 256)) * 3 + b"\x00\xff\xfe"
BRAESS_ARGS = [str(BRAESS / "Braess_net.tntp"), "--trips", str(BRAESS / "Braess_trips.tntp")]

#: id → (argv builder from tmp_path, expected fragments of the error line)
CASES: dict[str, tuple[Callable[[Path], list[str]], tuple[str, ...]]] = {
    "garbage topology": (lambda t: ["equilibrium", _bytes_file(t, "g.yaml", GARBAGE)],
                         ("g.yaml", "not a text file", "YAML or JSON")),
    "garbage topology stepsize": (lambda t: ["stepsize", _bytes_file(t, "g.json", GARBAGE)],
                                  ("g.json", "not a text file")),
    "garbage trace": (lambda t: ["barrier", _bytes_file(t, "g.csv", GARBAGE)],
                      ("g.csv", "not a text file", "CSV or JSONL")),
    "NUL byte in trace": (lambda t: ["barrier", _bytes_file(t, "n.csv", b"a,b\x00\n1,2\n")],
                          ("n.csv:1", "NUL byte")),
    "topology is a directory": (lambda t: ["equilibrium", str(t)],
                                ("got a directory",)),
    "arc delay 1e308": (lambda t: ["equilibrium", _json_file(t, _topology(delay=1e308))],
                        ("net.json", "us-east -> eu-west", "delay 1e+308 s",
                         "expected delay in [0, 3600] s")),
    "all arrival rates 0 (PoA)": (
        lambda t: ["equilibrium", _json_file(t, _topology(zero_demand=True))],
        ("every arrival_rate is 0", "price of anarchy", "undefined")),
    "all arrival rates 0 (stepsize)": (
        lambda t: ["stepsize", _json_file(t, _topology(zero_demand=True))],
        ("every arrival_rate is 0", "no flow to route")),
    "--plot parent is a file": (
        lambda t: ["equilibrium", str(EXAMPLE), "--plot",
                   str(_bytes_file(t, "afile", b"x")) + "/fig.png"],
        ("afile/fig.png", "--plot", "is a regular file, not a directory")),
    "--plot out.xyz": (lambda t: ["equilibrium", str(EXAMPLE), "--plot", str(t / "out.xyz")],
                       ("out.xyz", "--plot", "unsupported file type '.xyz'", ".png")),
    "--plot is a directory": (lambda t: ["equilibrium", str(EXAMPLE), "--plot", _dir(t)],
                              ("figdir: --plot", "existing directory")),
    "--json with failing --plot": (
        lambda t: ["equilibrium", str(EXAMPLE), "--json", "--plot", str(t / "out.xyz")],
        ("out.xyz", "unsupported file type")),
    "--tol -1": (lambda t: ["equilibrium", str(EXAMPLE), "--tol", "-1"],
                 ("--tol must be in (0, 1)", "-1")),
    "--tol nan": (lambda t: ["equilibrium", str(EXAMPLE), "--tol", "nan"],
                  ("--tol must be finite",)),
    "--solver NOSUCH": (lambda t: ["equilibrium", str(EXAMPLE), "--solver", "NOSUCH"],
                        ("--solver must be one of the installed CVXPY solvers", "CLARABEL",
                         "'NOSUCH'")),
    "barrier --limit 0": (lambda t: ["barrier", str(TRACE), "--limit", "0"],
                          ("--limit must be an integer ≥ 1", "got 0")),
    "barrier --limit -5": (lambda t: ["barrier", str(TRACE), "--limit", "-5"],
                           ("--limit must be an integer ≥ 1", "got -5")),
    "trace with 1e18 prompt tokens": (
        lambda t: ["barrier", _bytes_file(t, "big.csv", b"arrival_s,prompt_tokens,output_tokens\n"
                                                        b"0,100,10\n1,1e18,5\n")],
        ("big.csv:3", "prompt_tokens", "1e+18", "at most 10,000,000 tokens")),
    "trace with 1e12 output tokens": (
        lambda t: ["barrier", _bytes_file(t, "out.csv", b"arrival_s,prompt_tokens,output_tokens\n"
                                                        b"0,100,1000000000000\n")],
        ("out.csv:2", "output_tokens", "at most 1,000,000 tokens")),
    "replicas 1e308": (lambda t: ["equilibrium", _json_file(t, _topology(replicas=1e308))],
                       ("net.json", "us-east", "replicas", "[1, 1000000]", "1e+308")),
    "arrival_rate 1e12": (
        lambda t: ["equilibrium", _json_file(t, _topology(arrival_rate=1e12))],
        ("net.json", "us-east", "arrival_rate 1e+12 req/s", "[0, 1e+09] req/s")),
    "capacity 1e300": (lambda t: ["equilibrium", _json_file(t, _topology(capacity=1e300))],
                       ("net.json", "cells[0] (us-east).service.capacity", "1e+300",
                        "[1e-09, 1e+09]")),
    "K 1e300": (lambda t: ["stepsize", _json_file(t, _topology(K=1e300))],
                ("net.json", "service.K", "accepted range")),
    "base_latency 1e300": (
        lambda t: ["equilibrium", _json_file(t, _topology(base_latency=1e300))],
        ("cells[2] (asia-se).service.base_latency", "accepted range")),
    "K 1e-12 (latency at zero load below 1 ns)": (
        lambda t: ["equilibrium", _json_file(t, _topology(K=1e-12))],
        ("service.K", "1e-12", "accepted range")),
    "capacity 1e8, K 1e-7 (ℓ(0) = 1e-15 s)": (
        lambda t: ["equilibrium", _json_file(t, _topology(capacity=1e8, K=1e-7))],
        ("us-east", "latency_at_zero 1e-15 s", "[1e-12, 10000] s")),
    "TNTP --solver NOSUCH": (lambda t: ["equilibrium", *BRAESS_ARGS, "--solver", "NOSUCH"],
                             ("--solver must be one of the installed", "'NOSUCH'")),
    "TNTP --tol -5": (lambda t: ["equilibrium", *BRAESS_ARGS, "--tol", "-5"],
                      ("--tol applies to cell networks only", "Braess_net.tntp")),
    "TNTP --plot": (lambda t: ["equilibrium", *BRAESS_ARGS, "--plot", str(t / "b.png")],
                    ("--plot applies to cell networks only",)),
    "fluid --t1 1e308": (lambda t: ["fluid", str(EXAMPLE), "--stepsize", "0.1", "--t1", "1e308"],
                         ("t1", "1e+308 s", "at most 1e+09 steps")),
    "fluid --t1 nan": (lambda t: ["fluid", str(EXAMPLE), "--stepsize", "0.1", "--t1", "nan"],
                       ("t1 must be finite",)),
    "fluid --dt -1": (lambda t: ["fluid", str(EXAMPLE), "--stepsize", "0.1", "--t1", "1",
                                 "--dt", "-1"], ("dt must be positive", "-1")),
    "fluid --plot out.xyz": (
        lambda t: ["fluid", str(EXAMPLE), "--stepsize", "0.1", "--t1", "1", "--json",
                   "--plot", str(t / "out.xyz")],
        ("out.xyz", "--plot", "unsupported file type '.xyz'")),
}


def _tree(path: Path) -> dict[str, int]:
    return {str(p.relative_to(path)): p.stat().st_size for p in sorted(path.rglob("*"))}


def check_one_error_line(case: str, argv: list[str], fragments: tuple[str, ...], tmp_path: Path,
                         capsys) -> None:
    """Run ``argv`` in-process: exit code 2, stdout empty, stderr exactly one ``error:`` line
    with every fragment, no warning leaked (lbtheory's own deprecations aside), nothing written
    under ``tmp_path`` (shared by test_bad_input_newer.py)."""
    before = _tree(tmp_path)
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (case, err)
    assert out == "", f"{case}: printed before failing: {out[:200]!r}"
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for frag in fragments:
        assert frag in lines[0], f"{case}: {frag!r} not in {lines[0]!r}"
    assert ".tmp" not in lines[0]  # names the target, not a temporary file
    assert not [str(w.message) for w in caught
                if not issubclass(w.category, DeprecationWarning)], f"{case}: warnings leaked"
    assert _tree(tmp_path) == before, f"{case}: wrote files"


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_error_line(case, tmp_path, capsys):
    build, fragments = CASES[case]
    check_one_error_line(case, build(tmp_path), fragments, tmp_path, capsys)


def test_no_warning_or_traceback_leaks_to_stderr(tmp_path):
    """The real process: huge latencies used to print RuntimeWarning lines, then fail."""
    path = _json_file(tmp_path, _topology(base_latency=1e300, K=1e300))
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    proc = subprocess.run([sys.executable, "-m", "lbtheory.cli", "equilibrium", path],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert "service.K" in proc.stderr and "accepted range" in proc.stderr


def test_stepsize_unstable_exits_1(tmp_path, capsys):
    """Exit code 1 when the check fails (verdict UNSTABLE), 0 when it passes."""
    assert main(["stepsize", str(EXAMPLE), "--stepsize", "1000"]) == 1
    assert "verdict: UNSTABLE" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["equilibrium", "fluid", "stepsize", "barrier"])
def test_help_shows_defaults_units_and_an_example(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    epilog = text.split("\nexample")[-1]  # the epilog: "example:" or "examples:"
    assert "\nexample" in text and f"  lbtheory {command} " in epilog
    assert text.count("default") >= 2


def test_help_lists_subcommands_in_readme_order(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    pos = [text.index(f"    {c}") for c in ("equilibrium", "fluid", "stepsize", "barrier")]
    assert pos == sorted(pos)


def test_tntp_path_honours_solver(monkeypatch, capsys):
    """``--solver`` reaches the routing-game solver on the TNTP path (it used to be ignored)."""
    import lbtheory.games.solve

    seen = []
    real = lbtheory.games.solve.solve_pair

    def spy(game, **kw):
        seen.append(kw.get("solver"))
        return real(game, **kw)

    monkeypatch.setattr(lbtheory.games.solve, "solve_pair", spy)
    assert main(["equilibrium", *BRAESS_ARGS, "--solver", "ecos", "--json"]) == 0
    assert seen == ["ECOS"]
    assert json.loads(capsys.readouterr().out)["price_of_anarchy"] == pytest.approx(552 / 498)
