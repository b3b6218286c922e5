"""Status enums of the reports (issue 32, item 4): each status on cases whose answer is known
(the feasibility and stepsize statuses are checked in test_network_io / test_stability_network
on their hand cases; the simulators' RunStatus in test_results)."""

from __future__ import annotations

import numpy as np
import pytest

from lbtheory.errors import DynamicsStatus, FitStatus
from lbtheory.games import Commodity, GameArc, RoutingGame, bush_assignment, gradient_projection
from lbtheory.games.arccosts import Polynomial
from lbtheory.intelligent import Calibration, evaluate_length_predictor
from lbtheory.intelligent._predictor import PredictorReport
from lbtheory.stability._empirical import dynamics_status


def test_predictor_status_good_poor_and_no_data():
    # task 0 always 10 tokens, task 1 always 600: the task feature predicts perfectly (1.0)
    # while the majority bucket scores 18/30 on the test split
    k = np.array([0] * 60 + [1] * 40)
    p = np.full(100, 128)
    good = evaluate_length_predictor(p, k, np.where(k == 0, 10, 600), history_lag=0)
    assert good.accuracy == 1.0 > good.baseline_accuracy and good.status is FitStatus.GOOD
    # every output in one bucket: the predictor can only tie the majority baseline
    tie = evaluate_length_predictor(p, k, np.full(100, 10), history_lag=0)
    assert tie.accuracy == tie.baseline_accuracy == 1.0 and tie.status is FitStatus.POOR
    empty = PredictorReport(float("nan"), float("nan"), np.zeros((4, 4), dtype=np.int64), 5, 0)
    assert empty.status is FitStatus.INSUFFICIENT_DATA


def test_calibration_status_says_when_a_scale_fell_back():
    measured = Calibration(2.0, 100, 3.5, 0.02, 0.004, 25.0)
    assert measured.status is FitStatus.GOOD
    # h never varied (σ_h = 0: guidance_scale fell back to 0); no cost to go (reward_scale 1)
    assert Calibration(2.0, 100, 3.5, 0.02, 0.0).status is FitStatus.INSUFFICIENT_DATA
    assert Calibration(2.0, 100, 0.0, 0.0, 0.004).status is FitStatus.INSUFFICIENT_DATA
    assert Calibration(float("nan"), 0, 1.0, 1.0, 1.0).status is FitStatus.INSUFFICIENT_DATA


def test_dynamics_status_of_hand_made_envelopes():
    t = np.linspace(0.0, 10.0, 1001)
    W = np.ones((t.size, 2))
    decays = np.exp(-0.5 * t) * (1.0 + 0.5 * np.cos(4 * t))
    assert dynamics_status(W, decays, -0.5) is DynamicsStatus.CONVERGED
    assert dynamics_status(W, decays[::-1], 0.5) is DynamicsStatus.OSCILLATING
    assert dynamics_status(W, np.zeros(t.size), float("nan")) is DynamicsStatus.CONVERGED
    assert dynamics_status(W, decays, float("nan")) is DynamicsStatus.MAX_STEPS
    W[-1, 0] = np.inf
    assert dynamics_status(W, decays, -0.5) is DynamicsStatus.DIVERGED


def two_routes():
    """Pigou-like: two parallel arcs 0 → 1, ℓ = 1 + x and ℓ = 2x, demand 3: at equilibrium
    1 + x₁ = 2x₂ with x₁ + x₂ = 3, so x = (5/3, 4/3)."""
    return RoutingGame([0, 1], [GameArc(0, 1, Polynomial(1.0, 1.0, 1.0, 1.0)),
                                GameArc(0, 1, Polynomial(0.0, 2.0, 1.0, 1.0))],
                       [Commodity(0, 1, 3.0)])


@pytest.mark.parametrize("solve", [gradient_projection, bush_assignment])
def test_solvers_return_one_result_with_state_and_old_unpacking_warns(solve):
    res = solve(two_routes(), tol=1e-12)
    np.testing.assert_allclose(res.arc_flow, [5 / 3, 4 / 3], rtol=1e-9)
    assert res.state is not None
    again = solve(two_routes(), tol=1e-12, warm=res.state)  # the state warm-starts a solve
    np.testing.assert_allclose(again.arc_flow, res.arc_flow, rtol=1e-9)
    with pytest.warns(DeprecationWarning, match=r"unpacking a solver's \(result, state\) pair"):
        old, state = solve(two_routes(), tol=1e-12)
    assert state is old.state
    np.testing.assert_array_equal(old.arc_flow, res.arc_flow)
    with pytest.warns(DeprecationWarning, match=r"indexing a solver's \(result, state\) pair"):
        first = solve(two_routes(), tol=1e-12)[0]
    np.testing.assert_array_equal(first.arc_flow, res.arc_flow)
