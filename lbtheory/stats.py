"""Summary statistics: the one definition of percentiles and summaries used across lbtheory.

Every module that reports a percentile, a mean or a summary imports it from here, so that numbers
in results, the CLI and notebooks agree (STYLE.md: one definition of each thing).

Conventions:
    * ``q`` is a percentage in [0, 100].
    * Percentiles use linear interpolation between order statistics (numpy's default ``"linear"``
      method, i.e. type 7 of Hyndman & Fan).
    * Non-finite values are rejected (:class:`~lbtheory.errors.ModelError`); an empty input gives
      ``nan`` for every statistic except ``count``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from ._checks import check_real
from .errors import ParameterError, RunStatus

__all__ = ["percentile", "percentiles", "mean", "summarize", "ratio", "DEFAULT_QUANTILES",
           "median_wall_time", "mean_ci", "LATENCY_QUANTILES", "SUMMARY_KEYS", "latency_summary",
           "run_summary", "RunResult", "QueuedRunOutcomes", "goodput_latency",
           "GOODPUT_TIMEOUT_S"]

#: The latency a rejected request counts at in :func:`goodput_latency` (s) [R]: a client
#: deadline well above the tail the DLB paper reports (production p90 "between 1.5 and 3.0
#: seconds"; serving latencies "hundreds of milliseconds to seconds"): about 3× the top of it.
GOODPUT_TIMEOUT_S = 10.0

#: Percentiles reported by :func:`summarize` (percent).
DEFAULT_QUANTILES: tuple[float, ...] = (50.0, 95.0, 99.0)


def _as_array(values: Iterable[float] | np.ndarray, name: str = "values") -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    if arr.size and not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ParameterError(f"{name} must be finite; element {bad} is {arr[bad]}")
    return arr


def percentile(values: Iterable[float] | np.ndarray, q: float) -> float:
    """The ``q``-th percentile of ``values`` (linear interpolation; ``nan`` if empty).

    Args:
        values: samples (any units; the result has the same units).
        q: percentage in [0, 100].

    Example:
        >>> percentile([1, 2, 3, 4], 50)
        2.5
    """
    qf = check_real(q, "percentile q", low=0.0, high=100.0)
    arr = _as_array(values)
    if arr.size == 0:
        return float("nan")
    return float(np.percentile(arr, qf))


def percentiles(values: Iterable[float] | np.ndarray,
                qs: Sequence[float] = DEFAULT_QUANTILES) -> dict[str, float]:
    """Several percentiles at once, keyed ``"p50"``, ``"p95"``, ... (``"p99.9"`` for 99.9)."""
    arr = _as_array(values)
    out: dict[str, float] = {}
    for q in qs:
        qf = check_real(q, "percentile q", low=0.0, high=100.0)
        key = f"p{qf:g}"
        out[key] = float(np.percentile(arr, qf)) if arr.size else float("nan")
    return out


def mean(values: Iterable[float] | np.ndarray) -> float:
    """Arithmetic mean (``nan`` if empty)."""
    arr = _as_array(values)
    return float(arr.mean()) if arr.size else float("nan")


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, ``nan`` when the denominator is 0 (no ZeroDivisionError)."""
    den = float(denominator)
    return float(numerator) / den if den != 0.0 else float("nan")


def mean_ci(values: Iterable[float] | np.ndarray,
            level: float = 0.95) -> tuple[float, float, float]:
    """Mean and two-sided Student-t confidence interval ``(mean, low, high)`` of the mean.

    The interval is ``mean ± t_{(1+level)/2, n−1} · s/√n`` with ``s`` the sample standard
    deviation (ddof = 1); with fewer than two samples the bounds are ``nan`` (no interval can be
    estimated), with none the mean is ``nan`` too. Same units as ``values``.

    Example:
        >>> m, lo, hi = mean_ci([1.0, 2.0, 3.0])
        >>> (m, round(hi - m, 4))
        (2.0, 2.4841)
    """
    lv = check_real(level, "confidence level", low=0.0, high=1.0)
    arr = _as_array(values)
    if arr.size == 0:
        return float("nan"), float("nan"), float("nan")
    m = float(arr.mean())
    if arr.size < 2:
        return m, float("nan"), float("nan")
    from scipy.stats import t as student_t

    half = float(student_t.ppf(0.5 + lv / 2.0, arr.size - 1)) * float(arr.std(ddof=1)) \
        / float(np.sqrt(arr.size))
    return m, m - half, m + half


def summarize(values: Iterable[float] | np.ndarray,
              qs: Sequence[float] = DEFAULT_QUANTILES) -> dict[str, float]:
    """count, mean, std (population), min, max and the percentiles ``qs`` of ``values``.

    Example:
        >>> summarize([1.0, 3.0])["mean"]
        2.0
    """
    arr = _as_array(values)
    out: dict[str, float] = {"count": float(arr.size)}
    if arr.size == 0:
        out.update(mean=float("nan"), std=float("nan"), min=float("nan"), max=float("nan"))
    else:
        out.update(mean=float(arr.mean()), std=float(arr.std()), min=float(arr.min()),
                   max=float(arr.max()))
    out.update(percentiles(arr, qs))
    return out


def median_wall_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Median wall-clock seconds of ``repeats`` calls of ``fn`` and the last call's result
    (benchmarks report medians: machines are noisy)."""
    import statistics
    import time

    times, out = [], None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


# ----------------------------------------------------------------------------- run results
#: Latency percentiles every simulator's ``summary()`` reports (percent).
LATENCY_QUANTILES: tuple[float, ...] = (50.0, 90.0, 99.0)
#: The keys every simulator's ``summary()`` has (each adds its own).
SUMMARY_KEYS: tuple[str, ...] = ("requests", "completed", "errors", "status", "latency")


def latency_summary(latency_s: Iterable[float] | np.ndarray) -> dict[str, float]:
    """``{"mean", "p50", "p90", "p99"}`` of the latencies of completed requests (s; ``nan``
    when there are none)."""
    out = {"mean": mean(latency_s)}
    out.update(percentiles(latency_s, LATENCY_QUANTILES))
    return out


def goodput_latency(latency_s: Iterable[float] | np.ndarray, errors: int,
                    timeout_s: float = GOODPUT_TIMEOUT_S) -> dict[str, float]:
    """Goodput-aware latency: the completed requests' latencies (s) with every rejected request
    counted at ``timeout_s`` (the client waits out its deadline), so a policy cannot look fast
    by dropping. ``mean`` = (Σ latency + errors·timeout) / (completed + errors); ``p90`` the
    90th percentile of that pooled sample; ``timeout_s`` as given (nan statistics when empty)."""
    t = check_real(timeout_s, "goodput_latency timeout_s", unit="s", low=0.0, low_open=True)
    e = int(errors)
    if e < 0:
        raise ParameterError(f"goodput_latency errors must be ≥ 0, got {errors}")
    lat = _as_array(latency_s, "latency_s")
    pooled = np.concatenate([lat, np.full(e, t)])
    if not pooled.size:
        return {"mean": float("nan"), "p90": float("nan"), "timeout_s": t}
    return {"mean": float(pooled.sum() / pooled.size), "p90": float(np.percentile(pooled, 90.0)),
            "timeout_s": t}


def run_summary(*, requests: int, completed: int, errors: int, status: RunStatus,
                latency_s: Iterable[float] | np.ndarray) -> dict[str, Any]:
    """The common head of a simulator result's ``summary()`` (:data:`SUMMARY_KEYS`): requests
    of the run, completed, errors (rejected), the :class:`~lbtheory.errors.RunStatus` value and
    :func:`latency_summary` of the completed requests' latencies (s)."""
    return {"requests": int(requests), "completed": int(completed), "errors": int(errors),
            "status": RunStatus(status).value, "latency": latency_summary(latency_s)}


class QueuedRunOutcomes:
    """Mixin of the results whose simulator queues every request (instances, decode replicas):
    from the subclass's ``done`` mask (workload order) the per-request ``outcome`` (completed or
    unfinished), ``completed`` and ``errors`` (always 0: nothing is rejected)."""

    done: np.ndarray

    @property
    def outcome(self) -> np.ndarray:
        """:class:`~lbtheory.errors.RequestOutcome` code of each request (``int8``): completed
        or unfinished (never started, or still running when the run stopped)."""
        from .errors import RequestOutcome

        return np.where(self.done, RequestOutcome.COMPLETED,
                        RequestOutcome.UNFINISHED).astype(np.int8)

    @property
    def completed(self) -> int:
        """Requests that finished."""
        return int(np.sum(self.done))

    @property
    def errors(self) -> int:
        """Rejected requests: always 0 (a request waits until it can be served)."""
        return 0


class RunResult(Protocol):
    """What the three simulators' results share (:class:`~lbtheory.sim.SimResult`,
    :class:`~lbtheory.intelligent.InstanceResult`, :class:`~lbtheory.barrier.DecodeResult`).

    Per-request arrays are in **workload order**: index ``k`` is the ``k``-th request of the
    workload (arrival order); ``outcome[k]`` is its :class:`~lbtheory.errors.RequestOutcome`
    and ``latency_s[k]`` its latency (s), NaN unless it completed.
    """

    policy: str
    status: RunStatus

    @property
    def outcome(self) -> np.ndarray: ...

    @property
    def latency_s(self) -> np.ndarray: ...

    def summary(self) -> dict[str, Any]: ...
