"""BalanceRoute F-scores (THEORY §9.2, §9.4) and the subset search of Stage 2 (§9.3).

BR-0: admitting a set ``Q`` with prompt total ``Δ_s(Q) = Σ_{i∈Q} s_i`` (tokens) to replica ``g``
with margin ``m_g`` changes the imbalance by ``ΔI_g(Q) = G(Δ_s − m_g)_+ − Δ_s``; the score is

    F_g(Q) = −ΔI_g(Q) = Δ_s − G (Δ_s − m_g)_+

(slope +1 inside the margin, slope −(G − 1) past it).

BR-H (horizon ``H`` steps, discount ``d = (1, γ, …, γ^H)``, margins ``m_g ∈ R^{H+1}``):

    F_g(Q) = α (1ᵀd) Δ_s − β (Δ_s·1 − m_g)_+ᵀ d,

which equals BR-0 at ``H = 0, α = 1, β = G``. Both scores are concave piecewise-linear in ``Δ_s``,
which :func:`score_peak` exploits: the best single request is next to the score's peak.

Projected margins are reconstructed [R] (THEORY §13 item 9): ``L̂_g(k+h) = Σ_{i on g, h < ĉ_i}
(s_i + a_i(k) + h)`` with ``ĉ_i`` clamped to ≥ 1, so every request in flight counts at ``h = 0``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

from .._checks import check_int, check_real

__all__ = [
    "fscore_br0", "discount_vector", "fscore_horizon", "fscore_profile", "score_peak",
    "expected_contribution", "projected_loads", "refill_loads", "projected_margins", "subset_table",
    "best_subset",
]


def fscore_br0(delta_s: float | np.ndarray, margin: float | np.ndarray,
               replicas: int) -> float | np.ndarray:
    """BR-0 score ``Δ_s − G (Δ_s − m_g)_+`` (tokens of imbalance removed).

    Args:
        delta_s: admitted prompt tokens ``Δ_s(Q)``.
        margin: the replica's margin ``m_g`` (tokens).
        replicas: ``G``.

    Example:
        >>> fscore_br0(3, 5, 4), fscore_br0(7, 5, 4)    # inside: +3; past: 4·5 − 3·7
        (3, -1)
    """
    scalar = (int, float)
    if type(delta_s) in scalar and type(margin) in scalar or \
            np.ndim(delta_s) == 0 and np.ndim(margin) == 0:
        over = delta_s - margin
        return delta_s - replicas * over if over > 0 else delta_s
    d = np.asarray(delta_s, dtype=float)
    return d - replicas * np.maximum(d - np.asarray(margin, dtype=float), 0.0)


def discount_vector(horizon: int, gamma: float) -> np.ndarray:
    """``d = (1, γ, …, γ^H)`` (length ``H + 1``).

    Raises:
        ModelError: ``H < 0`` or ``γ ∉ (0, 1]``.
    """
    horizon = check_int(horizon, "horizon H", low=0, unit="steps")
    gamma = check_real(gamma, "discount gamma", low=0.0, high=1.0, low_open=True)
    return gamma ** np.arange(int(horizon) + 1, dtype=float)


def fscore_horizon(delta_s: float | np.ndarray, margins_h: np.ndarray, discount: np.ndarray,
                   alpha: float, beta: float) -> float | np.ndarray:
    """BR-H score ``α (1ᵀd) Δ_s − β (Δ_s·1 − m_g)_+ᵀ d``.

    Args:
        delta_s: admitted prompt tokens (scalar or array of candidate totals).
        margins_h: projected margins ``m_g(k+h)``, ``h = 0..H`` (tokens), shape ``(H+1,)``.
        discount: ``d`` from :func:`discount_vector`.
        alpha: reward weight ``α``.
        beta: overflow penalty ``β``.
    """
    x = np.asarray(delta_s, dtype=float)
    out = fscore_profile(x[..., None] * np.ones(np.shape(discount)), margins_h, discount,
                         alpha, beta)
    return float(out) if np.ndim(delta_s) == 0 else out


def fscore_profile(load_h: np.ndarray, margins_h: np.ndarray, discount: np.ndarray,
                   alpha: float, beta: float) -> np.ndarray:
    """BR-H score of a per-step added load ``x_h``: ``α xᵀd − β (x − m_g)_+ᵀ d``.

    :func:`fscore_horizon` is the case ``x_h = Δ_s`` for every ``h``; [R] the projected reading
    (THEORY §9.4) uses ``x_h = Σ_{i∈Q} (s_i + h) 1[h < ĉ_i]`` (tokens).

    Args:
        load_h: added load per offset ``h = 0..H`` (tokens), shape ``(..., H+1)``.
        margins_h: projected margins ``m_g(k+h)`` (tokens), shape ``(H+1,)``.
        discount: ``d`` from :func:`discount_vector`.
        alpha: reward weight ``α``.
        beta: overflow penalty ``β``.
    """
    m = np.asarray(margins_h, dtype=float)
    d = np.asarray(discount, dtype=float)
    x = np.asarray(load_h, dtype=float)
    return alpha * (x @ d) - beta * (np.maximum(x - m, 0.0) @ d)


def score_peak(margins_h: np.ndarray, discount: np.ndarray, alpha: float, beta: float) -> float:
    """Largest maximiser ``Δ*`` of the concave score ``Δ ↦ F_g(Δ)`` (tokens; ``inf`` if unbounded).

    The score rises with slope ``α(1ᵀd) − β Σ_{m_h ≤ Δ} d_h`` between breakpoints; ``Δ*`` is the
    first breakpoint after which the slope is negative. Among sorted candidate sizes, the best
    single request is then the largest one ``≤ Δ*`` or the smallest one ``> Δ*``.
    """
    m = np.asarray(margins_h, dtype=float)
    d = np.asarray(discount, dtype=float)
    order = np.argsort(m, kind="stable")
    ms = m[order]
    slope = alpha * d.sum() - beta * np.cumsum(d[order])
    last_of_run = np.ones(ms.size, dtype=bool)
    last_of_run[:-1] = ms[1:] != ms[:-1]
    hit = np.flatnonzero((slope < 0) & last_of_run)
    return float(ms[hit[0]]) if hit.size else float("inf")


def expected_contribution(p_fin: np.ndarray, mu_rem: np.ndarray, horizon: int,
                          gate: float = 0.5) -> np.ndarray:
    """``ĉ_i = (1 − p̂_fin) H + p̂_fin μ̂_rem``, or ``H`` when ``p̂_fin < gate`` (steps).

    Args:
        p_fin: predicted probability that the request ends within ``H`` steps.
        mu_rem: predicted remaining steps given that it ends within ``H``.
        horizon: ``H`` (steps).
        gate: confidence gate (the paper's 0.5).
    """
    p = np.asarray(p_fin, dtype=float)
    mu = np.asarray(mu_rem, dtype=float)
    c = (1.0 - p) * horizon + p * np.where(np.isfinite(mu), mu, horizon)
    return np.where(p < gate, float(horizon), c)


def projected_loads(replica: np.ndarray, base: np.ndarray, lifetime: np.ndarray,
                    replicas: int, horizon: int) -> np.ndarray:
    """[R] ``L̂_g(k+h) = Σ_{i on g, h < max(ĉ_i, 1)} (base_i + h)``, shape ``(G, H+1)`` (tokens).

    Args:
        replica: replica of each request in flight.
        base: ``s_i + a_i(k)`` of each request in flight (tokens).
        lifetime: ``ĉ_i`` (steps); a request counts at offsets ``h < max(ĉ_i, 1)``.
        replicas: ``G``.
        horizon: ``H``.
    """
    H1 = horizon + 1
    g = np.asarray(replica, dtype=np.int64)
    b = np.asarray(base, dtype=float)
    # number of offsets h in [0, H] with h < max(c, 1)
    steps = np.clip(np.ceil(np.maximum(np.asarray(lifetime, dtype=float), 1.0)), 1, H1)
    steps = steps.astype(np.int64)
    cnt = np.zeros((replicas, H1 + 1))
    tot = np.zeros((replicas, H1 + 1))
    np.add.at(cnt, (g, 0), 1.0)
    np.add.at(cnt, (g, steps), -1.0)
    np.add.at(tot, (g, 0), b)
    np.add.at(tot, (g, steps), -b)
    cnt = np.cumsum(cnt, axis=1)[:, :H1]
    tot = np.cumsum(tot, axis=1)[:, :H1]
    return tot + cnt * np.arange(H1, dtype=float)


def refill_loads(replica: np.ndarray, lifetime: np.ndarray, fill: float, replicas: int,
                 horizon: int) -> np.ndarray:
    """[R] Load of the requests that will *replace* those ending inside the window, ``(G, H+1)``.

    Under a saturated pool every slot freed at offset ``ℓ_i = ĉ_i ≤ H`` is refilled at once by a
    new request, here one of prompt ``fill`` tokens (the mean prompt of the pool the scheduler
    sees) that then grows by one token per step: ``Σ_{i on g, ℓ_i ≤ h} (fill + h − ℓ_i)``.
    Added to :func:`projected_loads` this is the ``refill`` reading of THEORY §9.4 (issue 14).

    Args:
        replica: replica of each request in flight.
        lifetime: ``ĉ_i`` (steps); only requests with ``ĉ_i ≤ H`` are refilled (at ``⌈ĉ_i⌉``,
            ``≥ 1``).
        fill: prompt tokens of a replacement request.
        replicas: ``G``.
        horizon: ``H``.
    """
    H1 = horizon + 1
    ell = np.clip(np.ceil(np.maximum(np.asarray(lifetime, dtype=float), 1.0)), 1, H1)
    ell = ell.astype(np.int64)
    g = np.asarray(replica, dtype=np.int64)
    cnt = np.zeros((replicas, H1 + 1))
    tot = np.zeros((replicas, H1 + 1))
    np.add.at(cnt, (g, ell), 1.0)
    np.add.at(tot, (g, ell), float(fill) - ell)
    cnt = np.cumsum(cnt, axis=1)[:, :H1]
    tot = np.cumsum(tot, axis=1)[:, :H1]
    return tot + cnt * np.arange(H1, dtype=float)


def projected_margins(loads_h: np.ndarray) -> np.ndarray:
    """``m_g(k+h) = max_g' L̂_g'(k+h) − L̂_g(k+h)`` for a ``(G, H+1)`` projection (tokens)."""
    L = np.asarray(loads_h, dtype=float)
    return L.max(axis=0, keepdims=True) - L


def subset_table(n: int, max_size: int) -> list[tuple[int, ...]]:
    """All index subsets of ``range(n)`` with ``1 ≤ |Q| ≤ max_size`` (largest first; lexicographic).

    For ``R_max = 4`` this is the paper's ≤ 15 subsets.
    """
    out: list[tuple[int, ...]] = []
    for k in range(min(n, max_size), 0, -1):
        out.extend(itertools.combinations(range(n), k))
    return out


def best_subset(sizes: Sequence[float], max_size: int,
                score_many: Callable[[list[float]], Sequence[float]],
                table: list[tuple[int, ...]] | None = None) -> tuple[tuple[int, ...], float]:
    """``argmax_{Q ⊆ candidates, 1 ≤ |Q| ≤ max_size} F(Δ_s(Q))`` by enumeration (Stage 2).

    Ties go to the larger subset (more requests placed), then to the lexicographically first.

    Args:
        sizes: prompt lengths of the candidates (tokens), at most ``R_max`` of them.
        max_size: ``min(cap[g], R_max)``.
        score_many: maps a list of subset totals ``Δ_s`` to their scores.
        table: precomputed :func:`subset_table` for ``len(sizes)`` and any ``R_max ≥ max_size``
            (subsets larger than ``max_size`` are skipped).

    Returns:
        (indices into ``sizes``, score); ``((), -inf)`` when there is no candidate.
    """
    n = len(sizes)
    if n == 0 or max_size < 1:
        return (), float("-inf")
    subsets = subset_table(n, max_size) if table is None else table
    subsets = [q for q in subsets if len(q) <= max_size]
    totals = [sum(sizes[i] for i in q) for q in subsets]
    scores = score_many(totals)
    best = 0
    best_score = scores[0]
    for j in range(1, len(subsets)):
        if scores[j] > best_score:
            best, best_score = j, scores[j]
    return subsets[best], float(best_score)
