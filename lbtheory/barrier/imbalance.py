"""Step-barrier imbalance calculator (THEORY §9.1).

In data-parallel decoding under tensor/expert parallelism every decode step ``k`` waits at a
collective
barrier for the most loaded replica. With loads ``L_g(k)`` (KV tokens in flight on replica ``g``;
[R] load model ``L_g = Σ_i (s_i + a_i(k))``, prompt plus tokens generated so far):

* bottleneck ``M(k) = max_g L_g(k)`` (tokens);
* margins ``m_g(k) = M(k) − L_g(k) ≥ 0`` (idle token-equivalents of replica ``g`` in step ``k``);
* imbalance ``I(k) = G·M(k) − Σ_g L_g(k) = Σ_g m_g(k)`` (tokens);
* barrier idle fraction ``I(k) / (G·M(k))`` (per step) and, aggregated over a run,
  ``Σ_k I(k) / Σ_k G·M(k)``: the share of the token-work capacity spent waiting;
* step time ``t(k) = a·M(k) + b`` (seconds; the paper's linear ``ax + b`` model), calibratable by
  least squares with :func:`calibrate_step_time`.

Functions accept a single load vector ``(G,)`` or a recorded load matrix ``(K, G)`` (one row
per step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError, ParameterError
from ..stats import percentile

__all__ = [
    "as_load_matrix", "bottleneck", "step_imbalance", "imbalance_from_totals", "margins",
    "idle_fraction",
    "run_idle_fraction", "StepTimeModel", "calibrate_step_time", "throughput",
    "tpot_per_request", "tpot_percentiles", "decode_latency",
]


def as_load_matrix(loads: np.ndarray) -> np.ndarray:
    """Loads as a float ``(K, G)`` matrix; a ``(G,)`` vector becomes one row.

    Raises:
        ModelError: not 1-D/2-D, zero replicas, negative or non-finite loads.
    """
    try:
        arr = np.asarray(loads, dtype=float) if np.asarray(loads).dtype.kind in "iuf" else None
    except (TypeError, ValueError, OverflowError):
        arr = None
    if arr is None:  # text, bools, dicts, ragged lists, ints beyond float
        raise ParameterError(f"loads must be numbers of tokens (an array of shape (G,) or "
                             f"(K, G)), got {loads!r:.80}")
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise ParameterError(f"loads must have shape (G,) or (K, G) with G >= 1, got "
                             f"{arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ParameterError("loads must be finite")
    if np.any(arr < 0):
        raise ParameterError(f"loads must be >= 0 tokens, got min {arr.min():g}")
    return arr


def _squeeze_like(out: np.ndarray, loads: np.ndarray) -> np.ndarray | float:
    return float(out[0]) if np.ndim(loads) == 1 else out


def bottleneck(loads: np.ndarray) -> np.ndarray | float:
    """``M(k) = max_g L_g(k)`` (tokens); a float for a ``(G,)`` input."""
    return _squeeze_like(as_load_matrix(loads).max(axis=1), loads)


def step_imbalance(loads: np.ndarray) -> np.ndarray | float:
    """``I(k) = G·M(k) − Σ_g L_g(k)`` (tokens).

    Example:
        >>> step_imbalance([10, 4, 7])     # 3·10 − 21
        9.0
    """
    arr = as_load_matrix(loads)
    out = imbalance_from_totals(arr.max(axis=1), arr.sum(axis=1), arr.shape[1])
    return _squeeze_like(out, loads)


def imbalance_from_totals(max_load: np.ndarray, sum_load: np.ndarray,
                          replicas: int) -> np.ndarray:
    """``I(k) = G·M(k) − Σ_g L_g(k)`` (tokens) from the per-step totals a simulator records.

    Args:
        max_load: ``M(k)`` per step (tokens).
        sum_load: ``Σ_g L_g(k)`` per step (tokens).
        replicas: ``G``.

    Example:
        >>> imbalance_from_totals([10.0], [21.0], 3).tolist()
        [9.0]
    """
    return replicas * np.asarray(max_load, dtype=float) - np.asarray(sum_load, dtype=float)


def margins(loads: np.ndarray) -> np.ndarray:
    """``m_g(k) = M(k) − L_g(k)`` (tokens), same shape as ``loads``."""
    arr = as_load_matrix(loads)
    out = arr.max(axis=1, keepdims=True) - arr
    return out[0] if np.ndim(loads) == 1 else out


def idle_fraction(loads: np.ndarray) -> np.ndarray | float:
    """Per-step barrier idle fraction ``I(k) / (G·M(k))`` (0 when ``M(k) = 0``)."""
    arr = as_load_matrix(loads)
    cap = arr.shape[1] * arr.max(axis=1)
    imb = imbalance_from_totals(arr.max(axis=1), arr.sum(axis=1), arr.shape[1])
    out = np.divide(imb, cap, out=np.zeros_like(imb), where=cap > 0)
    return _squeeze_like(out, loads)


def run_idle_fraction(max_load: np.ndarray, sum_load: np.ndarray, replicas: int) -> float:
    """Aggregate idle fraction ``Σ_k (G·M(k) − Σ_g L_g(k)) / Σ_k G·M(k)`` of a run.

    Args:
        max_load: ``M(k)`` per step (tokens).
        sum_load: ``Σ_g L_g(k)`` per step (tokens).
        replicas: ``G``.
    """
    cap = replicas * float(np.sum(max_load, dtype=float))
    imb = float(np.sum(imbalance_from_totals(max_load, sum_load, replicas)))
    return imb / cap if cap > 0 else 0.0


@dataclass(frozen=True)
class StepTimeModel:
    """Linear step-time model ``t = a·M + b`` (THEORY §9.1).

    Attributes:
        a_s_per_token: seconds per KV token of the bottleneck replica (≥ 0).
        b_s: fixed per-step time in seconds (> 0 unless ``a`` > 0).

    The defaults (1 µs/token, 20 ms) put a step near 60 ms at ~40k KV tokens per replica — the
    paper's ≈ 60 ms decode step; they are illustrative, not fitted to the paper's hardware.
    """

    a_s_per_token: float = 1e-6
    b_s: float = 0.02

    def __post_init__(self) -> None:
        a, b = float(self.a_s_per_token), float(self.b_s)
        if not (np.isfinite(a) and np.isfinite(b)) or a < 0 or b < 0 or a + b <= 0:
            raise ModelError(f"step-time model needs a >= 0, b >= 0, a + b > 0 "
                             f"(got a={self.a_s_per_token}, b={self.b_s})")

    def __call__(self, max_load: np.ndarray | float) -> np.ndarray | float:
        """Step time (s) at bottleneck load ``max_load`` (tokens); an array for array input.

        The simulator calls this once per decode step, so a plain ``int``/``float`` skips the
        numpy conversion.
        """
        x = max_load if isinstance(max_load, (int, float)) else np.asarray(max_load, dtype=float)
        return self.a_s_per_token * x + self.b_s


def calibrate_step_time(max_load: np.ndarray, step_time_s: np.ndarray) -> StepTimeModel:
    """Least-squares fit of ``t = a·M + b`` to measured (bottleneck load, step time) pairs.

    Args:
        max_load: ``M(k)`` per measured step (tokens).
        step_time_s: measured step times (s).

    Raises:
        ModelError: fewer than 2 distinct loads, mismatched lengths, non-finite values, or a fit
            with a negative coefficient (the model would not be a valid step time).
    """
    x = np.asarray(max_load, dtype=float).ravel()
    y = np.asarray(step_time_s, dtype=float).ravel()
    if x.shape != y.shape:
        raise ModelError(f"max_load and step_time_s differ in length ({x.size} vs {y.size})")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ModelError("calibration data must be finite")
    if np.unique(x).size < 2:
        raise ModelError("calibration needs at least 2 distinct bottleneck loads")
    design = np.column_stack([x, np.ones_like(x)])
    (a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
    if a < 0 or b < 0:
        raise ModelError(f"least-squares fit gives a={a:g} s/token, b={b:g} s; both must be >= 0")
    return StepTimeModel(float(a), float(b))


def throughput(generated_tokens: float, total_time_s: float) -> float:
    """Generated tokens per second (``nan`` for zero time)."""
    return float(generated_tokens) / total_time_s if total_time_s > 0 else float("nan")


def decode_latency(cum_time_s: np.ndarray, start_step: np.ndarray,
                   n_steps: np.ndarray) -> np.ndarray:
    """Decode latency of each request: the time of its decode steps (s).

    Args:
        cum_time_s: cumulative time before each step, length ``K + 1`` (``cum_time_s[0] = 0``).
        start_step: first decode step of each request.
        n_steps: decode steps of each request (≥ 1); the request ends after step
            ``start_step + n_steps − 1``.
    """
    start = np.asarray(start_step, dtype=np.int64)
    n = np.asarray(n_steps, dtype=np.int64)
    cum = np.asarray(cum_time_s, dtype=float)
    return cum[start + n] - cum[start]


def tpot_per_request(cum_time_s: np.ndarray, start_step: np.ndarray,
                     n_steps: np.ndarray) -> np.ndarray:
    """Time per output token of each request (s/token): :func:`decode_latency` over its
    ``n_steps`` (arguments as there)."""
    return decode_latency(cum_time_s, start_step, n_steps) / np.asarray(n_steps, dtype=np.int64)


def tpot_percentiles(tpot_s: np.ndarray, qs: tuple[float, ...] = (50.0, 95.0)) -> dict[str, float]:
    """TPOT percentiles in **milliseconds**, keyed ``tpot_p50`` etc."""
    return {f"tpot_p{q:g}": 1e3 * percentile(tpot_s, q) for q in qs}
