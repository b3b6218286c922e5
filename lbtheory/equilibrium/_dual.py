"""Equilibria of cell networks by Newton's method on the dual in the cell prices (THEORY §5).

Program (12) has one coupling per cell: the inflow z_j = Σ_i f_ij. Dualising it with a price
y_j per cell (same unit as the cost: s, or requests per replica for RIF) separates the program:

    D(y) = Σ_j min_z [p_j(z) − y_j z] + Σ_i λ_i min_{j ∈ C⁺(i)} (g_ij + y_j),

concave in y, with the cell part smooth (its gradient −z_j(y), z_j(y) = μ_j(f_j⁻¹(y_j)) < μ̄_j,
so capacities never bind in the dual) and the routing part piecewise linear. The routing part is
smoothed by entropy at a temperature ε (a cost, in the unit of y):

    D_ε(y) = Σ_j min_z [p_j(z) − y_j z] − ε Σ_i λ_i log Σ_{j ∈ C⁺(i)} exp(−(g_ij + y_j)/ε),

whose maximiser routes x_ij = softmax_j(−(g_ij + y_j)/ε) — every arc of a source within a few ε
of its cheapest carries flow, ties split evenly. Its optimality condition
G = λᵀΠ(y) − z(y) = 0 is solved by Newton's method (one n×n system per step; ∂s/∂y =
−(diag(s) − Πᵀ diag(λ) Π)/ε with s = λᵀΠ), each cell in the better-conditioned of two variables
— its workload N_j (y = f_j(N)), or its price y_j where the cost is the steep coordinate (an
exponential gradient cost) — with capped workload growth and backtracking on ‖G‖₂, for ε
decreasing from 10⁻¹ to 10⁻⁷ of a typical cost (continuation). From ε = 10⁻³ on (10⁻¹ on small
networks; on re-solves from the temperature of the last answer), each routing is
finished by the one KKT Newton polish (:func:`~lbtheory.equilibrium.polish_flows`) and judged by
the Definition-1 residual (:func:`~lbtheory.equilibrium.optimality_residuals`), never by the
iteration's own test. Convergence of the continuation is not proved (it is a heuristic path);
the residual check is what certifies an answer, and the caller falls back to CVXPY otherwise.

For RIF (g = 0) the cell part makes every source send to the cells of least N_j/k_j it reaches,
the "equalise N_j/k_j over reachable cells" structure: on a full mesh the dual optimum is one
price, y_j = N_j/k_j for every used cell. Where every source reaches the same cells (a full
mesh) that price is found first, by 1-D root finding on Σ_j μ_j(k_j y) = Σ_i λ_i (brentq), and
its routing polished and judged like any other before the continuation runs (which remains
the route otherwise, and the fallback). For RIF the temperatures fall by half decades
(:data:`RIF_EPS_SCHEDULE`): with saturated softplus cells a decade's cooling left the
iteration stalled at 10⁻³ of the cost scale on a 300-cell partial mesh. This
method is the default route of :class:`~lbtheory.equilibrium.EquilibriumProblem`; the CVXPY
programs are its fallback. [R]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
from scipy.optimize import brentq

from ..costs import CostKind, static_cost
from ..errors import SolveStatus
from ..network import FEASIBILITY_RTOL, CellNetwork
from ._cells import CellBank
from ._polish import polish_flows_workload
from ._result import EquilibriumResult, _assemble_flows, _rif_least_network_time

__all__ = ["DualNewton", "DualState", "solve_by_dual", "certifies_feasibility", "SOLVER_NAME"]

#: the name results of this route carry in ``EquilibriumResult.solver``
SOLVER_NAME = "DUAL_NEWTON"

#: temperatures ε, as fractions of the typical cost, of the continuation (cold start)
EPS_SCHEDULE = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
#: the same for RIF, in half decades: with saturated softplus cells (μ' ≈ 0, the cell part of
#: the Hessian nearly flat) the Hessian is about −L/ε alone, and after a decade's cooling the
#: new optimum lies outside Newton's reach (a 300-cell partial mesh stalled at 10⁻³ for 60
#: steps, leaving the polish ~3,000 pivots); half a decade keeps each level in reach
RIF_EPS_SCHEDULE = (1e-1, 10**-1.5, 1e-2, 10**-2.5, 1e-3, 10**-3.5, 1e-4, 10**-4.5, 1e-5,
                    10**-5.5, 1e-6, 10**-6.5, 1e-7)
#: the first temperature (fraction of the typical cost) whose routing is polished and judged:
#: on small networks (at most SMALL_ARCS arcs) the first — the active-set polish is cheap there
#: and its pivots repair a rough support — on larger ones the third, whose routing is close to
#: the equilibrium's support (fewer pivots, each a Newton solve of size ~3n)
POLISH_FROM = 1e-3
POLISH_FROM_SMALL = 1e-1
SMALL_ARCS = 400
#: Newton steps allowed per temperature
MAX_NEWTON = 60


@dataclasses.dataclass
class DualState:
    """Where the dual iteration ended: prices y (cost unit), temperature ε (cost unit), Newton
    steps taken, and the workloads f⁻¹(y) (requests), reused as a warm start."""

    y: np.ndarray
    eps: float
    steps: int
    N: np.ndarray
    #: ε as a fraction of the typical cost (the entry of :data:`EPS_SCHEDULE`, or for RIF of
    #: :data:`RIF_EPS_SCHEDULE`)
    level: float = 0.0


class DualNewton:
    """The entropic dual Newton method for one network structure and one cost signal.

    Args:
        net: the cell network (arrival rates are passed to :meth:`levels`).
        cost: the cost signal (``CostKind``).
    """

    def __init__(self, net: CellNetwork, cost: CostKind) -> None:
        self.net = net
        self.cost = cost
        self.g = np.asarray(static_cost(cost, net.delays), dtype=float)
        self.bank = CellBank(net, cost)
        self._uniform: tuple[float, np.ndarray] | None = None
        self.state: DualState | None = None

    # ------------------------------------------------------------------ pieces of D_ε
    def _routing(self, y: np.ndarray, eps: float, adj: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Softmax routing of the sources at prices y (rows: sources with λ > 0)."""
        a = np.where(adj, -(g + y[None, :]) / eps, -np.inf)
        a -= a.max(axis=1, keepdims=True)
        P = np.exp(a)
        P /= P.sum(axis=1, keepdims=True)
        return P

    # ------------------------------------------------------------------ solve
    def levels(self, lam: np.ndarray, *, warm: bool = True) -> Iterator[np.ndarray]:
        """Run the continuation, yielding the arc flows F (n×n, req/s) after each temperature
        from :data:`POLISH_FROM` down (the caller polishes them and stops when the
        Definition-1 residual is small). Raises FloatingPointError when the iteration produces
        non-finite numbers (the caller falls back)."""
        net = self.net
        n = net.n
        srcs = np.flatnonzero(lam > 0)
        if len(srcs) == 0:
            yield np.zeros((n, n))
            return
        adj = net.adjacency[srcs]
        g = self.g[srcs]
        ls = lam[srcs]
        scale = self._scale = self._cost_scale(lam)
        polish_from = POLISH_FROM_SMALL if adj.sum() <= SMALL_ARCS else POLISH_FROM
        st = self.state
        levels = RIF_EPS_SCHEDULE if self.cost is CostKind.RIF else EPS_SCHEDULE
        if warm and st is not None and np.all(np.isfinite(st.N)) and st.eps > 0:
            # warm: straight from the last workloads at the first polished temperature (a
            # demand change moves the optimum a little; the cold route is the fallback)
            # (from the temperature the last answer came from, polished at once)
            N = st.N.copy()
            polish_from = max(polish_from, st.level)
            schedule = [e * scale for e in levels if e <= polish_from * (1 + 1e-9)]
        else:
            N = self._initial_workloads(lam)
            schedule = [e * scale for e in levels]
        if self.cost is CostKind.RIF:
            one = self._rif_one_price(srcs, adj, ls, scale)
            if one is not None:  # judged by the caller; the continuation follows if it fails
                self.state = DualState(y=one[0], eps=polish_from * scale, steps=0, N=one[1],
                                       level=polish_from)
                yield one[2]
        steps = 0
        last = None  # (state, F) of the last converged temperature not yet polished
        for eps in schedule:
            N, k, converged = self._maximise(N, eps, adj, g, ls, final=eps == schedule[-1])
            steps += k
            y = self.bank.values(N)[0]
            state = DualState(y=y, eps=eps, steps=steps, N=N, level=eps / scale)
            F = np.zeros((n, n))
            F[srcs] = ls[:, None] * self._routing(y, eps, adj, g)
            if eps <= polish_from * scale * (1 + 1e-9):
                if not converged and last is not None:
                    # the continuation lost its way here: polish the last converged routing
                    self.state = last[0]
                    yield last[1]
                last = None
                self.state = state
                yield F
            elif converged:
                last = (state, F)
                self.state = state

    def _rif_one_price(self, srcs, adj, ls, scale):
        """RIF where every source reaches the same cells R: the one price y with
        Σ_(j∈R) μ_j(k_j y) = Σ_i λ_i (brentq), N_j = k_j y on R (0 elsewhere), and arc flows
        f_ij = λ_i z_j/Σz with those inflows. Returns (y per cell, N, F), or None (reach sets
        differ, or R cannot carry the demand)."""
        reach = adj[0]
        if not np.all(adj == reach[None, :]):
            return None
        bank, lam_tot = self.bank, float(ls.sum())
        if not float(bank.caps[reach].sum()) > lam_tot:
            return None

        def workloads(t: float) -> np.ndarray:
            return np.where(reach, bank.k * t, 0.0)

        def excess(t: float) -> float:
            return float(bank.values(workloads(t))[2][reach].sum()) - lam_tot

        lo, hi = 0.0, scale
        for _ in range(200):
            if excess(hi) > 0:
                break
            lo, hi = hi, 2.0 * hi
        else:
            return None
        try:
            t = brentq(excess, lo, hi, xtol=1e-300, rtol=4.0 * np.finfo(float).eps, maxiter=200)
        except (ValueError, RuntimeError):  # non-finite rates, no convergence: the continuation
            return None
        N = workloads(t)
        y, _, z, _ = bank.values(N)
        z = np.where(reach, z, 0.0)
        if not (np.all(np.isfinite(z)) and z.sum() > 0):
            return None
        F = np.zeros((self.net.n, self.net.n))
        F[srcs] = np.outer(ls, z / z.sum())
        return y, N, F

    def _inverse(self, y: np.ndarray, N0: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """f⁻¹(y) on the cells of ``mask`` (elsewhere N0): safeguarded Newton–bisection on the
        increasing cost f_j(N) = y_j from N0 (0 where y_j ≤ f_j(0)), requests."""
        net = self.net
        with np.errstate(all="ignore"):
            f0 = self.bank.values(np.zeros(net.n))[0]
            act = mask & (y > f0)
            closed = self.bank.inverse_cost(y)
            ok = act & np.isfinite(closed)
            if ok.all() or not (act & ~ok).any():  # closed forms for every active cell
                return np.where(mask, np.where(ok, np.maximum(closed, 0.0), 0.0), N0)
            act &= ~ok
            N = np.where(act, np.maximum(N0, 0.0), 0.0)
            fN, fp = self.bank.values(N)[:2]
            lo = np.where(fN < y, N, 0.0)
            hi = np.where(fN < y, np.inf, N)
            for _ in range(100):
                h = fN - y
                lo = np.where(act & (h < 0), np.maximum(lo, N), lo)
                hi = np.where(act & (h >= 0), np.minimum(hi, N), hi)
                newton = N - h / fp
                mid = np.where(np.isfinite(hi), 0.5 * (lo + hi), 2.0 * np.maximum(lo, 1.0))
                inside = np.isfinite(newton) & (newton >= lo) & (newton <= hi)
                N_new = np.where(act, np.where(inside, newton, mid), N)
                done = ~act | (np.abs(N_new - N) <= 1e-13 * np.maximum(N_new, 1e-300)) | \
                    (np.abs(h) <= 1e-13 * np.abs(y))
                N = N_new
                if done.all():
                    break
                fN, fp = self.bank.values(N)[:2]
            act |= ok
        N = np.where(ok, np.maximum(closed, 0.0), N)
        return np.where(mask, np.where(act, N, 0.0), N0)

    def _cost_scale(self, lam: np.ndarray) -> float:
        """A typical cost (unit of y): the median cell cost at uniform utilisation plus the
        median round trip of the arcs."""
        net = self.net
        rho = min(float(lam.sum() / self.bank.caps.sum()), 0.9)
        with np.errstate(all="ignore"):
            Nu = self._uniform_workloads(rho)
            fu = self.bank.values(Nu)[0]
        gs = self.g[net.adjacency]
        s = float(np.median(np.abs(fu[np.isfinite(fu)]))) if np.isfinite(fu).any() else 0.0
        s += float(np.median(gs)) if gs.size else 0.0
        return s if s > 0 and np.isfinite(s) else 1.0

    def _initial_workloads(self, lam: np.ndarray) -> np.ndarray:
        """Workloads of the cells at uniform utilisation Λ/Σμ̄ (capped at 0.99), requests."""
        return self._uniform_workloads(min(float(lam.sum() / self.bank.caps.sum()), 0.99))

    def _uniform_workloads(self, rho: float) -> np.ndarray:
        """μ⁻¹(ρ μ̄) per cell (requests), cached by ρ (numeric inverses cost ~1 ms)."""
        if self._uniform is None or self._uniform[0] != rho:
            caps = self.bank.caps
            self._uniform = (rho, np.asarray(self.net.models.inverse_rate(rho * caps),
                                             dtype=float))
        return self._uniform[1]

    def _maximise(self, N, eps, adj, g, ls, *, final: bool):
        """Newton's method on the optimality condition of D_ε, G(N) = λᵀΠ(f(N)) − μ(N) = 0,
        in the workloads N (requests; y = f(N)), with backtracking on ‖G‖. Returns (N, steps,
        converged).

        In N the cell part μ(N) is smooth even where a cost is nearly flat in N (softplus below
        its knee), where the price form z(y) = μ(f⁻¹(y)) is nearly a step."""
        n = len(N)
        bank = self.bank

        def evaluate(N):
            y, fp, z, mp = bank.values(N)
            P = self._routing(y, eps, adj, g)
            G = ls @ P - z
            return y, P, G, fp, mp

        scale = self._scale
        y, P, G, fp, mp = evaluate(N)
        gtol = (1e-13 if final else 1e-9) * float(ls.sum())
        for it in range(MAX_NEWTON):
            gnorm = float(np.abs(G).max())
            if not np.isfinite(gnorm):
                raise FloatingPointError("non-finite dual residual")
            if gnorm <= gtol:
                return N, it, True
            s = ls @ P
            L = np.diag(s) - P.T @ (P * ls[:, None])
            # each cell's Newton variable: its price y where the cost is the steep coordinate
            # (f'/c₀ > μ'/μ̄, e.g. an exponential gradient cost), else its workload N
            ycell = fp / scale > mp / self.bank.caps
            dy_dv = np.where(ycell, 1.0, fp)
            with np.errstate(all="ignore"):
                dz_dv = np.where(ycell, mp / fp, mp)
            Jac = -(L / eps) * dy_dv[None, :]
            Jac[np.diag_indices(n)] -= dz_dv
            if not np.all(np.isfinite(Jac)):
                raise FloatingPointError("non-finite Jacobian")
            try:
                dv = np.linalg.solve(Jac, -G)
            except np.linalg.LinAlgError:
                dv = np.linalg.lstsq(Jac, -G, rcond=None)[0]
            if not np.all(np.isfinite(dv)):
                raise FloatingPointError("non-finite Newton step")
            dN = np.where(ycell, dv / np.where(ycell, fp, 1.0), dv)
            # projected step (N ≥ 0: an emptied cell may land on 0), growth of each workload
            # capped (×5 per step: a saturating μ has μ' → 0, where the linear model sends N
            # far off), then backtracking on ‖G‖₂
            grow = dN > 4.0 * np.maximum(N, 1.0)
            if grow.any():
                shrink = float(np.min(4.0 * np.maximum(N[grow], 1.0) / dN[grow]))
                dN, dv = dN * shrink, dv * shrink
            t = 1.0
            g0 = float(G @ G)
            best = None
            for _ in range(40):
                Nt = np.maximum(N + t * dN, 0.0)
                if ycell.any():  # price cells: N = f⁻¹(y + t·dy)
                    Nt[ycell] = self._inverse(y + t * dv, Nt, ycell)[ycell]
                yt, Pt, Gt, fpt, mpt = evaluate(Nt)
                gt = float(Gt @ Gt)
                if np.isfinite(gt) and (best is None or gt < best[0]):
                    best = (gt, Nt, yt, Pt, Gt, fpt, mpt)
                if np.isfinite(gt) and gt <= (1.0 - 1e-4 * t) * g0:
                    break
                t *= 0.5
            if best is None or best[0] >= g0:
                return N, it, False  # no progress possible at this temperature
            _, N, y, P, G, fp, mp = best
        return N, MAX_NEWTON, False


def solve_by_dual(net: CellNetwork, cost: CostKind, dual: DualNewton, tol: float,
                  *, warm: bool = True) -> tuple[EquilibriumResult | None, str]:
    """Solve program (12) on ``net`` by the dual Newton continuation, polishing each routing
    from :data:`POLISH_FROM` down (:func:`~._polish.polish_flows_workload`) until the
    Definition-1 residual is ≤ min(tol, 1e-10) or the schedule ends.

    Returns (the best result, a one-line account of the route for error messages); the result
    is None when the iteration broke down (non-finite numbers)."""
    best: EquilibriumResult | None = None
    vertex = False
    target = min(tol, 1e-10)
    it = 0
    try:
        with np.errstate(all="ignore"):
            for F in dual.levels(net.arrival_rates, warm=warm):
                it += 1
                # the polished pair (F, N); failing that, the pair (N, x) of the dual
                # iteration itself (exact where an inflow lies within rounding of μ̄)
                res = None
                pol = polish_flows_workload(net, cost, F, dual.state.N)
                if pol is not None:
                    res = dataclasses.replace(_assemble_flows(
                        net, cost, pol[0], SolveStatus.OPTIMAL, SOLVER_NAME, it, tol=tol,
                        workload=pol[1]), polished=True)
                if res is None or res.residual > tol:
                    alt = _assemble_flows(net, cost, F, SolveStatus.OPTIMAL, SOLVER_NAME, it,
                                          tol=tol, workload=dual.state.N)
                    res = alt if res is None or alt.residual < res.residual else res
                if best is None or res.residual < best.residual:
                    best = res
                    # RIF from the support of the least-network-time LP at the dual's inflows,
                    # no arc entered: already that LP's optimum at the polished inflows [R]
                    vertex = res.polished and pol is not None and pol[2]
                if best.residual <= target:
                    break
    except (FloatingPointError, np.linalg.LinAlgError, ValueError) as exc:
        if best is None:
            return None, f"{SOLVER_NAME}: broke down ({exc})"
    if best is not None and cost is CostKind.RIF and best.residual <= tol and not vertex:
        best = _rif_least_network_time(net, best, tol)
    why = f"{SOLVER_NAME}: residual {best.residual:.3g}" if best is not None else \
        f"{SOLVER_NAME}: no routing"
    return best, why


def certifies_feasibility(net: CellNetwork, res: EquilibriumResult | None) -> bool:
    """A result whose routing meets every demand with every inflow strictly below capacity (by
    the Assumption-2 margin) proves Assumption 2, so its LP check can be skipped."""
    if res is None or not np.all(np.isfinite(res.inflow)) or res.demand_residual > 1e-9:
        return False
    slack = float(np.min(net.max_rates - res.inflow))
    return slack > FEASIBILITY_RTOL * max(1.0, float(net.max_rates.max()))
