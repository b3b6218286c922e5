"""Nonlinear fluid model near the critical stepsize vs the linearisation; Lyapunov terms (§7.1)."""

import numpy as np
import pytest

from lbtheory.fluid import simulate_fluid
from lbtheory.instances import spill_example, symmetric_two_cell
from lbtheory.stability import (
    critical_stepsize,
    empirical_check,
    envelope_rate,
    linearise,
    lyapunov_terms,
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


def test_lyapunov_terms_along_a_converging_trajectory():
    net = symmetric_two_cell()
    lin = linearise(net, "rif")
    pt = lin.point
    eta = 0.1
    sol = simulate_fluid(net, cost="rif", stepsize=eta, t1=60.0, dt=1e-3,
                         N0=pt.workload + np.array([2.0, -1.0, 0.0]))
    tr = lyapunov_terms(net, pt, sol.t, sol.workload, sol.routing, eta)
    assert np.all(tr.gap >= -1e-12)
    assert np.all(tr.slackness >= -1e-12)  # S_i(x) ≥ 0 on the simplex
    # RIF, k = 1: Φ = Σ_j (N_j − N*_j)²/2 exactly
    W = np.asarray(sol.workload)
    assert np.allclose(tr.workload_potential, 0.5 * np.sum((W - pt.workload) ** 2, axis=1),
                       rtol=1e-10, atol=1e-12)
    # V_x = Σ_i λ_i/(2η) ‖x_i − x*_i‖²
    X = np.asarray(sol.routing)
    assert np.allclose(tr.routing_potential, 12.0 / (2 * eta) * np.sum((X[:, 2] - pt.routing[2])
                                                                       ** 2, axis=1))
    # the running average of Σ D_j is the cumulative mean and tends to 0 like 1/T
    T = tr.t[-1]
    assert tr.running_average[-1] == pytest.approx(
        np.trapezoid(tr.gap, tr.t) / T, rel=1e-12)
    assert tr.running_average[-1] < tr.running_average[len(tr.t) // 4]
    assert tr.gap[-1] < 1e-3 * tr.gap[0]
