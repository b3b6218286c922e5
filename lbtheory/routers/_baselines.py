"""The baselines that make sense in every simulator, written once: weighted random, round robin,
join the shortest queue (by requests or by tokens) and power of d choices.

They read only the :class:`~lbtheory.routers.TargetView` every simulator's view implements
(``eligible``, ``queue``, ``tokens``, ``weights``, ``stream``), answer a target for the request at
the head of the view (or ``None`` when no target is eligible: the request waits), and run
unchanged on DLB cells (DLB's Rand is the weighted random with weights k_j), Intelligent-Router
instances and BalanceRoute decode replicas.

Tie rules are options because the simulators' published tables used different ones: the DLB
cell routers break JSQ ties uniformly at random; the deterministic instance and decode simulators
used the lowest index (the registry passes ``ties="lowest"`` there).

Compiled engines run the same decisions with the numba kernels at the end of this module
(:func:`round_robin_pick`, :func:`uniform_pick`, :func:`jsq_pick`, :func:`power_of_d_pick`):
they take the loads and the eligibility a simulator's view would show, return the router's
target (−1 for ``None``) and draw from the run's ``numpy.random.Generator`` exactly as the
Python routers do, so both engines give the same decisions bit for bit.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, NamedTuple

import numpy as np
from numba import njit
from numba.np.random.random_methods import buffered_bounded_lemire_uint32

from .._checks import check_int, check_option
from ._contract import IgnoresObservations, Stateless, TargetView, cumulative, sample_index

__all__ = ["RandomRouter", "RoundRobinRouter", "JSQRouter", "PowerOfDRouter", "Ties", "Load",
           "RandomState", "RoundRobinState", "round_robin_pick", "uniform_pick", "jsq_pick",
           "power_of_d_pick", "choice_without_replacement", "integers_below",
           "power_of_d_pick_into"]


class Ties(enum.StrEnum):
    """How JSQ breaks ties between equally loaded targets."""

    #: uniformly at random (one extra draw, only when there is a tie).
    RANDOM = "random"
    #: the lowest target index (deterministic).
    LOWEST = "lowest"


class Load(enum.StrEnum):
    """What JSQ and power-of-d compare."""

    #: requests in flight or queued (``view.queue``).
    REQUESTS = "requests"
    #: token load (``view.tokens``: KV tokens, or committed prompt + predicted output tokens).
    TOKENS = "tokens"


def _load(view: TargetView, load: Load, per_weight: bool) -> np.ndarray:
    if load is Load.TOKENS:
        values = view.tokens
        if values is None:
            from ..errors import ParameterError

            raise ParameterError(f"load={load.value!r}: this simulator's view has no token "
                                 f"loads; use load='requests'")
        values = np.asarray(values, dtype=float)
    else:
        values = np.asarray(view.queue, dtype=float)
    w = view.weights
    return values / w if per_weight and w is not None else values


class RandomState(NamedTuple):
    """Cache: the views each stream's weights were computed from (views are immutable)."""

    views: tuple
    cums: tuple


@dataclasses.dataclass(frozen=True)
class RandomRouter(IgnoresObservations):
    """Random: an eligible target with probability ∝ its weight (DLB's Rand: ∝ probed replicas
    k_j, DLB App. B.1); uniform (one integer draw) when the view has no weights."""

    name: str = "random"

    def init(self, seed: int = 0) -> RandomState:
        """Empty cache."""
        return RandomState((), ())

    def route(self, state: RandomState, view: TargetView,
              rng: np.random.Generator) -> tuple[int | None, RandomState]:
        """One draw among the eligible targets."""
        w = view.weights
        if w is None:
            el = np.flatnonzero(view.eligible)
            return (None if el.size == 0 else int(el[rng.integers(el.size)])), state
        s = view.stream
        if len(state.views) <= s or state.views[s] is not view:
            row = view.eligible
            if not row.any():
                return None, state
            n = max(len(state.views), s + 1)
            views = list(state.views) + [None] * (n - len(state.views))
            cums = list(state.cums) + [None] * (n - len(state.cums))
            views[s], cums[s] = view, cumulative(np.where(row, w, 0.0))
            state = RandomState(tuple(views), tuple(cums))
        return sample_index(state.cums[s], rng), state


class RoundRobinState(NamedTuple):
    """Per stream, the target index the next search starts from."""

    pointer: tuple


@dataclasses.dataclass(frozen=True)
class RoundRobinRouter(IgnoresObservations):
    """Round robin: the first eligible target at or after the stream's pointer (cyclically), and
    the pointer moves past it — a fixed target set is cycled in index order; a full replica is
    skipped."""

    name: str = "rr"

    def init(self, seed: int = 0) -> RoundRobinState:
        """Every pointer at target 0."""
        return RoundRobinState(pointer=())

    def route(self, state: RoundRobinState, view: TargetView,
              rng: np.random.Generator) -> tuple[int | None, RoundRobinState]:
        """The next eligible target of the request's stream."""
        ok = view.eligible
        n = ok.size
        s = view.stream
        ptr = list(state.pointer) + [0] * max(0, s + 1 - len(state.pointer))
        start = ptr[s] % n
        order = np.flatnonzero(np.roll(ok, -start))
        if order.size == 0:
            return None, state
        g = (start + int(order[0])) % n
        ptr[s] = (g + 1) % n
        return g, RoundRobinState(tuple(ptr))


def _argmin(values: np.ndarray, cand: np.ndarray, ties: Ties, rng: np.random.Generator) -> int:
    vals = values[cand]
    best = cand[vals <= vals.min()]
    if best.size == 1 or ties is Ties.LOWEST:
        return int(best[0])
    return int(best[rng.integers(best.size)])


@dataclasses.dataclass(frozen=True)
class JSQRouter(Stateless):
    """Join the shortest queue: the eligible target with the least load (``load``: requests, or
    tokens — "JSQ-tokens", the decode balancer), per unit weight with ``per_replica``; ties by
    ``ties``."""

    per_replica: bool = False
    load: Load | str = Load.REQUESTS
    ties: Ties | str = Ties.RANDOM
    name: str = "jsq"

    def __post_init__(self) -> None:
        object.__setattr__(self, "load", check_option(Load, self.load, "JSQRouter.load"))
        object.__setattr__(self, "ties", check_option(Ties, self.ties, "JSQRouter.ties"))

    def route(self, state: Any, view: TargetView,
              rng: np.random.Generator) -> tuple[int | None, Any]:
        """argmin of the load over the eligible targets."""
        cand = np.flatnonzero(view.eligible)
        if cand.size == 0:
            return None, state
        return _argmin(_load(view, self.load, self.per_replica), cand, self.ties, rng), state


@dataclasses.dataclass(frozen=True)
class PowerOfDRouter(Stateless):
    """Power of d choices: ``d`` distinct eligible targets drawn uniformly in random order (all
    of them, in random order, when fewer are eligible), the least loaded wins, ties to the one
    drawn first (so ties are uniformly random too)."""

    d: int = 2
    per_replica: bool = False
    load: Load | str = Load.REQUESTS
    name: str = "p2c"

    def __post_init__(self) -> None:
        check_int(self.d, "PowerOfDRouter.d", low=1)
        object.__setattr__(self, "load", check_option(Load, self.load, "PowerOfDRouter.load"))

    def route(self, state: Any, view: TargetView,
              rng: np.random.Generator) -> tuple[int | None, Any]:
        """Draw, compare, send."""
        cand = np.flatnonzero(view.eligible)
        if cand.size <= 1:
            return (int(cand[0]) if cand.size else None), state
        drawn = rng.choice(cand.size, size=min(self.d, cand.size), replace=False)
        values = _load(view, self.load, self.per_replica)
        best = int(cand[drawn[0]])
        for k in drawn[1:].tolist():
            g = int(cand[k])
            if values[g] < values[best]:
                best = g
        return best, state


# -- the same decisions as numba kernels (module docstring) --------------------------------------
# None of them allocates (power_of_d_pick's buffers aside): the DLB cell engine runs them without
# numba's reference counting.
@njit(cache=True, error_model="numpy")
def integers_below(rng, k):
    """``rng.integers(0, k)`` for 1 ≤ k < 2³²: numpy's draw (Lemire's method on the buffered
    32-bit stream) without the one-element array numba's ``integers`` allocates per call."""
    if k == 1:
        return np.int64(0)
    return np.int64(buffered_bounded_lemire_uint32(rng.bit_generator, k - 1))


@njit(cache=True, error_model="numpy")
def round_robin_pick(eligible, pointer):
    """:class:`RoundRobinRouter`'s decision for one stream: ``(target, new pointer)``, or
    ``(-1, pointer)`` when no target is eligible."""
    n = eligible.size
    start = pointer % n
    for k in range(n):
        g = (start + k) % n
        if eligible[g]:
            return g, (g + 1) % n
    return -1, pointer


@njit(cache=True, error_model="numpy")
def uniform_pick(eligible, rng):
    """:class:`RandomRouter`'s decision on a view without weights: one ``rng.integers`` draw
    among the eligible targets (−1 when none is eligible; no draw then)."""
    k = 0
    for g in range(eligible.size):
        if eligible[g]:
            k += 1
    if k == 0:
        return -1
    j = integers_below(rng, k)
    for g in range(eligible.size):
        if eligible[g]:
            if j == 0:
                return g
            j -= 1
    return -1


@njit(cache=True, error_model="numpy")
def jsq_pick(values, eligible, random_ties, rng):
    """:class:`JSQRouter`'s decision: the eligible target of least ``values`` (the load it
    compares); ties to the lowest index, or uniformly with one ``rng.integers`` draw when
    ``random_ties`` and there is a tie (−1 when none is eligible)."""
    best = np.inf
    n_best = 0
    for g in range(values.size):
        if eligible[g]:
            if n_best == 0 or values[g] < best:
                best = values[g]
                n_best = 1
            elif values[g] == best:
                n_best += 1
    if n_best == 0:
        return -1
    k = integers_below(rng, n_best) if random_ties and n_best > 1 else 0
    for g in range(values.size):
        if eligible[g] and values[g] == best:
            if k == 0:
                return g
            k -= 1
    return -1


@njit(cache=True, error_model="numpy")
def choice_without_replacement(rng, pop, size, out):
    """``rng.choice(pop, size, replace=False)`` of numpy's Generator, into ``out``: Floyd's
    algorithm, then the shuffle of numpy's ``_shuffle_int`` (both with Lemire-bounded integers,
    the draws of ``rng.integers``) — the same draws and result as numpy when ``pop <= 10000``
    or ``size <= pop // 50`` (numpy shuffles a full range otherwise; callers check)."""
    for k in range(size):
        j = pop - size + k
        val = integers_below(rng, j + 1)
        for i in range(k):
            if out[i] == val:
                val = j
                break
        out[k] = val
    for i in range(size - 1, 0, -1):
        j = integers_below(rng, i + 1)
        tmp = out[i]
        out[i] = out[j]
        out[j] = tmp


@njit(cache=True, error_model="numpy")
def power_of_d_pick_into(values, eligible, d, rng, cand, drawn):
    """:func:`power_of_d_pick` with caller-given int64 buffers ``cand`` (≥ the targets) and
    ``drawn`` (≥ d): no allocation."""
    m = 0
    for g in range(eligible.size):
        if eligible[g]:
            cand[m] = g
            m += 1
    if m <= 1:
        return cand[0] if m else -1
    size = min(d, m)
    choice_without_replacement(rng, m, size, drawn)
    best = cand[drawn[0]]
    for k in range(1, size):
        g = cand[drawn[k]]
        if values[g] < values[best]:
            best = g
    return best


@njit(cache=True, error_model="numpy")
def power_of_d_pick(values, eligible, d, rng):
    """:class:`PowerOfDRouter`'s decision: ``min(d, eligible)`` distinct eligible targets
    drawn as numpy's ``rng.choice(·, replace=False)`` draws them, the least ``values`` wins,
    ties to the one drawn first (−1 when none is eligible; no draw with one eligible)."""
    return power_of_d_pick_into(values, eligible, d, rng, np.empty(eligible.size, np.int64),
                                np.empty(max(d, 1), np.int64))
