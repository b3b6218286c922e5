"""Experiment 7 as a test of the linear theory (issue 36 item 4), on the sweep runner.

At each stepsize η = factor × η_crit the symmetric two-cell system of THEORY §7.5, scaled ×m on
``rate`` servers (constant rates), gets a step of its routing weights at a known time
(:mod:`_appendix_b_linear`); the transient's decay rate and frequency, fitted, stand beside the
rightmost root of the linearised fluid model built from the same service model. One cell = one
(factor, seed) run; the summary fits the mean response over seeds (the request noise averages
out, the response to the step does not) with a jackknife-over-seeds standard error, and keeps
the per-seed fits and the issue-25 workload-oscillation measures (against Rand on the same
arrivals, after the step).

Profiles: ``full`` (the committed run: m = 200, 4 seeds, 7 factors, 62 simulated s per run;
≈15 min on one core) and ``quick`` (CI: m = 20, 1 seed, 2 factors).
Run: ``python experiments/appendix_b_linear.py --profile full --scheduler serial``; the
summary is ``experiments/results/appendix-b-linear/summary.json`` and the figure
``paper_figures/appendix_b_linear.py``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from lbtheory.io import run_manifest, write_json_atomic
from lbtheory.stability import spectrum
from lbtheory.sweep import Experiment, script_main

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _appendix_b_linear as L  # noqa: E402

VERSION = "issue36"
#: per profile: scale m, seeds, stepsize factors (× η_crit), simulated seconds per run [R].
PROTOCOL: dict[str, dict[str, Any]] = {
    "full": {"scale": 200.0, "seeds": [0, 1, 2, 3],
             "factors": [0.1, 0.25, 0.5, 0.75, 0.9, 1.1, 1.5], "duration_s": 62.0},
    "quick": {"scale": 20.0, "seeds": [0], "factors": [0.5, 1.5], "duration_s": 45.0},
}


#: stepsize factors of the dense predicted curve in the summary (for the figure).
CURVE_FACTORS = [round(0.05 * k, 2) for k in range(1, 33)]


def grid(profile: str) -> list[dict]:
    """One config per (factor, seed)."""
    p = PROTOCOL[profile]
    return [{"scale": p["scale"], "factor": f, "seed": s, "duration_s": p["duration_s"],
             "t_step": L.T_STEP, "step": L.STEP, "cost": "gradient"}
            for f in p["factors"] for s in p["seeds"]]


def cell(cfg: dict) -> dict:
    """:func:`_appendix_b_linear.run_point` on the config."""
    return L.run_point(float(cfg["scale"]), float(cfg["factor"]), seed=int(cfg["seed"]),
                       duration_s=float(cfg["duration_s"]), t_step=float(cfg["t_step"]),
                       step=float(cfg["step"]), cost=str(cfg["cost"]))


def _none(v: Any) -> Any:
    """nan → None (JSON)."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _fit_mean(t: np.ndarray, Y: np.ndarray, Nn: np.ndarray, step: float) -> dict[str, dict]:
    """Fits of the mean weight and workload responses over the runs (rows of Y, Nn)."""
    y, n = Y.mean(axis=0), Nn.mean(axis=0)
    w = L.fit_window(t, y, 0.0, step)
    return {"weights": L.fit_damped(t[w], y[w]), "workloads": L.fit_damped(t[w], n[w])}


def summarise_point(results: list[dict]) -> dict[str, Any]:
    """One stepsize factor: the predicted root, the fit of the mean response over the runs with
    its jackknife standard error over runs, each run's own fit (refitted here, so every number
    comes from this code, whatever version fitted the cell) and oscillation measures."""
    r0 = results[0]
    m = min(len(r["series"]["t"]) for r in results)
    t = np.asarray(r0["series"]["t"][:m])
    Y = np.array([r["series"]["y"][:m] for r in results])
    Nn = np.array([r["series"]["n"][:m] for r in results])
    fit = _fit_mean(t, Y, Nn, r0["step"])
    k = len(results)
    for name in fit:
        for q in ("decay", "frequency"):
            fit[name][f"{q}_jackknife_se"] = None
        if k >= 3:   # leave one run out: SE = √((k−1)/k Σ (θ_i − θ̄)²)
            loo = [_fit_mean(t, np.delete(Y, i, 0), np.delete(Nn, i, 0), r0["step"])[name]
                   for i in range(k)]
            for q in ("decay", "frequency"):
                v = np.array([f[q] for f in loo])
                fit[name][f"{q}_jackknife_se"] = float(np.sqrt((k - 1) / k *
                                                               np.sum((v - v.mean()) ** 2)))
        fit[name] = {a: _none(b) for a, b in fit[name].items()}
    pred = r0["predicted"]
    osc = {key: _none(float(np.median([r["oscillation"][key] for r in results
                                       if r["oscillation"].get(key) is not None] or [math.nan])))
           for key in ("workload_var_rel", "peak_ratio", "peak_period_s")}
    return {"factor": r0["factor"], "eta": r0["eta"], "eta_crit": r0["eta_crit"],
            "crossing_period_s": r0["crossing_period_s"], "runs": k,
            "seeds": [r["seed"] for r in results], "predicted": pred, "measured": fit,
            "per_run": [{"seed": r["seed"], **{nm: {q: _none(f[q])
                                                    for q in ("decay", "frequency", "r2")}
                                               for nm, f in _fit_mean(t, Y[i:i + 1],
                                                                      Nn[i:i + 1],
                                                                      r0["step"]).items()}}
                        for i, r in enumerate(results)],
            "oscillation_median": osc,
            "mean_series": {"t": t.tolist(), "y": np.round(Y.mean(axis=0), 6).tolist(),
                            "n": np.round(Nn.mean(axis=0), 5).tolist()}}


def collect(rows: list[tuple[dict, dict]], out_dir: Path, profile: str) -> None:
    """Write ``summary.json``: per factor :func:`summarise_point` and the errors of the
    prediction (measured − predicted, absolute and relative to the frequency)."""
    by: dict[float, list[dict]] = {}
    for cfg, res in rows:
        by.setdefault(float(cfg["factor"]), []).append(res)
    points = [summarise_point(by[f]) for f in sorted(by)]
    for p in points:
        for fit in p["measured"].values():
            d, w = p["predicted"]["decay"], p["predicted"]["frequency"]
            fit["decay_error"] = _none(fit["decay"] - d) if fit["decay"] is not None else None
            fit["frequency_rel_error"] = (_none(fit["frequency"] / w - 1.0)
                                          if fit["frequency"] is not None else None)
    r0 = rows[0][1]
    net = L.two_cell_scenario(float(r0["scale"])).network
    _, crit = L.predicted_root(net, r0["eta_crit"], r0["cost"])
    curve = []
    for f in CURVE_FACTORS:     # the prediction between the measured factors, for the figure
        root = spectrum(crit.linearisation, f * r0["eta_crit"]).rightmost
        curve.append({"factor": f, "decay": -root.real, "frequency": abs(root.imag)})
    summary = {"experiment": "appendix-b-linear", "profile": profile,
               "protocol": PROTOCOL[profile], "cells": len(rows),
               "system": {"scale": r0["scale"], "cost": r0["cost"], "tau_s": L.TAU_S,
                          "probe_period_s": L.PROBE_S, "t_step": r0["t_step"],
                          "step": r0["step"], "fit_skip_s": L.FIT_SKIP_S,
                          "fit_window_s": L.FIT_WINDOW_S, "saturation": L.SATURATION,
                          "eta_crit": r0["eta_crit"],
                          "crossing_period_s": r0["crossing_period_s"]},
               "points": points, "predicted_curve": curve,
               "manifest": run_manifest({"experiment": "appendix-b-linear", "profile": profile,
                                         "grid": [c for c, _ in rows]})}
    write_json_atomic(out_dir / "summary.json", summary)


EXPERIMENT = Experiment(
    name="appendix-b-linear", description="Exp 7 as a test of the linear theory: a weight step "
    "on a scaled two-cell rate-server system, fitted decay/frequency vs the linearised root",
    grid=grid, cell=cell, collect=collect, profiles=("quick", "full"), version=VERSION,
    default="full")

if __name__ == "__main__":
    sys.exit(script_main(EXPERIMENT))
