"""Service models: closed forms vs sympy, jax.grad, numerical inverse; Assumption 1 checks."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from lbtheory.errors import ModelError
from lbtheory.models import (
    MODEL_REGISTRY,
    ExpSaturation,
    MM1Latency,
    ModelBank,
    ServiceModel,
    SoftplusLatency,
    check_assumption_1,
    model_from_dict,
    model_to_dict,
    service_model,
)

N_sym = sp.symbols("N", positive=True)


def _sympy_latency(model):
    if isinstance(model, MM1Latency):
        return (N_sym + model.K) / model.capacity
    if isinstance(model, SoftplusLatency):
        t0, t1, t2, t3 = (sp.Float(v, 30) for v in (model.base_latency, model.slope, model.knee,
                                                    model.softness))
        return t0 + t1 * t3 * sp.log(1 + sp.exp((N_sym - t2) / t3))
    mu = model.capacity * (1 - sp.exp(-N_sym / model.K))
    return N_sym / mu


MODELS = [MM1Latency(capacity=10.0, K=5.0), MM1Latency(capacity=40.0, K=1.0),
          SoftplusLatency(base_latency=0.5, slope=0.01, knee=30.0, softness=5.0),
          SoftplusLatency(base_latency=0.8, slope=0.02, knee=10.0, softness=0.5),
          ExpSaturation(capacity=10.0, K=5.0)]
POINTS = [0.3, 2.0, 7.5, 29.0, 31.0, 80.0]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: repr(m))
def test_derivatives_match_sympy_and_jax(model):
    lat = _sympy_latency(model)
    mu = N_sym / lat
    dlat, dmu = sp.diff(lat, N_sym), sp.diff(mu, N_sym)
    grad_cost = 1 / dmu
    for N in POINTS:
        sub = {N_sym: sp.Float(N, 30)}
        N_arr = np.array([N])
        assert model.latency(N_arr)[0] == pytest.approx(float(lat.subs(sub)), rel=1e-12)
        assert model.latency_prime(N_arr)[0] == pytest.approx(float(dlat.subs(sub)), rel=1e-9)
        assert model.rate(N_arr)[0] == pytest.approx(float(mu.subs(sub)), rel=1e-12)
        assert model.rate_prime(N_arr)[0] == pytest.approx(float(dmu.subs(sub)), rel=1e-9)
        assert model.gradient_cost(N_arr)[0] == pytest.approx(float(grad_cost.subs(sub)), rel=1e-9)
        # jax.grad of the same definitions
        assert float(jax.grad(lambda n: model.latency(n))(jnp.float64(N))) == pytest.approx(
            float(dlat.subs(sub)), rel=1e-9)
        assert float(jax.grad(lambda n: model.rate(n))(jnp.float64(N))) == pytest.approx(
            float(dmu.subs(sub)), rel=1e-9)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: repr(m))
def test_inverse_rate_accurate(model):
    mubar = float(model.max_rate)
    z = mubar * np.array([1e-6, 0.1, 0.5, 0.9, 0.99, 0.999999])
    N = model.inverse_rate(z)
    np.testing.assert_allclose(model.rate(N), z, rtol=1e-12)
    assert model.inverse_rate(0.0) == 0.0
    assert math.isinf(model.inverse_rate(mubar)) and math.isinf(model.inverse_rate(2 * mubar))


def test_mm1_inverse_closed_form():
    m = MM1Latency(capacity=10.0, K=5.0)
    assert m.inverse_rate(7.0) == pytest.approx(5 * 7 / 3, rel=1e-15)
    # generic Newton–bisection agrees with the closed form to 1e-12
    assert ServiceModel.inverse_rate(m, np.array([7.0]))[0] == pytest.approx(35 / 3, rel=1e-12)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(t1=st.floats(0.001, 0.1), t2=st.floats(0.0, 100.0), t3=st.floats(0.05, 20.0),
       margin=st.floats(1.01, 5.0), frac=st.floats(1e-4, 0.9999))
def test_softplus_inverse_property(t1, t2, t3, margin, frac):
    m = SoftplusLatency(base_latency=margin * t1 * max(t2, 1e-3), slope=t1, knee=t2, softness=t3)
    z = frac / t1
    N = m.inverse_rate(z)
    assert m.rate(N) == pytest.approx(z, rel=1e-11)
    check_assumption_1(m)


def test_softplus_requires_theta0_above_theta1_theta2():
    with pytest.raises(ModelError, match=r"base_latency > slope\*knee"):
        SoftplusLatency(base_latency=0.2, slope=0.01, knee=30.0, softness=5.0)
    with pytest.raises(ModelError, match=r"base_latency > slope\*knee"):
        SoftplusLatency(base_latency=0.3, slope=0.01, knee=30.0, softness=5.0)  # equality
    # the reason: with θ0 < θ1θ2 the library's own μ = N/ℓ overshoots μ̄ = 1/θ1 (THEORY §4 [D]).
    # Build the refused model without its constructor check and evaluate the library's μ:
    # at N = θ2 = 30, ℓ = θ0 + θ1·θ3·log 2 = 0.2 + 0.05·log 2 (hand), μ = 30/ℓ ≈ 127.8 > 100.
    m = object.__new__(SoftplusLatency)
    for f, v in dict(base_latency=0.2, slope=0.01, knee=30.0, softness=5.0).items():
        object.__setattr__(m, f, v)
    assert float(m.rate(30.0)) == pytest.approx(30 / (0.2 + 0.05 * math.log(2)), rel=1e-14)
    assert float(m.rate(30.0)) > float(m.max_rate) == pytest.approx(100.0)
    with pytest.raises(ModelError, match="strictly increasing|exceeds max_rate"):
        check_assumption_1(m)


@pytest.mark.parametrize("kwargs,match", [
    (dict(capacity=-1.0, K=1.0), "capacity must be positive"),
    (dict(capacity=1.0, K=0.0), "K must be positive"),
    (dict(capacity=float("inf"), K=1.0), "capacity must be finite"),
])
def test_mm1_rejects_bad_parameters(kwargs, match):
    with pytest.raises(ModelError, match=match):
        MM1Latency(**kwargs)


def test_softplus_rejects_bad_parameters():
    with pytest.raises(ModelError, match="softness must be positive"):
        SoftplusLatency(base_latency=1.0, slope=0.01, knee=3.0, softness=0.0)
    with pytest.raises(ModelError, match="knee must be non-negative"):
        SoftplusLatency(base_latency=1.0, slope=0.01, knee=-3.0, softness=1.0)
    with pytest.raises(ModelError, match="ExpSaturation.K must be positive"):
        ExpSaturation(capacity=1.0, K=-1.0)


def test_user_model_protocol_and_assumption_1():
    @service_model
    class Affine(ServiceModel):
        """ℓ(N) = a + b·N: μ = N/(a + bN) → 1/b."""

        a: float
        b: float

        @property
        def max_rate(self):
            return 1.0 / self.b

        def latency(self, N):
            return self.a + self.b * N

    m = Affine(0.5, 0.1)
    check_assumption_1(m, label="cell x")
    assert m.latency_prime(np.array([3.0]))[0] == pytest.approx(0.1)  # generic JAX derivative
    assert m.inverse_rate(5.0) == pytest.approx(5.0 * 0.5 / (1 - 0.5), rel=1e-12)

    @service_model
    class Decreasing(ServiceModel):
        @property
        def max_rate(self):
            return 2.0

        def latency(self, N):
            return 0.5 + 0.0 * N + N**2 / (1 + N**2) * 0 + (N / 10) ** 2

    with pytest.raises(ModelError, match="cell y: .*strictly increasing"):
        check_assumption_1(Decreasing(), label="cell y")


def test_model_bank_matches_individual_models_numpy_and_jax():
    bank = ModelBank(MODELS)
    N = np.array([1.0, 2.0, 20.0, 12.0, 3.0])
    want = np.array([m.latency(np.array([n]))[0] for m, n in zip(MODELS, N)])
    np.testing.assert_allclose(bank.latency(N), want, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(bank.latency(jnp.asarray(N))), want, rtol=1e-14)
    z = 0.6 * bank.max_rate
    np.testing.assert_allclose(bank.rate(bank.inverse_rate(z)), z, rtol=1e-12)
    # a bank is a pytree: gradient w.r.t. the stacked parameters
    g = jax.grad(lambda b: jnp.sum(b.rate(jnp.asarray(N))))(bank)
    mm1, idx = g.groups[0]
    # dμ/dμ̄ = N/(N+K) for MM1
    np.testing.assert_allclose(np.asarray(mm1.capacity), N[idx] / (N[idx] + np.array([5.0, 1.0])))


def test_model_dict_round_trip_and_errors():
    for m in MODELS:
        assert model_from_dict(model_to_dict(m)) == m
    with pytest.raises(ModelError, match="unknown service model 'erlang'"):
        model_from_dict({"model": "erlang"})
    with pytest.raises(ModelError, match=r"missing parameter\(s\) \['K'\]"):
        model_from_dict({"model": "mm1", "capacity": 3.0})
    with pytest.raises(ModelError, match=r"unknown parameter\(s\) \['k'\]"):
        model_from_dict({"model": "mm1", "capacity": 3.0, "K": 1.0, "k": 2})
    with pytest.raises(ModelError, match="service.capacity: expected a number"):
        model_from_dict({"model": "mm1", "capacity": "fast", "K": 1.0})


def test_registering_an_existing_name_needs_replace():
    with pytest.raises(ModelError, match="service model name 'mm1' is already registered by "
                                         "lbtheory.models.MM1Latency; .*replace=True"):
        @service_model
        class Impostor(ServiceModel):
            capacity: float
            K: float
            name = "mm1"

    assert MODEL_REGISTRY["mm1"] is MM1Latency            # the refused class did not get in
    try:
        @service_model(replace=True)
        class MM1Twice(MM1Latency):
            name = "mm1"

        assert MODEL_REGISTRY["mm1"] is MM1Twice
        assert isinstance(model_from_dict({"model": "mm1", "capacity": 2.0, "K": 1.0}), MM1Twice)
    finally:
        MODEL_REGISTRY["mm1"] = MM1Latency
    # a new name registers as before
    @service_model
    class Fresh(ServiceModel):
        b: float
        name = "test-fresh-affine"

        @property
        def max_rate(self):
            return 1.0 / self.b

        def latency(self, N):
            return 1.0 + self.b * N

    try:
        assert model_from_dict({"model": "test-fresh-affine", "b": 0.5}) == Fresh(0.5)
    finally:
        del MODEL_REGISTRY["test-fresh-affine"]


def test_exp_saturation_passes_assumption_1_despite_float_saturation():
    # K = 0.01: e^{-N/K} < 2^-53 for N ≥ 0.37, so μ(N) = μ̄(1 − e^{-N/K}) rounds to exactly μ̄
    # (hand: e^{-100} ≈ 3.7e-44) — μ is flat in floating point, which Assumption 1's check must
    # accept because the flat part sits at μ̄ itself.
    m = ExpSaturation(capacity=10.0, K=0.01)
    assert float(m.rate(1.0)) == 10.0 and float(m.rate(0.5)) == 10.0
    assert float(m.rate(0.01)) == pytest.approx(10.0 * (1 - math.exp(-1.0)), rel=1e-15)
    for K in (0.01, 1.0, 5.0, 100.0):
        model = ExpSaturation(capacity=10.0, K=K)
        check_assumption_1(model, label="exp")  # accepted: returns None, raises nothing
        # μ⁻¹(μ̄/2) = K·log 2 (closed form: 1 − e^{-N/K} = 1/2)
        assert float(model.inverse_rate(5.0)) == pytest.approx(K * math.log(2), rel=1e-12)

    # the same check does reject a flat step *below* μ̄ (so the acceptance above is not vacuous)
    @service_model
    class Plateau(ServiceModel):
        @property
        def max_rate(self):
            return 10.0

        def latency(self, N):
            # μ = N/ℓ = 4N on [0, 1], flat at 4 on [1, 2], then 4 + 6(1 − e^{-(N−2)}) → 10
            n = np.asarray(N, dtype=float)
            mu = np.where(n < 1, 4 * n, 4 - 6 * np.expm1(-np.maximum(n - 2, 0)))
            return np.where(n > 0, n / np.where(n > 0, mu, 1.0), 0.25)

    with pytest.raises(ModelError, match="plateau: .*strictly increasing"):
        check_assumption_1(Plateau(), label="plateau")


SECOND_ORDER_MODELS = [SoftplusLatency(base_latency=0.5, slope=0.01, knee=30.0, softness=5.0),
                       SoftplusLatency(base_latency=0.8, slope=0.02, knee=10.0, softness=0.5),
                       ExpSaturation(capacity=10.0, K=5.0), ExpSaturation(capacity=3.0, K=0.7),
                       MM1Latency(capacity=10.0, K=5.0)]


@pytest.mark.parametrize("model", SECOND_ORDER_MODELS, ids=lambda m: repr(m))
def test_second_derivatives_match_sympy(model):
    """ℓ'', μ'', d(1/μ')/dN against sympy's symbolic derivatives of ℓ and μ = N/ℓ."""
    lat = _sympy_latency(model)
    mu = N_sym / lat
    d2lat = sp.diff(lat, N_sym, 2)
    d2mu = sp.diff(mu, N_sym, 2)
    dgrad = sp.diff(1 / sp.diff(mu, N_sym), N_sym)
    for N in POINTS:
        sub = {N_sym: sp.Float(N, 30)}
        N_arr = np.array([N])
        assert np.asarray(model.latency_second(N_arr))[0] == pytest.approx(
            float(d2lat.subs(sub)), rel=1e-7, abs=1e-15)
        assert np.asarray(model.rate_second(N_arr))[0] == pytest.approx(
            float(d2mu.subs(sub)), rel=1e-7, abs=1e-15)
        assert np.asarray(model.gradient_cost_prime(N_arr))[0] == pytest.approx(
            float(dgrad.subs(sub)), rel=1e-7)


@pytest.mark.parametrize("model", SECOND_ORDER_MODELS, ids=lambda m: repr(m))
def test_inverse_rate_matches_sympy_root(model):
    """μ⁻¹(z) against a 30-digit root of N/ℓ(N) = z found by sympy (independent of the code)."""
    lat = _sympy_latency(model)
    mubar = float(model.max_rate)
    for frac in (0.05, 0.5, 0.95):
        z = frac * mubar
        N = float(model.inverse_rate(z))
        root = sp.nsolve(N_sym - sp.Float(z, 30) * lat, N_sym, N * (1 + 1e-3), prec=30)
        assert N == pytest.approx(float(root), rel=1e-11)
