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

import numpy as np

from ._checks import check_int, check_real
from .errors import (
    FeasibilityStatus,
    InfeasibleDemandError,
    ModelError,
    SolverError,
    SolveStatus,
    TopologyError,
)
from .models import ModelBank, ServiceModel, check_assumption_1

__all__ = ["Cell", "Arc", "CellNetwork", "FeasibilityReport", "max_slack_flows",
           "min_cost_routing", "arc_incidence"]

#: Relative slack below which Assumption 2 (strict feasibility) is considered violated.
FEASIBILITY_RTOL = 1e-9

#: Accepted ranges of a network's numbers (beyond them the equilibrium programs overflow or
#: lose all precision): field → (low, high, unit). ``max_rate`` is the service model's μ̄,
#: ``latency_at_zero`` its ℓ(0).
LIMITS: dict[str, tuple[float, float, str]] = {
    "replicas": (1, 1e6, "servers"),
    "arrival_rate": (0.0, 1e9, "req/s"),
    "delay": (0.0, 3600.0, "s"),
    "max_rate": (1e-6, 1e9, "req/s"),
    "latency_at_zero": (1e-12, 1e4, "s"),
}


def _check_limit(value: float, field: str, where: str, error: type = TopologyError) -> None:
    """Refuse ``value`` outside ``LIMITS[field]``, naming the field and the accepted range."""
    lo, hi, unit = LIMITS[field]
    if not (math.isfinite(value) and lo <= value <= hi):
        raise error(f"{where}: {field} {value:g} {unit} is out of the accepted range: expected "
                    f"{field} in [{lo:g}, {hi:g}] {unit}")


def _check_service_scale(service: ServiceModel, where: str) -> None:
    """μ̄ and ℓ(0) of a cell's service model inside :data:`LIMITS` (silently: no warnings)."""
    with np.errstate(all="ignore"):
        mubar = float(service.max_rate)
        lat0 = float(service.latency(np.float64(0.0)))
    _check_limit(mubar, "max_rate", f"{where}: service", ModelError)
    _check_limit(lat0, "latency_at_zero", f"{where}: service", ModelError)


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
        slack: s* of ``max s s.t. Σ_i λ_i x_ij ≤ μ̄_j − s, x_i ∈ Δ_i``, in req/s: the capacity
            left on the tightest cell under the routing that maximises it (negative: the demand
            exceeds what the reachable cells can serve by that much).
        feasible: ``slack > FEASIBILITY_RTOL · max(1, max_j μ̄_j)`` (dimensionless test of
            Assumption 2, strict feasibility). No utilisation is reported; for Λ/Σμ̄ use
            ``net.total_demand / net.max_rates.sum()``.
        status: :class:`~lbtheory.errors.FeasibilityStatus` — ``feasible`` or ``infeasible``
            (the same test as ``feasible``).
    """

    slack: float
    feasible: bool

    @property
    def status(self) -> FeasibilityStatus:
        """``FeasibilityStatus.FEASIBLE`` when :attr:`feasible`, else ``INFEASIBLE``."""
        return FeasibilityStatus.FEASIBLE if self.feasible else FeasibilityStatus.INFEASIBLE


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
            lo, hi, unit = LIMITS["replicas"]
            k = check_int(c.replicas, f"{where}: replicas", low=int(lo), high=int(hi), unit=unit,
                          integral_float=True, error=TopologyError)
            lam = check_real(c.arrival_rate, f"{where}: arrival_rate", unit="req/s", low=0.0,
                             error=TopologyError)
            _check_limit(lam, "arrival_rate", where)
            if not isinstance(c.service, ServiceModel):
                raise TopologyError(f"{where}: service must be a ServiceModel, got "
                                    f"{type(c.service).__name__}")
            with np.errstate(all="ignore"):
                check_assumption_1(c.service, label=where)
            _check_service_scale(c.service, where)
            checked.append(dataclasses.replace(c, replicas=k, arrival_rate=lam))
        seen: set[tuple[int, int]] = set()
        norm_arcs = []
        for a_i, a in enumerate(arcs):
            for end in ("source", "target"):
                name = getattr(a, end)
                if not isinstance(name, str) or name not in index:
                    raise TopologyError(f"arcs[{a_i}] ({a.source} -> {a.target}): unknown cell "
                                        f"{name!r} in '{end}'; known cells: {sorted(index)}")
            key = (index[a.source], index[a.target])
            if key in seen:
                raise TopologyError(f"arcs[{a_i}]: duplicate arc {a.source} -> {a.target}")
            seen.add(key)
            d = check_real(a.delay, f"arc {a.source} -> {a.target}: delay", unit="s", low=0.0,
                           error=TopologyError)
            _check_limit(d, "delay", f"arc {a.source} -> {a.target}")
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
        """(source index, target index) arrays of the arcs, in file order (fresh copies)."""
        pairs = self.__dict__.get("_arc_pairs")
        if pairs is None:
            pairs = (np.array([self._index[a.source] for a in self.arcs], dtype=int),
                     np.array([self._index[a.target] for a in self.arcs], dtype=int))
            self._arc_pairs = pairs
        return pairs[0].copy(), pairs[1].copy()

    def uniform_routing(self) -> np.ndarray:
        """Routing matrix x (n×n) splitting each source evenly over its admissible arcs."""
        adj = self.adjacency.astype(float)
        rows = adj.sum(axis=1, keepdims=True)
        return np.divide(adj, rows, out=np.zeros_like(adj), where=rows > 0)

    # ------------------------------------------------------------------ edits
    def with_arrival_rates(self, rates: Sequence[float] | np.ndarray) -> CellNetwork:
        """A copy with new arrival rates λ (req/s, one per cell)."""
        rates = np.asarray(rates, dtype=float)
        if rates.shape != (self.n,):
            raise TopologyError(f"arrival rates: expected {self.n} values, got shape {rates.shape}")
        cells = [dataclasses.replace(c, arrival_rate=float(r)) for c, r in zip(self.cells, rates)]
        # only the rates change: validate them (and the sources' arcs), keep everything else
        # (re-validating n² arcs costs ~0.5 s at n = 100)
        for i, c in enumerate(cells):
            where = f"cell {c.name!r}"
            lam = check_real(c.arrival_rate, f"{where}: arrival_rate", unit="req/s", low=0.0,
                             error=TopologyError)
            _check_limit(lam, "arrival_rate", where)
            if lam > 0 and not self.adjacency[i].any():
                raise TopologyError(f"cell {c.name!r} has arrivals ({lam:g} req/s) but no "
                                    f"outgoing arc; add at least one arc from {c.name!r} (a "
                                    f"self-arc '{c.name} -> {c.name}' for local serving)")
        out = object.__new__(CellNetwork)
        out.__dict__.update(self.__dict__)
        out.cells = tuple(cells)
        return out

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
        slack, _ = max_slack_flows(self)
        feasible = slack > FEASIBILITY_RTOL * max(1.0, float(self.max_rates.max()))
        if not feasible and raise_error:
            raise _infeasibility_error(self, slack)
        return FeasibilityReport(slack=slack, feasible=bool(feasible))


def arc_incidence(rows: np.ndarray, n_rows: int, *, extra_column: float | None = None):
    """Sparse incidence matrix A[rows[k], k] = 1 (k over arcs), optionally with a last column
    filled with ``extra_column`` (for a slack variable)."""
    import scipy.sparse as sp

    m = len(rows)
    A = sp.csr_matrix((np.ones(m), (rows, np.arange(m))), shape=(n_rows, m))
    if extra_column is None:
        return A
    return sp.hstack([A, sp.csr_matrix(np.full((n_rows, 1), float(extra_column)))]).tocsr()


def max_slack_flows(net: CellNetwork) -> tuple[float, np.ndarray]:
    """The LP of THEORY §6: ``max s s.t. Σ_i f_ij ≤ μ̄_j − s, Σ_j f_ij = λ_i, f ≥ 0`` (HiGHS).

    Returns (s*, arc flows in ``net.arc_pairs`` order); s* = −inf if a source has no arc.
    """
    from scipy.optimize import linprog

    src, dst = net.arc_pairs
    m = len(src)
    c = np.zeros(m + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=arc_incidence(dst, net.n, extra_column=1.0), b_ub=net.max_rates,
                  A_eq=arc_incidence(src, net.n, extra_column=0.0), b_eq=net.arrival_rates,
                  bounds=[(0, None)] * m + [(None, None)], method="highs")
    if res.status == 2:  # equality rows unsatisfiable: only with λ_i > 0 and no arc (validated)
        return -math.inf, np.zeros(m)
    if res.status != 0:  # scipy's codes: 1 iteration limit, 3 unbounded, 4 numerical trouble
        raise SolverError(f"Assumption-2 LP failed: HiGHS status {res.status} ({res.message})",
                          solver="HIGHS", status=SolveStatus.MAX_ITERATIONS if res.status == 1
                          else SolveStatus.FAILED, detail=f"HiGHS status {res.status}")
    return float(res.x[-1]), np.maximum(res.x[:m], 0.0)


def min_cost_routing(net: CellNetwork, arc_cost: np.ndarray, inflow: np.ndarray, *,
                     arcs: np.ndarray | None = None) -> np.ndarray | None:
    """Transportation LP: arc flows (``arc_pairs`` order) minimising Σ arc_cost·f with source
    totals λ and cell inflows ``inflow``; a basic (vertex) solution, so its support is a forest.
    ``arcs`` (bool, ``arc_pairs`` order) restricts the usable arcs. None if infeasible.

    Large instances (> 4,000 usable arcs) are solved by column generation on the LP duals:
    HiGHS needs ~12 s for the 90,000-arc full mesh, the priced LP a fraction of that.
    """
    src, dst = net.arc_pairs
    m_all = len(src)
    usable = np.ones(m_all, dtype=bool) if arcs is None else np.asarray(arcs, dtype=bool)
    arc_cost = np.asarray(arc_cost, dtype=float)
    b = np.concatenate([net.arrival_rates, inflow])
    if usable.sum() <= 4000:
        f, _ = _transport_lp(net, arc_cost, b, usable, big_m=None)
        return f
    # start from the cheapest arcs of each source; artificial columns (cost big_m) keep every
    # restricted LP feasible; add arcs with negative reduced cost until none is left
    big_m = 1e3 * (float(np.abs(arc_cost[usable]).max()) + 1.0)
    order = np.lexsort((np.where(usable, arc_cost, np.inf), src))
    rank = np.empty(m_all, dtype=int)
    starts = np.searchsorted(src[order], np.arange(net.n))
    rank[order] = np.arange(m_all) - starts[src[order]]
    cols = usable & (rank < 8)
    for _ in range(200):
        f, duals = _transport_lp(net, arc_cost, b, cols, big_m=big_m)
        if f is None:
            return None
        u, v = duals[:net.n], duals[net.n:]
        reduced = arc_cost - u[src] - v[dst]
        enter = usable & ~cols & (reduced < -1e-12 * (1.0 + np.abs(arc_cost)))
        if not enter.any():
            art = float(b.sum() - 2.0 * f.sum())  # artificial mass left (0 when feasible)
            return f if art <= 1e-9 * max(1.0, float(b.sum())) else None
        worst = np.argsort(np.where(enter, reduced, np.inf))[: max(net.n, 64)]
        cols[worst[enter[worst]]] = True
    return None


def _transport_lp(net: CellNetwork, arc_cost: np.ndarray, b: np.ndarray, cols: np.ndarray, *,
                  big_m: float | None) -> tuple[np.ndarray | None, np.ndarray]:
    """One HiGHS solve of the transportation LP on the columns ``cols`` (optionally with
    artificial slack columns of cost ``big_m`` per row). Returns (flows in arc_pairs order,
    equality duals)."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    src, dst = net.arc_pairs
    idx = np.flatnonzero(cols)
    m = len(idx)
    A = arc_incidence(np.concatenate([src[idx], net.n + dst[idx]]), 2 * net.n)
    A = A[:, :m] + A[:, m:]
    c = arc_cost[idx]
    if big_m is not None:
        A = sp.hstack([A, sp.identity(2 * net.n, format="csr")]).tocsr()
        c = np.concatenate([c, np.full(2 * net.n, big_m)])
    res = linprog(c, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
    if res.status != 0:
        return None, np.zeros(2 * net.n)
    f = np.zeros(len(src))
    f[idx] = np.maximum(res.x[:m], 0.0)
    return f, np.asarray(res.eqlin.marginals, dtype=float)


def _infeasibility_error(net: CellNetwork, slack: float) -> InfeasibleDemandError:
    """Build the error: max-flow LP, then residual reachability from unserved sources."""
    from scipy.optimize import linprog

    src, dst = net.arc_pairs
    lam, cap = net.arrival_rates, net.max_rates
    m = len(src)
    A_ub = arc_incidence(np.concatenate([src, net.n + dst]), 2 * net.n)
    A_ub = A_ub[:, :m] + A_ub[:, m:]
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
