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
    learned = sp.observe([0] * 5, [1, 2, 3, 4, 5]).observe([0] * 5, [10, 9, 8, 7, 6])
    assert learned.count == 10 and sp.count == 0     # observe returns a new predictor
    sp = learned
    p, mu = sp.predict(np.array([0, 1, 2]), np.array([3, 0, 10]), 2)
    # a = 3: alive n > 3 → 7 lengths; within (3, 5] → {4, 5}: p = 2/7, μ = mean(1, 2) = 1.5
    assert p[0] == pytest.approx(2 / 7) and mu[0] == pytest.approx(1.5)
    # a = 0: within (0, 2] → {1, 2} of 10
    assert p[1] == pytest.approx(0.2) and mu[1] == pytest.approx(1.5)
    # a = 10: no observed length beyond → p = 0
    assert p[2] == 0.0 and np.isinf(mu[2])


def test_exact_match_memo_and_fallback():
    cold = ExactMatchPredictor(["a", "b", "a"])
    em = cold.observe([0], [12])
    assert cold.predict(np.array([2]), np.array([2]), 80)[0].tolist() == [0.0]  # unchanged
    p, mu = em.predict(np.array([2, 1]), np.array([2, 0]), 80)
    assert p.tolist() == [1.0, 1.0]
    assert mu[0] == 10.0                              # memo: 12 − 2
    assert mu[1] == 12.0                              # fallback survival: only 12 observed
    no_keys = ExactMatchPredictor(None).observe([0], [12])
    assert no_keys.predict(np.array([0]), np.array([0]), 5)[0].tolist() == [0.0]


def test_exact_match_last_length_wins_and_blank_keys_never_match():
    em = ExactMatchPredictor(["a", "", None, "a"]).observe([0, 1], [12, 30]).observe([3], [7])
    p, mu = em.predict(np.array([0, 1, 2]), np.array([0, 0, 0]), 80)
    assert mu[0] == 7.0                  # "a": the latest length (request 3's 7 steps)
    assert mu[1] == mu[2] != 30.0        # "" and None are unknown keys: fallback, not a memo
