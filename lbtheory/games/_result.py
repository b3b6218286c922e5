"""Routing-game results: :class:`GameResult` and :func:`evaluate_flow` (shared by every solver)."""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

import numpy as np

from .._checks import check_option
from ..errors import ModelError, SolveStatus, warn_deprecated
from .game import RoutingGame
from .metrics import gap_measures, shortest_distances

__all__ = ["GameResult", "GamePoAResult", "evaluate_flow", "Objective", "SolveTrace"]


class Objective(enum.StrEnum):
    """What a routing-game solver optimises."""

    #: Wardrop (user) equilibrium: minimise the Beckmann potential Σ ∫_0^x ℓ.
    WARDROP = "wardrop"
    #: System optimum: minimise the total cost Σ x·ℓ(x).
    SYSTEM_OPTIMUM = "system_optimum"

    @classmethod
    def parse(cls, value: Objective | str) -> Objective:
        """Coerce an ``objective`` argument; raises ModelError listing the allowed values."""
        return check_option(cls, value, "objective")


@dataclasses.dataclass(frozen=True)
class SolveTrace:
    """Convergence history of an iterative solver: wall seconds and relative gap at each
    recorded iteration (every iteration for Frank–Wolfe, each certificate for the bush
    solver); ``iteration`` numbers them (empty when the solver does not record them)."""

    seconds: np.ndarray
    relative_gap: np.ndarray
    iteration: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))


@dataclasses.dataclass(frozen=True)
class GameResult:
    """A routing-game solution.

    Attributes:
        objective: :class:`Objective` (``"wardrop"`` or ``"system_optimum"``).
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
        state: the solver's state, to warm-start a later solve of a game with the same arcs
            (:class:`~lbtheory.games.tap.TAPState` of gradient projection,
            :class:`~lbtheory.games.BushState` of the bush solver; ``None`` for the others).
        stats: the solver's convergence history, a :class:`SolveTrace` (Frank–Wolfe, bush;
            ``None`` for the others).
        evaluation: ``(game, check costs, distances)`` the gap was computed from by
            :func:`evaluate_flow` (costs ℓ or marginal (m,), shortest-path distances K × n),
            which the certificate (:func:`~lbtheory.games.certify`) reuses for the same game
            object at the same costs; ``None`` for results built otherwise.

    Solvers return this object alone. Until 0.3, unpacking it as the old ``(result, state)``
    pair (``res, state = gradient_projection(game)``; ``(result, trace)`` for Frank–Wolfe)
    still works and warns.
    """

    objective: Objective
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
    state: Any = dataclasses.field(default=None, repr=False, compare=False)
    stats: SolveTrace | None = dataclasses.field(default=None, repr=False, compare=False)
    evaluation: tuple[RoutingGame, np.ndarray, np.ndarray] | None = dataclasses.field(
        default=None, repr=False, compare=False)

    def __iter__(self) -> Any:
        """Deprecated tuple unpacking: ``(result, state)`` (``(result, stats)`` when the
        solver keeps no state, as Frank–Wolfe's ``(result, trace)``)."""
        warn_deprecated("unpacking a solver's (result, state) pair",
                        "the GameResult itself and its .state / .stats")
        return iter((self, self.stats if self.state is None else self.state))

    def __getitem__(self, index: int) -> Any:
        """Deprecated tuple indexing: ``solve(...)[0]`` is the result, ``[1]`` its state."""
        warn_deprecated("indexing a solver's (result, state) pair",
                        "the GameResult itself and its .state / .stats")
        return (self, self.stats if self.state is None else self.state)[index]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the CLI (arc order as in the game)."""
        return {"arc_flow": [float(v) for v in self.arc_flow],
                "beckmann_objective": self.beckmann_objective,
                "total_travel_time": self.total_travel_time,
                "relative_gap": self.relative_gap,
                "average_excess_cost": self.average_excess_cost,
                "status": self.status.value}


@dataclasses.dataclass(frozen=True)
class GamePoAResult:
    """Price of anarchy of a routing game.

    Attributes:
        ratio: TSTT(Wardrop)/TSTT(system optimum), dimensionless, ≥ 1.
        wardrop: the Wardrop equilibrium; optimum: the system optimum.
        status: OPTIMAL when both solves are, else the first non-optimal status.
    """

    ratio: float
    wardrop: GameResult
    optimum: GameResult
    status: SolveStatus

    @property
    def wardrop_gap(self) -> float:
        """The relative gap the Wardrop equilibrium reached (under travel costs)."""
        return self.wardrop.relative_gap

    @property
    def optimum_gap(self) -> float:
        """The relative gap the system optimum reached (under marginal costs)."""
        return self.optimum.relative_gap

    @classmethod
    def from_results(cls, wardrop: GameResult, optimum: GameResult) -> GamePoAResult:
        """The PoA of a solved pair (the one definition of the ratio)."""
        if wardrop.objective is not Objective.WARDROP \
                or optimum.objective is not Objective.SYSTEM_OPTIMUM:
            raise ModelError(f"GamePoAResult: expected a wardrop and a system_optimum result, "
                             f"got {wardrop.objective!r} and {optimum.objective!r}")
        status = next((r.status for r in (wardrop, optimum)
                       if r.status is not SolveStatus.OPTIMAL), SolveStatus.OPTIMAL)
        w, o = wardrop.total_travel_time, optimum.total_travel_time
        # a network whose every flow costs nothing: the equilibrium is optimal (ratio 1 by
        # convention, not 0/0); an optimum of 0 below a positive equilibrium cost: unbounded
        poa = w / o if o > 0 else (1.0 if w <= 0 else math.inf)
        return cls(poa, wardrop, optimum, status)


def evaluate_flow(game: RoutingGame, origin_flow: np.ndarray, objective: Objective | str, *,
                  status: SolveStatus = SolveStatus.OPTIMAL, solver: str = "", seconds: float = 0.0,
                  iterations: int = 0) -> GameResult:
    """Build a :class:`GameResult` (costs, objectives, gaps) from origin flows (K × m)."""
    objective = Objective.parse(objective)
    f = np.maximum(np.asarray(origin_flow, dtype=float), 0.0)
    x = f.sum(axis=0)
    bank = game.costs
    cost = bank.cost(x)
    check = cost if objective is Objective.WARDROP else bank.marginal(x)
    dist = shortest_distances(game, check)
    gap, aec = gap_measures(game, x, check, dist=dist)
    return GameResult(objective, x, f, cost, float(bank.potential(x).sum()),
                      float(bank.total(x).sum()), float(gap), float(aec), status, solver,
                      seconds, iterations, evaluation=(game, check, dist))
