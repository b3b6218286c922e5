"""The staleness sweep (issue 36 item 1): its grid holds η fixed while the probe period moves,
its Flow-vs-Disc ranking is the paired difference of hand-built summaries, and a cell reports
the probe age the period implies."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))


def _exp():
    from lbtheory.sweep import load_experiments

    (exp,) = load_experiments(ROOT / "experiments" / "appendix_b_staleness.py")
    return exp


def test_grid_moves_only_the_probe_period():
    exp = _exp()
    assert exp.name == "appendix-b-staleness" and exp.default_profile == "reduced"
    cells = exp.grid("full")
    assert len(cells) == 10 * 5 * 5
    assert sorted({c["probe_period_s"] for c in cells}) == [0.01, 0.03, 0.1, 0.3, 1.0]
    assert {c["eta_probe_period_s"] for c in cells} == {0.01}
    assert {c["duration_s"] for c in exp.grid("reduced")} == {300.0}


def _group(period, flow, disc, age):
    pols = {"rand": {"mean_norm": {"mean": 1.0}, "p90_norm": {"mean": 1.0},
                     "probe_age_mean_s": {"mean": age}},
            "flow-grad": {"mean_norm": {"mean": sum(flow) / 3}, "p90_norm": {"mean": 0.9},
                          "probe_age_mean_s": {"mean": age}},
            "disc-grad": {"mean_norm": {"mean": sum(disc) / 3}, "p90_norm": {"mean": 0.8},
                          "probe_age_mean_s": {"mean": age}}}
    per = {"scenarios": [0, 1, 2], "flow-grad": {"mean_norm": flow},
           "disc-grad": {"mean_norm": disc}}
    return {"level": {"probe_period_s": period}, "policies": pols, "per_scenario": per}


def test_ranking_is_the_paired_flow_minus_disc_difference():
    _exp()
    mod = sys.modules["_lbtheory_experiment_appendix_b_staleness"]
    # differences per scenario (−0.1, −0.2, −0.3): mean −0.2, t-interval ±t(2)·0.1/√3
    g_slow = _group(1.0, [0.8, 0.8, 0.7], [0.9, 1.0, 1.0], 1.03)
    g_fast = _group(0.01, [0.85, 0.86, 0.87], [0.8, 0.8, 0.8], 0.05)
    fast, slow = mod._ranking([g_slow, g_fast])  # sorted by period
    assert fast["probe_period_s"] == 0.01 and slow["probe_period_s"] == 1.0
    d = slow["flow_minus_disc_grad"]
    half = 4.302652729911275 * 0.1 / 3 ** 0.5
    assert d["mean"] == pytest.approx(-0.2) and d["n"] == 3
    assert (d["lo"], d["hi"]) == pytest.approx((-0.2 - half, -0.2 + half))
    assert fast["flow_minus_disc_grad"]["mean"] == pytest.approx(0.06)
    assert slow["best_mean_norm"] == "flow-grad" and fast["best_mean_norm"] == "disc-grad"
    assert fast["best_p90_norm"] == "disc-grad"
    assert fast["probe_age_mean_s"] == pytest.approx(0.05)
    assert "flow_minus_disc_rif" not in fast  # no RIF policies in these summaries


def test_a_cell_reports_probe_age_and_goodput():
    from _appendix_b_protocol import appendix_b_cell

    out = {}
    for P in (0.01, 0.1):
        r = appendix_b_cell({"scenario": 3, "n_cells": 3, "duration_s": 20.0, "warmup_s": 2.0,
                             "policies": ["rand", "flow-grad"], "probe_period_s": P,
                             "eta_probe_period_s": 0.01})
        out[P] = r
        g = r["runs"]["rand"]["latency_goodput"]
        assert g["mean"] >= r["runs"]["rand"]["mean"] and g["timeout_s"] == 10.0
        assert r["normalised"]["rand"]["goodput_mean"] == 1.0
    # the in-round wait (P/2) and the jitter of one period (P/2): +0.09 s from 10 to 100 ms
    grow = (out[0.1]["runs"]["rand"]["probe_age_s"]["mean"]
            - out[0.01]["runs"]["rand"]["probe_age_s"]["mean"])
    assert grow == pytest.approx(0.09, abs=0.01)
