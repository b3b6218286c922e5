"""Equilibria of cell networks as convex programs in CVXPY (THEORY §5).

Program (12) in arc-flow form: variables f_ij = λ_i x_ij ≥ 0 on the admissible arcs,
Σ_j f_ij = λ_i, inflow z_j = Σ_i f_ij, and

    minimise  Σ_j p_j(z_j) + Σ_(i,j) g_ij f_ij,      p_j(z) = ∫_0^z f_j(μ_j⁻¹(s)) ds.

With the gradient cost this is the **system optimum** (p_j = μ_j⁻¹, total latency rate); with the
latency cost the **Wardrop** (Beckmann) equilibrium; with the RIF cost (g = 0) the RIF equilibrium.
Formulas for the three programs are [R] (direct substitution, THEORY §5).

Exact convex forms live in a registry keyed by service-model class (:data:`DCP_FORMS`; models
never import cvxpy). Models with no DCP closed form (softplus, and the exponential model's latency
potential, a dilogarithm) use an outer approximation: epigraph variables above tangent cuts of
the 1-D convex potential, refined at the current solution (Kelley) until the Definition-1
residual is below ``tol`` — exact in the limit, and the residual is reported.

Each program is built once with ``cp.Parameter``s (DPP): :class:`EquilibriumProblem.solve`
re-solves with new arrival rates or delays without recompiling.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ._polish import polish_flows
from .costs import CostKind, cell_cost, flow_cost, flow_potential, static_cost
from .costs import total_latency_rate as _total_latency_rate
from .errors import SolverError, Status
from .models import ExpSaturation, MM1Latency, ServiceModel
from .network import CellNetwork

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
    "DCP_FORMS",
    "demand_sweep",
]

DEFAULT_SOLVER = "CLARABEL"
#: routing weight above which an arc counts as "used" in the cost-spread residual
USED_ARC_TOL = 1e-6


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
        residual: max of the relative residuals below (target ≤ 1e-6).
        cs_residual: max_i (Σ_j x_ij c_ij − c*_i)/Σ_j x_ij c_ij (complementary slackness).
        cost_spread: max_i (max cost on a used arc − c*_i)/c*_i, arcs with x_ij > 1e-6.
        flow_residual: max_j |z_j − μ_j(N_j)|/μ̄_j (flow balance (5)).
        demand_residual: max_i |Σ_j λ_i x_ij − λ_i|/λ_i.
        status: solver status (``Status.OPTIMAL`` on success).
        solver: solver name; iterations: outer (cutting-plane) iterations.
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
    status: Status
    solver: str
    iterations: int = 1

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


# ----------------------------------------------------------------------------- DCP registry
# A DCP form maps (cost kind) → builder(z_expr, params) → (objective expr, {param: value fn}).
# Value functions take (models in the group, replicas) and return the parameter arrays.
@dataclasses.dataclass(frozen=True)
class DCPForm:
    """Exact convex potential for a family: p(z) = Σ coef·φ(cap − z) + lin·z (+ const).

    ``phi`` is ``"inv_pos"`` or ``"neg_log"``; parameter values come from ``params(models, k)``
    returning (cap, coef, lin) arrays.
    """

    phi: str
    params: Callable[[list[ServiceModel], np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def _arr(models: list[ServiceModel], field: str) -> np.ndarray:
    return np.array([float(getattr(m, field)) for m in models])


#: (model class, cost kind) → exact DCP form. MM1: THEORY §5 "DCP status".
DCP_FORMS: dict[tuple[type, CostKind], DCPForm] = {
    # gradient: p = Kz/(μ̄ − z) = Kμ̄·inv_pos(μ̄ − z) − K
    (MM1Latency, CostKind.GRADIENT): DCPForm(
        "inv_pos", lambda ms, k: (_arr(ms, "capacity"), _arr(ms, "K") * _arr(ms, "capacity"),
                                  np.zeros(len(ms)))),
    # latency: p = −K log(1 − z/μ̄) = −K log(μ̄ − z) + K log μ̄
    (MM1Latency, CostKind.LATENCY): DCPForm(
        "neg_log", lambda ms, k: (_arr(ms, "capacity"), _arr(ms, "K"), np.zeros(len(ms)))),
    # RIF: p = (K/k)[−μ̄ log(1 − z/μ̄) − z]
    (MM1Latency, CostKind.RIF): DCPForm(
        "neg_log", lambda ms, k: (_arr(ms, "capacity"), _arr(ms, "K") * _arr(ms, "capacity") / k,
                                  -_arr(ms, "K") / k)),
    # exponential saturation, gradient: p = μ⁻¹(z) = −K log(1 − z/μ̄)
    (ExpSaturation, CostKind.GRADIENT): DCPForm(
        "neg_log", lambda ms, k: (_arr(ms, "capacity"), _arr(ms, "K"), np.zeros(len(ms)))),
}


def dcp_potential_value(form: DCPForm, models: list[ServiceModel], replicas: np.ndarray,
                        z: np.ndarray) -> np.ndarray:
    """Value of a DCP form at z (numpy), up to the form's additive constant (for tests)."""
    cap, coef, lin = form.params(models, replicas)
    phi = 1.0 / (cap - z) if form.phi == "inv_pos" else -np.log(cap - z)
    return coef * phi + lin * z


# ----------------------------------------------------------------------------- problem
#: initial tangent-cut points as fractions of capacity (dense near saturation)
_CUT_FRACTIONS = np.array([0.0, 0.2, 0.4, 0.55, 0.7, 0.8, 0.86, 0.9, 0.93, 0.95, 0.97, 0.98,
                           0.99, 0.995])
_REFINE_SLOTS = 24
_TIGHT_CLARABEL = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12,
                   "tol_ktratio": 1e-10}
_FILL_FRACTIONS = np.linspace(0.05, 0.96, _REFINE_SLOTS)


class EquilibriumProblem:
    """Program (12) for one network structure and one cost signal, built once (DPP).

    Args:
        net: the cell network (its structure, service models and replicas are fixed).
        cost: ``"gradient"`` (system optimum), ``"latency"`` (Wardrop) or ``"rif"``.
        solver: a CVXPY solver name (default Clarabel).

    Example:
        >>> from lbtheory.instances import symmetric_two_cell
        >>> prob = EquilibriumProblem(symmetric_two_cell(), "gradient")
        >>> [round(float(v), 6) for v in prob.solve().workload[:2]]
        [7.5, 7.5]
    """

    def __init__(self, net: CellNetwork, cost: CostKind | str, *,
                 solver: str | None = None) -> None:
        self.net = net
        self.cost = CostKind.parse(cost)
        self.solver = (solver or DEFAULT_SOLVER).upper()
        self._fallback = solver is None  # only the default solver falls back to SCS
        n = net.n
        src, dst = net.arc_pairs
        self._src, self._dst = src, dst
        m = len(src)
        self._m = m
        self.flow = cp.Variable(m, nonneg=True, name="arc_flow")
        self.lam = cp.Parameter(n, nonneg=True, name="arrival_rate")
        # g (2τ per arc) is a constant, not a Parameter: a parameter vector multiplying the
        # m-vector of flows makes CVXPY's DPP tensors grow like m² (61 GiB at n = 300 full mesh).
        # Changing delays therefore rebuilds the program; changing demand does not.
        self._g = np.asarray(static_cost(self.cost, net.delays[src, dst]), dtype=float)
        B_out = sp.csr_matrix((np.ones(m), (src, np.arange(m))), shape=(n, m))
        B_in = sp.csr_matrix((np.ones(m), (dst, np.arange(m))), shape=(n, m))
        constraints = [B_out @ self.flow == self.lam]
        objective = self._g @ self.flow
        # group cells by (class) → exact form or cuts
        groups: dict[Any, list[int]] = {}
        for j, svc in enumerate(net.services):
            key = type(svc) if (type(svc), self.cost) in DCP_FORMS else "cuts"
            groups.setdefault(key, []).append(j)
        self._cut_cells = np.asarray(groups.pop("cuts", []), dtype=int)
        k = net.replicas
        for cls, idx in groups.items():
            idx_arr = np.asarray(idx, dtype=int)
            form = DCP_FORMS[(cls, self.cost)]
            cap_v, coef_v, lin_v = form.params([net.services[j] for j in idx], k[idx_arr])
            zJ = B_in[idx_arr] @ self.flow
            cap = cp.Parameter(len(idx), pos=True, value=cap_v)
            coef = cp.Parameter(len(idx), nonneg=True, value=coef_v)
            lin = cp.Parameter(len(idx), value=lin_v)
            room = cp.Variable(len(idx), name="spare_capacity")  # μ̄ − z, keeps the program DPP
            constraints.append(room == cap - zJ)
            phi = cp.inv_pos(room) if form.phi == "inv_pos" else -cp.log(room)
            objective = objective + coef @ phi + lin @ zJ
        self._cuts_A = self._cuts_S = None
        if len(self._cut_cells):
            C = self._cut_cells
            nC = len(C)
            M = len(_CUT_FRACTIONS) + _REFINE_SLOTS
            self._t = cp.Variable(nC, name="potential_epigraph")
            self._cuts_A = cp.Parameter((nC, M), name="cut_intercept")
            self._cuts_S = cp.Parameter((nC, M), nonneg=True, name="cut_slope")
            # an explicit inflow variable keeps each cut row at 2 non-zeros (a cut written on
            # B_in @ flow has a non-zero per incoming arc: 40× slower KKT solves at n = 100)
            zC = cp.Variable(nC, name="inflow")
            constraints.append(zC == B_in[C] @ self.flow)
            ones = np.ones((1, M))
            Z = cp.reshape(zC, (nC, 1), order="F") @ ones
            T = cp.reshape(self._t, (nC, 1), order="F") @ ones
            constraints.append(T >= self._cuts_A + cp.multiply(self._cuts_S, Z))
            self._capC = cp.Parameter(nC, pos=True, value=net.max_rates[C])
            constraints.append(zC <= self._capC)
            objective = objective + cp.sum(self._t)
            self._init_cuts()
        self.problem = cp.Problem(cp.Minimize(objective), constraints)
        self._B_in = B_in

    # ------------------------------------------------------------------ cutting planes
    def _cut_models(self) -> list[ServiceModel]:
        return [self.net.services[j] for j in self._cut_cells]

    def _cut_at(self, zs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Intercepts and slopes of tangent cuts of each cut cell's potential at points zs[c]."""
        k = self.net.replicas[self._cut_cells]
        A = np.empty_like(zs)
        S = np.empty_like(zs)
        for c, model in enumerate(self._cut_models()):
            cap = float(model.max_rate)
            zc = np.clip(zs[c], 0.0, cap * (1 - 1e-12))
            p = flow_potential(self.cost, model, zc, k[c])
            s = np.asarray(flow_cost(self.cost, model, zc, k[c]), dtype=float)
            S[c] = s
            A[c] = p - s * zc
        return A, S

    def _init_cuts(self) -> None:
        caps = self.net.max_rates[self._cut_cells]
        grid = caps[:, None] * _CUT_FRACTIONS[None, :]
        A, S = self._cut_at(grid)
        # refinement slots start as distinct valid cuts (duplicated rows upset the IPM)
        fA, fS = self._cut_at(caps[:, None] * _FILL_FRACTIONS[None, :])
        self._cuts_A.value = np.hstack([A, fA])
        self._cuts_S.value = np.maximum(np.hstack([S, fS]), 0.0)
        self._next_slot = 0

    def _add_cuts(self, zC: np.ndarray) -> None:
        A, S = self._cut_at(zC[:, None])
        col = len(_CUT_FRACTIONS) + self._next_slot % _REFINE_SLOTS
        Av, Sv = self._cuts_A.value.copy(), self._cuts_S.value.copy()
        Av[:, col], Sv[:, col] = A[:, 0], np.maximum(S[:, 0], 0.0)
        self._cuts_A.value, self._cuts_S.value = Av, Sv
        self._next_slot += 1

    # ------------------------------------------------------------------ solve
    def solve(self, *, arrival_rates: np.ndarray | None = None, delays: np.ndarray | None = None,
              tol: float = 1e-6, max_iterations: int = 60, throw: bool = True,
              check_feasibility: bool = True, polish: bool = True,
              **solver_options: Any) -> EquilibriumResult:
        """Solve (re-solve) the program.

        Args:
            arrival_rates: new λ (req/s per cell); default the network's.
            delays: new one-way delays (n×n, s); default the network's. New delays rebuild
                the program (see ``__init__``); new arrival rates only re-solve it.
            tol: target relative residual (Definition 1) for the cutting-plane loop.
            throw: raise :class:`SolverError` on failure (else return a result whose status
                says so).
            check_feasibility: check Assumption 2 first (raises InfeasibleDemandError).
            polish: Newton-polish the solver's flows on their support (:mod:`lbtheory._polish`)
                when that lowers the Definition-1 residual.
            **solver_options: passed to ``cvxpy.Problem.solve``.
        """
        if delays is not None and not np.array_equal(np.asarray(delays, dtype=float),
                                                     self.net.delays):
            rebuilt = EquilibriumProblem(self.net.with_delays(delays), self.cost,
                                         solver=None if self._fallback else self.solver)
            return rebuilt.solve(arrival_rates=arrival_rates, tol=tol,
                                 max_iterations=max_iterations, throw=throw,
                                 check_feasibility=check_feasibility, polish=polish,
                                 **solver_options)
        net = self.net
        if arrival_rates is not None:
            net = net.with_arrival_rates(arrival_rates)
        if check_feasibility:
            net.check_feasibility()
        self.lam.value = net.arrival_rates
        it = 0
        while True:
            it += 1
            status = self._solve_once(throw, **solver_options)
            flows = self._flows()
            result = _assemble(net, self.cost, flows, self._src, self._dst, status, self.solver,
                               it, polish=polish)
            if self.cost is CostKind.RIF and status in (Status.OPTIMAL, Status.INACCURATE):
                result = _rif_least_network_time(net, result)
            if result.residual <= tol or status not in (Status.OPTIMAL, Status.INACCURATE):
                break
            if not len(self._cut_cells):
                if self.solver == "CLARABEL" and not solver_options and it == 1:
                    solver_options = dict(_TIGHT_CLARABEL)  # one tighter solve, then polish
                    continue
                break
            if it >= max_iterations:
                msg = (f"cutting-plane refinement for the {_KIND_OF_COST[self.cost]} program did "
                       f"not reach residual {tol:g} in {max_iterations} iterations (residual "
                       f"{result.residual:.3g}) with solver {self.solver}")
                if throw:
                    raise SolverError(msg, solver=self.solver, status="max_iterations")
                result = dataclasses.replace(result, status=Status.MAX_ITERATIONS)
                break
            self._add_cuts(result.inflow[self._cut_cells])
        return result

    def _solve_once(self, throw: bool, **options: Any) -> Status:
        """One conic solve; if the chosen solver fails, fall back to SCS (then Newton polish)."""
        attempts = [(self.solver, options)]
        if self._fallback and not options:
            attempts.append(("SCS", {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 20000}))
        failures = []
        for solver, opts in attempts:
            try:
                with warnings.catch_warnings():  # statuses are checked (and polished) below
                    warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                    self.problem.solve(solver=solver, **opts)
            except cp.error.SolverError as exc:
                failures.append(f"{solver}: {str(exc).split('.')[0]}")
                continue
            st = self.problem.status
            if st == cp.OPTIMAL:
                return Status.OPTIMAL
            if st == cp.OPTIMAL_INACCURATE:
                return Status.INACCURATE
            failures.append(f"{solver}: status {st!r}")
        if throw:
            raise SolverError(f"the {_KIND_OF_COST[self.cost]} program failed: "
                              f"{'; '.join(failures)}", solver=self.solver,
                              status=failures[0] if failures else "failed")
        return Status.FAILED

    def _flows(self) -> np.ndarray:
        v = self.flow.value
        return np.zeros(self._m) if v is None else np.maximum(np.asarray(v, dtype=float), 0.0)


# ----------------------------------------------------------------------------- assembly
def _assemble(net: CellNetwork, cost: CostKind, flows: np.ndarray, src: np.ndarray,
              dst: np.ndarray, status: Status, solver: str, iterations: int,
              polish: bool = True) -> EquilibriumResult:
    n = net.n
    F = np.zeros((n, n))
    np.add.at(F, (src, dst), flows)
    raw = _assemble_flows(net, cost, F, status, solver, iterations)
    if not polish or status not in (Status.OPTIMAL, Status.INACCURATE) or raw.residual < 1e-12:
        return raw
    Fp = polish_flows(net, cost, F)
    if Fp is None:
        return raw
    pol = _assemble_flows(net, cost, Fp, status, solver, iterations)
    if pol.residual < raw.residual:
        return dataclasses.replace(pol, status=Status.OPTIMAL if pol.residual <= 1e-6
                                   else pol.status)
    return raw


def _assemble_flows(net: CellNetwork, cost: CostKind, F: np.ndarray, status: Status,
                    solver: str, iterations: int) -> EquilibriumResult:
    n = net.n
    lam = net.arrival_rates
    # renormalise each source's flows to its demand (removes solver-level infeasibility ~1e-9)
    out = F.sum(axis=1)
    demand_residual = float(np.max(np.abs(out - lam) / np.maximum(lam, 1e-300),
                                   where=lam > 0, initial=0.0))
    scale = np.divide(lam, out, out=np.zeros(n), where=out > 0)
    F = F * scale[:, None]
    z = F.sum(axis=0)
    caps = net.max_rates
    z = np.minimum(z, caps * (1 - 1e-15))
    N = np.asarray(net.models.inverse_rate(z), dtype=float)
    routing = _routing_from_flows(net, F, N, cost)
    return _finish(net, cost, routing, z, N, status, solver, iterations, demand_residual)


def _routing_from_flows(net: CellNetwork, F: np.ndarray, N: np.ndarray,
                        cost: CostKind) -> np.ndarray:
    lam = net.arrival_rates
    routing = np.divide(F, lam[:, None], out=np.zeros_like(F), where=lam[:, None] > 0)
    C = _arc_cost_matrix(net, cost, N)
    for i in np.flatnonzero(lam <= 0):  # pure destinations: cheapest arcs, ties split evenly
        if net.adjacency[i].any():
            row = C[i]
            best = np.nanmin(row)
            tie = net.adjacency[i] & (row <= best * (1 + 1e-12) + 1e-300)
            routing[i] = tie / tie.sum()
    return routing


def _arc_cost_matrix(net: CellNetwork, cost: CostKind, N: np.ndarray) -> np.ndarray:
    f = np.asarray(cell_cost(cost, net.models, N, net.replicas), dtype=float)
    C = f[None, :] + np.asarray(static_cost(cost, net.delays), dtype=float)
    return np.where(net.adjacency, C, np.nan)


def _finish(net: CellNetwork, cost: CostKind, routing: np.ndarray, z: np.ndarray, N: np.ndarray,
            status: Status, solver: str, iterations: int,
            demand_residual: float) -> EquilibriumResult:
    C = _arc_cost_matrix(net, cost, N)
    res = optimality_residuals(net, routing, cost, workload=N, inflow=z)
    tlr = float(_total_latency_rate(N, routing, net.arrival_rates, net.delays))
    Lam = net.total_demand
    with np.errstate(all="ignore"):
        cmin = np.where(net.adjacency.any(axis=1), np.nanmin(np.where(net.adjacency, C, np.inf),
                                                            axis=1), np.nan)
    residual = max(res["cs_residual"], res["flow_residual"], demand_residual)
    return EquilibriumResult(
        kind=_KIND_OF_COST[cost], cost=cost, routing=routing, inflow=z, workload=N, arc_cost=C,
        min_cost=cmin, total_latency_rate=tlr, mean_latency=tlr / Lam if Lam > 0 else math.nan,
        residual=float(residual), cs_residual=res["cs_residual"], cost_spread=res["cost_spread"],
        flow_residual=res["flow_residual"], demand_residual=demand_residual, status=status,
        solver=solver, iterations=iterations)


def _rif_least_network_time(net: CellNetwork, eq: EquilibriumResult) -> EquilibriumResult:
    """Among RIF equilibria (inflows z* are unique, routing is not: the RIF cost has no network
    term), pick the routing with the least network time Σ 2τ_ij f_ij (an LP, HiGHS).

    RIF's total latency rate therefore is the *best case* over its equilibria, and ``rif_ratio``
    a lower bound. This tie-break is our choice [R]; THEORY §5 leaves it open.
    """
    from scipy.optimize import linprog

    src, dst = net.arc_pairs
    m, n = len(src), net.n
    A_eq = np.zeros((2 * n, m))
    A_eq[src, np.arange(m)] = 1.0
    A_eq[n + dst, np.arange(m)] = 1.0
    b_eq = np.concatenate([net.arrival_rates, eq.inflow])
    res = linprog(2.0 * net.delays[src, dst], A_eq=A_eq, b_eq=b_eq, bounds=[(0, None)] * m,
                  method="highs")
    if res.status != 0:  # keep the solver's routing (still a RIF equilibrium)
        return eq
    F = np.zeros((n, n))
    np.add.at(F, (src, dst), np.maximum(res.x, 0.0))
    out = _assemble_flows(net, eq.cost, F, eq.status, eq.solver, eq.iterations)
    # same inflows, so the same costs; the residual may move within the solver's accuracy
    return out if out.residual <= max(10.0 * eq.residual, 1e-9) else eq


def optimality_residuals(net: CellNetwork, routing: np.ndarray, cost: CostKind | str, *,
                         workload: np.ndarray | None = None,
                         inflow: np.ndarray | None = None) -> dict[str, float]:
    """Definition-1 residuals of a routing (THEORY §5).

    Returns ``cs_residual`` = max_i (Σ_j x_ij c_ij − c*_i)/Σ_j x_ij c_ij, ``cost_spread`` =
    max_i (max used-arc cost − c*_i)/c*_i (used: x_ij > 1e-6), and ``flow_residual`` =
    max_j |z_j − μ_j(N_j)|/μ̄_j, where by default z = λᵀx and N = μ⁻¹(z).
    """
    cost = CostKind.parse(cost)
    lam = net.arrival_rates
    routing = np.asarray(routing, dtype=float)
    z = lam @ routing if inflow is None else np.asarray(inflow, dtype=float)
    N = np.asarray(net.models.inverse_rate(z), dtype=float) if workload is None else workload
    C = _arc_cost_matrix(net, cost, N)
    flow_res = float(np.max(np.abs(z - net.models.rate(N)) / net.max_rates))
    cs, spread = 0.0, 0.0
    for i in np.flatnonzero(lam > 0):
        row = C[i]
        adj = net.adjacency[i]
        cstar = float(np.min(row[adj]))
        avg = float(np.sum(routing[i][adj] * row[adj]))
        if not math.isfinite(avg):
            return {"cs_residual": math.inf, "cost_spread": math.inf, "flow_residual": flow_res}
        cs = max(cs, (avg - cstar) / max(abs(avg), 1e-300))
        used = adj & (routing[i] > USED_ARC_TOL)
        if used.any():
            spread = max(spread, (float(np.max(row[used])) - cstar) / max(abs(cstar), 1e-300))
    return {"cs_residual": float(max(cs, 0.0)), "cost_spread": float(spread),
            "flow_residual": flow_res}


# ----------------------------------------------------------------------------- verbs
def solve_equilibrium(net: CellNetwork, cost: CostKind | str, *, solver: str | None = None,
                      tol: float = 1e-6, throw: bool = True,
                      **solver_options: Any) -> EquilibriumResult:
    """Equilibrium of ``cost`` routing: gradient → system optimum, latency → Wardrop, rif → RIF.

    Raises:
        InfeasibleDemandError: Assumption 2 fails (with the shortfall in req/s).
        SolverError: the solver failed (names solver and status), when ``throw``.
    """
    return EquilibriumProblem(net, cost, solver=solver).solve(tol=tol, throw=throw,
                                                              **solver_options)


def solve_wardrop(net: CellNetwork, **kwargs: Any) -> EquilibriumResult:
    """Wardrop equilibrium of latency routing (Beckmann potential, THEORY §5)."""
    return solve_equilibrium(net, CostKind.LATENCY, **kwargs)


def solve_system_optimum(net: CellNetwork, **kwargs: Any) -> EquilibriumResult:
    """System optimum = equilibrium of gradient routing (min total latency rate, THEORY §5)."""
    return solve_equilibrium(net, CostKind.GRADIENT, **kwargs)


def solve_rif(net: CellNetwork, **kwargs: Any) -> EquilibriumResult:
    """RIF equilibrium (cost N_j/k_j, no network term; network time counts in its latency).

    Inflows and workloads are unique; the routing is not (the cost ignores τ), so the one with
    the least network time is returned (see :func:`_rif_least_network_time`).
    """
    return solve_equilibrium(net, CostKind.RIF, **kwargs)


@dataclasses.dataclass(frozen=True)
class PoAResult:
    """Price of anarchy of latency routing and the same ratio for RIF routing.

    ``price_of_anarchy`` = C(Wardrop)/C(system optimum); ``rif_ratio`` = C(RIF)/C(system optimum),
    with C the total latency rate (THEORY §5).
    """

    wardrop: EquilibriumResult
    system_optimum: EquilibriumResult
    rif: EquilibriumResult
    price_of_anarchy: float
    rif_ratio: float


def price_of_anarchy(net: CellNetwork, **kwargs: Any) -> PoAResult:
    """Solve the three programs and return both ratios (≥ 1 up to solver tolerance)."""
    w = solve_wardrop(net, **kwargs)
    so = solve_system_optimum(net, **kwargs)
    r = solve_rif(net, **kwargs)
    return PoAResult(wardrop=w, system_optimum=so, rif=r,
                     price_of_anarchy=w.total_latency_rate / so.total_latency_rate,
                     rif_ratio=r.total_latency_rate / so.total_latency_rate)


def demand_sweep(net: CellNetwork, scales: np.ndarray | list[float], *,
                 solver: str | None = None, tol: float = 1e-6) -> dict[str, np.ndarray]:
    """PoA and RIF ratio as every arrival rate is multiplied by each of ``scales``.

    The three programs are built once and re-solved (DPP). Scales where Assumption 2 fails are
    reported as NaN. Returns arrays ``scale``, ``utilisation`` (Λ/Σμ̄), ``price_of_anarchy``,
    ``rif_ratio`` and mean latencies (s) ``wardrop``, ``system_optimum``, ``rif``.
    """
    from .errors import InfeasibleDemandError

    scales = np.asarray(scales, dtype=float)
    probs = {k: EquilibriumProblem(net, c, solver=solver) for k, c in
             (("wardrop", CostKind.LATENCY), ("system_optimum", CostKind.GRADIENT),
              ("rif", CostKind.RIF))}
    out = {k: np.full(len(scales), np.nan) for k in probs}
    for s_i, s in enumerate(scales):
        lam = net.arrival_rates * s
        try:
            net.with_arrival_rates(lam).check_feasibility()
        except InfeasibleDemandError:
            continue
        for k, prob in probs.items():
            out[k][s_i] = prob.solve(arrival_rates=lam, tol=tol,
                                     check_feasibility=False).mean_latency
    return {"scale": scales, "utilisation": scales * net.total_demand / net.max_rates.sum(),
            "price_of_anarchy": out["wardrop"] / out["system_optimum"],
            "rif_ratio": out["rif"] / out["system_optimum"], **out}
