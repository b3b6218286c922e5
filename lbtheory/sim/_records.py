"""The engine's records: the event queue and clock, and what happened to each request.

Two of the engine's concepts (DESIGN.md; the compiled core of issue 21 keeps the same split):

* :class:`EventQueue` — the clock: a ``heapq`` of ``(time s, sequence, kind, a, b)`` events, ties
  in time served in the order they were pushed;
* :class:`Records` — per request (plain Python lists: numpy scalar indexing costs ~10× a list's
  in the event loop) and the run's counters; :meth:`Records.result` freezes them into a
  :class:`~lbtheory.sim.SimResult`.
"""

from __future__ import annotations

import enum
import heapq
import math

import numpy as np

from ..errors import SolverError, SolveStatus

__all__ = ["Event", "EventQueue", "Records", "PENDING", "DONE", "ERROR", "check_conservation"]

#: request status codes in :attr:`Records.status`.
PENDING, DONE, ERROR = 0, 1, 2


class Event(enum.IntEnum):
    """Event kinds and their two integer arguments ``(a, b)``."""

    ARRIVE = 0        # a request reaches its cell: (request, cell)
    MMC_DONE = 1      # an mmc service ends: (request, server)
    PREFILL_DONE = 2  # an appendix_b prefill ends: (request, server)
    DECODE_DONE = 3   # an appendix_b decode ends: (request, server)
    PROBE = 4         # a probe round: (0, 0)
    OUTAGE = 5        # online servers of a cell change: (cell, servers online)
    RECORD = 6        # sample the workloads for the series: (0, 0)
    REFIT = 7         # cells refit their latency models: (0, 0)
    RATE_DONE = 8     # a completion of a rate cell: (cell, version)
    NOISE = 9         # the routers' model noise is redrawn: (0, 0)


class EventQueue:
    """The clock: events ordered by time, then by push order."""

    __slots__ = ("heap", "seq")

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0

    def push(self, t: float, kind: int, a: int, b: int) -> None:
        """Schedule event ``kind`` with arguments ``(a, b)`` at time ``t`` (s)."""
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, a, b))

    def next_time(self) -> float:
        """Time of the next event (s), ``inf`` if none."""
        return self.heap[0][0] if self.heap else math.inf

    def pop(self) -> tuple[float, int, int, int, int]:
        """The next event ``(t, seq, kind, a, b)``."""
        return heapq.heappop(self.heap)


class Records:
    """What happened to each request, and the run's counters.

    Attributes (lists over requests): ``dest`` cell, ``t_cell`` arrival at the cell (s),
    ``t_done`` completion (s), ``wait`` queueing (s), ``t_mark`` end of prefill (s), ``status``
    (:data:`PENDING` / :data:`DONE` / :data:`ERROR`), ``n_arr`` requests at the cell on arrival,
    ``cached`` prefix-cache hit. Counters: ``completed``, ``errors``, ``on_wire``, ``events``,
    ``cache_hits``; per cell ``cell_errors``, ``busy_pre`` / ``busy_slot`` (busy seconds within
    the horizon), ``routed[i][j]``.
    """

    def __init__(self, n_requests: int, n_cells: int) -> None:
        R, n = n_requests, n_cells
        self.dest = [-1] * R
        self.t_cell = [math.nan] * R
        self.t_done = [math.nan] * R
        self.wait = [0.0] * R
        self.t_mark = [0.0] * R
        self.status = [PENDING] * R
        self.n_arr = [0.0] * R
        self.cached = [False] * R
        self.routed = [[0] * n for _ in range(n)]
        self.cell_errors = [0] * n
        self.busy_pre = [0.0] * n
        self.busy_slot = [0.0] * n
        self.completed = self.errors = self.on_wire = self.events = self.cache_hits = 0
        self.requests = 0

    def arrays(self) -> dict[str, np.ndarray]:
        """The per-request records of the requests that arrived, as arrays."""
        R = self.requests
        return {"status": np.array(self.status[:R], dtype=np.int8),
                "dest": np.array(self.dest[:R], dtype=np.int64),
                "t_done": np.array(self.t_done[:R], dtype=float),
                "t_cell": np.array(self.t_cell[:R], dtype=float),
                "wait": np.array(self.wait[:R], dtype=float),
                "n_arr": np.array(self.n_arr[:R], dtype=float)}


def check_conservation(requests: int, completed: int, errors: int, on_wire: int,
                       at_cells: int) -> None:
    """Every request that arrived completed, was rejected, is on the wire or at a cell; raises
    SolverError (a simulator bug) otherwise."""
    if requests - completed - errors != on_wire + at_cells:
        raise SolverError(f"simulator: conservation broken: {requests} arrivals, "
                          f"{completed} completed, {errors} errors, "
                          f"{on_wire} on the wire, {at_cells} at cells",
                          solver="sim", status=SolveStatus.FAILED, detail="conservation")
