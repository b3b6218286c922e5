"""What a decode-slot router sees and returns (the contract between simulator and routers).

A router is a :class:`Router`: a name and two pure-ish functions, ``init() -> state`` and
``schedule(state, view) -> (pool_positions, replicas, state)``, in the optax shape of STYLE.md. Any
randomness lives in the state as a seeded ``numpy.random.Generator``. The simulator calls
``schedule`` once per tick when the pool is non-empty and some slot is free; the router returns
which
pool entries go to which replica (each replica at most ``free[g]`` of them and, when the cluster
has a KV-cache budget, prompts totalling at most ``kv_free[g]`` tokens).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = ["ClusterView", "Router"]


class ClusterView(NamedTuple):
    """Read-only state of the cluster at the start of a tick (before admissions).

    Attributes:
        tick: decode step index ``k``.
        loads: ``L_g(k)`` per replica (KV tokens, int64 ``(G,)``); [R] ``Σ (s_i + a_i(k))``.
        free: free decode slots per replica (int64 ``(G,)``).
        inflight: requests in flight per replica (int64 ``(G,)``).
        pool_ids: trace indices of the prompt pool, in arrival order (int64 ``(P,)``).
        pool_prompt: their prompt lengths ``s_i`` (tokens).
        pool_wait: ticks each pool entry has waited.
        slot_ids: trace index in each slot, ``-1`` if empty (int64 ``(G, S)``).
        slot_prompt: prompt length in each slot (tokens).
        slot_start: first decode step of each slot's request; ``a_i(k) = tick − slot_start``.
        finished_ids: requests that finished since the previous call.
        finished_steps: their decode lengths (steps).
        kv_free: KV-cache tokens each replica may still admit this tick, ``kv_budget − L_g(k)``
            (int64 ``(G,)``), or ``None`` when the cluster has no KV budget (the default). The
            KV held by a replica is its load: prompt + generated tokens of its requests.
    """

    tick: int
    loads: np.ndarray
    free: np.ndarray
    inflight: np.ndarray
    pool_ids: np.ndarray
    pool_prompt: np.ndarray
    pool_wait: np.ndarray
    slot_ids: np.ndarray
    slot_prompt: np.ndarray
    slot_start: np.ndarray
    finished_ids: list[int]
    finished_steps: list[int]
    kv_free: np.ndarray | None = None


class Router(NamedTuple):
    """A decode-slot router: ``init() -> state``; ``schedule(state, view) -> (pos, g, state)``.

    ``pos`` are positions into ``view.pool_ids`` (distinct) and ``g`` the replica of each (int64
    arrays of equal length).
    """

    name: str
    init: Callable[[], Any]
    schedule: Callable[[Any, ClusterView], tuple[np.ndarray, np.ndarray, Any]]
