"""Probe staleness as a modelled quantity (issue 36 item 1): the probing model's read times,
``probe_age_s`` against hand computations, both engines bit-identical under it, the scenario
fields and ``simulate --probe-period``; and the goodput-aware latency."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from test_sim_engines import assert_same_run, both

from lbtheory.cli import main
from lbtheory.errors import DataFormatError, ParameterError
from lbtheory.models import MM1Latency
from lbtheory.network import Arc, Cell, CellNetwork
from lbtheory.registry import make_router
from lbtheory.sim import (
    Probing,
    Scenario,
    ServerSpec,
    appendix_b_scenario,
    scenario_from_dict,
    seed_streams,
)
from lbtheory.sim._staleness import age_summary, probe_ages, stale_tables
from lbtheory.stats import goodput_latency

P, D = 0.01, 0.03  # probe period, one-way delay (s)


def equal_delay_scenario(probing=None, period=P):
    """Two cells, every arc (self-arcs too) one delay D: every read is D + extra old."""
    cells = [Cell(n, 2, 1.0, MM1Latency(1.0, 1.0)) for n in ("a", "b")]
    arcs = [Arc(i, j, D) for i in ("a", "b") for j in ("a", "b")]
    return Scenario(network=CellNetwork(cells, arcs), servers=(ServerSpec(kind="mmc"),) * 2,
                    probe_period_s=period, probing=probing)


def uniform_ages(sc, n=200_000, T=50.0, seed=0):
    """Ages of requests at uniformly random times (Poisson arrivals are, given their count)."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.0, T, n))
    return probe_ages(sc, seed_streams(seed)[5], t, rng.integers(0, 2, n), T)


def test_idealised_probe_age_is_delay_plus_half_a_period():
    # age = D + (t − t_k), t − t_k ~ U[0, P): mean D + P/2, p90 D + 0.9 P
    a = age_summary(uniform_ages(equal_delay_scenario()))
    assert a["mean"] == pytest.approx(D + P / 2, abs=2e-5)
    assert a["p90"] == pytest.approx(D + 0.9 * P, abs=5e-5)


def test_replicas_taking_turns_add_the_share_delay_on_peers_rounds():
    # R = 2, S = 4 ms < P: odd rounds are a peer's, S older: mean D + P/2 + S/2
    pr = Probing(root_replicas=2, share_delay_s=0.004, leaf_cache_period_s=0.0, jitter_s=0.0)
    a = age_summary(uniform_ages(equal_delay_scenario(pr)))
    assert a["mean"] == pytest.approx(D + P / 2 + 0.002, abs=2e-5)
    # S = 15 ms > P: a peer's answer is older than the router's own last one, which it keeps;
    # odd rounds act on the previous round's read: mean D + P/2 + P/2
    pr = dataclasses.replace(pr, share_delay_s=0.015)
    a = age_summary(uniform_ages(equal_delay_scenario(pr)))
    assert a["mean"] == pytest.approx(D + P, abs=2e-5)


def test_jitter_of_one_period_adds_half_a_period():
    # J = P: each answer is J·U older, U ~ U[0, 1); never older than the last round's (so the
    # max does not bind): mean D + P/2 + P/2
    pr = Probing(root_replicas=1, share_delay_s=0.0, leaf_cache_period_s=0.0, jitter_s=None)
    a = age_summary(uniform_ages(equal_delay_scenario(pr)))
    assert a["mean"] == pytest.approx(D + P, abs=4e-4)


def test_leaf_cache_adds_the_time_since_its_last_aggregation():
    # L = 5P, cell phase φ_j: at round k the cache holds its aggregate of φ_j + L⌊(t_k−D−φ_j)/L⌋;
    # over the grid of rounds the extra is c_j + {0, P, …, 4P}, c_j = (−D − φ_j) mod P: mean
    # c_j + 2P (the requests split evenly between the two sources' rows: mean over cells)
    L = 5 * P
    pr = Probing(root_replicas=1, share_delay_s=0.0, leaf_cache_period_s=L, jitter_s=0.0)
    sc = equal_delay_scenario(pr)
    phase = stale_tables(sc, seed_streams(0)[5])[1, 0]
    c = np.mod(-D - phase, P)
    expect = D + P / 2 + float(np.mean(c + 2 * P))
    assert age_summary(uniform_ages(sc))["mean"] == pytest.approx(expect, abs=5e-5)


PROBING = Probing(root_replicas=3, share_delay_s=0.012, leaf_cache_period_s=0.02,
                  jitter_s=0.015)


@pytest.mark.parametrize("policy", ["flow-grad", "disc-lat", "disc-rif", "mnlb"])
def test_engines_bit_identical_under_the_probing_model(policy):
    sc = appendix_b_scenario(3, n_cells=4, duration_s=20.0, fit_latency=False,
                             rate_variation=None, probing=PROBING)
    a, b = both(sc, lambda: make_router(policy), 20.0)
    assert_same_run(a, b)
    assert a.probe_age_s.tobytes() == b.probe_age_s.tobytes()
    # and the model changes what routers see: not the idealised run
    ideal = dataclasses.replace(sc, probing=None)
    c = both(ideal, lambda: make_router(policy), 20.0)[0]
    if policy != "mnlb":  # MNLB reads no probed workload
        assert c.latency_s.tobytes() != a.latency_s.tobytes()
    assert np.nanmean(c.probe_age_s) < np.nanmean(a.probe_age_s)


def test_scenario_probing_section_and_its_errors():
    base = {"cells": [{"name": "a", "replicas": 1, "arrival_rate": 1.0,
                       "service": {"model": "softplus", "base_latency": 1.0, "slope": 0.1,
                                   "knee": 5.0, "softness": 0.5}}],
            "arcs": [{"from": "a", "to": "a", "delay": 0.0}]}
    sc = scenario_from_dict(base | {"simulation": {"probing": {"root_replicas": 2,
                                                               "jitter_s": 0.002}}})
    assert sc.probing == Probing(root_replicas=2, jitter_s=0.002)
    assert sc.probing.jitter(0.01) == 0.002 and Probing().jitter(0.05) == 0.05
    assert scenario_from_dict(base).probing is None
    with pytest.raises(DataFormatError, match="probing.root_replicas"):
        scenario_from_dict(base | {"simulation": {"probing": {"root_replicas": 0}}})
    with pytest.raises(DataFormatError, match="probing"):
        scenario_from_dict(base | {"simulation": {"probing": {"replicas": 2}}})
    with pytest.raises(ParameterError, match="share_delay_s"):
        Probing(share_delay_s=-1.0)


def test_cli_probe_period_reports_probe_age(capsys):
    ages = {}
    for period in ("0.01", "0.1"):
        assert main(["simulate", "--appendix-b", "5", "--probe-period", period, "--duration",
                     "20", "--policy", "rand", "--json"]) == 0
        pol = json.loads(capsys.readouterr().out)["policies"]["rand"]
        ages[period] = pol["probe_age_s"]
        assert pol["probe_age_s"]["p90"] > pol["probe_age_s"]["mean"] > 0
    # 10× the period: the in-round part (P/2), the jitter (P/2) grow by 0.045 s each
    grow = ages["0.1"]["mean"] - ages["0.01"]["mean"]
    assert grow == pytest.approx(0.09, abs=0.01)
    assert main(["simulate", "--appendix-b", "5", "--probe-period", "0", "--json"]) == 2
    assert "--probe-period" in capsys.readouterr().err


def test_goodput_latency_counts_rejections_at_the_timeout():
    g = goodput_latency([1.0, 2.0, 3.0], errors=1, timeout_s=10.0)
    assert g["mean"] == pytest.approx(16.0 / 4)
    # pooled [1, 2, 3, 10]: 90th percentile (linear) = 3 + 0.7·7
    assert g["p90"] == pytest.approx(7.9)
    assert goodput_latency([1.0, 3.0], errors=0)["mean"] == 2.0
    assert math.isnan(goodput_latency([], errors=0)["mean"])
    with pytest.raises(ParameterError, match="timeout_s"):
        goodput_latency([1.0], errors=1, timeout_s=0.0)
