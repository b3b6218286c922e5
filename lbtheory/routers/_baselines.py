"""Baseline root routers: weighted random ∝ replicas (DLB's Rand), round robin, join the
shortest queue and power-of-d choices. All read the (stale) probed view and respect residency."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from ..errors import TopologyError
from ._base import RouterView, check_source, cumulative, sample_index

__all__ = ["RandomRouter", "RoundRobinRouter", "JSQRouter", "PowerOfDRouter", "NoState",
           "RoundRobinState"]


class NoState(NamedTuple):
    """Stateless routers carry this empty state."""


class _IgnoresProbes:
    """Mixin: routers whose state does not change with probes (they read the view when routing)."""

    def observe(self, state: Any, view: RouterView, source: int) -> Any:
        return state


class _Stateless(_IgnoresProbes):
    """Mixin: routers with no state at all."""

    def init(self, seed: int = 0) -> NoState:
        return NoState()


class RandomState(NamedTuple):
    """Cache: the view each source's weights were computed from (views are immutable)."""

    views: tuple
    cums: tuple


@dataclasses.dataclass(frozen=True)
class RandomRouter(_IgnoresProbes):
    """Rand: send to admissible j with probability ∝ k_j (probed replicas; DLB App. B.1)."""

    name: str = "rand"

    def init(self, seed: int = 0) -> RandomState:
        return RandomState((), ())

    def route(self, state: RandomState, view: RouterView, source: int,
              rng: np.random.Generator) -> tuple[int, RandomState]:
        if len(state.views) != view.n or state.views[source] is not view:
            row = check_source(view, source)
            cum = cumulative(np.where(row, view.replicas, 0.0))
            views = list(state.views) if len(state.views) == view.n else [None] * view.n
            cums = list(state.cums) if len(state.cums) == view.n else [None] * view.n
            views[source], cums[source] = view, cum
            state = RandomState(tuple(views), tuple(cums))
        return sample_index(state.cums[source], rng), state


class RoundRobinState(NamedTuple):
    """Next position in each source's list of admissible cells."""

    position: tuple


@dataclasses.dataclass(frozen=True)
class RoundRobinRouter(_IgnoresProbes):
    """Round robin over each source's admissible cells, in cell order."""

    name: str = "rr"

    def init(self, seed: int = 0) -> RoundRobinState:
        return RoundRobinState(position=())

    def route(self, state: RoundRobinState, view: RouterView, source: int,
              rng: np.random.Generator) -> tuple[int, RoundRobinState]:
        targets = np.flatnonzero(check_source(view, source))
        pos = state.position if len(state.position) == view.n else (0,) * view.n
        p = pos[source]
        new = list(pos)
        new[source] = (p + 1) % len(targets)
        return int(targets[p % len(targets)]), RoundRobinState(tuple(new))


def _load(view: RouterView, per_replica: bool) -> np.ndarray:
    return view.workload / view.replicas if per_replica else np.asarray(view.workload, float)


def _pick_min(load: np.ndarray, cand: np.ndarray, rng: np.random.Generator) -> int:
    vals = load[cand]
    best = cand[vals <= vals.min()]
    return int(best[0] if best.size == 1 else best[rng.integers(best.size)])


@dataclasses.dataclass(frozen=True)
class JSQRouter(_Stateless):
    """Join the shortest (probed, stale) queue: argmin N̂_j (or N̂_j/k_j with ``per_replica``);
    ties uniform at random."""

    per_replica: bool = False
    name: str = "jsq"

    def route(self, state: NoState, view: RouterView, source: int,
              rng: np.random.Generator) -> tuple[int, NoState]:
        cand = np.flatnonzero(check_source(view, source))
        return _pick_min(_load(view, self.per_replica), cand, rng), state


@dataclasses.dataclass(frozen=True)
class PowerOfDRouter(_Stateless):
    """Power of d choices: d distinct admissible cells uniformly at random, the least loaded
    (N̂_j, or N̂_j/k_j with ``per_replica``) wins; fewer than d admissible cells → all of them."""

    d: int = 2
    per_replica: bool = False
    name: str = "p2c"

    def __post_init__(self) -> None:
        if isinstance(self.d, bool) or not isinstance(self.d, int) or self.d < 1:
            raise TopologyError(f"PowerOfDRouter.d: expected an integer ≥ 1, got {self.d!r}")

    def route(self, state: NoState, view: RouterView, source: int,
              rng: np.random.Generator) -> tuple[int, NoState]:
        cand = np.flatnonzero(check_source(view, source))
        if cand.size > self.d:
            cand = np.sort(rng.choice(cand, size=self.d, replace=False))
        return _pick_min(_load(view, self.per_replica), cand, rng), state
