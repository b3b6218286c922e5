"""Herding of discrete routing and the exact critical stepsize of flow routing (THEORY §3, §7.5)."""

import numpy as np
import pytest

from lbtheory.fluid import simulate_fluid
from lbtheory.instances import symmetric_two_cell

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
