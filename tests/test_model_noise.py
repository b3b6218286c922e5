"""Latency-model noise as DLB App. B can mean it (issue 36 item 3): independent factors per
parameter and per trial, optionally redrawn over time; the old joint per-cell factor kept."""

from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest
from test_sim_engines import assert_same_run, both

from lbtheory.errors import DataFormatError, ParameterError
from lbtheory.models import MM1Latency, SoftplusLatency
from lbtheory.registry import make_router
from lbtheory.routers import perturb_model
from lbtheory.sim import ModelNoise, appendix_b_scenario, scenario_from_dict, seed_streams
from lbtheory.sim._probes import SeenModels

SC = appendix_b_scenario(3, n_cells=4, duration_s=20.0, fit_latency=False, rate_variation=None)


def params(m):
    return np.array([float(m.base_latency), float(m.slope), float(m.knee), float(m.softness)])


def seen(sc, seed):
    cl = types.SimpleNamespace(k=[c.replicas for c in sc.network.cells],
                               online=[c.replicas for c in sc.network.cells])
    st = seed_streams(seed)
    return SeenModels(sc, cl, st[3], st[6])


def test_perturb_model_takes_one_factor_per_parameter():
    m = SoftplusLatency(1.4, 0.02, 40.0, 8.0)
    p = perturb_model(m, [0.9, 1.1, 0.8, 1.2])
    np.testing.assert_allclose(params(p), [1.26, 0.022, 32.0, 9.6], rtol=1e-12)
    # the knee guard with separate factors: θ0' = 1.4·0.5, θ1' = 0.02·1.5 → knee ≤ 0.7/(1.02·0.03)
    p = perturb_model(m, [0.5, 1.5, 1.0, 1.0])
    assert float(p.knee) == pytest.approx(0.7 / (1.02 * 0.03), rel=1e-12)
    q = perturb_model(MM1Latency(10.0, 2.0), [0.5, 2.0])
    assert (float(q.capacity), float(q.K)) == (5.0, 4.0)
    with pytest.raises(ParameterError, match="4 factors"):
        perturb_model(m, [1.0, 1.0])


def test_independent_draws_per_parameter_and_per_trial_deterministic_by_seed():
    sc = dataclasses.replace(SC, model_noise=ModelNoise(0.5))
    a, a2, b = seen(sc, 11), seen(sc, 11), seen(sc, 12)
    fa, fb = np.array(a.factors), np.array(b.factors)
    assert fa.shape == (4, 4) and np.all((fa >= 0.5) & (fa <= 1.5))
    assert np.array_equal(fa, np.array(a2.factors))            # same seed, same draws
    assert not np.any(fa == fb)                                 # another trial, other draws
    assert np.all(np.ptp(fa, axis=1) > 0)                       # parameters of a cell differ
    # the routers' models are the declared ones × the factors
    for j, m in enumerate(sc.network.services):
        got, ref = params(a.seen[j]), params(m) * fa[j]
        np.testing.assert_allclose(got[[0, 1, 3]], ref[[0, 1, 3]], rtol=1e-12)
        assert got[2] == pytest.approx(min(ref[2], ref[0] / (1.02 * ref[1])), rel=1e-12)
    # across 4 cells × 4 parameters × 200 trials: ξ mean ≈ 0, uncorrelated across parameters
    xi = np.array([(np.array(seen(sc, s).factors) - 1.0) / 0.5 for s in range(200)])
    assert abs(xi.mean()) < 0.03 and abs(xi.var() - 1 / 3) < 0.03
    c = np.corrcoef(xi.reshape(-1, 4).T)
    assert np.max(np.abs(c - np.eye(4))) < 0.1


def test_joint_factor_is_one_per_cell_and_redraws_move_it():
    sc = dataclasses.replace(SC, model_noise=ModelNoise(0.3, joint=True, period_s=2.0))
    s = seen(sc, 5)
    f0 = list(s.factors)
    assert all(isinstance(f, float) and 0.7 <= f <= 1.3 for f in f0)
    p0 = [params(m) for m in s.seen]
    s.redraw()
    assert s.factors != f0
    assert not np.allclose(params(s.seen[0]), p0[0])


@pytest.mark.parametrize("policy", ["flow-lat", "disc-grad"])
def test_engines_bit_identical_with_noise_redrawn(policy):
    sc = dataclasses.replace(SC, model_noise=ModelNoise(0.4, period_s=2.5))
    a, b = both(sc, lambda: make_router(policy), 20.0)
    assert_same_run(a, b)
    fixed = dataclasses.replace(sc, model_noise=ModelNoise(0.4))
    assert both(fixed, lambda: make_router(policy), 20.0)[0].latency_s.tobytes() != \
        a.latency_s.tobytes()


def test_appendix_b_noise_modes():
    ind = appendix_b_scenario(4, noise_eps=0.2, fit_latency=False)
    assert ind.model_noise == ModelNoise(0.2)
    assert ind.network.services == appendix_b_scenario(4, fit_latency=False).network.services
    assert appendix_b_scenario(4, noise_eps=0.2, noise_mode="joint", noise_period_s=30.0,
                               fit_latency=False).model_noise == ModelNoise(0.2, True, 30.0)
    old = appendix_b_scenario(4, noise_eps=0.2, noise_mode="scenario", fit_latency=False)
    assert old.model_noise is None and old.network.services != ind.network.services
    assert appendix_b_scenario(4, fit_latency=False).model_noise is None
    with pytest.raises(ParameterError, match="noise_mode"):
        appendix_b_scenario(4, noise_eps=0.2, noise_mode="per-cell")


def test_model_noise_section():
    base = {"cells": [{"name": "a", "replicas": 1, "arrival_rate": 1.0,
                       "service": {"model": "softplus", "base_latency": 1.0, "slope": 0.1,
                                   "knee": 5.0, "softness": 0.5}}],
            "arcs": [{"from": "a", "to": "a", "delay": 0.0}]}
    sc = scenario_from_dict(base | {"simulation": {"model_noise": {"eps": 0.2,
                                                                   "period_s": 10}}})
    assert sc.model_noise == ModelNoise(0.2, False, 10.0)
    with pytest.raises(DataFormatError, match="model_noise.eps"):
        scenario_from_dict(base | {"simulation": {"model_noise": {"eps": 1.5}}})
    with pytest.raises(DataFormatError, match="model_noise.eps"):
        scenario_from_dict(base | {"simulation": {"model_noise": {"joint": True}}})
