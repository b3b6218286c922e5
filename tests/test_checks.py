"""lbtheory._checks: the one scalar/option validator, against hand-written messages and bounds."""

from __future__ import annotations

import dataclasses
import enum
import re

import numpy as np
import pytest

from lbtheory._checks import check_fields, check_option, check_real, check_reals, range_text
from lbtheory.errors import LBTheoryError, ModelError, StepsizeError, TopologyError


def _full(msg: str) -> str:
    return "^" + re.escape(msg) + "$"


def test_accepts_and_returns_float_at_the_bounds():
    assert check_real(3, "K", low=0.0, low_open=True) == 3.0
    assert type(check_real(3, "K", low=0.0, low_open=True)) is float
    assert check_real(0, "knee", low=0.0) == 0.0                      # closed bound
    assert check_real(100, "percentile q", low=0.0, high=100.0) == 100.0
    assert check_real(np.float32(0.5), "g", low=0.0, high=1.0) == 0.5
    assert check_real(-7.5, "x") == -7.5                               # unbounded: finite only


@pytest.mark.parametrize("value, kwargs, message", [
    (0, dict(low=0.0, low_open=True, unit="req/s"),
     "K must be positive, got 0 (K: expected a positive finite number of req/s)"),
    (-1e-12, dict(low=0.0), "K must be non-negative, got -1e-12 (K: expected a non-negative "
                            "finite number)"),
    (101, dict(low=0.0, high=100.0),
     "K must be in [0, 100], got 101 (K: expected a finite number in [0, 100])"),
    (1.0, dict(low=0.0, high=1.0, high_open=True),
     "K must be in [0, 1), got 1.0 (K: expected a finite number in [0, 1))"),
    (1, dict(low=1.0, low_open=True), "K must be > 1, got 1 (K: expected a finite number > 1)"),
    (6, dict(high=5.0), "K must be <= 5, got 6 (K: expected a finite number <= 5)"),
    (float("inf"), dict(low=0.0, low_open=True, unit="s"),
     "K must be finite and positive, got inf (K: expected a positive finite number of s)"),
    (float("nan"), {}, "K must be finite, got nan (K: expected a finite number)"),
    ("x", dict(low=0.0, low_open=True, unit="seconds"),
     "K must be a real number (positive), got 'x' (K: expected a positive number of seconds)"),
    (True, {}, "K must be a real number, got True (K: expected a number)"),
    (np.array([1.0]), {}, "K must be a real number, got array([1.]) (K: expected a number)"),
])
def test_rejections_name_parameter_range_and_unit(value, kwargs, message):
    with pytest.raises(ModelError, match=_full(message)):
        check_real(value, "K", **kwargs)


def test_error_type_is_the_callers():
    with pytest.raises(TopologyError, match="delay must be non-negative"):
        check_real(-0.5, "delay", low=0.0, error=TopologyError)
    with pytest.raises(StepsizeError, match="stepsize: expected a positive finite number"):
        check_real(-1.0, "stepsize", low=0.0, low_open=True, error=StepsizeError)
    with pytest.raises(LBTheoryError):
        check_real(-1.0, "stepsize", low=0.0, low_open=True, error=StepsizeError)


def test_range_text():
    assert range_text() == "finite"
    assert range_text(0.0, low_open=True) == "positive"
    assert range_text(0.0) == "non-negative"
    assert range_text(2.5) == ">= 2.5" and range_text(2.5, low_open=True) == "> 2.5"
    assert range_text(None, 3.0, high_open=True) == "< 3"
    assert range_text(0.0, 1.0, low_open=True) == "in (0, 1]"


def test_check_reals_elementwise():
    out = check_reals([1.0, 2.0], "mu", low=0.0, low_open=True)
    assert out.tolist() == [1.0, 2.0] and out.dtype == float
    with pytest.raises(ModelError, match=r"mu must be positive, got \[1.0, 0.0\]"):
        check_reals([1.0, 0.0], "mu", low=0.0, low_open=True)
    with pytest.raises(ModelError, match="mu must be finite and non-negative"):
        check_reals(np.array([1.0, np.nan]), "mu", low=0.0)
    with pytest.raises(ModelError, match=r"mu must be a real number \(positive\)"):
        check_reals(["a"], "mu", low=0.0, low_open=True)


def test_check_fields():
    @dataclasses.dataclass(frozen=True)
    class Arc:
        a: object
        scale: object

    check_fields("Arc", Arc(0.0, [1.0, 2.0]), {"a": "non-negative", "scale": "positive"})
    with pytest.raises(ModelError, match=r"^Arc.scale must be positive, got \[1.0, 0.0\]"):
        check_fields("Arc", Arc(0.0, [1.0, 0.0]), {"a": "non-negative", "scale": "positive"})
    with pytest.raises(ModelError, match=r"^Arc.a must be finite, got nan"):
        check_fields("Arc", Arc(float("nan"), 1.0), {"a": "finite", "scale": "positive"})


class _Two(enum.StrEnum):
    A = "a"
    B = "b"


class _Three(enum.StrEnum):
    X = "x"
    Y = "y"
    Z = "z"


def test_check_option():
    assert check_option(_Two, "a", "mode") is _Two.A
    assert check_option(_Two, _Two.B, "mode") is _Two.B
    with pytest.raises(ModelError, match=_full("mode must be 'a' or 'b', got 'c'")):
        check_option(_Two, "c", "mode")
    with pytest.raises(TopologyError, match=_full("axis must be one of 'x', 'y', 'z', got 3")):
        check_option(_Three, 3, "axis", error=TopologyError)
