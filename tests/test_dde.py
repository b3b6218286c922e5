"""The fluid integrator's delay handling on closed-form oracles (THEORY §7.4, §12).

:func:`lbtheory.fluid._integrator.solve_dde` runs the fluid step's own history code (ring layout,
write-before-read, one gather of ``H[k + 1 − d]``, interpolation, carried reads) and Heun stages on
scalar equations; the last test runs :func:`simulate_fluid` itself with off-grid delays.
"""

import numpy as np
import pytest

from lbtheory.errors import ParameterError
from lbtheory.fluid import simulate_fluid, solve_dde
from lbtheory.instances import symmetric_two_cell


def _amplitudes(k: float, tau: float, t1: float) -> tuple[float, float]:
    t, y = solve_dde(lambda y, yd: -k * yd, lambda s: np.array([1.0]), delay=tau, t1=t1,
                     dt=5e-3, save_every=10)
    y = np.abs(y[:, 0])
    S = len(y)
    return float(y[S // 4: S // 2].max()), float(y[3 * S // 4:].max())


@pytest.mark.parametrize("ratio, decays", [(0.95, True), (1.05, False)])
def test_hayes_limit_k_tau_pi_over_2(ratio, decays):
    """x' = −k x(t − τ) is asymptotically stable iff kτ < π/2 (Hayes; τ = 100 steps)."""
    tau = 0.5
    k = ratio * (np.pi / 2) / tau
    early, late = _amplitudes(k, tau, 60.0)
    assert (late < 0.5 * early) if decays else (late > 1.5 * early)


def test_hayes_period_four_tau_at_the_limit():
    """At kτ = π/2 the roots are ±ik: a neutral oscillation of period 4τ (THEORY §7.4)."""
    tau, dt = 0.5, 2.5e-3
    t, y = solve_dde(lambda y, yd: -(np.pi / 2 / tau) * yd, lambda s: np.array([1.0]),
                     delay=tau, t1=30.0, dt=dt)
    late = t > 10.0
    up = t[late][1:][(y[late][1:, 0] > 0) & (y[late][:-1, 0] <= 0)]
    assert abs(np.median(np.diff(up)) / (4 * tau) - 1) < 2e-3


def test_sine_history_stays_on_sine():
    """y' = y(t − 3π/2) with history sin t has the solution sin t (delay not a multiple of dt)."""
    t, y = solve_dde(lambda y, yd: yd, lambda s: np.array([np.sin(s)]), delay=1.5 * np.pi,
                     t1=20.0, dt=1e-3, save_every=100)
    assert np.max(np.abs(y[:, 0] - np.sin(t))) < 1e-5


def test_second_order_convergence():
    """Errors fall ≈4× per halving of dt (empirical order 2) on the sin-history solution."""
    errs, dts = [], (0.04, 0.02, 0.01, 0.005)
    for dt in dts:
        t, y = solve_dde(lambda y, yd: yd, lambda s: np.array([np.sin(s)]), delay=1.5 * np.pi,
                         t1=10.0, dt=dt, save_every=1)
        errs.append(np.max(np.abs(y[:, 0] - np.sin(t))))
    order = np.polyfit(np.log(dts), np.log(errs), 1)[0]  # φ = τ/dt − ⌊τ/dt⌋ varies with dt
    assert abs(order - 2.0) < 0.2, (order, errs)


@pytest.mark.parametrize("dt", [0.01, 0.004, 0.003])
def test_first_step_local_error_is_third_order(dt):
    """One step of y' = y(t − τ), history sin: y(h) = cos τ − cos(h − τ) for h ≤ τ (closed form).

    Heun's truncation (≤ h³/12·max|y‴|) plus the history interpolation (≤ h·h²/8·max|sin″|)
    stay below h³; a wrong initial history read costs O(h²) here.
    """
    tau = 0.0123
    t, y = solve_dde(lambda y, yd: yd, lambda s: np.array([np.sin(s)]), delay=tau, t1=dt, dt=dt)
    assert abs(y[-1, 0] - (np.cos(tau) - np.cos(dt - tau))) < dt ** 3


def test_zero_delay_is_plain_heun():
    """τ = 0: y' = −y, Heun's amplification factor 1 − h + h²/2 per step (closed form)."""
    h = 0.01
    t, y = solve_dde(lambda y, yd: -yd, lambda s: np.array([1.0]), delay=0.0, t1=1.0, dt=h)
    np.testing.assert_allclose(y[:, 0], (1 - h + h * h / 2) ** np.arange(len(t)), rtol=1e-12)


def test_fluid_model_second_order_with_off_grid_delays():
    """The real fluid step with off-grid (interpolated) delays: error falls ≈4× per halving."""
    net = symmetric_two_cell()
    net = net.with_delays(np.where(net.adjacency, 0.0537, 0.0))  # τ/dt never a whole number
    kw = dict(stepsize=0.3, t1=2.0, N0=[8.0, 7.0, 0.0], delay_mode="interpolate")
    ref = simulate_fluid(net, dt=1.25e-4, save_every=800, **kw).workload  # every 0.1 s
    dts = (4e-3, 2e-3, 1e-3, 5e-4)
    errs = [np.max(np.abs(simulate_fluid(net, dt=dt, save_every=round(0.1 / dt), **kw)
                          .workload - ref)) for dt in dts]
    order = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    assert abs(order - 2.0) < 0.3, (order, errs)


def test_bad_arguments_raise():
    with pytest.raises(ParameterError, match=r"solve_dde: delay must be non-negative, got -1.0"):
        solve_dde(lambda y, yd: yd, lambda s: np.array([0.0]), delay=-1.0, t1=1.0, dt=0.1)
    with pytest.raises(ParameterError, match="whole number of steps"):
        solve_dde(lambda y, yd: yd, lambda s: np.array([0.0]), delay=0.1, t1=1.05, dt=0.1)
