"""Experiment 7's oscillation measure, on the workloads (issue 25 item 8).

A routing-weight measure also counts weights that track noise, or drift along routings that give
the same workloads; what a user feels is the cells' workloads N_j(t). Per run, after the
warm-up, every cell's sampled workload series is high-passed — its centred moving average over
:data:`HIGHPASS_S` removed, so the slow changes that follow the arrival-rate path (60-s
intervals) do not count — and compared with Rand's on the same arrivals:

* ``workload_var_rel`` = Σ_j sd(Ñ_j) / Σ_j sd(Ñ_j^Rand): the fast workload variation relative
  to Rand's (1: no more than random routing's own; an oscillating router adds to it);
* ``peak_ratio`` and ``peak_period_s``: the largest ratio of the two Welch spectra
  Σ_j S_j(f) / Σ_j S_j^Rand(f) over periods in :data:`BAND_S`, and its period — an oscillation
  is a narrow peak, which the fluid model predicts near 2π/ω of its crossing root at η_crit.

The constants are [R], fixed before any experiment-7 run was looked at.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["workload_oscillation", "highpass", "HIGHPASS_S", "BAND_S", "SEGMENT_S"]

#: moving-average window removed from every workload series (s).
HIGHPASS_S = 30.0
#: periods (s) in which a spectral peak is looked for: up to the high-pass window's reach.
BAND_S = (0.4, 20.0)
#: Welch segment length (s): frequency resolution 1/60 Hz, ≈9 segments per 540 s.
SEGMENT_S = 60.0


def highpass(t: np.ndarray, N: np.ndarray, t_from: float) -> tuple[np.ndarray, float]:
    """(residuals (m, n), sample period s): the series N (samples × cells) on t ≥ ``t_from``
    minus its centred moving average over :data:`HIGHPASS_S` (only samples whose window fits)."""
    t = np.asarray(t, dtype=float)
    X = np.asarray(N, dtype=float)[t >= t_from]
    if t.size < 2 or X.shape[0] < 4:
        return np.zeros((0, X.shape[1] if X.ndim == 2 else 0)), math.nan
    dt = float(t[1] - t[0])
    w = max(1, int(round(HIGHPASS_S / dt)))
    if X.shape[0] <= w:
        return np.zeros((0, X.shape[1])), dt
    c = np.cumsum(np.vstack([np.zeros((1, X.shape[1])), X]), axis=0)
    ma = (c[w:] - c[:-w]) / w                     # mean of X[k : k + w]
    mid = X[w // 2: w // 2 + ma.shape[0]]
    return mid - ma, dt


def _spectrum(R: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    from scipy.signal import welch

    nper = min(R.shape[0], max(8, int(round(SEGMENT_S / dt))))
    f, P = welch(R, fs=1.0 / dt, nperseg=nper, axis=0, detrend="constant")
    return f, P.sum(axis=1)


def workload_oscillation(t: np.ndarray, N: np.ndarray, t_ref: np.ndarray, N_ref: np.ndarray,
                         *, t_from: float) -> dict[str, Any]:
    """The measures of the module docstring for a run (``t``, ``N``: sample times s, workloads
    samples × cells) against Rand's run on the same arrivals (``t_ref``, ``N_ref``, the same
    sampling); None where a series is too short. ``workload_sd`` is Σ_j sd(Ñ_j) (requests)."""
    R, dt = highpass(t, N, t_from)
    R0, dt0 = highpass(t_ref, N_ref, t_from)
    m = min(R.shape[0], R0.shape[0])
    none = {"workload_var_rel": None, "workload_sd": None, "peak_ratio": None,
            "peak_period_s": None}
    if m < 16 or not math.isclose(dt, dt0, rel_tol=1e-9):
        return none
    R, R0 = R[:m], R0[:m]
    sd, sd0 = float(R.std(axis=0).sum()), float(R0.std(axis=0).sum())
    f, P = _spectrum(R, dt)
    _, P0 = _spectrum(R0, dt)
    band = (f >= 1.0 / BAND_S[1]) & (f <= 1.0 / BAND_S[0]) & (P0 > 0)
    out = dict(none, workload_sd=sd, workload_var_rel=sd / sd0 if sd0 > 0 else None)
    if band.any():
        ratio = np.where(band, P / np.where(P0 > 0, P0, 1.0), -np.inf)
        k = int(np.argmax(ratio))
        out.update(peak_ratio=float(ratio[k]), peak_period_s=float(1.0 / f[k]))
    return out
