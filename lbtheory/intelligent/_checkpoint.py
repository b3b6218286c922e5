"""Checkpoints of the Double-DQN routers: ``params.eqx`` (equinox leaves), ``config.json``
(cluster, training and environment configs — the environment's calibrated scales included),
``history.json``, ``README.txt`` and ``manifest.json`` (written last: the size and SHA-256 of
every other file); and :func:`dqn_router`, the registry's constructor of a trained router.

Atomic: :func:`save_checkpoint` writes the whole checkpoint into a temporary sibling folder and
renames it into place (over an existing one: an atomic exchange where the OS has one, else
rename the old one aside, the new one in, then remove the old), so a reader or a killed writer
sees the previous checkpoint intact or the new one complete, never a mix. :func:`load_checkpoint`
checks the manifest (every file present, its size and hash), the parameters (finite, the shapes
``config.json`` implies) and, asked for a router kind, that the checkpoint holds that kind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import numpy as np

from ..errors import DataFormatError, ParameterError
from ..io import dumps_json
from ._dqn import DQNConfig, DQNRouter, TrainResult, build_network
from ._engine import ClusterConfig
from ._env import EnvConfig, observation_size
from ._timing import IterationTimeModel

__all__ = ["save_checkpoint", "load_checkpoint", "dqn_router"]

#: the files of a checkpoint; ``manifest.json`` lists the others with their sizes and hashes.
CHECKPOINT_FILES = ("params.eqx", "config.json", "history.json", "README.txt", "manifest.json")
#: the cluster settings a checkpoint carries (a router is trained for one cluster).
CLUSTER_FIELDS = ("n_instances", "kv_budget_tokens", "max_batch", "max_prefill_tokens",
                  "epoch_s", "timing", "admission", "chunked_prefill")
#: ``manifest.json``'s format version (``checkpoint_format``).
FORMAT = 1


def dqn_router(checkpoint: str | Path, *, name: str | None = None,
               cluster: ClusterConfig | None = None) -> DQNRouter:
    """The :class:`DQNRouter` of a checkpoint of ``lbtheory intelligent train`` (with
    ``cluster``, refuse one trained for another cluster); named after its RL kind by default.

    A ``name`` that is an RL kind (``rl``, ``wa-rl``, ``wg-rl``: the registry passes the name
    asked for) must be the checkpoint's own kind: ``rl=DIR`` with a wg-rl checkpoint is a
    :class:`ParameterError` naming both, never a wg-rl router reported as "rl"."""
    from ._dqn import RLKind

    kinds = {k.value for k in RLKind}
    tr = load_checkpoint(checkpoint, cluster, kind=name if name in kinds else None)
    return DQNRouter(tr.net, tr.env_config, name or tr.config.router.value)


def _config_dict(result: TrainResult) -> dict[str, Any]:
    c = result.cluster
    ec = asdict(result.env_config)
    ec["impact"] = None if result.env_config.impact is None else asdict(result.env_config.impact)
    dq = asdict(result.config)
    dq.update(router=result.config.router.value, reading=result.config.reading.value)
    ec.update(guidance=result.env_config.guidance.value, reading=result.env_config.reading.value)
    return {"dqn": dq, "env": ec,
            "cluster": {"n_instances": c.n_instances, "kv_budget_tokens": c.kv_budget_tokens,
                        "max_batch": c.max_batch, "max_prefill_tokens": c.max_prefill_tokens,
                        "epoch_s": c.epoch_s, "timing": asdict(c.timing),
                        "admission": str(c.admission), "chunked_prefill": c.chunked_prefill},
            "obs_dim": observation_size(c.n_instances, result.env_config),
            "selected_episode": result.selected_episode}


def _digest(path: Path) -> dict[str, Any]:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return {"bytes": path.stat().st_size, "sha256": h.hexdigest()}


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def checkpoint_state(path: str | Path) -> str:
    """What ``path`` is, before writing a checkpoint there: ``"absent"``, ``"empty"`` (an
    empty folder), ``"checkpoint"`` (a folder holding only checkpoint files, each a regular
    file, ``config.json`` or ``manifest.json`` among them).

    Raises:
        ParameterError: anything else (a file, a folder with other entries, a checkpoint file
            that is a folder) — never replaced, whatever the caller allows.
    """
    p = Path(path)
    if p.is_symlink():  # renaming over it would replace the link, not the folder it names
        raise ParameterError(f"{p} is a symbolic link; give the folder it points to "
                             f"({os.path.realpath(p)})")
    if not p.exists():
        return "absent"
    if not p.is_dir():
        raise ParameterError(f"{p} exists and is not a folder; give another checkpoint folder")
    try:
        names = sorted(os.listdir(p))
    except OSError as exc:
        raise ParameterError(f"cannot read the checkpoint folder {p} ({exc.strerror})") from None
    if not names:
        return "empty"
    other = [n for n in names if n not in CHECKPOINT_FILES]
    odd = [n for n in names if n in CHECKPOINT_FILES and (not (p / n).is_file()
                                                           or (p / n).is_symlink())]
    if other or odd or not {"config.json", "manifest.json"} & set(names):
        why = (f"{odd[0]} is not a regular file" if odd else
               f"it holds {other[0]!r}, not a checkpoint file" if other else
               "it has no config.json or manifest.json")
        raise ParameterError(f"{p} is not a checkpoint ({why}); refusing to replace it: remove "
                             f"it or give another folder")
    return "checkpoint"


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False where the OS or
    the file system has no such call (the caller falls back to two renames)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: not supported here
        return False
    raise OSError(err, os.strerror(err), str(b))


def _recover(out: Path) -> None:
    """Finish a replace that a kill interrupted between its two renames (the fallback of
    systems without an atomic exchange): the old checkpoint, renamed aside, goes back when
    nothing took its place; leftovers of dead writers are removed (a live writer's are not)."""
    import glob

    stem = glob.escape(out.name)
    for aside in sorted(out.parent.glob(f".{stem}.*.old")) + sorted(
            out.parent.glob(f".{stem}.*.partial")):
        pid = aside.name[len(out.name) + 2:].split(".")[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        if aside.suffix == ".old" and not out.exists():
            os.rename(aside, out)
        else:
            shutil.rmtree(aside, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def save_checkpoint(result: TrainResult, out_dir: str | Path, *, overwrite: bool = False,
                    run: dict[str, Any] | None = None) -> Path:
    """Write the checkpoint of ``result`` to the folder ``out_dir``, atomically.

    Everything goes into a temporary sibling folder first — ``params.eqx``, ``config.json``,
    ``history.json``, ``README.txt``, then ``manifest.json`` (sizes and SHA-256 of the others,
    plus ``run``: the command's run manifest) — which is renamed into place.

    Args:
        result: what :func:`~lbtheory.intelligent.train_dqn` returned.
        out_dir: the checkpoint folder (absent or empty, or an existing checkpoint with
            ``overwrite``).
        overwrite: replace an existing checkpoint (the old one stays intact if this fails).
        run: extra top-level keys of ``manifest.json`` (the CLI's run manifest).

    Raises:
        ParameterError: ``out_dir`` holds a checkpoint and not ``overwrite``, or holds
            something that is not a checkpoint (never replaced).
    """
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    _recover(out)
    state = checkpoint_state(out)
    if state == "checkpoint" and not overwrite:
        raise ParameterError(f"{out} already holds a checkpoint; pass overwrite=True "
                             f"(--overwrite) to replace it")
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.{os.getpid()}.", suffix=".partial",
                                dir=out.parent))
    try:
        eqx.tree_serialise_leaves(tmp / "params.eqx", result.net)
        _write(tmp / "config.json", (dumps_json(_config_dict(result)) + "\n").encode())
        _write(tmp / "history.json", (dumps_json(result.history) + "\n").encode())
        _write(tmp / "README.txt", f"Double-DQN router {result.config.router} (lbtheory "
               f"intelligent train); load with load_checkpoint().\n".encode())
        files = {n: _digest(tmp / n) for n in CHECKPOINT_FILES if n != "manifest.json"}
        manifest = {**(run or {}), "checkpoint_format": FORMAT,
                    "router": result.config.router.value, "files": files}
        _write(tmp / "manifest.json", (dumps_json(manifest) + "\n").encode())
        os.chmod(tmp, 0o777 & ~_umask())
        _fsync_dir(tmp)
        _install(tmp, out, state)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    _fsync_dir(out.parent)
    return out


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _install(tmp: Path, out: Path, state: str) -> None:
    """Move the complete checkpoint ``tmp`` to ``out`` (``state``: what ``out`` was); the
    previous content of ``out`` ends up in ``tmp`` (removed by the caller)."""
    if state == "absent":
        os.rename(tmp, out)  # fails (nothing moved) if a folder appeared there meanwhile
        return
    if _exchange(tmp, out):
        return
    aside = tmp.with_name(tmp.name[:-len(".partial")] + ".old")
    os.rename(out, aside)
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(aside, out)
        raise
    os.rename(aside, tmp)


def _section(cfg: Any, key: str, p: Path) -> dict[str, Any]:
    """``cfg[key]`` as a dict, else a :class:`DataFormatError` naming the field."""
    if not isinstance(cfg, dict) or not isinstance(cfg.get(key), dict):
        raise DataFormatError(f"config.json: expected an object with a {key!r} object "
                              f"(a checkpoint written by save_checkpoint)", path=str(p),
                              field=key)
    return dict(cfg[key])


def _build(cls: Any, fields: dict[str, Any], key: str, p: Path) -> Any:
    """``cls(**fields)``, turning a missing, unknown or bad field into a DataFormatError."""
    import dataclasses as dc

    known = {f.name for f in dc.fields(cls)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise DataFormatError(f"config.json: unknown field(s) {unknown} in {key!r}; expected "
                              f"fields of {cls.__name__}", path=str(p), field=key)
    try:
        return cls(**fields)
    except (TypeError, ValueError) as exc:
        raise DataFormatError(f"config.json: bad {key!r} ({exc})", path=str(p),
                              field=key) from None


def _configs(cfg: Any, p: Path) -> tuple[ClusterConfig, DQNConfig, EnvConfig]:
    """The cluster, training and environment configs of a checkpoint's ``config.json``,
    validated field by field."""
    from ._impact import ImpactParams
    from ._predictor import BucketSpec

    cl = _section(cfg, "cluster", p)
    cl["timing"] = _build(IterationTimeModel, _section(cl, "timing", p), "cluster.timing", p)
    saved = _build(ClusterConfig, cl, "cluster", p)
    dq = _section(cfg, "dqn", p)
    if isinstance(dq.get("hidden"), list):
        dq["hidden"] = tuple(dq["hidden"])
    dq.setdefault("network", "mlp")  # written before the symmetric network existed
    dq.setdefault("selection", "last")  # written before validation selection: the last network
    dconf = _build(DQNConfig, dq, "dqn", p)
    e = _section(cfg, "env", p)
    if isinstance(e.get("prompt_edges"), list):
        e["prompt_edges"] = tuple(e["prompt_edges"])
    e["buckets"] = _build(BucketSpec, _section(e, "buckets", p), "env.buckets", p)
    e.setdefault("balance_factor", None)  # written before the bounded-loads cap: trained without
    if e.get("impact") is not None:
        e["impact"] = _build(ImpactParams, _section(e, "impact", p), "env.impact", p)
    return saved, dconf, _build(EnvConfig, e, "env", p)


def _load_leaf(f: Any, x: Any) -> Any:
    """equinox's leaf reader, except that a floating array takes the dtype of ``x`` (the
    network built in this session): a checkpoint written with ``jax_enable_x64`` off (float32,
    the CLI) loads where it is on, and the reverse. Shapes and integer dtypes must match."""
    if isinstance(x, jax.Array):
        a = np.load(f)
        if np.issubdtype(a.dtype, np.floating) and np.issubdtype(x.dtype, np.floating):
            a = a.astype(x.dtype)
        return jax.numpy.asarray(a)
    return eqx.default_deserialise_filter_spec(f, x)


def _verify_manifest(p: Path) -> str:
    """Check the checkpoint's files against its ``manifest.json``; ``""`` when they match, else
    (a checkpoint written before manifests listed the files) the warning to give once the rest
    of the checkpoint has loaded."""
    mp = p / "manifest.json"

    def bad(msg: str, field: str) -> DataFormatError:
        return DataFormatError(msg, path=str(p / field), field=field)

    if not mp.exists():
        if not (p / "config.json").exists():
            raise DataFormatError("not a checkpoint: no manifest.json or config.json (a folder "
                                  "written by lbtheory intelligent train)", path=str(p))
        return f"checkpoint {p} has no manifest.json (written before version 0.2): its files " \
               f"are not verified"
    try:
        man = json.loads(mp.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"cannot read the checkpoint manifest ({exc})", "manifest.json") from None
    if not isinstance(man, dict):
        raise bad("expected a JSON object", "manifest.json")
    files = man.get("files")
    if files is None and "checkpoint_format" not in man:
        return f"checkpoint {p}: manifest.json lists no files (written before version 0.2): " \
               f"its files are not verified"
    if not isinstance(files, dict) or not {"params.eqx", "config.json"} <= set(files):
        raise bad("'files' must list params.eqx and config.json with their sizes and hashes",
                  "manifest.json")
    for name, want in files.items():
        if name not in CHECKPOINT_FILES or name == "manifest.json" or not isinstance(want, dict):
            raise bad(f"unexpected entry {name!r} in 'files'", "manifest.json")
        f = p / name
        if not f.is_file():
            raise bad("missing (listed in manifest.json): the checkpoint is incomplete", name)
        got = _digest(f)
        if got != {"bytes": want.get("bytes"), "sha256": want.get("sha256")}:
            raise bad(f"does not match manifest.json ({got['bytes']} bytes, sha256 "
                      f"{got['sha256'][:12]}…; expected {want.get('bytes')} bytes, "
                      f"{str(want.get('sha256'))[:12]}…): the file changed or is damaged", name)
    return ""


def load_checkpoint(path: str | Path, cluster: ClusterConfig | None = None, *,
                    kind: str | None = None) -> TrainResult:
    """Load a checkpoint, checked: the files ``manifest.json`` lists (present, sizes,
    SHA-256), ``config.json`` field by field, the parameters' shapes against the network
    ``config.json`` describes, every parameter finite; with ``cluster``, refuse one trained
    for a different cluster; with ``kind`` (``"rl"``, ``"wa-rl"``, ``"wg-rl"``), refuse one
    holding another kind of router.

    Raises:
        DataFormatError: missing or corrupt files (the file named), a ``config.json`` that is
            not a checkpoint's (a missing section, an unknown or bad field — named), parameters
            of the wrong shape or not finite.
        ParameterError: the checkpoint's cluster differs from ``cluster`` (the field is named),
            or its router kind from ``kind``.
    """
    p = Path(path)
    _recover(p)
    if not p.is_dir():
        raise DataFormatError("checkpoint folder not found", path=str(p))
    legacy = _verify_manifest(p)
    try:
        cfg = json.loads((p / "config.json").read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(f"cannot read checkpoint config ({exc})", path=str(p),
                              field="config.json") from None
    saved, dconf, ec = _configs(cfg, p)
    if kind is not None and dconf.router.value != kind:
        raise ParameterError(f"checkpoint {p} holds a {dconf.router.value} router, asked for "
                             f"as {kind!r}: write {dconf.router.value}={p}")
    if cluster is not None:
        for name in CLUSTER_FIELDS:
            if getattr(saved, name) != getattr(cluster, name):
                raise ParameterError(f"checkpoint {p} was trained with {name} = "
                                     f"{getattr(saved, name)}, expected "
                                     f"{getattr(cluster, name)}")
    like = build_network(dconf, saved.n_instances, ec, jax.random.PRNGKey(0))
    params = p / "params.eqx"
    try:
        net = eqx.tree_deserialise_leaves(params, like, filter_spec=_load_leaf)
    except (OSError, ValueError, RuntimeError, EOFError) as exc:
        raise DataFormatError(f"parameters do not match config.json's network ({exc})",
                              path=str(params), field="params.eqx") from None
    leaves = jax.tree_util.tree_leaves(eqx.filter(net, eqx.is_array))
    bad = sum(int(np.size(x) - np.count_nonzero(np.isfinite(np.asarray(x)))) for x in leaves)
    if bad:
        raise DataFormatError(f"{bad} of {sum(int(np.size(x)) for x in leaves)} network "
                              f"parameters are not finite (NaN or inf): the training diverged "
                              f"or the file is damaged", path=str(params), field="params.eqx")
    hist_path = p / "history.json"
    try:
        history = json.loads(hist_path.read_text(encoding="utf-8")) if hist_path.exists() else []
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(f"cannot read checkpoint history ({exc})", path=str(p),
                              field="history.json") from None
    sel = cfg.get("selected_episode")
    if sel is not None and (isinstance(sel, bool) or not isinstance(sel, int) or sel < 0):
        raise DataFormatError(f"config.json: selected_episode must be an episode number >= 0 "
                              f"or null, got {sel!r}", path=str(p), field="selected_episode")
    if legacy:
        warnings.warn(legacy, UserWarning, stacklevel=2)
    return TrainResult(net, dconf, ec, saved, history, selected_episode=sel)
