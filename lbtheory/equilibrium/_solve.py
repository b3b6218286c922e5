"""Equilibria of cell networks (THEORY §5): :class:`EquilibriumProblem`, program (12) in CVXPY.

Default route (``solver=None``): the dual Newton continuation of :mod:`._dual` (one variable
per cell, KKT polish, judged by the Definition-1 residual), warm-started on re-solves; the CVXPY
program below is its fallback (Clarabel, shorter steps, SCS) and the route of a named solver.
A :class:`~lbtheory.errors.SolverError` is raised only when every route failed, naming each.

Program (12) in arc-flow form: variables f_ij = λ_i x_ij ≥ 0 on the admissible arcs,
Σ_j f_ij = λ_i, inflow z_j = Σ_i f_ij, and

    minimise  Σ_j p_j(z_j) + Σ_(i,j) g_ij f_ij,      p_j(z) = ∫_0^z f_j(μ_j⁻¹(s)) ds.

With the gradient cost this is the **system optimum** (p_j = μ_j⁻¹, total latency rate); with the
latency cost the **Wardrop** (Beckmann) equilibrium; with the RIF cost (g = 0) the RIF equilibrium.
Formulas for the three programs are [R] (direct substitution, THEORY §5).

Exact convex forms live in the one registry keyed by class, :data:`DCP_FORMS` of
:mod:`lbtheory.games._cvxforms` (shared with the routing games; models never import cvxpy).
Models with no DCP closed form (softplus, and the exponential model's latency potential, a
dilogarithm) use an outer approximation: epigraph variables above tangent cuts of
the 1-D convex potential, refined at the current solution (Kelley) until the Definition-1
residual is below ``tol`` — exact in the limit, and the residual is reported.

Each program is built once with ``cp.Parameter``s (DPP): :class:`EquilibriumProblem.solve`
re-solves with new arrival rates or delays without recompiling.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import cvxpy as cp
import numpy as np

from ..costs import CostKind, flow_cost, flow_potential, static_cost
from ..errors import ParameterError, SolverError, SolveStatus
from ..games import check_solver
from ..games._cvxforms import DCP_FORMS, DCPForm, cvxpy_status, dcp_potential_value, form_terms
from ..models import ServiceModel
from ..network import CellNetwork, arc_incidence
from ._colgen import (
    COLGEN_ADD_PER_SOURCE,
    COLGEN_MIN_ARCS,
    _initial_arc_mask,
    _max_slack_support,
    _restrict,
)
from ._dual import SOLVER_NAME as DUAL_SOLVER
from ._dual import DualNewton, certifies_feasibility, solve_by_dual
from ._result import (
    _KIND_OF_COST,
    EquilibriumResult,
    _arc_cost_matrix,
    _assemble,
    _assemble_flows,
    _rif_least_network_time,
)

__all__ = [
    "EquilibriumProblem",
    "DCP_FORMS",
    "DCPForm",
    "dcp_potential_value",
]

DEFAULT_SOLVER = "CLARABEL"

# ----------------------------------------------------------------------------- DCP registry
# The exact convex forms (keyed by service-model class and cost kind) are the one registry of
# lbtheory.games._cvxforms, shared with the routing games' M/M/1 arcs: DCP_FORMS, DCPForm,
# form_terms (coef·φ(cap − z) + lin·z) and dcp_potential_value are imported from there.


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
        solver: a CVXPY solver name; default (None): the dual Newton route (:mod:`._dual`),
            with the CVXPY program (Clarabel, then SCS) as fallback.
        column_generation: solve on a restricted arc set grown by pricing (exact: the KKT
            conditions are checked on every arc). Default: on above ``COLGEN_MIN_ARCS`` arcs.

    Examples:
        >>> from lbtheory.instances import symmetric_two_cell
        >>> prob = EquilibriumProblem(symmetric_two_cell(), "gradient")
        >>> [round(float(v), 6) for v in prob.solve().workload[:2]]
        [7.5, 7.5]
    """

    def __init__(self, net: CellNetwork, cost: CostKind | str, *,
                 solver: str | None = None, column_generation: bool | None = None) -> None:
        self.full_net = net
        self.cost = CostKind.parse(cost)
        if not float(np.sum(net.arrival_rates)) > 0:
            raise ParameterError("every arrival_rate is 0: there is no flow to route, so the "
                                 "equilibrium is empty; give at least one cell a positive "
                                 "arrival_rate (req/s)")
        solver = check_solver(solver)  # ParameterError unless CVXPY has it
        self.solver = solver or DEFAULT_SOLVER
        self._fallback = solver is None  # only the default solver falls back to SCS
        # the default route: the dual Newton method (._dual); the CVXPY program is built only
        # when a solver is named or the dual route has to fall back
        self._dual = DualNewton(net, self.cost) if solver is None else None
        if column_generation is None:
            column_generation = len(net.arcs) > COLGEN_MIN_ARCS
        self._mask = _initial_arc_mask(net, self.cost) if column_generation else None
        self._problem: cp.Problem | None = None
        if self._dual is None:
            self._build(net if self._mask is None else _restrict(net, self._mask))

    @property
    def problem(self) -> cp.Problem:
        """The CVXPY program (built on first use)."""
        if self._problem is None:
            self._build(self.full_net if self._mask is None else
                        _restrict(self.full_net, self._mask))
        return self._problem

    def _build(self, net: CellNetwork) -> None:
        """Build the CVXPY program on ``net`` (the full network or a restricted arc set)."""
        self.net = net
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
        B_out = arc_incidence(src, n)  # B_out[i, a] = 1 if arc a leaves cell i
        B_in = arc_incidence(dst, n)  # B_in[j, a] = 1 if arc a enters cell j
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
            cap_v, coef_v, lin_v, _ = form.params([net.services[j] for j in idx], k[idx_arr])
            zJ = B_in[idx_arr] @ self.flow
            cap = cp.Parameter(len(idx), pos=True, value=cap_v)
            coef = cp.Parameter(len(idx), nonneg=True, value=coef_v)
            lin = cp.Parameter(len(idx), value=lin_v)
            room = cp.Variable(len(idx), name="spare_capacity")  # μ̄ − z, keeps the program DPP
            constraints.append(room == cap - zJ)
            objective = objective + cp.sum(form_terms(form.phi, room, zJ, coef, lin))
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
        self._problem = cp.Problem(cp.Minimize(objective), constraints)

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
            polish: Newton-polish the solver's flows on their support
                (:func:`~lbtheory.equilibrium.polish_flows`) when that lowers the Definition-1
                residual; the status is ``OPTIMAL`` only if the final residual is ≤ ``tol``.
                ``False`` skips the default dual route (which always polishes) and returns
                the CVXPY program's raw answer.
            **solver_options: passed to ``cvxpy.Problem.solve``.
        """
        if delays is not None and not np.array_equal(np.asarray(delays, dtype=float),
                                                     self.full_net.delays):
            rebuilt = EquilibriumProblem(self.full_net.with_delays(delays), self.cost,
                                         solver=None if self._fallback else self.solver,
                                         column_generation=self._mask is not None)
            return rebuilt.solve(arrival_rates=arrival_rates, tol=tol,
                                 max_iterations=max_iterations, throw=throw,
                                 check_feasibility=check_feasibility, polish=polish,
                                 **solver_options)
        lam = self.full_net.arrival_rates if arrival_rates is None else \
            np.asarray(arrival_rates, dtype=float)
        full = self.full_net if arrival_rates is None else self.full_net.with_arrival_rates(lam)
        if self._dual is not None and polish:  # (polish=False asks for a raw CVXPY answer)
            # failed routes may hold overflowing numbers: judged by residuals, not warned about
            with np.errstate(all="ignore"):
                return self._solve_routes(full, tol, max_iterations, throw, polish,
                                          check_feasibility, solver_options)
        self.problem  # noqa: B018 (build the CVXPY program if not yet built)
        if self._mask is None:
            if check_feasibility:
                full.check_feasibility()
            return self._solve_sub(full, tol, max_iterations, throw, polish, solver_options)
        return self._solve_colgen(full, tol, max_iterations, throw, polish, check_feasibility,
                                  solver_options)

    def _solve_routes(self, full: CellNetwork, tol: float, max_iterations: int, throw: bool,
                      polish: bool, check_feasibility: bool,
                      solver_options: dict[str, Any]) -> EquilibriumResult:
        """The default route and its fallbacks: dual Newton (warm from the last solve, then
        cold), then the CVXPY program (Clarabel, shorter steps, SCS); every
        answer is judged by its Definition-1 residual. Assumption 2 is checked by its LP only
        when no answer certifies it. SolverError (when ``throw``) only when no route reached
        ``tol``, naming each route tried."""
        if check_feasibility and full.total_demand >= full.max_rates.sum():
            full.check_feasibility()  # raises InfeasibleDemandError with the shortfall
        tried: list[str] = []
        best: EquilibriumResult | None = None
        for warm in (True, False) if self._dual.state is not None else (False,):
            res, why = solve_by_dual(full, self.cost, self._dual, tol, warm=warm)
            tried.append(why + (" (warm start)" if warm else ""))
            if res is not None and (best is None or res.residual < best.residual):
                best = res
            if best is not None and best.residual <= tol:
                if certifies_feasibility(full, best):
                    return best
                break  # converged but with too little slack to prove Assumption 2: ask the LP
        if check_feasibility:
            full.check_feasibility()
        if best is not None and best.residual <= tol:  # (an inflow within rounding of μ̄)
            return best
        try:
            self.problem  # noqa: B018 (build: the full or the restricted program)
            if self._mask is None:
                res = self._solve_sub(full, tol, max_iterations, True, polish, solver_options)
            else:
                res = self._solve_colgen(full, tol, max_iterations, True, polish, False,
                                         solver_options)
            tried.append(f"{res.solver}: residual {res.residual:.3g}")
            if best is None or res.residual < best.residual:
                best = res
        except SolverError as exc:
            tried.append(str(exc))
        if best is not None and best.residual <= tol:
            return best
        msg = (f"the {_KIND_OF_COST[self.cost]} program did not reach residual {tol:g} on any "
               f"route: {'; '.join(tried)}")
        if throw or best is None:
            if throw:
                raise SolverError(msg, solver=DUAL_SOLVER, status=SolveStatus.FAILED)
            return self._failed(full)
        return best

    def _failed(self, net: CellNetwork) -> EquilibriumResult:
        """A FAILED result (no route returned flows; ``throw=False``)."""
        from ._result import _assemble_flows

        return _assemble_flows(net, self.cost, np.zeros((net.n, net.n)), SolveStatus.FAILED,
                               DUAL_SOLVER, 0)

    def _solve_colgen(self, full: CellNetwork, tol: float, max_iterations: int, throw: bool,
                      polish: bool, check_feasibility: bool,
                      solver_options: dict[str, Any]) -> EquilibriumResult:
        """Delayed column generation: solve on a restricted arc set, add every arc cheaper than
        its source's c*_i at that solution, repeat; the KKT check is on the full network."""
        lam = full.arrival_rates
        for _round in range(100):
            sub = self.net.with_arrival_rates(lam)
            if not sub.check_feasibility(raise_error=False).feasible:
                if check_feasibility:
                    full.check_feasibility()  # raises with the full network's shortfall
                self._mask |= _max_slack_support(full)
                self._build(_restrict(full, self._mask))
                continue
            # polish on the full network only (the active-set Newton prices every arc)
            res = self._solve_sub(sub, tol, max_iterations, throw,
                                  polish and len(self._cut_cells) > 0, solver_options)
            C = _arc_cost_matrix(full, self.cost, res.workload)
            with np.errstate(invalid="ignore", divide="ignore"):
                rel = np.where(full.adjacency & ~self._mask & (lam[:, None] > 0),
                               (res.min_cost[:, None] - C)
                               / np.maximum(np.abs(res.min_cost[:, None]), 1e-300), -np.inf)
            if polish and rel.max() < 1e-2:  # close: let the active-set Newton finish
                fsrc, fdst = full.arc_pairs
                F = res.routing * lam[:, None]
                out = _assemble(full, self.cost, F[fsrc, fdst], fsrc, fdst, res.status,
                                res.solver, res.iterations, polish=True, tol=tol)
                if out.residual <= tol:
                    if self.cost is CostKind.RIF:
                        out = _rif_least_network_time(full, out, tol)
                    used = out.routing > 0
                    if (used & ~self._mask).any():  # keep the support for later re-solves
                        self._mask |= used
                        self._build(_restrict(full, self._mask))
                    return out
            cheaper = rel > 1e-10
            if not cheaper.any():
                F = res.routing * lam[:, None]
                out = _assemble_flows(full, self.cost, F, res.status, res.solver,
                                      res.iterations, tol=tol)
                if self.cost is CostKind.RIF:
                    out = _rif_least_network_time(full, out, tol)
                return out
            # add the few most violated arcs per source (all violators would re-add most of a
            # full mesh at an early, far-from-equilibrium iterate)
            top = np.argsort(-rel, axis=1, kind="stable")[:, :COLGEN_ADD_PER_SOURCE]
            pick = np.zeros_like(cheaper)
            pick[np.arange(full.n)[:, None], top] = True
            cheaper &= pick
            self._mask |= cheaper
            self._build(_restrict(full, self._mask))
        raise SolverError("column generation did not converge in 100 rounds",
                          solver=self.solver, status=SolveStatus.MAX_ITERATIONS)

    def _solve_sub(self, net: CellNetwork, tol: float, max_iterations: int, throw: bool,
                   polish: bool, solver_options: dict[str, Any]) -> EquilibriumResult:
        self.lam.value = net.arrival_rates
        it = 0
        while True:
            it += 1
            status = self._solve_once(throw, **solver_options)
            flows = self._flows()
            # the result's status is honest: OPTIMAL only if its residual is ≤ tol
            result = _assemble(net, self.cost, flows, self._src, self._dst, status, self.solver,
                               it, polish=polish, tol=tol)
            if self.cost is CostKind.RIF and status.solved:
                result = _rif_least_network_time(net, result, tol)
            if result.residual <= tol or not status.solved:
                break
            if not len(self._cut_cells):
                if self.solver == "CLARABEL" and not solver_options and it == 1:
                    solver_options = dict(_TIGHT_CLARABEL)  # one tighter solve, then polish
                    continue
                break  # still above tol: the status already says OPTIMAL_INACCURATE
            if it >= max_iterations:
                msg = (f"cutting-plane refinement for the {_KIND_OF_COST[self.cost]} program did "
                       f"not reach residual {tol:g} in {max_iterations} iterations (residual "
                       f"{result.residual:.3g}) with solver {self.solver}")
                if throw:
                    raise SolverError(msg, solver=self.solver, status=SolveStatus.MAX_ITERATIONS)
                result = dataclasses.replace(result, status=SolveStatus.MAX_ITERATIONS)
                break
            self._add_cuts(result.inflow[self._cut_cells])
        return result

    def _solve_once(self, throw: bool, **options: Any) -> SolveStatus:
        """One conic solve; if the default solver fails, retry it with shorter steps, then SCS."""
        attempts = [(self.solver, options)]
        if self._fallback and not options:
            # shorter interior-point steps rescue most Clarabel stalls (e.g. exp cones at
            # n = 300); SCS (first order) is the last resort, then the Newton polish
            attempts.append(("CLARABEL", {"max_step_fraction": 0.9}))
            attempts.append(("SCS", {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 20000}))
        failures: list[str] = []
        words: list[str] = []  # each solver's own word ("solver_error", "infeasible", ...)
        for solver, opts in attempts:
            try:
                # statuses are checked (and polished) below, so solver warnings (inaccurate
                # solution, overflow on hard instances) are not shown to the user
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    self.problem.solve(solver=solver, **opts)
            except cp.error.SolverError as exc:
                failures.append(f"{solver}: {str(exc).split('.')[0]}")
                words.append(cp.SOLVER_ERROR)
                continue
            st = self.problem.status
            if cvxpy_status(st).solved:
                return cvxpy_status(st)
            failures.append(f"{solver}: status {st!r}")
            words.append(str(st))
        if throw:
            raise SolverError(f"the {_KIND_OF_COST[self.cost]} program failed: "
                              f"{'; '.join(failures)}", solver=self.solver,
                              status=cvxpy_status(words[0]), detail=words[0])
        return SolveStatus.FAILED

    def _flows(self) -> np.ndarray:
        v = self.flow.value
        return np.zeros(self._m) if v is None else np.maximum(np.asarray(v, dtype=float), 0.0)

