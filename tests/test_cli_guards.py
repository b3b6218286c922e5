"""CLI guard rails (issues 33 item 5, 34 items 3–5): unit mistakes, ranges that are true, numeric
flags that cannot overflow, warnings after a simulation, and Ctrl-C as one line.

Oracles: the flag values are hand-picked on each side of the documented bounds; the sweep's
interrupt line is checked against the cell files counted on disk, and the resumed run against
the grid size; the nested-outage scenario against the same run with the long outage alone (and
against the old, wrong reading — the long outage cut short — which must differ).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from lbtheory.cli import main
from tests.test_bad_input import check_one_error_line

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "three_cells.yaml"
SCENARIO = ROOT / "examples" / "sim_two_cells.yaml"
BRAESS = ROOT / "examples" / "tntp" / "Braess-Example"
BRAESS_ARGS = [str(BRAESS / "Braess_net.tntp"), "--trips", str(BRAESS / "Braess_trips.tntp")]
TRACE = ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_conv.csv"


def _lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.strip()]


# ----------------------------------------------------------------------------- utilisation
@pytest.mark.parametrize("flag", ["--utilisation", "--utilization"])
def test_utilisation_as_a_percentage_is_an_error_suggesting_the_fraction(flag, tmp_path, capsys):
    check_one_error_line(f"{flag} 80", ["simulate", "--appendix-b", "1", flag, "80"],
                         (flag, "80", "fraction", "did you mean 0.80?"), tmp_path, capsys)
    check_one_error_line(f"{flag} 250", ["simulate", "--appendix-b", "1", flag, "250"],
                         (flag, "250", "accepted up to 2"), tmp_path, capsys)
    check_one_error_line(f"{flag} 80%", ["simulate", "--appendix-b", "1", f"{flag}=80%"],
                         (flag, "80%", "did you mean 0.80?"), tmp_path, capsys)


def test_utilisation_above_one_warns_and_at_most_one_does_not(capsys):
    # an unknown policy stops the run right after parsing: what parsing printed is all there is
    assert main(["simulate", "--appendix-b", "1", "--utilisation", "1.5", "--policy", "x"]) == 2
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 2 and lines[0].startswith("warning: --utilisation 1.5 is above 1")
    assert lines[1].startswith("error: --policy")
    assert main(["simulate", "--appendix-b", "1", "--utilisation", "1", "--policy", "x"]) == 2
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith("error: --policy")


# ----------------------------------------------------------------------------- numeric flags
NUMERIC = {
    "--timeout 1e308": (["tntp", "fetch", "Braess", "--cache", "{t}", "--timeout", "1e308"],
                        ("--timeout must be in (0, 1e+06]", "1e+308")),
    "--duration 1e400": (["simulate", str(SCENARIO), "--duration", "1e400"],
                         ("--duration must be finite",)),
    "--stepsize inf": (["fluid", str(EXAMPLE), "--stepsize", "inf", "--duration", "1"],
                       ("--stepsize must be finite",)),
    "--seed 1e30": (["simulate", str(SCENARIO), "--seed", "1e30"], ("--seed must be an integer",)),
    "--seed 2**64": (["barrier", str(TRACE), "--seed", str(2**64)], ("--seed", "64-bit")),
    "--requests 1e400 (an int flag)": (["barrier", str(TRACE), "--requests", "1e400"],
                                       ("--requests must be an integer",)),
    "--limit nan (an alias)": (["barrier", str(TRACE), "--limit", "nan"], ("--limit must be",)),
    "--rate=-inf": (["intelligent", "evaluate", str(TRACE), "--rate=-inf"],
                    ("--rate must be finite",)),
    "--lr 1e999": (["intelligent", "train", str(TRACE), "--lr", "1e999", "--out", "{t}/o"],
                   ("--lr must be finite",)),
    "--threads 0": (["equilibrium", *BRAESS_ARGS, "--threads", "0"],
                    ("--threads must be an integer >= 1",)),
    "--gap 1e-300": (["equilibrium", *BRAESS_ARGS, "--gap", "1e-300"],
                     ("--gap 1e-300 is below 1e-12", "[1e-12, 0.001]")),
    "--gap 1e-16 --method fw": (["equilibrium", *BRAESS_ARGS, "--gap", "1e-16", "--method", "fw"],
                                ("--gap 1e-16 is below 1e-12", "[1e-12, 0.001]")),
    "--gap 1": (["equilibrium", *BRAESS_ARGS, "--gap", "1"], ("--gap must be in (0, 1)",)),
    # found by fuzzing: a 7.28-TiB allocation (traceback), numpy overflow warnings, errors
    # naming a generated cell or appendix_b.* instead of the flag
    "--horizon 1e12": (["barrier", str(TRACE), "--horizon", str(10**12)],
                       ("--horizon must be an integer <= 1000000",)),
    "--step-a 1e308": (["barrier", str(TRACE), "--step-a", "1e308"],
                       ("--step-a must be in [0, 1]", "s per token")),
    "--y 1e-300": (["simulate", "--appendix-b", "1", "--y", "1e-300"],
                   ("--y: appendix_b.y must be in [",)),
    "--noise 1": (["simulate", "--appendix-b", "1", "--noise", "1"],
                  ("--noise must be in [0, 1)",)),
    "--cells 0": (["simulate", "--appendix-b", "1", "--cells", "0"],
                  ("--cells must be an integer >= 1",)),
    "--nodes 1e6": (["stepsize", str(EXAMPLE), "--nodes", str(10**6)],
                    ("--nodes must be an integer <= 256",)),
    "stepsize --stepsize 1e308": (["stepsize", str(EXAMPLE), "--stepsize", "1e308"],
                                  ("--stepsize 1e+308 is beyond 1e+06",)),
    "--rate 1e308": (["intelligent", "evaluate", str(TRACE), "--rate", "1e308"],
                     ("--rate must be <= 1e+09", "req/s")),
}


@pytest.mark.parametrize("case", list(NUMERIC))
def test_numeric_flags_refuse_overflow_and_out_of_range_in_one_line(case, tmp_path, capsys):
    argv, fragments = NUMERIC[case]
    argv = [a.replace("{t}", str(tmp_path)) for a in argv]
    check_one_error_line(case, argv, fragments, tmp_path, capsys)


def test_gap_that_certifies_little_warns_and_threads_are_capped(capsys):
    import numba

    have = numba.config.NUMBA_NUM_THREADS
    assert main(["equilibrium", *BRAESS_ARGS, "--gap", "0.5", "--threads", "100000",
                 "--json"]) == 0
    out, err = capsys.readouterr()
    lines = _lines(err)
    assert len(lines) == 2, err
    assert lines[0].startswith("warning: --gap 0.5 certifies little")
    assert lines[1] == (f"warning: --threads 100000 is more than the {have} threads numba has "
                        f"on this machine (NUMBA_NUM_THREADS); using {have}")
    rep = json.loads(out)
    assert rep["requested_gap"] == 0.5 and rep["relative_gaps"]["wardrop"] <= 0.5
    # Braess at demand 6 (THEORY's closed values): optimum 498 ≤ any feasible total travel time
    assert rep["equilibria"]["wardrop"]["total_travel_time"] >= 498 - 1e-6


def test_collocation_refuses_a_matrix_beyond_the_memory_limit():
    """The library's own guard (an API call, not the CLI): 10^6 nodes asked for 7.28 TiB."""
    from lbtheory.errors import ParameterError
    from lbtheory.instances import symmetric_two_cell
    from lbtheory.stability import critical_stepsize

    with pytest.raises(ParameterError, match="collocation of degree 1000000.*GiB"):
        critical_stepsize(symmetric_two_cell(), "gradient", n_nodes=10**6)


# ----------------------------------------------------------------------------- delays
def test_delay_in_milliseconds_warns_once_naming_the_arc(tmp_path, capsys):
    data = yaml.safe_load(EXAMPLE.read_text())
    data["arcs"][1]["delay"] = 15
    path = tmp_path / "ms.json"
    path.write_text(json.dumps(data))
    src, dst = data["arcs"][1]["from"], data["arcs"][1]["to"]
    assert main(["equilibrium", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    json.loads(out)
    lines = _lines(err)
    assert lines == [f"warning: {path}: delays are in seconds; 15 s read from arc {src}→{dst}; "
                     f"write milliseconds as e.g. 0.015"]
    data["arcs"][1]["delay"] = 10.0  # at the bound: no warning
    path.write_text(json.dumps(data))
    assert main(["equilibrium", str(path), "--json"]) == 0
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------- after a run
def test_simulation_with_most_requests_rejected_warns_and_exits_0(tmp_path, capsys):
    data = yaml.safe_load(SCENARIO.read_text())
    for c in data["cells"]:
        c["arrival_rate"] *= 8  # ~8× the cluster's capacity: queues overflow
    data["simulation"].pop("bursts")
    data["simulation"].pop("outages")
    data["simulation"]["server"]["queue_limit"] = 1
    path = tmp_path / "hot.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path), "--policy", "rand", "--duration", "10",
                 "--engine", "reference", "--json"]) == 0
    out, err = capsys.readouterr()
    rate = json.loads(out)["policies"]["rand"]["error_rate"]
    assert rate > 0.5
    lines = [ln for ln in _lines(err) if "rejected" in ln]
    assert lines == [f"warning: rand: {100 * rate:.1f}% of the requests were rejected (queue "
                     f"overflow): the cluster is overloaded (is the utilisation a fraction, e.g. "
                     f"0.8?); its latency covers the "
                     f"{json.loads(out)['policies']['rand']['completed']} completed requests "
                     f"only"]


# ----------------------------------------------------------------------------- outages
def _outage_runs(outages_by_label: dict, engine: str) -> dict:
    from lbtheory.registry import make_router
    from lbtheory.sim import load_scenario, simulate

    sc = load_scenario(SCENARIO)
    out = {}
    for label, outs in outages_by_label.items():
        s = dataclasses.replace(sc, bursts=(), outages=outs)
        out[label] = simulate(s, make_router("flow-grad"), duration_s=60.0, seed=1,
                              engine=engine).latency_s
    return out


@pytest.mark.parametrize("engine", ["compiled", "reference"])
def test_nested_and_overlapping_outages_compose_by_the_minimum(engine):
    from lbtheory.sim import Outage, load_scenario

    far = load_scenario(SCENARIO).network.names.index("far")
    long, short = Outage(far, 10.0, 50.0, 1), Outage(far, 20.0, 30.0, 3)
    runs = _outage_runs({
        "long": (long,), "nested": (long, short), "nested first": (short, long),
        "cut short": (Outage(far, 10.0, 30.0, 1),),  # what the short one's end used to do
        "overlap": (Outage(far, 10.0, 50.0, 1), Outage(far, 40.0, 55.0, 3)),
        "overlap split": (Outage(far, 10.0, 50.0, 1), Outage(far, 50.0, 55.0, 3)),
    }, engine)
    same = np.testing.assert_array_equal
    same(runs["nested"], runs["long"])
    same(runs["nested first"], runs["long"])
    same(runs["overlap"], runs["overlap split"])
    assert np.nanmean(runs["cut short"]) < 0.9 * np.nanmean(runs["long"])  # it mattered


def test_outage_events_hand_computed():
    from lbtheory.sim import Outage
    from lbtheory.sim._scenario import outage_events

    k = [6, 4]
    outs = (Outage(0, 10.0, 50.0, 1), Outage(0, 20.0, 30.0, 3), Outage(1, 5.0, 6.0, 2),
            Outage(0, 50.0, 60.0, 2))
    assert outage_events(outs, k) == [(10.0, 0, 1), (50.0, 0, 2), (20.0, 0, 1), (30.0, 0, 1),
                                      (5.0, 1, 2), (6.0, 1, 4), (50.0, 0, 2), (60.0, 0, 6)]


# ----------------------------------------------------------------------------- sweeps
TOY = textwrap.dedent('''
    import os, time
    from lbtheory.sweep import Experiment

    def grid(profile):
        return [{"x": x} for x in range(12)]

    def cell(config):
        time.sleep(float(os.environ.get("SWEEP_SLEEP", "0")))
        return {"x": config["x"]}

    def collect(rows, out_dir, profile):
        pass

    EXPERIMENTS = [Experiment(name="toy", description="sleepy cells", grid=grid, cell=cell,
                              collect=collect)]
''')


def _cli(*args: str) -> list[str]:
    """The ``lbtheory`` console script, as a user runs it. (Under ``python -m lbtheory.cli`` a
    Ctrl-C landing while a module is being imported is handled — one ``interrupted`` line — but
    CPython's runpy still ends the process by SIGINT, exit -2, about a third of the time.)"""
    return [str(Path(sys.executable).with_name("lbtheory")), *args]


def _env(**extra: str) -> dict:
    return os.environ | {"PYTHONPATH": str(ROOT)} | extra


def test_workers_above_the_cores_are_capped_with_a_warning(tmp_path):
    (tmp_path / "toy.py").write_text(TOY)
    cores = os.cpu_count()
    r = subprocess.run(_cli("sweep", "toy", "--scheduler", "serial", "--workers", "100000",
                            "--experiments-dir", str(tmp_path), "--out", str(tmp_path / "o"),
                            "--no-progress"), capture_output=True, text=True, env=_env(),
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _lines(r.stderr) == [f"warning: --workers 100000 is more than the {cores} cores of "
                                f"this machine; using {cores}"]
    assert "(12 computed, 0 cached)" in r.stdout


def _numpy_loaded(pid: int) -> bool:
    """The process is inside ``main`` (numpy is first imported by the command modules)."""
    try:
        return "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _interrupt(cmd: list[str], ready, *, cwd: Path, env: dict, timeout: float = 120.0,
               after_s: float = 0.3):
    """Start ``cmd`` in its own process group, wait until ``ready()`` and ``after_s`` more,
    send SIGINT to the group (as a terminal's Ctrl-C does); returns the finished process's
    (code, stdout, stderr)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=cwd, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while not ready(proc):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "never became ready"
            time.sleep(0.05)
        time.sleep(after_s)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, err


#: policies enough for a run of about a minute (one policy ended in ~10 s: a SIGINT after the
#: end is no test)
LONG = "rand,flow-grad,flow-lat,jsq,flow-rif"


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps")
@pytest.mark.parametrize(("argv", "after_s"), [
    (["simulate", "--appendix-b", "1", "--duration", "3000", "--policy", LONG], 0.3),
    (["simulate", "--appendix-b", "1", "--duration", "3000", "--policy", LONG], 8.0),
    (["fluid", str(EXAMPLE), "--stepsize", "0.1", "--duration", "1e4", "--dt", "1e-4"], 3.0),
    (["barrier", str(TRACE), "--policy", "brh-oracle"], 0.3),
], ids=["simulate-starting", "simulate-running", "fluid", "barrier"])
def test_ctrl_c_is_one_line_exit_130(argv, after_s, tmp_path):
    code, out, err = _interrupt(_cli(*argv), lambda p: _numpy_loaded(p.pid), cwd=tmp_path,
                                env=_env(), after_s=after_s)
    assert code == 130, err
    assert err == "interrupted\n", err


@pytest.mark.parametrize("scheduler", ["serial", "local"])
def test_ctrl_c_of_a_sweep_names_the_cached_cells_and_a_rerun_resumes(scheduler, tmp_path):
    (tmp_path / "toy.py").write_text(TOY)
    out_dir = tmp_path / "o"
    cells = out_dir / "toy" / "cells"
    cmd = _cli("sweep", "toy", "--scheduler", scheduler, "--workers", "1", "--experiments-dir",
               str(tmp_path), "--out", str(out_dir), "--no-progress")
    env = _env(SWEEP_SLEEP="0.5")
    code, _, err = _interrupt(cmd, lambda p: len(list(cells.glob("*.json"))) >= 2,
                              cwd=tmp_path, env=env, timeout=240)
    done = len(list(cells.glob("*.json")))
    assert code == 130, err
    assert 2 <= done < 12
    assert err == (f"interrupted: {done} cells cached in {cells}; rerun the same command to "
                   f"resume\n")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"({12 - done} computed, {done} cached)" in r.stdout


# ----------------------------------------------------------------------------- compiling
def test_kernels_cached_follows_numba_s_cache_index(tmp_path):
    """A fresh ``cache=True`` kernel: not cached before its first call, compiled after it, and
    cached (the index on disk) in the next process."""
    (tmp_path / "kmod.py").write_text("from numba import njit\n\n\n@njit(cache=True)\n"
                                      "def f(x):\n    return x + 1\n")
    code = ("import kmod\nfrom lbtheory._jit import kernels_cached as c\n"
            "before = c(kmod.f)\nkmod.f(1)\nprint(before, c(kmod.f))\n")
    env = _env(NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=120) for _ in range(2)]
    assert [r.stdout.split() for r in runs] == [["False", "True"], ["True", "True"]], runs


@pytest.mark.parametrize("method", ["gp", "bush"])
def test_warm_up_compiles_the_route_s_kernels(method):
    from lbtheory.games import _bushkernels, _gpkernels
    from lbtheory.games.solve import _ROUTE_KERNELS, kernels_cached, warm_up
    from lbtheory.games.tntp import load_tntp_game

    game = load_tntp_game(*BRAESS_ARGS[::2])
    warm_up(game, method=method)
    for name in _ROUTE_KERNELS[method]:
        kernel = getattr(_gpkernels, name, None) or getattr(_bushkernels, name)
        assert kernel.signatures, name  # compiled (or loaded) before any solver clock starts
    assert kernels_cached(game, method=method)


@pytest.mark.parametrize("cached", [False, True])
def test_compiling_line_only_when_the_kernels_are_not_cached(cached, monkeypatch, capsys):
    import lbtheory.games.solve as solve

    monkeypatch.setattr(solve, "kernels_cached", lambda *a, **k: cached)
    assert main(["equilibrium", *BRAESS_ARGS, "--method", "gp", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ("" if cached else "compiling kernels once (~15 s)…\n")
    # the solve after the warm-up: no compiling in the reported time (compiling takes ≥ 10 s)
    assert json.loads(out)["equilibria"]["wardrop"]["seconds"] < 5.0
