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

Each decision is **one numba function** at the end of this module (:func:`round_robin_pick`,
:func:`uniform_pick`, :func:`jsq_pick`, :func:`power_of_d_pick`), called by the Python routers
below and by the compiled engines alike (the ``fill_observation`` pattern): it takes the loads
and the eligibility of a view, returns the target (−1 for ``None``) and draws from the run's
``numpy.random.Generator`` (numba shares its bit generator's state), so both engines make the
same decisions bit for bit. ``eligible`` is a bool mask over the targets, or an ``int`` *n*: *n*
targets, all eligible (no array to build, e.g. the DLB leaf's servers).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, NamedTuple

import numpy as np
from numba import njit, types
from numba.extending import overload
from numba.np.random.random_methods import buffered_bounded_lemire_uint32

from .._checks import check_int, check_option
from ._contract import IgnoresObservations, Stateless, TargetView, cumulative, sample_index

__all__ = ["RandomRouter", "RoundRobinRouter", "JSQRouter", "PowerOfDRouter", "Ties", "Load",
           "RandomState", "RoundRobinState", "round_robin_pick", "uniform_pick", "jsq_pick",
           "power_of_d_pick", "choice_without_replacement", "power_of_d_pick_into",
           "two_choices"]


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


def _eligible(view: TargetView) -> np.ndarray:
    """The view's eligibility as the kernels take it (bool; one numba specialisation)."""
    return np.asarray(view.eligible, dtype=np.bool_)


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
            g = uniform_pick(_eligible(view), rng)
            return (None if g < 0 else int(g)), state
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
        """The next eligible target of the request's stream (:func:`round_robin_pick`)."""
        s = view.stream
        ptr = list(state.pointer) + [0] * max(0, s + 1 - len(state.pointer))
        g, p = round_robin_pick(_eligible(view), ptr[s])
        if g < 0:
            return None, state
        ptr[s] = int(p)
        return int(g), RoundRobinState(tuple(ptr))


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
        """argmin of the load over the eligible targets (:func:`jsq_pick`)."""
        g = jsq_pick(_load(view, self.load, self.per_replica), _eligible(view),
                     self.ties is Ties.RANDOM, rng)
        return (None if g < 0 else int(g)), state


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
        """Draw, compare, send (:func:`power_of_d_pick`)."""
        g = power_of_d_pick(_load(view, self.load, self.per_replica), _eligible(view), self.d,
                            rng)
        return (None if g < 0 else int(g)), state


# -- the decisions, one numba function each (module docstring) -----------------------------------
# None of them allocates (power_of_d_pick's buffers aside): the DLB cell engine runs them without
# numba's reference counting.
def _n_targets(eligible):
    """How many targets ``eligible`` describes (a mask's length, or the int itself)."""
    return eligible if isinstance(eligible, int) else eligible.size


def _is_eligible(eligible, g):
    """Target ``g`` may be chosen (always, when ``eligible`` is an int)."""
    return True if isinstance(eligible, int) else bool(eligible[g])


@overload(_n_targets, inline="always")
def _n_targets_nb(eligible):
    if isinstance(eligible, types.Integer):
        return lambda eligible: eligible
    return lambda eligible: eligible.size


@overload(_is_eligible, inline="always")
def _is_eligible_nb(eligible, g):
    if isinstance(eligible, types.Integer):
        return lambda eligible, g: True
    return lambda eligible, g: eligible[g]


@njit(cache=True, error_model="numpy")
def integers_below(rng, k):
    """``rng.integers(0, k)`` for 1 ≤ k < 2³²: numpy's draw (Lemire's method on the buffered
    32-bit stream) without the one-element array numba's ``integers`` allocates per call."""
    if k == 1:
        return np.int64(0)
    return np.int64(buffered_bounded_lemire_uint32(rng.bit_generator, k - 1))


@njit(cache=True, error_model="numpy")
def round_robin_pick(eligible, pointer):
    """Round robin (:class:`RoundRobinRouter`, the instance routers' halves, the DLB leaf): the
    first eligible target at or after ``pointer`` (mod the targets), ``(target, target + 1)``
    (the new pointer), or ``(-1, pointer)`` when no target is eligible."""
    n = _n_targets(eligible)
    start = pointer % n
    for k in range(n):
        g = (start + k) % n
        if _is_eligible(eligible, g):
            return g, g + 1
    return -1, pointer


@njit(cache=True, error_model="numpy")
def uniform_pick(eligible, rng):
    """:class:`RandomRouter`'s decision on a view without weights: one ``rng.integers`` draw
    among the eligible targets (−1 when none is eligible; no draw then)."""
    n = _n_targets(eligible)
    k = 0
    for g in range(n):
        if _is_eligible(eligible, g):
            k += 1
    if k == 0:
        return -1
    j = integers_below(rng, k)
    for g in range(n):
        if _is_eligible(eligible, g):
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
        if _is_eligible(eligible, g):
            if n_best == 0 or values[g] < best:
                best = values[g]
                n_best = 1
            elif values[g] == best:
                n_best += 1
    if n_best == 0:
        return -1
    k = integers_below(rng, n_best) if random_ties and n_best > 1 else 0
    for g in range(values.size):
        if _is_eligible(eligible, g) and values[g] == best:
            if k == 0:
                return g
            k -= 1
    return -1


@njit(cache=True, error_model="numpy")
def two_choices(u1, u2, m):
    """Two distinct targets among ``m`` (≥ 2) from two uniforms in [0, 1): the first
    uniformly, the second uniformly among the others (the DLB leaf's power of two choices,
    both engines; its uniforms come from the leaf's own buffered stream)."""
    x = int(u1 * m)
    y = int(u2 * (m - 1))
    if y >= x:
        y += 1
    return x, y


@njit(cache=True, error_model="numpy")
def choice_without_replacement(rng, pop, size, out):
    """``rng.choice(pop, size, replace=False)`` of numpy's Generator, into ``out``: Floyd's
    algorithm, then the shuffle of numpy's ``_shuffle_int`` (both with Lemire-bounded integers,
    the draws of ``rng.integers``) — the same draws and result as numpy when ``pop <= 10000``
    or ``size <= pop // 50`` (numpy shuffles a full range otherwise; both engines draw here, so
    they agree in every case)."""
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
    for g in range(_n_targets(eligible)):
        if _is_eligible(eligible, g):
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
    return power_of_d_pick_into(values, eligible, d, rng, np.empty(values.size, np.int64),
                                np.empty(max(d, 1), np.int64))
