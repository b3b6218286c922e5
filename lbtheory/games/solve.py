"""Wardrop equilibrium and system optimum of routing games in CVXPY (arc-flow form).

Variables are origin-aggregated arc flows f_ka ≥ 0 (one commodity per origin; only the arcs that
origin may use), with flow conservation per origin and node. Wardrop minimises the Beckmann
potential Σ_a ∫_0^{x_a} ℓ_a; the system optimum minimises the total cost Σ_a x_a ℓ_a(x_a)
(Beckmann 1956; Roughgarden 2005). Flows are rescaled by the largest origin demand, the objective
by the free-flow shortest-path cost, and each power term by a typical arc flow (5 bi-conjugate FW
steps), so that data in any units (TNTP vehicles/h) stays well conditioned. By default the
interior-point flows are then polished by exact-line-search Frank–Wolfe steps
(:func:`lbtheory.games.frank_wolfe.refine_flows`).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import SolverError, SolveStatus
from ..network import arc_incidence
from ._cvxforms import bank_objective, check_convex_form
from ._result import GamePoAResult, GameResult, Objective, evaluate_flow
from .frank_wolfe import FWMethod, frank_wolfe, refine_flows
from .game import RoutingGame
from .metrics import shortest_path_cost, shortest_paths

__all__ = ["GameResult", "GamePoAResult", "wardrop_equilibrium", "system_optimum",
           "price_of_anarchy", "evaluate_flow", "Objective"]

#: the cvxpy warning silenced while solving: an inaccurate solve is reported in the status.
_INACCURATE_WARNING = r"Solution may be inaccurate"

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
    # row k·n + v: outflow − inflow of origin k's flow at node v
    A = arc_incidence(kv * n + game.tails[av], K * n) - arc_incidence(kv * n + game.heads[av],
                                                                      K * n)
    b = game.origin_balance().reshape(-1)
    drop = np.arange(K) * n + game.origins  # the origin rows are implied by the others
    keep = np.setdiff1d(np.arange(K * n), drop)
    P = arc_incidence(av, m)  # arc flow x_a = Σ_k f_ka
    return kv, av, sp.csr_matrix(A)[keep], b[keep], P


def _scales(game: RoutingGame, objective: Objective, flow_scale: float) -> tuple[float, np.ndarray]:
    """Objective scale (free-flow shortest-path cost) and typical arc flows (after 5
    bi-conjugate FW steps; zeros when the all-or-nothing start is infeasible), for conditioning."""

    c0 = game.costs.cost(np.zeros(game.n_arcs))
    ref = shortest_path_cost(game, shortest_paths(game, c0)[0])
    try:
        warm, _ = frank_wolfe(game, objective=objective, method=FWMethod.BFW, tol=0.0,
                              max_iter=5)
        flows = warm.arc_flow
    except SolverError:  # infeasible all-or-nothing start (M/M/1 capacities)
        flows = np.zeros(game.n_arcs)
    return (ref if np.isfinite(ref) and ref > 0 else flow_scale), flows


def _solve_cvxpy(game: RoutingGame, objective: Objective, solver: str | None,
                 throw: bool, polish: bool) -> GameResult:
    import cvxpy as cp

    check_convex_form(game.costs)  # raises ModelError naming a family without a DCP form
    t0 = time.perf_counter()
    kv, av, A, b, P = _layout(game)
    scale = float(np.max(game.demand.sum(axis=1))) if game.total_demand > 0 else 1.0
    v = cp.Variable(kv.size, nonneg=True)
    xv = cp.Variable(game.n_arcs)  # explicit arc flows keep the cones off the origin variables
    x = scale * xv
    ref, flows = _scales(game, objective, scale)
    obj = bank_objective(game.costs, x, objective, ref=flows) / ref
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
            warnings.filterwarnings("ignore", message=_INACCURATE_WARNING, category=UserWarning)
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
        f = refine_flows(game, f, objective)
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
    return _solve_cvxpy(game, Objective.WARDROP, solver, throw, polish)


def system_optimum(game: RoutingGame, *, solver: str | None = None, throw: bool = True,
                   polish: bool = True) -> GameResult:
    """System optimum: minimise the total cost Σ_a x_a ℓ_a(x_a) in CVXPY.

    Its relative gap is measured under marginal costs (the SO is the Wardrop equilibrium of the
    marginal costs). Raises as :func:`wardrop_equilibrium`.
    """
    return _solve_cvxpy(game, Objective.SYSTEM_OPTIMUM, solver, throw, polish)


def price_of_anarchy(game: RoutingGame, *, solver: str | None = None) -> GamePoAResult:
    """Price of anarchy TSTT(Wardrop)/TSTT(system optimum) (≥ 1), with both solutions.

    Returns:
        A :class:`GamePoAResult`: ``ratio`` (dimensionless), ``wardrop``, ``optimum`` and
        ``status``. Raises as :func:`wardrop_equilibrium`.

    Example:
        >>> from lbtheory.games import pigou
        >>> round(price_of_anarchy(pigou()).ratio, 6)
        1.333333
    """
    return GamePoAResult.from_results(wardrop_equilibrium(game, solver=solver),
                                      system_optimum(game, solver=solver))
