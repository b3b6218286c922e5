"""Checkpoints of the Double-DQN routers: ``params.eqx`` (equinox leaves), ``config.json``
(cluster, training and environment configs — the environment's calibrated scales included),
``history.json``; and :func:`dqn_router`, the registry's constructor of a trained router."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import equinox as eqx
import jax

from ..errors import DataFormatError, ParameterError
from ..io import write_json_atomic, write_text_atomic
from ._dqn import DQNConfig, DQNRouter, TrainResult, build_network
from ._engine import ClusterConfig
from ._env import EnvConfig, observation_size
from ._timing import IterationTimeModel

__all__ = ["save_checkpoint", "load_checkpoint", "dqn_router"]


def dqn_router(checkpoint: str | Path, *, name: str | None = None,
               cluster: ClusterConfig | None = None) -> DQNRouter:
    """The :class:`DQNRouter` of a checkpoint of ``lbtheory intelligent train`` (with
    ``cluster``, refuse one trained for another cluster); named after its RL kind by default."""
    tr = load_checkpoint(checkpoint, cluster)
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


def save_checkpoint(result: TrainResult, out_dir: str | Path) -> Path:
    """Write ``params.eqx`` (equinox leaves), ``config.json`` and ``history.json`` to
    ``out_dir`` (atomic per file)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "params.eqx.tmp"
    eqx.tree_serialise_leaves(tmp, result.net)
    tmp.replace(out / "params.eqx")
    write_json_atomic(out / "config.json", _config_dict(result))
    write_json_atomic(out / "history.json", result.history)
    write_text_atomic(out / "README.txt", f"Double-DQN router {result.config.router} "
                      f"(lbtheory intelligent train); load with load_checkpoint().\n")
    return out


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


def load_checkpoint(path: str | Path, cluster: ClusterConfig | None = None) -> TrainResult:
    """Load a checkpoint; with ``cluster``, refuse one trained for a different cluster.

    Raises:
        DataFormatError: missing or corrupt files, a ``config.json`` that is not a checkpoint's
            (a missing section, an unknown or bad field — named).
        ParameterError: the checkpoint's cluster differs from ``cluster`` (the field is named).
    """
    p = Path(path)
    try:
        cfg = json.loads((p / "config.json").read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(f"cannot read checkpoint config ({exc})", path=str(p),
                              field="config.json") from None
    saved, dconf, ec = _configs(cfg, p)
    if cluster is not None:
        for name in ("n_instances", "kv_budget_tokens", "max_batch", "max_prefill_tokens",
                     "epoch_s", "timing", "admission", "chunked_prefill"):
            if getattr(saved, name) != getattr(cluster, name):
                raise ParameterError(f"checkpoint {p} was trained with {name} = "
                                     f"{getattr(saved, name)}, expected "
                                     f"{getattr(cluster, name)}")
    like = build_network(dconf, saved.n_instances, ec, jax.random.PRNGKey(0))
    try:
        net = eqx.tree_deserialise_leaves(p / "params.eqx", like)
    except (OSError, ValueError, RuntimeError) as exc:
        raise DataFormatError(f"cannot read checkpoint parameters ({exc})", path=str(p),
                              field="params.eqx") from None
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
    return TrainResult(net, dconf, ec, saved, history, selected_episode=sel)
