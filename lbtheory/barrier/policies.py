"""Decode-slot policies by name for the BalanceRoute barrier simulator (baselines and BR-0 / BR-H).

:func:`make_router` builds any of :data:`BARRIER_POLICIES` by name.
"""

from __future__ import annotations

from ..errors import ModelError
from ..workloads import Trace
from .baselines import jsq, jsq_tokens, power_of_two, random_router, round_robin
from .predictors import ExactMatchPredictor, OraclePredictor, SurvivalPredictor
from .protocol import Router
from .schedulers import BRParams, allocate, br0, brh
from .sim import decode_steps

__all__ = [
    "BARRIER_POLICIES", "make_router", "parse_policies", "BRParams", "allocate", "br0", "brh",
    "jsq", "jsq_tokens", "power_of_two", "random_router", "round_robin",
]

#: Policy names understood by :func:`make_router` (and ``lbtheory barrier --policies``).
BARRIER_POLICIES: tuple[str, ...] = (
    "random", "rr", "p2c", "jsq", "jsq-tokens", "br0", "brh-oracle", "brh-survival",
    "brh-exactmatch",
)


def parse_policies(text: str) -> list[str]:
    """Split a comma-separated policy list and check every name.

    Raises:
        ModelError: an unknown or empty name.
    """
    names = [t.strip() for t in text.split(",")]
    for name in names:
        if name not in BARRIER_POLICIES:
            raise ModelError(f"unknown policy {name!r}; choose from {', '.join(BARRIER_POLICIES)}")
    return names


def make_router(name: str, *, trace: Trace, seed: int = 0, horizon: int = 80,
                gamma: float = 1.0, alpha: float = 1.0, beta: float | None = None,
                params: BRParams | None = None) -> Router:
    """A decode-slot router by name.

    Args:
        name: one of :data:`BARRIER_POLICIES`.
        trace: the trace to be replayed (the Oracle reads its true lengths; ExactMatch its prompt
            keys).
        seed: seed of the random baselines.
        horizon, gamma, alpha, beta: BR-H settings (``beta=None`` → ``G``).
        params: BR two-stage settings.

    Raises:
        ModelError: unknown name.
    """
    parse_policies(name)
    brh_kw = dict(horizon=horizon, gamma=gamma, alpha=alpha, beta=beta, params=params, name=name)
    if name == "random":
        return random_router(seed)
    if name == "rr":
        return round_robin()
    if name == "p2c":
        return power_of_two(seed)
    if name == "jsq":
        return jsq()
    if name == "jsq-tokens":
        return jsq_tokens()
    if name == "br0":
        return br0(params)
    if name == "brh-oracle":
        steps = decode_steps(trace)
        return brh(lambda: OraclePredictor(steps), **brh_kw)
    if name == "brh-survival":
        return brh(SurvivalPredictor, **brh_kw)
    return brh(lambda: ExactMatchPredictor(trace.prompt_key), **brh_kw)
