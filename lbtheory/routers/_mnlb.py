"""MNLB, Google's legacy centralised balancer (DLB §1.1; THEORY §11.1 item 12 [R]).

Every ``period_s`` seconds (default 10 s) a central optimiser solves the LP

    min Σ_ij τ_ij f_ij + P·σ·Σ_j ρ_max μ̄_j
    s.t.  Σ_j f_ij = λ̂_i,  Σ_i f_ij ≤ (1 + σ) ρ_max μ̄_j,  f, σ ≥ 0

on the admissible arcs (f_ij req/s), with *estimated* arrival rates λ̂_i (requests counted at each
source over the last period; the nominal rates before the first period ends). While demand fits
under the cap ρ_max μ̄_j (the operators' headroom), σ = 0 and this is the minimum-network-latency
LP of DLB §1.1. When it does not, the one overload factor σ (penalty P = ``OVERFLOW_PENALTY`` per
req/s) raises every cell's cap by the same fraction: the LP spills the excess in proportion to
the cells' capped capacities — like a balancer — instead of leaving it on the nearest cells
(issue 36 item 2; before, a per-cell overflow s_j, free to sit on the local cell, did that).
Routing weights x_ij = f_ij / λ̂_i are then held until the next solve. The CVXPY problem is
built once with ``cp.Parameter``s (λ̂, μ̄) and re-solved (DPP).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import numpy as np

from .._checks import check_real
from ..errors import ParameterError, SolverError, SolveStatus
from ._contract import IgnoresObservations, cumulative, sample_index
from ._view import CellView, check_source

__all__ = ["MNLBProgram", "MNLBRouter", "MNLBState", "OVERFLOW_PENALTY"]

#: cost per req/s of overload (σ·Σ ρ_max μ̄_j), in seconds of network delay (≫ any τ) [R].
OVERFLOW_PENALTY = 1e3


class MNLBProgram:
    """The MNLB LP on a fixed residency mask and delay matrix, built once, re-solved.

    Args:
        mask: admissible arcs (n×n bool).
        delays: one-way delays τ (n×n, s).
        rho_max: headroom: usable fraction of each cell's capacity.
    """

    def __init__(self, mask: np.ndarray, delays: np.ndarray, rho_max: float = 0.9) -> None:
        import cvxpy as cp

        self.mask = np.array(mask, dtype=bool)
        self.delays = np.array(delays, dtype=float)
        n = self.mask.shape[0]
        self.src, self.dst = np.nonzero(self.mask)
        m = len(self.src)
        A_src = np.zeros((n, m))
        A_src[self.src, np.arange(m)] = 1.0
        A_dst = np.zeros((n, m))
        A_dst[self.dst, np.arange(m)] = 1.0
        self.lam = cp.Parameter(n, nonneg=True, name="lambda_hat")
        self.cap = cp.Parameter(n, nonneg=True, name="capacity")
        self.f = cp.Variable(m, nonneg=True, name="flow")
        self.sigma = cp.Variable(nonneg=True, name="overload")
        tau = self.delays[self.src, self.dst]
        capped = float(rho_max) * self.cap
        self.problem = cp.Problem(
            cp.Minimize(tau @ self.f + OVERFLOW_PENALTY * self.sigma * cp.sum(capped)),
            [A_src @ self.f == self.lam, A_dst @ self.f <= capped + self.sigma * capped])
        self.n = n

    def solve(self, lam: np.ndarray, cap: np.ndarray) -> np.ndarray:
        """Routing weights x (n×n) for estimated rates ``lam`` and capacities ``cap`` (req/s).

        A source with λ̂_i = 0 gets all weight on its nearest admissible cell.

        Raises:
            SolverError: the LP did not solve to optimality.
        """
        self.lam.value = np.maximum(np.asarray(lam, dtype=float), 0.0)
        self.cap.value = np.maximum(np.asarray(cap, dtype=float), 0.0)
        # CLARABEL (bundled with cvxpy): HiGHS writes a banner to stdout, which would corrupt
        # `lbtheory simulate --json`
        solver = "CLARABEL" if "CLARABEL" in _installed() else None
        try:
            self.problem.solve(solver=solver)
        except Exception as exc:  # cvxpy raises its own SolverError type
            raise SolverError(f"MNLB LP: solver {solver or 'default'} failed: {exc}",
                              solver=str(solver), status=SolveStatus.FAILED,
                              detail=str(exc)) from exc
        if self.problem.status != "optimal":
            raise SolverError(f"MNLB LP: status {self.problem.status}", solver=str(solver),
                              status=SolveStatus.FAILED, detail=str(self.problem.status))
        f = np.zeros((self.n, self.n))
        f[self.src, self.dst] = np.maximum(self.f.value, 0.0)
        x = np.zeros_like(f)
        lam_v = self.lam.value
        for i in range(self.n):
            if not self.mask[i].any():
                continue
            if lam_v[i] > 0 and f[i].sum() > 0:
                x[i] = f[i] / f[i].sum()
            else:
                near = np.where(self.mask[i], self.delays[i], np.inf)
                x[i, int(np.argmin(near))] = 1.0
        return x


@functools.cache
def _installed() -> tuple[str, ...]:
    """CVXPY's installed solvers, asked once per process (the query imports every solver
    module's probe: 3 ms a call, 20 % of an Appendix-B cell when asked at every re-solve)."""
    import cvxpy as cp

    return tuple(cp.installed_solvers())


class MNLBState(NamedTuple):
    """The program (built on first use), held weights, request counts since the last solve."""

    program: Any
    cum: tuple
    next_solve: float
    counts: np.ndarray
    window_start: float
    solves: int


@dataclasses.dataclass(frozen=True)
class MNLBRouter(IgnoresObservations):
    """MNLB: re-solve the LP every ``period_s`` s with estimated λ̂, hold the weights between.

    Args:
        period_s: time between solves (s); DLB: "tens of seconds"; default 10 s [R].
        rho_max: usable fraction of capacity (headroom) [R].
    """

    period_s: float = 10.0
    rho_max: float = 0.9
    name: str = "mnlb"

    def __post_init__(self) -> None:
        check_real(self.period_s, "MNLBRouter.period_s", unit="s", low=0.0, low_open=True)
        check_real(self.rho_max, "MNLBRouter.rho_max", low=0.0, high=1.0, low_open=True)

    def init(self, seed: int = 0) -> MNLBState:
        """No program yet: built (and solved) at the first request."""
        return MNLBState(None, (), -np.inf, np.zeros(0), 0.0, 0)

    def solve(self, state: MNLBState, view: CellView) -> MNLBState:
        """Re-solve the LP now (at ``view.time``): λ̂ from the counts of the window (the nominal
        rates before the first solve), weights held until ``view.time + period_s``."""
        program = state.program
        if program is None or not np.array_equal(program.mask, view.mask):
            program = MNLBProgram(view.mask, view.delays, self.rho_max)
        elapsed = float(view.time) - state.window_start
        if state.solves > 0 and elapsed > 0:
            lam = state.counts / elapsed
        elif view.arrival_rates is not None:
            lam = np.asarray(view.arrival_rates, dtype=float)
        else:
            lam = view.mask.any(axis=1).astype(float)
        if view.capacity is None:
            raise ParameterError("router view: MNLB needs the cells' capacity (view.capacity)")
        x = program.solve(lam, view.capacity)
        cum = tuple(cumulative(row) if row.sum() > 0 else None for row in x)
        return MNLBState(program, cum, float(view.time) + self.period_s, np.zeros(view.n),
                         float(view.time), state.solves + 1)

    def route(self, state: MNLBState, view: CellView,
              rng: np.random.Generator) -> tuple[int, MNLBState]:
        """Count the request for λ̂; re-solve if the period is over; sample from the weights."""
        source = view.source
        check_source(view, source)
        if view.time >= state.next_solve:
            state = self.solve(state, view)
        counts = state.counts.copy()
        counts[source] += 1.0
        return sample_index(state.cum[source], rng), state._replace(counts=counts)
