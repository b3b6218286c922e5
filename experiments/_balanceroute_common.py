"""Shared helpers of the BalanceRoute sweep experiments (not an experiment: the leading ``_`` keeps
it out of ``lbtheory sweep`` discovery).

* :data:`TRACES` — the two bundled Azure LLM inference traces (2023; ``examples/traces/``);
* :func:`window` — disjoint, equal-count request windows of a trace (the unit of the CIs);
* :func:`run_policy` — one simulation cell: a policy on a window at ``G`` replicas → summary;
* :func:`timed` — a router whose ``schedule`` calls are wall-timed (the scheduling tick);
* :func:`t_interval` — the 95 % Student-t interval of a mean over windows.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import numpy as np

from lbtheory.barrier import DecodeConfig, OraclePredictor, brh, decode_steps, simulate_decode
from lbtheory.registry import POLICIES, make_router
from lbtheory.stats import mean_ci
from lbtheory.workloads import Workload, read_trace

Trace = Workload  # the request type (the experiments' own word for a replayed trace)

ROOT = Path(__file__).resolve().parents[1]
TRACES = {
    "conv": ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_conv.csv",
    "code": ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_code.csv",
}
#: summary keys kept in every cell result (tokens, fraction, tokens/s, ms)
KEYS = ("mean_imbalance", "idle_fraction", "throughput", "tpot_p50", "tpot_p95",
        "mean_max_load", "steps", "measure_steps", "requests")


@functools.lru_cache(maxsize=4)
def load(trace_name: str) -> Trace:
    """A bundled trace by name (:data:`TRACES`), read once per process."""
    return read_trace(TRACES[trace_name])


def window(trace_name: str, windows: int, index: int, limit: int | None = None) -> Trace:
    """Request window ``index`` of ``windows`` disjoint, equal-count windows (in arrival order) of
    the first ``limit`` requests (all when ``None``) of a bundled trace."""
    tr = load(trace_name)
    if limit is not None:
        tr = tr.head(limit)
    bounds = np.linspace(0, len(tr), windows + 1).astype(int)
    idx = np.arange(len(tr))
    return tr.select((idx >= bounds[index]) & (idx < bounds[index + 1]))


class _Timed:
    """A router whose decisions are wall-timed per tick (all ``route`` calls of one tick)."""

    def __init__(self, router: Any) -> None:
        self.router, self.name = router, router.name
        self.by_tick: dict[int, float] = {}

    def init(self, seed: int = 0) -> Any:
        return self.router.init(seed)

    def observe(self, state: Any, view: Any) -> Any:
        return self.router.observe(state, view)

    def route(self, state: Any, view: Any, rng: Any) -> Any:
        t0 = time.perf_counter()
        out = self.router.route(state, view, rng)
        self.by_tick[view.tick] = self.by_tick.get(view.tick, 0.0) + time.perf_counter() - t0
        return out


def timed(router: Any) -> tuple[Any, dict[int, float]]:
    """``router`` with its decisions wall-timed; returns it and ``{tick: seconds}``."""
    t = _Timed(router)
    return t, t.by_tick


def make_policy(policy: str, trace: Trace, **options: Any) -> Any:
    """A decode-slot policy by name; BR-H options (horizon, gamma) only where they apply."""
    if "workload" in POLICIES[policy].needs:
        return make_router(policy, "replicas", workload=trace, **options)
    return make_router(policy, "replicas")


def oracle_brh(trace: Trace, **options: Any) -> Any:
    """BR-H with the Oracle predictor of ``trace`` and explicit options (see :func:`brh`)."""
    steps = decode_steps(trace)
    return brh(lambda: OraclePredictor(steps), **options)


def run_policy(trace: Trace, policy: str, G: int, *, seed: int = 0, horizon: int = 80,
               gamma: float = 1.0, router: Any = None) -> dict[str, float]:
    """Summary (:data:`KEYS`) of one saturation replay of ``trace`` at ``G`` replicas."""
    r = router if router is not None else make_policy(policy, trace, horizon=horizon,
                                                      gamma=gamma)
    s = simulate_decode(trace, r, config=DecodeConfig(replicas=G), seed=seed).summary()
    return {k: float(s[k]) for k in KEYS}


def t_interval(values: list[float], level: float = 0.95) -> dict[str, float]:
    """Mean and Student-t ``level`` interval half-width over ``n`` windows (``nan`` if n < 2).

    A dict view of :func:`lbtheory.stats.mean_ci` (the one CI formula)."""
    mean, _, high = mean_ci(values, level)
    return {"mean": mean, "half_width": high - mean, "n": float(len(values))}
