"""The sweep runner (issue 12): cache keys, resume after a kill, serial = Dask, errors, the CLI.

Oracles outside the runner: the cache key is recomputed here with :mod:`hashlib` from the JSON the
issue specifies; "not recomputed" is counted by the cells themselves (each call appends a line to a
log file); serial vs Dask compares the same numpy draws computed in two different processes; the
migrated experiments are checked against THEORY's closed values (Braess d = 6: 552 / 498).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import lbtheory
from lbtheory.cli import main
from lbtheory.errors import ParameterError, RunStatus, SweepError
from lbtheory.sweep import (
    CONNECT_TIMEOUT_S,
    Experiment,
    cache_key,
    cell_path,
    dask_client,
    load_experiments,
    run_sweep,
)

ROOT = Path(__file__).resolve().parents[1]
LBTHEORY = str(Path(sys.executable).with_name("lbtheory"))

#: a test experiment file: cells draw seeded numpy numbers, log each call, may sleep or fail
EXPERIMENT_FILE = textwrap.dedent('''
    import os, time
    from pathlib import Path
    import numpy as np
    from lbtheory.io import write_json_atomic
    from lbtheory.sweep import Experiment, script_main
    from _helper import scale   # a sibling helper module: must reach Dask workers too

    LOG = Path(os.environ.get("SWEEP_TEST_LOG", "/dev/null"))

    def grid(profile):
        n = {"quick": 4, "full": 8}[profile]
        return [{"x": x, "seed": 100 + x, "sleep": float(os.environ.get("SWEEP_SLEEP", "0"))}
                for x in range(n)]

    def cell(config):
        with open(LOG, "a") as fh:
            fh.write(f"{config['x']}\\n")
        time.sleep(config["sleep"])
        rng = np.random.default_rng(config["seed"])
        return {"x": config["x"], "draws": scale(rng.standard_normal(3)).tolist()}

    def collect(rows, out_dir, profile):
        write_json_atomic(out_dir / f"summary_{profile}.json",
                          {"xs": [c["x"] for c, _ in rows],
                           "total": sum(sum(r["draws"]) for _, r in rows)})

    def empty(profile):
        return []

    def broken(config):
        if config["x"] == 1:
            raise ValueError("cell 1 is broken")
        return cell(config)

    EXPERIMENTS = [
        Experiment(name="toy", description="seeded draws", grid=grid, cell=cell,
                   collect=collect, group="toys"),
        Experiment(name="toy-empty", description="empty grid", grid=empty, cell=cell,
                   collect=collect),
        Experiment(name="toy-broken", description="cell 1 raises", grid=grid, cell=broken,
                   collect=collect),
    ]

    if __name__ == "__main__":
        import sys
        sys.exit(script_main(EXPERIMENTS[0]))
''')


@pytest.fixture
def exp_dir(tmp_path: Path) -> Path:
    d = tmp_path / "exps"
    d.mkdir()
    (d / "toy.py").write_text(EXPERIMENT_FILE)
    (d / "_helper.py").write_text("def scale(a):\n    return 2.0 * a\n")
    return d


def _toy(exp_dir: Path, name: str = "toy") -> Experiment:
    return {e.name: e for e in load_experiments(exp_dir / "toy.py")}[name]


# ----------------------------------------------------------------------------- cache keys
def test_cache_key_is_sha256_of_name_config_version(monkeypatch):
    cfg = {"seed": 3, "policy": "rand", "util": 0.8}
    text = json.dumps({"experiment": "e", "config": cfg, "version": lbtheory.__version__},
                      sort_keys=True, separators=(",", ":"))
    assert cache_key("e", cfg) == hashlib.sha256(text.encode()).hexdigest()
    assert cache_key("e", dict(reversed(cfg.items()))) == cache_key("e", cfg)  # key order
    keys = {cache_key("e", cfg), cache_key("f", cfg)}
    for field, other in (("seed", 4), ("policy", "jsq"), ("util", 0.8000001)):
        keys.add(cache_key("e", cfg | {field: other}))
    keys.add(cache_key("e", cfg | {"extra": None}))
    keys.add(cache_key("e", cfg, experiment_version="2"))
    monkeypatch.setattr(lbtheory, "__version__", "99.0")
    keys.add(cache_key("e", cfg))
    assert len(keys) == 8, "every field, the name, the experiment and package versions matter"


def test_version_change_recomputes_every_cell(exp_dir, tmp_path, monkeypatch):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("SWEEP_TEST_LOG", str(log))
    exp, out = _toy(exp_dir), tmp_path / "res"
    first = run_sweep(exp, "quick", out_dir=out)
    again = run_sweep(exp, "quick", out_dir=out)
    assert (first.computed, first.cached, again.computed, again.cached) == (4, 0, 0, 4)
    assert again.rows == first.rows
    monkeypatch.setattr(lbtheory, "__version__", lbtheory.__version__ + ".post1")
    bumped = run_sweep(exp, "quick", out_dir=out)
    assert (bumped.computed, bumped.cached) == (4, 0)
    assert len(log.read_text().split()) == 8
    cell = json.loads(cell_path(out, "toy", cache_key("toy", first.rows[0][0])).read_text())
    assert cell["config"] == first.rows[0][0] and cell["result"] == bumped.rows[0][1]
    assert cell["versions"]["numpy"] and cell["wall_s"] >= 0
    summary = json.loads((out / "toy" / "summary_quick.json").read_text())
    assert summary["xs"] == [0, 1, 2, 3]


# ----------------------------------------------------------------------------- resume
def test_killed_sweep_resumes_without_recomputing(exp_dir, tmp_path):
    """SIGKILL a serial CLI sweep after 3 cells; the restart computes only the other 5."""
    log, out = tmp_path / "calls.log", tmp_path / "res"
    env = os.environ | {"SWEEP_TEST_LOG": str(log), "SWEEP_SLEEP": "0.4"}
    cmd = [LBTHEORY, "sweep", "toy", "--scheduler", "serial", "--experiments-dir",
           str(exp_dir), "--out", str(out), "--no-progress"]
    cells = out / "toy" / "cells"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(list(cells.glob("*.json"))) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "sweep ended early"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)  # right after a cell file landed: inside a sleep
    finally:
        proc.wait()
    done = {json.loads(f.read_text())["config"]["x"] for f in cells.glob("*.json")}
    assert 3 <= len(done) < 8
    calls_before = log.read_text().split()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"({8 - len(done)} computed, {len(done)} cached)" in r.stdout
    calls_after = log.read_text().split()[len(calls_before):]
    assert not done & {int(x) for x in calls_after}, "a finished cell was recomputed"
    assert sorted(int(x) for x in calls_after) == sorted(set(range(8)) - done)
    assert len(list(cells.glob("*.json"))) == 8
    assert not [f for f in out.rglob("*") if f.name.endswith(".tmp")], "temporary file left"


def test_failed_cell_keeps_the_others_and_is_one_error(tmp_path):
    def cell(config: dict) -> dict:
        if config["x"] == 1:
            raise ZeroDivisionError("boom")
        return {"y": config["x"]}

    exp = Experiment(name="half-broken", description="d", grid=lambda p: [{"x": i}
                                                                           for i in range(3)],
                     cell=cell, collect=lambda rows, out, p: None)
    with pytest.raises(SweepError, match=r"'half-broken': 1 of 3 cells failed.*'x': 1.*boom"):
        run_sweep(exp, "quick", out_dir=tmp_path)
    assert len(list((tmp_path / "half-broken" / "cells").glob("*.json"))) == 2


def test_throw_false_returns_failed_status_listing_the_failed_cells(tmp_path):
    """throw=False: status FAILED, the failed configs named in grid order, the others returned
    and saved; collect does not run on the partial grid (no summary, no sweep_<profile>.json,
    so ``--if-missing`` still runs it). A complete sweep is COMPLETED with no errors."""
    collected = []

    def cell(config: dict) -> dict:
        if config["x"] in (3, 1):
            raise ZeroDivisionError(f"boom {config['x']}")
        return {"y": 10 * config["x"]}

    exp = Experiment(name="half-broken", description="d",
                     grid=lambda p: [{"x": i} for i in range(5)], cell=cell,
                     collect=lambda rows, out, p: collected.append(rows))
    res = run_sweep(exp, "quick", out_dir=tmp_path, throw=False)
    assert res.status is RunStatus.FAILED
    assert res.errors == [({"x": 1}, "ZeroDivisionError: boom 1"),
                          ({"x": 3}, "ZeroDivisionError: boom 3")]
    assert res.rows == [({"x": 0}, {"y": 0}), ({"x": 2}, {"y": 20}), ({"x": 4}, {"y": 40})]
    assert (res.computed, res.cached) == (3, 0)
    assert collected == [] and not (tmp_path / "half-broken" / "sweep_quick.json").exists()
    ok = Experiment(name="whole", description="d", grid=lambda p: [{"x": 0}, {"x": 2}],
                    cell=cell, collect=lambda rows, out, p: collected.append(rows))
    done = run_sweep(ok, "quick", out_dir=tmp_path, throw=False)
    assert (done.status, done.errors) == (RunStatus.COMPLETED, [])
    assert collected == [[({"x": 0}, {"y": 0}), ({"x": 2}, {"y": 20})]]
    with pytest.raises(ParameterError, match="throw must be true or false, got 0"):
        run_sweep(ok, "quick", out_dir=tmp_path, throw=0)
    with pytest.raises(ParameterError, match="batch must be an integer >= 1"):
        run_sweep(ok, "quick", out_dir=tmp_path, batch=0)
    with pytest.raises(ParameterError, match="workers must be an integer >= 1"):
        run_sweep(ok, "quick", backend="local", workers=True, out_dir=tmp_path)


# ----------------------------------------------------------------------------- backends
def test_serial_and_local_dask_give_identical_results(exp_dir, tmp_path, monkeypatch):
    """Cells from a file loaded by path (and its sibling helper) run on 2 Dask worker processes;
    every row equals the in-process run bit for bit."""
    monkeypatch.setenv("SWEEP_TEST_LOG", str(tmp_path / "calls.log"))
    exp = _toy(exp_dir)
    serial = run_sweep(exp, "full", out_dir=tmp_path / "serial")
    with dask_client("local", 2) as client:
        # no worker time-to-live: a cell holding the GIL for minutes must not get its worker
        # removed (the default 5-minute TTL cancelled every pending cell of a sweep)
        assert client.cluster.scheduler.worker_ttl is None
        dask = run_sweep(exp, "full", out_dir=tmp_path / "dask", client=client,
                         batch=3)  # 3 + 3 + 2 cells per Dask task
        with pytest.raises(SweepError, match=r"'toy-broken': 1 of 4 cells failed.*'x': 1.*"
                                             r"ValueError: cell 1 is broken"):
            run_sweep(_toy(exp_dir, "toy-broken"), "quick", out_dir=tmp_path / "dask",
                      client=client, batch=2)
        # a task the scheduler drops (cancelled, as when a worker is stopped past its
        # heartbeat and the scattered cell goes with it) is resubmitted once: every cell saved
        import distributed

        real = distributed.as_completed

        class CancelFirst(real):
            def __init__(self, futs):
                futs = list(futs)
                futs[0].cancel()
                super().__init__(futs)

        class CancelRetriesToo(CancelFirst):
            def add(self, future):
                future.cancel()
                super().add(future)

        monkeypatch.setenv("SWEEP_SLEEP", "0.3")
        monkeypatch.setattr(distributed, "as_completed", CancelFirst)
        retried = run_sweep(exp, "quick", out_dir=tmp_path / "retry", client=client, batch=2)
        assert (retried.computed, retried.status.value) == (4, "completed")
        # the scattered cell lost (every batch depends on it, so all are dropped): it is
        # scattered again once, not once per dropped batch, and every cell is saved
        class CancelCell(real):
            def __init__(self, futs):
                futs = list(futs)
                c = futs[0].client
                [data] = [distributed.Future(k, c) for k in list(c.futures)
                          if not str(k).startswith("toy-")]
                data.cancel()
                super().__init__(futs)

        scatters = []
        scatter = client.scatter
        monkeypatch.setattr(client, "scatter", lambda *a, **kw: scatters.append(1) or
                            scatter(*a, **kw))
        monkeypatch.setattr(distributed, "as_completed", CancelCell)
        lost = run_sweep(exp, "quick", out_dir=tmp_path / "lost", client=client, batch=2)
        assert (lost.computed, lost.status.value, len(scatters)) == (4, "completed", 2)
        # dropped twice: its batch fails with one error, not a traceback; the other is saved
        monkeypatch.setattr(distributed, "as_completed", CancelRetriesToo)
        with pytest.raises(SweepError, match=r"'toy': 2 of 4 cells failed.*'x': 0.*Cancelled"):
            run_sweep(exp, "quick", out_dir=tmp_path / "cancel", client=client, batch=2)
        monkeypatch.setattr(distributed, "as_completed", real)
    assert retried.rows == run_sweep(exp, "quick", out_dir=tmp_path / "serial-quick").rows
    assert len(list((tmp_path / "retry" / "toy" / "cells").glob("*.json"))) == 4
    assert lost.rows == retried.rows
    assert len(list((tmp_path / "cancel" / "toy" / "cells").glob("*.json"))) == 2
    assert len(list((tmp_path / "dask" / "toy-broken" / "cells").glob("*.json"))) == 3
    assert (dask.computed, dask.cached) == (8, 0)
    assert dask.rows == serial.rows
    assert serial.rows[0][1]["draws"][0] != 0.0
    for name in ("summary_full.json",):
        assert ((tmp_path / "dask" / "toy" / name).read_text()
                == (tmp_path / "serial" / "toy" / name).read_text())


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize("grid, match", [
    (lambda p: [], r"'bad': grid\('quick'\) is empty"),
    (lambda p: [{"a": 1}, {"a": 1}], r"'bad': grid\('quick'\)\[1\] duplicates config \[0\]"),
    (lambda p: [{"a": float("nan")}], r"'bad': grid\('quick'\)\[0\] is not plain JSON"),
    (lambda p: [{"a": {1, 2}}], r"'bad': grid\('quick'\)\[0\] is not plain JSON"),
    (lambda p: [[1]], r"'bad': grid\('quick'\)\[0\] must be a dict"),
])
def test_bad_grids_name_the_experiment(grid, match, tmp_path):
    exp = Experiment(name="bad", description="d", grid=grid, cell=lambda c: {},
                     collect=lambda rows, out, p: None)
    with pytest.raises(SweepError, match=match):
        run_sweep(exp, "quick", out_dir=tmp_path)
    assert not (tmp_path / "bad").exists()


def test_bad_experiment_fields_and_profiles(tmp_path):
    ok = {"description": "d", "grid": lambda p: [{}], "cell": lambda c: {},
          "collect": lambda r, o, p: None}
    with pytest.raises(SweepError, match="name 'Bad_Name'"):
        Experiment(name="Bad_Name", **ok)
    with pytest.raises(SweepError, match="'e': field 'cell' must be callable"):
        Experiment(name="e", **(ok | {"cell": 3}))
    with pytest.raises(SweepError, match="'e': field 'profiles'"):
        Experiment(name="e", profiles="quick", **ok)
    exp = Experiment(name="e", **ok)
    assert exp.default_profile == "full"
    three = Experiment(name="e", profiles=("quick", "reduced", "full"), default="reduced", **ok)
    assert three.default_profile == "reduced"
    assert Experiment(name="e", profiles=("quick", "core"), **ok).default_profile == "quick"
    with pytest.raises(SweepError, match="'e': field 'default' must be one of its profiles"):
        Experiment(name="e", default="reduced", **ok)
    with pytest.raises(SweepError, match="'e': unknown profile 'medium'; expected one of "
                                         "quick, full"):
        run_sweep(exp, "medium", out_dir=tmp_path)
    with pytest.raises(SweepError, match="backend 'threads'"):
        run_sweep(exp, "quick", backend="threads", out_dir=tmp_path)


# ----------------------------------------------------------------------------- CLI
def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["sweep", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv, match", [
    (["nope"], "error: unknown experiment or group 'nope'; known experiments: toy, toy-broken, "
               "toy-empty"),
    (["toy-empty", "--quick"], "error: experiment 'toy-empty': grid('quick') is empty"),
    (["toy", "--quick", "--scheduler", "tcp://127.0.0.1:1"],
     f"error: scheduler 'tcp://127.0.0.1:1': cannot connect within {CONNECT_TIMEOUT_S:g} s"),
    (["toy", "--profile", "huge"], "error: experiment 'toy': unknown profile 'huge'"),
    (["toy", "--quick", "--workers", "0"], "error: --workers must be an integer >= 1, got 0"),
    (["toy", "--quick", "--batch", "0"], "error: --batch must be an integer >= 1, got 0"),
])
def test_cli_bad_input_is_one_error_line_exit_2(argv, match, exp_dir, tmp_path, capsys):
    rc, out, err = _cli(capsys, *argv, "--experiments-dir", str(exp_dir), "--out",
                        str(tmp_path / "res"))
    assert rc == 2 and out == ""
    assert err.startswith(match) and err.count("\n") == 1, err


def test_cli_list_and_group_run(exp_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SWEEP_TEST_LOG", str(tmp_path / "calls.log"))
    rc, out, _ = _cli(capsys, "--list", "--experiments-dir", str(exp_dir))
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["EXPERIMENT", "GROUP"]
    assert lines[1].split()[:4] == ["toy", "toys", "quick:4", "full*:8"]  # * = default profile
    assert lines[3].split()[:4] == ["toy-empty", "-", "quick:0", "full*:0"]
    rc, out, _ = _cli(capsys, "toys", "--quick", "--scheduler", "serial", "--experiments-dir",
                      str(exp_dir), "--out", str(tmp_path / "res"))
    assert rc == 0 and "toy [quick]: 4 cells (4 computed, 0 cached)" in out
    rc, out, _ = _cli(capsys, "--all", "--if-missing", "--scheduler", "serial",
                      "--experiments-dir", str(exp_dir), "--out", str(tmp_path / "res"))
    assert rc == 2  # toy has results (skipped); toy-broken has none: it runs, and a cell fails
    rc, out, _ = _cli(capsys, "toy", "--if-missing", "--experiments-dir", str(exp_dir),
                      "--out", str(tmp_path / "res"))
    assert rc == 0 and out == ""  # results exist (quick): nothing runs, not even the full grid


def test_experiment_file_runs_as_a_script(exp_dir, tmp_path):
    env = os.environ | {"SWEEP_TEST_LOG": str(tmp_path / "calls.log")}
    r = subprocess.run([sys.executable, str(exp_dir / "toy.py"), "--quick", "--out",
                        str(tmp_path / "res")], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("toy [quick]: 4 cells (4 computed, 0 cached)")
    assert (tmp_path / "res" / "toy" / "summary_quick.json").exists()


# ----------------------------------------------------------------------------- migrated ones
MIGRATED = ("poa-braess", "stability-chart", "fluid-six-policies", "intelligent-router")


def test_migrated_experiments_load_and_poa_braess_matches_theory(tmp_path):
    """The migrated experiment files define their experiments; the Braess cell + collect at
    d = 6 give THEORY §5's values: UE 552, optimum 498 (PoA 552/498)."""
    found = {e.name: e for f in MIGRATED
             for e in load_experiments(ROOT / "experiments" / f"{f.replace('-', '_')}.py")}
    # the Intelligent Router file holds one experiment per re-measured table, in one group
    tables = {f"intelligent-router-{t}" for t in ("k4", "k5", "k5-chunked", "k7", "k8", "bvr",
                                                  "k4-25", "load")}
    assert set(found) == set(MIGRATED[:-1]) | tables
    assert {found[n].group for n in tables} == {"intelligent-router"}
    quick = {n: len(found[n].configs("quick")) for n in MIGRATED[:-1]}
    assert quick["poa-braess"] == 13 and quick["fluid-six-policies"] == 6
    poa = found["poa-braess"]
    one = Experiment(name="poa-braess", description="d = 6 only", grid=lambda p: [{"demand": 6.0}],
                     cell=poa.cell, collect=poa.collect)
    res = run_sweep(one, "quick", out_dir=tmp_path)
    data = json.loads((tmp_path / "poa-braess" / "poa_vs_demand.json").read_text())
    row = data["results"][0]
    assert row == res.rows[0][1]
    assert row["wardrop_tstt"] == pytest.approx(552.0, rel=1e-5)
    assert row["system_optimum_tstt"] == pytest.approx(498.0, rel=1e-5)
    assert row["price_of_anarchy"] == pytest.approx(552 / 498, rel=1e-5)
    assert data["manifest"]["versions"]["lbtheory"]
