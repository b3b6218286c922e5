"""Cell networks (THEORY §1): cells with replicas, arrival rates and service models, joined by
directed admissible arcs with one-way delays.

A missing arc is a residency constraint (source i may not send to j); self-arcs are listed
explicitly. Validation happens at construction and raises :class:`~lbtheory.errors.TopologyError`
naming the cell or arc; :meth:`CellNetwork.check_feasibility` checks Assumption 2.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import InfeasibleDemandError, ModelError, SolverError, TopologyError
from .models import ModelBank, ServiceModel, check_assumption_1

__all__ = ["Cell", "Arc", "CellNetwork", "FeasibilityReport"]

#: Relative slack below which Assumption 2 (strict feasibility) is considered violated.
FEASIBILITY_RTOL = 1e-9


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell.

    Attributes:
        name: unique name.
        replicas: k_j, number of inference servers (≥ 1); used by the RIF cost N_j/k_j.
        arrival_rate: λ_j, exogenous arrivals at this cell's root routers (req/s, ≥ 0; a cell with
            no arrivals is a pure destination).
        service: the cell's service model ℓ_j(N).
    """

    name: str
    replicas: int
    arrival_rate: float
    service: ServiceModel


@dataclasses.dataclass(frozen=True)
class Arc:
    """Admissible arc source → target with one-way network delay ``delay`` (seconds)."""

    source: str
    target: str
    delay: float = 0.0


@dataclasses.dataclass(frozen=True)
class FeasibilityReport:
    """Result of the Assumption-2 check (THEORY §6).

    Attributes:
        slack: s* of ``max s s.t. Σ_i λ_i x_ij ≤ μ̄_j − s``, in req/s (> 0 iff feasible).
        utilisation: Λ / (reachable capacity used by the max-slack routing).
    """

    slack: float
    feasible: bool


def _finite_nonneg(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise TopologyError(f"{what}: expected a non-negative finite number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TopologyError(f"{what}: expected a non-negative finite number, got {value!r}") \
            from None
    if not math.isfinite(v) or v < 0:
        raise TopologyError(f"{what}: expected a non-negative finite number, got {value!r}")
    return v


class CellNetwork:
    """A validated cell network.

    Args:
        cells: the cells, in the order used by every array (routing rows/columns, workloads).
        arcs: admissible arcs; at most one per ordered pair.

    Raises:
        TopologyError: duplicate or empty cell names, unknown cells in arcs, duplicate arcs,
            negative or non-finite rates/delays, replicas < 1, a source with arrivals and no
            outgoing arc.
        ModelError: a cell's service model violates Assumption 1.

    Example:
        >>> from lbtheory.models import MM1Latency
        >>> net = CellNetwork([Cell("a", 1, 6.0, MM1Latency(10.0, 5.0))], [Arc("a", "a", 0.0)])
        >>> net.n, float(net.total_demand)
        (1, 6.0)
    """

    def __init__(self, cells: Sequence[Cell], arcs: Sequence[Arc]) -> None:
        cells = tuple(cells)
        arcs = tuple(arcs)
        if not cells:
            raise TopologyError("cells: a network needs at least one cell")
        index: dict[str, int] = {}
        checked = []
        for j, c in enumerate(cells):
            where = f"cell {c.name!r}" if isinstance(c.name, str) and c.name else f"cells[{j}]"
            if not isinstance(c.name, str) or not c.name:
                raise TopologyError(f"cells[{j}].name: expected a non-empty string, got {c.name!r}")
            if c.name in index:
                raise TopologyError(f"cells[{j}].name: duplicate cell name {c.name!r}")
            index[c.name] = j
            if isinstance(c.replicas, bool) or not float(c.replicas).is_integer() \
                    or not math.isfinite(float(c.replicas)) or c.replicas < 1:
                raise TopologyError(f"{where}: replicas must be an integer ≥ 1, got {c.replicas!r}")
            lam = _finite_nonneg(c.arrival_rate, f"{where}: arrival_rate (req/s)")
            if not isinstance(c.service, ServiceModel):
                raise TopologyError(f"{where}: service must be a ServiceModel, got "
                                    f"{type(c.service).__name__}")
            try:
                check_assumption_1(c.service, label=where)
            except ModelError:
                raise
            checked.append(dataclasses.replace(c, replicas=int(c.replicas), arrival_rate=lam))
        seen: set[tuple[int, int]] = set()
        norm_arcs = []
        for a_i, a in enumerate(arcs):
            for end in ("source", "target"):
                name = getattr(a, end)
                if name not in index:
                    raise TopologyError(f"arcs[{a_i}] ({a.source} -> {a.target}): unknown cell "
                                        f"{name!r} in '{end}'; known cells: {sorted(index)}")
            key = (index[a.source], index[a.target])
            if key in seen:
                raise TopologyError(f"arcs[{a_i}]: duplicate arc {a.source} -> {a.target}")
            seen.add(key)
            d = _finite_nonneg(a.delay, f"arc {a.source} -> {a.target}: delay (s)")
            norm_arcs.append(Arc(a.source, a.target, d))
        self.cells: tuple[Cell, ...] = tuple(checked)
        self.arcs: tuple[Arc, ...] = tuple(norm_arcs)
        self._index = index
        n = len(cells)
        self.adjacency = np.zeros((n, n), dtype=bool)
        self.delays = np.zeros((n, n))
        for a in self.arcs:
            i, j = index[a.source], index[a.target]
            self.adjacency[i, j] = True
            self.delays[i, j] = a.delay
        self.adjacency.setflags(write=False)
        self.delays.setflags(write=False)
        for i, c in enumerate(self.cells):
            if c.arrival_rate > 0 and not self.adjacency[i].any():
                raise TopologyError(f"cell {c.name!r} has arrivals ({c.arrival_rate:g} req/s) but "
                                    f"no outgoing arc; add at least one arc from {c.name!r} "
                                    f"(a self-arc '{c.name} -> {c.name}' for local serving)")
        self.models = ModelBank([c.service for c in self.cells])

    # ------------------------------------------------------------------ views
    @property
    def n(self) -> int:
        """Number of cells."""
        return len(self.cells)

    @property
    def names(self) -> tuple[str, ...]:
        """Cell names in array order."""
        return tuple(c.name for c in self.cells)

    def index(self, name: str) -> int:
        """Array index of the cell called ``name``."""
        try:
            return self._index[name]
        except KeyError:
            raise TopologyError(f"unknown cell {name!r}; known cells: {sorted(self._index)}") \
                from None

    @property
    def arrival_rates(self) -> np.ndarray:
        """λ_i per cell (req/s)."""
        return np.array([c.arrival_rate for c in self.cells])

    @property
    def replicas(self) -> np.ndarray:
        """k_j per cell."""
        return np.array([float(c.replicas) for c in self.cells])

    @property
    def max_rates(self) -> np.ndarray:
        """μ̄_j per cell (req/s)."""
        return np.array([float(c.service.max_rate) for c in self.cells])

    @property
    def services(self) -> tuple[ServiceModel, ...]:
        """The service model of each cell."""
        return tuple(c.service for c in self.cells)

    @property
    def total_demand(self) -> float:
        """Λ = Σ_i λ_i (req/s)."""
        return float(self.arrival_rates.sum())

    @property
    def max_delay(self) -> float:
        """τ̄ = max one-way delay over arcs (s)."""
        return float(self.delays[self.adjacency].max()) if self.adjacency.any() else 0.0

    @property
    def arc_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(source index, target index) arrays of the arcs, in file order."""
        src = np.array([self._index[a.source] for a in self.arcs], dtype=int)
        dst = np.array([self._index[a.target] for a in self.arcs], dtype=int)
        return src, dst

    def uniform_routing(self) -> np.ndarray:
        """Routing matrix x (n×n) splitting each source evenly over its admissible arcs."""
        adj = self.adjacency.astype(float)
        rows = adj.sum(axis=1, keepdims=True)
        return np.divide(adj, rows, out=np.zeros_like(adj), where=rows > 0)

    def to_routing_game(self, *, cost: str = "latency"):
        """The equivalent nonatomic routing game (source → cell arcs with constant cost g_ij,
        then one congestion arc per cell with cost f_j(μ_j⁻¹(z))); see
        :func:`lbtheory.games.to_routing_game` (imported lazily: games sit above networks)."""
        from .games.cells import to_routing_game

        return to_routing_game(self, cost=cost)

    # ------------------------------------------------------------------ edits
    def with_arrival_rates(self, rates: Sequence[float] | np.ndarray) -> CellNetwork:
        """A copy with new arrival rates λ (req/s, one per cell)."""
        rates = np.asarray(rates, dtype=float)
        if rates.shape != (self.n,):
            raise TopologyError(f"arrival rates: expected {self.n} values, got shape {rates.shape}")
        cells = [dataclasses.replace(c, arrival_rate=float(r)) for c, r in zip(self.cells, rates)]
        return CellNetwork(cells, self.arcs)

    def with_demand_scale(self, factor: float) -> CellNetwork:
        """A copy with every arrival rate multiplied by ``factor``."""
        return self.with_arrival_rates(self.arrival_rates * float(factor))

    def with_delays(self, delays: np.ndarray) -> CellNetwork:
        """A copy with new one-way delays (n×n matrix, read on the admissible arcs)."""
        delays = np.asarray(delays, dtype=float)
        arcs = [Arc(a.source, a.target, float(delays[self._index[a.source], self._index[a.target]]))
                for a in self.arcs]
        return CellNetwork(self.cells, arcs)

    # ------------------------------------------------------------------ Assumption 2
    def check_feasibility(self, *, raise_error: bool = True) -> FeasibilityReport:
        """Check Assumption 2 (strict feasibility) with the LP of THEORY §6.

        Solves ``max s s.t. Σ_i λ_i x_ij ≤ μ̄_j − s, x_i ∈ Δ_i`` (HiGHS). If s* ≤ 0, a max-flow
        residual search names the sources whose demand cannot be served and the cells they reach.

        Raises:
            InfeasibleDemandError: with the shortfall in req/s (``raise_error=True``).
        """
        slack = _max_slack(self)
        feasible = slack > FEASIBILITY_RTOL * max(1.0, float(self.max_rates.max()))
        if not feasible and raise_error:
            raise _infeasibility_error(self, slack)
        return FeasibilityReport(slack=slack, feasible=bool(feasible))


def _max_slack(net: CellNetwork) -> float:
    from scipy.optimize import linprog

    src, dst = net.arc_pairs
    lam = net.arrival_rates
    m = len(src)
    # variables: arc flows f (m), s ; maximise s
    c = np.zeros(m + 1)
    c[-1] = -1.0
    A_ub = np.zeros((net.n, m + 1))
    A_ub[dst, np.arange(m)] = 1.0
    A_ub[:, -1] = 1.0
    b_ub = net.max_rates
    A_eq = np.zeros((net.n, m + 1))
    A_eq[src, np.arange(m)] = 1.0
    bounds = [(0, None)] * m + [(None, None)]
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=lam, bounds=bounds, method="highs")
    if res.status == 2:  # equality rows unsatisfiable: only with λ_i > 0 and no arc (validated)
        return -math.inf
    if res.status != 0:
        raise SolverError(f"Assumption-2 LP failed: HiGHS status {res.status} ({res.message})",
                          solver="HIGHS", status=str(res.status))
    return float(res.x[-1])


def _infeasibility_error(net: CellNetwork, slack: float) -> InfeasibleDemandError:
    """Build the error: max-flow LP, then residual reachability from unserved sources."""
    from scipy.optimize import linprog

    src, dst = net.arc_pairs
    lam, cap = net.arrival_rates, net.max_rates
    m = len(src)
    A_ub = np.zeros((2 * net.n, m))
    A_ub[src, np.arange(m)] = 1.0
    A_ub[net.n + dst, np.arange(m)] = 1.0
    res = linprog(-np.ones(m), A_ub=A_ub, b_ub=np.concatenate([lam, cap]),
                  bounds=[(0, None)] * m, method="highs")
    f = res.x if res.status == 0 else np.zeros(m)
    served = np.bincount(src, weights=f, minlength=net.n)
    tol = 1e-9 * max(1.0, float(lam.max()))
    unserved = lam - served
    start = [i for i in range(net.n) if unserved[i] > tol]
    if not start:  # demand met exactly at capacity: use cells with no slack
        start = [i for i in range(net.n) if lam[i] > 0]
    S, C = set(start), set()
    frontier = list(start)
    while frontier:
        i = frontier.pop()
        for j in np.flatnonzero(net.adjacency[i]):
            if j not in C:
                C.add(int(j))
                for k in np.flatnonzero(net.adjacency[:, j]):
                    a = np.flatnonzero((src == k) & (dst == j))
                    if k not in S and f[a].sum() > tol:
                        S.add(int(k))
                        frontier.append(int(k))
    shortfall = float(lam.sum() - served.sum())
    Snames = tuple(net.names[i] for i in sorted(S))
    Cnames = tuple(net.names[j] for j in sorted(C))
    dem = float(lam[sorted(S)].sum())
    capc = float(cap[sorted(C)].sum())
    if shortfall > tol:
        msg = (f"infeasible demand (Assumption 2): sources {list(Snames)} send {dem:g} req/s but "
               f"the cells they can reach {list(Cnames)} have total capacity {capc:g} req/s; "
               f"short by {shortfall:g} req/s")
    else:
        msg = (f"infeasible demand (Assumption 2 needs strict slack): sources {list(Snames)} send "
               f"{dem:g} req/s, exactly the capacity {capc:g} req/s of the cells they can reach "
               f"{list(Cnames)}; short by {max(-slack, 0.0):g} req/s of strict slack")
    return InfeasibleDemandError(msg, shortfall=max(shortfall, 0.0), sources=Snames, cells=Cnames)
