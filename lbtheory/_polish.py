"""Newton polishing of an equilibrium on its support (used by :mod:`lbtheory.equilibrium`).

Interior-point solvers stop at a relative gap of ~1e-8, which leaves Definition-1 residuals of
1e-5 on steep potentials (inflows near capacity). Given the solver's flows, we solve the KKT
system of program (12) restricted to the used arcs,

    c_ij(N_j(z_j)) − c*_i = 0   for used arcs (i, j),      Σ_j f_ij − λ_i = 0   per source,

by (least-squares, damped) Newton steps, with dp'/dz = f'_j(N_j)/μ'_j(N_j), dropping arcs whose
flow reaches zero and adding unused arcs that become cheaper than c*_i. The result is returned
only if it lowers the residual; non-unique routings (singular systems) get the minimum-norm step.
"""

from __future__ import annotations

import numpy as np

from .costs import CostKind, cell_cost, cell_cost_prime, static_cost
from .network import CellNetwork

__all__ = ["polish_flows"]


def _cell_terms(net: CellNetwork, cost: CostKind, z: np.ndarray):
    N = np.asarray(net.models.inverse_rate(z), dtype=float)
    fc = np.asarray(cell_cost(cost, net.models, N, net.replicas), dtype=float)
    return N, fc


def polish_flows(net: CellNetwork, cost: CostKind, F: np.ndarray, *, max_iter: int = 30,
                 rtol: float = 1e-13, max_dense: int = 4000) -> np.ndarray | None:
    """Polish arc flows F (n×n, req/s) to the KKT point on their support; None if not possible."""
    lam = net.arrival_rates
    srcs = np.flatnonzero(lam > 0)
    if len(srcs) == 0:
        return F
    rowmap = np.full(net.n, -1)
    rowmap[srcs] = np.arange(len(srcs))
    g = np.asarray(static_cost(cost, net.delays), dtype=float)
    caps = net.max_rates
    support = net.adjacency & (F > 1e-10 * lam[:, None]) & (lam[:, None] > 0)
    F = np.where(support, F, 0.0)
    for _outer in range(12):
        I, J = np.nonzero(support)
        s, r = len(I), len(srcs)
        if s + r > max_dense:
            return None
        u = F[I, J].copy()
        ri = rowmap[I]
        z = np.bincount(J, u, net.n)
        N, fc = _cell_terms(net, cost, z)
        arc_c = fc[J] + g[I, J]
        c = np.full(r, np.inf)
        np.minimum.at(c, ri, arc_c)

        def resid(u, c, arc_c):
            return np.concatenate([arc_c - c[ri], np.bincount(ri, u, r) - lam[srcs]])

        R = resid(u, c, arc_c)
        for _ in range(max_iter):
            scale_c = np.maximum(np.abs(c[ri]), 1e-300)
            if np.max(np.abs(R[:s]) / scale_c, initial=0) < rtol and \
                    np.max(np.abs(R[s:]) / lam[srcs], initial=0) < rtol:
                break
            h = np.asarray(cell_cost_prime(cost, net.models, N, net.replicas), dtype=float) / \
                np.asarray(net.models.rate_prime(N), dtype=float)
            Jac = np.zeros((s + r, s + r))
            Jac[:s, :s] = h[J][:, None] * (J[:, None] == J[None, :])
            Jac[np.arange(s), s + ri] = -1.0
            Jac[s + ri, np.arange(s)] = 1.0
            step = np.linalg.lstsq(Jac, -R, rcond=None)[0]
            du, dc = step[:s], step[s:]
            leaving = (u + du < 0) & (u < 1e-3 * lam[srcs][ri])
            if leaving.any():  # arcs the Newton step empties: drop them, re-solve on the rest
                break
            t, norm0 = 1.0, np.linalg.norm(R)
            for _bt in range(40):
                u_new = np.maximum(u + t * du, 0.0)
                z_new = np.bincount(J, u_new, net.n)
                if np.all(z_new < caps):
                    N_new, fc_new = _cell_terms(net, cost, z_new)
                    arc_new = fc_new[J] + g[I, J]
                    R_new = resid(u_new, c + t * dc, arc_new)
                    if np.all(np.isfinite(R_new)) and np.linalg.norm(R_new) <= norm0 * (1 - 1e-4 * t):
                        break
                t *= 0.5
            else:
                break
            u, c, N, arc_c, R = u_new, c + t * dc, N_new, arc_new, R_new
        else:
            leaving = np.zeros(s, dtype=bool)
        F = np.zeros_like(F)
        F[I, J] = np.where(leaving, 0.0, u)
        if leaving.any():  # put the dropped flow back on the source's remaining arcs
            lost = np.bincount(ri, np.where(leaving, u, 0.0), r)
            keep = ~leaving
            share = np.bincount(ri[keep], u[keep], r)
            F[I[keep], J[keep]] += u[keep] * (lost / np.maximum(share, 1e-300))[ri[keep]]
            support = support & (F > 0)
            continue
        support = support & (F > 0)
        # arcs not in the support that are cheaper than c*_i must join it
        z = F.sum(axis=0)
        _, fc = _cell_terms(net, cost, z)
        C = fc[None, :] + g
        cstar = np.full(net.n, np.inf)
        cstar[srcs] = c
        cheaper = net.adjacency & ~support & (lam[:, None] > 0) & \
            (C < cstar[:, None] * (1 - 1e-12) - 1e-300)
        if not cheaper.any():
            return F
        support = support | cheaper
    return F
