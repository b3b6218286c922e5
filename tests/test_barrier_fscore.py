"""F-scores, score peak, projected margins and the Stage-2 subset search."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbtheory.barrier import (
    best_subset,
    discount_vector,
    expected_contribution,
    fscore_br0,
    fscore_horizon,
    projected_loads,
    projected_margins,
    score_peak,
    step_imbalance,
    subset_table,
)
from lbtheory.errors import ModelError


def test_br0_hand_cases():
    assert fscore_br0(3, 5, 4) == 3          # inside the margin
    assert fscore_br0(5, 5, 4) == 5          # exactly fills it
    assert fscore_br0(7, 5, 4) == -1         # 4·5 − 3·7
    assert fscore_br0(np.array([3, 7]), 5, 4).tolist() == [3.0, -1.0]


@pytest.mark.parametrize("G", [2, 4, 8, 16])
def test_br0_two_regimes(G):
    m = 10
    f = [fscore_br0(d, m, G) for d in range(0, 25)]
    slopes = np.diff(f)
    assert np.all(slopes[:m] == 1)              # slope +1 inside the margin
    assert np.all(slopes[m:] == -(G - 1))       # slope −(G−1) past it


def test_br0_is_minus_imbalance_change():
    rng = np.random.default_rng(1)
    for _ in range(200):
        G = int(rng.integers(1, 9))
        L = rng.integers(0, 100, size=G)
        g = int(rng.integers(G))
        delta = int(rng.integers(0, 150))
        after = L.copy()
        after[g] += delta
        dI = step_imbalance(after) - step_imbalance(L)
        assert fscore_br0(delta, L.max() - L[g], G) == pytest.approx(-dI)


def test_horizon_hand_case():
    d = discount_vector(1, 0.5)
    assert d.tolist() == [1.0, 0.5]
    # α(1ᵀd)Δ − β[(Δ − m_0)_+ d_0 + (Δ − m_1)_+ d_1] = 1·1.5·4 − 3·(2·1 + 0·0.5) = 0
    assert fscore_horizon(4.0, np.array([2.0, 6.0]), d, 1.0, 3.0) == 0.0
    assert fscore_horizon(7.0, np.array([2.0, 6.0]), d, 1.0, 3.0) == pytest.approx(
        10.5 - 3 * (5 + 0.5))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(delta=st.integers(0, 10_000), margin=st.integers(0, 10_000), G=st.integers(1, 64))
def test_horizon_reduces_to_br0(delta, margin, G):
    d = discount_vector(0, 0.9)
    assert fscore_horizon(float(delta), np.array([float(margin)]), d, 1.0, float(G)) \
        == fscore_br0(delta, margin, G)
    assert score_peak(np.array([float(margin)]), d, 1.0, float(G)) == \
        (float(margin) if G >= 2 else float("inf"))


def test_score_peak_is_largest_maximiser():
    rng = np.random.default_rng(2)
    grid = np.arange(0, 400, dtype=float)
    for _ in range(100):
        H = int(rng.integers(0, 6))
        m = rng.integers(0, 200, size=H + 1).astype(float)
        d = discount_vector(H, float(rng.uniform(0.5, 1.0)))
        alpha, beta = float(rng.uniform(0.5, 2)), float(rng.uniform(1, 10))
        f = np.array([fscore_horizon(x, m, d, alpha, beta) for x in grid])
        peak = score_peak(m, d, alpha, beta)
        if np.isinf(peak):
            assert np.all(np.diff(f) >= -1e-9)
        else:
            best = f.max()
            assert fscore_horizon(peak, m, d, alpha, beta) == pytest.approx(best)
            assert np.all(f[grid > peak] < best - 1e-9)


def test_horizon_validation():
    with pytest.raises(ModelError, match="discount gamma must be in"):
        discount_vector(3, 0.0)
    with pytest.raises(ModelError, match="horizon H must be a non-negative integer"):
        discount_vector(-1, 0.5)


def test_expected_contribution_gate():
    c = expected_contribution(np.array([0.8, 0.4, 1.0]), np.array([10.0, 5.0, np.inf]), 80)
    assert c.tolist() == pytest.approx([24.0, 80.0, 80.0])


def test_projected_loads_hand_case():
    # replica 0: base 10 living 1 step, base 5 living 3 steps; replica 1: base 7, ĉ = 2.5;
    # a request with ĉ = 0 still counts at h = 0 (clamped to 1).
    L = projected_loads(np.array([0, 0, 1, 1]), np.array([10, 5, 7, 100]),
                        np.array([1.0, 3.0, 2.5, 0.0]), 2, 2)
    assert L.tolist() == [[15, 6, 7], [107, 8, 9]]
    assert projected_margins(L).tolist() == [[92, 2, 2], [0, 0, 0]]


def _brute(sizes, k, margin, G):
    best = -np.inf
    for r in range(1, k + 1):
        for q in itertools.combinations(range(len(sizes)), r):
            delta = sum(sizes[i] for i in q)
            f = delta - G * max(delta - margin, 0)  # F written out, independent of the package
            best = max(best, f)
    return best


def test_subset_search_matches_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(500):
        n = int(rng.integers(1, 7))
        sizes = rng.integers(1, 300, size=n).tolist()
        k = int(rng.integers(1, n + 1))
        G = int(rng.integers(2, 33))
        margin = int(rng.integers(0, 800))
        q, score = best_subset(sizes, k,
                               lambda ds, m=margin, g=G: [fscore_br0(x, m, g) for x in ds])
        assert score == _brute(sizes, k, margin, G)
        assert 1 <= len(q) <= k and len(set(q)) == len(q)
        assert fscore_br0(sum(sizes[i] for i in q), margin, G) == score


def test_subset_table_and_ties():
    assert len(subset_table(4, 4)) == 15
    assert subset_table(3, 2)[:3] == [(0, 1), (0, 2), (1, 2)]
    # equal scores: the larger subset wins
    q, s = best_subset([2, 3, 5], 3, lambda ds: [x if x <= 5 else -x for x in ds])
    assert s == 5 and len(q) == 2
    assert best_subset([], 3, lambda ds: ds) == ((), float("-inf"))


def test_refill_loads_hand_case():
    # G = 2, H = 4, fill 5 tokens: request on g0 ends at ℓ = 2 → its slot holds 5, 6, 7 at
    # h = 2, 3, 4; ℓ = 0.3 rounds up to 1 (every request counts at h = 0) → 5, 6, 7, 8 on g1;
    # ℓ = 10 > H is never refilled inside the window
    from lbtheory.barrier.fscore import refill_loads
    got = refill_loads(np.array([0, 1, 1]), np.array([2.0, 0.3, 10.0]), 5.0, 2, 4)
    assert got.tolist() == [[0, 0, 5, 6, 7], [0, 5, 6, 7, 8]]
