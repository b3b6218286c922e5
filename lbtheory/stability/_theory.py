"""What theory says about the stepsize (THEORY §7.1, §7.2, §7.5).

* Theorem 1 of DLB: its *form* and scaling only — the constants η₀(τ), G₁(τ), K are not public
  (THEORY §0, §13.1); :func:`theorem1_form` reports the computable ingredients and says so.
* The Lyapunov quantities of §7.1 [R] evaluated along a fluid trajectory
  (:func:`lyapunov_terms`), so the time-average workload gap can be watched against 1/T.
* The closed-form threshold of the symmetric two-cell case [D] (§7.5, :func:`two_cell_threshold`,
  :func:`symmetric_threshold`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from scipy.optimize import brentq

from ..costs import cell_cost, static_cost
from ..network import CellNetwork
from ._linearise import OperatingPoint

__all__ = ["TwoCellThreshold", "two_cell_threshold", "symmetric_threshold", "Theorem1Form",
           "theorem1_form", "LyapunovTrace", "lyapunov_terms"]


@dataclasses.dataclass(frozen=True)
class TwoCellThreshold:
    """Closed-form threshold of ``s² + a s + K e^{−sT} = 0`` (THEORY §7.5) [D].

    Attributes:
        theta: θ ∈ (0, π/2) solving θ tan θ = aT.
        k_crit: K_crit = θ²/(T² cos θ) (1/s²).
        eta_crit: K_crit / (Λ f'(N*)): the critical stepsize.
        omega: crossing frequency θ/T (rad/s); period 2π/ω.
        eta_lower, eta_upper: the bounds a/T ≤ K_crit ≤ (π/2) a/T, as stepsizes.
    """

    theta: float
    k_crit: float
    eta_crit: float
    omega: float
    eta_lower: float
    eta_upper: float

    @property
    def period(self) -> float:
        """2π/ω (s)."""
        return 2 * math.pi / self.omega


def two_cell_threshold(a: float, T: float, total_rate: float, cost_prime: float
                       ) -> TwoCellThreshold:
    """Critical stepsize of the symmetric two-cell loop, closed form (THEORY §7.5) [D].

    Args:
        a: μ'(N*) (1/s).
        T: loop delay 2τ (s), τ the one-way delay.
        total_rate: Λ (req/s).
        cost_prime: f'(N*) (cost units per request).
    """
    aT = a * T
    theta = brentq(lambda th: th * math.tan(th) - aT, 0.0, math.pi / 2 - 1e-15, xtol=1e-15,
                   rtol=4 * np.finfo(float).eps) if aT > 0 else 0.0
    k = theta**2 / (T**2 * math.cos(theta)) if aT > 0 else 0.0
    gain = total_rate * cost_prime
    return TwoCellThreshold(theta=theta, k_crit=k, eta_crit=k / gain, omega=theta / T,
                            eta_lower=a / (T * gain), eta_upper=0.5 * math.pi * a / (T * gain))


def symmetric_threshold(net: CellNetwork, point: OperatingPoint, *,
                        rtol: float = 1e-9) -> TwoCellThreshold | None:
    """The §7.5 closed form when it applies, else None.

    It applies when exactly two cells are used, every source with demand splits over both, all
    used arcs have the same one-way delay τ, and the two cells have equal μ'(N*) and f'(N*)
    (identical cells in a symmetric equilibrium).
    """
    lam = net.arrival_rates
    used = np.flatnonzero(point.support.any(axis=0))
    src = np.flatnonzero(lam > 0)
    if used.size != 2 or not all(point.support[i, used].all() for i in src):
        return None
    taus = net.delays[np.ix_(src, used)]
    a, fp = point.rate_prime[used], point.cost_prime[used]

    def same(v: np.ndarray) -> bool:
        return bool(np.all(np.abs(v - v.flat[0]) <= rtol * max(abs(v.flat[0]), 1e-300)))

    if not (same(taus) and same(a) and same(fp)) or taus.flat[0] <= 0:
        return None
    return two_cell_threshold(float(a[0]), 2 * float(taus.flat[0]), float(lam.sum()),
                              float(fp[0]))


@dataclasses.dataclass(frozen=True)
class Theorem1Form:
    """DLB Theorem 1, form only (THEORY §7.2) — constants NOT available.

    ``(1/T)∫_0^T Σ_j D_j dt ≤ Λ/(T η_min) + G₁(τ) η̄ + K/T`` for ``η̄ ≤ η₀(τ)``, with
    ``η₀(τ) ∝ 1/(rate-weighted delay)`` and ``G₁(τ) → 0`` as τ → 0 [R]. Only the scaling and the
    first term are computable; η₀, G₁ and K are unknown, so no numerical stepsize bound follows.

    Attributes:
        rate_weighted_delay: Σ λ_i x*_ij τ_ij / Λ (s), the delay η₀ scales inversely with.
        max_delay: τ̄ (s).
        total_rate: Λ (req/s).
        statement: the theorem's form in words.
    """

    rate_weighted_delay: float
    max_delay: float
    total_rate: float
    statement: str

    def first_term(self, horizon: float, eta_min: float) -> float:
        """Λ/(T η_min), the only explicit term of the bound (cost-units² per s, see §7.2)."""
        return self.total_rate / (horizon * eta_min)


def theorem1_form(net: CellNetwork, point: OperatingPoint) -> Theorem1Form:
    """The computable ingredients of Theorem 1 at an equilibrium (THEORY §7.2) [R]."""
    lam = net.arrival_rates
    Lam = float(lam.sum())
    tw = float(np.sum(lam[:, None] * point.routing * net.delays) / Lam)
    text = ("DLB Theorem 1 (form only; constants eta_0(tau), G_1(tau), K not public): for "
            "eta_i <= eta_0(tau), (1/T) int_0^T sum_j D_j dt <= Lambda/(T eta_min) + "
            "G_1(tau) eta_max + K/T, with eta_0 proportional to 1/(rate-weighted delay) [R]. "
            "A time-average statement, not local asymptotic stability.")
    return Theorem1Form(rate_weighted_delay=tw, max_delay=net.max_delay, total_rate=Lam,
                        statement=text)


@dataclasses.dataclass(frozen=True)
class LyapunovTrace:
    """THEORY §7.1 quantities along a trajectory [R].

    Attributes:
        t: times (s).
        gap: Σ_j D_j(N_j(t)), D_j = (f_j(N) − f_j(N*))(μ_j(N) − μ_j(N*)) ≥ 0.
        running_average: (1/t) ∫_0^t gap — Theorem 1 bounds it by O(1/T) + O(η̄).
        routing_potential: V_x = Σ_i λ_i/(2η_i) ‖x_i − x*_i‖².
        workload_potential: Φ = Σ_j ∫_{N*_j}^{N_j} (f_j(u) − f_j(N*_j)) du.
        slackness: Σ_i λ_i S_i(x(t)), S_i = Σ_j x_ij c*_ij − c*_i ≥ 0.
    """

    t: np.ndarray
    gap: np.ndarray
    running_average: np.ndarray
    routing_potential: np.ndarray
    workload_potential: np.ndarray
    slackness: np.ndarray


_GL_X, _GL_W = np.polynomial.legendre.leggauss(16)


def lyapunov_terms(net: CellNetwork, point: OperatingPoint, t: Any, workload: Any, routing: Any,
                   stepsizes: Any) -> LyapunovTrace:
    """Evaluate the §7.1 Lyapunov quantities on a trajectory (e.g. from ``simulate_fluid``).

    Args:
        t: (T,) times (s), increasing.
        workload: (T, n) workloads (requests).
        routing: (T, n, n) routing matrices.
        stepsizes: scalar or (n,) stepsizes η_i.
    """
    t = np.asarray(t, dtype=float)
    N = np.asarray(workload, dtype=float)
    X = np.asarray(routing, dtype=float)
    cost, lam = point.cost, net.arrival_rates
    eta = np.broadcast_to(np.asarray(stepsizes, dtype=float), (net.n,))
    Ns = point.workload
    f = np.asarray(cell_cost(cost, net.models, N, net.replicas), dtype=float)
    fs = np.asarray(cell_cost(cost, net.models, Ns, net.replicas), dtype=float)
    mu = np.asarray(net.models.rate(N), dtype=float)
    mus = np.asarray(net.models.rate(Ns), dtype=float)
    gap = np.sum((f - fs) * (mu - mus), axis=1)
    area = np.concatenate([[0.0], np.cumsum(0.5 * (gap[1:] + gap[:-1]) * np.diff(t))])
    span = t - t[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        avg = np.where(span > 0, area / np.where(span > 0, span, 1.0), gap)
    dx = X - point.routing[None]
    src = lam > 0
    vx = np.sum((lam[src] / (2 * eta[src])) * np.sum(dx[:, src] ** 2, axis=2), axis=1)
    u = Ns + (N - Ns)[..., None, :] * (0.5 * (_GL_X[:, None] + 1.0))
    fu = np.asarray(cell_cost(cost, net.models, u, net.replicas), dtype=float) - fs
    phi = np.sum(0.5 * (N - Ns) * np.einsum("k,tkn->tn", _GL_W, fu), axis=1)
    cstar_ij = fs[None, :] + np.asarray(static_cost(cost, net.delays), dtype=float)
    cmin = np.where(src, point.min_cost, 0.0)
    S = np.sum(X * np.where(net.adjacency, cstar_ij, 0.0)[None], axis=2) - cmin[None]
    slack = np.sum(lam[src] * S[:, src], axis=1)
    return LyapunovTrace(t=t, gap=gap, running_average=avg, routing_potential=vx,
                         workload_potential=phi, slackness=slack)
