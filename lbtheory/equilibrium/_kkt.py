"""Newton's method on the KKT system of program (12) in the workloads (the polish's core).

On a support S of arcs (i, j) the equilibrium conditions of program (12) read

    f_j(N_j) + g_ij − c*_i = 0     (i, j) ∈ S            (cost: s, or requests/replica for RIF)
    Σ_i f_ij − μ_j(N_j) = 0         cells j reached by S  (flow balance (5), req/s)
    Σ_j f_ij − λ_i = 0              sources λ_i > 0        (demand, req/s)

in the unknowns (f_S, N, c*). Parametrised by the workload N (not the inflow z), every row is
well conditioned even where an inflow sits within rounding of capacity (an exponential
saturation cell at equilibrium: 1 − z/μ̄ < 1e-10, where μ⁻¹(z) — and with it anything
parametrised by z — loses all precision while N, f(N) and μ(N) do not). The Jacobian is sparse
(2 non-zeros per cost row); on a forest support it is non-singular. Solved densely for small
systems, by sparse LU (SuperLU) for large ones. [R]

:func:`active_set_newton` is the primal active-set loop of
:func:`~lbtheory.equilibrium.polish_flows`: a Newton step that would empty an arc stops at the
boundary and drops the arc; an unused arc cheaper than c*_i joins the support — by a
transportation-simplex pivot when it closes a cycle, so the support stays a forest. Newton that
stalls (no halving of the residual in :data:`STALL_STEPS` steps) or meets a singular step first
brings back arcs cheaper than all of their source's support arcs (:func:`_rescue`), then gives
up (the caller tries another support, temperature or route; the Definition-1 residual judges).
"""

from __future__ import annotations

import numpy as np

from ..costs import CostKind, static_cost
from ..network import CellNetwork
from ._cells import CellBank

__all__ = ["active_set_newton", "is_forest", "spanning_forest", "STALL_RTOL", "DENSE_MAX"]

#: KKT residual below which a Newton iteration that no longer halves it counts as converged
#: (the rounding floor on ill-conditioned, near-capacity systems).
STALL_RTOL = 1e-9
#: systems up to this size (unknowns) are solved densely; larger ones by sparse LU
DENSE_MAX = 300
#: Newton steps without halving the best residual after which the polish gives up
STALL_STEPS = 12
#: rescues (:func:`_rescue`) per polish
MAX_RESCUES = 5


def is_forest(support: np.ndarray, lam: np.ndarray) -> bool:
    """Whether the bipartite graph sources → cells of the ``support`` arcs (n×n bool) has no
    cycle (a basic, vertex-like support on which the KKT Jacobian is non-singular)."""
    n = len(lam)
    I, J = np.nonzero(support)
    if len(I) <= 64:  # union-find in Python: cheaper than building a sparse graph
        parent = list(range(2 * n))

        def root(v: int) -> int:
            while parent[v] != v:
                parent[v] = parent[parent[v]]
                v = parent[v]
            return v

        for a, b in zip(I.tolist(), J.tolist()):
            ra, rb = root(a), root(n + b)
            if ra == rb:
                return False
            parent[ra] = rb
        return True
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    nodes = np.unique(np.concatenate([I, n + J]))
    A = coo_matrix((np.ones(len(I)), (I, n + J)), shape=(2 * n, 2 * n))
    k, labels = connected_components(A, directed=False)
    comps = len(np.unique(labels[nodes]))
    return len(I) == len(nodes) - comps


def spanning_forest(support: np.ndarray, F: np.ndarray) -> np.ndarray:
    """A spanning forest of the bipartite support graph (n×n bool) that keeps the largest
    flows F (req/s): Kruskal's maximum-weight forest (every source keeps its largest arc)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import minimum_spanning_tree

    n = len(F)
    I, J = np.nonzero(support)
    w = 1.0 / np.maximum(F[I, J], 1e-300)  # smaller weight = larger flow
    w = w / w.max() + 1e-12  # positive (csgraph drops explicit zeros)
    T = minimum_spanning_tree(coo_matrix((w, (I, n + J)), shape=(2 * n, 2 * n)).tocsr())
    T = T.tocoo()
    out = np.zeros_like(support)
    a, b = np.minimum(T.row, T.col), np.maximum(T.row, T.col)
    out[a, b - n] = True
    return out


def _tree_path(support: np.ndarray, i: int, j: int) -> list[tuple[int, int]] | None:
    """The arcs (source, cell) of the path from cell j to source i in the forest ``support``
    (bipartite: sources are rows, cells columns), in order from j; None if not connected."""
    n = len(support)
    I, J = np.nonzero(support)
    if len(I) <= 64:  # breadth-first search in Python
        nbrs: dict[int, list[int]] = {}
        for a, b in zip(I.tolist(), J.tolist()):
            nbrs.setdefault(a, []).append(n + b)
            nbrs.setdefault(n + b, []).append(a)
        pred = {n + j: -1}
        frontier = [n + j]
        while frontier and i not in pred:
            nxt = []
            for v in frontier:
                for w in nbrs.get(v, ()):
                    if w not in pred:
                        pred[w] = v
                        nxt.append(w)
            frontier = nxt
        if i not in pred:
            return None
    else:
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import breadth_first_order

        A = coo_matrix((np.ones(len(I)), (I, n + J)), shape=(2 * n, 2 * n)).tocsr()
        _, pred = breadth_first_order(A, n + j, directed=False, return_predecessors=True)
        if pred[i] < 0:
            return None
    path = []
    v = i
    while v != n + j:
        p = int(pred[v])
        path.append((v, p - n) if v < n else (p, v - n))
        v = p
    return path[::-1]


def _enter(F: np.ndarray, support: np.ndarray, i: int, j: int, lam_i: float) -> None:
    """Bring arc (i, j) into the forest ``support`` (in place, with the flows F). If it closes
    a cycle, a transportation-simplex pivot: flow θ round the cycle (+ on (i, j), alternating
    signs), inflows and demands unchanged, θ the least flow on a − arc, which leaves. Otherwise
    the arc joins two trees and takes 1e-3 of source i's flow (Newton restores the balance)."""
    path = _tree_path(support, i, j)
    support[i, j] = True
    if path is None:
        F[i] *= 1.0 - 1e-3
        F[i, j] += 1e-3 * lam_i
        return
    minus = path[0::2]  # the arcs at odd positions of the cycle (i, j), path[0], path[1], ...
    plus = path[1::2]
    k = int(np.argmin([F[a] for a in minus]))
    theta = float(F[minus[k]])
    for a in minus:
        F[a] -= theta
    for a in plus:
        F[a] += theta
    F[i, j] += theta
    F[minus[k]] = 0.0
    support[minus[k]] = False


def _rescue(net: CellNetwork, F: np.ndarray, support: np.ndarray, f: np.ndarray,
            g: np.ndarray, I: np.ndarray, J: np.ndarray, lam: np.ndarray) -> bool:
    """When Newton stalls or its step is singular: bring in (in place) every unused arc
    cheaper than all support arcs of its source — an arc dropped wrongly, without which the
    demand may not fit below capacity (workloads then run away). False if there is none."""
    n = net.n
    cmin = np.full(n, np.inf)
    np.minimum.at(cmin, I, f[J] + g[I, J])
    C = np.where(net.adjacency & ~support & (lam[:, None] > 0), f[None, :] + g, np.inf)
    with np.errstate(invalid="ignore"):
        cheaper = C < cmin[:, None] - np.abs(cmin[:, None]) * 1e-6
    for i in np.flatnonzero(cheaper.any(axis=1)):
        _enter(F, support, int(i), int(np.argmin(C[i])), lam[i])
    return bool(cheaper.any())


def _solve(I: np.ndarray, J: np.ndarray, ri: np.ndarray, cells: np.ndarray, fp: np.ndarray,
           mp: np.ndarray, r: int, rhs: np.ndarray) -> np.ndarray | None:
    """Newton step (du, dN on ``cells``, dc) of the KKT system; None if singular."""
    s, nc = len(I), len(cells)
    col = np.full(len(fp), -1)
    col[cells] = np.arange(nc)
    jc = col[J]
    a = np.arange(s)
    # rows: cost (s), flow balance (nc), demand (r); columns: u (s), N (nc), c (r)
    rows = np.concatenate([a, a, s + jc, s + nc + ri, s + np.arange(nc)])
    cols = np.concatenate([s + jc, s + nc + ri, a, a, s + np.arange(nc)])
    vals = np.concatenate([fp[J], -np.ones(s), np.ones(s), np.ones(s), -mp[cells]])
    size = s + nc + r
    if not (np.all(np.isfinite(vals)) and np.all(np.isfinite(rhs))):
        return None
    if size <= DENSE_MAX:
        A = np.zeros((size, size))
        np.add.at(A, (rows, cols), vals)
        try:
            step = np.linalg.solve(A, rhs)
            if not np.all(np.isfinite(step)) or np.linalg.norm(A @ step - rhs) > \
                    1e-8 * (np.linalg.norm(rhs) + np.linalg.norm(np.abs(A) @ np.abs(step))):
                raise np.linalg.LinAlgError  # too ill-conditioned to trust (backward error)
        except np.linalg.LinAlgError:
            return None
        return step
    import scipy.sparse as sp
    from scipy.sparse.linalg import splu

    A = sp.csc_matrix((vals, (rows, cols)), shape=(size, size))
    try:
        step = splu(A).solve(rhs)
    except RuntimeError:  # exactly singular (a cycle in the support)
        return None
    if not np.all(np.isfinite(step)) or np.linalg.norm(A @ step - rhs) > \
            1e-8 * (np.linalg.norm(rhs) + np.linalg.norm(abs(A) @ np.abs(step))):
        return None
    return step


def active_set_newton(net: CellNetwork, cost: CostKind, F: np.ndarray, N: np.ndarray,
                      support: np.ndarray, *, max_steps: int = 100, rtol: float = 1e-12,
                      max_pivots: int = 50) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """The KKT point of program (12) from flows F (n×n, req/s) and workloads N (requests) on
    an initial ``support`` (n×n bool, a forest), by the active-set Newton method in (f_S, N, c*).

    Returns (F, N, kept) at a relative KKT residual below ``rtol`` (or at the rounding floor),
    ``kept`` true when no arc entered the support (it is a subset of the initial one), with no
    unused arc cheaper than c*_i; None when it fails (singular step, step budget)."""
    lam = net.arrival_rates
    srcs = np.flatnonzero(lam > 0)
    r = len(srcs)
    n = net.n
    if r == 0:
        return F, np.zeros(n)
    rowmap = np.full(n, -1)
    rowmap[srcs] = np.arange(r)
    lam_s = lam[srcs]
    g = np.asarray(static_cost(cost, net.delays), dtype=float)
    bank = CellBank(net, cost)
    caps = bank.caps
    support = support & net.adjacency & (lam[:, None] > 0)
    F = np.where(support, F, 0.0)
    N = np.maximum(np.asarray(N, dtype=float), 0.0).copy()
    c = None
    prev = best_rel = np.inf
    steps = pivots = best_at = rescues = 0
    while steps < max_steps:
        I, J = np.nonzero(support)
        s = len(I)
        if s == 0:
            return None
        ri = rowmap[I]
        u = F[I, J]
        cells = np.unique(J)
        N[np.setdiff1d(np.arange(n), cells)] = 0.0  # a cell no arc reaches is empty
        f, fp, mu, mp = bank.values(N)
        if c is None:  # c*_i: the flow-weighted mean cost on the support
            w = np.bincount(ri, u, r)
            c = np.bincount(ri, u * (f[J] + g[I, J]), r) / np.where(w > 0, w, 1.0)
            prev = np.inf
        R_arc = f[J] + g[I, J] - c[ri]
        R_cell = np.bincount(J, u, n)[cells] - mu[cells]
        R_src = np.bincount(ri, u, r) - lam_s
        with np.errstate(all="ignore"):
            rel = max(float(np.max(np.abs(R_arc) / np.maximum(np.abs(c[ri]), 1e-300))),
                      float(np.max(np.abs(R_cell) / caps[cells])),
                      float(np.max(np.abs(R_src) / lam_s)))
        if not np.isfinite(rel):
            return None
        stalled = rel < STALL_RTOL and rel > 0.5 * prev
        prev = rel
        if rel < 0.5 * best_rel:
            best_rel, best_at = rel, steps
        elif steps - best_at >= STALL_STEPS:  # no progress: rescue once or give up early
            if rescues < MAX_RESCUES and _rescue(net, F, support, f, g, I, J, lam):
                rescues += 1
                c, best_rel, best_at = None, np.inf, steps
                continue
            return None
        if rel < rtol or stalled:
            # KKT on the support holds; unused arcs cheaper than c*_i must join it
            C = np.where(net.adjacency & ~support & (lam[:, None] > 0), f[None, :] + g, np.inf)
            cstar = np.full(n, np.inf)
            cstar[srcs] = c
            with np.errstate(invalid="ignore"):
                cheaper = C < cstar[:, None] - np.abs(cstar[:, None]) * max(1e-12, 10.0 * rel)
            if not cheaper.any():
                return F, N, pivots == 0 and rescues == 0
            pivots += 1
            if pivots > max_pivots:
                return None
            # pivot, per source, its cheapest cheaper arc into the support (keeping a forest)
            for i in np.flatnonzero(cheaper.any(axis=1)):
                j = int(np.argmin(np.where(cheaper[i], C[i], np.inf)))
                _enter(F, support, i, j, lam[i])
            c = None
            best_rel, best_at = np.inf, steps
            continue
        steps += 1
        rhs = -np.concatenate([R_arc, R_cell, R_src])
        step = _solve(I, J, ri, cells, fp, mp, r, rhs)
        if step is None:
            if rescues < MAX_RESCUES and _rescue(net, F, support, f, g, I, J, lam):
                rescues += 1
                c, best_rel, best_at = None, np.inf, steps
                continue
            return None
        du, dN, dc = step[:s], step[s:s + len(cells)], step[s + len(cells):]
        # ratio test: stop at the first arc that empties (and drop it). Workloads are clamped
        # per cell, not by shortening the step: at most ×10 down (a cell emptying approaches
        # 0 geometrically until its arcs leave the support) and ×5 up per step
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = np.where(du < 0, u / -du, np.inf)
        t0 = min(1.0, float(ratios.min()))
        t = t0
        blocking = (ratios <= t0 * (1 + 1e-12)) & (t0 < 1.0)
        u_new = np.maximum(u + t * du, 0.0)
        u_new[blocking] = 0.0
        if blocking.any():  # the active set changed: progress, whatever the residual did
            best_rel, best_at = np.inf, steps
        F = np.zeros_like(F)
        F[I, J] = u_new
        Nc = N[cells]
        N[cells] = np.clip(Nc + t * dN, 0.1 * Nc, Nc + 4.0 * np.maximum(Nc, 1.0))
        c = c + t * dc
        support = support & (F > 0)
    return None
