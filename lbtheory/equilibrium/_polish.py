"""The one Newton polish of the equilibrium KKT system (THEORY §5, program (12)).

Interior-point solvers stop at a relative gap of ~1e-8, which leaves Definition-1 residuals of
1e-5 on steep potentials (inflows near capacity), and the tangent-cut approximation of
non-DCP potentials is exact only in the limit. Given approximate flows, we solve the KKT system
of program (12) restricted to a support S of used arcs,

    c_ij(N_j(z_j)) − c*_i = 0   for (i, j) ∈ S,      Σ_j f_ij − λ_i = 0   per source,

by Newton steps on (f_S, c*) with dc_ij/dz_j = f'_j(N_j)/μ'_j(N_j) (LU when S is a forest, else
least squares, so non-unique routings get the minimum-norm step). One core
(:func:`_kkt_residual`, :func:`_newton_step`), two entry points:

* :func:`polish_flows` (equilibrium solvers): a primal active-set loop from the support of a
  basic solution (a forest) — a step that would empty an arc stops at the boundary and drops the
  arc; an unused arc cheaper than c*_i joins the support. The caller keeps the result only if it
  lowers the residual.
* :func:`polish_on_support` (:mod:`lbtheory.stability`): keeps *every* arc tied with the cheapest
  (within ``support_rtol``), moving a routing with zero flow on a tied arc into the relative
  interior of the equilibrium face first, so that a non-unique equilibrium (RIF) is not mistaken
  for a boundary one; arcs whose flow turns negative are dropped and the solve repeated.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..costs import CostKind, cell_cost, cell_cost_prime, static_cost
from ..network import CellNetwork, min_cost_routing
from ._kkt import STALL_RTOL, active_set_newton, is_forest, spanning_forest  # noqa: F401

__all__ = ["polish_flows", "polish_on_support", "tied_support", "SupportPoint", "SUPPORT_RTOL",
           "BOUNDARY_TOL"]

#: Relative cost gap below which an arc counts as tied with the cheapest (polish_on_support).
SUPPORT_RTOL = 1e-4
#: Used arcs up to which polish_flows_workload tries a spanning forest of them before the LP.
SMALL_SUPPORT = 400
#: Routing weight at or below which a tied arc counts as empty (polish_on_support), and the
#: relative cost gap at or below which an unused arc is degenerate (stability).
BOUNDARY_TOL = 1e-8


def _cell_terms(net: CellNetwork, cost: CostKind, z: np.ndarray):
    N = np.asarray(net.models.inverse_rate(z), dtype=float)
    fc = np.asarray(cell_cost(cost, net.models, N, net.replicas), dtype=float)
    return N, fc


# ----------------------------------------------------------------------------- the Newton core
def _kkt_residual(net: CellNetwork, cost: CostKind, g: np.ndarray, I: np.ndarray, J: np.ndarray,
                  ri: np.ndarray, u: np.ndarray, c: np.ndarray, lam_s: np.ndarray):
    """KKT residual R = [c_ij − c*_i on the support; Σ_j f_ij − λ_i per source] at flows u.

    Returns (R, N, fc, relative residual): N = μ⁻¹(z), fc = f_j(N_j), the relative residual
    max(|R_cost|/|c*_i|, |R_demand|/λ_i).
    """
    s, r = len(I), len(lam_s)
    N, fc = _cell_terms(net, cost, np.bincount(J, u, net.n))
    R = np.concatenate([fc[J] + g[I, J] - c[ri], np.bincount(ri, u, r) - lam_s])
    with np.errstate(invalid="ignore"):
        rel = max(float(np.max(np.abs(R[:s]) / np.maximum(np.abs(c[ri]), 1e-300), initial=0.0)),
                  float(np.max(np.abs(R[s:]) / lam_s, initial=0.0)))
    return R, N, fc, rel if np.isfinite(rel) else np.inf


def _newton_step(net: CellNetwork, cost: CostKind, N: np.ndarray, J: np.ndarray,
                 ri: np.ndarray, R: np.ndarray) -> np.ndarray | None:
    """Newton step (du, dc) for the KKT system; None if the Jacobian is not finite.

    Jacobian: ∂(c_ij − c*_i)/∂f_kl = h_j [j = l] with h_j = f'_j(N_j)/μ'_j(N_j) (s/req per
    req/s), ∂/∂c*_i = −1; ∂(Σ_j f_ij)/∂f_ij = 1. LU when the support is a forest (the generic
    case), else least squares (minimum-norm step on a non-unique equilibrium face).
    """
    s, r = len(J), len(R) - len(J)
    h = np.asarray(cell_cost_prime(cost, net.models, N, net.replicas), dtype=float) / \
        np.asarray(net.models.rate_prime(N), dtype=float)
    Jac = np.zeros((s + r, s + r))
    Jac[:s, :s] = h[J][:, None] * (J[:, None] == J[None, :])
    Jac[np.arange(s), s + ri] = -1.0
    Jac[s + ri, np.arange(s)] = 1.0
    if not (np.all(np.isfinite(Jac)) and np.all(np.isfinite(R))):
        return None
    try:
        step = np.linalg.solve(Jac, -R)
        if not np.all(np.isfinite(step)) or \
                np.linalg.norm(Jac @ step + R) > 1e-8 * (1 + np.linalg.norm(R)):
            raise np.linalg.LinAlgError
    except np.linalg.LinAlgError:
        try:
            step = np.linalg.lstsq(Jac, -R, rcond=None)[0]
        except np.linalg.LinAlgError:
            return None
    return step


def _below_capacity(net: CellNetwork, J: np.ndarray, u: np.ndarray, du: np.ndarray, t: float,
                    clip: bool) -> float | None:
    """Largest t' ≤ t (halving) with every inflow below capacity after u + t'·du; None if none."""
    for _ in range(60):
        v = u + t * du
        if np.all(np.bincount(J, np.maximum(v, 0.0) if clip else v, net.n) < net.max_rates):
            return t
        t *= 0.5
    return None


# ----------------------------------------------------------------------------- forest support
def _near_cheapest(net: CellNetwork, fc: np.ndarray, g: np.ndarray, lam: np.ndarray,
                   rtol: float) -> np.ndarray:
    """Arcs (i, j) of sources with λ_i > 0 whose cost f_j + g_ij is within ``rtol``·|c*_i| of
    the source's cheapest arc (the one support test of this module)."""
    C = np.where(net.adjacency, fc[None, :] + g, np.inf)
    cmin = C.min(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):  # rows without arcs: inf − inf
        close = C - cmin <= rtol * np.maximum(np.abs(cmin), 1e-12)
    return net.adjacency & (lam[:, None] > 0) & close


def _initial_support(net: CellNetwork, cost: CostKind, F: np.ndarray, g: np.ndarray,
                     lam: np.ndarray, N0: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Support of a basic solution of the transportation LP  min Σ g_ij f_ij  subject to the
    solver's inflows z and the demands λ (:func:`lbtheory.network.min_cost_routing`).

    With the cell costs fixed by z, every equilibrium routing solves this LP; a basic solution
    has a forest as support (generically the equilibrium's), which interior-point flows — all
    slightly positive, with cycles among near-ties — do not give.
    """
    src, dst = net.arc_pairs
    # candidate arcs: within 2e-2 of the source's cheapest cost at the solver's inflows (the
    # LP over all n² arcs of a large mesh is slow), priced at the workloads N0; the restricted
    # flows fix the inflows.
    fc0 = np.asarray(cell_cost(cost, net.models, N0, net.replicas), dtype=float)
    near = _near_cheapest(net, fc0, g, lam, 2e-2) & (F > 0)
    Fc = np.where(near, F, 0.0)
    rows = Fc.sum(axis=1)
    if np.any(rows[lam > 0] <= 0):
        return None
    Fc *= np.divide(lam, rows, out=np.zeros_like(lam), where=rows > 0)[:, None]
    z = Fc.sum(axis=0)
    # RIF has g = 0 (every vertex is optimal): break ties by network time, as the RIF
    # equilibrium itself does (``_rif_least_network_time``)
    lp_cost = g[src, dst] if np.any(g > 0) else 2.0 * net.delays[src, dst]
    f = min_cost_routing(net, lp_cost, z, arcs=near[src, dst])
    if f is None:
        return None
    used = f > 1e-12 * max(1.0, float(lam.max()))
    support = np.zeros_like(net.adjacency)
    support[src[used], dst[used]] = True
    Fs = np.zeros_like(F)
    Fs[src[used], dst[used]] = f[used]
    return support, Fs


def _source_index(lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices of the sources λ_i > 0, map cell → row of its c*_i or −1)."""
    srcs = np.flatnonzero(lam > 0)
    rowmap = np.full(len(lam), -1)
    rowmap[srcs] = np.arange(len(srcs))
    return srcs, rowmap


def _cheapest_on(fc: np.ndarray, g: np.ndarray, I: np.ndarray, J: np.ndarray, ri: np.ndarray,
                 r: int) -> np.ndarray:
    c = np.full(r, np.inf)
    np.minimum.at(c, ri, fc[J] + g[I, J])
    return c


def polish_flows(net: CellNetwork, cost: CostKind, F: np.ndarray, *, max_steps: int = 200,
                 rtol: float = 1e-12, max_dense: int = 4000) -> np.ndarray | None:
    """Polish arc flows F (n×n, req/s) to the KKT point of program (12) by the active-set
    Newton method on a forest support; None if not possible (see :func:`polish_flows_workload`,
    which also returns the workloads)."""
    out = polish_flows_workload(net, cost, F, max_steps=max_steps, rtol=rtol)
    return None if out is None else out[0]


def polish_flows_workload(net: CellNetwork, cost: CostKind, F: np.ndarray,
                          workload: np.ndarray | None = None, *, max_steps: int = 200,
                          rtol: float = 1e-12) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """Polish arc flows F (n×n, req/s), and workloads (requests; default μ⁻¹ of the inflows),
    to the KKT point (F, N) of program (12): the active-set Newton method in the workloads
    (:func:`._kkt.active_set_newton`) from a forest support — the arcs the flows use (x_ij >
    1e-6), or a spanning forest of them that keeps the largest flows; when that fails, the
    support of a basic solution of the transportation LP (:func:`_initial_support`). Returns
    (F, N, vertex): ``vertex`` true when the support is a subset of the LP's optimal basis (no
    arc entered), so F is also that LP's optimum at the polished inflows (reduced costs do not
    depend on the inflows). None if not possible. (The last solve's support is not reused on
    re-solves: after a demand change of 2% a 100-cell mesh's equilibrium support changes by ~150
    arcs, each entering arc a pivot.)"""
    lam = net.arrival_rates
    if not np.any(lam > 0):
        return F, np.zeros(net.n), False
    g = np.asarray(static_cost(cost, net.delays), dtype=float)
    F = np.asarray(F, dtype=float)
    if workload is None:
        z0 = np.minimum(F.sum(axis=0), net.max_rates * (1 - 1e-12))
        workload = np.asarray(net.models.inverse_rate(z0), dtype=float)
    N0 = np.asarray(workload, dtype=float)
    if not np.all(np.isfinite(N0)):
        return None
    used = net.adjacency & (F > 1e-6 * lam[:, None])
    if not np.all(used.any(axis=1) | (lam <= 0)):
        used = None
    forest = used is not None and is_forest(used, lam)
    # routes, in order: the flows' own support (a forest); else, on small networks, a
    # spanning forest of it (cheap; pivots add what it misses), then the LP's vertex; on large
    # ones the LP's vertex first (a spanning forest misses many equilibrium arcs there, each
    # pivot costing a Newton solve)
    routes = ["used"] if forest else \
        (["forest", "lp"] if used is not None and used.sum() <= SMALL_SUPPORT else
         ["lp", "forest"])
    for route in routes:
        if route == "lp":
            init = _initial_support(net, cost, F, g, lam, N0)
            if init is None:
                continue
            supp, Fs = init
        else:
            if used is None:
                continue
            supp = used if route == "used" else spanning_forest(used, F)
            Fs = np.where(supp, F, 0.0)
            rows = Fs.sum(axis=1)
            Fs *= np.divide(lam, rows, out=np.zeros_like(lam), where=rows > 0)[:, None]
        out = active_set_newton(net, cost, Fs, N0, supp, max_steps=max_steps, rtol=rtol)
        if out is not None:
            return out[0], out[1], route == "lp" and out[2]
    return None

# ----------------------------------------------------------------------------- tied support
@dataclasses.dataclass(frozen=True)
class SupportPoint:
    """A KKT point of program (12) on a support that keeps tied arcs.

    Attributes:
        routing: x (n×n); rows of sources with λ_i > 0, zeros elsewhere.
        workload: N_j = μ_j⁻¹(z_j) (requests).
        min_cost: c*_i per source (NaN for λ_i = 0).
        support: boolean n×n mask of the arcs kept (tied within ``support_rtol``).
        residual: max relative KKT residual (cost equalities / |c*_i|, demands / λ_i).
        steps: Newton steps taken (0 when the given point was already polished).
    """

    routing: np.ndarray
    workload: np.ndarray
    min_cost: np.ndarray
    support: np.ndarray
    residual: float
    steps: int


def tied_support(net: CellNetwork, cost: CostKind | str, workload: np.ndarray, *,
                 rtol: float = SUPPORT_RTOL) -> np.ndarray:
    """Arcs of sources with λ_i > 0 whose cost at workload N is within ``rtol``·|c*_i| of the
    source's cheapest (boolean n×n)."""
    cost = CostKind.parse(cost)
    fc = np.asarray(cell_cost(cost, net.models, np.asarray(workload, dtype=float),
                              net.replicas), dtype=float)
    g = np.asarray(static_cost(cost, net.delays), dtype=float)
    return _near_cheapest(net, fc, g, net.arrival_rates, rtol)


def _interior_routing(net: CellNetwork, supp: np.ndarray, x0: np.ndarray) -> np.ndarray:
    """Among routings on the tied arcs with the same inflows, one maximising the smallest
    split (an LP, HiGHS): a point in the relative interior of a non-unique equilibrium set (e.g.
    RIF, where every source reaching a cell sees the same cost). Returns ``x0`` if none exists."""
    from scipy.optimize import linprog

    lam = net.arrival_rates
    ai, aj = np.nonzero(supp)
    m = ai.size
    z = lam @ x0
    A_eq = np.zeros((2 * net.n, m + 1))
    A_eq[ai, np.arange(m)] = 1.0
    A_eq[net.n + aj, np.arange(m)] = lam[ai]
    b_eq = np.concatenate([np.where(lam > 0, 1.0, 0.0), np.where(supp.any(axis=0), z, 0.0)])
    A_ub = np.zeros((m, m + 1))
    A_ub[np.arange(m), np.arange(m)] = -1.0
    A_ub[:, -1] = 1.0  # t ≤ x_ij on every tied arc
    c = np.zeros(m + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(m), A_eq=A_eq, b_eq=b_eq,
                  bounds=[(0, None)] * m + [(None, 1.0)], method="highs")
    if res.status != 0 or res.x[-1] <= 1e-9:
        return x0
    x = np.zeros_like(x0)
    x[ai, aj] = res.x[:m]
    x[lam <= 0] = x0[lam <= 0]
    return x


def _newton_fixed(net: CellNetwork, cost: CostKind, supp: np.ndarray, x0: np.ndarray,
                  rtol: float, max_steps: int):
    """Newton on the KKT system with the support held fixed (flows may turn negative: the
    caller drops those arcs). Returns (flows u on the support, c*, N, residual, steps)."""
    lam = net.arrival_rates
    srcs, rowmap = _source_index(lam)
    g = np.asarray(static_cost(cost, net.delays), dtype=float)
    I, J = np.nonzero(supp)
    ri = rowmap[I]
    u = lam[I] * x0[I, J]
    c = _cheapest_on(_cell_terms(net, cost, np.bincount(J, u, net.n))[1], g, I, J, ri,
                     len(srcs))
    steps = 0
    while True:
        R, N, _, rel = _kkt_residual(net, cost, g, I, J, ri, u, c, lam[srcs])
        if rel < rtol or steps >= max_steps:
            return u, c, N, rel, steps
        step = _newton_step(net, cost, N, J, ri, R)
        t = None if step is None else _below_capacity(net, J, u, step[:len(I)], 1.0, clip=False)
        if t is None:
            return u, c, N, rel, steps
        u, c, steps = u + t * step[:len(I)], c + t * step[len(I):], steps + 1


def polish_on_support(net: CellNetwork, cost: CostKind | str, routing: np.ndarray,
                      workload: np.ndarray, *, support_rtol: float = SUPPORT_RTOL,
                      boundary_tol: float = BOUNDARY_TOL, rtol: float = 1e-13, max_steps: int = 40,
                      polished: bool = False) -> SupportPoint:
    """The KKT point near (routing, workload) on the support of every tied arc.

    Args:
        routing: x (n×n) of an (approximate) equilibrium; workload: its N (requests), used
            only to find the tied arcs (the polished N is μ⁻¹ of the inflows).
        support_rtol: relative cost gap at N under which an arc is tied.
        boundary_tol: routing weight under which a tied arc counts as empty (then the routing
            is moved into the relative interior of the equilibrium face, an LP) and flow
            weight below −boundary_tol that drops an arc from the support.
        rtol: target relative KKT residual; max_steps: Newton steps per support.
        polished: the point is already polished (e.g. an :class:`EquilibriumResult` with
            ``polished=True``): unless it has to be moved into the interior, it is taken as is
            and only its residual is evaluated (no Newton step).
    """
    cost = CostKind.parse(cost)
    lam = net.arrival_rates
    x0 = np.asarray(routing, dtype=float)
    supp = tied_support(net, cost, workload, rtol=support_rtol)
    moved = bool((supp & (x0 <= boundary_tol ** 0.5)).any())
    if moved:  # non-unique routing: move inside the face
        x0 = _interior_routing(net, supp, x0)
    budget = 0 if polished and not moved else max_steps
    for _ in range(net.n * net.n + 1):
        u, c, N, res, steps = _newton_fixed(net, cost, supp, x0, rtol, budget)
        x = np.zeros((net.n, net.n))
        I, J = np.nonzero(supp)
        x[I, J] = u / lam[I]
        negative = supp & (x < -boundary_tol)
        if not negative.any():
            break
        supp = supp & ~negative  # an arc with a small positive gap, not in the support
    cstar = np.full(net.n, np.nan)
    cstar[lam > 0] = c
    return SupportPoint(routing=x, workload=N, min_cost=cstar, support=supp, residual=res,
                        steps=steps)
