"""Arc-cost families: Beckmann integral, marginal cost and CVXPY forms against independent oracles
(scipy quadrature, finite differences, numpy values at random points)."""

import cvxpy as cp
import numpy as np
import pytest
from scipy.integrate import quad

from lbtheory.costs import CostKind, flow_cost
from lbtheory.errors import ModelError
from lbtheory.games import MM1, ArcCostBank, Polynomial, ServiceArc, affine, bpr, constant
from lbtheory.models import ExpSaturation, MM1Latency, SoftplusLatency

FAMILIES = [
    affine(2.0, 0.5),
    constant(3.0),
    bpr(6.0, 0.15, 5000.0, 4.0),
    bpr(2.0, 0.15, 300.0, 2.5),     # non-integer power
    bpr(4.0, 0.3, 100.0, 0.0),      # power 0: constant t0(1 + B)
    bpr(0.0, 0.15, 100.0, 4.0),     # zero free-flow time: zero cost
    bpr(3.0, 1e-12, 10.0, 4.0),     # tiny B
    Polynomial(0.0, 1.0, 1.0, 0.7),
    MM1(10.0, 2.0),
]


def _points(c):
    hi = 9.0 if isinstance(c, MM1) else 2000.0
    return np.random.default_rng(0).uniform(0.0, hi, 5)


@pytest.mark.parametrize("c", FAMILIES, ids=lambda c: repr(c)[:40])
def test_potential_is_integral_of_cost(c):
    for x in _points(c):
        ref, _ = quad(lambda s: float(c.cost(s)), 0.0, x, epsabs=1e-12, epsrel=1e-12, limit=200)
        assert float(c.potential(x)) == pytest.approx(ref, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("c", FAMILIES, ids=lambda c: repr(c)[:40])
def test_marginal_and_total(c):
    for x in _points(c)[1:]:
        h = 1e-5 * x
        fd = (float(c.total(x + h)) - float(c.total(x - h))) / (2 * h)
        assert float(c.marginal(x)) == pytest.approx(fd, rel=1e-6, abs=1e-9)
        assert float(c.total(x)) == pytest.approx(x * float(c.cost(x)), rel=1e-12)
        fdc = (float(c.cost(x + h)) - float(c.cost(x - h))) / (2 * h)
        assert float(c.cost_prime(x)) == pytest.approx(fdc, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("c", FAMILIES, ids=lambda c: repr(c)[:40])
def test_cvxpy_forms_match_numpy(c):
    x = _points(c)
    var = cp.Variable(len(x))
    var.value = x
    bank = ArcCostBank([c] * len(x))
    pot = bank.cvx_objective(var, objective="wardrop")
    tot = bank.cvx_objective(var, objective="system_optimum")
    assert pot.is_dcp() and tot.is_dcp()
    assert float(pot.value) == pytest.approx(float(c.potential(x).sum()), rel=1e-9)
    assert float(tot.value) == pytest.approx(float(c.total(x).sum()), rel=1e-9)


def test_bpr_closed_form_and_power_zero():
    c = bpr(6.0, 0.15, 5000.0, 4.0)
    assert float(c.cost(2500.0)) == pytest.approx(6.0 * (1 + 0.15 * 0.5**4), rel=1e-15)
    c0 = bpr(4.0, 0.3, 100.0, 0.0)
    assert float(c0.cost(0.0)) == float(c0.cost(50.0)) == pytest.approx(4.0 * 1.3)
    assert float(c0.cost_prime(5.0)) == 0.0


def test_mm1_infinite_at_capacity():
    c = MM1(2.0)
    assert np.isinf(c.cost(2.0)) and np.isinf(c.potential(3.0)) and np.isinf(c.marginal(2.5))
    assert np.isinf(c.total(2.0)) and np.isinf(c.cost_prime(2.0))
    assert float(c.marginal(1.0)) == pytest.approx(2.0 / 1.0**2)


def test_service_arc_matches_cost_signals():
    m = MM1Latency(10.0, 5.0)
    s = ServiceArc(CostKind.LATENCY, m)
    # latency cost of an MM1Latency cell in flow view is K/(μ̄ − z), i.e. the MM1 family
    np.testing.assert_allclose(s.cost([1.0, 7.0]), MM1(10.0, 5.0).cost([1.0, 7.0]), rtol=1e-12)
    np.testing.assert_allclose(s.potential(7.0), MM1(10.0, 5.0).potential(7.0), rtol=1e-9)
    np.testing.assert_allclose(s.cost_prime(7.0), MM1(10.0, 5.0).cost_prime(7.0), rtol=1e-9)
    assert float(s.upper(1)[0]) == 10.0
    e = ServiceArc(CostKind.LATENCY, ExpSaturation(10.0, 5.0))
    assert float(e.cost(3.0)) == pytest.approx(float(flow_cost("latency", e.model, 3.0)))


def test_service_arc_has_no_cvx_form():
    s = ServiceArc(CostKind.LATENCY, SoftplusLatency(0.5, 0.05, 5.0, 1.0))
    with pytest.raises(ModelError, match="no exact convex CVXPY form"):
        s.cvx_potential(cp.Variable(1))


@pytest.mark.parametrize("kwargs, match", [
    ({"a": -1.0, "b": 1.0}, "Polynomial.a must be non-negative"),
    ({"a": 1.0, "b": np.nan}, "Polynomial.b must be finite"),
    ({"a": 1.0, "b": 1.0, "scale": 0.0}, "Polynomial.scale must be positive"),
    ({"a": 1.0, "b": 1.0, "power": -0.5}, "Polynomial.power must be non-negative"),
    ({"a": [1.0], "b": [1.0], "power": [1.0, 2.0]}, "Polynomial.power must be a scalar"),
])
def test_polynomial_validation(kwargs, match):
    with pytest.raises(ModelError, match=match):
        Polynomial(**kwargs)


def test_mm1_validation():
    with pytest.raises(ModelError, match="MM1.capacity must be positive"):
        MM1(0.0)


def test_bank_validation():
    with pytest.raises(ModelError, match="cost must be an ArcCost"):
        ArcCostBank([affine(1, 1), "x"])
    with pytest.raises(ModelError, match="one scalar-parameter cost per arc"):
        ArcCostBank([Polynomial(np.ones(2), np.ones(2))])


def test_service_arc_validation():
    with pytest.raises(ModelError, match="ServiceArc.model must be a ServiceModel"):
        ServiceArc("latency", 3.0)
    with pytest.raises(ModelError, match="unknown cost signal"):
        ServiceArc("speed", MM1Latency(10.0, 5.0))
