"""Newton polishing of an equilibrium on its support (used by :mod:`lbtheory.equilibrium`).

Interior-point solvers stop at a relative gap of ~1e-8, which leaves Definition-1 residuals of
1e-5 on steep potentials (inflows near capacity), and the tangent-cut approximation of
non-DCP potentials is exact only in the limit. Given approximate flows, we solve the KKT system
of program (12) restricted to the used arcs,

    c_ij(N_j(z_j)) − c*_i = 0   for used arcs (i, j),      Σ_j f_ij − λ_i = 0   per source,

by Newton steps (least squares, so non-unique routings get the minimum-norm step) with
dc_ij/dz_j = f'_j(N_j)/μ'_j(N_j), inside a primal active-set loop: a step that would empty an
arc stops at the boundary and drops the arc; an unused arc cheaper than c*_i joins the support.
The caller keeps the result only if it lowers the residual.
"""

from __future__ import annotations

import numpy as np

from ..costs import CostKind, cell_cost, cell_cost_prime, static_cost
from ..network import CellNetwork, min_cost_routing

__all__ = ["polish_flows"]


def _cell_terms(net: CellNetwork, cost: CostKind, z: np.ndarray):
    N = np.asarray(net.models.inverse_rate(z), dtype=float)
    fc = np.asarray(cell_cost(cost, net.models, N, net.replicas), dtype=float)
    return N, fc


def _initial_support(net: CellNetwork, cost: CostKind, F: np.ndarray, g: np.ndarray,
                     lam: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Support of a basic solution of the transportation LP  min Σ g_ij f_ij  subject to the
    solver's inflows z and the demands λ (:func:`lbtheory.network.min_cost_routing`).

    With the cell costs fixed by z, every equilibrium routing solves this LP; a basic solution
    has a forest as support (generically the equilibrium's), which interior-point flows — all
    slightly positive, with cycles among near-ties — do not give.
    """
    src, dst = net.arc_pairs
    # candidate arcs: within 2e-2 of the source's cheapest cost at the solver's inflows (the
    # LP over all n² arcs of a large mesh is slow); the restricted flows fix the inflows
    z0 = np.minimum(F.sum(axis=0), net.max_rates * (1 - 1e-12))
    _, fc0 = _cell_terms(net, cost, z0)
    C0 = np.where(net.adjacency, fc0[None, :] + g, np.inf)
    cmin = C0.min(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):  # rows without arcs: inf − inf
        close = C0 - cmin <= 2e-2 * np.abs(cmin)
    near = net.adjacency & (lam[:, None] > 0) & close & (F > 0)
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


def polish_flows(net: CellNetwork, cost: CostKind, F: np.ndarray, *, max_steps: int = 200,
                 rtol: float = 1e-12, max_dense: int = 4000) -> np.ndarray | None:
    """Polish arc flows F (n×n, req/s) to the KKT point of program (12); None if not possible."""
    lam = net.arrival_rates
    srcs = np.flatnonzero(lam > 0)
    if len(srcs) == 0:
        return F
    r = len(srcs)
    rowmap = np.full(net.n, -1)
    rowmap[srcs] = np.arange(r)
    g = np.asarray(static_cost(cost, net.delays), dtype=float)
    caps = net.max_rates
    init = _initial_support(net, cost, F, g, lam)
    if init is None:
        return None
    support, F = init
    if np.any(F.sum(axis=0) >= caps):
        return None
    steps = 0
    c = None
    while steps < max_steps:
        I, J = np.nonzero(support)
        s = len(I)
        if s + r > max_dense or s == 0:
            return None
        ri = rowmap[I]
        u = F[I, J]
        N, fc = _cell_terms(net, cost, np.bincount(J, u, net.n))
        arc_c = fc[J] + g[I, J]
        if c is None or len(c) != r:
            c = np.full(r, np.inf)
            np.minimum.at(c, ri, arc_c)
        R = np.concatenate([arc_c - c[ri], np.bincount(ri, u, r) - lam[srcs]])
        converged = (np.max(np.abs(R[:s]) / np.maximum(np.abs(c[ri]), 1e-300)) < rtol and
                     np.max(np.abs(R[s:]) / lam[srcs]) < rtol)
        if converged:
            # KKT on the support holds; unused arcs cheaper than c*_i must join it
            C = np.where(net.adjacency & ~support & (lam[:, None] > 0), fc[None, :] + g, np.inf)
            cstar = np.full(net.n, np.inf)
            cstar[srcs] = c
            cheaper = C < cstar[:, None] * (1 - 1e-12)
            if not cheaper.any():
                return F
            # pivot: each source moves a little flow from its support onto its cheapest new arc,
            # so the entering arc starts positive (with degenerate, cycle-containing supports a
            # zero-flow entering arc is blocked at step 0 by the ratio test and would cycle)
            for i in np.flatnonzero(cheaper.any(axis=1)):
                j = int(np.argmin(np.where(cheaper[i], C[i], np.inf)))
                delta = 1e-3 * lam[i]
                F[i] *= 1.0 - delta / lam[i]
                F[i, j] += delta
                support[i, j] = True
            if np.any(F.sum(axis=0) >= caps):
                return None
            c = None
            continue
        steps += 1
        h = np.asarray(cell_cost_prime(cost, net.models, N, net.replicas), dtype=float) / \
            np.asarray(net.models.rate_prime(N), dtype=float)
        Jac = np.zeros((s + r, s + r))
        Jac[:s, :s] = h[J][:, None] * (J[:, None] == J[None, :])
        Jac[np.arange(s), s + ri] = -1.0
        Jac[s + ri, np.arange(s)] = 1.0
        if not (np.all(np.isfinite(Jac)) and np.all(np.isfinite(R))):
            return None
        try:  # LU when the support is a forest (the generic case), else least squares
            step = np.linalg.solve(Jac, -R)
            if not np.all(np.isfinite(step)) or \
                    np.linalg.norm(Jac @ step + R) > 1e-8 * (1 + np.linalg.norm(R)):
                raise np.linalg.LinAlgError
        except np.linalg.LinAlgError:
            try:
                step = np.linalg.lstsq(Jac, -R, rcond=None)[0]
            except np.linalg.LinAlgError:
                return None
        du, dc = step[:s], step[s:]
        # ratio test: stop at the first arc that empties, and drop it
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(du < 0, u / -du, np.inf)
        t = min(1.0, float(ratios.min()))
        blocking = ratios <= t * (1 + 1e-12)
        for _ in range(60):  # keep inflows below capacity
            if np.all(np.bincount(J, np.maximum(u + t * du, 0.0), net.n) < caps):
                break
            t *= 0.5
            blocking[:] = False
        else:
            return None
        u_new = np.maximum(u + t * du, 0.0)
        if blocking.any() and t < 1.0:
            u_new[blocking] = 0.0
        F = np.zeros_like(F)
        F[I, J] = u_new
        c = c + t * dc
        support = support & (F > 0)
    return None
