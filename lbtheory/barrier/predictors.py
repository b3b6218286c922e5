"""Remaining-length predictors for BR-H (THEORY §9.4).

A predictor answers, for requests in flight with ``a_i`` decode steps done, the probability
``p̂_fin = Pr(r_i ≤ H)`` that the request ends within the horizon and the conditional mean remaining
steps ``μ̂_rem ≈ E[r_i | r_i ≤ H]``; :func:`~lbtheory.barrier.fscore.expected_contribution` turns
them into ``ĉ_i``. ``observe`` feeds back the decode length (steps) of finished requests, so
predictors
learn online from what the simulation has completed — never from the future.

* :class:`OraclePredictor` — the true remaining length (upper bound on what prediction can give).
* :class:`SurvivalPredictor` — empirical CDF ``F`` of finished lengths; [R] ``p̂_fin =
  (F(a+H) − F(a)) / (1 − F(a))``; each query is a binary search, ``O(log n)``.
* :class:`ExactMatchPredictor` — a memo keyed by the prompt identity (hash or id column of the
  trace); on a miss (or when the trace has no identities) it asks a fallback predictor.

Predictors are small stateful objects owned by a router's explicit state.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["OraclePredictor", "SurvivalPredictor", "ExactMatchPredictor"]


class OraclePredictor:
    """True remaining steps ``r_i = n_i − a_i`` from the trace (``n_i`` = decode steps).

    Args:
        decode_steps: decode steps of every request of the trace, indexed by request id.
    """

    name = "oracle"

    def __init__(self, decode_steps: np.ndarray) -> None:
        self._steps = np.asarray(decode_steps, dtype=np.int64)

    def predict(self, ids: np.ndarray, decoded: np.ndarray,
                horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """``(p̂_fin, μ̂_rem)``: ``p̂ = 1[r ≤ H]``, ``μ̂ = r`` (steps)."""
        rem = (self._steps[np.asarray(ids, dtype=np.int64)] - decoded).astype(float)
        return (rem <= horizon).astype(float), rem

    def observe(self, ids: Sequence[int], lengths: Sequence[int]) -> None:
        """Nothing to learn."""


class SurvivalPredictor:
    """Empirical-survival predictor learned online from finished requests' decode lengths.

    [R] ``p̂_fin = (F(a+H) − F(a)) / (1 − F(a))`` and ``μ̂_rem = mean(n − a | a < n ≤ a+H)`` with the
    empirical CDF ``F`` of observed lengths ``n``. With no observed length beyond ``a`` (including a
    cold start) it returns ``p̂_fin = 0``, so the confidence gate falls back to ``ĉ = H``.
    """

    name = "survival"

    def __init__(self) -> None:
        self._sorted = np.zeros(0, dtype=np.int64)
        self._prefix = np.zeros(1)
        self._pending: list[int] = []

    @property
    def count(self) -> int:
        """Number of lengths observed so far."""
        return int(self._sorted.size) + len(self._pending)

    def observe(self, ids: Sequence[int], lengths: Sequence[int]) -> None:
        """Record decode lengths (steps) of finished requests."""
        self._pending.extend(int(n) for n in lengths)

    def _flush(self) -> None:
        if not self._pending:
            return
        new = np.sort(np.asarray(self._pending, dtype=np.int64))
        self._pending.clear()
        pos = np.searchsorted(self._sorted, new, side="right")
        self._sorted = np.insert(self._sorted, pos, new)
        self._prefix = np.concatenate([[0.0], np.cumsum(self._sorted, dtype=float)])

    def predict(self, ids: np.ndarray, decoded: np.ndarray,
                horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """``(p̂_fin, μ̂_rem)`` for requests with ``decoded`` steps done (binary searches)."""
        self._flush()
        a = np.asarray(decoded, dtype=np.int64)
        lo = np.searchsorted(self._sorted, a, side="right")            # n ≤ a
        hi = np.searchsorted(self._sorted, a + horizon, side="right")  # n ≤ a + H
        alive = self._sorted.size - lo
        within = hi - lo
        p = np.divide(within, alive, out=np.zeros(a.shape), where=alive > 0)
        total = self._prefix[hi] - self._prefix[lo]
        mu = np.divide(total, within, out=np.full(a.shape, np.inf), where=within > 0) - a
        return p, mu


class ExactMatchPredictor:
    """Memo of decode lengths keyed by prompt identity, with a fallback on misses.

    Args:
        keys: prompt identity of each request of the trace (``None`` or "" = unknown).
        fallback: predictor asked on misses (default: a new :class:`SurvivalPredictor`).
    """

    name = "exactmatch"

    def __init__(self, keys: Sequence[str | None] | None,
                 fallback: SurvivalPredictor | None = None) -> None:
        self._keys = list(keys) if keys is not None else None
        self._memo: dict[str, int] = {}
        self.fallback = fallback if fallback is not None else SurvivalPredictor()

    def observe(self, ids: Sequence[int], lengths: Sequence[int]) -> None:
        """Remember each finished request's length under its key; also teach the fallback."""
        if self._keys is not None:
            for i, n in zip(ids, lengths):
                key = self._keys[int(i)]
                if key:
                    self._memo[key] = int(n)
        self.fallback.observe(ids, lengths)

    def predict(self, ids: np.ndarray, decoded: np.ndarray,
                horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """Memo hits get the remembered remaining length; misses go to the fallback."""
        p, mu = self.fallback.predict(ids, decoded, horizon)
        if self._keys is None or not self._memo:
            return p, mu
        for j, i in enumerate(np.asarray(ids, dtype=np.int64)):
            n = self._memo.get(self._keys[int(i)] or "")
            if n is not None:
                rem = max(n - int(decoded[j]), 1)
                p[j] = 1.0 if rem <= horizon else 0.0
                mu[j] = float(rem)
        return p, mu

