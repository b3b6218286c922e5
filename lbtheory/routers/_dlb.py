"""DLB's six root-routing algorithms (THEORY §3): discrete (1) and flow (2) × RIF / latency /
gradient cost (THEORY §4, from :mod:`lbtheory.costs`).

* :class:`DiscreteRouter` — every request goes to a cheapest admissible cell by the probed cost
  ĉ_ij = c_ij(N̂_j); ties split evenly at random (THEORY §13.6: DLB does not say; our choice [R]).
* :class:`FlowRouter` — routing probabilities x_i updated at each probe round by
  x_i ← Π_Δi(x_i − η·δ·ĉ_i) (THEORY §3 (2), δ = time since the previous probe round), then each
  request is sent to j with probability x_ij; x_i starts at Rand's weights (∝ replicas, DLB
  App. B.1). Default η = ``stepsize_scale`` / (mean one-way network delay + δ_probe/2) — DLB
  App. B.1 chooses the stepsize inversely proportional to the mean network latency; the probe
  period adds δ/2 to the feedback delay (THEORY §3), and the constant depends on the cost
  (:data:`DEFAULT_STEPSIZE_SCALES`) [R]. Any η (e.g. ``lbtheory.stability.critical_stepsize``)
  can be passed as ``stepsize``.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from .._checks import check_real
from ..costs import CostKind
from ..errors import StepsizeError
from ..simplex import simplex_argmin
from ._contract import cumulative, sample_index
from ._view import CellView, check_source, cost_matrix, cost_row, flow_step, mean_network_delay

__all__ = ["DiscreteRouter", "FlowRouter", "DiscreteState", "FlowState",
           "DEFAULT_STEPSIZE_SCALES", "MIN_DELAY_S"]

#: η = DEFAULT_STEPSIZE_SCALES[cost] / (mean one-way delay + δ_probe/2), 1/(cost unit·s) [R]:
#: per cost, half the 10th percentile of η_crit·(mean one-way delay + δ/2) over 40 Appendix-B
#: scenarios at 80 % utilisation that no experiment uses (seeds 100–139, fitted latency models,
#: probes every 10 ms; η_crit = the fluid model's exact critical stepsize with the probe period,
#: :func:`lbtheory.stability.critical_stepsize`) — so the default is at most half the fluid
#: limit on 90 % of such topologies. Derived by ``experiments/_appendix_b_derive.py``
#: (percentiles P10 / median / P90 of η_crit·τ_fb: gradient 0.0119 / 0.036 / 0.12 (39
#: scenarios: one has a boundary equilibrium), latency 0.0219 / 0.085 / 0.84, RIF 0.00252 /
#: 0.0045 / 0.030); the costs' critical values differ ≈10-fold (RIF's cost is requests per
#: replica, the others seconds). The previous single constant 0.01 was 4× RIF's P10.
DEFAULT_STEPSIZE_SCALES: dict[CostKind, float] = {
    CostKind.RIF: 0.00126, CostKind.LATENCY: 0.0110, CostKind.GRADIENT: 0.00593}
#: floor of the feedback delay used by the default stepsize when every arc has τ = 0 and the
#: probe period is unknown (s).
MIN_DELAY_S = 1e-3


def _dict_set(d: tuple, i: int, value: object) -> tuple:
    out = list(d)
    out[i] = value
    return tuple(out)


class DiscreteState(NamedTuple):
    """Per-source cached cumulative weights of the argmin set (None until first use)."""

    cum: tuple


@dataclasses.dataclass(frozen=True)
class DiscreteRouter:
    """Discrete routing (1) with cost ``cost`` ("rif", "latency" or "gradient"); ``name``
    defaults to ``disc-`` + the cost's short label."""

    cost: CostKind | str = CostKind.GRADIENT
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "cost", CostKind.parse(self.cost))
        if not self.name:
            object.__setattr__(self, "name", f"disc-{self.cost.short}")

    def init(self, seed: int = 0) -> DiscreteState:
        """Empty cache (the router itself draws nothing outside ``route``'s rng)."""
        return DiscreteState(cum=())

    def _weights(self, view: CellView) -> np.ndarray:
        row = check_source(view, view.source)
        return cumulative(simplex_argmin(cost_row(self.cost, view, view.source), row))

    def observe(self, state: DiscreteState, view: CellView) -> DiscreteState:
        """A probe round arrived at the view's source: recompute its argmin set."""
        cum = state.cum if len(state.cum) == view.n else (None,) * view.n
        return DiscreteState(cum=_dict_set(cum, view.source, self._weights(view)))

    def observe_round(self, state: DiscreteState,
                      views: list[CellView | None]) -> DiscreteState:
        """A probe round reached every source with a view: one vectorised argmin for all."""
        v0 = next(v for v in views if v is not None)
        W = simplex_argmin(cost_matrix(self.cost, views), v0.mask)
        cum = list(state.cum) if len(state.cum) == v0.n else [None] * v0.n
        for i, v in enumerate(views):
            if v is not None:
                check_source(v, i)
                cum[i] = cumulative(W[i])
        return DiscreteState(cum=tuple(cum))

    def route(self, state: DiscreteState, view: CellView,
              rng: np.random.Generator) -> tuple[int, DiscreteState]:
        """A cheapest admissible cell (uniform among ties)."""
        if len(state.cum) != view.n or state.cum[view.source] is None:
            state = self.observe(state, view)
        return sample_index(state.cum[view.source], rng), state


class FlowState(NamedTuple):
    """Per-source routing rows x_i, their cumulative sums, the time of the last update (s) and
    the stepsize η (fixed on first use: the delays of a network do not change)."""

    x: tuple
    cum: tuple
    last_time: tuple
    eta: float = float("nan")


@dataclasses.dataclass(frozen=True)
class FlowRouter:
    """Flow routing (2) with cost ``cost``.

    Args:
        cost: "rif", "latency" or "gradient".
        stepsize: η (1/(cost unit·s)); None → ``stepsize_scale / (mean one-way delay +
            δ_probe/2)`` (module docstring).
        stepsize_scale: dimensionless constant of the default stepsize (default: the cost's
            :data:`DEFAULT_STEPSIZE_SCALES`).
        name: label in results (default ``flow-`` + the cost's short label).
    """

    cost: CostKind | str = CostKind.GRADIENT
    stepsize: float | None = None
    stepsize_scale: float | None = None
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "cost", CostKind.parse(self.cost))
        for field in ("stepsize", "stepsize_scale"):
            v = getattr(self, field)
            if v is not None:
                check_real(v, f"FlowRouter.{field}", low=0.0, low_open=True, error=StepsizeError)
        if not self.name:
            object.__setattr__(self, "name", f"flow-{self.cost.short}")

    def eta(self, view: CellView) -> float:
        """The stepsize η used on this view (1/(cost unit·s)): ``stepsize``, or the default rule
        on the view's delays and probe period."""
        if self.stepsize is not None:
            return float(self.stepsize)
        scale = (DEFAULT_STEPSIZE_SCALES[self.cost] if self.stepsize_scale is None
                 else self.stepsize_scale)
        delay = mean_network_delay(view) + 0.5 * float(view.probe_period_s)
        return scale / max(delay, MIN_DELAY_S)

    def initial_row(self, view: CellView, source: int) -> np.ndarray:
        """x_i before the first update: Rand's weights, ∝ the probed replicas on the source's
        residency row (DLB App. B.1's Rand routes ∝ replicas)."""
        row = check_source(view, source)
        w = np.where(row, np.asarray(view.replicas, dtype=float), 0.0)
        return w / w.sum() if w.sum() > 0 else row / row.sum()

    def init(self, seed: int = 0) -> FlowState:
        """No routing yet: each source starts at Rand's weights on first use
        (:meth:`initial_row`)."""
        return FlowState(x=(), cum=(), last_time=())

    def _ensure(self, state: FlowState, view: CellView, source: int) -> FlowState:
        if len(state.x) != view.n:
            state = FlowState(x=(None,) * view.n, cum=(None,) * view.n,
                              last_time=(None,) * view.n, eta=self.eta(view))
        if state.x[source] is None:
            x = self.initial_row(view, source)
            state = FlowState(_dict_set(state.x, source, x),
                              _dict_set(state.cum, source, cumulative(x)),
                              _dict_set(state.last_time, source, float(view.time)), state.eta)
        return state

    def observe(self, state: FlowState, view: CellView) -> FlowState:
        """One step of (2) for the view's source with δ = time since its previous update."""
        source = view.source
        state = self._ensure(state, view, source)
        delta = float(view.time) - state.last_time[source]
        if delta <= 0:
            return state
        x = flow_step(state.x[source], cost_row(self.cost, view, source),
                      state.eta * delta, view.mask[source])
        return FlowState(_dict_set(state.x, source, x),
                         _dict_set(state.cum, source, cumulative(x)),
                         _dict_set(state.last_time, source, float(view.time)), state.eta)

    def observe_round(self, state: FlowState, views: list[CellView | None]) -> FlowState:
        """One step of (2) for every source with a view, as one vectorised
        :func:`lbtheory.simplex.flow_update` call (same result as :meth:`observe` per source)."""
        n = len(views)
        if len(state.x) != n or any(state.x[i] is None for i, v in enumerate(views)
                                    if v is not None):
            for i, v in enumerate(views):
                if v is not None:
                    state = self._ensure(state, v, i)
        v0 = next(v for v in views if v is not None)
        zero = np.zeros(n)
        X = np.array([zero if xi is None else xi for xi in state.x])
        eta, last_time = state.eta, state.last_time
        steps_l = [0.0 if v is None else eta * max(0.0, float(v.time) - last_time[i])
                   for i, v in enumerate(views)]
        if not any(steps_l):
            return state
        steps = np.array(steps_l)
        C = np.where(steps[:, None] > 0, cost_matrix(self.cost, views), 0.0)
        Xn = np.asarray(flow_step(X, C, steps, v0.mask), dtype=float)
        cum_all = np.cumsum(Xn, axis=1).tolist()  # = cumulative(Xn[i]) row by row
        x, cum, last = list(state.x), list(state.cum), list(last_time)
        for i, s in enumerate(steps_l):
            if s > 0:
                x[i], cum[i], last[i] = Xn[i], cum_all[i], float(views[i].time)
        return FlowState(tuple(x), tuple(cum), tuple(last), state.eta)

    def route(self, state: FlowState, view: CellView,
              rng: np.random.Generator) -> tuple[int, FlowState]:
        """Sample j with probability x_ij."""
        state = self._ensure(state, view, view.source)
        return sample_index(state.cum[view.source], rng), state
