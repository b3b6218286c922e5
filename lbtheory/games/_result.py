"""Routing-game results: :class:`GameResult` and :func:`evaluate_flow` (shared by every solver)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import ModelError, SolveStatus
from .game import RoutingGame
from .metrics import gap_measures

__all__ = ["GameResult", "evaluate_flow", "Objective"]

Objective = str  # "wardrop" | "system_optimum"
_OBJECTIVES = ("wardrop", "system_optimum")


@dataclasses.dataclass(frozen=True)
class GameResult:
    """A routing-game solution.

    Attributes:
        objective: ``"wardrop"`` or ``"system_optimum"``.
        arc_flow: x_a (m,), flow units, arc order of the game.
        origin_flow: f_ka (K × m), flow of origin k on arc a.
        arc_cost: ℓ_a(x_a) (m,).
        beckmann_objective: Σ_a ∫_0^{x_a} ℓ_a (cost × flow units, the data's own units).
        total_travel_time: Σ_a x_a ℓ_a(x_a) (TSTT).
        relative_gap: (TSTT − SPTT)/TSTT under ℓ (Wardrop) or under marginal costs (system
            optimum).
        average_excess_cost: (TSTT − SPTT)/total demand, same costs as the gap.
        status: solver outcome.
        solver: solver name; seconds: wall time; iterations: solver iterations (if known).
    """

    objective: str
    arc_flow: np.ndarray
    origin_flow: np.ndarray
    arc_cost: np.ndarray
    beckmann_objective: float
    total_travel_time: float
    relative_gap: float
    average_excess_cost: float
    status: SolveStatus
    solver: str = ""
    seconds: float = 0.0
    iterations: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the CLI (arc order as in the game)."""
        return {"arc_flow": [float(v) for v in self.arc_flow],
                "beckmann_objective": self.beckmann_objective,
                "total_travel_time": self.total_travel_time,
                "relative_gap": self.relative_gap,
                "average_excess_cost": self.average_excess_cost,
                "status": self.status.value}


def _check_objective(objective: str) -> str:
    if objective not in _OBJECTIVES:
        raise ModelError(f"objective: expected one of {_OBJECTIVES}, got {objective!r}")
    return objective


def evaluate_flow(game: RoutingGame, origin_flow: np.ndarray, objective: str, *,
                  status: SolveStatus = SolveStatus.OPTIMAL, solver: str = "", seconds: float = 0.0,
                  iterations: int = 0) -> GameResult:
    """Build a :class:`GameResult` (costs, objectives, gaps) from origin flows (K × m)."""
    _check_objective(objective)
    f = np.maximum(np.asarray(origin_flow, dtype=float), 0.0)
    x = f.sum(axis=0)
    bank = game.costs
    cost = bank.cost(x)
    check = cost if objective == "wardrop" else bank.marginal(x)
    gap, aec = gap_measures(game, x, check)
    return GameResult(objective, x, f, cost, float(bank.potential(x).sum()),
                      float(bank.total(x).sum()), float(gap), float(aec), status, solver,
                      seconds, iterations)
