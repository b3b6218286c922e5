"""What a root router sees (:class:`RouterView`) and the helpers every router shares.

The optax pattern (STYLE.md): a router is a frozen config dataclass with pure functions

* ``init(seed) -> state`` — the initial state (a NamedTuple of immutable values);
* ``observe(state, view, source) -> state`` — a probe round reached the root router of ``source``
  (the view changed); flow routers take their step (2) here, discrete ones cache their argmin;
* ``route(state, view, source, rng) -> (destination, state)`` — send one request;
* optionally ``observe_round(state, views)`` — one probe round for every source at once
  (``views[i]`` or None), the vectorised equivalent of ``observe`` per source (the simulator
  uses it; a test pins the two to each other).

State and randomness are explicit (``rng`` is a ``numpy.random.Generator``), so the same router
runs in the event simulator, a notebook or a test. ``route`` never returns a destination outside
the source's residency mask (a missing arc is a residency rule, THEORY §1).
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Any

import numpy as np

from ..costs import CostKind, arc_costs, cell_cost
from ..errors import TopologyError
from ..models import ModelBank
from ..simplex import flow_update

__all__ = ["RouterView", "sample_index", "cumulative", "cost_row", "cost_matrix", "flow_step",
           "mean_network_delay"]


@dataclasses.dataclass(frozen=True)
class RouterView:
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

    @property
    def n(self) -> int:
        """Number of cells."""
        return int(self.workload.shape[0])


def cumulative(weights: np.ndarray) -> list[float]:
    """Cumulative weights of one routing row (a list, for :func:`sample_index`)."""
    return np.cumsum(np.asarray(weights, dtype=float)).tolist()


def sample_index(cum: list[float], rng: np.random.Generator) -> int:
    """Draw j with probability (cum_j − cum_{j−1}) / cum_{−1} (one uniform draw); entries with
    zero weight are never drawn."""
    u = rng.random() * cum[-1]
    j = bisect.bisect_right(cum, u)
    last = len(cum) - 1
    if j > last:  # u == cum[-1] up to rounding: the last positive-weight entry
        j = last
        while j > 0 and cum[j - 1] == cum[j]:
            j -= 1
    return j


def check_source(view: RouterView, source: int) -> np.ndarray:
    """The source's residency row; raises TopologyError if the source reaches no cell."""
    row = view.mask[source]
    if not row.any():
        raise TopologyError(f"source cell index {source}: reaches no cell (no admissible arc)")
    return row


def cost_row(kind: CostKind, view: RouterView, source: int) -> np.ndarray:
    """ĉ_ij for j = 0..n−1 as source i sees it: c_ij(N̂_j) from :func:`lbtheory.costs.arc_costs`
    (s for latency/gradient, requests per replica for RIF); +inf off the residency mask."""
    if kind is not CostKind.RIF and view.models is None:
        raise TopologyError(f"router view: the {kind.value} cost needs fitted service models "
                            f"(view.models is None)")
    models = _lookup(kind, view.models, view.workload)
    c = np.asarray(arc_costs(kind, models, view.workload, view.replicas, view.delays[source]),
                   dtype=float)
    return np.where(view.mask[source], c, np.inf)


_NO_MODELS: Any = None  # RIF ignores the models (cell_cost returns N/k)
#: initial number of workloads N = 0, 1, … tabulated per model bank (grown on demand).
_TABLE_ROWS = 64
#: workloads at or above this are evaluated directly (bounds a table's memory).
_TABLE_MAX_ROWS = 1 << 16
#: model banks whose tables are kept (the most recent ones; a simulator refit makes a new bank).
_TABLE_CACHE = 8


class _CostTable:
    """ℓ_j(N) or 1/μ'_j(N) of one :class:`~lbtheory.models.ModelBank` at the integer workloads
    N = 0, 1, …, evaluated once by :func:`lbtheory.costs.cell_cost` (no formula re-coded) and then
    looked up: the simulator's probes report request counts, and a probe round evaluates the
    same few hundred values thousands of times between two refits. Duck-types the two model-bank
    methods :func:`~lbtheory.costs.cell_cost` calls."""

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


_TABLES: dict[tuple[int, CostKind], _CostTable] = {}


def _lookup(kind: CostKind, models: ModelBank | None, N: np.ndarray) -> Any:
    """``models``, or a :class:`_CostTable` of it when the workloads ``N`` are request counts
    (same values, looked up). RIF costs ignore the models."""
    if kind is CostKind.RIF or models is None:
        return models if models is not None else _NO_MODELS
    if not isinstance(models, ModelBank) or not isinstance(N, np.ndarray) or \
            N.shape[-1] != models.n:
        return models
    key = (id(models), kind)
    tab = _TABLES.get(key)
    if tab is None or tab.bank is not models:
        tab = _CostTable(kind, models)
        if len(_TABLES) >= _TABLE_CACHE:
            del _TABLES[next(iter(_TABLES))]
        _TABLES[key] = tab
    return tab if tab.covers(N) else models


def cost_matrix(kind: CostKind, views: list[RouterView | None]) -> np.ndarray:
    """ĉ_ij for every source i with a view (row i from view i's stale workloads; one vectorised
    :func:`lbtheory.costs.arc_costs` call); +inf off the mask and on rows without a view.
    All views of one probe round share replicas, delays, mask and models."""
    v0 = next(v for v in views if v is not None)
    if kind is not CostKind.RIF and v0.models is None:
        raise TopologyError(f"router view: the {kind.value} cost needs fitted service models "
                            f"(view.models is None)")
    zero = np.zeros(v0.n)
    N = np.array([zero if v is None else v.workload for v in views], dtype=float)
    have = np.array([v is not None for v in views])
    models = _lookup(kind, v0.models, N)
    c = np.asarray(arc_costs(kind, models, N, v0.replicas, v0.delays), dtype=float)
    return np.where(v0.mask & have[:, None], c, np.inf)


def flow_step(x: np.ndarray, cost: np.ndarray, step: Any, mask: np.ndarray) -> np.ndarray:
    """DLB's flow update (2), x_i ← Π_Δi(x_i − step_i·ĉ_i), for one row or a matrix of rows
    (``step`` scalar or one per row) — the one call site of
    :func:`lbtheory.simplex.flow_update` in the routers. Off-mask costs may be inf."""
    c = np.where(mask, cost, 0.0)
    return np.asarray(flow_update(x, c, step, mask), dtype=float)


def mean_network_delay(view: RouterView) -> float:
    """Mean one-way delay over the admissible arcs with τ > 0 (s); 0 if there are none."""
    d = view.delays[view.mask & (view.delays > 0)]
    return float(d.mean()) if d.size else 0.0
