"""The fluid integrator's delay scheme on scalar oracles (THEORY §7.4, §12)."""

import numpy as np
import pytest

from lbtheory.errors import ModelError
from lbtheory.fluid._dde import solve_dde


def _amplitudes(k: float, tau: float, t1: float) -> tuple[float, float]:
    t, y = solve_dde(lambda y, yd: -k * yd, lambda s: np.array([1.0]), delay=tau, t1=t1,
                     dt=5e-3, save_every=10)
    y = np.abs(y[:, 0])
    S = len(y)
    return float(y[S // 4: S // 2].max()), float(y[3 * S // 4:].max())


@pytest.mark.parametrize("ratio, decays", [(0.95, True), (1.05, False)])
def test_hayes_limit_k_tau_pi_over_2(ratio, decays):
    """x' = −k x(t − τ) is asymptotically stable iff kτ < π/2 (Hayes)."""
    tau = 0.5
    k = ratio * (np.pi / 2) / tau
    early, late = _amplitudes(k, tau, 60.0)
    assert (late < 0.5 * early) if decays else (late > 1.5 * early)


def test_sine_history_stays_on_sine():
    """y' = y(t − 3π/2) with history sin t has the solution sin t (delay not a multiple of dt)."""
    t, y = solve_dde(lambda y, yd: yd, lambda s: np.array([np.sin(s)]), delay=1.5 * np.pi,
                     t1=20.0, dt=1e-3, save_every=100)
    assert np.max(np.abs(y[:, 0] - np.sin(t))) < 1e-5


def test_second_order_convergence():
    """Errors fall ≈4× per halving of dt (empirical order 2)."""
    errs, dts = [], (0.04, 0.02, 0.01, 0.005)
    for dt in dts:
        t, y = solve_dde(lambda y, yd: yd, lambda s: np.array([np.sin(s)]), delay=1.5 * np.pi,
                         t1=10.0, dt=dt, save_every=1)
        errs.append(np.max(np.abs(y[:, 0] - np.sin(t))))
    order = np.polyfit(np.log(dts), np.log(errs), 1)[0]  # φ = τ/dt − ⌊τ/dt⌋ varies with dt
    assert abs(order - 2.0) < 0.2, (order, errs)


def test_zero_delay_is_plain_heun():
    """τ = 0: y' = −y, Heun's amplification factor 1 − h + h²/2 per step (closed form)."""
    h = 0.01
    t, y = solve_dde(lambda y, yd: -yd, lambda s: np.array([1.0]), delay=0.0, t1=1.0, dt=h)
    np.testing.assert_allclose(y[:, 0], (1 - h + h * h / 2) ** np.arange(len(t)), rtol=1e-12)


def test_bad_arguments_raise():
    with pytest.raises(ModelError, match="need delay"):
        solve_dde(lambda y, yd: yd, lambda s: np.array([0.0]), delay=-1.0, t1=1.0, dt=0.1)
    with pytest.raises(ModelError, match="whole number of steps"):
        solve_dde(lambda y, yd: yd, lambda s: np.array([0.0]), delay=0.1, t1=1.05, dt=0.1)
