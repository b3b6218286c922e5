"""KV-cache budget (issue 14): admissions respect ``kv_budget`` (prompt + generated tokens held).

Oracles: admissions traced by hand, tick by tick, from the rules in THEORY §9 / ``barrier.sim``
(JSQ in the simulator, BR-0 Stage 2 on hand views); the F-scores in the comments are
``F = Δ − G·(Δ − m)_+`` worked out on paper.
"""

from __future__ import annotations

import numpy as np
import pytest

from lbtheory.barrier import BRParams, DecodeConfig, ReplicaView, br0, simulate_decode
from lbtheory.errors import ParameterError
from lbtheory.registry import POLICIES, make_router
from lbtheory.routers import Assignment
from lbtheory.workloads import read_trace, trace_from_arrays

i64 = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731


def mk(name, trace=None):
    extra = {"workload": trace} if "workload" in POLICIES[name].needs else {}
    return make_router(name, "replicas", **extra)


def jsq():
    return mk("jsq")


def _alloc(router, view):
    """One answer of a batch router on a view: (pool positions, replicas)."""
    decision, _ = router.route(router.init(0), view, np.random.default_rng(0))
    return decision.positions, decision.targets


def _view(loads, free, pool_prompt, kv_free) -> ReplicaView:
    G, P = len(loads), len(pool_prompt)
    return ReplicaView(
        tick=0, loads=i64(loads), free=i64(free), inflight=i64([1] * G), pool_ids=i64(range(P)),
        pool_prompt=i64(pool_prompt), pool_wait=i64([0] * P),
        slot_ids=np.full((G, 1), -1, dtype=np.int64), slot_prompt=np.zeros((G, 1), np.int64),
        slot_start=np.zeros((G, 1), np.int64), finished_ids=[], finished_steps=[],
        kv_free=None if kv_free is None else i64(kv_free))


def test_jsq_under_a_kv_budget_holds_the_queue_until_kv_is_freed():
    # G = 2, budget 10 tokens/replica, prompts (6, 6, 3, 5), decode steps (2, 1, 1, 1).
    # tick 0: r0 (6) → g0 (kv room 10 → 4); r1 (6) does not fit g0 → g1 (→ 4);
    #         r2 (3): both have 1 in flight → g0 (→ 1); r3 (5) fits neither → waits.
    #         step 0: loads (9, 6); r1, r2 finish → g0 holds r0 = 6 + 1 = 7, g1 holds 0.
    # tick 1: room (3, 10): r3 → g1. step 1: loads (7, 5); r0, r3 finish.
    tr = trace_from_arrays([0, 0, 0, 0], [6, 6, 3, 5], [2, 1, 1, 1])
    res = simulate_decode(tr, jsq(), config=DecodeConfig(replicas=2, slots=4, kv_budget=10))
    assert res.replica.tolist() == [0, 1, 0, 1]
    assert res.start_step.tolist() == [0, 0, 0, 1]
    assert res.max_load.tolist() == [9, 7] and res.sum_load.tolist() == [15, 12]
    assert res.summary()["kv_peak_ratio"] == pytest.approx(0.9)
    # without the budget r3 starts at once, on g1 (1 request in flight vs 2)
    free = simulate_decode(tr, jsq(), config=DecodeConfig(replicas=2, slots=4))
    assert free.start_step.tolist() == [0, 0, 0, 0] and free.replica.tolist() == [0, 1, 0, 1]
    assert "kv_peak_ratio" not in free.summary()


def test_br0_stage2_only_offers_prompts_that_fit_and_skips_a_full_replica():
    # loads (11, 0), one slot each, S_tot = 2 = S_greedy → Stage 2 only. Pool (12, 8, 3).
    # no budget: g1 (load 0, m = 11) first: F(12) = 12 − 2·1 = 10 > F(8) = 8 → 12 → g1 (M = 12);
    #            g0 (m = 1): F(8) = −6, F(3) = −1 ≤ 0 → starvation guard → 3 → g0.
    r = br0()
    pos, reps = _alloc(r, _view([11, 0], [1, 1], [12, 8, 3], None))
    assert sorted(zip(pos.tolist(), reps.tolist())) == [(0, 1), (2, 0)]
    # budget 10: room (−1, 10). g1 may only take 8 or 3: F(8) = 8 → 8 → g1; g0 has no room.
    pos, reps = _alloc(r, _view([11, 0], [1, 1], [12, 8, 3], [-1, 10]))
    assert pos.tolist() == [1] and reps.tolist() == [1]


def test_br0_stage2_subsets_must_fit_the_kv_room_in_total():
    # loads (20, 0), g1 has 4 slots (m = 20), Stage 2 forced (S_greedy = 100). Pool (12, 10, 7).
    # no budget: {12, 7} = 19 → F = 19 (best; {12, 10} = 22 → 22 − 4 = 18, {10, 7} → 17,
    #            {12, 10, 7} = 29 → 29 − 18 = 11); then 10 alone: m = 1 → F = 10 − 18 < 0 → guard.
    r = br0(BRParams(s_greedy=100))
    pos, reps = _alloc(r, _view([20, 0], [0, 4], [12, 10, 7], None))
    assert set(pos.tolist()[:2]) == {0, 2} and pos.tolist()[2] == 1 and reps.tolist() == [1] * 3
    # room 18 on g1: feasible subsets {12}, {10}, {7}, {10, 7} = 17 → {10, 7} (F = 17);
    # then room 1 < 12 → g1 takes nothing more and 12 waits.
    pos, reps = _alloc(r, _view([20, 0], [0, 4], [12, 10, 7], [5, 18]))
    assert sorted(pos.tolist()) == [1, 2] and reps.tolist() == [1, 1]


def test_br0_stage1_drops_the_free_slots_of_a_replica_with_no_kv_room():
    # loads (20, 0), free slots (4, 2), S_greedy = G = 2, pool (15, 10, 9), KV room (5, 100).
    # g0's 4 slots are unusable (no prompt ≤ 5), so only 2 usable slots remain: S_tot = 2 is not
    # > S_greedy and Stage 1 must stop at once; Stage 2 on g1 (m = 20, ≤ 2 slots):
    #   {15, 10} = 25 → 25 − 2·5 = 15; {15, 9} = 24 → 24 − 2·4 = 16; {10, 9} = 19 → F = 19 (best).
    # Counting g0's dead slots kept Stage 1 greedy: 15 (F = 15), then m = 5: F(10) = 0, F(9) = 1
    # → {15, 9}, the worse set.
    pos, reps = _alloc(br0(), _view([20, 0], [4, 2], [15, 10, 9], [5, 100]))
    assert sorted(pos.tolist()) == [1, 2] and reps.tolist() == [1, 1]


def test_a_budget_that_never_binds_changes_nothing():
    tr = read_trace("examples/traces/AzureLLMInferenceTrace_conv.csv").head(400)
    big = 32 * int((tr.prompt_tokens + tr.output_tokens).max())  # 32 slots × the largest request
    for name in ("jsq", "br0", "brh-oracle"):
        a = simulate_decode(tr, mk(name, tr), config=DecodeConfig(replicas=4))
        b = simulate_decode(tr, mk(name, tr),
                            config=DecodeConfig(replicas=4, kv_budget=big))
        assert np.array_equal(a.replica, b.replica) and np.array_equal(a.max_load, b.max_load)


@pytest.mark.parametrize("name", ["random", "rr", "p2c", "jsq", "br0", "brh-survival"])
def test_every_policy_admits_within_the_budget(name):
    # each admission must fit: L_g(k) + prompts admitted to g at k ≤ budget (checked here from the
    # per-request records, independently of the simulator's own check)
    tr = read_trace("examples/traces/AzureLLMInferenceTrace_code.csv").head(300)
    budget = 2 * int(tr.prompt_tokens.max())
    res = simulate_decode(tr, mk(name, tr),
                          config=DecodeConfig(replicas=4, kv_budget=budget))
    steps, s = res.n_steps, tr.prompt_tokens
    for k in np.unique(res.start_step).tolist():
        for g in range(4):
            running = (res.replica == g) & (res.start_step < k) & (res.start_step + steps > k)
            held = int((s[running] + (k - res.start_step[running])).sum())
            new = int(s[(res.replica == g) & (res.start_step == k)].sum())
            assert new == 0 or held + new <= budget
    assert res.summary()["kv_peak_ratio"] > 0.5  # the budget was actually approached


def test_bad_budgets_are_refused_naming_kv_budget():
    tr = trace_from_arrays([0, 0], [50, 5], [1, 1])
    with pytest.raises(ParameterError, match="kv_budget"):
        DecodeConfig(kv_budget=0)
    with pytest.raises(ParameterError, match="kv_budget"):
        DecodeConfig(kv_budget=2.5)
    with pytest.raises(ParameterError, match="kv_budget 40 tokens is smaller than the longest "
                                             "prompt"):
        simulate_decode(tr, jsq(), config=DecodeConfig(replicas=2, kv_budget=40))


class _GreedyZero:
    """Puts the whole pool on replica 0, ignoring the KV room."""

    name = "greedy-zero"

    def init(self, seed=0):
        return None

    def observe(self, state, view):
        return state

    def route(self, state, view, rng):
        n = view.pool_ids.size
        return Assignment(np.arange(n), np.zeros(n, np.int64)), state


def test_a_router_that_ignores_the_budget_is_caught():
    bad = _GreedyZero()
    tr = trace_from_arrays([0, 0], [6, 6], [1, 1])
    with pytest.raises(ParameterError, match="KV budget"):
        simulate_decode(tr, bad, config=DecodeConfig(replicas=2, slots=4, kv_budget=10))
