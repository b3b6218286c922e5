"""Wardrop equilibrium and system optimum of routing games in CVXPY (arc-flow form).

Variables are origin-aggregated arc flows f_ka ≥ 0 (one commodity per origin; only the arcs that
origin may use), with flow conservation per origin and node. Wardrop minimises the Beckmann
potential Σ_a ∫_0^{x_a} ℓ_a; the system optimum minimises the total cost Σ_a x_a ℓ_a(x_a)
(Beckmann 1956; Roughgarden 2005). Flows are rescaled by the largest origin demand, the objective
by the free-flow shortest-path cost, and each power term by a typical arc flow (5 bi-conjugate FW
steps), so that data in any units (TNTP vehicles/h) stays well conditioned. By default the
interior-point flows are then polished by exact-line-search Frank–Wolfe steps
(:func:`lbtheory.games.frank_wolfe.polish_flows`).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import SolverError, SolveStatus
from ._result import GameResult, Objective, _check_objective, evaluate_flow
from .arccosts import ServiceArc
from .frank_wolfe import frank_wolfe, polish_flows
from .game import RoutingGame
from .metrics import shortest_path_cost, shortest_paths

__all__ = ["GameResult", "wardrop_equilibrium", "system_optimum", "price_of_anarchy",
           "evaluate_flow", "Objective"]

#: Relative gap below which polished flows count as optimal even if the conic solver said
#: "optimal_inaccurate".
POLISHED_GAP = 1e-10


def _layout(game: RoutingGame):
    """Allowed (origin, arc) variables and the sparse conservation system A v = b."""
    K, m, n = len(game.origins), game.n_arcs, game.n_nodes
    ks, arcs = [], []
    for k in range(K):
        a = np.flatnonzero(game.usable(k))
        ks.append(np.full(a.size, k))
        arcs.append(a)
    kv, av = np.concatenate(ks), np.concatenate(arcs)
    nv = kv.size
    cols = np.arange(nv)
    rows = np.concatenate([kv * n + game.tails[av], kv * n + game.heads[av]])
    vals = np.concatenate([np.ones(nv), -np.ones(nv)])
    A = sp.csr_matrix((vals, (rows, np.concatenate([cols, cols]))), shape=(K * n, nv))
    b = game.origin_balance().reshape(-1)
    drop = np.arange(K) * n + game.origins  # the origin rows are implied by the others
    keep = np.setdiff1d(np.arange(K * n), drop)
    P = sp.csr_matrix((np.ones(nv), (av, cols)), shape=(m, nv))
    return kv, av, A[keep], b[keep], P


def _scales(game: RoutingGame, objective: str, flow_scale: float) -> tuple[float, np.ndarray]:
    """Objective scale (free-flow shortest-path cost) and typical arc flows (after 5
    bi-conjugate FW steps; zeros when the all-or-nothing start is infeasible), for conditioning."""

    c0 = game.costs.cost(np.zeros(game.n_arcs))
    ref = shortest_path_cost(game, shortest_paths(game, c0)[0])
    try:
        warm, _ = frank_wolfe(game, objective=objective, method="bfw", tol=0.0, max_iter=5)
        flows = warm.arc_flow
    except SolverError:  # infeasible all-or-nothing start (M/M/1 capacities)
        flows = np.zeros(game.n_arcs)
    return (ref if np.isfinite(ref) and ref > 0 else flow_scale), flows


def _solve_cvxpy(game: RoutingGame, objective: str, solver: str | None,
                 throw: bool, polish: bool) -> GameResult:
    import cvxpy as cp

    _check_objective(objective)
    if not game.costs.has_convex_form:
        for fam, _ in game.costs.groups:
            if isinstance(fam, ServiceArc):
                fam.cvx_potential(None)  # raises ModelError naming its model
    t0 = time.perf_counter()
    kv, av, A, b, P = _layout(game)
    scale = float(np.max(game.demand.sum(axis=1))) if game.total_demand > 0 else 1.0
    v = cp.Variable(kv.size, nonneg=True)
    xv = cp.Variable(game.n_arcs)  # explicit arc flows keep the cones off the origin variables
    x = scale * xv
    ref, flows = _scales(game, objective, scale)
    obj = game.costs.cvx_objective(x, objective=objective, ref=flows) / ref
    cons = [A @ v == b / scale, xv == P @ v]
    finite_up = np.isfinite(game.costs.upper)
    if np.any(finite_up):  # keep the solver's iterates inside the M/M/1 domains
        cons.append(x[np.flatnonzero(finite_up)] <= game.costs.upper[finite_up])
    prob = cp.Problem(cp.Minimize(obj), cons)
    name = solver or "CLARABEL"
    opts: dict[str, Any] = {}
    if name == "CLARABEL":
        opts = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12,
                "max_iter": 400}
    try:
        with warnings.catch_warnings():  # "inaccurate" is reported in the status instead
            warnings.simplefilter("ignore", UserWarning)
            prob.solve(solver=name, **opts)
    except cp.error.SolverError as exc:
        raise SolverError(f"routing game ({objective}): solver {name} failed: {exc}",
                          solver=name, status="error") from None
    st = {cp.OPTIMAL: SolveStatus.OPTIMAL,
          cp.OPTIMAL_INACCURATE: SolveStatus.OPTIMAL_INACCURATE}.get(prob.status,
                                                                     SolveStatus.FAILED)
    if st is SolveStatus.FAILED or v.value is None:
        if throw:
            raise SolverError(f"routing game ({objective}): solver {name} returned status "
                              f"{prob.status!r}", solver=name, status=str(prob.status))
        nan = np.full((len(game.origins), game.n_arcs), np.nan)
        return GameResult(objective, nan.sum(axis=0), nan, nan.sum(axis=0), np.nan, np.nan,
                          np.nan, np.nan, SolveStatus.FAILED, name, time.perf_counter() - t0)
    f = np.zeros((len(game.origins), game.n_arcs))
    f[kv, av] = scale * np.maximum(v.value, 0.0)
    if polish:

        f = polish_flows(game, f, objective)
    iters = int(getattr(prob.solver_stats, "num_iters", 0) or 0)
    res = evaluate_flow(game, f, objective, status=st, solver=name,
                        seconds=time.perf_counter() - t0, iterations=iters)
    if polish and st is SolveStatus.OPTIMAL_INACCURATE and 0 <= res.relative_gap <= POLISHED_GAP:
        res = dataclasses.replace(res, status=SolveStatus.OPTIMAL)  # the polished flows are optimal
    return res


def wardrop_equilibrium(game: RoutingGame, *, solver: str | None = None, throw: bool = True,
                        polish: bool = True) -> GameResult:
    """Wardrop (user) equilibrium: minimise the Beckmann potential in CVXPY.

    Args:
        solver: a CVXPY solver name (default Clarabel with tight tolerances).
        throw: raise :class:`~lbtheory.errors.SolverError` on failure (else status FAILED).
        polish: refine the interior-point flows with exact-line-search Frank–Wolfe steps
            (removes the O(√tol) flow interior-point methods leave on tied, unused arcs).

    Raises:
        ModelError: an arc family has no exact convex form (use :func:`frank_wolfe`).
        SolverError: the solver failed (``throw=True``).

    Example:
        >>> from lbtheory.games import pigou
        >>> round(wardrop_equilibrium(pigou()).total_travel_time, 6)
        1.0
    """
    return _solve_cvxpy(game, "wardrop", solver, throw, polish)


def system_optimum(game: RoutingGame, *, solver: str | None = None, throw: bool = True,
                   polish: bool = True) -> GameResult:
    """System optimum: minimise the total cost Σ_a x_a ℓ_a(x_a) in CVXPY.

    Its relative gap is measured under marginal costs (the SO is the Wardrop equilibrium of the
    marginal costs). Raises as :func:`wardrop_equilibrium`.
    """
    return _solve_cvxpy(game, "system_optimum", solver, throw, polish)


def price_of_anarchy(game: RoutingGame, *, solver: str | None = None) -> float:
    """PoA = TSTT(Wardrop)/TSTT(system optimum) (≥ 1)."""
    ue = wardrop_equilibrium(game, solver=solver)
    so = system_optimum(game, solver=solver)
    return ue.total_travel_time / so.total_travel_time
