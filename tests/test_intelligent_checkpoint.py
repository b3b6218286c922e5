"""Checkpoints of the Double-DQN routers: written atomically (a temporary sibling folder renamed
into place, manifest.json last with every file's size and SHA-256), never clobbered by surprise,
checked on load (manifest, shapes, finite parameters, router kind), killed writers leave the
previous checkpoint or the new one — never a mix; the train/evaluate CLI on top."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lbtheory.cli import main
from lbtheory.errors import DataFormatError, ParameterError
from lbtheory.intelligent import (
    ClusterConfig,
    DQNConfig,
    EnvConfig,
    TrainResult,
    load_checkpoint,
    save_checkpoint,
)
from lbtheory.intelligent import _checkpoint as ckmod
from lbtheory.intelligent._dqn import build_network

ROOT = Path(__file__).resolve().parents[1]
CODE = ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_code.csv"
CLUSTER = ClusterConfig(n_instances=2, kv_budget_tokens=32768)


def _result(router: str = "wg-rl", seed: int = 0, *, hidden=(8, 8), net_hidden=None,
            cluster: ClusterConfig = CLUSTER, nan: bool = False) -> TrainResult:
    """A checkpointable result without training: a freshly initialised network (``net_hidden``:
    the network's own widths, to write one that contradicts its config)."""
    dq = DQNConfig(router=router, hidden=hidden, episodes=1)
    ec = EnvConfig()
    net = build_network(DQNConfig(router=router, hidden=net_hidden or hidden), cluster.n_instances,
                        ec, jax.random.PRNGKey(seed))
    if nan:
        net = jax.tree_util.tree_map(lambda x: jnp.full_like(x, jnp.nan)
                                     if isinstance(x, jax.Array) else x, net)
    return TrainResult(net, dq, ec, cluster, [{"episode": 0, "seed": seed}], selected_episode=0)


def _tree_hash(folder: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() if f.is_file() else "dir"
            for f in sorted(folder.iterdir())}


def _params_equal(a, b) -> bool:
    la, lb = (jax.tree_util.tree_leaves(x) for x in (a, b))
    return len(la) == len(lb) and all(np.array_equal(x, y) for x, y in zip(la, lb))


def test_save_writes_a_manifest_last_and_load_checks_it(tmp_path):
    ck = tmp_path / "ck"
    res = _result()
    save_checkpoint(res, ck)
    man = json.loads((ck / "manifest.json").read_text())
    assert man["checkpoint_format"] == 1 and man["router"] == "wg-rl"
    assert sorted(man["files"]) == ["README.txt", "config.json", "history.json", "params.eqx"]
    for name, entry in man["files"].items():  # the sizes and hashes of the files as written
        data = (ck / name).read_bytes()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert sorted(os.listdir(tmp_path)) == ["ck"]  # no temporary folder left behind
    assert _params_equal(load_checkpoint(ck, CLUSTER).net, res.net)
    # a changed byte, a missing file: named, never loaded
    params = ck / "params.eqx"
    raw = bytearray(params.read_bytes())
    raw[-1] ^= 1
    params.write_bytes(bytes(raw))
    with pytest.raises(DataFormatError, match=r"params\.eqx.*does not match manifest\.json"):
        load_checkpoint(ck)
    raw[-1] ^= 1
    params.write_bytes(bytes(raw))
    load_checkpoint(ck)
    (ck / "history.json").unlink()
    with pytest.raises(DataFormatError, match=r"history\.json.*missing"):
        load_checkpoint(ck)


def test_existing_checkpoint_is_replaced_only_with_overwrite_and_others_never(tmp_path):
    ck = tmp_path / "ck"
    a, b = _result(seed=1), _result(seed=2)
    assert not _params_equal(a.net, b.net)
    save_checkpoint(a, ck)
    before = _tree_hash(ck)
    with pytest.raises(ParameterError, match="already holds a checkpoint.*overwrite"):
        save_checkpoint(b, ck)
    assert _tree_hash(ck) == before
    save_checkpoint(b, ck, overwrite=True)
    assert _params_equal(load_checkpoint(ck).net, b.net)
    assert sorted(os.listdir(tmp_path)) == ["ck"]
    # an empty folder is written into; a folder that is not a checkpoint is never replaced
    (tmp_path / "empty").mkdir()
    save_checkpoint(a, tmp_path / "empty")
    assert _params_equal(load_checkpoint(tmp_path / "empty").net, a.net)
    (ck / "README.txt").unlink()
    (ck / "README.txt").mkdir()
    (ck / "README.txt" / "notes").write_text("mine")
    for ow in (False, True):
        with pytest.raises(ParameterError, match="not a checkpoint.*README.txt is not a regular"):
            save_checkpoint(a, ck, overwrite=ow)
    assert (ck / "README.txt" / "notes").read_text() == "mine"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "results.csv").write_text("1,2\n")
    with pytest.raises(ParameterError, match="holds 'results.csv'"):
        save_checkpoint(a, tmp_path / "data", overwrite=True)


@pytest.mark.parametrize("exchange", [True, False])
def test_a_failed_replace_leaves_the_old_checkpoint_intact(tmp_path, monkeypatch, exchange):
    ck = tmp_path / "ck"
    old = _result(seed=1)
    save_checkpoint(old, ck)
    before = _tree_hash(ck)
    if not exchange:  # systems without renameat2(RENAME_EXCHANGE): two renames
        monkeypatch.setattr(ckmod, "_exchange", lambda a, b: False)
    real = ckmod._write

    def fail_on_history(path, data):
        if path.name == "history.json":
            raise OSError(28, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(ckmod, "_write", fail_on_history)
    with pytest.raises(OSError, match="No space"):
        save_checkpoint(_result(seed=2), ck, overwrite=True)
    assert _tree_hash(ck) == before and sorted(os.listdir(tmp_path)) == ["ck"]
    monkeypatch.setattr(ckmod, "_write", real)
    new = _result(seed=2)
    save_checkpoint(new, ck, overwrite=True)
    assert _params_equal(load_checkpoint(ck).net, new.net)
    assert sorted(os.listdir(tmp_path)) == ["ck"]


def test_a_replace_killed_between_its_two_renames_is_rolled_back(tmp_path):
    # the fallback's window: the old checkpoint renamed aside, the new one not yet in place;
    # its writer (pid 2**22 + 1, above Linux's pid_max default) is dead
    ck = tmp_path / "ck"
    old = _result(seed=1)
    save_checkpoint(old, tmp_path / "x")
    os.rename(tmp_path / "x", tmp_path / f".ck.{2**22 + 1}.abc.old")
    save_checkpoint(_result(seed=2), tmp_path / "y")
    os.rename(tmp_path / "y", tmp_path / f".ck.{2**22 + 1}.abc.partial")
    assert _params_equal(load_checkpoint(ck).net, old.net)
    assert sorted(os.listdir(tmp_path)) == ["ck"]


def test_load_refuses_nan_parameters_wrong_shapes_and_another_router_kind(tmp_path):
    save_checkpoint(_result(nan=True), tmp_path / "nan")
    n = sum(x.size for x in jax.tree_util.tree_leaves(_result().net) if hasattr(x, "size"))
    with pytest.raises(DataFormatError, match=rf"params\.eqx: {n} of {n} network parameters are "
                                              r"not finite"):
        load_checkpoint(tmp_path / "nan")
    save_checkpoint(_result(hidden=(8, 8), net_hidden=(16, 16)), tmp_path / "shape")
    with pytest.raises(DataFormatError, match=r"params\.eqx: parameters do not match "
                                              r"config\.json's network .*shape"):
        load_checkpoint(tmp_path / "shape")
    save_checkpoint(_result("wg-rl"), tmp_path / "wg")
    with pytest.raises(ParameterError, match=r"holds a wg-rl router, asked for as 'rl'"):
        load_checkpoint(tmp_path / "wg", kind="rl")
    assert load_checkpoint(tmp_path / "wg", kind="wg-rl").config.router.value == "wg-rl"
    with pytest.raises(DataFormatError, match="checkpoint folder not found"):
        load_checkpoint(tmp_path / "nothing")


# ----------------------------------------------------------------------------- kill test
def _numpy_leaves(res: TrainResult) -> TrainResult:
    """``res`` with its network's arrays as numpy arrays: saving it makes no JAX call (safe in
    a forked child)."""
    import dataclasses

    net = jax.tree_util.tree_map(lambda x: np.asarray(x) if isinstance(x, jax.Array) else x,
                                 res.net)
    return dataclasses.replace(res, net=net)


def _kill_while_saving(ck: Path, results: list[TrainResult], delay: float) -> None:
    """Fork a child that replaces the checkpoint ``ck`` with ``results`` in turn, forever;
    SIGKILL it after ``delay`` seconds."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a multi-threaded process
        warnings.simplefilter("ignore", RuntimeWarning)  # (JAX's: the child makes no JAX call)
        pid = os.fork()
    if pid == 0:  # the child: no JAX call, no import
        try:
            k = 1
            while True:
                save_checkpoint(results[k % 2], ck, overwrite=True)
                k += 1
        finally:
            os._exit(0)
    time.sleep(delay)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def test_sigkill_during_saves_leaves_a_complete_checkpoint(tmp_path):
    """SIGKILL a process that replaces a checkpoint in a loop (two networks in turn) at seeded
    random moments: every time the folder loads (manifest, hashes, parameters) and is, file for
    file, one of the two checkpoints written whole."""
    ck = tmp_path / "ck"
    results = [_numpy_leaves(_result(seed=s)) for s in (1, 2)]
    for r, side in zip(results, "ab"):  # the two checkpoints written whole, for comparison
        save_checkpoint(r, tmp_path / f"ck{side}")
    both = [_tree_hash(tmp_path / f"ck{side}") for side in "ab"]
    assert both[0]["params.eqx"] != both[1]["params.eqx"]
    save_checkpoint(results[0], ck)
    seen = []
    for delay in np.random.default_rng(34).uniform(0.01, 0.3, size=8):
        _kill_while_saving(ck, results, float(delay))
        load_checkpoint(ck)  # complete: every file matches the manifest, parameters finite
        got = _tree_hash(ck)
        match = [k for k, w in enumerate(both) if {n: h for n, h in got.items()
                                                   if n != "manifest.json"}
                 == {n: h for n, h in w.items() if n != "manifest.json"}]
        assert len(match) == 1, "the checkpoint is neither of the two written whole"
        seen.append(match[0])
    assert set(seen) == {0, 1}  # the kills landed at different points of the loop
    # leftovers of the killed writers (temporary folders) go at the next save
    save_checkpoint(results[0], ck, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["ck", "cka", "ckb"]


@pytest.mark.slow
def test_sigkill_of_the_train_command_keeps_the_previous_checkpoint_or_the_new(tmp_path):
    """``intelligent train --out ck --overwrite`` over an existing checkpoint, killed at seeded
    random moment of the second half of its run (timed by a full run first): the previous
    checkpoint intact, or the new one complete — the same files the full run wrote (the
    training is seeded)."""
    ck = tmp_path / "ck"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    argv = [sys.executable, "-m", "lbtheory.cli", "intelligent", "train", _trace(tmp_path),
            *TRAIN, "--out", str(ck), "--overwrite"]
    t0 = time.monotonic()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                   check=True)
    full = time.monotonic() - t0
    new = {n: h for n, h in _tree_hash(ck).items() if n != "manifest.json"}
    for frac in np.random.default_rng(7).uniform(0.5, 1.0, size=1):
        save_checkpoint(_result(seed=1), ck, overwrite=True)
        before = _tree_hash(ck)
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=env)
        time.sleep(frac * full)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        got = _tree_hash(ck)
        if got != before:
            assert {n: h for n, h in got.items() if n != "manifest.json"} == new
            assert load_checkpoint(ck, kind="wg-rl").config.episodes == 1


# ----------------------------------------------------------------------------- the CLI
def _trace(tmp: Path) -> str:
    path = tmp / "t.csv"
    path.write_text("".join(CODE.read_text().splitlines(keepends=True)[:61]))
    return str(path)


TRAIN = ["--episodes", "1", "--requests", "20", "--instances", "2", "--learning-starts", "10",
         "--validation-episodes", "1", "--json"]


def test_train_refuses_an_existing_checkpoint_without_overwrite(tmp_path, capsys):
    ck = tmp_path / "ck"
    save_checkpoint(_result(seed=1), ck)
    before = _tree_hash(ck)
    rc = main(["intelligent", "train", _trace(tmp_path), *TRAIN, "--out", str(ck)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "already holds a checkpoint" in err[0] \
        and "--overwrite" in err[0]
    assert _tree_hash(ck) == before
    # a checkpoint whose README.txt is a folder: refused before training, even with --overwrite
    (ck / "README.txt").unlink()
    (ck / "README.txt").mkdir()
    before = {n: h for n, h in _tree_hash(ck).items() if n != "README.txt"}
    rc = main(["intelligent", "train", _trace(tmp_path), *TRAIN, "--out", str(ck),
               "--overwrite"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--out" in err[0] and "not a checkpoint" in err[0]
    assert {n: h for n, h in _tree_hash(ck).items() if n != "README.txt"} == before
    assert (ck / "README.txt").is_dir()


def test_train_overwrite_then_evaluate_takes_the_cluster_from_the_checkpoint(tmp_path, capsys):
    """Train with --chunked-prefill over an existing checkpoint (--overwrite); evaluate without
    the flag runs the chunked cluster (a note says so) and matches an explicit
    --chunked-prefill run; a contradicting flag, a wrong kind and NaN parameters are one-line
    errors (exit 2)."""
    trace, ck = _trace(tmp_path), tmp_path / "ck"
    save_checkpoint(_result(seed=1), ck)
    rc = main(["intelligent", "train", trace, *TRAIN, "--out", str(ck), "--overwrite",
               "--chunked-prefill", "--policy", "rl"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    cfg = json.loads((ck / "config.json").read_text())
    assert cfg["cluster"]["chunked_prefill"] is True and cfg["dqn"]["router"] == "rl"
    man = json.loads((ck / "manifest.json").read_text())
    assert man["config"]["overwrite"] is True and set(man["files"]) >= {"params.eqx"}
    ev = ["intelligent", "evaluate", trace, "--requests", "20", "--json"]
    rc = main([*ev, "--policy", f"rr,rl={ck}"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "cluster settings from the checkpoint" in cap.err and "chunked_prefill = True" \
        in cap.err and "n_instances = 2" in cap.err
    implicit = json.loads(cap.out)["routers"]
    rc = main([*ev, "--policy", f"rr,rl={ck}", "--chunked-prefill", "--instances", "2"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert json.loads(cap.out)["routers"] == implicit
    rc = main([*ev, "--policy", "rr", "--chunked-prefill", "--instances", "2"])
    rr_chunked = json.loads(capsys.readouterr().out)["routers"]["rr"]
    rc = main([*ev, "--policy", "rr", "--instances", "2"])
    rr_plain = json.loads(capsys.readouterr().out)["routers"]["rr"]
    assert implicit["rr"] == rr_chunked != rr_plain  # the chunked cluster really ran
    for extra, match in (
            (["--policy", f"rr,rl={ck}", "--instances", "3"],
             "--instances: checkpoint .* n_instances = 2, expected 3"),
            (["--policy", f"rr,wg-rl={ck}"], "holds a rl router, asked for as 'wg-rl'")):
        rc = main([*ev, *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1, err
        assert re.search(match, err[0]), err[0]
    save_checkpoint(_result("wg-rl", nan=True), tmp_path / "nan")
    rc = main([*ev, "--policy", f"rr,wg-rl={tmp_path / 'nan'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "params.eqx" in err[0] and "not finite" in err[0]
