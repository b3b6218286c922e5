"""The discrete-event core (the reference engine): a plain ``heapq`` loop over the engine's few
concepts — the clock (:class:`~._records.EventQueue`), the servers (:mod:`._servers`), the probes
(:mod:`._probes`), the router's state (:class:`RouterDriver`) and the records
(:class:`~._records.Records`).

Model (THEORY §1, §3, §11.1):

* Requests arrive at their source cell's root router (pre-generated, :mod:`._arrivals`); the
  router picks a cell j (residency checked on every request) and the request reaches j after the
  one-way delay τ_ij; its response returns after another τ_ij. End-to-end latency = 2τ_ij +
  queueing + serving.
* A leaf router sends it to one of the cell's online servers (:mod:`._servers`); a server with
  ``queue_limit`` requests waiting rejects the next one: an overflow error.
* Leaves keep an error EMA that probes carry (error aversion, DLB §3.4); with ``estimation`` the
  cells refit ℓ(N) on a sliding window (DLB §3.3), otherwise routers see the declared models
  rescaled to the online servers; with ``affinity`` a request served in the cell of its
  session's previous request has its prefill cut by ``prefill_saving`` (DLB §3.5).
* Probes (:mod:`._probes`): every ``probe_period_s`` the router observes a round of stale views
  (``observe_round`` if it has one, else ``observe`` per source).
* Outages take servers offline for new requests; they finish the work they hold [R].
"""

from __future__ import annotations

import time as _time
from typing import Any

import numpy as np

from .._checks import check_real, check_seed
from ..errors import ParameterError, SolverError, SolveStatus, TopologyError
from ..routers import CellView
from ..workloads import Workload
from ._arrivals import generate_arrivals, seed_streams
from ._probes import Probes, SeenModels
from ._records import Event, EventQueue, Records
from ._result import SimResult, build_result
from ._scenario import Scenario
from ._servers import Cluster, Uniforms

__all__ = ["simulate", "RouterDriver", "DEFAULT_SERIES_POINTS"]

#: number of points of the sampled workload series when no period is given.
DEFAULT_SERIES_POINTS = 400


def simulate(scenario: Scenario, router: Any, *, duration_s: float, seed: int,
             arrivals: Workload | None = None, policy: str | None = None,
             record_period_s: float | None = None) -> SimResult:
    """Simulate ``router`` on ``scenario`` for ``duration_s`` seconds (the reference engine).

    Args:
        scenario: cells, servers, delays, request sizes, bursts and outages.
        router: a router (the contract of :mod:`lbtheory.routers`: ``init`` / ``observe`` /
            ``route``), e.g. ``lbtheory.registry.make_router("flow-grad")``.
        duration_s: horizon (s); arrivals in [0, duration).
        seed: seeds arrivals (shared by every policy), the router's and the leaf's draws.
        arrivals: pre-generated requests with a ``source`` column (default:
            ``generate_arrivals(scenario, duration, seed)``).
        policy: name recorded in the result (default ``router.name``).
        record_period_s: sampling period of the workload series (default duration/400).

    Returns:
        A :class:`SimResult`; same inputs ⇒ bit-identical result (except ``wall_seconds``).

    Raises:
        ParameterError: a bad duration, seed or record period, or arrivals without sources.
        DataFormatError: a burst or outage outside the horizon. TopologyError: a router that
        breaks residency. SolverError: a broken conservation invariant (a simulator bug).
    """
    T = check_real(duration_s, "duration_s", unit="s", low=0.0, low_open=True)
    seed = check_seed(seed)
    scenario.check_horizon(T)
    scenario.check_run(T)
    wall0 = _time.perf_counter()
    if arrivals is None:
        arrivals = generate_arrivals(scenario, T, seed)
    elif arrivals.source is None and len(arrivals):
        raise ParameterError("arrivals: the cell simulator needs each request's source cell "
                             "(Workload.source); see lbtheory.sim.arrivals_from_trace")
    period = record_period_s or T / DEFAULT_SERIES_POINTS
    check_real(period, "record_period_s", unit="s", low=0.0, low_open=True)
    eng = _Engine(scenario, router, T, seed_streams(seed), arrivals, period)
    eng.run()
    return build_result(eng, policy or getattr(router, "name", type(router).__name__), seed,
                        _time.perf_counter() - wall0)


class RouterDriver:
    """The router and its state in one run: initial state from the run's router stream, probe
    rounds observed, one decision per arriving request (residency enforced)."""

    def __init__(self, router: Any, seq: np.random.SeedSequence, mask: list) -> None:
        self.router = router
        self.rng = np.random.default_rng(seq)
        self.state = router.init(int(seq.generate_state(1)[0]))
        self.mask = mask
        self.observe_round = getattr(router, "observe_round", None)
        self.route_session = getattr(router, "route_session", None)

    def observe(self, views: list[CellView | None], sources: list[int]) -> None:
        """A probe round reached every source."""
        if not sources:
            return
        if self.observe_round is not None:
            self.state = self.observe_round(self.state, views)
        else:
            for i in sources:
                self.state = self.router.observe(self.state, views[i])

    def route(self, view: CellView, session: int | None) -> int:
        """The cell the request of ``view.source`` goes to."""
        if session is not None and self.route_session is not None:
            j, self.state = self.route_session(self.state, view, self.rng, session)
        else:
            j, self.state = self.router.route(self.state, view, self.rng)
        i = view.source
        if j is None or not self.mask[i][j]:
            raise TopologyError(f"router {getattr(self.router, 'name', '?')} sent a request "
                                f"from cell {i} to {'no cell' if j is None else f'cell {j}'}, "
                                f"which is not an admissible arc (residency)")
        return j


class _Engine:
    """One run: the concepts wired together, and the event loop."""

    def __init__(self, sc: Scenario, router: Any, T: float, streams: list, arr: Workload,
                 record_period: float) -> None:
        net = sc.network
        self.sc, self.T, self.arr = sc, float(T), arr
        self.n = n = net.n
        R = len(arr)
        self.events = EventQueue()
        self.rec = Records(R, n)
        self.driver = RouterDriver(router, streams[1], net.adjacency.tolist())
        work = arr.work.tolist() if arr.work is not None else [1.0] * R
        self.cluster = Cluster(sc, self.T, self.rec, self.events, arr.prompt_tokens.tolist(),
                               arr.output_tokens.tolist(), work, Uniforms(streams[2]))
        self.models = SeenModels(sc, self.cluster, streams[3])
        if sc.estimation is not None:
            self.cluster.on_finish = lambda r, j, t: self.models.sample(self.rec, r, j, t)
        src = arr.source if arr.source is not None else np.zeros(0, dtype=np.int64)
        lam = net.arrival_rates
        self.sources = sorted({int(s) for s in np.unique(src)} | {i for i in range(n)
                                                                  if lam[i] > 0})
        self.probes = Probes(sc, self.cluster, self.models, self.sources)
        self.views: list[CellView | None] = [None] * n
        self.session = arr.session.tolist() if arr.session is not None else None
        self.last_cell: dict[int, int] = {}
        self.delay_l = net.delays.tolist()
        self.record_period = float(record_period)
        self.series_t: list[float] = []
        self.series_N: list[list[int]] = []

    def _probe_round(self, t: float) -> None:
        self.views = self.probes.views(t)
        self.driver.observe(self.views, self.sources)

    def _route(self, r: int, i: int, t: float) -> None:
        """Request r arrives at its source i's root router at t: route it onto the wire."""
        rec = self.rec
        sess = None if self.session is None else self.session[r]
        j = self.driver.route(self.views[i], sess)
        if sess is not None:
            if self.last_cell.get(sess) == j:
                rec.cached[r] = True
                rec.cache_hits += 1
            self.last_cell[sess] = j
        rec.dest[r] = j
        rec.routed[i][j] += 1
        rec.on_wire += 1
        self.events.push(t + self.delay_l[i][j], Event.ARRIVE, r, j)

    def _arrive(self, r: int, j: int, t: float) -> None:
        rec = self.rec
        rec.on_wire -= 1
        rec.t_cell[r] = t
        self.cluster.arrive[j](r, j, t)

    def run(self) -> None:
        """The event loop: arrivals and events in time order until the horizon."""
        T, sc, ev, cl = self.T, self.sc, self.events, self.cluster
        delta = sc.probe_period_s
        self._probe_round(0.0)
        ev.push(delta, Event.PROBE, 0, 0)
        for o in sc.outages:
            ev.push(o.start_s, Event.OUTAGE, o.cell, o.replicas)
            ev.push(o.end_s, Event.OUTAGE, o.cell, cl.k[o.cell])
        ev.push(0.0, Event.RECORD, 0, 0)
        est = sc.estimation
        if est is not None:
            ev.push(est.period_s, Event.REFIT, 0, 0)
        at = self.arr.arrival_s.tolist()
        asrc = self.arr.source.tolist() if self.arr.source is not None else []
        R, nxt = len(at), 0
        heap = ev.heap
        handlers = cl.handlers
        rec = self.rec
        ticks = 0
        inf = float("inf")
        while True:
            t_arr = at[nxt] if nxt < R else inf
            t_ev = heap[0][0] if heap else inf
            if t_arr <= t_ev:
                if t_arr >= T:
                    break
                rec.events += 1
                self._route(nxt, asrc[nxt], t_arr)
                nxt += 1
                continue
            if t_ev >= T:
                break
            t, _, kind, a, b = ev.pop()
            rec.events += 1
            if kind == Event.ARRIVE:
                self._arrive(a, b, t)
            elif kind == Event.PROBE:
                self._probe_round(t)
                ev.push(t + delta, Event.PROBE, 0, 0)
                ticks += 1
                if ticks % 16 == 0:
                    self.probes.prune(t)
            elif kind == Event.REFIT:
                self.models.refit()
                ev.push(t + est.period_s, Event.REFIT, 0, 0)
            elif kind == Event.OUTAGE:
                cl.online[a] = b
                self.models.outage(a)
            elif kind == Event.RECORD:
                self.series_t.append(t)
                self.series_N.append(list(cl.N))
                ev.push(t + self.record_period, Event.RECORD, 0, 0)
            else:
                handlers[kind](a, b, t)
        rec.requests = nxt
        in_flight = rec.requests - rec.completed - rec.errors
        if in_flight != rec.on_wire + sum(cl.N):
            raise SolverError(f"simulator: conservation broken: {rec.requests} arrivals, "
                              f"{rec.completed} completed, {rec.errors} errors, "
                              f"{rec.on_wire} on the wire, {sum(cl.N)} at cells",
                              solver="sim", status=SolveStatus.FAILED, detail="conservation")
