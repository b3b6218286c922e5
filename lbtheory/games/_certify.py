"""The certificate of a routing-game solution (:func:`certify`), independent of any solver.

**Relative gap and used-arc cost spread.** Take the check costs c (ℓ for Wardrop, the marginal
costs x·ℓ' + ℓ for the system optimum), d_k the shortest-path distances from origin k under c
(d_k(o_k) = 0), and the reduced cost r_ka = c_a + d_k(u) − d_k(v) of arc a = (u, v) for
origin k, which is ≥ 0 on every arc k may use. Flow conservation of each origin's flow f_k
turns the excess into a sum over arcs,

    TSTT − SPTT = Σ_k Σ_a f_ka · r_ka,      so      f_ka · r_ka ≤ G · TSTT   for every (k, a),

with G = (TSTT − SPTT)/TSTT the relative gap: every term is non-negative and they add up to
G·TSTT. In the units of :func:`~lbtheory.games.metrics.used_arc_spread` (r relative to R, the
largest OD cost) an arc carrying f_ka has spread at most G·TSTT/(f_ka·R); an arc carrying a
share θ of its origin's demand D_k, at most G·TSTT/(θ·D_k·R). The gap bounds the spread where
there is flow and nothing where the flow vanishes (a path carrying ε may cost G·TSTT/ε more), so
no fixed spread limit can follow a requested gap: the old limit (spread ≤ 1e-6 whatever the
gap) refused every answer at gap 1e-3 (spreads 1e-3–1e-2 on arcs with little flow, allowed by
the relation) and said nothing beyond the gap at 1e-12.

The certificate is therefore the gap itself, G ≤ tol, recomputed from the flows by
:func:`~lbtheory.games.evaluate_flow` (scipy's Dijkstra, not the solvers' own), with the relation
above checked as its consistency test (:func:`~lbtheory.games.metrics.reduced_cost_bounds`):
no reduced cost below −ρ·R on an arc an origin may use (the distances are shortest paths, so
SPTT is not overstated and G not understated), and f_ka·(r_ka − ρ·R) ≤ max(G, 0)·TSTT + ρ·TSTT
on every used arc, with ρ = :data:`ROUNDING` for the rounding of sums of costs. A result that
meets the gap but fails this test has a gap that its own flows and costs contradict; every
route is judged by the same evaluation, so :func:`~lbtheory.games.solve_game` stops there
instead of trying the other solvers.
"""

from __future__ import annotations

import enum

import numpy as np

from ._result import GameResult, Objective
from .game import RoutingGame
from .metrics import reduced_cost_bounds, shortest_distances

__all__ = ["certify", "check_certificate", "Verdict", "ROUNDING"]

#: Rounding allowance ρ of the consistency test, relative to the largest OD cost R (reduced
#: costs) and to TSTT (the flow-weighted spread): sums of ~100 path costs in float64 are exact
#: to ~1e-14 relative.
ROUNDING = 1e-12

#: Largest flow-conservation violation of a certified answer, relative to the origin's demand.
CONSERVATION = 1e-9


class Verdict(enum.Enum):
    """Outcome of :func:`check_certificate`."""

    #: every part holds
    CERTIFIED = "certified"
    #: finite, feasible flows whose relative gap exceeds the target (another solver may do better)
    GAP = "gap"
    #: non-finite values, conservation or the arc-use rule broken
    INFEASIBLE = "infeasible"
    #: the gap meets the target but the flows' reduced costs contradict it (see the module)
    INCONSISTENT = "inconsistent"


def _feasibility(game: RoutingGame, F: np.ndarray) -> str:
    """Why ``F`` is not a feasible origin flow ('' when it is)."""
    bal = game.origin_balance()
    n = game.n_nodes
    dem = np.maximum(game.demand.sum(axis=1), 1e-300)
    for k in range(len(F)):
        net = np.bincount(game.tails, F[k], minlength=n) - np.bincount(game.heads, F[k],
                                                                      minlength=n)
        cons = float(np.max(np.abs(net - bal[k]))) / dem[k]
        if cons > CONSERVATION:
            return f"flow conservation violated by {cons:.2g} of an origin's demand"
        bad = float(F[k][~game.usable(k)].max(initial=0.0))  # blocked arcs, non-through nodes
        if bad > 1e-12 * dem[k]:
            return (f"origin {k} sends {bad:.3g} on an arc it may not use (blocked or through a "
                    f"non-through node)")
    return ""


def check_certificate(game: RoutingGame, res: GameResult, tol: float) -> tuple[Verdict, str]:
    """The verdict on ``res`` at target relative gap ``tol`` and, unless certified, why.

    Checked in order: finite flows and gap; flow conservation per origin and node (≤
    :data:`CONSERVATION` of the origin's demand) and the arc-use rule; −tol ≤ G ≤ tol; the
    gap–spread relation of the module docstring.
    """
    F = res.origin_flow
    if not np.all(np.isfinite(F)) or not np.isfinite(res.relative_gap):
        return Verdict.INFEASIBLE, "non-finite flows or gap"
    why = _feasibility(game, F)
    if why:
        return Verdict.INFEASIBLE, why
    gap = res.relative_gap
    if not -tol <= gap <= tol:
        return Verdict.GAP, f"relative gap {gap:.3g} > {tol:g}"
    cost = res.arc_cost if res.objective is Objective.WARDROP else \
        game.costs.marginal(res.arc_flow)
    ev = res.evaluation  # evaluate_flow's distances, when computed for this game at these costs
    same = ev is not None and ev[0] is game and ev[1].shape == cost.shape \
        and np.array_equal(ev[1], cost)
    dist = ev[2] if same else shortest_distances(game, cost)
    lowest, heaviest = reduced_cost_bounds(game, F, cost, dist=dist, slack=ROUNDING)
    if lowest < -ROUNDING:
        return Verdict.INCONSISTENT, (f"a reduced cost of {lowest:.3g} (relative to the largest "
                                      "OD cost): the distances are not shortest paths, so the "
                                      f"gap {gap:.3g} may be understated")
    if heaviest > max(gap, 0.0) + ROUNDING:
        return Verdict.INCONSISTENT, (f"the relative gap {gap:.3g} is contradicted by a used arc "
                                      f"whose flow × reduced cost is {heaviest:.3g} of TSTT "
                                      "(each such term is at most the gap)")
    return Verdict.CERTIFIED, ""


def certify(game: RoutingGame, res: GameResult, tol: float) -> tuple[bool, str]:
    """Whether ``res`` satisfies every part of the equilibrium definition to ``tol``.

    Checked, independently of any solver's own status: finite flows; flow conservation per
    origin and node (relative to the origin's demand, ≤ 1e-9); the arc-use rule (blocked arcs,
    non-through nodes); relative gap ≤ tol (:func:`~lbtheory.games.gap_measures`); and the
    consistency of that gap with the reduced costs of the used arcs (each used arc's flow ×
    reduced cost is at most the gap × TSTT: the cost spread on used arcs follows the gap, see
    :mod:`lbtheory.games._certify`).

    Returns:
        ``(ok, why)``: ``why`` names the first failed part (empty when ok).
    """
    verdict, why = check_certificate(game, res, tol)
    return verdict is Verdict.CERTIFIED, why
