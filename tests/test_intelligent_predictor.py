"""Output-length predictor: buckets, features and held-out accuracy on hand-built data."""

from __future__ import annotations

import numpy as np
import pytest

from lbtheory.errors import ModelError
from lbtheory.intelligent import (
    BucketSpec,
    evaluate_length_predictor,
    fit_length_predictor,
    history_feature,
    mix_traces,
)
from lbtheory.workloads import trace_from_arrays


def test_time_and_equal_bucket_edges():
    # 0.5 / 2 / 4 s at 500 tokens/s = 250 / 1000 / 2000 tokens (THEORY §10)
    spec = BucketSpec("time", decode_tps=500.0)
    assert spec.bucket([0, 249, 250, 999, 1000, 1999, 2000, 9999]).tolist() == \
        [0, 0, 1, 1, 2, 2, 3, 3]
    eq = BucketSpec("equal", bucket_tokens=250, n_equal=4)
    assert eq.bucket([0, 249, 250, 500, 749, 750, 5000]).tolist() == [0, 0, 1, 2, 2, 3, 3]
    assert eq.n_buckets == 4
    with pytest.raises(ModelError, match="kind"):
        BucketSpec("log")


def test_history_feature_by_hand():
    b = np.array([0, 1, 2, 3, 4])
    k = np.array([0, 1, 0, 1, 0])
    assert history_feature(b, k, 1).tolist() == [-1, -1, 0, 1, 2]
    assert history_feature(b, k, 0).tolist() == [-1] * 5


def test_task_determines_bucket_perfect_accuracy_and_confusion_by_hand():
    # task 0: always 10 tokens (bucket 0); task 1: always 600 (bucket 1). 70 % of each task trains.
    k = np.array([0] * 60 + [1] * 40)
    o = np.where(k == 0, 10, 600)
    p = np.full(100, 128)
    rep = evaluate_length_predictor(p, k, o, train_fraction=0.7, history_lag=0)
    assert (rep.n_train, rep.n_test) == (42 + 28, 18 + 12)
    assert rep.accuracy == 1.0
    assert rep.baseline_accuracy == pytest.approx(18 / 30)  # majority (bucket 0) on the test set
    expect = np.zeros((4, 4), dtype=int)
    expect[0, 0], expect[1, 1] = 18, 12
    np.testing.assert_array_equal(rep.confusion, expect)


def test_prompt_bin_separates_short_and_long_and_backs_off():
    # one task: prompts < 256 tokens produce 20 output tokens, prompts >= 256 produce 1500.
    p = np.array([100] * 30 + [1000] * 30)
    o = np.where(p < 256, 20, 1500)
    k = np.zeros(60, dtype=int)
    model = fit_length_predictor(p, k, o, history_lag=0, min_count=5)
    b = model.predict_bucket(np.array([100, 1000, 5000]), np.zeros(3, int), np.full(3, -1))
    # 5000 tokens is an unseen prompt bin -> backs off to the task majority (a tie 30/30 -> the
    # lower bucket, 0)
    assert b.tolist() == [0, 2, 0]
    np.testing.assert_allclose(model.predict_tokens(np.array([0, 2]), np.zeros(2, int)),
                               [20.0, 1500.0])


def test_predicted_tokens_are_bucket_means_per_task():
    o = np.array([10, 20, 30, 700, 900])
    k = np.array([0, 0, 1, 1, 1])
    model = fit_length_predictor(np.full(5, 64), k, o, history_lag=0, min_count=1)
    np.testing.assert_allclose(model.predict_tokens(np.array([0, 0, 1]), np.array([0, 1, 1])),
                               [15.0, 30.0, 800.0])


def test_history_feature_helps_when_outputs_are_autocorrelated():
    # one task whose output length alternates in blocks of 50: the lag-1 bucket predicts the next
    rng = np.random.default_rng(0)
    blocks = np.repeat(rng.integers(0, 2, 40), 50)
    o = np.where(blocks == 1, 1500, 20)
    p = rng.integers(50, 60, o.size)
    k = np.zeros(o.size, dtype=int)
    with_h = evaluate_length_predictor(p, k, o, history_lag=1)
    without = evaluate_length_predictor(p, k, o, history_lag=0)
    assert without.accuracy == pytest.approx(without.baseline_accuracy)
    # wrong only at the block boundaries of the test set (at most 600/50 = 12 of 600)
    assert with_h.accuracy >= 1 - 12 / 600


def test_window_splits_traces_disjointly():
    tr = trace_from_arrays(np.arange(10.0), np.arange(1, 11), np.ones(10))
    a = mix_traces([tr], n_requests=5, seed=0, window=(0.0, 0.5))
    b = mix_traces([tr], n_requests=5, seed=0, window=(0.5, 1.0))
    assert a.prompt_tokens.tolist() == [1, 2, 3, 4, 5]
    assert b.prompt_tokens.tolist() == [6, 7, 8, 9, 10]
    with pytest.raises(ModelError, match="exceeds"):
        mix_traces([tr], n_requests=6, seed=0, window=(0.5, 1.0))
