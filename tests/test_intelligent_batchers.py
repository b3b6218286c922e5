"""The instance batchers of Knowl 6 (:class:`~lbtheory.intelligent.Admission`): least work left
and bin packing, beside FCFS and shortest prompt first. Oracles: admission sequences traced by
hand on one instance from the definitions (which requests each iteration batches, in order:
running first, then the ones admitted), with and without a preemption, on both engines; the two
engines bit for bit with predictions that differ from the true lengths."""

from __future__ import annotations

import numpy as np
import pytest

from lbtheory.errors import ParameterError
from lbtheory.intelligent import (
    Admission,
    ClusterConfig,
    IterationTimeModel,
    SizePartitionRouter,
    make_sim,
    run_router,
    simulate,
)
from lbtheory.intelligent._admission import admission_key
from lbtheory.registry import make_router
from lbtheory.workloads import workload_from_arrays

ENGINES = ["compiled", "reference"]
# base 10 ms, 1 ms per prefill token, 2 ms per decoding request, 0.1 ms per context token.
SIMPLE = IterationTimeModel(base_s=0.01, prefill_s_per_token=0.001, attention_s_per_token2=0.0,
                            decode_s_per_seq=0.002, context_s_per_token=0.0001)


def _batches(wl, admission, engine, pred=None, kv=100, n=None):
    """The request ids of each iteration (running, then admitted) on one instance."""
    cfg = ClusterConfig(n_instances=1, kv_budget_tokens=kv, max_batch=8,
                        max_prefill_tokens=1000, timing=SIMPLE, admission=admission)
    sim = make_sim(wl, cfg, pred, engine=engine, record=True)
    run_router(sim, make_router("rr", "instances"))
    assert sim.n_done == len(wl)
    return [list(ids) for _, _, _, ids in sim.iterations_log][:n]


# A (p 60, d 2), B (50, 1), C (30, 5), D (10, 1), all at t = 0, one instance, 100 KV tokens: an
# admission needs need + p + 1 <= 100 (need: the running requests' KV with their next token).
ABCD = workload_from_arrays([0.0] * 4, [60, 50, 30, 10], [2, 1, 5, 1])


@pytest.mark.parametrize("engine", ENGINES)
def test_fcfs_stops_at_the_first_request_that_does_not_fit(engine):
    # it1: A (61); B 61 + 51 > 100 stops. it2: A decodes (need 62), B still 113 > 100; A done.
    # it3: B 51, C 82, D 93. B, D done; C decodes to its 5th token (it4–it7).
    assert _batches(ABCD, "fcfs", engine) == [[0], [0], [1, 2, 3], [2], [2], [2], [2]]


@pytest.mark.parametrize("engine", ENGINES)
def test_bin_packing_first_fit_decreasing_by_hand(engine):
    # footprints p + d: A 62, B 51, C 35, D 11 -> order A, B, C, D (already).
    # it1: A 61; B 112 > 100 skipped; C 61 + 31 = 92 admitted; D 103 skipped.
    # it2: A, C decode (need 62 + 32 = 94); B 145, D 105 skipped; A done.
    # it3: C (need 33); B 84, D 95 admitted; B, D done. C emits its 3rd..5th token in it3..it5.
    assert _batches(ABCD, "bin-packing", engine) == [[0, 2], [0, 2], [2, 1, 3], [2], [2]]


@pytest.mark.parametrize("engine", ENGINES)
def test_least_work_left_by_hand(engine):
    # keys (predicted output, prompt, id): D (1, 10), B (1, 50), A (2, 60), C (5, 30).
    # it1: D 11, B 62; A 123 > 100 stops. B, D done. it2: A 61, C 92. it3: A, C; A done.
    # C: 2nd..5th token in it3..it6.
    assert _batches(ABCD, "lwl", engine) == [[3, 1], [0, 2], [0, 2], [2], [2], [2]]
    # the order follows the *predicted* output: A predicted 0 goes first, then D, C, B (9 each,
    # by prompt); it1: A 61, D 72, C 103 > 100 stops.
    assert _batches(ABCD, "lwl", engine, pred=np.array([0, 9, 9, 9]), n=1) == [[0, 3]]
    # shortest prompt first on the same requests: D 11, C 42, B 93; A 154 stops
    assert _batches(ABCD, "spf", engine, n=1) == [[3, 2, 1]]


# X (p 8, d 6) and Y (7, 6) at t = 0, Z (5, 12) at 20 ms; 20 KV tokens. it1 (X, Y: 17 tokens)
# takes 10 + 15 = 25 ms, so Z waits on the instance from it2 on.
XYZ = workload_from_arrays([0.0, 0.0, 0.02], [8, 7, 5], [6, 6, 12])


@pytest.mark.parametrize("engine", ENGINES)
def test_bin_packing_with_a_preemption_by_hand(engine):
    # footprints X 14, Y 13, Z 17. it1: X 9, Y 17. it2: need 10 + 9 = 19, Z 25 > 20 skipped.
    # it3: need 11 + 10 = 21 > 20 -> Y (the last admitted) preempted, queue [Y, Z]; no
    # admissions after a preemption. it4: need 12; Y (resumes first) 12 + 10 > 20 skipped,
    # Z 18 admitted. it5: need 13 + 7 = 20, Y skipped. it6: need 14 + 8 = 22 -> Z preempted
    # (queue [Z, Y]); X emits its 6th token and leaves. it7: Z 8, Y 18, both admitted.
    got = _batches(XYZ, "bin-packing", engine, kv=20, n=7)
    assert got == [[0, 1], [0, 1], [0], [0, 2], [0, 2], [0], [2, 1]]


@pytest.mark.parametrize("engine", ENGINES)
def test_least_work_left_with_a_preemption_by_hand(engine):
    # keys: Y (6, 7) before X (6, 8). it1: Y 8, X 17. it2: need 19; Z 25 > 20 stops.
    # it3: need 21 -> X preempted, queue [X, Z]. it4..it6: X (resumes first: 8 + 2 tokens, 11
    # blocks) does not fit beside Y (need 11..13) and stops the admissions — Z is not tried;
    # Y leaves after it6. it7: X 11, Z 17.
    got = _batches(XYZ, "lwl", engine, kv=20, n=7)
    assert got == [[1, 0], [1, 0], [1], [1], [1], [1], [0, 2]]


def test_admission_keys_and_names():
    assert [a.value for a in Admission] == ["fcfs", "spf", "lwl", "bin-packing"]
    assert admission_key(Admission.LWL, 30, 5, 2) < admission_key(Admission.LWL, 10, 6, 1)
    assert admission_key(Admission.BIN_PACKING, 60, 2, 0) < admission_key(
        Admission.BIN_PACKING, 50, 1, 1)
    with pytest.raises(ParameterError, match="ClusterConfig.admission"):
        ClusterConfig(admission="least-work")


def _noisy(seed: int, n: int = 250):
    rng = np.random.default_rng(seed)
    arr = np.sort(rng.uniform(0, 5.0, n))
    wl = workload_from_arrays(arr, rng.integers(0, 700, n), rng.integers(1, 260, n))
    pred = np.maximum(wl.output_tokens + rng.integers(-120, 120, n), 0)
    return wl, pred


CLUSTERS = {
    "kv-limited": dict(n_instances=3, kv_budget_tokens=1000, max_batch=32),
    "prefill-limited": dict(n_instances=2, kv_budget_tokens=4000, max_batch=6,
                            max_prefill_tokens=700),
    "chunked": dict(n_instances=2, kv_budget_tokens=1500, max_batch=16, max_prefill_tokens=200,
                    chunked_prefill=True),
    "vllm": dict(n_instances=3, kv_budget_tokens=2048, max_batch=24, block_tokens=16,
                 watermark=0.01, prefill_priority=True),
}


@pytest.mark.parametrize("cluster", list(CLUSTERS))
@pytest.mark.parametrize("admission", ["lwl", "bin-packing"])
@pytest.mark.parametrize("router", ["rr", "jsq-tokens", "small-large"])
def test_engines_agree_with_predictions_that_are_not_the_truth(cluster, admission, router):
    wl, pred = _noisy(len(cluster))
    cfg = ClusterConfig(admission=admission, **CLUSTERS[cluster])
    ref, out = (simulate(wl, make_router(router, "instances"), cfg, predicted_output=pred,
                         engine=e) for e in ("reference", "compiled"))
    for f in ("dispatch_s", "admit_s", "first_token_s", "finish_s", "tbt_mean_s",
              "generated_tokens", "preempted", "recomputed_tokens", "instance", "iterations"):
        x, y = getattr(ref, f), getattr(out, f)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), f
    assert ref.completed == len(wl)
    if cluster != "prefill-limited":
        assert ref.preempted.sum() > 0


@pytest.mark.parametrize("engine", ENGINES)
def test_small_large_on_the_predicted_output_by_hand(engine):
    # size = predicted output; threshold 100: outputs 50, 20 small -> instances 0, 1 of the
    # small half (two halves of 4 instances: {0, 1} small, {2, 3} large) by round robin;
    # 300, 150, 400 large -> 2, 3, 2. By prompt + output (the default) only request 2
    # (10 + 20) is small: 950, 310 -> 2, 3; 30 -> 0; 160, 410 -> 2, 3.
    wl = workload_from_arrays([0.0, 0.0, 0.0, 0.0, 0.0], [900, 10, 10, 10, 10],
                              [50, 300, 20, 150, 400])
    cfg = ClusterConfig(n_instances=4, kv_budget_tokens=4000, timing=SIMPLE)

    out = simulate(wl, SizePartitionRouter(100, size="output"), cfg, engine=engine)
    assert out.instance.tolist() == [0, 2, 1, 3, 2]
    total = simulate(wl, SizePartitionRouter(100), cfg, engine=engine)
    assert total.instance.tolist() == [2, 3, 0, 2, 3]
    with pytest.raises(ParameterError, match="SizePartitionRouter.size"):
        SizePartitionRouter(100, size="prompt")


def test_knowl6_workload_orders_and_classes():
    from lbtheory.intelligent._knowl6 import ORDERS, knowl6_cluster, knowl6_workload

    w = {o: knowl6_workload(o, seed=3) for o in ORDERS}
    lh, hl = w["lh-then-hl"], w["hl-then-lh"]
    assert lh.task_names == ("LL", "LH", "HL", "HH") and len(lh) == 3000
    assert lh.task[:1500].tolist() == [1] * 1500 and lh.task[1500:].tolist() == [2] * 1500
    assert hl.task[:1500].tolist() == [2] * 1500
    # orders 1, 3, 4: the same requests at the same arrival times, in another class order
    rows = {o: sorted(zip(w[o].task.tolist(), w[o].prompt_tokens.tolist(),
                          w[o].output_tokens.tolist())) for o in ("lh-hl-random", "lh-then-hl",
                                                                  "hl-then-lh")}
    assert rows["lh-hl-random"] == rows["lh-then-hl"] == rows["hl-then-lh"]
    assert np.array_equal(lh.arrival_s, hl.arrival_s)
    assert np.array_equal(lh.arrival_s, w["lh-hl-random"].arrival_s)
    mixed = w["lh-hl-random"].task
    assert 0.3 < np.mean(mixed[:1500] == 1) < 0.7  # shuffled, not blocks
    assert np.bincount(w["four-random"].task).tolist() == [750] * 4
    # light: median 100, at most 250; heavy: median 1,500, at most 2,000 (sample medians of
    # 1,500 lognormal draws: within a few %)
    p, d = lh.prompt_tokens[:1500], lh.output_tokens[:1500]
    assert p.max() <= 250 and d.max() <= 2000 and d.min() > 250
    assert abs(np.median(p) / 100 - 1) < 0.06 and abs(np.median(d) / 1500 - 1) < 0.03
    # Poisson at 20 req/s: 3,000 arrivals in ≈ 150 s
    assert lh.arrival_s[0] == 0.0 and 140 < lh.arrival_s[-1] < 160
    cfg = knowl6_cluster("lwl")
    assert (cfg.n_instances, cfg.block_tokens, cfg.admission) == (2, 16, Admission.LWL)
    for bad, match in ((dict(order="lh"), "order"), (dict(n_requests=10), "multiple of 4"),
                       (dict(rate_rps=0.0), "rate_rps")):
        kw = {"order": "lh-then-hl", "seed": 0} | bad
        with pytest.raises(ParameterError, match=match):
            knowl6_workload(**kw)
