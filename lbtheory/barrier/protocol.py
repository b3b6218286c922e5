"""What a decode-slot router sees: the :class:`ReplicaView` of the decode simulator.

Routers follow the one contract of :mod:`lbtheory.routers` (a frozen config with pure ``init`` /
``observe`` / ``route``). At each decode tick with a non-empty prompt pool and a free slot, the
simulator (:mod:`.sim`) hands the router a ``ReplicaView``:

* ``observe(state, view)`` first, when requests finished since the router last routed
  (``finished_ids`` / ``finished_steps``: BR-H's predictors learn from them);
* then ``route(state, view, rng)`` until the router has nothing more to place. A shared baseline
  answers a replica for the request at the head of the pool (``view.head``, FIFO) and is asked
  again with the view updated; BalanceRoute's schedulers answer an
  :class:`~lbtheory.routers.Assignment` of pool positions to replicas for the whole tick. Each
  replica takes at most ``free[g]`` requests and, when the cluster has a KV-cache budget, prompts
  totalling at most ``kv_free[g]`` tokens.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..routers import IdenticalTargets

__all__ = ["ReplicaView"]


@dataclasses.dataclass(frozen=True)
class ReplicaView(IdenticalTargets):
    """Read-only state of the cluster at a decision of a tick.

    Attributes:
        tick: decode step index ``k``.
        loads: ``L_g(k)`` per replica (KV tokens, int64 ``(G,)``); [R] ``Σ (s_i + a_i(k))``.
        free: free decode slots per replica (int64 ``(G,)``).
        inflight: requests in flight per replica (int64 ``(G,)``).
        pool_ids: request indices of the prompt pool, in arrival order (int64 ``(P,)``).
        pool_prompt: their prompt lengths ``s_i`` (tokens).
        pool_wait: ticks each pool entry has waited.
        slot_ids: request index in each slot, ``-1`` if empty (int64 ``(G, S)``).
        slot_prompt: prompt length in each slot (tokens).
        slot_start: first decode step of each slot's request; ``a_i(k) = tick − slot_start``.
        finished_ids: requests that finished since the router last routed.
        finished_steps: their decode lengths (steps).
        kv_free: KV-cache tokens each replica may still admit this tick, ``kv_budget − L_g(k)``
            (int64 ``(G,)``), or ``None`` when the cluster has no KV budget (the default). The
            KV held by a replica is its load: prompt + generated tokens of its requests.
        head: pool position of the request a per-request router places next (FIFO).
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
    head: int = 0

    # -- the TargetView every simulator's view implements (shared baselines read these) --
    @property
    def eligible(self) -> np.ndarray:
        """Replicas with a free slot (and, under a KV budget, room for the head's prompt)."""
        ok = self.free > 0
        if self.kv_free is not None and self.head < self.pool_prompt.size:
            ok = ok & (self.kv_free >= self.pool_prompt[self.head])
        return ok

    @property
    def queue(self) -> np.ndarray:
        """Requests in flight per replica."""
        return self.inflight

    @property
    def tokens(self) -> np.ndarray:
        """Token load ``L_g`` per replica (KV tokens)."""
        return self.loads
