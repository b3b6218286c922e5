"""The vLLM-model Intelligent Router table (experiments/intelligent_router_vllm.py) against
hand-computed numbers: Δ per episode, the Student-t interval over training seeds (scipy's t
quantile), the share of the clairvoyant's headroom on the same headroom-length episodes, the
collapse flag and the verdict rule."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture
def vllm(monkeypatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    import intelligent_router_vllm

    return intelligent_router_vllm


def _ep(e2e: float, max_share: float = 1.0) -> dict:
    return {"e2e_s": e2e, "router_wait_s": 0.5, "ttft_s": 2.0, "tbt_var_p50": 1e-4,
            "tbt_var_p99": 1e-2, "preemptions_per_request": 1.0, "completed": 20,
            "requests": 20, "max_share": max_share}


def _rows():
    """Two episodes: round robin 100 s / 200 s (full), 10 s / 20 s (headroom length); the
    clairvoyant 9 s / 17 s (−10 %, −15 %: mean −12.5 %); JSQ; three WG-RL training seeds, one
    of which sends 1.6× its share to an instance in one episode."""
    seeds = [20000, 20001]
    common = {"setup": "k4", "requests": 20, "fit_requests": 100, "headroom_requests": 10,
              "eval_seeds": seeds}
    rr = {"label": "rr", "full": {"20000": _ep(100.0), "20001": _ep(200.0)},
          "short": {"20000": _ep(10.0), "20001": _ep(20.0)}}
    jsq = {"label": "jsq", "full": {"20000": _ep(98.0), "20001": _ep(190.0)},
           "short": {"20000": _ep(9.5), "20001": _ep(19.0)}}
    rows = [({"part": "heuristic", "router": "rr", **common}, rr),
            ({"part": "heuristic", "router": "jsq", **common}, jsq)]
    rows += [({"part": "headroom", "seed": s, **common},
              {"label": "clairvoyant", "short": {str(s): _ep(v)}, "seconds": 1.0})
             for s, v in zip(seeds, (9.0, 17.0), strict=True)]
    rows += [({"part": "headroom-full", "seed": s, **common},
              {"label": "clairvoyant", "full": {str(s): _ep(v)}, "seconds": 1.0})
             for s, v in zip(seeds, (80.0, 190.0), strict=True)]
    full = [(95.0, 180.0), (90.0, 190.0), (99.0, 210.0)]
    short = [(9.8, 18.0), (9.0, 18.0), (10.0, 19.0)]
    for k in range(3):
        run = {"label": "wg-rl-hurl", "train_seed": k, "train_s": 60.0,
               "history": [], "selected_episode": 3, "status": "completed",
               "full": {"20000": _ep(full[k][0]), "20001": _ep(full[k][1], 1.6 if k == 2
                                                                else 1.2)},
               "short": {"20000": _ep(short[k][0]), "20001": _ep(short[k][1])}}
        rows.append(({"part": "rl", "router": "wg-rl", "reading": "hurl", "train_seed": k,
                      "episodes": 2, **common}, run))
    return rows, full, short


def test_share_of_headroom_intervals_and_collapse_by_hand(vllm):
    rows, full, short = _rows()
    s = vllm.summarise(rows, "k4")
    clair = np.mean([100 * (9 / 10 - 1), 100 * (17 / 20 - 1)])
    assert clair == pytest.approx(-12.5)
    assert s["clairvoyant_delta_pct"][0] == pytest.approx(clair, rel=1e-12)
    # the episode lengths the panels' axes name (Knowl 8's headroom episodes are not 500)
    assert (s["episode_requests"], s["headroom_requests"]) == (20, 10)
    r = s["routers"]["wg-rl-hurl"]
    per_full = [np.mean([100 * (a / 100 - 1), 100 * (b / 200 - 1)]) for a, b in full]
    np.testing.assert_allclose(r["per_seed_delta_pct"], per_full, rtol=1e-12)
    half = stats.t.ppf(0.975, 2) * np.std(per_full, ddof=1) / math.sqrt(3)
    np.testing.assert_allclose(r["delta_pct"], [np.mean(per_full), np.mean(per_full) - half,
                                                np.mean(per_full) + half], rtol=1e-9)
    # share per training seed: its mean headroom-length Δ / the clairvoyant's mean Δ
    shares = [np.mean([100 * (a / 10 - 1), 100 * (b / 20 - 1)]) / clair for a, b in short]
    assert shares == pytest.approx([0.48, 0.8, 0.2])
    hs = stats.t.ppf(0.975, 2) * np.std(shares, ddof=1) / math.sqrt(3)
    np.testing.assert_allclose(r["share"], [np.mean(shares), np.mean(shares) - hs,
                                            np.mean(shares) + hs], rtol=1e-9)
    # the full-length headroom (an addition to the protocol): −20 % and −5 %, mean −12.5 %;
    # each seed's full-length Δ over it, then the t-interval
    assert s["clairvoyant_full_delta_pct"][0] == pytest.approx(-12.5)
    sf = [d / -12.5 for d in per_full]
    hf = stats.t.ppf(0.975, 2) * np.std(sf, ddof=1) / math.sqrt(3)
    np.testing.assert_allclose(r["share_full"], [np.mean(sf), np.mean(sf) - hf,
                                                 np.mean(sf) + hf], rtol=1e-9)
    assert s["routers"]["jsq"]["share_full"] == pytest.approx(-3.5 / -12.5)
    # 1.6× the fair share in one episode: collapsed, whatever the interval says
    assert r["max_share"] == 1.6 and r["collapsed"]
    assert r["verdict"] == "not reproduced (collapsed)" and r["paper_pct"] == -11.43
    # a heuristic: the episodes' interval divided by the clairvoyant's mean (bounds swap: both
    # negative)
    j = s["routers"]["jsq"]
    d = [100 * (9.5 / 10 - 1), 100 * (19 / 20 - 1)]
    assert j["delta_short_pct"][0] == pytest.approx(-5.0)
    assert j["share"][0] == pytest.approx(0.4)
    assert np.std(d) == 0.0  # both episodes −5 %: a zero-width interval
    assert j["share"][1] == pytest.approx(0.4) and j["share"][2] == pytest.approx(0.4)
    # full length −2 % and −5 %: mean −3.5 ± t(0.975, 1)·s/√2 — contains the paper's −0.46
    hj = stats.t.ppf(0.975, 1) * np.std([-2.0, -5.0], ddof=1) / math.sqrt(2)
    np.testing.assert_allclose(j["delta_pct"], [-3.5, -3.5 - hj, -3.5 + hj], rtol=1e-9)
    assert j["paper_pct"] == -0.46 and j["verdict"] == "reproduced"
    assert s["routers"]["rr"]["share"] is None
    table = "\n".join(vllm.markdown(s, "quick"))
    assert "**-12.5 %** [-44.3, +19.3]" in table and "| wg-rl-hurl (3 seeds) |" in table
    assert "at full length, on 2 episodes, **-12.5 %** [-107.8, +82.8]" in table
