"""The verbs: one ``solve_*`` style for cell networks and general routing games.

:func:`solve_wardrop`, :func:`solve_system_optimum` and :func:`price_of_anarchy` take either a
:class:`~lbtheory.network.CellNetwork` (the programs of THEORY §5, by :class:`EquilibriumProblem`)
or a :class:`~lbtheory.games.RoutingGame` (dispatched on its type to
:func:`lbtheory.games.solve_game`, the certified routing-game solver with its fallback chain).
Options are keyword-only; ``tol`` defaults to what each kind of problem is certified to (the
Definition-1 residual 1e-6 for a cell network, the relative gap
:data:`lbtheory.games.solve.DEFAULT_TOL` for a game), and ``throw=True`` raises
:class:`~lbtheory.errors.SolverError` when no route reaches it.

The routing-game verbs ``lbtheory.games.wardrop_equilibrium`` / ``system_optimum`` /
``price_of_anarchy`` are deprecated aliases of these (they warn and give the same results).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, overload

import numpy as np

from ..costs import CostKind
from ..errors import SolveStatus, TopologyError
from ..games import GamePoAResult, GameResult, Objective, RoutingGame, solve_game
from ..games.solve import solve_pair
from ..network import CellNetwork
from ._result import EquilibriumResult
from ._solve import EquilibriumProblem

__all__ = ["solve_equilibrium", "solve_wardrop", "solve_system_optimum", "solve_rif",
           "PoAResult", "price_of_anarchy", "demand_sweep"]

#: Default target of a cell network: relative Definition-1 residual (dimensionless).
CELL_TOL = 1e-6


def solve_equilibrium(net: CellNetwork, cost: CostKind | str, *, solver: str | None = None,
                      tol: float = CELL_TOL, throw: bool = True,
                      **solver_options: Any) -> EquilibriumResult:
    """Equilibrium of ``cost`` routing: gradient → system optimum, latency → Wardrop, rif → RIF.

    Raises:
        InfeasibleDemandError: Assumption 2 fails (with the shortfall in req/s).
        SolverError: the solver failed (names solver and status), when ``throw``.
    """
    return EquilibriumProblem(net, cost, solver=solver).solve(tol=tol, throw=throw,
                                                              **solver_options)


def _solve(net: CellNetwork | RoutingGame, cost: CostKind, objective: Objective,
           solver: str | None, tol: float | None, throw: bool,
           options: dict[str, Any]) -> EquilibriumResult | GameResult:
    """Dispatch one verb on the problem's type (the one place that does)."""
    from .._checks import check_bool, check_real

    if tol is not None:
        check_real(tol, "tol", low=0.0, high=1.0, low_open=True, high_open=True)
    check_bool(throw, "throw")
    if isinstance(net, RoutingGame):
        extra = {} if tol is None else {"tol": tol}
        return solve_game(net, objective, solver=solver, throw=throw, **extra, **options)
    return solve_equilibrium(net, cost, solver=solver, tol=CELL_TOL if tol is None else tol,
                             throw=throw, **options)


@overload
def solve_wardrop(net: CellNetwork, *, solver: str | None = None, tol: float | None = None,
                  throw: bool = True, **options: Any) -> EquilibriumResult: ...


@overload
def solve_wardrop(net: RoutingGame, *, solver: str | None = None, tol: float | None = None,
                  throw: bool = True, **options: Any) -> GameResult: ...


def solve_wardrop(net: CellNetwork | RoutingGame, *, solver: str | None = None,
                  tol: float | None = None, throw: bool = True,
                  **options: Any) -> EquilibriumResult | GameResult:
    """Wardrop equilibrium: of latency routing on a cell network (Beckmann potential, THEORY §5),
    or the user equilibrium of a routing game.

    Args:
        net: a :class:`~lbtheory.network.CellNetwork` or a :class:`~lbtheory.games.RoutingGame`.
        solver: a CVXPY solver name (default: the dual Newton route for a cell network,
            Clarabel for a game; others are tried if it fails).
        tol: target relative Definition-1 residual (cell network, default 1e-6) or relative
            gap (game, default :data:`lbtheory.games.solve.DEFAULT_TOL`), dimensionless.
        throw: raise :class:`~lbtheory.errors.SolverError` when no route reaches ``tol``
            (else a result whose status says so).
        **options: a cell network: options of ``cvxpy.Problem.solve``; a game: ``method``,
            ``polish``, ``time_limit`` of :func:`lbtheory.games.solve_game`.

    Returns:
        An :class:`EquilibriumResult` (cell network) or a :class:`~lbtheory.games.GameResult`.

    Example:
        >>> from lbtheory.games import pigou
        >>> round(solve_wardrop(pigou()).total_travel_time, 6)
        1.0
    """
    return _solve(net, CostKind.LATENCY, Objective.WARDROP, solver, tol, throw, options)


@overload
def solve_system_optimum(net: CellNetwork, *, solver: str | None = None,
                         tol: float | None = None, throw: bool = True,
                         **options: Any) -> EquilibriumResult: ...


@overload
def solve_system_optimum(net: RoutingGame, *, solver: str | None = None,
                         tol: float | None = None, throw: bool = True,
                         **options: Any) -> GameResult: ...


def solve_system_optimum(net: CellNetwork | RoutingGame, *, solver: str | None = None,
                         tol: float | None = None, throw: bool = True,
                         **options: Any) -> EquilibriumResult | GameResult:
    """System optimum: the equilibrium of gradient routing on a cell network (minimum total
    latency rate, THEORY §5), or the minimum total cost Σ_a x_a ℓ_a(x_a) of a routing game (its
    relative gap measured under marginal costs). Arguments as :func:`solve_wardrop`.
    """
    return _solve(net, CostKind.GRADIENT, Objective.SYSTEM_OPTIMUM, solver, tol, throw, options)


def solve_rif(net: CellNetwork, **kwargs: Any) -> EquilibriumResult:
    """RIF equilibrium (cost N_j/k_j, no network term; network time counts in its latency).

    Inflows and workloads are unique; the routing is not (the cost ignores τ), so the one with
    the least network time is returned (see :func:`._result._rif_least_network_time`).
    """
    return solve_equilibrium(net, CostKind.RIF, **kwargs)


@dataclasses.dataclass(frozen=True)
class PoAResult:
    """Price of anarchy of latency routing on a cell network, and the same ratio for RIF routing.

    Attributes:
        wardrop, system_optimum, rif: the three equilibria (THEORY §5).
        price_of_anarchy: C(Wardrop)/C(system optimum), dimensionless, ≥ 1 up to solver
            tolerance, with C the total latency rate (request-seconds per second); also
            :attr:`ratio`.
        rif_ratio: C(RIF)/C(system optimum) (a lower bound over RIF equilibria, see
            :func:`solve_rif`).

    Example:
        >>> from lbtheory.instances import mm1_pigou
        >>> round(price_of_anarchy(mm1_pigou(u=1.0, r=0.5)).ratio, 6)
        1.207107
    """

    wardrop: EquilibriumResult
    system_optimum: EquilibriumResult
    rif: EquilibriumResult
    price_of_anarchy: float
    rif_ratio: float

    @classmethod
    def from_equilibria(cls, wardrop: EquilibriumResult, system_optimum: EquilibriumResult,
                        rif: EquilibriumResult) -> PoAResult:
        """The ratios of three solved equilibria (the one definition of the PoA here)."""
        so = system_optimum.total_latency_rate
        if so <= 0:  # no demand: 0/0, the ratios are undefined (NaN)
            return cls(wardrop=wardrop, system_optimum=system_optimum, rif=rif,
                       price_of_anarchy=math.nan, rif_ratio=math.nan)
        return cls(wardrop=wardrop, system_optimum=system_optimum, rif=rif,
                   price_of_anarchy=wardrop.total_latency_rate / so,
                   rif_ratio=rif.total_latency_rate / so)

    @property
    def ratio(self) -> float:
        """The price of anarchy C(Wardrop)/C(system optimum) (same name as the routing-game
        :class:`~lbtheory.games.GamePoAResult`)."""
        return self.price_of_anarchy

    @property
    def status(self) -> SolveStatus:
        """``OPTIMAL`` when all three equilibria are, else the first status that is not."""
        for eq in (self.wardrop, self.system_optimum, self.rif):
            if eq.status is not SolveStatus.OPTIMAL:
                return eq.status
        return SolveStatus.OPTIMAL


@overload
def price_of_anarchy(net: CellNetwork, *, solver: str | None = None, tol: float | None = None,
                     **options: Any) -> PoAResult: ...


@overload
def price_of_anarchy(net: RoutingGame, *, solver: str | None = None, tol: float | None = None,
                     **options: Any) -> GamePoAResult: ...


def price_of_anarchy(net: CellNetwork | RoutingGame, *, solver: str | None = None,
                     tol: float | None = None, **options: Any) -> PoAResult | GamePoAResult:
    """Price of anarchy: cost at the Wardrop equilibrium over cost at the system optimum (≥ 1
    up to solver tolerance), with the solutions.

    A cell network: the Wardrop, system-optimum and RIF programs, and both ratios
    (:class:`PoAResult`). A routing game: TSTT(Wardrop)/TSTT(system optimum)
    (:class:`~lbtheory.games.GamePoAResult`, ``ratio``, ``wardrop``, ``optimum``, ``status``,
    and the relative gap each equilibrium reached, ``wardrop_gap`` / ``optimum_gap``); the
    optimum starts from the equilibrium's bushes when the bush solver gives both
    (:func:`lbtheory.games.solve.solve_pair`).
    Arguments as :func:`solve_wardrop` (``throw`` among ``options``).

    Raises:
        TopologyError: every arrival rate of a cell network is 0 (the ratios are 0/0).
        SolverError: as :func:`solve_wardrop`.

    Example:
        >>> from lbtheory.games import pigou
        >>> round(price_of_anarchy(pigou()).ratio, 6)
        1.333333
    """
    kw: dict[str, Any] = {"solver": solver, "tol": tol, **options}
    if isinstance(net, RoutingGame):  # the optimum warm-started from the equilibrium's bushes
        if tol is None:
            del kw["tol"]
        return GamePoAResult.from_results(*solve_pair(net, **kw))
    if not net.total_demand > 0:
        raise TopologyError("every arrival_rate is 0, so the price of anarchy C(Wardrop)/C(opt) "
                            "is 0/0, undefined: give at least one cell a positive arrival_rate "
                            "(req/s)")
    if tol is None:
        kw["tol"] = CELL_TOL
    return PoAResult.from_equilibria(solve_wardrop(net, **kw), solve_system_optimum(net, **kw),
                                     solve_rif(net, **kw))


def demand_sweep(net: CellNetwork, scales: np.ndarray | list[float], *,
                 solver: str | None = None, tol: float = CELL_TOL) -> dict[str, np.ndarray]:
    """PoA and RIF ratio as every arrival rate is multiplied by each of ``scales``.

    The three programs are built once and re-solved (DPP). Scales where Assumption 2 fails are
    reported as NaN. Returns arrays ``scale``, ``utilisation`` (Λ/Σμ̄), ``price_of_anarchy``,
    ``rif_ratio`` and mean latencies (s) ``wardrop``, ``system_optimum``, ``rif``.
    """
    from ..errors import InfeasibleDemandError

    scales = np.asarray(scales, dtype=float)
    probs = {k: EquilibriumProblem(net, c, solver=solver) for k, c in
             (("wardrop", CostKind.LATENCY), ("system_optimum", CostKind.GRADIENT),
              ("rif", CostKind.RIF))}
    keys = (*probs, "price_of_anarchy", "rif_ratio")
    out = {k: np.full(len(scales), np.nan) for k in keys}
    for s_i, s in enumerate(scales):
        lam = net.arrival_rates * s
        try:
            net.with_arrival_rates(lam).check_feasibility()
        except InfeasibleDemandError:
            continue
        eqs = {k: prob.solve(arrival_rates=lam, tol=tol, check_feasibility=False)
               for k, prob in probs.items()}
        poa = PoAResult.from_equilibria(**eqs)
        for k, eq in eqs.items():
            out[k][s_i] = eq.mean_latency
        out["price_of_anarchy"][s_i], out["rif_ratio"][s_i] = poa.ratio, poa.rif_ratio
    return {"scale": scales, "utilisation": scales * net.total_demand / net.max_rates.sum(),
            **out}
