"""The one router contract, shared by the three simulators (DESIGN.md, "one house").

A router is a **small immutable config** (a frozen dataclass: its options and a ``name``) with
pure functions, the optax pattern of STYLE.md:

* ``init(seed: int) -> state`` — the initial state of one run (a NamedTuple of immutable values,
  or any value the router treats as immutable);
* ``observe(state, view) -> state`` — new information reached the router (a probe round of the
  DLB cells, a decision epoch of the instances, a decode tick of the replicas);
* ``route(state, view, rng) -> (decision, state)`` — one routing decision; ``rng`` is a
  ``numpy.random.Generator`` the simulator owns and seeds, so the same router runs
  bit-identically in a simulator, a notebook or a test.

A **decision** is one of

* an ``int`` *j* — the request at the head of the view goes to target *j*; the simulator then asks
  again (with an updated view) while requests and capacity remain;
* an :class:`Assignment` — these queued requests go to these targets (a batch, e.g. BalanceRoute's
  two-stage allocation); the simulator asks again while requests and capacity remain (a router
  that has nothing more to place answers ``None`` or an empty assignment);
* ``None`` — route nothing more now (wait for the next decision point).

Two **optional methods** extend the contract; each is declared by its own runtime-checkable
Protocol, and a simulator (through :class:`~lbtheory.routers._drive.Driver`, the one object that
drives a router) uses it when ``isinstance(router, Protocol)`` holds, else the plain form:

* :class:`RoundObserver` — ``observe_round(state, views) -> state``: one probe round for every
  DLB source at once (``views[i]`` the view of source i, ``None`` for a cell without arrivals);
  a vectorised form of ``observe`` that must equal ``observe`` on each non-None view in index
  order (the default when a router lacks it);
* :class:`SessionRouter` — ``route_session(state, view, rng, session) -> (decision, state)``:
  route a request of session ``session`` (an int id; DLB affinity); the default is ``route``;
* :class:`KernelProvider` — ``kernel_spec(context) -> KernelSpec | None``: the router's compiled
  form (:class:`~lbtheory.routers.KernelSpec`, the one user-kernel contract; ``context`` is the
  DLB :class:`~lbtheory.sim.Scenario` or the instance simulator's
  :class:`~lbtheory.intelligent.ClusterConfig`), used when the registry holds no kernel for the
  router's exact type; without it the router runs on the reference engine.

Each simulator supplies its own **view** (what the router may see): the DLB cell simulator a
:class:`~lbtheory.routers.CellView` per source cell (probed, stale workloads), the Intelligent
Router's simulator an :class:`~lbtheory.intelligent.InstanceView`, the decode simulator a
:class:`~lbtheory.barrier.ReplicaView`. Every view implements :class:`TargetView` — the targets a
request may go to, what is queued at each, and optional weights — which is all the shared
baselines of :mod:`._baselines` (random, round robin, JSQ, power of d) read, so they are written
once and run in all three simulators.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
from numba import njit

__all__ = ["Router", "RoundObserver", "SessionRouter", "KernelProvider", "TargetView",
           "Assignment", "Decision", "NoState", "sample_index", "cumulative",
           "IgnoresObservations", "Stateless",
           "IdenticalTargets", "sample_index_kernel", "cumulative_kernel"]


class Assignment(NamedTuple):
    """A batch decision: queued request ``positions[k]`` (index into the view's queue) goes to
    target ``targets[k]`` (int64 arrays of equal length; positions distinct)."""

    positions: np.ndarray
    targets: np.ndarray


#: What ``route`` returns as its decision (module docstring).
Decision = int | Assignment | None


@runtime_checkable
class TargetView(Protocol):
    """What every simulator's view offers the shared baselines (all arrays over targets).

    * ``eligible`` — bool mask of the targets the request at the head may go to now (a source's
      admissible cells; replicas with a free slot and KV room; every instance);
    * ``queue`` — requests in flight or queued at each target, as this router sees them (probed
      and stale for DLB cells);
    * ``tokens`` — token load of each target (KV tokens, committed prompt + predicted output), or
      ``None`` when the simulator does not model tokens at the targets;
    * ``weights`` — capacity weight of each target (DLB: replicas k_j), or ``None`` (equal);
    * ``stream`` — the independent decision stream the request belongs to (DLB: its source cell,
      each with its own round-robin pointer; 0 elsewhere).
    """

    @property
    def eligible(self) -> np.ndarray: ...

    @property
    def queue(self) -> np.ndarray: ...

    @property
    def tokens(self) -> np.ndarray | None: ...

    @property
    def weights(self) -> np.ndarray | None: ...

    @property
    def stream(self) -> int: ...


@runtime_checkable
class Router(Protocol):
    """The router contract (module docstring); the optional methods are
    :class:`RoundObserver` and :class:`SessionRouter`."""

    name: str

    def init(self, seed: int) -> Any: ...

    def observe(self, state: Any, view: Any) -> Any: ...

    def route(self, state: Any, view: Any, rng: np.random.Generator) -> tuple[Decision, Any]: ...


@runtime_checkable
class RoundObserver(Protocol):
    """Optional: a router that observes a whole DLB probe round at once (module docstring)."""

    def observe_round(self, state: Any, views: Sequence[Any]) -> Any:
        """The state after ``observe`` of every non-None ``views[i]``, in index order."""
        ...


@runtime_checkable
class SessionRouter(Protocol):
    """Optional: a router that routes a request knowing its session (module docstring)."""

    def route_session(self, state: Any, view: Any, rng: np.random.Generator,
                      session: int) -> tuple[Decision, Any]:
        """One decision for a request of session ``session`` (an int id)."""
        ...


@runtime_checkable
class KernelProvider(Protocol):
    """Optional: a router that carries its own compiled form (module docstring)."""

    def kernel_spec(self, context: Any) -> Any:
        """A :class:`~lbtheory.routers.KernelSpec` for this run's ``context`` (a scenario or a
        cluster config), or ``None`` to run on the reference engine."""
        ...


class IdenticalTargets:
    """Mixin for a view whose targets are interchangeable and whose requests form one decision
    stream (instances, decode replicas): ``weights`` None, ``stream`` 0."""

    @property
    def weights(self) -> None:
        """Targets are identical: no capacity weights."""
        return None

    @property
    def stream(self) -> int:
        """One decision stream."""
        return 0


class NoState(NamedTuple):
    """The state of a router that keeps none."""


class IgnoresObservations:
    """Mixin: a router whose state does not change with observations (it reads the view when
    routing)."""

    def observe(self, state: Any, view: Any) -> Any:
        """Nothing to learn: ``state`` unchanged."""
        return state


class Stateless(IgnoresObservations):
    """Mixin: a router with no state at all."""

    def init(self, seed: int = 0) -> NoState:
        """The empty state."""
        return NoState()


# -- weighted draws: one numba definition each, called by the Python routers and the kernels -----
def cumulative(weights: np.ndarray) -> np.ndarray:
    """Cumulative weights of one routing row, for :func:`sample_index`
    (:func:`cumulative_kernel`)."""
    w = np.ascontiguousarray(weights, dtype=float)
    out = np.empty(w.shape[0])
    cumulative_kernel(w, out)
    return out


def sample_index(cum: np.ndarray, rng: np.random.Generator) -> int:
    """Draw j with probability (cum_j − cum_{j−1}) / cum_{−1} (one uniform draw); entries with
    zero weight are never drawn: :func:`sample_index_kernel`'s body, run by Python (a compiled
    call would spend ~6 µs unboxing the Generator, more than the draw)."""
    return int(_sample_index_py(np.asarray(cum, dtype=float), rng))


@njit(cache=True, error_model="numpy")
def cumulative_kernel(weights: np.ndarray, out: np.ndarray) -> None:
    """The cumulative weights of one row into ``out`` (``np.cumsum``'s order; no
    allocation)."""
    acc = 0.0
    for j in range(weights.shape[0]):
        acc = weights[j] if j == 0 else acc + weights[j]
        out[j] = acc


@njit(cache=True, error_model="numpy")
def sample_index_kernel(cum: np.ndarray, rng: np.random.Generator) -> int:
    """The weighted draw on a row of cumulative weights: one uniform draw ``u`` × the total,
    the first entry whose cumulative weight exceeds ``u`` (bisection to the right), the last
    positive-weight entry if rounding put ``u`` at the total."""
    n = cum.shape[0]
    u = rng.random() * cum[n - 1]
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if u < cum[mid]:
            hi = mid
        else:
            lo = mid + 1
    j = lo
    if j > n - 1:
        j = n - 1
        while j > 0 and cum[j - 1] == cum[j]:
            j -= 1
    return j


_sample_index_py = sample_index_kernel.py_func
