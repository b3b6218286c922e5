"""Equilibria (THEORY §5): Wardrop, system optimum, RIF equilibrium, PoA.

The verbs :func:`solve_wardrop`, :func:`solve_system_optimum` and :func:`price_of_anarchy` take a
cell network or a general routing game (:class:`lbtheory.games.RoutingGame`, dispatched to
:func:`lbtheory.games.solve_game`); options are keyword-only.

Modules: :mod:`._verbs` (the verbs, and the dispatch on the problem's type), :mod:`._dual` (the
default route for cell networks: Newton's method on the entropic dual in one
variable per cell, then the KKT polish), :mod:`._solve` (the CVXPY programs, built once with
parameters, the fallback; the DCP-form registry), :mod:`._colgen` (column
generation for the CVXPY programs), :mod:`._result` (:class:`EquilibriumResult`,
Definition-1 residuals) and
:mod:`._polish` (the one Newton polish of the KKT system: :func:`polish_flows`, the active-set
method the solvers use, and :func:`polish_on_support`, which keeps tied arcs and is what
:mod:`lbtheory.stability` uses for its operating point), :mod:`._kkt` (the active-set Newton
core of :func:`polish_flows`, in the workloads, on forest supports) and :mod:`._cells` (fast
numpy evaluation of the cell costs and rates, the solvers' hot path).
"""

from ._polish import SupportPoint, polish_flows, polish_on_support, tied_support
from ._result import EquilibriumResult, evaluate_routing, optimality_residuals
from ._solve import EquilibriumProblem
from ._verbs import (
    PoAResult,
    demand_sweep,
    price_of_anarchy,
    solve_equilibrium,
    solve_rif,
    solve_system_optimum,
    solve_wardrop,
)

__all__ = [
    "EquilibriumResult",
    "EquilibriumProblem",
    "PoAResult",
    "solve_equilibrium",
    "solve_wardrop",
    "solve_system_optimum",
    "solve_rif",
    "price_of_anarchy",
    "optimality_residuals",
    "evaluate_routing",
    "demand_sweep",
    "polish_flows",
    "polish_on_support",
    "tied_support",
    "SupportPoint",
]


def __getattr__(name: str) -> object:
    if name in ("DCP_FORMS", "dcp_potential_value"):  # one home since 0.2: lbtheory.games
        from .. import games
        from ..errors import warn_deprecated

        warn_deprecated(f"lbtheory.equilibrium.{name}", f"lbtheory.games.{name}")
        return getattr(games, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
