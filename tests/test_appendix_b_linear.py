"""Experiment 7 as a test of the linear theory (experiments/_appendix_b_linear.py,
experiments/appendix_b_linear.py): the damped-sinusoid fit on synthetic signals with known
decay and frequency, the linear root against the fluid model of the same system (where the
theory is exact up to the linearisation), the stepped router's open loop and step, and the
summary's seed averaging on hand-built runs."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import _appendix_b_linear as L  # noqa: E402
import appendix_b_linear as E  # noqa: E402

T = np.arange(0.0, 30.0, 0.05)


def damped(t, sigma, omega, amp=0.1, phase=0.4, offset=0.003):
    return amp * np.exp(-sigma * t) * np.cos(omega * t + phase) + offset


@pytest.mark.parametrize("sigma, omega", [(0.08, 1.23), (0.15, 0.36), (-0.05, 2.1),
                                          (0.0, 1.7)])
def test_fit_recovers_a_noiseless_damped_sinusoid(sigma, omega):
    fit = L.fit_damped(T + 7.0, damped(T, sigma, omega))   # the window's start is t = 0
    assert fit["decay"] == pytest.approx(sigma, abs=1e-7)
    assert fit["frequency"] == pytest.approx(omega, rel=1e-7)
    assert fit["amplitude"] == pytest.approx(0.1, rel=1e-6)
    assert fit["offset"] == pytest.approx(0.003, abs=1e-8)
    assert fit["r2"] == pytest.approx(1.0, abs=1e-10) and fit["points"] == T.size


def test_fit_with_noise_lies_within_its_standard_errors():
    rng = np.random.default_rng(5)
    errs = []
    for _ in range(20):
        y = damped(T, 0.08, 1.23) + rng.normal(0.0, 0.005, T.size)
        f = L.fit_damped(T, y)
        errs.append(((f["decay"] - 0.08) / f["decay_se"],
                     (f["frequency"] - 1.23) / f["frequency_se"]))
    z = np.array(errs)
    # standardised errors of a correct fit with correct standard errors: mean ≈ 0, sd ≈ 1
    assert np.all(np.abs(z.mean(axis=0)) < 0.8) and np.all(np.abs(z.std(axis=0) - 1) < 0.5)
    assert L.fit_damped(T[:5], T[:5])["points"] == 5
    assert math.isnan(L.fit_damped(T[:5], T[:5])["decay"])


def test_fit_window_starts_after_the_skip_and_stops_at_saturation():
    t = np.arange(0.0, 40.0, 0.05)
    y = 0.1 * np.exp(0.1 * t) * np.cos(2 * t)
    w = L.fit_window(t, y, 0.0, 0.1)
    assert t[w][0] == pytest.approx(L.FIT_SKIP_S + 0.05 * (L.FIT_SKIP_S % 0.05 > 0), abs=0.05)
    assert np.all(np.abs(y[w]) <= L.SATURATION * 0.1)
    first_big = t[np.flatnonzero(np.abs(y) > L.SATURATION * 0.1)[0]]
    assert t[w][-1] < first_big <= t[w][-1] + 0.05 + 1e-9
    w = L.fit_window(t, 0.01 * np.cos(t), 0.0, 0.1)
    assert t[w][-1] == pytest.approx(L.FIT_WINDOW_S, abs=0.05)


@pytest.mark.parametrize("factor", [0.5, 1.25])
def test_linear_root_predicts_the_fluid_model_of_the_same_system(factor):
    """The fluid model (8)–(9) of the experiment's system, perturbed by the same weight step:
    its fitted transient matches the rightmost root of the linearisation (no probe period:
    the fluid model updates continuously) to 1 % in frequency and 3 % of ω in decay."""
    from lbtheory.fluid import simulate_fluid

    net = L.two_cell_scenario(1.0).network
    _, crit = L.predicted_root(net, 1.0, probe_period_s=0.0)
    assert crit.critical_stepsize == pytest.approx(0.536158, rel=1e-5)   # THEORY §12
    eta = factor * crit.critical_stepsize
    root, _ = L.predicted_root(net, eta, probe_period_s=0.0)
    pt = crit.linearisation.point
    x0 = pt.routing + np.array([[L.STEP, -L.STEP]] * 2)
    sol = simulate_fluid(net, mechanism="flow", cost="gradient", stepsize=eta, t1=32.0,
                         dt=1e-3, x0=x0, N0=pt.workload, save_every=50)
    t = np.asarray(sol.t)
    y = (np.asarray(sol.routing)[:, :, 0] - pt.routing[None, :, 0]).mean(axis=1)
    w = L.fit_window(t, y, 0.0, L.STEP)
    fit = L.fit_damped(t[w], y[w])
    assert fit["frequency"] == pytest.approx(root.imag, rel=0.01)
    assert abs(fit["decay"] + root.real) < 0.03 * root.imag
    assert (fit["decay"] > 0) == (factor < 1)


def test_stepped_router_holds_the_equilibrium_then_steps():
    from lbtheory.sim import simulate

    sc = L.two_cell_scenario(5.0)
    _, crit = L.predicted_root(sc.network, 1.0)
    x_star = crit.linearisation.point.routing
    r = L.stepped_router("gradient", 0.5 * crit.critical_stepsize, x_star, 4.0, 0.1)
    res = simulate(sc, r, duration_s=6.0, seed=2, record_period_s=0.1,
                   record_routing_every=1)
    t, X = np.asarray(res.routing_t), np.asarray(res.routing_x)
    before, after = t < 4.0 + 1e-9, np.flatnonzero(t > 4.0 + 1e-9)[0]
    assert np.array_equal(X[before], np.broadcast_to(x_star, X[before].shape))
    # the next recorded round (one probe period later): x* plus the step (plus one update of
    # η·δ·cost difference)
    assert t[after] == pytest.approx(4.0 + L.PROBE_S)
    assert X[after, :, 0] - x_star[:, 0] == pytest.approx([0.1, 0.1], abs=0.01)
    assert np.allclose(X[after].sum(axis=1), 1.0)
    assert res.engine == "reference"


def _run(seed: int, sigma: float, omega: float, noise: float) -> dict:
    rng = np.random.default_rng(seed)
    t = np.arange(-2.0, 40.0, 0.05)
    y = np.where(t >= 0, damped(t, sigma, omega, phase=0.0, offset=0.0), 0.0)
    return {"scale": 10.0, "factor": 0.5, "seed": seed, "cost": "gradient", "eta": 0.25,
            "eta_crit": 0.5, "crossing_period_s": 3.6, "t_step": 30.0, "step": 0.1,
            "predicted": {"decay": 0.07, "frequency": 1.2},
            "fits": {k: {"decay": 0.0, "frequency": 1.0, "r2": 0.5}
                     for k in ("weights", "workloads")},
            "oscillation": {"workload_var_rel": float(seed), "peak_ratio": None,
                            "peak_period_s": 2.0},
            "series": {"t": t.tolist(), "y": (y + rng.normal(0, noise, t.size)).tolist(),
                       "n": (5 * y).tolist()}}


def test_summary_fits_the_mean_over_seeds_with_a_jackknife_error(tmp_path):
    import json

    rows = [({"factor": 0.5, "seed": s}, _run(s, 0.08, 1.23, 0.01)) for s in range(4)]
    E.collect(rows, tmp_path, "quick")
    s = json.loads((tmp_path / "summary.json").read_text())
    (p,) = s["points"]
    assert p["runs"] == 4 and p["seeds"] == [0, 1, 2, 3]
    w, n = p["measured"]["weights"], p["measured"]["workloads"]
    assert n["decay"] == pytest.approx(0.08, abs=1e-6)          # the n series is noiseless
    assert n["frequency"] == pytest.approx(1.23, rel=1e-6)
    assert n["decay_jackknife_se"] == pytest.approx(0.0, abs=1e-6)
    assert w["decay"] == pytest.approx(0.08, abs=4 * w["decay_jackknife_se"] + 1e-3)
    assert 0 < w["decay_jackknife_se"] < 0.01
    assert w["decay_error"] == pytest.approx(w["decay"] - 0.07, abs=1e-12)
    assert w["frequency_rel_error"] == pytest.approx(w["frequency"] / 1.2 - 1, abs=1e-12)
    assert p["oscillation_median"] == {"workload_var_rel": 1.5, "peak_ratio": None,
                                       "peak_period_s": 2.0}
    assert s["system"]["fit_window_s"] == L.FIT_WINDOW_S


def _point(factor, pred, meas, se=0.005):
    fit = {"decay": meas[0], "frequency": meas[1], "decay_jackknife_se": se,
           "frequency_jackknife_se": se}
    return {"factor": factor, "predicted": {"decay": pred[0], "frequency": pred[1]},
            "measured": {"weights": fit, "workloads": fit}, "runs": 4}


def test_judge_tolerances_and_the_onset_sign():
    good = [_point(0.5, (0.08, 1.2), (0.09, 1.23)),      # |Δσ| 0.01 ≤ 0.02·1.2, ω +2.5 %
            _point(1.1, (-0.016, 1.8), (-0.02, 1.75))]
    v = L.judge(good)
    assert v["predicts"] and v["sign_ok"]
    assert v["rows"][0]["decay_error_over_omega"] == pytest.approx(0.01 / 1.2)
    # decay off by 0.03 (> 0.024) -> not predicted; ω off by 6 % -> not predicted
    assert not L.judge([_point(0.5, (0.08, 1.2), (0.11, 1.2))])["predicts"]
    assert not L.judge([_point(0.5, (0.08, 1.2), (0.08, 1.272))])["predicts"]
    # decaying where growth is predicted, |σ| > 2 SE: the onset is missed
    v = L.judge([_point(1.5, (-0.077, 2.1), (0.01, 2.1))])
    assert not v["sign_ok"] and not v["predicts"]
    # near the threshold (|σ| ≤ 2 SE) the sign is not judged
    assert L.judge([_point(0.9, (0.008, 1.6), (-0.002, 1.6))])["sign_ok"]
    # a failed fit is no prediction
    v = L.judge([_point(1.5, (-0.077, 2.1), (None, None))])
    assert not v["predicts"] and not v["sign_ok"]


def test_linear_section_of_claims_md():
    s = {"system": {"scale": 200.0, "tau_s": 0.05, "probe_period_s": 0.01, "t_step": 30.0,
                    "step": 0.1, "fit_skip_s": 0.25, "fit_window_s": 30.0, "eta_crit": 0.51,
                    "crossing_period_s": 3.62},
         "points": [_point(0.5, (0.08, 1.2), (0.09, 1.23))]}
    lines = L.linear_section(s)
    assert "| 0.5 | 0.08 | 0.09 ± 0.005 | 0.09 ± 0.005 | 1.2 | 1.23 ± 0.005 |" in lines[4]
    assert lines[-2].endswith("**True** (0.5: ok)")
    assert L.linear_section(None) == ["Not run (no `appendix-b-linear/summary.json`)."]
