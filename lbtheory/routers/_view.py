"""What a DLB root router sees: the :class:`CellView` of one source cell, and the cost helpers
of the cell routers.

The cell simulator builds one view per source at every probe round (workloads probed and stale
by the one-way delay τ_ij, THEORY §3) and passes it to the router contract of
:mod:`lbtheory.routers._contract`: ``observe(state, view)`` when the round reaches the source (or
``observe_round(state, views)`` for all sources at once), ``route(state, view, rng)`` for each
request of the source. ``route`` never returns a cell outside the source's residency row (a
missing arc is a residency rule, THEORY §1).

Cost tables: probes report request counts, and a probe round evaluates the same few hundred
values ℓ_j(N) or 1/μ'_j(N) thousands of times between two refits, so the simulator passes a
:class:`CostTables` of the current model bank in the view (built once per bank, owned by the
run: no module-level cache).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..costs import CostKind, arc_costs, cell_cost
from ..errors import ParameterError, TopologyError
from ..models import ModelBank
from ..simplex import flow_update

__all__ = ["CellView", "CostTables", "cost_row", "cost_matrix", "flow_step",
           "mean_network_delay", "check_source"]


@dataclasses.dataclass(frozen=True)
class CellView:
    """An immutable snapshot of what the root router of one source cell sees.

    Attributes:
        time: current time (s).
        workload: N̂_j, probed requests in flight at each cell (n,), stale by τ_ij (the probe
            answer travels back one one-way delay).
        replicas: k_j as probed (n,); outages lower it.
        delays: one-way network delays τ (n×n, s).
        mask: residency mask (n×n bool); row i lists the cells source i may use.
        models: fitted service models ℓ_j(N) (for latency/gradient costs; None for RIF-only).
        capacity: μ̄_j, current saturation rate of each cell (n,, req/s), for MNLB.
        arrival_rates: nominal λ_i (n,, req/s), a forecast MNLB may use before it has counts.
        error_rate: per-cell error EMA carried by probes (n,, fraction), or None.
        source: the source cell i whose root router this view belongs to.
        tables: cost tables of ``models`` at integer workloads (:class:`CostTables`), or None.
        probe_period_s: time between two probe rounds (s; 0 if unknown) — a flow router's
            default stepsize counts it in the feedback delay.
    """

    time: float
    workload: np.ndarray
    replicas: np.ndarray
    delays: np.ndarray
    mask: np.ndarray
    models: ModelBank | None = None
    capacity: np.ndarray | None = None
    arrival_rates: np.ndarray | None = None
    error_rate: np.ndarray | None = None
    source: int = 0
    tables: CostTables | None = None
    probe_period_s: float = 0.0

    @property
    def n(self) -> int:
        """Number of cells."""
        return int(self.workload.shape[0])

    # -- the TargetView every simulator's view implements (shared baselines read these) --
    @property
    def eligible(self) -> np.ndarray:
        """The source's residency row (its admissible cells)."""
        return self.mask[self.source]

    @property
    def queue(self) -> np.ndarray:
        """N̂_j, the probed (stale) requests at each cell."""
        return self.workload

    @property
    def tokens(self) -> None:
        """Cells report requests, not tokens."""
        return None

    @property
    def weights(self) -> np.ndarray:
        """k_j, the probed replicas (DLB's Rand routes ∝ k_j)."""
        return self.replicas

    @property
    def stream(self) -> int:
        """Each source is its own decision stream."""
        return self.source


def check_source(view: CellView, source: int) -> np.ndarray:
    """The source's residency row; raises TopologyError if the source reaches no cell."""
    row = view.mask[source]
    if not row.any():
        raise TopologyError(f"source cell index {source}: reaches no cell (no admissible arc)")
    return row


def cost_row(kind: CostKind, view: CellView, source: int) -> np.ndarray:
    """ĉ_ij for j = 0..n−1 as source i sees it: c_ij(N̂_j) from :func:`lbtheory.costs.arc_costs`
    (s for latency/gradient, requests per replica for RIF); +inf off the residency mask."""
    if kind is not CostKind.RIF and view.models is None:
        raise ParameterError(f"router view: the {kind.value} cost needs fitted service models "
                            f"(view.models is None)")
    models = _lookup(kind, view, view.workload)
    c = np.asarray(arc_costs(kind, models, view.workload, view.replicas, view.delays[source]),
                   dtype=float)
    return np.where(view.mask[source], c, np.inf)


#: initial number of workloads N = 0, 1, … tabulated per model bank (grown on demand).
_TABLE_ROWS = 64
#: workloads at or above this are evaluated directly (bounds a table's memory).
_TABLE_MAX_ROWS = 1 << 16


class _CostTable:
    """ℓ_j(N) or 1/μ'_j(N) of one :class:`~lbtheory.models.ModelBank` at the integer workloads
    N = 0, 1, …, evaluated once by :func:`lbtheory.costs.cell_cost` (no formula re-coded) and then
    looked up. Duck-types the two model-bank methods :func:`~lbtheory.costs.cell_cost` calls."""

    def __init__(self, kind: CostKind, bank: ModelBank) -> None:
        self.kind, self.bank = kind, bank
        self.cols = np.arange(bank.n)
        self.table = np.empty((0, bank.n))

    def covers(self, N: np.ndarray) -> bool:
        """Whether N ((n,) or (m, n)) holds request counts (integers ≥ 0); grows the table to
        cover them."""
        if N.size == 0 or not np.isfinite(N).all():
            return False
        Ni = N.astype(np.int64)
        if not (Ni == N).all() or Ni.min() < 0:
            return False
        top = int(Ni.max())
        if top >= _TABLE_MAX_ROWS:
            return False  # a runaway queue: evaluate directly rather than grow a huge table
        if top >= self.table.shape[0]:
            rows = max(_TABLE_ROWS, 2 * self.table.shape[0], top + 1)
            grid = np.broadcast_to(np.arange(rows, dtype=float)[:, None], (rows, self.bank.n))
            self.table = np.asarray(cell_cost(self.kind, self.bank, grid), dtype=float)
        return True

    def latency(self, N: np.ndarray) -> np.ndarray:
        """f_j(N_j) looked up (N covered, see :meth:`covers`); s."""
        return self.table[N.astype(np.int64), self.cols]

    gradient_cost = latency


class CostTables:
    """Lazily built cost tables of one model bank, one per cost kind (the simulator makes one
    per bank and passes it in every :class:`CellView` until the models change)."""

    def __init__(self, bank: ModelBank) -> None:
        self.bank = bank
        self._by_kind: dict[CostKind, _CostTable] = {}

    def get(self, kind: CostKind) -> _CostTable:
        """The table of ``kind`` (built on first use)."""
        tab = self._by_kind.get(kind)
        if tab is None:
            tab = self._by_kind[kind] = _CostTable(kind, self.bank)
        return tab


def _lookup(kind: CostKind, view: CellView, N: np.ndarray) -> Any:
    """The view's models, or their cost table when the workloads ``N`` are request counts and the
    view carries tables (same values, looked up). RIF costs ignore the models."""
    models = view.models
    if kind is CostKind.RIF or models is None or view.tables is None:
        return models
    if view.tables.bank is not models or not isinstance(N, np.ndarray) or \
            N.shape[-1] != models.n:
        return models
    tab = view.tables.get(kind)
    return tab if tab.covers(N) else models


def cost_matrix(kind: CostKind, views: list[CellView | None]) -> np.ndarray:
    """ĉ_ij for every source i with a view (row i from view i's stale workloads; one vectorised
    :func:`lbtheory.costs.arc_costs` call); +inf off the mask and on rows without a view.
    All views of one probe round share replicas, delays, mask and models."""
    v0 = next(v for v in views if v is not None)
    if kind is not CostKind.RIF and v0.models is None:
        raise ParameterError(f"router view: the {kind.value} cost needs fitted service models "
                            f"(view.models is None)")
    zero = np.zeros(v0.n)
    N = np.array([zero if v is None else v.workload for v in views], dtype=float)
    have = np.array([v is not None for v in views])
    models = _lookup(kind, v0, N)
    c = np.asarray(arc_costs(kind, models, N, v0.replicas, v0.delays), dtype=float)
    return np.where(v0.mask & have[:, None], c, np.inf)


def flow_step(x: np.ndarray, cost: np.ndarray, step: Any, mask: np.ndarray) -> np.ndarray:
    """DLB's flow update (2), x_i ← Π_Δi(x_i − step_i·ĉ_i), for one row or a matrix of rows
    (``step`` scalar or one per row) — the one call site of
    :func:`lbtheory.simplex.flow_update` in the routers. Off-mask costs may be inf."""
    c = np.where(mask, cost, 0.0)
    return np.asarray(flow_update(x, c, step, mask), dtype=float)


def mean_network_delay(view: CellView) -> float:
    """Mean one-way delay over the admissible arcs with τ > 0 (s); 0 if there are none."""
    d = view.delays[view.mask & (view.delays > 0)]
    return float(d.mean()) if d.size else 0.0
