"""``lbtheory intelligent evaluate``: the cluster a checkpointed router runs on (its own settings
unless a flag sets them; contradictions are errors), split from :mod:`.intelligent` to keep
modules small."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ParameterError

__all__ = ["MAX_EPOCH_S", "CLUSTER_FLAGS", "checkpoint_cluster"]


#: the longest router decision epoch the commands take (s) [R]: an hour, far beyond any
#: request's service time; beyond it the environment's derived horizons overflow.
MAX_EPOCH_S = 3600.0

#: the cluster settings a command sets by a flag (the others a checkpoint carries alone).
CLUSTER_FLAGS = {"n_instances": ("instances", "--instances"),
                 "kv_budget_tokens": ("kv_budget", "--kv-budget"),
                 "max_batch": ("max_batch", "--max-batch"), "epoch_s": ("epoch", "--epoch"),
                 "chunked_prefill": ("chunked_prefill", "--chunked-prefill"),
                 "admission": ("admission", "--admission")}


def _given(args: argparse.Namespace, dest: str) -> bool:
    """Whether the user gave the flag of ``dest`` (not its default)."""
    if dest == "chunked_prefill":
        return bool(args.chunked_prefill)
    return dest in getattr(args, "_spelling", {})


def checkpoint_cluster(args: argparse.Namespace, cfg: Any,
                        routers: list[tuple[str, str | None]], flag: str) -> Any:
    """The cluster evaluate runs: the checkpoints' own settings (chunked prefill, timing, ...)
    replace the defaults of flags not given; a flag given with another value, or two
    checkpoints trained for different clusters, are errors naming both. Each checkpoint is
    loaded and checked here (manifest, kind, finite parameters) before any run."""
    import dataclasses
    import sys

    from ..intelligent import load_checkpoint
    from ..intelligent._checkpoint import CLUSTER_FIELDS

    fixed: dict[str, tuple[Any, str]] = {}
    for name, ck in routers:
        if ck is None:
            continue
        saved = load_checkpoint(ck, kind=name).cluster
        for field in CLUSTER_FIELDS:
            value = getattr(saved, field)
            if field in fixed and fixed[field][0] != value:
                raise ParameterError(f"{flag}: checkpoints {fixed[field][1]} and {ck} were "
                                     f"trained for different clusters ({field} = "
                                     f"{fixed[field][0]} and {value})")
            fixed.setdefault(field, (value, ck))
    if not fixed:
        return cfg
    taken = []
    for field, (value, ck) in fixed.items():
        dest, cli_flag = CLUSTER_FLAGS.get(field, (None, None))
        if dest is not None and _given(args, dest) and getattr(cfg, field) != value:
            raise ParameterError(f"{cli_flag}: checkpoint {ck} was trained with {field} = "
                                 f"{value}, expected {getattr(cfg, field)} (from {cli_flag}); "
                                 f"drop {cli_flag} to use the checkpoint's value")
        if getattr(cfg, field) != value:
            taken.append(f"{field} = {value}")
    for field, (dest, _) in CLUSTER_FLAGS.items():  # the run manifest records what ran
        setattr(args, dest, fixed[field][0])
    if taken:
        print(f"note: cluster settings from the checkpoint: {', '.join(taken)}",
              file=sys.stderr)
    return dataclasses.replace(cfg, **{f: v for f, (v, _) in fixed.items()})


