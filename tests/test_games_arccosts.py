"""Arc-cost families: Beckmann integral, marginal cost and CVXPY forms against independent oracles
(scipy quadrature, finite differences, sympy closed forms, scipy root finding, numpy values at
random points)."""

import cvxpy as cp
import numpy as np
import pytest
import sympy as sy
from scipy.integrate import quad
from scipy.optimize import brentq

from lbtheory.costs import CostKind
from lbtheory.errors import ModelError
from lbtheory.games import (
    ARC_FORMS,
    MM1,
    ArcCostBank,
    Polynomial,
    ServiceArc,
    affine,
    arc_objective,
    bank_objective,
    bpr,
    constant,
)
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
    # the registry's CVXPY expression, evaluated at random flows, equals the numpy Beckmann
    # integral (itself pinned to quadrature above) and total x·ℓ(x); with and without ``ref``
    x = _points(c)
    var = cp.Variable(len(x))
    var.value = x
    bank = ArcCostBank([c] * len(x))
    for ref in (None, 3.0 * x):
        pot = bank_objective(bank, var, "wardrop", ref=ref)
        tot = bank_objective(bank, var, "system_optimum", ref=ref)
        assert pot.is_dcp() and tot.is_dcp()
        assert float(pot.value) == pytest.approx(float(c.potential(x).sum()), rel=1e-9)
        assert float(tot.value) == pytest.approx(float(c.total(x).sum()), rel=1e-9)


def test_cvx_registry_covers_the_convex_families():
    assert set(ARC_FORMS) == {Polynomial, MM1}
    # a mixed bank: every group's form is summed once (3 families, 5 arcs)
    costs = [affine(2.0, 0.5), MM1(10.0, 2.0), bpr(6.0, 0.15, 50.0, 4.0), MM1(5.0), constant(1.0)]
    x = np.array([3.0, 4.0, 70.0, 1.0, 2.0])
    var = cp.Variable(5)
    var.value = x
    expected = sum(float(c.potential(xi)) for c, xi in zip(costs, x))
    assert float(bank_objective(ArcCostBank(costs), var, "wardrop").value) == pytest.approx(
        expected, rel=1e-12)


def test_bpr_closed_form_and_power_zero():
    c = bpr(6.0, 0.15, 5000.0, 4.0)
    assert float(c.cost(2500.0)) == pytest.approx(6.0 * (1 + 0.15 * 0.5**4), rel=1e-15)
    c0 = bpr(4.0, 0.3, 100.0, 0.0)
    assert float(c0.cost(0.0)) == float(c0.cost(50.0)) == pytest.approx(4.0 * 1.3)
    assert float(c0.cost_prime(5.0)) == 0.0


def test_array_methods_broadcast_and_match_closed_forms():
    """The numpy methods run the compiled formulas elementwise (``_gpkernels``), broadcasting
    parameters against flows like numpy: array parameters (a stacked bank), scalar parameters on
    a matrix of flows, a scalar in → a scalar out; negative flows count as 0; values equal the
    closed forms to rounding."""
    rng = np.random.default_rng(3)
    a, b, s = rng.random(6), rng.random(6), 1.0 + rng.random(6)
    x = np.array([-1.0, 0.0, 0.3, 1.7, 4.0, 11.0])
    xc = np.maximum(x, 0.0)
    poly = Polynomial(a, b, s, 2.5)
    for method, ref in [("cost", a + b * (xc / s) ** 2.5),
                        ("cost_prime", b * 2.5 / s * (xc / s) ** 1.5),
                        ("potential", a * xc + b * s / 3.5 * (xc / s) ** 3.5),
                        ("total", xc * (a + b * (xc / s) ** 2.5)),
                        ("marginal", a + 3.5 * b * (xc / s) ** 2.5)]:
        np.testing.assert_allclose(getattr(poly, method)(x), ref, rtol=1e-14, atol=1e-300)
    X = np.array([[0.5, 2.0], [3.0, 7.0]])
    q = MM1(8.0, 3.0)
    np.testing.assert_allclose(q.cost(X), 3.0 / (8.0 - X), rtol=1e-15)
    np.testing.assert_allclose(q.potential(X), 3.0 * np.log(8.0 / (8.0 - X)), rtol=1e-14)
    np.testing.assert_allclose(q.total(X), 3.0 * X / (8.0 - X), rtol=1e-15)
    assert q.cost(X).shape == (2, 2) and np.isinf(q.cost(np.array([8.0, 9.0, np.nan]))).all()
    one = bpr(2.0, 0.15, 10.0, 4.0).cost(5.0)
    assert isinstance(one, np.float64) and one == pytest.approx(2.0 * (1 + 0.15 / 16), rel=1e-15)
    np.testing.assert_allclose(Polynomial(a, b, s, 1.0).cost(2.0), a + b * 2.0 / s, rtol=1e-15)
    # no NaN: a zero coefficient has a zero derivative even where (x/s)^(p-1) is infinite
    assert float(Polynomial(1.0, 0.0, 1.0, 0.5).cost_prime(0.0)) == 0.0
    assert np.isinf(Polynomial(1.0, 1.0, 1.0, 0.5).cost_prime(0.0))


def test_mm1_infinite_at_capacity():
    c = MM1(2.0)
    assert np.isinf(c.cost(2.0)) and np.isinf(c.potential(3.0)) and np.isinf(c.marginal(2.5))
    assert np.isinf(c.total(2.0)) and np.isinf(c.cost_prime(2.0))
    assert float(c.marginal(1.0)) == pytest.approx(2.0 / 1.0**2)


def _sympy_flow_view(rate_of_N, latency_of_N, mu_bar, K, k):
    """Closed forms (sympy) of the three cost signals at flow z: solve μ(N) = z for N, then
    latency ℓ(N), gradient 1/μ'(N) and RIF N/k (THEORY §4), as functions of z."""
    N, z = sy.symbols("N z", positive=True)
    mu = rate_of_N(N, mu_bar, K)
    sols = sy.solve(sy.Eq(mu, z), N)
    assert len(sols) == 1
    Nz = sols[0]
    return z, {CostKind.LATENCY: sy.simplify(latency_of_N(N, mu_bar, K).subs(N, Nz)),
               CostKind.GRADIENT: sy.simplify((1 / sy.diff(mu, N)).subs(N, Nz)),
               CostKind.RIF: sy.simplify(Nz / k)}


@pytest.mark.parametrize("kind", list(CostKind))
def test_mm1_service_arc_against_sympy_closed_form(kind):
    # M/M/1 cell (THEORY §4): ℓ(N) = (N + K)/μ̄, μ(N) = N/ℓ(N)
    mu_bar, K, k = sy.Rational(10), sy.Rational(5), sy.Rational(3)
    z, forms = _sympy_flow_view(lambda N, m, K_: m * N / (N + K_), lambda N, m, K_: (N + K_) / m,
                                mu_bar, K, k)
    f = forms[kind]
    arc = ServiceArc(kind, MM1Latency(10.0, 5.0), 3.0)
    for zv in (0.5, 3.0, 7.0, 9.5):
        assert float(arc.cost(zv)) == pytest.approx(float(f.subs(z, zv)), rel=1e-12)
        assert float(arc.cost_prime(zv)) == pytest.approx(
            float(sy.diff(f, z).subs(z, zv)), rel=1e-9)
        assert float(arc.potential(zv)) == pytest.approx(
            float(sy.integrate(f, (z, 0, sy.Rational(str(zv))))), rel=1e-9)
    if kind is CostKind.LATENCY:  # K/(μ̄ − z): exactly the MM1 family with u = μ̄, k = K
        assert sy.simplify(f - K / (mu_bar - z)) == 0
    assert float(arc.upper(1)[0]) == 10.0


def test_exp_saturation_service_arc_against_sympy_closed_form():
    # μ(N) = μ̄(1 − e^{−N/K}), ℓ = N/μ(N): at flow z, N = −K log(1 − z/μ̄) and ℓ = N/z
    mu_bar, K = sy.Rational(10), sy.Rational(5)
    z, forms = _sympy_flow_view(lambda N, m, K_: m * (1 - sy.exp(-N / K_)),
                                lambda N, m, K_: N / (m * (1 - sy.exp(-N / K_))),
                                mu_bar, K, sy.Integer(1))
    for kind in (CostKind.LATENCY, CostKind.GRADIENT):
        arc = ServiceArc(kind, ExpSaturation(10.0, 5.0))
        for zv in (0.5, 3.0, 8.0):
            assert float(arc.cost(zv)) == pytest.approx(float(forms[kind].subs(z, zv)),
                                                        rel=1e-9)


def _latency_at_flow(m, z):
    """ℓ(μ⁻¹(z)) with μ(N) = N/ℓ(N) = z solved by brentq on the model's latency."""
    if z == 0:
        return float(m.latency(0.0))
    N = brentq(lambda n: n / float(m.latency(n)) - z, 0.0, 1e6, xtol=1e-14, rtol=1e-15)
    return float(m.latency(N))


def test_softplus_service_arc_against_brentq_inversion():
    # no closed form: invert μ(N) = z independently of the library's inverse_rate
    m = SoftplusLatency(0.5, 0.05, 5.0, 1.0)  # μ̄ = 20 req/s
    arc = ServiceArc(CostKind.LATENCY, m)
    for zv in (1.0, 10.0, 15.0, 19.0):
        assert float(arc.cost(zv)) == pytest.approx(_latency_at_flow(m, zv), rel=1e-10)
        ref, _ = quad(lambda s: _latency_at_flow(m, s), 0.0, zv, epsabs=1e-11, epsrel=1e-11)
        assert float(arc.potential(zv)) == pytest.approx(ref, rel=1e-8)
    assert float(arc.upper(1)[0]) == pytest.approx(20.0)


def test_service_arc_has_no_cvx_form():
    s = ServiceArc(CostKind.LATENCY, SoftplusLatency(0.5, 0.05, 5.0, 1.0))
    with pytest.raises(ModelError, match=r"ServiceArc\(SoftplusLatency, cost 'latency'\) has "
                                         "no exact convex CVXPY form"):
        arc_objective(s, cp.Variable(1), "wardrop")
    with pytest.raises(ModelError, match="no exact convex CVXPY form"):
        bank_objective(ArcCostBank([affine(1.0, 1.0), s]), cp.Variable(2), "system_optimum")


def test_cvx_objective_option_is_validated():
    with pytest.raises(ModelError, match=r"objective must be 'wardrop' or 'system_optimum', "
                                         r"got 'nash'"):
        arc_objective(affine(1.0, 1.0), cp.Variable(1), "nash")


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
    with pytest.raises(ModelError, match="ServiceArc.kind must be one of 'rif', 'latency', "
                                         "'gradient', got 'speed'"):
        ServiceArc("speed", MM1Latency(10.0, 5.0))
