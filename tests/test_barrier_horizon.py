"""BR-H projection options (issue 14): H = 0 reduces to BR-0 under every option, the projected
score is the exact look-ahead of the barrier cost, and a hand case where the look-ahead matters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lbtheory.barrier import (
    Lifetime,
    MarginSource,
    OraclePredictor,
    OwnLoad,
    Refill,
    ReplicaView,
    SurvivalPredictor,
    br0,
    brh,
    decode_steps,
    discount_vector,
    fscore_horizon,
    fscore_profile,
    imbalance_from_totals,
    simulate_decode,
)
from lbtheory.errors import LBTheoryError
from lbtheory.workloads import read_trace

CONV = (Path(__file__).resolve().parents[1] / "examples" / "traces"
        / "AzureLLMInferenceTrace_conv.csv")


@pytest.mark.parametrize("own,life,pred,refill", [
    (OwnLoad.CONSTANT, Lifetime.CLAMPED, "oracle", Refill.NONE),
    (OwnLoad.CONSTANT, Lifetime.CLAMPED, "survival", Refill.NONE),
    (OwnLoad.PROJECTED, Lifetime.EXACT, "oracle", Refill.POOL_MEAN),
    (OwnLoad.CONSTANT, Lifetime.EXACT, "survival", Refill.POOL_MEAN),
])
def test_h0_equals_br0_decision_by_decision(own, life, pred, refill):
    tr = read_trace(CONV).head(400)
    G = 8
    steps = decode_steps(tr)
    factory = (lambda: OraclePredictor(steps)) if pred == "oracle" else SurvivalPredictor
    a = simulate_decode(tr, br0(), replicas=G, slots=4, window=32)
    b = simulate_decode(tr, brh(factory, horizon=0, gamma=1.0, alpha=1.0, beta=float(G),
                                own_load=own, lifetime=life, refill=refill),
                        replicas=G, slots=4, window=32)
    assert np.array_equal(a.start_step, b.start_step)   # every request admitted at the same tick
    assert np.array_equal(a.replica, b.replica)         # ... onto the same replica
    assert np.array_equal(a.max_load, b.max_load)


def test_profile_score_is_minus_barrier_cost_change():
    # α = 1, β = G: the score of a per-step load x_h is −Σ_h d_h ΔI(k+h), ΔI from the calculator
    rng = np.random.default_rng(3)
    G, H = 4, 5
    L = rng.integers(0, 200, size=(G, H + 1)).astype(float)
    x = np.array([30.0, 31, 32, 0, 0, 0])   # a request of 30 prompt tokens that runs 3 steps
    d = discount_vector(H, 0.9)
    for g in range(G):
        Lx = L.copy()
        Lx[g] += x
        dI = (imbalance_from_totals(Lx.max(0), Lx.sum(0), G)
              - imbalance_from_totals(L.max(0), L.sum(0), G))
        m = L.max(0) - L[g]
        assert fscore_profile(x, m, d, 1.0, G) == pytest.approx(-(dI @ d))
    # a constant profile is the seed's score
    m = np.array([5.0, 2, 0, 9, 1, 4])
    assert fscore_profile(np.full(H + 1, 7.0), m, d, 0.5, 3.0) == \
        pytest.approx(fscore_horizon(7.0, m, d, 0.5, 3.0))


def _hand_view() -> ReplicaView:
    # replica 0 runs A (100 prompt tokens, ends after this step); replica 1 runs B (60, long);
    # pool: C (30 tokens, 50 steps, arrived first) and D (30 tokens, 1 step); one free slot each
    return ReplicaView(
        tick=0, loads=np.array([100, 60]), free=np.array([1, 1]), inflight=np.array([1, 1]),
        pool_ids=np.array([2, 3]), pool_prompt=np.array([30, 30]), pool_wait=np.array([0, 0]),
        slot_ids=np.array([[0, -1], [1, -1]]), slot_prompt=np.array([[100, 0], [60, 0]]),
        slot_start=np.zeros((2, 2), dtype=np.int64), finished_ids=[], finished_steps=[])


def _placement(router) -> dict[int, int]:
    decision, _ = router.route(router.init(0), _hand_view(), np.random.default_rng(0))
    return dict(zip(np.asarray(decision.positions).tolist(),
                    np.asarray(decision.targets).tolist()))


def test_lookahead_hand_case():
    steps = np.array([1, 50, 50, 1])
    oracle = lambda: OraclePredictor(steps)  # noqa: E731
    # BR-0 (margins (0, 40)): replica 1 pops first (lighter) and takes C (tie → earliest)
    assert _placement(br0()) == {0: 1, 1: 0}
    # the seed's score (Δ_s constant over the horizon) ties C and D too: 90 − 2·60 = −30 each
    assert _placement(brh(oracle, horizon=2)) == {0: 1, 1: 0}
    # projected: at replica 1, margins (40, 0, 0); C adds (30, 31, 32): 93 − 2·63 = −33;
    # D adds (30, 0, 0): 30 → D goes to replica 1, C to replica 0
    proj = brh(oracle, horizon=2, own_load=OwnLoad.PROJECTED, lifetime=Lifetime.EXACT)
    assert _placement(proj) == {0: 0, 1: 1}
    # the barrier cost of the next 3 steps, by hand: BR-0's choice 40 + 92 + 94 = 226,
    # the projected choice 40 + 30 + 30 = 100
    br0_loads = np.array([[130, 0, 0], [90, 92, 94]], dtype=float)
    proj_loads = np.array([[130, 31, 32], [90, 61, 62]], dtype=float)
    cost = [imbalance_from_totals(x.max(0), x.sum(0), 2).sum() for x in (br0_loads, proj_loads)]
    assert cost == [226.0, 100.0]


def test_projection_options_are_validated():
    with pytest.raises(LBTheoryError, match="own_load"):
        brh(SurvivalPredictor, own_load="linear")
    with pytest.raises(LBTheoryError, match="margins"):
        brh(SurvivalPredictor, margins="all")
    with pytest.raises(LBTheoryError, match="lifetime"):
        brh(SurvivalPredictor, lifetime="soon")
    with pytest.raises(LBTheoryError, match="refill"):
        brh(SurvivalPredictor, refill="always")
    assert MarginSource("running") is MarginSource.RUNNING
