"""Remaining-length predictors for BR-H (THEORY §9.4).

A predictor answers, for requests in flight with ``a_i`` decode steps done, the probability
``p̂_fin = Pr(r_i ≤ H)`` that the request ends within the horizon and the conditional mean remaining
steps ``μ̂_rem ≈ E[r_i | r_i ≤ H]``; :func:`~lbtheory.barrier.fscore.expected_contribution` turns
them into ``ĉ_i``. ``observe`` feeds back the decode length (steps) of finished requests, so
predictors learn online from what the simulation has completed — never from the future.

* :class:`OraclePredictor` — the true remaining length (upper bound on what prediction can give).
* :class:`SurvivalPredictor` — empirical CDF ``F`` of finished lengths; [R] ``p̂_fin =
  (F(a+H) − F(a)) / (1 − F(a))``; each query is a binary search, ``O(log n)``.
* :class:`ExactMatchPredictor` — a memo keyed by the prompt identity (hash or id column of the
  trace); on a miss (or when the trace has no identities) it asks a fallback predictor.

Predictors are immutable values held in a router's state: ``observe`` returns a new predictor
(the old one is untouched), so a BR-H router's ``init`` can hand every run the same starting
predictor and runs never leak learning into each other.
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

    def observe(self, ids: Sequence[int], lengths: Sequence[int]) -> OraclePredictor:
        """Nothing to learn: the same predictor."""
        return self


class SurvivalPredictor:
    """Empirical-survival predictor learned online from finished requests' decode lengths.

    [R] ``p̂_fin = (F(a+H) − F(a)) / (1 − F(a))`` and ``μ̂_rem = mean(n − a | a < n ≤ a+H)`` with the
    empirical CDF ``F`` of observed lengths ``n``. With no observed length beyond ``a`` (including a
    cold start) it returns ``p̂_fin = 0``, so the confidence gate falls back to ``ĉ = H``.
    """

    name = "survival"

    def __init__(self, lengths: np.ndarray | None = None) -> None:
        self._sorted = np.zeros(0, dtype=np.int64) if lengths is None else \
            np.sort(np.asarray(lengths, dtype=np.int64))
        self._prefix = np.concatenate([[0.0], np.cumsum(self._sorted, dtype=float)])

    @property
    def count(self) -> int:
        """Number of lengths observed so far."""
        return int(self._sorted.size)

    def observe(self, ids: Sequence[int], lengths: Sequence[int]) -> SurvivalPredictor:
        """A predictor that also knows the decode lengths (steps) of these finished requests."""
        if not len(lengths):
            return self
        new = np.sort(np.asarray(lengths, dtype=np.int64))
        out = object.__new__(SurvivalPredictor)
        pos = np.searchsorted(self._sorted, new, side="right")
        out._sorted = np.insert(self._sorted, pos, new)
        out._prefix = np.concatenate([[0.0], np.cumsum(out._sorted, dtype=float)])
        return out

    def predict(self, ids: np.ndarray, decoded: np.ndarray,
                horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """``(p̂_fin, μ̂_rem)`` for requests with ``decoded`` steps done (binary searches)."""
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
        self.fallback = fallback if fallback is not None else SurvivalPredictor()
        self._key_id: np.ndarray | None = None
        self._memo = np.zeros(0, dtype=np.int64)
        if keys is not None:
            named = np.array(["" if k is None else str(k) for k in keys], dtype=object)
            uniq, inv = np.unique(named, return_inverse=True)
            self._key_id = np.where(named == "", -1, inv).astype(np.int64)
            self._memo = np.full(uniq.size, -1, dtype=np.int64)  # -1: length not seen yet

    def observe(self, ids: Sequence[int], lengths: Sequence[int]) -> ExactMatchPredictor:
        """A predictor that remembers each finished request's length under its key (the last
        one wins) and whose fallback learned them too."""
        out = object.__new__(ExactMatchPredictor)
        out._key_id = self._key_id
        out.fallback = self.fallback.observe(ids, lengths)
        out._memo = self._memo
        if self._key_id is not None and len(ids):
            k = self._key_id[np.asarray(ids, dtype=np.int64)]
            known = k >= 0
            if known.any():
                out._memo = self._memo.copy()
                out._memo[k[known]] = np.asarray(lengths, dtype=np.int64)[known]
        return out

    def predict(self, ids: np.ndarray, decoded: np.ndarray,
                horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """Memo hits get the remembered remaining length; misses go to the fallback."""
        p, mu = self.fallback.predict(ids, decoded, horizon)
        if self._key_id is None or not (self._memo >= 0).any():
            return p, mu
        k = self._key_id[np.asarray(ids, dtype=np.int64)]
        n = np.where(k >= 0, self._memo[np.maximum(k, 0)], -1)
        hit = n >= 0
        if hit.any():
            rem = np.maximum(n[hit] - np.asarray(decoded)[hit], 1).astype(float)
            p, mu = p.copy(), mu.copy()
            p[hit] = (rem <= horizon).astype(float)
            mu[hit] = rem
        return p, mu
