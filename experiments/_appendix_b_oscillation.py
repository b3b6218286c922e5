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
import statistics
from typing import Any

import numpy as np

__all__ = ["workload_oscillation", "highpass", "eta_section", "HIGHPASS_S", "BAND_S",
           "SEGMENT_S", "ONSET_JUMP", "ONSET_FLAT", "PERIOD_TOL"]

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


#: experiment 7's rule (fixed before the run): the fluid bound predicts the onset of
#: oscillation when the median spectral peak ratio at the first factor above 1 is ≥ ONSET_JUMP ×
#: the one at the last factor below 1, and the latter ≤ ONSET_FLAT × the one at the smallest
#: factor; the oscillation is the fluid one when, above 1, the median of peak period / fluid
#: period lies in [1/PERIOD_TOL, PERIOD_TOL].
ONSET_JUMP, ONSET_FLAT, PERIOD_TOL = 2.0, 1.5, 1.5


def _med(vals: list) -> float:
    v = [x for x in vals if x is not None]
    return statistics.median(v) if v else float("nan")


def eta_section(s: dict | None) -> list[str]:
    """The markdown lines of claims.md's experiment-7 section (issue-25 design: spectral peaks
    against the fluid bound) from ``appendix-b-eta/summary.json`` (None: not run)."""
    if not s:
        return ["Experiment 7 not run (no summary)."]
    intro = [
        "Flow routers (no error aversion) with η = factor × η_crit, η_crit the exact critical "
        "stepsize of each scenario's fluid model linearised at its equilibrium, with the probe "
        "period in the feedback delay (τ + δ/2; `lbtheory.stability.critical_stepsize`), vs the "
        "default rule (η = per-cost constant / (mean one-way delay + δ/2)). **The fluid η_crit "
        "ignores request-level randomness** (Poisson arrivals, random service times): it bounds "
        "the mean dynamics only, so the simulated cluster's workloads fluctuate at every "
        "stepsize. Oscillation is measured on the workloads, against Rand's on the same "
        "arrivals: workload variation = Σ_j sd of N_j(t) high-passed (30-s moving average "
        "removed) relative to Rand's; spectral peak = the largest ratio of the two Welch spectra "
        "over periods 0.4–20 s, and its period against the fluid model's 2π/ω at η_crit.", ""]
    pts = s["points"]
    lines = ["| flow policy | stepsize | runs | η/η_crit (median) | workload variation / Rand "
             "(median) | spectral peak / Rand (median) | peak period / fluid period (median) "
             "| mean latency / Rand's (median) |", "|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for pol in sorted({p["policy"] for p in pts}):
        med: dict[str, float] = {}
        for rule in sorted({p["rule"] for p in pts if p["policy"] == pol},
                           key=lambda r: (r == "dlb", float(r) if r != "dlb" else 0)):
            q = [p for p in pts if p["policy"] == pol and p["rule"] == rule]
            med[rule] = _med([p["peak_ratio"] for p in q])
            per = _med([p["peak_period_s"] / p["fluid_period_s"] for p in q
                        if p["peak_period_s"] and p["fluid_period_s"]])
            lines.append(f"| {pol} | {'default rule' if rule == 'dlb' else rule + ' η_crit'} | "
                         f"{len(q)} | {_med([p['eta_over_crit'] for p in q]):.3g} | "
                         f"{_med([p['workload_var_rel'] for p in q]):.3g} | {med[rule]:.3g} | "
                         f"{per:.3g} | {_med([p['mean_norm'] for p in q]):.3g} |")
        below = [float(r) for r in med if r != "dlb" and float(r) < 1]
        above = [float(r) for r in med if r != "dlb" and float(r) > 1]
        if below and above:
            b_hi, a_lo, b_lo = max(below), min(above), min(below)
            jump = med[f"{a_lo:g}"] >= ONSET_JUMP * med[f"{b_hi:g}"]
            flat = med[f"{b_hi:g}"] <= ONSET_FLAT * med[f"{b_lo:g}"]
            per = _med([p["peak_period_s"] / p["fluid_period_s"] for p in pts
                        if p["policy"] == pol and p["rule"] != "dlb" and float(p["rule"]) > 1
                        and p["peak_period_s"] and p["fluid_period_s"]])
            same = 1 / PERIOD_TOL <= per <= PERIOD_TOL
            verdicts.append(
                f"{pol}: spectral peak ×{med[f'{a_lo:g}'] / med[f'{b_hi:g}']:.2g} from {b_hi:g} "
                f"to {a_lo:g} η_crit, ×{med[f'{b_hi:g}'] / med[f'{b_lo:g}']:.2g} from {b_lo:g} to "
                f"{b_hi:g}; peak period / fluid period above η_crit {per:.2g} → the fluid bound "
                f"{'predicts' if jump and flat else 'does not clearly predict'} the onset"
                f"{' at the fluid period' if jump and flat and same else ''}")
    none = sum(1 for c in s.get("eta_crit", []) for v in c.values()
               if isinstance(v, dict) and v.get("eta_crit") is None)
    return [*intro, *lines, "",
            f"Rule (fixed in advance): the bound predicts the onset when the median "
                    f"spectral peak ratio at the first factor above 1 is ≥ {ONSET_JUMP:g}× the one "
                    f"at the last factor below 1, and the latter is ≤ {ONSET_FLAT:g}× the one at "
                    f"the smallest factor; 'at the fluid period' when above 1 the median peak "
                    f"period is within a factor {PERIOD_TOL:g} of the fluid model's 2π/ω.",
                    *[f"* {v}" for v in verdicts],
                    f"* scenario × cost pairs without a finite η_crit (skipped): {none}"]
