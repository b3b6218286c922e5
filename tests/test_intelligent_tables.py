"""The Intelligent Router tables' verdict rule and collapse flag (experiments/_intelligent_tables)
against hand-computed numbers: Δ per episode, the Student-t interval over training seeds
(scipy's t quantile), each branch of the rule written before the runs, and the instance-share
count that decides "collapsed"."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture
def tables(monkeypatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    import _intelligent_tables

    return _intelligent_tables


@pytest.mark.parametrize("lo, hi, paper, collapsed, want", [
    (-5.0, -1.0, -4.35, False, "reproduced"),       # the interval contains the seed's Δ
    (-9.0, -6.0, -4.35, False, "reproduced"),       # entirely below it (better than published)
    (-3.0, -1.0, -4.35, False, "partly"),           # below 0, above the seed's Δ
    (-1.0, 2.0, -4.35, False, "not reproduced"),    # contains 0
    (1.0, 3.0, -4.35, False, "not reproduced"),     # above 0
    (-9.0, -6.0, -4.35, True, "not reproduced (collapsed)"),  # collapse overrides
    (-1.0, 2.0, None, False, "—"),                  # nothing published
    (math.nan, math.nan, -4.35, False, "no interval"),
])
def test_verdict_rule_by_hand(tables, lo, hi, paper, collapsed, want):
    assert tables.verdict(lo, hi, paper, collapsed) == want


def _episode(e2e: float, shares: list[float]) -> dict:
    return {"latency": {"mean": e2e}, "router_wait": {"mean": 0.01}, "ttft": {"mean": 0.1},
            "preemptions": 0, "shares": shares, "completed": 20}


def _round_robin(table: str) -> tuple[list[str], dict, dict]:
    """Two evaluation episodes of a 2-instance table and round robin's cell on them (E2E 10 s
    and 20 s, fair shares, requests alone on idle instances 4 s and 8 s): the reference every Δ
    below is taken against."""
    seeds = ["20000", "20001"]
    config = {"part": "heuristic", "router": "rr", "table": table, "instances": 2,
              "hardware": "v100", "mix": "five-task", "rate_rps": 20.0, "requests": 20,
              "chunk": 0, "fit_requests": 1000, "eval_seeds": [int(s) for s in seeds]}
    load = {"rate_rps": 20.0, "prefill_demand": 0.1, "decode_demand": 0.5, "utilisation": 0.6,
            "decode_tps": 25.0}
    rr = {"label": "rr", "eval": {"20000": _episode(10.0, [1.0, 1.0]),
                                  "20001": _episode(20.0, [1.0, 1.0])},
          "offered_load": {s: load for s in seeds}, "predictor_accuracy": 0.7, "threshold": 300,
          "ideal_e2e_s": {"20000": 4.0, "20001": 8.0}}
    return seeds, config, rr


def test_summary_deltas_intervals_and_collapse_count_by_hand(tables):
    seeds, config, rr = _round_robin("k4")
    # three training seeds of Baseline RL; seed 2's second episode sends 1.6× its share to one
    # instance (collapsed), the others stay at or below 1.5×
    e2e = [(9.0, 19.0), (9.5, 18.0), (8.0, 22.0)]
    shares = [[[1.2, 0.8], [1.5, 0.5]], [[1.0, 1.0], [0.9, 1.1]], [[1.1, 0.9], [1.6, 0.4]]]
    rows = [(config, rr)]
    for k in range(3):
        run = {"label": "rl", "train_seed": k, "status": "completed", "train_s": 1.0,
               "scales": {"horizon_s": 8.0}, "history": [{"wait_fraction": 0.0}],
               "eval": {s: _episode(e2e[k][j], shares[k][j]) for j, s in enumerate(seeds)}}
        rows.append(({**config, "part": "rl", "router": "rl", "train_seed": k}, run))
    summary = tables.summarise_table("k4", rows)
    out = summary["routers"]
    # the headroom read from round robin's stored ideal times: mean 6 s vs its mean E2E 15 s
    assert summary["ideal_e2e_s"] == 6.0
    assert summary["headroom_pct"] == pytest.approx(100 * (1 - 6.0 / 15.0), rel=1e-12)
    # Δ per seed: the mean over episodes of 100 (E2E / E2E_rr − 1)
    per_seed = [np.mean([100 * (a / 10.0 - 1), 100 * (b / 20.0 - 1)]) for a, b in e2e]
    np.testing.assert_allclose(out["rl"]["per_seed_delta"], per_seed, rtol=1e-12)
    half = stats.t.ppf(0.975, 2) * np.std(per_seed, ddof=1) / math.sqrt(3)
    assert out["rl"]["delta_pct"] == pytest.approx(np.mean(per_seed), rel=1e-12)
    assert out["rl"]["delta_lo"] == pytest.approx(np.mean(per_seed) - half, rel=1e-9)
    assert out["rl"]["delta_hi"] == pytest.approx(np.mean(per_seed) + half, rel=1e-9)
    # exactly 1.5× is not collapsed; 1.6× in one of the six runs is, whatever the interval
    assert out["rl"]["max_share"] == 1.6
    assert (out["rl"]["collapsed_episodes"], out["rl"]["runs"]) == (1, 6)
    assert out["rl"]["verdict"] == "not reproduced (collapsed)"
    assert out["rr"]["delta_pct"] == 0.0 and out["rr"]["collapsed_episodes"] == 0
    assert tables._episodes(out["rl"]) == "1/6"


def test_summary_of_the_selected_and_the_last_network_by_hand(tables):
    """Version 6 cells carry the kept network's evaluation (``eval``) and the last network's
    (``eval_last``): the summary reports both, each against round robin on the same episodes."""
    seeds, config, rr = _round_robin("k5")
    kept = [(10.0, 20.0), (9.0, 20.0)]        # the kept networks: balanced
    last = [(10.0, 20.0), (12.0, 24.0)]       # seed 1's last network drifted to a lane
    rows = [(config, rr)]
    for k in range(2):
        run = {"label": "wg-rl-hurl", "train_seed": k, "status": "completed", "train_s": 1.0,
               "scales": {"horizon_s": 8.0}, "history": [{"wait_fraction": 0.0}],
               "selected_episode": [19, 6][k],
               "eval": {s: _episode(kept[k][j], [1.1, 0.9]) for j, s in enumerate(seeds)},
               "eval_last": {s: _episode(last[k][j], [1.0, 1.0] if k == 0 else [1.9, 0.1])
                             for j, s in enumerate(seeds)}}
        rows.append(({**config, "part": "rl", "router": "wg-rl", "train_seed": k}, run))
    r = tables.summarise_table("k5", rows)["routers"]["wg-rl-hurl"]
    assert r["selected_episodes"] == [19, 6]
    assert r["per_seed_delta"] == pytest.approx([0.0, -5.0])         # (−10 % + 0 %) / 2
    # two seeds: the interval (t with 1 degree of freedom) is wide enough to hold −10.71
    assert r["max_share"] == 1.1 and r["verdict"] == "reproduced"
    half = stats.t.ppf(0.975, 1) * np.std([0.0, 20.0], ddof=1) / math.sqrt(2)
    assert r["last_delta_pct"] == pytest.approx(10.0)                # seed 1: +20 % both
    assert (r["last_delta_lo"], r["last_delta_hi"]) == pytest.approx((10 - half, 10 + half))
    assert (r["last_max_share"], r["last_collapsed_episodes"]) == (1.9, 2)
    assert tables._selection(r).startswith("19, 6 | +10.00 [")
    assert tables._selection({"kind": "heuristic"}) == "— | —"


def test_load_sweep_summary_by_hand(tables):
    """Δ per episode vs round robin, its t-interval, and the offered load of each row."""
    load = {"rate_rps": 40.0, "prefill_demand": 0.4, "decode_demand": 1.0, "utilisation": 1.4,
            "decode_tps": 25.0}

    def run(e2e):
        return {"eval": {str(20000 + k): _episode(x, [1.2, 0.8]) for k, x in enumerate(e2e)},
                "offered_load": {str(20000 + k): load for k in range(len(e2e))}}

    base = {"part": "heuristic", "table": "k4", "load_factor": 2.0}
    rows = [({**base, "router": "rr"}, run([10.0, 20.0, 40.0])),
            ({**base, "router": "jsq"}, run([9.0, 19.0, 36.0]))]
    (row,) = tables.summarise_load(rows)
    d = 100.0 * (np.array([9.0, 19.0, 36.0]) / np.array([10.0, 20.0, 40.0]) - 1.0)
    half = stats.t.ppf(0.975, 2) * np.std(d, ddof=1) / math.sqrt(3)
    got = row["delta_pct"]["jsq"]
    assert got["mean"] == pytest.approx(d.mean()) == pytest.approx(-25.0 / 3)
    assert (got["lo"], got["hi"]) == pytest.approx((d.mean() - half, d.mean() + half))
    assert got["max_share"] == 1.2
    assert row["rr_e2e_s"] == pytest.approx(70.0 / 3)
    assert row["utilisation"] == pytest.approx(1.4)
    assert "rr" not in row["delta_pct"]
    md = "\n".join(tables._load_md({"rows": [row], "profile": "full",
                                    "config": {"eval_episodes": 3}}))
    assert "| k4 | 2 | 40 | 1.40 | 23.3 | -8.3 [" in md


def test_tables_read_the_ideal_e2e_stored_by_the_experiment_and_name_a_missing_one(tables):
    """The tables module only reads stored results: the ideal E2E comes from round robin's
    cell (per episode, averaged over the episodes asked for), never from re-running the setup."""
    _, _, rr = _round_robin("k4")
    assert tables.ideal_e2e_s(rr, ["20001"]) == 8.0
    assert tables.ideal_e2e_s(rr, ["20000", "20001"]) == 6.0
    del rr["ideal_e2e_s"]
    with pytest.raises(KeyError, match="ideal_e2e_s"):
        tables.ideal_e2e_s(rr, ["20000"])


def test_the_experiment_backfills_the_ideal_e2e_of_old_cells_as_stored(monkeypatch):
    """Cells cached before round robin stored its ideal times get them from the experiment's
    collect step: recomputed from the table's config, they equal the committed Knowl 4 summary's
    headroom bound (written by the former derivation), and a cell that has them is left as is."""
    import json

    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    import intelligent_router as ir

    stored = json.loads((EXPERIMENTS / "results" / "intelligent-router-k4" / "summary.json")
                        .read_text(encoding="utf-8"))
    seeds = [ir.EVAL_SEED0 + k for k in range(stored["episodes"])]
    config = {"part": "heuristic", "router": "rr", "table": "k4", **ir.TABLES["k4"],
              "fit_requests": 20_000, "eval_seeds": seeds}
    old = {"eval": {str(s): {} for s in seeds}}
    newer = {"eval": {}, "ideal_e2e_s": {"20000": 1.0}}
    (_, got), (_, kept) = ir._with_ideal([(config, old), (config, newer)])
    assert kept is newer and "ideal_e2e_s" not in old
    assert np.mean(list(got["ideal_e2e_s"].values())) == pytest.approx(stored["ideal_e2e_s"],
                                                                       rel=1e-12)


def test_knowl6_rules_by_hand(monkeypatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    import _knowl6_table as k6

    paper = np.array([[k6.PAPER[b][r] for r in k6.ROUTERS]
                      for b in k6.BATCHERS]).transpose(2, 0, 1)  # [order, batcher, router]
    got = k6.claims(paper)
    # order 1: routers' spreads at BP, LWL, FCFS: 704.50 − 581.50, 704.50 − 585.14,
    # 704.50 − 605.65 -> min 98.85; batchers' spreads at SL, RR, DB: 0, 607.45 − 581.50,
    # 605.65 − 595.82 -> max 25.95
    rd = got["routing_dominates"]
    assert rd["min_router_spread_s"][0] == pytest.approx(98.85)
    assert rd["max_batcher_spread_s"][0] == pytest.approx(25.95)
    assert rd["holds"] and got["ordered_equalise"]["holds"]
    # order 3, round robin: (424.80 − 424.64) / 424.64
    assert got["ordered_equalise"]["batcher_spread_pct"][2][1] == pytest.approx(
        100 * 0.16 / 424.64)
    # a batcher spread of 2 % in order 4 (round robin) breaks the second rule only; one router
    # spread smaller than a batcher spread breaks the first in that order only
    t = paper.copy()
    t[3, 0, 1] = 1.02 * t[3, 2, 1]
    got = k6.claims(t)
    assert got["ordered_equalise"]["per_order_router"][1] == [True, False, True]
    assert got["routing_dominates"]["holds"] and not got["ordered_equalise"]["holds"]
    t = paper.copy()
    t[1, 2, :] = [650.0, 650.0, 640.0]  # FCFS, order 2: routers' spread 10; batchers' at RR 96
    got = k6.claims(t)
    assert got["routing_dominates"]["per_order"] == [True, False, True, True]
