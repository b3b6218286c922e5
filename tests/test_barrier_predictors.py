"""Predictors for BR-H against hand-computed answers."""

from __future__ import annotations

import numpy as np
import pytest

from lbtheory.barrier import ExactMatchPredictor, OraclePredictor, SurvivalPredictor


def test_oracle():
    p, mu = OraclePredictor(np.array([5, 100])).predict(np.array([0, 1]), np.array([2, 10]), 80)
    assert p.tolist() == [1.0, 0.0] and mu.tolist() == [3.0, 90.0]


def test_survival_hand_case():
    sp = SurvivalPredictor()
    p, _ = sp.predict(np.array([0]), np.array([0]), 5)
    assert p.tolist() == [0.0]                       # cold start: nothing known → gate to H
    sp.observe([0] * 5, [1, 2, 3, 4, 5])
    sp.observe([0] * 5, [10, 9, 8, 7, 6])
    assert sp.count == 10
    p, mu = sp.predict(np.array([0, 1, 2]), np.array([3, 0, 10]), 2)
    # a = 3: alive n > 3 → 7 lengths; within (3, 5] → {4, 5}: p = 2/7, μ = mean(1, 2) = 1.5
    assert p[0] == pytest.approx(2 / 7) and mu[0] == pytest.approx(1.5)
    # a = 0: within (0, 2] → {1, 2} of 10
    assert p[1] == pytest.approx(0.2) and mu[1] == pytest.approx(1.5)
    # a = 10: no observed length beyond → p = 0
    assert p[2] == 0.0 and np.isinf(mu[2])


def test_exact_match_memo_and_fallback():
    em = ExactMatchPredictor(["a", "b", "a"])
    em.observe([0], [12])
    p, mu = em.predict(np.array([2, 1]), np.array([2, 0]), 80)
    assert p.tolist() == [1.0, 1.0]
    assert mu[0] == 10.0                              # memo: 12 − 2
    assert mu[1] == 12.0                              # fallback survival: only 12 observed
    no_keys = ExactMatchPredictor(None)
    no_keys.observe([0], [12])
    assert no_keys.predict(np.array([0]), np.array([0]), 5)[0].tolist() == [0.0]
