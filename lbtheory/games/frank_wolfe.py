"""Frank–Wolfe traffic assignment (plain, conjugate, bi-conjugate) with exact line search.

The reference algorithm of the field, written independently of the CVXPY programs so that each
checks the other. Each iteration: shortest-path trees at the current costs → all-or-nothing flows
y (this also gives the relative gap), a search direction (y − x for FW; conjugate directions of
Mitradjieva & Lindberg, Transp. Sci. 47(2), 2013, for CFW/BFW), and an exact line search (bisection
on the directional derivative, which is monotone because the objective is convex).

Objectives: ``"wardrop"`` (Beckmann potential, costs ℓ) and ``"system_optimum"`` (total cost,
marginal costs). The Hessian used for conjugacy is diagonal, by a finite difference of the
gradient (exact for the direction only up to O(h); any conjugacy weight in [0, 1 − δ] keeps the
method convergent, so this only affects speed).
"""

from __future__ import annotations

import dataclasses
import enum
import time

import numpy as np

from .._checks import check_option
from ..errors import SolverError, SolveStatus, renamed_keywords
from ..network import arc_incidence
from ._result import GameResult, Objective, SolveTrace, evaluate_flow
from .game import RoutingGame
from .metrics import all_or_nothing, gap_measures, shortest_paths

__all__ = ["frank_wolfe", "FWTrace", "FWMethod"]


class FWMethod(enum.StrEnum):
    """Search direction of :func:`frank_wolfe`."""

    #: plain Frank–Wolfe (towards the all-or-nothing point)
    FW = "fw"
    #: conjugate Frank–Wolfe
    CFW = "cfw"
    #: bi-conjugate Frank–Wolfe
    BFW = "bfw"

    @classmethod
    def parse(cls, value: FWMethod | str) -> FWMethod:
        """Coerce a ``method`` argument; raises ModelError listing the allowed values."""
        return check_option(cls, value, "method")


_DELTA = 1e-2  # conjugacy weights are clipped to [0, 1 − δ]


#: Frank–Wolfe's convergence history (wall seconds and relative gap at each iteration): the
#: :class:`~lbtheory.games.SolveTrace` every solver's ``GameResult.stats`` holds.
FWTrace = SolveTrace


def _gradient(game: RoutingGame, objective: Objective):
    """Gradient of the objective in the arc flows: ℓ (Wardrop) or marginal costs (SO).

    Called as ``grad(x)`` or ``grad(x_sub, mask)`` (other arcs at zero flow are irrelevant for
    separable costs: only the masked entries are returned).
    """
    fam = game.costs.cost if objective is Objective.WARDROP else game.costs.marginal

    def grad(xv: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        if mask is None:
            return fam(xv)
        full = np.zeros(game.n_arcs)
        full[mask] = xv
        return fam(full)[mask]

    return grad


def _line_search(grad, x: np.ndarray, d: np.ndarray) -> float:
    """argmin over τ ∈ [0, 1] of the convex objective along d (bisection on its derivative)."""
    nz = d != 0
    if not np.any(nz):
        return 0.0
    xs, ds = x[nz], d[nz]

    def deriv(t: float) -> float:
        with np.errstate(invalid="ignore", over="ignore"):
            g = grad(xs + t * ds, nz)
            terms = g * ds
            v = float(np.sum(terms))
        if not np.isfinite(v):
            return np.inf
        # rounding noise counts as zero (ties in degenerate equilibria): the flows themselves
        # carry a relative rounding error, so the floor also scales with |g|·(|x| + |d|)
        noise = 1e-13 * float(np.sum(np.abs(terms))) \
            + 8 * np.finfo(float).eps * float(np.sum(np.abs(g) * (np.abs(xs) + np.abs(ds))))
        return 0.0 if abs(v) <= noise else v

    if deriv(1.0) <= 0:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if deriv(mid) > 0:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-15:
            break
    return 0.5 * (lo + hi)


@renamed_keywords(max_iter="max_iterations")
def frank_wolfe(game: RoutingGame, *, objective: Objective | str = Objective.WARDROP,
                method: FWMethod | str = FWMethod.BFW,
                tol: float = 1e-6, max_iterations: int = 100_000, time_limit: float = 60.0,
                throw: bool = True, start: np.ndarray | None = None
                ) -> GameResult:
    """Solve a routing game by Frank–Wolfe traffic assignment.

    Args:
        objective: :class:`~lbtheory.games.Objective` or its value, ``"wardrop"`` or
            ``"system_optimum"``.
        method: :class:`FWMethod` or its value, ``"fw"`` (plain), ``"cfw"`` (conjugate) or
            ``"bfw"`` (bi-conjugate).
        tol: stop when the relative gap ≤ tol.
        max_iterations: iteration limit (``max_iter=`` is its deprecated name);
            time_limit: wall-clock limit (s).
        throw: raise :class:`~lbtheory.errors.SolverError` when a limit stops it before
            ``tol`` (default; else the result has status MAX_ITERATIONS).
        start: feasible origin flows (K × m) to start from (default: all-or-nothing at zero
            flow).

    Returns:
        :class:`GameResult`: the iterate with the smallest relative gap seen (the gap is not
        monotone), its gap history in ``result.stats`` (a :class:`SolveTrace`);
        ``result.status`` is OPTIMAL or (``throw=False``) MAX_ITERATIONS.

    Raises:
        ParameterError: unknown ``method`` or ``objective``.
        SolverError: the free-flow all-or-nothing start has infinite cost (an M/M/1 capacity is
            exceeded; status FAILED, detail ``"infeasible_start"``), or a limit is hit with
            ``throw=True`` (status MAX_ITERATIONS).
    """
    method = FWMethod.parse(method)
    objective = Objective.parse(objective)
    grad = _gradient(game, objective)

    t_start = time.perf_counter()
    if start is None:
        _, pred = shortest_paths(game, grad(np.zeros(game.n_arcs)))
        F = all_or_nothing(game, pred)
    else:
        F = np.array(start, dtype=float)
    x = F.sum(axis=0)
    if not np.all(np.isfinite(grad(x))):
        bad = int(np.flatnonzero(~np.isfinite(grad(x)))[0])
        raise SolverError(f"frank_wolfe: the free-flow all-or-nothing start puts flow "
                          f"{x[bad]:g} on arc {bad} beyond its capacity; use "
                          "solve_wardrop/solve_system_optimum (CVXPY) for this game",
                          solver="frank_wolfe", status=SolveStatus.FAILED,
                          detail="infeasible_start")
    S_prev = S_prev2 = None
    tau_prev = 0.0
    times, gaps = [], []
    F_best, best_gap = F, np.inf
    status = SolveStatus.MAX_ITERATIONS
    it = 0
    while it < max_iterations:
        it += 1
        c = grad(x)
        dist, pred = shortest_paths(game, c)
        gap, _ = gap_measures(game, x, c, dist=dist)
        times.append(time.perf_counter() - t_start)
        gaps.append(gap)
        if gap < best_gap:  # the gap is not monotone: return the best iterate seen
            F_best, best_gap = F, gap
        if gap <= tol:
            status = SolveStatus.OPTIMAL
            break
        if times[-1] > time_limit:
            break
        Y = all_or_nothing(game, pred)
        S = Y
        if method is not FWMethod.FW and S_prev is not None:
            S = _conjugate(grad, x, F, Y, S_prev, S_prev2, tau_prev, method)
        D = S - F
        tau = _line_search(grad, x, D.sum(axis=0))
        F = F + tau * D
        x = F.sum(axis=0)
        S_prev2, S_prev, tau_prev = S_prev, S, tau
    res = evaluate_flow(game, F_best, objective, status=status,
                        solver=f"frank_wolfe:{method.value}",
                        seconds=time.perf_counter() - t_start, iterations=it)
    if throw and status is not SolveStatus.OPTIMAL:
        raise SolverError(f"frank_wolfe ({method.value}): relative gap {res.relative_gap:.3g} > "
                          f"tol {tol:g} after {it} iterations", solver="frank_wolfe",
                          status=status)
    return dataclasses.replace(res, stats=SolveTrace(np.asarray(times), np.asarray(gaps),
                                                     np.arange(len(gaps), dtype=np.int64)))


def _hessian(grad, x: np.ndarray) -> np.ndarray:
    h = 1e-6 * np.maximum(np.abs(x), 1e-3 * max(float(np.max(np.abs(x))), 1e-12))
    with np.errstate(invalid="ignore", over="ignore"):
        H = (grad(x + h) - grad(x)) / h
    return np.where(np.isfinite(H) & (H > 0), H, 0.0)


def _conjugate(grad, x, F, Y, S1, S2, tau1, method):
    """Conjugate (CFW) or bi-conjugate (BFW) point s_k as a combination of AON points."""
    H = _hessian(grad, x)
    y, s1 = Y.sum(axis=0), S1.sum(axis=0)
    dfw = y - x
    dbar = s1 - x
    if method is FWMethod.BFW and S2 is not None and 0 < tau1 < 1:
        s2 = S2.sum(axis=0)
        dbb = tau1 * s1 - x + (1.0 - tau1) * s2
        den_mu = float(np.dot(dbb * H, s2 - s1))
        den_nu = float(np.dot(dbar * H, dbar))
        if den_mu != 0 and den_nu != 0:
            mu = max(0.0, -float(np.dot(dbb * H, dfw)) / den_mu)
            nu = max(0.0, -float(np.dot(dbar * H, dfw)) / den_nu + mu * tau1 / (1.0 - tau1))
            b0 = 1.0 / (1.0 + mu + nu)
            return b0 * Y + nu * b0 * S1 + mu * b0 * S2
    den = float(np.dot(dbar * H, dfw - dbar))
    alpha = 0.0
    if den != 0:
        alpha = min(max(float(np.dot(dbar * H, dfw)) / den, 0.0), 1.0 - _DELTA)
    return alpha * S1 + (1.0 - alpha) * Y


@renamed_keywords(max_iter="max_iterations")
def refine_flows(game: RoutingGame, F: np.ndarray, objective: Objective | str, *,
                 max_iterations: int = 60, tol: float = 1e-14) -> np.ndarray:
    """Improve near-optimal origin flows (e.g. an interior-point solution) by BFW steps.

    Interior-point solvers leave O(√tol) flow on arcs whose cost ties the shortest path without
    strictly exceeding it (degenerate equilibria such as Pigou's); exact-line-search steps move
    that flow onto shortest paths. Flow conservation is first repaired exactly. Never worse than
    the start in the objective (exact line search on a convex function).
    """
    F = _fw_steps(game, _repair_conservation(game, F), objective, max_iterations=10)
    res = frank_wolfe(game, objective=objective, method=FWMethod.BFW, tol=tol,
                      max_iterations=max_iterations, throw=False, start=F)
    return res.origin_flow


def _fw_steps(game: RoutingGame, F: np.ndarray, objective: Objective | str, *,
              max_iterations: int) -> np.ndarray:
    """Plain FW steps until the FW gap −∇·(y − x) is at rounding level (≤ 1e-15·∇·x).

    The relative gap is blind to flow ε left on a tied arc (it changes the gap by O(ε²)); the
    FW step towards the all-or-nothing point removes it with τ = 1.
    """
    grad = _gradient(game, Objective.parse(objective))
    for _ in range(max_iterations):
        x = F.sum(axis=0)
        c = grad(x)
        if not np.all(np.isfinite(c)):
            break
        D = all_or_nothing(game, shortest_paths(game, c)[1]) - F
        d = D.sum(axis=0)
        if -float(np.dot(c, d)) <= 1e-15 * max(float(np.dot(c, x)), 1e-300):
            break
        tau = _line_search(grad, x, d)
        if tau == 0.0:
            break
        F = F + tau * D
    return F


def _repair_conservation(game: RoutingGame, F: np.ndarray) -> np.ndarray:
    """Smallest flow-weighted correction making each origin's flows conserve exactly.

    Solves min ‖W^{-1/2}δ‖ s.t. A(f + δ) = b with W = diag(f) (LSQR), so zero flows stay zero and
    positive flows change by a relative O(residual) amount.
    """
    import scipy.sparse as sp
    from scipy.sparse.linalg import lsqr

    F = F.copy()
    n, bal = game.n_nodes, game.origin_balance()
    for k, o in enumerate(game.origins):
        f = F[k]
        arcs = np.flatnonzero(f > 0)
        if arcs.size == 0:
            continue
        # node-arc incidence: +1 at the tail, −1 at the head (outflow − inflow)
        A = sp.csr_matrix(arc_incidence(game.tails[arcs], n) - arc_incidence(game.heads[arcs], n))
        keep = np.arange(n) != o
        r = (A @ f[arcs] - bal[k])[keep]
        w = np.sqrt(f[arcs])
        u = lsqr(A[keep] @ sp.diags(w), -r, atol=1e-16, btol=1e-16, iter_lim=10 * n)[0]
        F[k, arcs] = np.maximum(f[arcs] + w * u, 0.0)
    return F
