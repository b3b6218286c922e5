"""Nonlinear fluid model near the critical stepsize vs the linearisation; Lyapunov terms (§7.1)."""

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import cumulative_trapezoid

from lbtheory.errors import DynamicsStatus
from lbtheory.fluid import simulate_fluid
from lbtheory.instances import spill_example, symmetric_two_cell
from lbtheory.stability import (
    critical_stepsize,
    empirical_check,
    envelope_rate,
    lyapunov_terms,
    operating_point,
)


@pytest.fixture(scope="module")
def sym():
    net = symmetric_two_cell()
    return net, critical_stepsize(net, "gradient")


@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_symmetric_growth_rate_matches_rightmost_root(sym, factor):
    net, cr = sym
    ec = empirical_check(net, "gradient", factor * cr.critical_stepsize,
                         linearisation=cr.linearisation, t1=150.0, perturbation=1e-3)
    assert (ec.measured_rate < 0) == (factor < 1)
    assert ec.verdict == ("converges" if factor < 1 else "oscillates")
    assert ec.status is (DynamicsStatus.CONVERGED if factor < 1 else DynamicsStatus.OSCILLATING)
    assert abs(ec.measured_rate - ec.predicted_rate) < 0.1 * abs(ec.predicted_rate)


@pytest.mark.parametrize("factor", [0.6, 1.5])
def test_spill_growth_rate_matches_rightmost_root(factor):
    net = spill_example()
    cr = critical_stepsize(net, "gradient")
    # perturbation small enough that frontend c2 stays at its vertex (cost gap 0.196 s)
    ec = empirical_check(net, "gradient", factor * cr.critical_stepsize,
                         linearisation=cr.linearisation, t1=300.0, perturbation=1e-4)
    assert abs(ec.measured_rate - ec.predicted_rate) < 0.05 * abs(ec.predicted_rate)


def test_envelope_rate_of_a_damped_cosine():
    t = np.linspace(0, 50, 20001)
    assert envelope_rate(t, np.abs(np.exp(-0.07 * t) * np.cos(3 * t))) == pytest.approx(-0.07,
                                                                                          rel=1e-3)
    assert envelope_rate(t, np.exp(-0.5 * t)) == pytest.approx(-0.5, rel=1e-9)


def test_lyapunov_energy_balance_without_delay():
    """THEORY §7.1 (15) with zero delays and an interior routing holds with equality:
    V(0) − V(t) = ∫_0^t (Σ_j D_j + Σ_i λ_i S_i) ds, V = V_x + Φ. The fluid model (an independent
    part) supplies the trajectory; Φ is checked against sympy's exact antiderivative of the
    M/M/1 gradient cost f = (N + K)²/(μ̄K)."""
    net = symmetric_two_cell(delay=0.0)
    pt = operating_point(net, "gradient")
    eta = 0.3
    x0 = pt.routing.copy()
    x0[2, :2] = [0.7, 0.3]
    sol = simulate_fluid(net, cost="gradient", stepsize=eta, t1=20.0, dt=1e-3, x0=x0,
                         N0=pt.workload + np.array([2.0, -1.0, 0.0]))
    tr = lyapunov_terms(net, pt, sol.t, sol.workload, sol.routing, eta)
    assert np.all(tr.gap >= -1e-12) and np.all(tr.slackness >= -1e-12)
    u, N, Ns, mbar, K = sp.symbols("u N Ns mubar K", positive=True)
    f = (u + K) ** 2 / (mbar * K)
    phi = sp.lambdify((N, Ns, mbar, K), sp.integrate(f - f.subs(u, Ns), (u, Ns, N)))
    W = np.asarray(sol.workload)
    exact = sum(phi(W[:, j], pt.workload[j], 10.0, 5.0) for j in range(2))
    np.testing.assert_allclose(tr.workload_potential, exact, rtol=1e-12, atol=1e-14)
    V = tr.routing_potential + tr.workload_potential
    lost = (tr.t - tr.t[0]) * tr.running_average + cumulative_trapezoid(tr.slackness, tr.t,
                                                                          initial=0.0)
    # saved every 0.02 s: the trapezoid rule on that grid limits the balance to ~4e-5·V(0)
    assert np.max(np.abs((V[0] - V) - lost)) < 2e-4 * V[0]
    assert V[-1] < 2e-3 * V[0] and np.all(np.diff(V) <= 1e-12)
    # Theorem 1's left side: (1/T)∫ΣD ≤ V(0)/T, so the running average falls like 1/T
    assert np.all(tr.running_average[1:] * (tr.t[1:] - tr.t[0]) <= V[0] * (1 + 1e-6))
