"""Equilibrium results: assembling flows into routing, workloads, costs and the Definition-1
residuals (THEORY §5). Private to :mod:`lbtheory.equilibrium`, which re-exports the public names.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ..costs import CostKind, cell_cost, static_cost
from ..costs import total_latency_rate as _total_latency_rate
from ..errors import SolveStatus
from ..network import CellNetwork, min_cost_routing
from ..simplex import simplex_argmin
from ._polish import polish_flows_workload

#: routing weight above which an arc counts as "used" in the cost-spread residual
USED_ARC_TOL = 1e-6
#: default target relative Definition-1 residual (``tol`` of the solvers)
DEFAULT_TOL = 1e-6


# ----------------------------------------------------------------------------- results
@dataclasses.dataclass(frozen=True)
class EquilibriumResult:
    """An equilibrium (THEORY Definition 1) with its optimality residuals.

    Attributes:
        kind: ``"wardrop"``, ``"system_optimum"`` or ``"rif"``.
        cost: the cost signal whose equilibrium this is.
        routing: x (n×n), row i = source i's split over destination cells (zeros off-arc).
        inflow: z_j (req/s).
        workload: N_j = μ_j⁻¹(z_j) (requests).
        arc_cost: c_ij(N_j) on admissible arcs, NaN elsewhere (s, or requests/replica for RIF).
        min_cost: c*_i = min_j c_ij per source (NaN for a cell without outgoing arcs).
        total_latency_rate: Σ_j N_j + Σ 2τ_ij λ_i x_ij (request-seconds per second).
        mean_latency: total_latency_rate / Λ (s), end-to-end (network + serving).
        residual: max of the four relative residuals below (target ≤ 1e-6): every part of
            Definition 1, so ``status`` is ``OPTIMAL`` only if each is within ``tol``.
        cs_residual: max_i (Σ_j x_ij c_ij − c*_i)/Σ_j x_ij c_ij (complementary slackness).
        cost_spread: max_i (max cost on a used arc − c*_i)/c*_i, arcs with x_ij > 1e-6.
        flow_residual: max_j |z_j − μ_j(N_j)|/μ̄_j (flow balance (5)); an inflow at or above
            capacity μ̄_j (no finite N_j) shows here as (z_j − μ̄_j)/μ̄_j, never clipped away.
        demand_residual: max_i |Σ_j λ_i x_ij − λ_i|/λ_i.
        status: ``OPTIMAL`` if the solver returned a solution and ``residual`` ≤ the requested
            ``tol``; ``OPTIMAL_INACCURATE`` if it returned one with a larger residual; otherwise
            the solver's word (``FAILED``, ``MAX_ITERATIONS``, ...).
        solver: solver name; iterations: outer (cutting-plane) iterations.
        polished: the flows are the KKT point found by the Newton polish
            (:func:`~lbtheory.equilibrium.polish_flows`), not the solver's raw flows.
    """

    kind: str
    cost: CostKind
    routing: np.ndarray
    inflow: np.ndarray
    workload: np.ndarray
    arc_cost: np.ndarray
    min_cost: np.ndarray
    total_latency_rate: float
    mean_latency: float
    residual: float
    cs_residual: float
    cost_spread: float
    flow_residual: float
    demand_residual: float
    status: SolveStatus
    solver: str
    iterations: int = 1
    polished: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the CLI contract (plus extra diagnostic keys)."""
        return {
            "routing": self.routing.tolist(),
            "inflow": self.inflow.tolist(),
            "workload": self.workload.tolist(),
            "mean_latency": float(self.mean_latency),
            "total_latency_rate": float(self.total_latency_rate),
            "residual": float(self.residual),
            "status": self.status.value,
            "cost": self.cost.value,
            "arc_cost": [[None if not np.isfinite(v) else float(v) for v in row]
                         for row in self.arc_cost],
            "min_cost": [None if not np.isfinite(v) else float(v) for v in self.min_cost],
            "cs_residual": float(self.cs_residual),
            "cost_spread": float(self.cost_spread),
            "flow_residual": float(self.flow_residual),
            "solver": self.solver,
            "iterations": int(self.iterations),
        }


_KIND_OF_COST = {CostKind.LATENCY: "wardrop", CostKind.GRADIENT: "system_optimum",
                 CostKind.RIF: "rif"}


# ----------------------------------------------------------------------------- assembly
def honest_status(solver_status: SolveStatus, residual: float, tol: float) -> SolveStatus:
    """The status a result may claim: a returned solution is ``OPTIMAL`` only if its
    Definition-1 residual is at most ``tol`` (else ``OPTIMAL_INACCURATE``), whatever the solver
    said; a failed solve keeps the solver's word."""
    if not solver_status.solved:
        return solver_status
    return SolveStatus.OPTIMAL if residual <= tol else SolveStatus.OPTIMAL_INACCURATE


def _assemble(net: CellNetwork, cost: CostKind, flows: np.ndarray, src: np.ndarray,
              dst: np.ndarray, status: SolveStatus, solver: str, iterations: int,
              polish: bool = True, tol: float = DEFAULT_TOL,
              workload: np.ndarray | None = None) -> EquilibriumResult:
    """Result of arc flows (``src``/``dst`` order, req/s), Newton-polished
    (:func:`~._polish.polish_flows_workload`, from ``workload`` when a solver gives one) when
    that lowers the Definition-1 residual; the polished pair (N, x) is reported as is."""
    n = net.n
    F = np.zeros((n, n))
    np.add.at(F, (src, dst), flows)
    raw = _assemble_flows(net, cost, F, status, solver, iterations, tol=tol)
    if not polish or not status.solved or raw.residual < 1e-12:
        return raw
    out = polish_flows_workload(net, cost, F, workload)
    if out is None:
        return raw
    pol = _assemble_flows(net, cost, out[0], status, solver, iterations, tol=tol,
                          workload=out[1])
    if pol.residual < raw.residual:
        return dataclasses.replace(pol, polished=True)
    return raw


def _assemble_flows(net: CellNetwork, cost: CostKind, F: np.ndarray, status: SolveStatus,
                    solver: str, iterations: int, tol: float = DEFAULT_TOL,
                    workload: np.ndarray | None = None) -> EquilibriumResult:
    """Result of arc flows F (n×n, req/s). The workloads are μ⁻¹ of the inflows unless a
    solver's own ``workload`` (requests) is given — then flow balance (5) is checked on the
    pair (N, x) as Definition 1 states it, which stays exact for an inflow within rounding of
    capacity (e.g. a saturating exponential model, μ(N) = μ̄ to double precision)."""
    n = net.n
    lam = net.arrival_rates
    # renormalise each source's flows to its demand (removes solver-level infeasibility ~1e-9;
    # the shortfall before renormalising is reported as demand_residual)
    out = F.sum(axis=1)
    demand_residual = float(np.max(np.abs(out - lam) / np.maximum(lam, 1e-300),
                                   where=lam > 0, initial=0.0))
    scale = np.divide(lam, out, out=np.zeros(n), where=out > 0)
    F = F * scale[:, None]
    z = F.sum(axis=0)
    # an inflow at or above capacity has no workload: N is evaluated just below capacity, and
    # the excess stays in the reported inflow, so flow_residual (and the status) show it
    N = np.asarray(net.models.inverse_rate(np.minimum(z, net.max_rates * (1 - 1e-15))),
                   dtype=float) if workload is None else np.asarray(workload, dtype=float)
    routing = _routing_from_flows(net, F, N, cost)
    return _finish(net, cost, routing, z, N, status, solver, iterations, demand_residual, tol)


def evaluate_routing(net: CellNetwork, routing: np.ndarray, cost: CostKind | str, *,
                     status: SolveStatus = SolveStatus.OPTIMAL, solver: str = "",
                     tol: float = DEFAULT_TOL) -> EquilibriumResult:
    """An :class:`EquilibriumResult` for a given routing (n×n shares, each source's row sums
    to 1), e.g. one read off a simulation or a fluid trajectory: inflows, workloads, costs and
    the Definition-1 residuals of ``cost`` routing; the status is ``status`` made honest (a
    claimed ``OPTIMAL`` becomes ``OPTIMAL_INACCURATE`` when the residual exceeds ``tol``). An
    inflow at or above a cell's capacity is kept, and shows in ``flow_residual``.

    Example:
        >>> from lbtheory.instances import spill_example
        >>> import numpy as np
        >>> evaluate_routing(spill_example(), np.eye(2), "gradient").status.value
        'optimal_inaccurate'
    """
    cost = CostKind.parse(cost)
    F = np.asarray(routing, dtype=float) * net.arrival_rates[:, None]
    return _assemble_flows(net, cost, F, status, solver, 0, tol=tol)


def _routing_from_flows(net: CellNetwork, F: np.ndarray, N: np.ndarray,
                        cost: CostKind) -> np.ndarray:
    lam = net.arrival_rates
    routing = np.divide(F, lam[:, None], out=np.zeros_like(F), where=lam[:, None] > 0)
    idle = lam <= 0  # pure destinations: cheapest arcs, ties split evenly (routing rule (1))
    if idle.any():
        C = _arc_cost_matrix(net, cost, N)
        routing[idle] = simplex_argmin(C[idle], net.adjacency[idle])
    return routing


def _arc_cost_matrix(net: CellNetwork, cost: CostKind, N: np.ndarray) -> np.ndarray:
    f = np.asarray(cell_cost(cost, net.models, N, net.replicas), dtype=float)
    C = f[None, :] + np.asarray(static_cost(cost, net.delays), dtype=float)
    return np.where(net.adjacency, C, np.nan)


def _finish(net: CellNetwork, cost: CostKind, routing: np.ndarray, z: np.ndarray, N: np.ndarray,
            status: SolveStatus, solver: str, iterations: int,
            demand_residual: float, tol: float = DEFAULT_TOL) -> EquilibriumResult:
    C = _arc_cost_matrix(net, cost, N)
    res = optimality_residuals(net, routing, cost, workload=N, inflow=z)
    tlr = float(_total_latency_rate(N, routing, net.arrival_rates, net.delays))
    Lam = net.total_demand
    with np.errstate(all="ignore"):
        cmin = np.where(net.adjacency.any(axis=1), np.nanmin(np.where(net.adjacency, C, np.inf),
                                                            axis=1), np.nan)
    # every part of Definition 1: complementary slackness (average and spread over used arcs),
    # flow balance (5) and the demands
    residual = max(res["cs_residual"], res["cost_spread"], res["flow_residual"],
                   demand_residual)
    return EquilibriumResult(
        kind=_KIND_OF_COST[cost], cost=cost, routing=routing, inflow=z, workload=N, arc_cost=C,
        min_cost=cmin, total_latency_rate=tlr, mean_latency=tlr / Lam if Lam > 0 else math.nan,
        residual=float(residual), cs_residual=res["cs_residual"], cost_spread=res["cost_spread"],
        flow_residual=res["flow_residual"], demand_residual=demand_residual,
        status=honest_status(status, float(residual), tol), solver=solver, iterations=iterations)


def _rif_least_network_time(net: CellNetwork, eq: EquilibriumResult,
                            tol: float = DEFAULT_TOL) -> EquilibriumResult:
    """Among RIF equilibria (inflows z* are unique, routing is not: the RIF cost has no network
    term), pick the routing with the least network time Σ 2τ_ij f_ij (an LP, HiGHS).

    RIF's total latency rate therefore is the *best case* over its equilibria, and ``rif_ratio``
    a lower bound. This tie-break is our choice [R]; THEORY §5 leaves it open.
    """
    src, dst = net.arc_pairs
    n = net.n
    if not np.any(net.delays[src, dst] > 0):  # no network time on any arc: nothing to pick
        return eq
    f = min_cost_routing(net, 2.0 * net.delays[src, dst], eq.inflow)
    if f is None:  # keep the solver's routing (still a RIF equilibrium)
        return eq
    F = np.zeros((n, n))
    np.add.at(F, (src, dst), f)
    out = _assemble_flows(net, eq.cost, F, eq.status, eq.solver, eq.iterations, tol=tol,
                          workload=eq.workload)
    # same inflows, so the same costs; the residual may move within the solver's accuracy
    return out if out.residual <= max(10.0 * eq.residual, 1e-9) else eq


def optimality_residuals(net: CellNetwork, routing: np.ndarray, cost: CostKind | str, *,
                         workload: np.ndarray | None = None,
                         inflow: np.ndarray | None = None) -> dict[str, float]:
    """Definition-1 residuals of a routing (THEORY §5).

    Returns ``cs_residual`` = max_i (Σ_j x_ij c_ij − c*_i)/Σ_j x_ij c_ij, ``cost_spread`` =
    max_i (max used-arc cost − c*_i)/c*_i (used: x_ij > 1e-6), and ``flow_residual`` =
    max_j |z_j − μ_j(N_j)|/μ̄_j, where by default z = λᵀx and N = μ⁻¹(z) (an inflow at or above
    capacity counts as (z_j − μ̄_j)/μ̄_j there).
    """
    cost = CostKind.parse(cost)
    lam = net.arrival_rates
    routing = np.asarray(routing, dtype=float)
    z = lam @ routing if inflow is None else np.asarray(inflow, dtype=float)
    # an inflow at or above capacity has no workload: evaluate just below capacity, so the
    # excess shows in flow_residual as (z_j − μ̄_j)/μ̄_j
    N = np.asarray(net.models.inverse_rate(np.minimum(z, net.max_rates * (1 - 1e-15))),
                   dtype=float) if workload is None else workload
    C = _arc_cost_matrix(net, cost, N)
    flow_res = float(np.max(np.abs(z - net.models.rate(N)) / net.max_rates))
    rows = np.flatnonzero(lam > 0)
    if len(rows) == 0:
        return {"cs_residual": 0.0, "cost_spread": 0.0, "flow_residual": flow_res}
    adj = net.adjacency[rows]
    Cr, xr = C[rows], routing[rows]
    with np.errstate(invalid="ignore", over="ignore"):
        cstar = np.min(np.where(adj, Cr, np.inf), axis=1)
        avg = np.sum(np.where(adj, xr * Cr, 0.0), axis=1)
        if not np.all(np.isfinite(avg)):
            return {"cs_residual": math.inf, "cost_spread": math.inf, "flow_residual": flow_res}
        cs = float(np.max((avg - cstar) / np.maximum(np.abs(avg), 1e-300), initial=0.0))
        used = adj & (xr > USED_ARC_TOL)
        top = np.max(np.where(used, Cr, -np.inf), axis=1)
        has = used.any(axis=1)
        spread = float(np.max((top[has] - cstar[has]) / np.maximum(np.abs(cstar[has]), 1e-300),
                              initial=0.0))
    return {"cs_residual": float(max(cs, 0.0)), "cost_spread": float(spread),
            "flow_residual": flow_res}
