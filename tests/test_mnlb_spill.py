"""MNLB as a balancer (issue 36 item 2): overload spilled in proportion to the capped
capacities, against hand-solved instances, at each headroom cap."""

from __future__ import annotations

import numpy as np
import pytest

from lbtheory.registry import make_router
from lbtheory.routers import MNLBProgram

DELAYS = np.array([[0.0, 0.05], [0.05, 0.0]])
CAP = np.array([10.0, 30.0])


@pytest.mark.parametrize("rho, x0", [
    # λ = (30, 10) = 40 req/s. Capped capacity ρ·(10 + 30):
    # ρ = 0.7: 28 → 1 + σ = 40/28, caps (10, 30)·0.7·40/28 = (10, 30): a keeps 10, sends 20
    (0.7, [10 / 30, 20 / 30]),
    # ρ = 0.8: 32 → the same caps (10, 30) (the overload fills the true capacities exactly)
    (0.8, [10 / 30, 20 / 30]),
    # ρ = 0.9: 36 → caps (10, 30) again: with Λ ≥ ρΣμ̄ the caps are μ̄·Λ/Σμ̄ whatever ρ is
    (0.9, [10 / 30, 20 / 30]),
])
def test_overload_is_spread_in_proportion_to_capacity(rho, x0):
    prog = MNLBProgram(np.ones((2, 2), bool), DELAYS, rho_max=rho)
    x = prog.solve(np.array([30.0, 10.0]), CAP)
    np.testing.assert_allclose(x[0], x0, atol=1e-4)
    np.testing.assert_allclose(x[1], [0.0, 1.0], atol=1e-4)
    assert float(prog.sigma.value) == pytest.approx(40.0 / (rho * 40.0) - 1.0, abs=1e-6)


@pytest.mark.parametrize("rho, x0", [
    # λ = (12, 10) = 22 ≤ ρ·40 at every cap: no overload; a keeps ρ·10 and spills the rest to b
    # (b's 10 + spill ≤ ρ·30)
    (0.7, [7 / 12, 5 / 12]),
    (0.8, [8 / 12, 4 / 12]),
    (0.9, [9 / 12, 3 / 12]),
])
def test_under_the_cap_it_is_the_minimum_network_latency_lp(rho, x0):
    prog = MNLBProgram(np.ones((2, 2), bool), DELAYS, rho_max=rho)
    x = prog.solve(np.array([12.0, 10.0]), CAP)
    np.testing.assert_allclose(x[0], x0, atol=1e-4)
    assert float(prog.sigma.value) == pytest.approx(0.0, abs=1e-6)


def test_overload_with_residency_spreads_over_what_each_source_may_use():
    # three cells, cap 10 each, ρ = 0.8 (8 usable); c may use only itself; λ = (20, 0, 8).
    # a and b share a's 20 req/s over 2·8 usable: 1 + σ = 20/16 (σ = 0.25), caps 10: a keeps
    # 10 and sends 10 to b; c keeps its 8 (under its raised cap of 10)
    mask = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]], bool)
    tau = np.array([[0, 0.02, 0], [0.02, 0, 0], [0, 0, 0]])
    prog = MNLBProgram(mask, tau, rho_max=0.8)
    x = prog.solve(np.array([20.0, 0.0, 8.0]), np.full(3, 10.0))
    np.testing.assert_allclose(x[0], [0.5, 0.5, 0.0], atol=1e-4)
    np.testing.assert_allclose(x[2], [0.0, 0.0, 1.0], atol=1e-4)
    assert float(prog.sigma.value) == pytest.approx(0.25, abs=1e-6)


def test_the_cap_is_a_registry_option():
    assert make_router("mnlb", rho_max=0.7).rho_max == 0.7
