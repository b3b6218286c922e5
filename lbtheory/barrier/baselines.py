"""Baseline decode-slot routers for the barrier simulator: Random, RR, P2C, JSQ, JSQ-tokens.

Each takes pool requests in arrival order (FIFO) and places each on a replica with a free slot
(and, under a KV budget, room for its prompt; otherwise the queue waits):

* ``random`` — uniform over replicas with a free slot;
* ``rr`` — round-robin pointer, skipping full replicas;
* ``p2c`` — two distinct replicas with a free slot drawn at random, the one with fewer requests in
  flight wins (ties: the first drawn);
* ``jsq`` — fewest requests in flight (what open-source routers do); ties: lowest index;
* ``jsq-tokens`` — least token load ``L_g``; ties: lowest index.

Every factory returns a :class:`~lbtheory.barrier.protocol.Router`; randomness comes from a
``numpy.random.Generator`` carried in the state. ``seed`` is an ``int >= 0`` or a
``numpy.random.SeedSequence`` (preferred), or a ``Generator``; the router's ``init()`` builds a
*fresh* Generator from it on every run (a Generator argument is copied when the router is made, and
each run starts from a copy of that snapshot; the caller's Generator is never advanced). So one
router object reused for several runs gives identical runs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ModelError
from .protocol import ClusterView, Router

__all__ = ["random_router", "round_robin", "power_of_two", "jsq", "jsq_tokens", "Seed",
           "rng_factory"]

#: What a seeded router accepts as its seed.
Seed = int | np.random.SeedSequence | np.random.Generator

# pick(free, inflight, loads, prompt) -> replica; the lists are updated by _fifo.
_Pick = Callable[[list[int], list[int], list[int], int], int]


def _fifo(view: ClusterView, pick: _Pick) -> tuple[np.ndarray, np.ndarray]:
    """Assign pool entries in arrival order with ``pick`` until slots or pool run out.

    With a KV budget (``view.kv_free``), ``pick`` only sees replicas with a free slot *and* room
    for the request's prompt; a head-of-line request that fits nowhere waits, and so does every
    request behind it (first come, first served).
    """
    free = view.free.tolist()
    infl = view.inflight.tolist()
    loads = view.loads.tolist()
    kv = None if view.kv_free is None else view.kv_free.tolist()
    left = sum(free)
    pos: list[int] = []
    reps: list[int] = []
    for p, s in enumerate(view.pool_prompt.tolist()):
        if left == 0:
            break
        avail = free if kv is None else [f if kv[g] >= s else 0 for g, f in enumerate(free)]
        if kv is not None and not any(avail):
            break
        g = pick(avail, infl, loads, s)
        free[g] -= 1
        infl[g] += 1
        loads[g] += s
        if kv is not None:
            kv[g] -= s
        left -= 1
        pos.append(p)
        reps.append(g)
    return np.asarray(pos, dtype=np.int64), np.asarray(reps, dtype=np.int64)


def _eligible(free: list[int]) -> list[int]:
    return [g for g, f in enumerate(free) if f > 0]


def rng_factory(seed: Seed, name: str = "seed") -> Callable[[], np.random.Generator]:
    """A zero-argument callable returning a fresh, identically seeded Generator on every call.

    Args:
        seed: ``int >= 0``, ``numpy.random.SeedSequence`` or ``numpy.random.Generator`` (copied
            now; later draws from the caller's Generator do not change the runs).
        name: parameter name for error messages.

    Raises:
        ModelError: any other seed (bool, float, negative int, ...).
    """
    if isinstance(seed, np.random.Generator):
        snapshot = copy.deepcopy(seed)
        return lambda: copy.deepcopy(snapshot)
    if isinstance(seed, np.random.SeedSequence):
        return lambda: np.random.default_rng(seed)
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        value = int(seed)
        return lambda: np.random.default_rng(value)
    raise ModelError(f"{name}: expected an int >= 0, a numpy SeedSequence or a numpy Generator, "
                     f"got {seed!r}")


def _seeded(name: str, seed: Seed,
            choose: Callable[[np.random.Generator, list[int], list[int]], int]) -> Router:
    """A FIFO router whose choice ``choose(rng, eligible, inflight)`` draws from a seeded rng;
    ``init()`` returns a fresh Generator (same seed) for every run."""
    init = rng_factory(seed)

    def schedule(rng: np.random.Generator, view: ClusterView) -> tuple[Any, Any, Any]:
        pos, reps = _fifo(view, lambda free, infl, loads, s: choose(rng, _eligible(free), infl))
        return pos, reps, rng

    return Router(name, init, schedule)


def random_router(seed: Seed = 0) -> Router:
    """Uniformly random replica among those with a free slot (``seed``: see module doc)."""
    return _seeded("random", seed, lambda rng, el, infl: el[int(rng.integers(len(el)))])


def _two_choices(rng: np.random.Generator, el: list[int], infl: list[int]) -> int:
    if len(el) == 1:
        return el[0]
    a, b = rng.choice(len(el), size=2, replace=False).tolist()
    ga, gb = el[a], el[b]
    return gb if infl[gb] < infl[ga] else ga


def power_of_two(seed: Seed = 0) -> Router:
    """Power-of-two-choices on requests in flight (ties: the first drawn; ``seed``: module doc)."""
    return _seeded("p2c", seed, _two_choices)


def round_robin() -> Router:
    """Round-robin over replicas, skipping those without a free slot."""
    def init() -> int:
        return 0

    def schedule(ptr: int, view: ClusterView) -> tuple[Any, Any, Any]:
        G = view.free.size
        cur = [ptr]

        def pick(free, infl, loads, s):
            g = cur[0]
            while free[g] == 0:
                g = (g + 1) % G
            cur[0] = (g + 1) % G
            return g
        pos, reps = _fifo(view, pick)
        return pos, reps, cur[0]

    return Router("rr", init, schedule)


def _argmin_eligible(free: list[int], key: list[int]) -> int:
    best, best_key = -1, None
    for g, f in enumerate(free):
        if f > 0 and (best_key is None or key[g] < best_key):
            best, best_key = g, key[g]
    return best


def jsq() -> Router:
    """Join-shortest-queue: fewest requests in flight (ties: lowest replica index)."""
    def schedule(state: None, view: ClusterView) -> tuple[Any, Any, Any]:
        pos, reps = _fifo(view, lambda free, infl, loads, s: _argmin_eligible(free, infl))
        return pos, reps, state

    return Router("jsq", lambda: None, schedule)


def jsq_tokens() -> Router:
    """Least token load ``L_g`` (KV tokens; ties: lowest replica index)."""
    def schedule(state: None, view: ClusterView) -> tuple[Any, Any, Any]:
        pos, reps = _fifo(view, lambda free, infl, loads, s: _argmin_eligible(free, loads))
        return pos, reps, state

    return Router("jsq-tokens", lambda: None, schedule)
