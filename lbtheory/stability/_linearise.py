"""Linearisation of the delayed fluid dynamics (8)–(9) at an equilibrium (THEORY §7.6) [D].

Around an equilibrium with support ``S_i = {j : x*_ij > 0}`` and *strict* complementarity
(``c_ij(N*_j) > c*_i`` off the support) the projected routing dynamics are linear:

    δx'_ij(t) = −η_i [ f'_j δN_j(t − τ_ij) − (1/|S_i|) Σ_{k∈S_i} f'_k δN_k(t − τ_ik) ],   j ∈ S_i
    δN'_j(t)  = Σ_{i : j∈S_i} λ_i δx_ij(t − τ_ij) − μ'_j(N*_j) δN_j(t).

Two families of zero roots are structural and are removed by reduced coordinates, not by
filtering eigenvalues: (1) Σ_j δx_ij is conserved — each source's routing is written in an
orthonormal basis ``U_i`` of ``{v : Σ_j v_j = 0}``; (2) routing directions that change no delayed
inflow term (the common kernel of the per-delay inflow maps) never feed back — the routing state
is projected onto the orthogonal complement of that kernel. A remaining family (inflow-neutral
only in total, possible when routing is non-unique and delays differ, e.g. RIF cost) is counted
exactly as the nullity of Δ(0) and removed by count (:func:`~._dde.rightmost_roots`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .._checks import validate_stepsize
from ..costs import CostKind, cell_cost, cell_cost_prime, static_cost
from ..errors import BoundaryEquilibriumError, StepsizeError
from ..network import CellNetwork
from ._dde import LinearDDE, structural_zero_count

__all__ = ["OperatingPoint", "Linearisation", "operating_point", "linearise", "empirical_rule"]



@dataclasses.dataclass(frozen=True)
class OperatingPoint:
    """A polished equilibrium with its support (THEORY Definition 1).

    Attributes:
        cost: the cost signal.
        routing: x* (n×n, rows = sources).
        workload: N* (requests), one per cell.
        min_cost: c*_i per source (nan for sources without demand).
        support: boolean n×n mask of the arcs with x*_ij > 0 (sources with λ_i > 0 only).
        cost_prime: f'_j(N*_j) (s/request, or 1/replica for RIF).
        rate_prime: μ'_j(N*_j) (1/s).
        residual: max-norm of the Definition-1 equations after polishing.
    """

    cost: CostKind
    routing: np.ndarray
    workload: np.ndarray
    min_cost: np.ndarray
    support: np.ndarray
    cost_prime: np.ndarray
    rate_prime: np.ndarray
    residual: float


def _f(net: CellNetwork, cost: CostKind, N: np.ndarray) -> np.ndarray:
    return np.asarray(cell_cost(cost, net.models, N, net.replicas), dtype=float)


def _fprime(net: CellNetwork, cost: CostKind, N: np.ndarray) -> np.ndarray:
    return np.asarray(cell_cost_prime(cost, net.models, N, net.replicas), dtype=float)


def operating_point(net: CellNetwork, cost: CostKind | str, *, equilibrium: Any = None,
                    support_rtol: float | None = None,
                    boundary_tol: float | None = None) -> OperatingPoint:
    """Equilibrium, its support and the derivatives f'_j, μ'_j at N*.

    The equilibrium (``solve_equilibrium(net, cost)`` when not given; any object with ``routing``
    and ``workload``) is polished by the equilibrium package's Newton method on the KKT system
    restricted to its tied arcs (:func:`lbtheory.equilibrium.polish_on_support`), so the
    linearisation is accurate to ~1e-12 rather than to the solver tolerance. An
    :class:`~lbtheory.equilibrium.EquilibriumResult` that is already polished is used as is
    (unless a tied arc carries no flow and the routing must move inside the equilibrium face).

    Args:
        support_rtol: relative cost gap under which an arc is tied (default
            :data:`lbtheory.equilibrium._polish.SUPPORT_RTOL`, 1e-4).
        boundary_tol: routing weight / relative cost gap at or below which an arc is
            degenerate (default :data:`~lbtheory.equilibrium._polish.BOUNDARY_TOL`, 1e-8).

    Raises:
        InfeasibleDemandError: Assumption 2 fails.
        BoundaryEquilibriumError: an arc with x*_ij = 0 has c_ij = c*_i (no strict
            complementarity); the message names the arcs.
    """
    # the equilibrium package (CVXPY) is imported only when an operating point is needed
    from ..equilibrium import EquilibriumResult, polish_on_support, solve_equilibrium
    from ..equilibrium._polish import BOUNDARY_TOL, SUPPORT_RTOL

    support_rtol = SUPPORT_RTOL if support_rtol is None else support_rtol
    boundary_tol = BOUNDARY_TOL if boundary_tol is None else boundary_tol
    cost = CostKind.parse(cost)
    net.check_feasibility()
    if equilibrium is None:
        equilibrium = solve_equilibrium(net, cost)
    polished = isinstance(equilibrium, EquilibriumResult) and equilibrium.polished
    pt = polish_on_support(net, cost, np.asarray(equilibrium.routing, dtype=float),
                           np.asarray(equilibrium.workload, dtype=float),
                           support_rtol=support_rtol, boundary_tol=boundary_tol,
                           polished=polished)
    routing, N, cstar, supp = pt.routing, pt.workload, pt.min_cost, pt.support
    lam = net.arrival_rates
    active = (lam > 0)[:, None] & net.adjacency
    g = np.asarray(static_cost(cost, net.delays), dtype=float)
    C = np.where(net.adjacency, _f(net, cost, N)[None, :] + g, np.inf)
    with np.errstate(invalid="ignore"):
        gap = (C - np.where(np.isfinite(cstar), cstar, 0.0)[:, None]) / np.maximum(
            np.abs(np.nan_to_num(cstar)), 1e-12)[:, None]
    degenerate = (supp & (routing <= boundary_tol)) | (active & ~supp & (gap <= boundary_tol))
    if degenerate.any():
        names = net.names
        arcs = tuple((names[i], names[j]) for i, j in zip(*np.nonzero(degenerate)))
        desc = ", ".join(f"{a} -> {b} (x*={routing[net.index(a), net.index(b)]:.3g}, "
                         f"c-c*={C[net.index(a), net.index(b)] - cstar[net.index(a)]:.3g})"
                         for a, b in arcs)
        raise BoundaryEquilibriumError(
            f"equilibrium on the boundary: arcs {desc} carry no flow but cost exactly the "
            f"minimum c*_i, so strict complementarity fails and the linearisation is not "
            f"defined (THEORY §7.6); perturb demand or delays", arcs=arcs)
    return OperatingPoint(cost=cost, routing=routing, workload=N, min_cost=cstar, support=supp,
                          cost_prime=_fprime(net, cost, N),
                          rate_prime=np.asarray(net.models.rate_prime(N), dtype=float),
                          residual=pt.residual)


@dataclasses.dataclass(frozen=True)
class Linearisation:
    """The linear DDE of the fluid model at an equilibrium, as a function of the stepsize scale.

    For a common scale ``c`` the stepsizes are ``η_i = c · weights[i]``; the DDE is
    ``fixed + c · per_scale`` (same delays). State: reduced routing coordinates, then δN
    (all cells).

    Attributes:
        point: the operating point.
        weights: stepsize weight per cell (only sources with free routing matter).
        free_sources: indices of sources with λ_i > 0 and |S_i| ≥ 2.
        fixed, per_scale: the two parts of the DDE.
        routing_dim: dimension of the reduced routing state.
        conserved_removed: modes removed by the simplex basis (one per free source).
        neutral_removed: inflow-neutral routing directions removed by the quotient.
        structural_zeros: remaining exact zero roots (nullity of Δ(0)), removed by count.
    """

    point: OperatingPoint
    weights: np.ndarray
    free_sources: tuple[int, ...]
    fixed: LinearDDE
    per_scale: LinearDDE
    routing_dim: int
    conserved_removed: int
    neutral_removed: int
    structural_zeros: int

    def dde(self, scale: float) -> LinearDDE:
        """The DDE at stepsizes η_i = scale · weights[i]."""
        return LinearDDE(a0=self.fixed.a0 + scale * self.per_scale.a0, delays=self.fixed.delays,
                         mats=self.fixed.mats + scale * self.per_scale.mats)


def _simplex_basis(m: int) -> np.ndarray:
    """Orthonormal m×(m−1) basis of {v ∈ ℝ^m : Σ v = 0}."""
    q, _ = np.linalg.qr(np.concatenate([np.ones((m, 1)), np.eye(m)[:, : m - 1]], axis=1))
    return q[:, 1:m]


def linearise(net: CellNetwork, cost: CostKind | str = "gradient", *,
              weights: Any = None, equilibrium: Any = None,
              point: OperatingPoint | None = None) -> Linearisation:
    """Linearise the delayed flow-routing fluid model at its equilibrium (THEORY §7.6) [D].

    Args:
        net: the cell network.
        cost: cost signal (``"gradient"``, ``"latency"``, ``"rif"``).
        weights: per-source stepsize weights (η_i = scale · weights[i]); default all ones.
        equilibrium: an equilibrium to use instead of solving one.
        point: a precomputed :class:`OperatingPoint` (skips the equilibrium).

    Raises:
        StepsizeError: a weight is not positive.
        BoundaryEquilibriumError, InfeasibleDemandError: see :func:`operating_point`.
    """
    cost = CostKind.parse(cost)
    pt = point if point is not None else operating_point(net, cost, equilibrium=equilibrium)
    n, lam = net.n, net.arrival_rates
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float).reshape(-1)
    if w.shape != (n,):
        raise StepsizeError(f"weights: expected {n} stepsize weights (one per cell), got "
                            f"shape {np.shape(weights)}")
    for i, wi in enumerate(w):
        validate_stepsize(wi, f"weights[{net.names[i]!r}]")
    free = tuple(int(i) for i in range(n) if lam[i] > 0 and pt.support[i].sum() >= 2)
    blocks, off = {}, 0
    for i in free:
        cols = np.flatnonzero(pt.support[i])
        blocks[i] = (cols, _simplex_basis(cols.size), off)
        off += cols.size - 1
    W = off
    delays = sorted({float(net.delays[i, j]) for i in free for j in blocks[i][0]} | {0.0})
    key = {d: k for k, d in enumerate(delays)}
    Gw = np.zeros((len(delays), W, n))   # routing rows, per unit scale
    Fn = np.zeros((len(delays), n, W))   # inflow rows
    for i in free:
        cols, U, o = blocks[i]
        for p, j in enumerate(cols):
            k = key[float(net.delays[i, j])]
            Gw[k, o:o + U.shape[1], j] -= w[i] * U[p] * pt.cost_prime[j]
            Fn[k, j, o:o + U.shape[1]] += lam[i] * U[p]
    # quotient by the common kernel of the per-delay inflow maps
    if W:
        _, sv, vt = np.linalg.svd(Fn.reshape(-1, W), full_matrices=False)
        r = int(np.sum(sv > 1e-12 * max(sv.max(initial=0.0), 1e-300)))
        Y = vt[:r].T
    else:
        r, Y = 0, np.zeros((0, 0))
    d = r + n
    fixed_terms, scale_terms = [], []
    for k, tau in enumerate(delays):
        A = np.zeros((d, d))
        A[r:, :r] = Fn[k] @ Y
        B = np.zeros((d, d))
        B[:r, r:] = Y.T @ Gw[k]
        fixed_terms.append((tau, A))
        scale_terms.append((tau, B))
    a_mu = np.zeros((d, d))
    a_mu[r:, r:] = -np.diag(pt.rate_prime)
    fixed_terms.append((0.0, a_mu))
    fixed = LinearDDE.from_terms(d, fixed_terms)
    per = LinearDDE.from_terms(d, scale_terms)
    per = _align(per, fixed)
    lin = Linearisation(point=pt, weights=w, free_sources=free, fixed=fixed, per_scale=per,
                        routing_dim=r, conserved_removed=len(free), neutral_removed=W - r,
                        structural_zeros=0)
    return dataclasses.replace(lin, structural_zeros=structural_zero_count(lin.dde(1.0)))


def _align(per: LinearDDE, fixed: LinearDDE) -> LinearDDE:
    """Express ``per`` on the delay grid of ``fixed`` (both were built from the same delays)."""
    mats = np.zeros_like(fixed.mats)
    for tau, A in zip(per.delays, per.mats):
        mats[int(np.argmin(np.abs(fixed.delays - tau)))] += A
    return LinearDDE(a0=per.a0, delays=fixed.delays, mats=mats)


def empirical_rule(net: CellNetwork, point: OperatingPoint,
                   weights: Any = None) -> tuple[float, np.ndarray]:
    """THEORY §7.6 empirical stepsize rule — an EMPIRICAL RULE, NOT A THEOREM [D].

    ``η_i^rule = min_{j∈S_i} μ'_j(N*_j) / (Λ_j f'_j(N*_j) · 2τ̄_i)`` with ``Λ_j`` the total rate of
    the sources using cell j and ``τ̄_i = max_{j∈S_i} τ_ij``. It held in every random test of
    THEORY §7.6 (hyperbolic cells, gradient cost) but is unproven. Only sources whose routing can
    move (λ_i > 0, |S_i| ≥ 2) are constrained; τ̄_i = 0 gives +inf.

    Returns:
        (common-scale rule min_i η_i^rule / weights[i], per-source η_i^rule with +inf elsewhere).
    """
    lam, n = net.arrival_rates, net.n
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    Lam_j = lam @ point.support
    per = np.full(n, np.inf)
    for i in range(n):
        cols = np.flatnonzero(point.support[i])
        if lam[i] <= 0 or cols.size < 2:
            continue
        tbar = float(net.delays[i, cols].max())
        if tbar <= 0:
            continue
        per[i] = float(np.min(point.rate_prime[cols]
                              / (Lam_j[cols] * point.cost_prime[cols] * 2.0 * tbar)))
    return float(np.min(per / w)), per
