"""Affinity routing (DLB §3.5; THEORY §8, rule [R]) as a wrapper around any root router.

The root keeps ``session → cell``. A new session is routed by the wrapped router and pinned. A
follow-up of session s pinned to j_s stays iff

    ℓ̂_{j_s}(N̂_{j_s}) + 2τ_{i j_s} − Ŝ  <  min_{j ≠ j_s} ℓ̂_j(N̂_j) + 2τ_ij

(the latency cost of :mod:`lbtheory.costs`; Ŝ = ``saving_s``, the expected prefix-cache saving,
s); otherwise the wrapped router picks and the session is re-pinned there.

Design note (kept deliberately): the session table is the one mutable piece of router state (a
cache shared by the returned states, like a production root's affinity map). A pure table would
copy O(sessions) per request — thousands of sessions × every request — for no observable
difference: the table is created by ``init`` for each run, never shared between runs, and runs
with the same seed remain bit-identical.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from ..costs import CostKind
from ._drive import observe_all
from ._view import CellView, check_source, cost_row

__all__ = ["AffinityRouter", "AffinityState"]


class AffinityState(NamedTuple):
    """Wrapped router's state and the session table (session id → cell index)."""

    inner: Any
    pins: dict


@dataclasses.dataclass(frozen=True)
class AffinityRouter:
    """Session stickiness around ``router`` with expected saving ``saving_s`` (s) [R]: a
    :class:`~._contract.RoundObserver` and a :class:`~._contract.SessionRouter`."""

    router: Any
    saving_s: float = 0.05

    @property
    def name(self) -> str:
        return getattr(self.router, "name", "router")

    def init(self, seed: int = 0) -> AffinityState:
        """The wrapped router's state, no session pinned."""
        return AffinityState(self.router.init(seed), {})

    def observe(self, state: AffinityState, view: CellView) -> AffinityState:
        """Forwarded to the wrapped router."""
        return state._replace(inner=self.router.observe(state.inner, view))

    def observe_round(self, state: AffinityState, views: list) -> AffinityState:
        """Forwarded to the wrapped router (vectorised when it can: :func:`observe_all`)."""
        return state._replace(inner=observe_all(self.router, state.inner, views))

    def route(self, state: AffinityState, view: CellView,
              rng: np.random.Generator) -> tuple[int, AffinityState]:
        """A request without a session: the wrapped router decides."""
        j, inner = self.router.route(state.inner, view, rng)
        return j, state._replace(inner=inner)

    def route_session(self, state: AffinityState, view: CellView,
                      rng: np.random.Generator, session: int) -> tuple[int, AffinityState]:
        """Route a request of ``session`` (stay on its pinned cell when the rule says so)."""
        source = view.source
        js = state.pins.get(session)
        row = check_source(view, source)
        if js is not None and row[js]:
            c = cost_row(CostKind.LATENCY, view, source)
            others = np.where(row, c, np.inf)
            others[js] = np.inf
            if not np.isfinite(others).any() or c[js] - self.saving_s < others.min():
                return js, state
        j, inner = self.router.route(state.inner, view, rng)
        state.pins[session] = j
        return j, state._replace(inner=inner)
