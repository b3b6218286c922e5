"""Decode-slot policies by name for the BalanceRoute barrier simulator (baselines and BR-0 / BR-H).

:func:`make_router` builds any of :data:`BARRIER_POLICIES` by name (a :class:`Policy` or its
string value).
"""

from __future__ import annotations

import enum
from typing import Any

from ..errors import ModelError
from ..workloads import Trace
from .baselines import Seed, jsq, jsq_tokens, power_of_two, random_router, round_robin
from .predictors import ExactMatchPredictor, OraclePredictor, SurvivalPredictor
from .protocol import Router
from .schedulers import BRParams, allocate, br0, brh
from .sim import decode_steps

__all__ = [
    "Policy", "BARRIER_POLICIES", "make_router", "parse_policies", "BRParams", "allocate", "br0",
    "brh", "jsq", "jsq_tokens", "power_of_two", "random_router", "round_robin",
]


class Policy(enum.StrEnum):
    """Decode-slot policies by name (the values are the CLI's ``--policies`` names)."""

    RANDOM = "random"
    RR = "rr"
    P2C = "p2c"
    JSQ = "jsq"
    JSQ_TOKENS = "jsq-tokens"
    BR0 = "br0"
    BRH_ORACLE = "brh-oracle"
    BRH_SURVIVAL = "brh-survival"
    BRH_EXACTMATCH = "brh-exactmatch"

    @classmethod
    def parse(cls, value: Policy | str | Any) -> Policy:
        """Coerce a policy (enum or name).

        Raises:
            ModelError: ``unknown policy 'x'; choose from random, rr, ...``.
        """
        try:
            return cls(value)
        except ValueError:
            raise ModelError(f"unknown policy {value!r}; choose from "
                             f"{', '.join(BARRIER_POLICIES)}") from None


#: Policy names understood by :func:`make_router` (and ``lbtheory barrier --policies``).
BARRIER_POLICIES: tuple[str, ...] = tuple(p.value for p in Policy)


def parse_policies(text: str) -> list[str]:
    """Split a comma-separated policy list and check every name.

    Raises:
        ModelError: an unknown or empty name.
    """
    names = [t.strip() for t in text.split(",")]
    for name in names:
        Policy.parse(name)
    return names


def make_router(name: Policy | str, *, trace: Trace, seed: Seed = 0, horizon: int = 80,
                gamma: float = 1.0, alpha: float = 1.0, beta: float | None = None,
                params: BRParams | None = None) -> Router:
    """A decode-slot router by name.

    Args:
        name: a :class:`Policy` or one of :data:`BARRIER_POLICIES`.
        trace: the trace to be replayed (the Oracle reads its true lengths; ExactMatch its prompt
            keys).
        seed: seed of the random baselines (int, SeedSequence or Generator; each run of the
            router starts from it afresh, see :mod:`.baselines`).
        horizon, gamma, alpha, beta: BR-H settings (``beta=None`` → ``G``).
        params: BR two-stage settings.

    Raises:
        ModelError: unknown name.
    """
    policy = Policy.parse(name)
    brh_kw = dict(horizon=horizon, gamma=gamma, alpha=alpha, beta=beta, params=params,
                  name=policy.value)
    if policy is Policy.RANDOM:
        return random_router(seed)
    if policy is Policy.RR:
        return round_robin()
    if policy is Policy.P2C:
        return power_of_two(seed)
    if policy is Policy.JSQ:
        return jsq()
    if policy is Policy.JSQ_TOKENS:
        return jsq_tokens()
    if policy is Policy.BR0:
        return br0(params)
    if policy is Policy.BRH_ORACLE:
        steps = decode_steps(trace)
        return brh(lambda: OraclePredictor(steps), **brh_kw)
    if policy is Policy.BRH_SURVIVAL:
        return brh(SurvivalPredictor, **brh_kw)
    return brh(lambda: ExactMatchPredictor(trace.prompt_key), **brh_kw)
