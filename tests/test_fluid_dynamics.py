"""Herding of discrete routing and the exact critical stepsize of flow routing (THEORY §3, §7.5)."""

import numpy as np
import pytest

from lbtheory.errors import DynamicsStatus
from lbtheory.fluid import DECAY_RATIO, diagnose_trajectory, simulate_fluid, solve_dde
from lbtheory.instances import symmetric_two_cell
from lbtheory.models import MM1Latency
from lbtheory.network import Arc, Cell, CellNetwork
from lbtheory.stability import critical_stepsize

LAM, MUBAR, K, TAU = 12.0, 10.0, 5.0, 0.05


def test_discrete_routing_relay_limit_cycle():
    """Peak |N1 − N2| ≈ (λ/a)(1 − e^{−aT}) and period ≈ 4T, a = μ'(N*), T = 2τ (THEORY §3 [D])."""
    Nstar = K * (LAM / 2 / MUBAR) / (1 - LAM / 2 / MUBAR)  # hyperbolic N* = Kρ/(1 − ρ)
    a = MUBAR * K / (Nstar + K) ** 2
    T = 2 * TAU
    peak_theory = (LAM / a) * (1 - np.exp(-a * T))
    assert abs(peak_theory - 1.181) < 1e-3
    sol = simulate_fluid(symmetric_two_cell(), mechanism="discrete", t1=20.0, save_every=1,
                         N0=[8.0, 7.0, 0.0])
    late = sol.t > 10.0
    D = sol.workload[late, 0] - sol.workload[late, 1]
    assert abs(np.abs(D).max() / peak_theory - 1) < 0.02
    t = sol.t[late]
    crossings = t[1:][np.sign(D[1:]) != np.sign(D[:-1])]
    period = 2 * np.median(np.diff(crossings))
    assert abs(period / (4 * T) - 1) < 0.03
    # never converges: the mean workloads stay near N* but the difference does not vanish
    assert np.abs(D[-2000:]).max() > 0.5


@pytest.mark.parametrize("cost, eta_crit", [("gradient", 0.536158), ("latency", 2.68079),
                                            ("rif", 0.268079)])
@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_flow_routing_critical_stepsize(cost, eta_crit, factor):
    """Flow routing converges at 0.9·η_crit and oscillates at 1.1·η_crit (THEORY §7.5, [D])."""
    sol = simulate_fluid(symmetric_two_cell(), cost=cost, stepsize=factor * eta_crit, t1=60.0,
                         N0=[8.0, 7.0, 0.0], save_every=10)
    D = np.abs(sol.workload[:, 0] - sol.workload[:, 1])
    S = len(D)
    early, late = D[S // 4: S // 2].max(), D[3 * S // 4:].max()
    if factor < 1:
        assert late < 0.8 * early
    else:
        assert late > 1.25 * early


# ---- statuses on instances whose behaviour is known independently -------------------------------

def test_status_converged_below_and_oscillating_above_the_critical_stepsize():
    """η_crit from the linearised DDE's spectrum (lbtheory.stability), not from the fluid model."""
    net = symmetric_two_cell()
    eta_c = critical_stepsize(net, "gradient").critical_stepsize
    assert abs(eta_c - 0.536158) < 1e-5  # THEORY §12
    below = simulate_fluid(net, stepsize=0.8 * eta_c, t1=60.0, N0=[8.0, 7.0, 0.0])
    above = simulate_fluid(net, stepsize=1.2 * eta_c, t1=60.0, N0=[8.0, 7.0, 0.0])
    assert below.status is DynamicsStatus.CONVERGED
    assert above.status is DynamicsStatus.OSCILLATING


def test_status_of_discrete_routing_herding_is_oscillating():
    """Discrete routing never converges on the symmetric two-cell example (THEORY §3 [D])."""
    sol = simulate_fluid(symmetric_two_cell(), mechanism="discrete", t1=20.0,
                         N0=[8.0, 7.0, 0.0])
    assert sol.status is DynamicsStatus.OSCILLATING


@pytest.mark.parametrize("ratio, status", [(0.9, DynamicsStatus.CONVERGED),
                                           (1.1, DynamicsStatus.OSCILLATING)])
def test_status_of_the_scalar_delay_equation(ratio, status):
    """x' = −k x(t − τ): stable iff kτ < π/2 (Hayes, THEORY §7.4)."""
    tau = 0.5
    t, y = solve_dde(lambda y, yd: -(ratio * np.pi / 2 / tau) * yd, lambda s: np.array([1.0]),
                     delay=tau, t1=60.0, dt=5e-3, save_every=10)
    assert diagnose_trajectory(y)[0] is status


def _single_cell():
    """N' = λ − μ(N), hyperbolic μ = μ̄N/(N + K): a scalar autonomous ODE, so N is monotone."""
    svc = MM1Latency(capacity=MUBAR, K=K)
    return CellNetwork([Cell("a", 1, 5.0, svc)], [Arc("a", "a", 0.0)])


def test_status_max_steps_for_a_horizon_too_short_for_a_slow_approach():
    """From N0 = 0 the speed |N'| decays at most at rate max μ' = μ'(0) = μ̄/K = 2 s⁻¹, so over a
    quarter of t1 = 0.1 s it shrinks by at most e^{−0.05} = 0.95 > DECAY_RATIO: still moving."""
    assert np.exp(-(MUBAR / K) * 0.1 / 4) > DECAY_RATIO
    sol = simulate_fluid(_single_cell(), mechanism="discrete", t1=0.1)
    assert sol.status is DynamicsStatus.MAX_STEPS
    assert np.all(np.diff(sol.workload[:, 0]) > 0)


def test_status_converged_for_a_long_horizon_of_the_same_approach():
    """t1 = 60 s = 30 relaxation times 1/μ'(N*): settled at N* = Kρ/(1 − ρ) = 5 (closed form)."""
    sol = simulate_fluid(_single_cell(), mechanism="discrete", t1=60.0)
    assert sol.status is DynamicsStatus.CONVERGED
    assert abs(sol.workload[-1, 0] - K * 0.5 / (1 - 0.5)) < 1e-9


def test_status_diverged_for_a_non_finite_state():
    W = np.ones((40, 2))
    W[30, 1] = np.inf
    assert diagnose_trajectory(W)[0] is DynamicsStatus.DIVERGED
    sol = simulate_fluid(symmetric_two_cell(), stepsize=1.0, t1=0.1, N0=[1.0, 1e200, 0.0],
                         throw=False)
    assert sol.status is DynamicsStatus.DIVERGED and sol.to_dict()["status"] == "diverged"
