"""Decode simulator: a hand-computed run, conservation, BR-H ≡ BR-0, starvation guard, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lbtheory.barrier import (
    BRParams,
    GuardScope,
    OraclePredictor,
    ReplicaView,
    StepTimeModel,
    SurvivalPredictor,
    br0,
    brh,
    decide_tick,
    simulate_decode,
)
from lbtheory.errors import ParameterError
from lbtheory.registry import BARRIER_POLICIES, POLICIES, make_router
from lbtheory.routers import Assignment
from lbtheory.workloads import read_trace, trace_from_arrays


def mk(name, trace=None, **options):
    """A decode-slot policy by name (BR-H options only where they apply)."""
    if name in POLICIES and "workload" in POLICIES[name].needs:
        return make_router(name, "replicas", workload=trace, **options)
    return make_router(name, "replicas")


def jsq():
    return mk("jsq")

CONV = (Path(__file__).resolve().parents[1] / "examples" / "traces"
        / "AzureLLMInferenceTrace_conv.csv")


def _trace(s, n, t=None):
    t = np.zeros(len(s)) if t is None else t
    return trace_from_arrays(t, s, n)


def test_hand_computed_run():
    tr = _trace([10, 4, 6], [2, 1, 1])
    res = simulate_decode(tr, jsq(), replicas=2, slots=1, window=3,
                          step_model=StepTimeModel(1e-3, 0.5), record_loads=True)
    # tick 0: r0→g0, r1→g1, loads (10, 4); r1 ends. tick 1: r2→g1, loads (11, 6).
    assert res.loads.tolist() == [[10, 4], [11, 6]]
    assert res.imbalance.tolist() == [6.0, 5.0]
    assert res.start_step.tolist() == [0, 0, 1] and res.replica.tolist() == [0, 1, 1]
    assert res.step_time_s.tolist() == pytest.approx([0.51, 0.511])
    s = res.summary()
    assert s["mean_imbalance"] == 5.5
    assert s["idle_fraction"] == pytest.approx(11 / 42)
    assert s["throughput"] == pytest.approx(4 / 1.021)
    assert res.tpot_s().tolist() == pytest.approx([1.021 / 2, 0.51, 0.511])


def _small_trace(seed=0, n=120):
    rng = np.random.default_rng(seed)
    return _trace(rng.integers(1, 500, n), rng.integers(1, 40, n))


@pytest.mark.parametrize("policy", BARRIER_POLICIES)
def test_conservation(policy):
    tr = _small_trace()
    G, S = 3, 4
    res = simulate_decode(tr, mk(policy, tr, horizon=8), replicas=G, slots=S, window=10,
                          record_loads=True, seed=1)
    n = len(tr)
    assert np.all(res.start_step >= 0) and np.all((res.replica >= 0) & (res.replica < G))
    assert res.tokens.sum() == tr.output_tokens.sum()
    # rebuild every load from (replica, start, length) and compare with the recorded matrix
    K = res.loads.shape[0]
    L = np.zeros((K, G))
    active = np.zeros((K, G))
    for i in range(n):
        ks = np.arange(res.start_step[i], res.start_step[i] + res.n_steps[i])
        L[ks, res.replica[i]] += tr.prompt_tokens[i] + (ks - res.start_step[i])
        active[ks, res.replica[i]] += 1
    assert np.array_equal(L, res.loads)
    assert active.max() <= S
    assert res.start_step.max() + res.n_steps[res.start_step.argmax()] <= K


def test_brh_reduces_to_br0_in_simulation():
    tr = read_trace(CONV).head(600)
    G = 4
    a = simulate_decode(tr, br0(), replicas=G, slots=8, window=32)
    b = simulate_decode(tr, brh(lambda: OraclePredictor(tr.output_tokens), horizon=0,
                                alpha=1.0, beta=float(G)), replicas=G, slots=8, window=32)
    assert np.array_equal(a.start_step, b.start_step)
    assert np.array_equal(a.replica, b.replica)
    assert np.array_equal(a.max_load, b.max_load)


def test_starvation_guard_bounds_the_wait():
    s = np.array([1] + [1000] * 300)
    tr = _trace(s, np.full(301, 2))
    free = simulate_decode(tr, br0(BRParams(max_wait=None)), replicas=2, slots=1, window=50)
    guarded = simulate_decode(tr, br0(BRParams(max_wait=20)), replicas=2, slots=1, window=50)
    assert free.start_step[0] > 200           # never among the R_max longest until the end
    assert guarded.start_step[0] <= 21        # promoted once it has waited 20 ticks


def test_deterministic_under_seed():
    tr = _small_trace(2)
    runs = [simulate_decode(tr, mk("p2c"), replicas=4, slots=3, window=8, seed=s)
            for s in (5, 5, 6)]
    assert np.array_equal(runs[0].replica, runs[1].replica)
    assert not np.array_equal(runs[0].replica, runs[2].replica)


def test_time_scale_replay_jumps_idle_gaps():
    tr = _trace([5, 5], [3, 2], t=np.array([0.0, 100.0]))
    res = simulate_decode(tr, jsq(), replicas=2, slots=1, time_scale=10.0)
    assert res.start_step.tolist() == [0, 3]
    assert res.max_load.size == 5


def test_bad_config_messages():
    tr = _small_trace()
    with pytest.raises(ParameterError, match=r"number of replicas G \(DecodeConfig.replicas\) "
                                             r"must be an integer >= 1, got 0"):
        simulate_decode(tr, jsq(), replicas=0)
    with pytest.raises(ParameterError, match=r"slot capacity per replica \(DecodeConfig.slots\) "
                                             r"must be an integer >= 1, got 0"):
        simulate_decode(tr, jsq(), slots=0)
    with pytest.raises(ParameterError, match=r"pool window \(DecodeConfig.window\) must be an "
                                             r"integer >= 1"):
        simulate_decode(tr, jsq(), window=0)
    with pytest.raises(ParameterError, match="time_scale must be positive, got -1.0"):
        simulate_decode(tr, jsq(), time_scale=-1.0)
    with pytest.raises(ParameterError, match="time_scale must be finite and positive, got inf"):
        simulate_decode(tr, jsq(), time_scale=float("inf"))
    with pytest.raises(ParameterError, match="unknown policy 'jsk'"):
        mk("jsk")
    with pytest.raises(ParameterError, match=r"R_max \(BRParams.r_max\) must be an integer >= 1"):
        BRParams(r_max=0)
    with pytest.raises(ParameterError, match=r"S_greedy \(BRParams.s_greedy\) must be a "
                                             r"non-negative integer"):
        BRParams(s_greedy=-1)
    with pytest.raises(ParameterError, match=r"max_wait \(BRParams.max_wait\) must be a "
                                             r"non-negative integer"):
        BRParams(max_wait=-1)


class _Fixed:
    """A router that answers one fixed assignment (to check the simulator's contract checks)."""

    name = "bad"

    def __init__(self, pos, reps):
        self.decision = Assignment(np.asarray(pos, dtype=np.int64),
                                   np.asarray(reps, dtype=np.int64))

    def init(self, seed=0):
        return None

    def observe(self, state, view):
        return state

    def route(self, state, view, rng):
        return self.decision, state


def test_router_contract_is_checked():
    tr = _small_trace()
    with pytest.raises(ParameterError, match="router bad over-filled a replica's free slots"):
        simulate_decode(tr, _Fixed([0, 1], [0, 0]), replicas=2, slots=1)
    with pytest.raises(ParameterError, match="invalid or repeated pool positions"):
        simulate_decode(tr, _Fixed([0, 0], [0, 1]), replicas=2, slots=1)
    with pytest.raises(ParameterError, match="replica outside 0..1"):
        simulate_decode(tr, _Fixed([0], [5]), replicas=2, slots=1)
    with pytest.raises(ParameterError, match="returned 2 positions and 1 replicas"):
        simulate_decode(tr, _Fixed([0, 1], [0]), replicas=2, slots=1)
    with pytest.raises(ParameterError, match="left every slot idle with 10 requests waiting"):
        simulate_decode(tr, _Fixed([], []), replicas=2, slots=1, window=10)


def test_brh_state_holds_an_immutable_predictor_that_learns():
    r = mk("brh-survival", _small_trace())
    st1 = r.init(0)
    # observe returns a new state whose predictor knows lengths (2, 4); the old one is intact.
    # At a = 1 decoded step with H = 80: p̂_fin = (F(81) − F(1)) / (1 − F(1)) = 1, μ̂ = 3 − 1 = 2
    st2 = r.observe(st1, _view_with_finished([0, 1], [2, 4]))
    assert st2.predictor.count == 2 and st1.predictor.count == 0
    assert r.init(0).predictor.count == 0  # every run starts from the same predictor
    p, mu = st2.predictor.predict(np.array([0]), np.array([1]), 80)
    assert p.tolist() == [1.0] and mu.tolist() == [2.0]


def _view_with_finished(ids, steps):
    i64 = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return ReplicaView(5, i64([0, 0]), i64([1, 1]), i64([0, 0]), i64([0]), i64([7]), i64([0]),
                       np.full((2, 1), -1, dtype=np.int64), np.zeros((2, 1), np.int64),
                       np.zeros((2, 1), np.int64), list(ids), list(steps))


def test_brh_reused_router_and_shared_predictor_give_identical_runs():
    tr = read_trace(CONV).head(300)
    shared = SurvivalPredictor()
    router = brh(lambda: shared, horizon=20)
    a = simulate_decode(tr, router, replicas=4, slots=4, window=16)
    b = simulate_decode(tr, router, replicas=4, slots=4, window=16)
    assert shared.count == 0                   # the caller's predictor is never mutated
    assert np.array_equal(a.replica, b.replica) and np.array_equal(a.start_step, b.start_step)
    c = simulate_decode(tr, mk("brh-survival", tr, horizon=20), replicas=4, slots=4, window=16)
    assert np.array_equal(a.replica, c.replica)


def _guard_view():
    """G = 2, both replicas at M = 100 (margins 0), one free slot on replica 0 (Stage 2 only,
    S_tot = 1 ≤ S_greedy = G). Pool prompts (50, 10, 60, 70, 80, 90) at positions 0..5."""
    i64 = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return ReplicaView(0, i64([100, 100]), i64([1, 0]), i64([1, 1]), i64(range(6)),
                       i64([50, 10, 60, 70, 80, 90]), i64([0] * 6),
                       np.full((2, 1), -1, dtype=np.int64), np.zeros((2, 1), np.int64),
                       np.zeros((2, 1), np.int64), [], [])


def test_guard_scope_pool_vs_candidates_hand_case():
    # margin 0 → F(Δ) = Δ − 2·Δ = −Δ < 0 for every subset, so the starvation guard fires.
    # candidates (R_max = 4 longest: 90, 80, 70, 60) → best single is 60, at position 2;
    # pool → best single over the whole pool is the shortest, 10, at position 1.
    view = _guard_view()

    def tick(router):
        return decide_tick(router, router.init(0), view, np.random.default_rng(0))[:2]

    assert tick(br0(BRParams(guard_scope="candidates"))) == ([2], [0])
    assert tick(br0(BRParams(guard_scope="pool"))) == ([1], [0])
    # the enum and its string value are the same option
    assert tick(br0(BRParams(guard_scope=GuardScope.POOL)))[0] == [1]


def test_policy_and_guard_scope_enums_accept_enum_or_value():
    tr = _small_trace()
    assert mk("jsq-tokens").name == "jsq-tokens"
    assert mk("brh-oracle", tr).name == "brh-oracle"
    assert BRParams(guard_scope="pool").guard_scope is GuardScope.POOL
    assert BRParams().guard_scope is GuardScope.CANDIDATES
    with pytest.raises(ParameterError, match=r"unknown policy 'jsk' for the replicas simulator; "
                                             r"expected one of \['rand', 'random', 'rr', 'p2c', "
                                             r"'jsq', 'jsq-tokens', 'br0', 'brh-oracle', "
                                             r"'brh-survival', 'brh-exactmatch'\]"):
        mk("jsk")


def test_guard_scope_option():
    with pytest.raises(ParameterError, match="guard_scope must be 'candidates' or 'pool'"):
        BRParams(guard_scope="all")
    # the pool-wide guard also conserves requests
    tr = _small_trace(4)
    res = simulate_decode(tr, br0(BRParams(guard_scope="pool")), replicas=3, slots=2, window=12)
    assert np.all(res.start_step >= 0) and res.tokens.sum() == tr.output_tokens.sum()
