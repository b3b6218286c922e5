"""Wardrop equilibrium and system optimum of routing games: :func:`solve_game` (CVXPY in
arc-flow form, then the fast and first-order routes), and :func:`certify`.

The public verbs are :func:`lbtheory.equilibrium.solve_wardrop`,
:func:`~lbtheory.equilibrium.solve_system_optimum` and
:func:`~lbtheory.equilibrium.price_of_anarchy`, which take a cell network or a routing game;
``wardrop_equilibrium``, ``system_optimum`` and ``price_of_anarchy`` here are their deprecated
aliases (until 0.3).

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
import enum
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._checks import check_bool, check_int, check_option, check_real
from ..errors import (
    LBTheoryError,
    ModelError,
    ParameterError,
    SolverError,
    SolveStatus,
    warn_deprecated,
)
from ..network import arc_incidence
from ._bush import BushState, bush_assignment
from ._certify import Verdict, certify, check_certificate
from ._cvxforms import bank_objective, check_convex_form, cvxpy_status
from ._result import GamePoAResult, GameResult, Objective, evaluate_flow
from .frank_wolfe import FWMethod, frank_wolfe, refine_flows
from .game import RoutingGame
from .metrics import shortest_path_cost, shortest_paths
from .tap import gradient_projection, supports

__all__ = ["GameResult", "GamePoAResult", "wardrop_equilibrium", "system_optimum",
           "price_of_anarchy", "evaluate_flow", "Objective", "Method", "solve_game", "certify",
           "check_solver", "solve_pair", "AUTO_THRESHOLD", "warm_up", "kernels_cached"]

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
        warm = frank_wolfe(game, objective=objective, method=FWMethod.BFW, tol=0.0,
                           max_iterations=5, throw=False)
        flows = warm.arc_flow
    except SolverError:  # infeasible all-or-nothing start (M/M/1 capacities)
        flows = np.zeros(game.n_arcs)
    return (ref if np.isfinite(ref) and ref > 0 else flow_scale), flows


def _solve_cvxpy(game: RoutingGame, objective: Objective, solver: str | None,
                 polish: bool) -> GameResult:
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
        raise SolverError(f"solver {name} failed: {exc}", solver=name,
                          status=SolveStatus.FAILED, detail=cp.SOLVER_ERROR) from None
    except ValueError as exc:  # CVXPY: "Problem data contains NaN or Inf" (extreme link data)
        raise SolverError(f"solver {name} refused the program: {exc} (the link costs span more "
                          f"than float64 can hold once scaled; rescale capacities or free-flow "
                          f"times, or use method='bush'/'fw')", solver=name,
                          status=SolveStatus.FAILED, detail=cp.SOLVER_ERROR) from None
    st = cvxpy_status(prob.status)
    if not st.solved or v.value is None:
        raise SolverError(f"solver {name} returned status {prob.status!r}", solver=name,
                          status=st if not st.solved else SolveStatus.FAILED,
                          detail=str(prob.status))
    f = np.zeros((len(game.origins), game.n_arcs))
    f[kv, av] = scale * np.maximum(v.value, 0.0)
    if polish:
        f = refine_flows(game, f, objective)
    iters = int(getattr(prob.solver_stats, "num_iters", 0) or 0)
    return evaluate_flow(game, f, objective, status=st, solver=name,
                         seconds=time.perf_counter() - t0, iterations=iters)


def check_solver(solver: str | None, name: str = "solver") -> str | None:
    """``solver`` upper-cased if CVXPY has it installed (``None``: the default route).

    Raises:
        ParameterError: ``{name} must be one of the installed CVXPY solvers ..., got 'X'``.
    """
    if solver is None:
        return None
    import cvxpy as cp

    installed = cp.installed_solvers()
    if not isinstance(solver, str) or solver.upper() not in installed:
        raise ParameterError(f"{name} must be one of the installed CVXPY solvers "
                             f"{', '.join(installed)}, got {solver!r}")
    return solver.upper()


class Method(enum.StrEnum):
    """Which routing-game solver to use (``--method`` of the CLI)."""

    #: CVXPY below :data:`AUTO_THRESHOLD` origin-arc variables, the bush-based solver above
    AUTO = "auto"
    #: interior-point (Clarabel) in CVXPY, the exact oracle, polished by Frank–Wolfe steps
    CVXPY = "cvxpy"
    #: path-based gradient projection (:func:`lbtheory.games.tap.gradient_projection`)
    GP = "gp"
    #: bush-based Algorithm B (:func:`lbtheory.games.bush_assignment`)
    BUSH = "bush"
    #: bi-conjugate Frank–Wolfe (:func:`lbtheory.games.frank_wolfe`)
    FW = "fw"

    @classmethod
    def parse(cls, value: Method | str) -> Method:
        """Coerce a ``method`` argument; raises ParameterError listing the allowed values."""
        return check_option(cls, value, "method")


#: Origin-arc variable count (origins × arcs) above which ``method="auto"`` uses the
#: bush-based solver instead of CVXPY (Sioux Falls: 24 × 76 = 1,824 stays on CVXPY).
AUTO_THRESHOLD = 20_000

#: Default target relative gap of a certified solution (dimensionless).
DEFAULT_TOL = POLISHED_GAP

#: Origin-arc variables above which an interior-point program is not tried as a *fallback*
#: (it still runs when ``method="cvxpy"`` asks for it): Barcelona size (277k) needs minutes and
#: gigabytes, and the fast routes it would back up certify such games in seconds.
CVXPY_MAX_VARIABLES = 200_000

#: Target gaps below which Frank–Wolfe is not tried as a fallback on games above
#: :data:`AUTO_THRESHOLD` (bi-conjugate FW stops near 1e-5 after minutes at Chicago size).
FW_MIN_GAP = 1e-4

#: The gradient-projection route aims at this fraction of the requested gap, so that the
#: independent recomputation of the certificate (other shortest-path code, other summation
#: order) lands below the target too.
TARGET = 0.1

#: The bush route's aim, as a fraction of the requested gap (:func:`aim`). It was
#: :data:`TARGET` until issue 37: the answers then came 10–100× below the request, paid for in
#: iterations, while the solver's gap and the independent one differ by rounding only
#: (≈1e-15 of TSTT); the margin is at least :data:`ROUNDING_GAP`.
BUSH_TARGET = 0.9

#: The smallest margin (absolute, relative gap) between the bush route's aim and the request.
ROUNDING_GAP = 1e-13


def aim(tol: float) -> float:
    """The gap the bush route solves to when ``tol`` is requested (see :data:`BUSH_TARGET`;
    at least :data:`TARGET` × ``tol``)."""
    return max(TARGET * tol, min(BUSH_TARGET * tol, tol - ROUNDING_GAP))


def _attempts(game: RoutingGame, method: Method, solver: str | None,
              tol: float) -> tuple[list[str], list[str]]:
    """The routes to try in order, and the fallbacks skipped because they cannot succeed."""
    fast = supports(game)
    size = len(game.origins) * game.n_arcs
    if not fast and method in (Method.GP, Method.BUSH):
        raise ModelError(f"method '{method.value}': the gradient-projection and bush solvers "
                         "support Polynomial (BPR, affine, constant) and MM1 arcs only; use "
                         "method 'fw'")
    if method is Method.AUTO:  # Clarabel's answers stop near POLISHED_GAP: tighter → the bush
        method = Method.BUSH if fast and (size > AUTO_THRESHOLD or tol < POLISHED_GAP) \
            else Method.CVXPY
    first = [f"cvxpy:{solver or 'CLARABEL'}"]
    scs = ["cvxpy:SCS"] if solver in (None, "CLARABEL") else []  # low accuracy: late
    gp = ["gp"] if fast else []
    bush = ["bush"] if fast else []
    order = {Method.CVXPY: first + gp + scs + ["fw"], Method.GP: gp + first + scs + ["fw"],
             Method.BUSH: bush + gp + first + scs + ["fw"],
             Method.FW: ["fw"] + gp + first + scs}[method]
    keep, skipped = order[:1], []
    for how in order[1:]:
        if how.startswith("cvxpy:") and size > CVXPY_MAX_VARIABLES:
            skipped.append(f"{how} (skipped: {size:,} origin-arc variables > "
                           f"{CVXPY_MAX_VARIABLES:,})")
        elif how == "fw" and size > AUTO_THRESHOLD and tol < FW_MIN_GAP:
            skipped.append(f"fw (skipped: gap {tol:g} < {FW_MIN_GAP:g} on a game this large)")
        else:
            keep.append(how)
    return keep, skipped


def _attempt(game: RoutingGame, objective: Objective, how: str, polish: bool, tol: float,
             time_limit: float, threads: int, warm: BushState | None) -> GameResult:
    if how.startswith("cvxpy:"):
        return _solve_cvxpy(game, objective, how.split(":", 1)[1], polish)
    if how == "gp":
        return gradient_projection(game, objective=objective, tol=TARGET * tol, throw=False,
                                   time_limit=time_limit)
    if how == "bush":
        return bush_assignment(game, objective=objective, tol=aim(tol), throw=False,
                               time_limit=time_limit, threads=threads, warm=warm)
    return frank_wolfe(game, objective=objective, tol=tol, throw=False, time_limit=time_limit)


def solve_game(game: RoutingGame, objective: Objective | str = Objective.WARDROP, *,
               method: Method | str = Method.AUTO, solver: str | None = None,
               tol: float = DEFAULT_TOL, throw: bool = True, polish: bool = True,
               time_limit: float = 300.0, threads: int = 1) -> GameResult:
    """Wardrop equilibrium or system optimum with certified status and solver fallback.

    The solvers are tried in the order the ``method`` gives (``"cvxpy"``: Clarabel, then
    gradient projection, then SCS, then bi-conjugate Frank–Wolfe; ``"gp"``: gradient projection
    first; ``"bush"``: the bush-based Algorithm B, then gradient projection; ``"auto"``: CVXPY
    for small games, ``"bush"`` above :data:`AUTO_THRESHOLD` origin-arc variables or below the
    gap :data:`POLISHED_GAP`). Fallbacks that cannot succeed are skipped and named
    (:data:`CVXPY_MAX_VARIABLES`, :data:`FW_MIN_GAP`). The first result that :func:`certify`
    accepts at ``tol`` is returned with status OPTIMAL, whatever the solver itself reported (and
    a solver's "optimal" is never taken on trust). A result that meets the gap but whose reduced
    costs contradict it (:mod:`._certify`) stops the chain at once: every route is judged by the
    same evaluation.

    Args:
        tol: target relative gap (dimensionless, in (0, 1)).
        throw: raise when no route gives a certified solution; else return the best one with
            status OPTIMAL_INACCURATE (or FAILED with NaN values when none gave flows).
        time_limit: per iterative route (gradient projection, Frank–Wolfe), seconds.
        threads: numba threads of the bush solver (1: deterministic; see
            :func:`lbtheory.games.bush_assignment`).

    Raises:
        ParameterError: an unknown method or objective, a solver CVXPY does not have, ``tol``
            outside (0, 1) or ``threads`` < 1.
        ModelError: a family without a convex form (CVXPY only route) or a kernel.
        SolverError: every route failed (status FAILED), naming each route and its outcome;
            or a gap contradicted by its reduced costs (status FAILED, detail
            ``"inconsistent_certificate"``).
    """
    return _solve(game, objective, method=method, solver=solver, tol=tol, throw=throw,
                  polish=polish, time_limit=time_limit, threads=threads)


#: The numba kernels each route calls from Python (measured: the dispatchers compiled after
#: solving the Braess game by that route, the optimum warm-started from the equilibrium as
#: :func:`solve_pair` does, less those only called from other kernels); every
#: other route calls ``formula_array`` only.
_ROUTE_KERNELS = {"gp": ("sweep", "all_dists", "arc_costs", "flows_from_paths", "formula_array"),
                  "bush": ("bush_pass", "load_trees", "load_in_bushes", "all_dists", "arc_costs",
                           "formula_array")}


def kernels_cached(game: RoutingGame, *, method: Method | str = Method.AUTO,
                   solver: str | None = None, tol: float = DEFAULT_TOL) -> bool:
    """False when the numba kernels that :func:`solve_game` with these options runs first on
    ``game`` will compile on first use (15–40 s, once after an install;
    :func:`lbtheory._jit.kernels_cached`)."""
    from .._jit import kernels_cached as cached
    from . import _bushkernels, _gpkernels

    routes, _ = _attempts(game, Method.parse(method), check_solver(solver), tol)
    names = _ROUTE_KERNELS.get(routes[0], ("formula_array",))
    return cached(*(getattr(_gpkernels, n, None) or getattr(_bushkernels, n) for n in names))


def warm_up(game: RoutingGame, *, method: Method | str = Method.AUTO, solver: str | None = None,
            tol: float = DEFAULT_TOL, threads: int = 1) -> None:
    """Compile (or load from numba's cache) the kernels that :func:`solve_game` with these
    options runs first on ``game``, by solving the small Braess game the same way (both
    objectives, the system optimum warm-started from the equilibrium as :func:`solve_pair`
    does); a solve timed after this excludes compiling. Never raises for the small game (a
    failure there shows again in the real solve)."""
    from .classic import braess

    routes, _ = _attempts(game, Method.parse(method), check_solver(solver), tol)
    small = braess()
    warm = None
    for objective in Objective:
        try:
            res = _attempt(small, objective, routes[0], True, 1e-6, 60.0, threads, warm)
        except LBTheoryError:
            continue
        warm = res.state if isinstance(res.state, BushState) else None


def solve_pair(game: RoutingGame, **options: Any) -> tuple[GameResult, GameResult]:
    """The Wardrop equilibrium and the system optimum (``options`` as :func:`solve_game`); when
    the bush solver gives the equilibrium, the optimum starts from its bushes and flows instead
    of free flow (the optimum's slow tail is shorter from there)."""
    ue = _solve(game, Objective.WARDROP, **options)
    warm = ue.state if isinstance(ue.state, BushState) else None
    so = _solve(game, Objective.SYSTEM_OPTIMUM, warm=warm, **options)
    return ue, so


def _solve(game: RoutingGame, objective: Objective | str, *, method: Method | str = Method.AUTO,
           solver: str | None = None, tol: float = DEFAULT_TOL, throw: bool = True,
           polish: bool = True, time_limit: float = 300.0, threads: int = 1,
           warm: BushState | None = None) -> GameResult:
    """:func:`solve_game`, starting the bush solver from ``warm``; the answer carries the
    state of the solver that gave it (``result.state``)."""
    objective = Objective.parse(objective)
    method = Method.parse(method)
    solver = check_solver(solver)
    check_real(tol, "tol", low=0.0, high=1.0, low_open=True, high_open=True)
    check_int(threads, "threads", low=1)
    check_real(time_limit, "time_limit", unit="s", low=0.0, low_open=True)
    check_bool(throw, "throw")
    check_bool(polish, "polish")
    routes, skipped = _attempts(game, method, solver, tol)
    outcomes: list[str] = []
    best: GameResult | None = None
    model_error: ModelError | None = None
    for how in routes:
        try:
            res = _attempt(game, objective, how, polish, tol, time_limit, threads, warm)
        except ModelError as exc:  # e.g. no DCP form: other routes may still apply
            if method is not Method.AUTO and how.split(":")[0] == method.value:
                raise  # the route the caller asked for cannot take this game
            model_error = exc
            outcomes.append(f"{how}: {exc}")
            continue
        except SolverError as exc:
            outcomes.append(f"{how}: {exc}")
            continue
        verdict, why = check_certificate(game, res, tol)
        # the evaluation's distances (origins × nodes) served the certificate: not kept
        res = dataclasses.replace(res, evaluation=None)
        if verdict is Verdict.CERTIFIED:
            return dataclasses.replace(res, status=SolveStatus.OPTIMAL)
        if verdict is Verdict.INCONSISTENT:
            msg = (f"routing game ({objective}): route {how} reached relative gap "
                   f"{res.relative_gap:.3g} ≤ {tol:g}, but {why}; the other routes are judged "
                   "by the same evaluation, so none was tried")
            if throw:
                raise SolverError(msg, solver=res.solver, status=SolveStatus.FAILED,
                                  detail="inconsistent_certificate")
            return dataclasses.replace(res, status=SolveStatus.FAILED)
        outcomes.append(f"{how}: {res.solver} status {res.status.value}, {why}")
        if best is None or (np.isfinite(res.relative_gap)
                            and not res.relative_gap >= best.relative_gap):
            best = res
    if best is None and model_error is not None and len(outcomes) == 1:
        raise model_error
    msg = (f"routing game ({objective}): no solver reached a certified solution (relative gap "
           f"≤ {tol:g}); tried " + "; ".join(outcomes + skipped))
    if throw:
        raise SolverError(msg, solver=",".join(o.split(":")[0] for o in outcomes),
                          status=SolveStatus.FAILED)
    if best is None:
        nan = np.full((len(game.origins), game.n_arcs), np.nan)
        return GameResult(objective, nan.sum(axis=0), nan, nan.sum(axis=0), np.nan, np.nan,
                          np.nan, np.nan, SolveStatus.FAILED, "none")
    return dataclasses.replace(best, status=SolveStatus.OPTIMAL_INACCURATE)


def _require_game(game: Any, verb: str) -> None:
    """The deprecated aliases take a :class:`RoutingGame` only; a cell network (or anything
    else) gets a :class:`ParameterError` that names the verb taking both."""
    if not isinstance(game, RoutingGame):
        raise ParameterError(f"game must be a RoutingGame, got {type(game).__name__}; "
                             f"lbtheory.{verb} takes a CellNetwork or a RoutingGame")


def wardrop_equilibrium(game: RoutingGame, *, solver: str | None = None, throw: bool = True,
                        polish: bool = True, method: Method | str = Method.AUTO,
                        tol: float = DEFAULT_TOL) -> GameResult:
    """Deprecated alias of :func:`lbtheory.equilibrium.solve_wardrop` (until 0.3): warns, then
    gives the same result (:func:`solve_game` with ``Objective.WARDROP``)."""
    warn_deprecated("lbtheory.games.wardrop_equilibrium", "lbtheory.equilibrium.solve_wardrop")
    _require_game(game, "solve_wardrop")
    return solve_game(game, Objective.WARDROP, method=method, solver=solver, tol=tol,
                      throw=throw, polish=polish)


def system_optimum(game: RoutingGame, *, solver: str | None = None, throw: bool = True,
                   polish: bool = True, method: Method | str = Method.AUTO,
                   tol: float = DEFAULT_TOL) -> GameResult:
    """Deprecated alias of :func:`lbtheory.equilibrium.solve_system_optimum` (until 0.3):
    warns, then gives the same result (:func:`solve_game` with ``Objective.SYSTEM_OPTIMUM``)."""
    warn_deprecated("lbtheory.games.system_optimum", "lbtheory.equilibrium.solve_system_optimum")
    _require_game(game, "solve_system_optimum")
    return solve_game(game, Objective.SYSTEM_OPTIMUM, method=method, solver=solver, tol=tol,
                      throw=throw, polish=polish)


def price_of_anarchy(game: RoutingGame, *, solver: str | None = None,
                     method: Method | str = Method.AUTO, tol: float = DEFAULT_TOL
                     ) -> GamePoAResult:
    """Deprecated alias of :func:`lbtheory.equilibrium.price_of_anarchy` (until 0.3): warns,
    then gives the same :class:`GamePoAResult` (the ratio of :meth:`GamePoAResult.from_results`
    over the two :func:`solve_game` results)."""
    warn_deprecated("lbtheory.games.price_of_anarchy", "lbtheory.equilibrium.price_of_anarchy")
    _require_game(game, "price_of_anarchy")
    kw = {"method": method, "solver": solver, "tol": tol}
    return GamePoAResult.from_results(solve_game(game, Objective.WARDROP, **kw),
                                      solve_game(game, Objective.SYSTEM_OPTIMUM, **kw))
