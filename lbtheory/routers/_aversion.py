"""Error aversion (DLB §3.4; THEORY §8, pseudo-code [R]) as a wrapper around any root router.

Leaves keep an EMA e_j of their error fraction, which probes carry to the roots
(``RouterView.error_rate``). Every ``period_s`` each source i updates an aversion probability
a_ij ∈ [0, 1 − p_explore] per destination:

    e_best = min_j e_j (over i's admissible cells)
    a_ij ← min(1, a_ij + κ_up (e_j − e_best))   if e_j > e_best + margin
    a_ij ← max(0, a_ij − κ_down)                 otherwise (recovery)
    a_ij ← min(a_ij, 1 − p_explore)              (a trickle keeps observing recovery)

Routing: the wrapped router picks j; with probability a_ij the pick is rejected and j is re-picked
among i's other admissible cells with weights ∝ k_j (1 − a_ij) [R: the paper does not say how].
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from ._contract import cumulative, sample_index
from ._drive import observe_all
from ._view import CellView, check_source

__all__ = ["ErrorAversion", "AversionState"]


class AversionState(NamedTuple):
    """Wrapped router's state, aversion matrix (n×n) and time of the next control update (s)."""

    inner: Any
    aversion: np.ndarray
    next_update: float


@dataclasses.dataclass(frozen=True)
class ErrorAversion:
    """Error aversion around ``router`` (placeholders κ_up, κ_down, margin, p_explore are [R])."""

    router: Any
    period_s: float = 1.0
    kappa_up: float = 5.0
    kappa_down: float = 0.05
    margin: float = 0.01
    p_explore: float = 0.05

    @property
    def name(self) -> str:
        return getattr(self.router, "name", "router")

    def init(self, seed: int = 0) -> AversionState:
        """The wrapped router's state, no aversion yet."""
        return AversionState(self.router.init(seed), np.zeros((0, 0)), 0.0)

    def _control(self, state: AversionState, view: CellView, sources: list[int]
                 ) -> AversionState:
        if view.time < state.next_update or view.error_rate is None:
            return state
        n = view.n
        a = state.aversion.copy() if state.aversion.shape == (n, n) else np.zeros((n, n))
        e = np.asarray(view.error_rate, dtype=float)
        for i in sources:
            row = view.mask[i]
            if not row.any():
                continue
            best = e[row].min()
            worse = row & (e > best + self.margin)
            a[i] = np.where(worse, np.minimum(1.0, a[i] + self.kappa_up * (e - best)),
                            np.maximum(0.0, a[i] - self.kappa_down))
            a[i] = np.where(row, np.minimum(a[i], 1.0 - self.p_explore), 0.0)
        return AversionState(state.inner, a, float(view.time) + self.period_s)

    def observe(self, state: AversionState, view: CellView) -> AversionState:
        """The control update (every ``period_s``), then the wrapped router observes."""
        state = self._control(state, view, [view.source])
        return state._replace(inner=self.router.observe(state.inner, view))

    def observe_round(self, state: AversionState, views: list[CellView | None]
                      ) -> AversionState:
        """:meth:`observe` for every source of a probe round (the wrapped router's
        ``observe_round`` when it is a :class:`~._contract.RoundObserver`: :func:`observe_all`)."""
        live = [i for i, v in enumerate(views) if v is not None]
        state = self._control(state, views[live[0]], live)
        return state._replace(inner=observe_all(self.router, state.inner, views))

    def route(self, state: AversionState, view: CellView,
              rng: np.random.Generator) -> tuple[int, AversionState]:
        """The wrapped router's pick, re-picked away from a cell the source is averse to."""
        source = view.source
        j, inner = self.router.route(state.inner, view, rng)
        state = state._replace(inner=inner)
        a = state.aversion
        if a.shape != (view.n, view.n) or a[source, j] <= 0 or rng.random() >= a[source, j]:
            return j, state
        row = check_source(view, source).copy()
        row[j] = False
        if not row.any():
            return j, state
        w = np.where(row, view.replicas * (1.0 - a[source]), 0.0)
        if w.sum() <= 0:
            return j, state
        return sample_index(cumulative(w), rng), state
