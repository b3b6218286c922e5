"""One way to drive a router (the contract of :mod:`._contract`) in every simulator.

A :class:`Driver` owns a router, its state and the ``numpy.random.Generator`` it draws from. The
three simulators' reference loops (the DLB cells, the LLM instances, the decode replicas) call
it instead of writing their own:

* :meth:`Driver.observe` — one view reached the router; :meth:`Driver.observe_round` — a DLB
  probe round (the router's vectorised :class:`~._contract.RoundObserver` form when it has one,
  else ``observe`` per source);
* :meth:`Driver.route` — one raw decision (a request of a session goes to the router's
  :class:`~._contract.SessionRouter` form when it has one), for a simulator that routes one
  request per call (DLB);
* :meth:`Driver.ask` — one decision as ``(positions, targets)`` int64 arrays, whatever its form
  (an ``int`` places the queue's head, an :class:`~._contract.Assignment` its positions;
  ``None`` or an empty assignment: nothing more now), positions checked distinct and inside the
  queue — for a simulator that asks again until the router waits (instances, replicas).

Seeding is one rule: ``Driver(router, seed)`` with an int seeds ``rng`` with it and calls
``router.init(seed)``; with a ``numpy.random.SeedSequence`` (a simulator's router stream) ``rng``
comes from the sequence and ``init`` gets the sequence's first 32-bit word.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ParameterError
from ._contract import Assignment, Decision, RoundObserver, SessionRouter

__all__ = ["Driver", "observe_all", "optional_methods"]


#: router type -> (is a RoundObserver, is a SessionRouter): ``isinstance`` on a Protocol costs
#: tens of microseconds, too much once per probe round.
_OPTIONAL: dict[type, tuple[bool, bool]] = {}


def optional_methods(router: Any) -> tuple[bool, bool]:
    """Whether ``router`` is a :class:`~._contract.RoundObserver` and a
    :class:`~._contract.SessionRouter` (cached per type)."""
    kind = type(router)
    has = _OPTIONAL.get(kind)
    if has is None:
        has = _OPTIONAL[kind] = (isinstance(router, RoundObserver),
                                 isinstance(router, SessionRouter))
    return has


def observe_all(router: Any, state: Any, views: Sequence[Any]) -> Any:
    """``router``'s state after a probe round ``views`` (``views[i]`` or None): its
    ``observe_round`` when it is a :class:`~._contract.RoundObserver`, else ``observe`` on every
    non-None view in index order."""
    if optional_methods(router)[0]:
        return router.observe_round(state, views)
    for v in views:
        if v is not None:
            state = router.observe(state, v)
    return state


def check_router_object(router: Any) -> None:
    """Refuse what is not a router (a policy's name, ``None``, a number) with a
    :class:`~lbtheory.errors.ParameterError` naming it, before any attribute is used."""
    if isinstance(router, (str, bytes, int, float, type(None))) or not callable(
            getattr(router, "init", None)):
        from ..errors import ParameterError

        hint = f": build it with make_router({router!r}, ...)" if isinstance(router, str) else ""
        raise ParameterError(f"router must be a router object (with init/route, the contract "
                             f"of lbtheory.routers), got {router!r}{hint}")


class Driver:
    """A router, its state and its random stream during one run (module docstring).

    Args:
        router: a router of the contract.
        seed: an int (``rng`` seeded with it, ``router.init(seed)``) or a
            ``numpy.random.SeedSequence`` (module docstring).
        target: what a decision's targets are, for error messages ("instance", "replica", ...).
        queue: what a decision's positions index, for error messages ("queue", "pool").
    """

    def __init__(self, router: Any, seed: int | np.random.SeedSequence = 0, *,
                 target: str = "target", queue: str = "queue") -> None:
        check_router_object(router)
        if isinstance(seed, np.random.SeedSequence):
            init_seed = int(seed.generate_state(1)[0])
        else:
            init_seed = seed
        self._setup(router, router.init(init_seed), np.random.default_rng(seed), target, queue)

    @classmethod
    def resume(cls, router: Any, state: Any, rng: np.random.Generator, *,
               target: str = "target", queue: str = "queue") -> Driver:
        """A driver that continues from an existing ``state`` and ``rng``."""
        d = cls.__new__(cls)
        d._setup(router, state, rng, target, queue)
        return d

    def _setup(self, router: Any, state: Any, rng: np.random.Generator, target: str,
               queue: str) -> None:
        self.router, self.state, self.rng = router, state, rng
        self.name: str = getattr(router, "name", "router")
        self.target, self.queue = target, queue
        self._session = router.route_session if optional_methods(router)[1] else None

    def observe(self, view: Any) -> None:
        """New information (one view) reached the router."""
        self.state = self.router.observe(self.state, view)

    def observe_round(self, views: Sequence[Any]) -> None:
        """A probe round reached every source with a view (:func:`observe_all`)."""
        self.state = observe_all(self.router, self.state, views)

    def route(self, view: Any, session: int | None = None) -> Decision:
        """The router's decision on ``view`` (for a request of ``session``, if not None)."""
        if session is not None and self._session is not None:
            decision, self.state = self._session(self.state, view, self.rng, session)
        else:
            decision, self.state = self.router.route(self.state, view, self.rng)
        return decision

    def ask(self, view: Any, queued: int, head: int = 0
            ) -> tuple[np.ndarray, np.ndarray] | None:
        """The router's next decision as ``(positions, targets)`` (int64 arrays, positions
        distinct in ``[0, queued)``; an ``int`` decision places position ``head``), or None when
        it routes nothing more now.

        Raises:
            ParameterError: positions and targets of different lengths, or positions repeated or
                outside the queue (naming the router).
        """
        decision = self.route(view)
        if decision is None:
            return None
        if isinstance(decision, Assignment):
            pos = np.asarray(decision.positions, dtype=np.int64)
            targets = np.asarray(decision.targets, dtype=np.int64)
        else:
            pos = np.array([head], dtype=np.int64)
            targets = np.array([decision], dtype=np.int64)
        if pos.shape != targets.shape or pos.ndim != 1:
            raise ParameterError(f"router {self.name} returned {pos.size} positions and "
                                 f"{targets.size} {self.target}s")
        if pos.size == 0:
            return None
        pl = pos.tolist()
        if len(set(pl)) != len(pl) or min(pl) < 0 or max(pl) >= queued:
            raise ParameterError(f"router {self.name} returned invalid or repeated {self.queue} "
                                 f"positions {pl} of {queued}")
        return pos, targets
