"""Linear DDE spectra against closed forms (THEORY §7.4, §7.5, §12)."""

import math

import numpy as np
import pytest
from scipy.special import lambertw

from lbtheory.errors import ParameterError
from lbtheory.stability import (
    LinearDDE,
    critical_scale,
    newton_root,
    rightmost_roots,
    two_cell_threshold,
)


def scalar(k: float, tau: float) -> LinearDDE:
    """x'(t) = −k x(t − τ)."""
    return LinearDDE.from_terms(1, [(tau, np.array([[-k]]))])


def second_order(a: float, K: float, T: float) -> LinearDDE:
    """u'' + a u' + K u(t − T) = 0 as a first-order system (characteristic s² + as + Ke^{−sT})."""
    a0 = np.array([[0.0, 1.0], [0.0, -a]])
    a1 = np.array([[0.0, 0.0], [-K, 0.0]])
    return LinearDDE.from_terms(2, [(0.0, a0), (T, a1)])


@pytest.mark.parametrize("tau", [0.05, 1.0, 7.0])
def test_hayes_critical_gain(tau):
    cross = critical_scale(lambda k: scalar(k, tau), start=0.3 / tau)
    assert cross.verified
    assert abs(cross.scale * tau - math.pi / 2) < 1e-6
    # crossing at s = ±ik: period 4τ
    assert abs(cross.root.imag - cross.scale) < 1e-6 * cross.scale
    assert abs(2 * math.pi / cross.root.imag - 4 * tau) < 1e-6 * tau


@pytest.mark.parametrize("a,b", [(0.0, 1.0), (0.5, 2.0), (-0.5, 2.0), (1.0, 1.5), (-2.0, 3.0)])
def test_critical_delay_closed_form(a, b):
    """x' = −a x − b x(t − τ), b > |a|: τ* = arccos(−a/b)/√(b² − a²)."""
    def family(tau):
        return LinearDDE.from_terms(1, [(0.0, np.array([[-a]])), (tau, np.array([[-b]]))])

    cross = critical_scale(family, start=0.1)
    expected = math.acos(-a / b) / math.sqrt(b * b - a * a)
    assert cross.verified
    assert abs(cross.scale - expected) < 1e-8 * expected
    assert abs(cross.root.imag - math.sqrt(b * b - a * a)) < 1e-7


@pytest.mark.parametrize("k,tau", [(0.2, 1.0), (1 / math.e, 1.0), (0.5, 0.1), (1.0, 1.0),
                                   (1.4, 1.0), (3.0, 0.3)])
def test_rightmost_root_is_lambert_w(k, tau):
    rs = rightmost_roots(scalar(k, tau))
    # at kτ = 1/e the root is double, s = −1/τ (W₀(−1/e) = −1; scipy returns nan there)
    expected = complex(lambertw(-k * tau, 0)) / tau if k * tau != 1 / math.e else -1.0 / tau
    r = rs.rightmost
    if k * tau < 1 / math.e - 1e-12:  # real root (non-oscillatory)
        assert abs(r.imag) < 1e-12
    assert abs(r - complex(expected.real, abs(expected.imag))) < 1e-7 * max(1.0, abs(expected))


def test_collocation_converges_spectrally_without_newton():
    k, tau = 1.0, 1.0
    exact = complex(lambertw(-k * tau, 0))
    errs = [abs(rightmost_roots(scalar(k, tau), n_nodes=n, refine=False).rightmost - exact)
            for n in (4, 8, 16)]
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 1e-9


def test_newton_refines_a_rough_guess():
    s, ok = newton_root(scalar(1.0, 1.0), complex(-0.3, 1.3))
    assert ok
    assert abs(s - complex(lambertw(-1.0, 0))) < 1e-13


def test_ode_case_is_matrix_eigenvalues():
    a0 = np.array([[-1.0, 2.0], [-3.0, -0.5]])
    rs = rightmost_roots(LinearDDE.from_terms(2, [(0.0, a0)]))
    ev = np.linalg.eigvals(a0)
    assert abs(rs.abscissa - ev.real.max()) < 1e-12


def test_structural_zero_removed_by_count():
    # y1' = −y1(t − 1), y2' = 0 · (a conserved direction): the zero root is structural
    a1 = np.array([[-1.0, 0.0], [0.0, 0.0]])
    rs = rightmost_roots(LinearDDE.from_terms(2, [(1.0, a1)]))
    assert rs.structural_zeros == 1
    assert abs(rs.rightmost - complex(lambertw(-1.0, 0))) < 1e-10


def test_equal_delays_are_merged():
    dde = LinearDDE.from_terms(1, [(0.5, np.array([[-1.0]])), (0.5, np.array([[-0.5]]))])
    assert dde.delays.tolist() == [0.5]
    assert dde.mats[0, 0, 0] == -1.5


def test_second_order_threshold_matches_table():
    """THEORY §7.5 table: aT = 1 → K_crit T² = 1.134915 (θ tan θ = aT)."""
    a, T = 2.0, 0.5
    closed = two_cell_threshold(a, T, total_rate=1.0, cost_prime=1.0)
    assert abs(closed.theta * math.tan(closed.theta) - a * T) < 1e-13
    assert abs(closed.k_crit * T * T - 1.134915) < 5e-7
    cross = critical_scale(lambda K: second_order(a, K, T), start=1.0)
    assert abs(cross.scale - closed.k_crit) < 1e-9 * closed.k_crit
    assert abs(cross.root.imag - closed.omega) < 1e-8 * closed.omega


@pytest.mark.parametrize("aT,ratio", [(0.001, 1.0002), (0.1, 1.0163), (10.0, 1.4434),
                                      (100.0, 1.5554)])
def test_second_order_ratio_table(aT, ratio):
    """THEORY §7.5: K_crit T²/(aT) tends to 1 (aT → 0) and π/2 (aT → ∞)."""
    T = 0.1
    a = aT / T
    cross = critical_scale(lambda K: second_order(a, K, T), start=a / T)
    assert abs(cross.scale * T * T / aT - ratio) < 1e-4


@pytest.mark.parametrize("bad", [0, 1, 2.5, "8"])
def test_bad_node_count(bad):
    with pytest.raises(ParameterError, match=rf"n_nodes must be an integer >= 2 \(Chebyshev "
                                             rf"degree\), got {bad!r}"):
        rightmost_roots(scalar(1.0, 1.0), n_nodes=bad)


def test_newton_root_convergence_flag_matches_its_docstring():
    """Singular Δ at the start (s0 = −1 is the root of s + 1 = 0): a converged root. A Newton
    run cut off after one step far from the root: not converged. The Lambert-W root of
    x' = −k x(t − τ), s = W₀(−kτ)/τ, is found from nearby and flagged converged."""
    ode = LinearDDE.from_terms(1, [(0.0, np.array([[-1.0]])), (0.5, np.array([[0.0]]))])
    s, ok = newton_root(ode, -1.0)
    assert ok and s == -1.0
    k, tau = 1.0, 1.0
    exact = complex(lambertw(-k * tau, 0)) / tau
    s, ok = newton_root(scalar(k, tau), exact + 0.05)
    assert ok and abs(s - exact) < 1e-13
    far, ok = newton_root(scalar(k, tau), exact + 0.5, max_iterations=1)
    assert not ok
    with pytest.warns(DeprecationWarning, match=r"newton_root\(max_iter=...\) is deprecated"):
        assert newton_root(scalar(k, tau), exact + 0.5, max_iter=1) == (far, False)
