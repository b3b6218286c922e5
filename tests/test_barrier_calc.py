"""Step-imbalance calculator and the shared metrics, against hand-computed numbers."""

from __future__ import annotations

import numpy as np
import pytest

from lbtheory.barrier import (
    StepTimeModel,
    bottleneck,
    calibrate_step_time,
    idle_fraction,
    imbalance_from_totals,
    margins,
    run_idle_fraction,
    step_imbalance,
    throughput,
    tpot_per_request,
    tpot_percentiles,
)
from lbtheory.errors import ModelError
from lbtheory.stats import percentile, percentiles, ratio, summarize


def test_hand_computed_imbalance_vector():
    L = [10, 4, 7]
    assert bottleneck(L) == 10
    assert step_imbalance(L) == 9.0               # 3·10 − 21
    assert margins(L).tolist() == [0.0, 6.0, 3.0]  # sums to I
    assert idle_fraction(L) == pytest.approx(9 / 30)


def test_load_matrix_rows():
    L = np.array([[1, 1, 1, 1], [4, 0, 0, 0], [0, 0, 0, 0]])
    assert step_imbalance(L).tolist() == [0.0, 12.0, 0.0]
    assert idle_fraction(L).tolist() == [0.0, 0.75, 0.0]
    M = L.max(axis=1)
    assert run_idle_fraction(M, L.sum(axis=1), 4) == pytest.approx(12 / 20)
    # the totals form the simulator records: G·M − ΣL = 4·(1, 4, 0) − (4, 4, 0)
    assert imbalance_from_totals(M, L.sum(axis=1), 4).tolist() == [0.0, 12.0, 0.0]


def test_step_time_model_scalar_int_and_array():
    m = StepTimeModel(1e-3, 0.5)
    assert m(11) == pytest.approx(0.511) and m(11.0) == pytest.approx(0.511)  # 1e-3·11 + 0.5
    assert m(np.int64(10)) == pytest.approx(0.51)
    assert np.asarray(m([10, 11])).tolist() == pytest.approx([0.51, 0.511])


def test_bad_loads():
    with pytest.raises(ModelError, match="loads must be >= 0 tokens"):
        step_imbalance([1, -1])
    with pytest.raises(ModelError, match=r"loads must have shape \(G,\) or \(K, G\)"):
        step_imbalance(np.zeros((2, 2, 2)))
    with pytest.raises(ModelError, match="loads must be finite"):
        step_imbalance([1, np.inf])


def test_step_time_calibration_recovers_line():
    M = np.array([1e4, 2e4, 3e4, 5e4])
    model = calibrate_step_time(M, 2e-6 * M + 0.015)
    assert model.a_s_per_token == pytest.approx(2e-6) and model.b_s == pytest.approx(0.015)
    assert model(1e4) == pytest.approx(0.035)
    assert np.allclose(model(M), 2e-6 * M + 0.015)


def test_step_time_errors():
    with pytest.raises(ModelError, match="at least 2 distinct bottleneck loads"):
        calibrate_step_time([5, 5], [1, 1])
    with pytest.raises(ModelError, match="differ in length"):
        calibrate_step_time([1, 2], [1])
    with pytest.raises(ModelError, match="both must be >= 0"):
        calibrate_step_time([1, 2], [2, 1])
    with pytest.raises(ModelError, match="calibration data must be finite"):
        calibrate_step_time([1, np.nan], [1, 2])
    with pytest.raises(ModelError, match="step-time model needs a >= 0"):
        StepTimeModel(-1.0, 0.1)


def test_throughput_and_tpot():
    assert throughput(100, 4.0) == 25.0
    assert np.isnan(throughput(1, 0.0))
    cum = np.array([0.0, 1.0, 3.0, 6.0])           # step times 1, 2, 3
    tp = tpot_per_request(cum, np.array([0, 1]), np.array([3, 1]))
    assert tp.tolist() == [2.0, 2.0]
    assert tpot_percentiles(np.array([0.01, 0.03]), (50.0,)) == {"tpot_p50": pytest.approx(20.0)}


def test_metrics_hand_values():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4, 5], 100) == 5
    assert np.isnan(percentile([], 50))
    assert percentiles([0, 10], (25, 99.9)) == {"p25": 2.5, "p99.9": pytest.approx(9.99)}
    s = summarize([1.0, 3.0])
    assert (s["count"], s["mean"], s["std"], s["min"], s["max"]) == (2, 2.0, 1.0, 1.0, 3.0)
    assert np.isnan(summarize([])["mean"])
    assert ratio(1, 4) == 0.25 and np.isnan(ratio(1, 0))
    with pytest.raises(ModelError, match=r"percentile q must be in \[0, 100\], got 101"):
        percentile([1], 101)
    with pytest.raises(ModelError, match="values must be finite; element 1 is nan"):
        percentile([1, np.nan], 5)
