"""The discrete-event core of the reference engine: a plain ``heapq`` loop over the engine's few
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
  (``observe_round`` if it is a :class:`~lbtheory.routers.RoundObserver`, else ``observe`` per
  source: :meth:`~lbtheory.routers._drive.Driver.observe_round`).
* Outages take servers offline for new requests; they finish the work they hold [R].
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import TopologyError
from ..routers import CellView
from ..routers._drive import Driver
from ..workloads import Workload
from ._probes import Probes, SeenModels
from ._records import Event, EventQueue, Records, check_conservation
from ._result import RunRecords
from ._scenario import Scenario, outage_events
from ._servers import Cluster, Uniforms

__all__ = ["run_reference", "RouterDriver", "residency_error", "routing_rows"]


def run_reference(scenario: Scenario, router: Any, T: float, streams: list, arrivals: Workload,
                  record_period: float, record_routing_every: int = 0) -> RunRecords:
    """One run of the reference engine (arguments checked by :func:`lbtheory.sim.simulate`)."""
    eng = _Engine(scenario, router, T, streams, arrivals, record_period, record_routing_every)
    eng.run()
    rec, cl, d = eng.rec, eng.cluster, eng.driver
    a = rec.arrays()
    return RunRecords(
        requests=rec.requests, completed=rec.completed, errors=rec.errors, events=rec.events,
        cache_hits=rec.cache_hits, status=a["status"], dest=a["dest"], t_done=a["t_done"],
        t_cell=a["t_cell"], wait=a["wait"], n_arr=a["n_arr"],
        routed=np.array(rec.routed, dtype=np.int64),
        cell_errors=np.array(rec.cell_errors, dtype=np.int64), utilisation=cl.utilisation(),
        series_t=np.array(eng.series_t), series_N=np.array(eng.series_N, dtype=float),
        models=eng.models.final(scenario), routing_t=np.array(d.routing_t),
        routing_x=np.array(d.routing_x, dtype=float).reshape(len(d.routing_t),
                                                             len(eng.sources), eng.n),
        routing_sources=tuple(eng.sources))


def residency_error(router: Any, i: int, j: int | None) -> TopologyError:
    """The error of a router that sent a request from cell i to j (None: nowhere) off the
    residency mask (both engines)."""
    return TopologyError(f"router {getattr(router, 'name', '?')} sent a request from cell {i} "
                         f"to {'no cell' if j is None else f'cell {j}'}, which is not an "
                         f"admissible arc (residency)")


def routing_rows(state: Any) -> Any:
    """The routing rows ``x`` of a router's state (a flow router's, possibly wrapped by error
    aversion or affinity: ``.inner``), or None."""
    while state is not None and not hasattr(state, "x"):
        state = getattr(state, "inner", None)
    return None if state is None else state.x


class RouterDriver(Driver):
    """The router and its state in one run (a :class:`~lbtheory.routers._drive.Driver` seeded
    by the run's router stream): probe rounds observed, one decision per arriving request
    (residency enforced), routing rows recorded."""

    def __init__(self, router: Any, seq: np.random.SeedSequence, mask: list,
                 record_every: int = 0) -> None:
        super().__init__(router, seq, target="cell")
        self.mask = mask
        self.record_every = int(record_every)
        self.rounds = 0
        self.routing_t: list[float] = []
        self.routing_x: list[np.ndarray] = []

    def probe_round(self, views: list[CellView | None], sources: list[int]) -> None:
        """A probe round reached every source (routing rows recorded every
        ``record_every``-th round)."""
        if not sources:
            return
        self.observe_round(views)
        self.rounds += 1
        if self.record_every and self.rounds % self.record_every == 0:
            x = routing_rows(self.state)
            if x is not None and all(x[i] is not None for i in sources):
                self.routing_t.append(float(views[sources[0]].time))
                self.routing_x.append(np.array([x[i] for i in sources], dtype=float))

    def route_request(self, view: CellView, session: int | None) -> int:
        """The cell the request of ``view.source`` goes to."""
        j = self.route(view, session)
        i = view.source
        if j is None or not self.mask[i][j]:
            raise residency_error(self.router, i, j)
        return j


class _Engine:
    """One run: the concepts wired together, and the event loop."""

    def __init__(self, sc: Scenario, router: Any, T: float, streams: list, arr: Workload,
                 record_period: float, record_every: int = 0) -> None:
        net = sc.network
        self.sc, self.T, self.arr = sc, float(T), arr
        self.n = n = net.n
        R = len(arr)
        self.events = EventQueue()
        self.rec = Records(R, n)
        self.driver = RouterDriver(router, streams[1], net.adjacency.tolist(), record_every)
        work = arr.work.tolist() if arr.work is not None else [1.0] * R
        self.cluster = Cluster(sc, self.T, self.rec, self.events, arr.prompt_tokens.tolist(),
                               arr.output_tokens.tolist(), work, Uniforms(streams[2]))
        self.models = SeenModels(sc, self.cluster, streams[3], streams[6])
        if sc.estimation is not None:
            self.cluster.on_finish = lambda r, j, t: self.models.sample(self.rec, r, j, t)
        src = arr.source if arr.source is not None else np.zeros(0, dtype=np.int64)
        lam = net.arrival_rates
        self.sources = sorted({int(s) for s in np.unique(src)} | {i for i in range(n)
                                                                  if lam[i] > 0})
        self.probes = Probes(sc, self.cluster, self.models, self.sources, streams[5])
        self.views: list[CellView | None] = [None] * n
        self.session = arr.session.tolist() if arr.session is not None else None
        self.last_cell: dict[int, int] = {}
        self.delay_l = net.delays.tolist()
        self.record_period = float(record_period)
        self.series_t: list[float] = []
        self.series_N: list[list[int]] = []

    def _probe_round(self, t: float) -> None:
        self.views = self.probes.views(t)
        self.driver.probe_round(self.views, self.sources)

    def _route(self, r: int, i: int, t: float) -> None:
        """Request r arrives at its source i's root router at t: route it onto the wire."""
        rec = self.rec
        sess = None if self.session is None else self.session[r]
        j = self.driver.route_request(self.views[i], sess)
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
        for t, cell, online in outage_events(sc.outages, cl.k):
            ev.push(t, Event.OUTAGE, cell, online)
        ev.push(0.0, Event.RECORD, 0, 0)
        est = sc.estimation
        if est is not None:
            ev.push(est.period_s, Event.REFIT, 0, 0)
        noise_period = sc.model_noise.period_s if sc.model_noise is not None else None
        if noise_period is not None:
            ev.push(noise_period, Event.NOISE, 0, 0)
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
            elif kind == Event.NOISE:
                self.models.redraw()
                ev.push(t + noise_period, Event.NOISE, 0, 0)
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
        check_conservation(rec.requests, rec.completed, rec.errors, rec.on_wire, sum(cl.N))
