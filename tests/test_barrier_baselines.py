"""The shared baselines (rr, jsq, jsq-tokens, p2c, random) in the decode simulator: their rules
on hand cases.

Oracles: hand-traced assignments (rr, jsq, jsq-tokens), the exact choice law of power of two
choices (computed from the loads alone, not from the generator's calls) and chi-square
goodness-of-fit tests against the uniform law (random).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy import stats as sps

from lbtheory.barrier import DecodeConfig, ReplicaView, decide_tick, simulate_decode
from lbtheory.errors import ParameterError
from lbtheory.registry import make_router
from lbtheory.workloads import trace_from_arrays


def _view(free, pool_prompt, loads=None, inflight=None, kv_free=None) -> ReplicaView:
    G = len(free)
    P = len(pool_prompt)
    i64 = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return ReplicaView(
        tick=0, loads=i64(loads if loads is not None else [0] * G), free=i64(free),
        inflight=i64(inflight if inflight is not None else [0] * G), pool_ids=i64(range(P)),
        pool_prompt=i64(pool_prompt), pool_wait=i64([0] * P),
        slot_ids=np.full((G, 1), -1, dtype=np.int64), slot_prompt=np.zeros((G, 1), np.int64),
        slot_start=np.zeros((G, 1), np.int64), finished_ids=[], finished_steps=[],
        kv_free=None if kv_free is None else i64(kv_free))


def _tick(name, view, state=None, seed=0):
    r = make_router(name, "replicas")
    st = r.init(0) if state is None else state
    pos, reps, st = decide_tick(r, st, view, np.random.default_rng(seed))
    return pos, reps, st


def test_round_robin_order_skips_full_replicas_and_keeps_its_pointer():
    pos, reps, st = _tick("rr", _view([2, 2, 2], [5, 5, 5, 5]))
    assert pos == [0, 1, 2, 3] and reps == [0, 1, 2, 0] and st.pointer == (1,)
    # pointer at 1, but replica 1 is full: 2, then 0; two free slots → two requests placed
    pos, reps, st = _tick("rr", _view([1, 0, 1], [5, 5, 5]), state=st)
    assert pos == [0, 1] and reps == [2, 0] and st.pointer == (1,)


def test_jsq_tokens_fewest_waiting_tokens_lowest_index_on_ties():
    # loads (30, 10, 10, 50): 5 tokens → g1 (tie with g2, lowest index) → (30, 15, 10, 50);
    # 7 → g2 → (30, 15, 17, 50); g1, g2 now full: 100 → g0 (30 < 50)
    pos, reps, _ = _tick("jsq-tokens", _view([1, 1, 1, 1], [5, 7, 100], loads=[30, 10, 10, 50]))
    assert pos == [0, 1, 2] and reps == [1, 2, 0]
    # the least-loaded replica without a free slot is skipped
    _, reps, _ = _tick("jsq-tokens", _view([1, 0, 1], [5], loads=[20, 0, 20]))
    assert reps == [0]


def test_jsq_fewest_requests_in_flight():
    # inflight (2, 0, 1): → g1 (0) → (2, 1, 1) → g1 again (1, lowest index among 1, 1)
    _, reps, _ = _tick("jsq", _view([3, 3, 3], [9, 9], inflight=[2, 0, 1], loads=[0, 999, 999]))
    assert reps == [1, 1]


def test_fifo_head_that_fits_nowhere_blocks_the_queue():
    # KV room (5, 100): the head (prompt 200) fits nowhere → nothing is placed this tick, even
    # though the request behind it (prompt 3) would fit (first come, first served)
    for name in ("rr", "jsq", "p2c", "random", "jsq-tokens"):
        pos, reps, _ = _tick(name, _view([2, 2], [200, 3], kv_free=[5, 100]))
        assert pos == [] and reps == [], name


def _p2c_law(inflight):
    """P(replica g) for one decision: a uniformly drawn pair, the lesser loaded wins, a tie goes
    to either with probability 1/2."""
    G = len(inflight)
    p = np.zeros(G)
    for a, b in combinations(range(G), 2):
        w = 1.0 / (G * (G - 1) / 2)
        if inflight[a] == inflight[b]:
            p[a] += w / 2
            p[b] += w / 2
        else:
            p[a if inflight[a] < inflight[b] else b] += w
    return p


@pytest.mark.parametrize("inflight", [[4, 0, 2, 3, 1], [1, 1, 0, 3, 1]])
def test_p2c_follows_the_exact_choice_law(inflight):
    # one decision per draw on the same view: the frequencies must match the law computed from
    # the loads (chi-square); a router that took the worse of the two, or always the first
    # drawn, has another law and fails (checked below on the same counts' scale)
    r = make_router("p2c", "replicas")
    v = _view([9] * 5, [1], inflight=inflight)
    rng = np.random.default_rng(2024)
    n = 6000
    picks = np.array([r.route((), v, rng)[0] for _ in range(n)])
    law = _p2c_law(inflight)
    counts = np.bincount(picks, minlength=5)
    nz = law > 0
    assert counts[~nz].sum() == 0
    assert sps.chisquare(counts[nz], law[nz] * n).pvalue > 1e-3
    worse = _p2c_law([-x for x in inflight])  # "the more loaded wins": far from what we see
    assert np.abs(counts / n - worse).max() > 0.1


def test_p2c_with_one_eligible_replica_takes_it():
    _, reps, _ = _tick("p2c", _view([0, 0, 3, 0], [1, 1, 1]))
    assert reps == [2, 2, 2]


def test_random_router_is_uniform_over_replicas_with_a_free_slot():
    P = 6000
    _, reps, _ = _tick("random", _view([P] * 5, [1] * P), seed=11)
    counts = np.bincount(reps, minlength=5)
    assert sps.chisquare(counts).pvalue > 0.01            # uniform over the 5 replicas
    assert counts.tolist() != [P // 5] * 5                 # not a deterministic rotation
    # replicas without a free slot are never drawn; uniform over the other three
    _, reps, _ = _tick("random", _view([0, P, 0, P, P], [1] * P), seed=11)
    counts = np.bincount(reps, minlength=5)
    assert counts[[0, 2]].tolist() == [0, 0]
    assert sps.chisquare(counts[[1, 3, 4]]).pvalue > 0.01
    # a skewed router would fail the same test (the check has power at this size)
    skew = np.array([1500, 1200, 1100, 1100, 1100])
    assert sps.chisquare(skew).pvalue < 1e-6


def _trace(n=60, seed=3):
    rng = np.random.default_rng(seed)
    return trace_from_arrays(np.zeros(n), rng.integers(1, 300, n), rng.integers(1, 30, n))


@pytest.mark.parametrize("name", ["random", "p2c"])
def test_seeded_runs_are_reproducible_and_the_seed_matters(name):
    tr = _trace()
    router = make_router(name, "replicas")
    runs = [simulate_decode(tr, router, replicas=4, slots=3, window=8, seed=5) for _ in range(2)]
    assert np.array_equal(runs[0].replica, runs[1].replica)
    assert np.array_equal(runs[0].start_step, runs[1].start_step)
    other = simulate_decode(tr, router, replicas=4, slots=3, window=8, seed=6)
    assert not np.array_equal(runs[0].replica, other.replica)


def test_bad_seed_and_options():
    tr = _trace()
    r = make_router("random", "replicas")
    for seed in (-1, 1.5, "abc", True):
        with pytest.raises(ParameterError, match="seed must be an integer"):
            simulate_decode(tr, r, replicas=2, seed=seed)
    with pytest.raises(ParameterError, match="not both"):
        simulate_decode(tr, r, config=DecodeConfig(), replicas=99)
    with pytest.raises(ParameterError, match="unknown option"):
        simulate_decode(tr, r, replicas=2, bogus=1)
