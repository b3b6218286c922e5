"""The compiled engine's driver (issue 21): builds the arrays of :mod:`._kernels_state` from a
scenario, a router plan and the arrivals, runs :func:`~._kernels_loop.run_events` and answers
its pauses in Python — cost tables from :func:`lbtheory.costs.cell_cost` (one definition of
every formula; the tables are the reference engine's own :class:`~lbtheory.routers.CostTables`),
MNLB's LP (:meth:`~lbtheory.routers.MNLBRouter.solve`), the estimation refit
(:class:`~._probes.SeenModels`, shared with the reference), larger arrays — then freezes the
records into the :class:`~._result.RunRecords` both engines hand to the result.

Random streams are the reference engine's (:func:`~._arrivals.seed_streams`): the router draws
from the same ``numpy.random.Generator`` (numba advances the Python object's PCG64 state), the
leaf stream is drawn by numpy in blocks (uniforms, and numpy's log1p(−u) for the rate servers),
so the same (scenario, router, seed, arrivals) give bit-identical per-request records.
"""

from __future__ import annotations

import types
from collections import Counter, deque
from typing import Any

import numpy as np

from .._checks import check_memory
from ..costs import CostKind, cell_cost, static_cost
from ..routers import CellView, MNLBState, jsq_pick, sample_index_kernel
from ..routers._drive import Driver
from ..simplex import masked_sum_kernel
from ..workloads import Workload
from . import _kernels_state as ks
from ._engine import residency_error
from ._kernel_cache import drop_stale_kernel_caches
from ._kernel_plan import KernelPlan
from ._kernels_loop import run_events, run_events_user
from ._kernels_routers import (
    K_FLOW,
    K_KERNEL,
    K_NEEDS_W,
    K_RECORD_EVERY,
    K_USES_F,
    K_USES_F_LAT,
    route_request,
)
from ._kernels_servers import arrive_at_cell
from ._probes import SeenModels
from ._records import Event, check_conservation
from ._result import RunRecords
from ._scenario import Scenario, ServerKind, outage_events
from ._servers import cell_utilisation
from ._staleness import stale_scalars, stale_tables

__all__ = ["run_compiled", "kernels_cached"]

#: first capacity of the series and routing records (rows; doubled when full).
_FIRST_ROWS = 1024
#: most draws of the leaf stream fetched at a time (uniforms + log1p, 16 bytes each).
_LEAF_BLOCK = 1 << 16
_KINDS = {ServerKind.APPENDIX_B: 0, ServerKind.MMC: 1, ServerKind.RATE: 2}

# every module whose kernels the loop compiles in (numba keys caches on one file each)
_KERNELS = (masked_sum_kernel, sample_index_kernel, jsq_pick, ks.heap_push, arrive_at_cell,
            route_request, run_events)
drop_stale_kernel_caches(_KERNELS)


def kernels_cached() -> bool:
    """False when the compiled engine's kernels will compile on first use (15–40 s, once after
    an install or an edit of their sources; :func:`lbtheory._jit.kernels_cached`)."""
    from .._jit import kernels_cached as cached

    return cached(*_KERNELS)


def run_compiled(sc: Scenario, router: Any, plan: KernelPlan, T: float, streams: list,
                 arr: Workload, record_period: float, record_every: int = 0) -> RunRecords:
    """One run of the compiled engine (arguments checked by :func:`lbtheory.sim.simulate`)."""
    run = _Run(sc, router, plan, T, streams, arr, record_period, record_every)
    run.loop()
    return run.records()


def _grow(a: np.ndarray, size: int, axis: int = 0, fill: float = 0) -> np.ndarray:
    """``a`` with ``axis`` extended to ``size`` (the old entries first)."""
    shape = list(a.shape)
    shape[axis] = size
    out = np.full(shape, fill, dtype=a.dtype)
    out[tuple(slice(0, s) for s in a.shape)] = a
    return out


class _Run:
    """One run: its inputs, the records of arrays the loop runs on (:mod:`._kernels_state`:
    ``rq``, ``cl``, ``clock``, ``probes``, ``routing``, ``rec``, ``ctl``), the pause handlers and
    the Python-side pieces (models, MNLB's program)."""

    def __init__(self, sc: Scenario, router: Any, plan: KernelPlan, T: float, streams: list,
                 arr: Workload, record_period: float, record_every: int) -> None:
        net = sc.network
        self.sc, self.router, self.plan, self.T = sc, router, plan, float(T)
        self.n = n = net.n
        R = int(np.searchsorted(arr.arrival_s, T, side="left"))
        driver = Driver(router, streams[1])  # the reference's seeding (RouterDriver)
        self.rng = driver.rng
        self.leaf_rng, self._leaf_block = np.random.default_rng(streams[2]), 512
        self.k = [c.replicas for c in net.cells]
        self.cluster = types.SimpleNamespace(k=list(self.k), online=list(self.k))
        self.models = SeenModels(sc, self.cluster, streams[3], streams[6])
        self.program = None  # MNLB's LP, built at the first solve
        self.pauses: Counter[int] = Counter()  # returns to Python, by P_* code
        src = arr.source[:R] if arr.source is not None else np.zeros(R, dtype=np.int64)
        lam = net.arrival_rates
        self.sources = sorted({int(s) for s in np.unique(src)} | {i for i in range(n)
                                                                  if lam[i] > 0})
        self.rq = _requests(arr, R, src)
        self.cl = self._cluster()
        self.clock = ks.Clock(np.zeros(256), np.zeros((256, 4), dtype=np.int64))
        W = np.zeros((n, n))
        nn_i = np.zeros((2, n, n), dtype=np.int64)
        nn_i[ks.CURSOR] = ks.NONE
        cols = 64 if plan.ip[K_NEEDS_W] else 1  # a router that reads no probe: no history
        self.probes = ks.Probes(
            tau=np.ascontiguousarray(net.delays, dtype=float),
            mask=np.ascontiguousarray(net.adjacency, dtype=bool),
            sources=np.array(self.sources, dtype=np.int64), W=W, nn_i=nn_i,
            hist_t=np.zeros((n, cols)), hist_n=np.zeros((n, cols), dtype=np.int64),
            stale=stale_tables(sc, streams[5]))
        # routing rows are a flow router's (the reference records none for the others)
        plan.ip[K_RECORD_EVERY] = record_every if plan.ip[K_KERNEL] == K_FLOW else 0
        self.ctl = ks.Control(plan.ip, plan.fp, np.zeros(ks.N_I, dtype=np.int64),
                              np.zeros(ks.N_F))
        self._routing()
        est = sc.estimation
        m = min(int(T / record_period) + 3, _FIRST_ROWS)  # then doubled as needed
        every = plan.ip[K_RECORD_EVERY]
        cap_r = min(int(T / sc.probe_period_s / every) + 3, _FIRST_ROWS) if every else 0
        self.rec = ks.Recorded(
            series_t=np.zeros(m), series_N=np.zeros((m, n), dtype=np.int64),
            est=np.zeros((2, n, est.window if est else 0)), route_t=np.zeros(cap_r),
            route_x=np.zeros((cap_r, len(self.sources), n)))
        cf = self.ctl.cf
        cf[ks.F_T], cf[ks.F_DELTA] = self.T, sc.probe_period_s
        cf[ks.F_RECORD] = float(record_period)
        cf[ks.F_REFIT] = est.period_s if est else 0.0
        mn = sc.model_noise
        cf[ks.F_NOISE] = mn.period_s if mn is not None and mn.period_s is not None else 0.0
        cf[ks.F_NEXT_SOLVE], cf[ks.F_WINDOW], cf[ks.F_NEXT_AVERT] = -np.inf, 0.0, 0.0
        cf[ks.F_SHARE], cf[ks.F_LEAF], cf[ks.F_REPLICAS] = stale_scalars(sc)
        cf[ks.F_SAVING] = sc.affinity.prefill_saving if sc.affinity is not None else 0.0
        self._first_events()

    # -- building the arrays -------------------------------------------------------------
    def _cluster(self) -> ks.Cluster:
        spec, n = self.sc.servers, self.n
        ce_f, ce_i = np.zeros((10, n)), np.zeros((15, n), dtype=np.int64)
        ce_i[ks.K] = ce_i[ks.ONLINE] = self.k
        ce_i[ks.BASE] = np.concatenate([[0], np.cumsum(self.k)[:-1]])
        ce_i[ks.KIND] = [_KINDS[s.kind] for s in spec]
        ce_i[ks.SLOTS] = [s.slots if s.kind is ServerKind.MMC else s.decode_slots for s in spec]
        ce_i[ks.LIMIT] = [ks.NONE if s.queue_limit is None else s.queue_limit for s in spec]
        ce_i[ks.RQ_HEAD] = ce_i[ks.RQ_TAIL] = ks.NONE
        ce_i[ks.HIST_LEN] = 1  # every history starts with (0 s, N = 0)
        ce_f[ks.MEAN_S] = [s.mean_service_s for s in spec]
        ce_f[ks.TP] = [s.prefill_s_per_token for s in spec]
        ce_f[ks.TD] = [s.decode_s_per_token for s in spec]
        ce_f[ks.PROBED_K] = self.k
        S = int(sum(self.k))
        sv_i = np.zeros((9, S), dtype=np.int64)
        sv_i[ks.CELL] = np.repeat(np.arange(n), self.k)
        sv_i[ks.Q_HEAD] = sv_i[ks.Q_TAIL] = sv_i[ks.D_HEAD] = sv_i[ks.D_TAIL] = ks.NONE
        return ks.Cluster(ce_f=ce_f, ce_i=ce_i, sv_f=np.zeros((1, S)), sv_i=sv_i,
                          rate=np.zeros((1, n)), leaf=np.zeros((2, 0)),
                          leaf_rr=self.sc.leaf_policy == "rr")

    def _routing(self) -> None:
        """The routers' arrays (``self.routing``), with the first cost and rate tables."""
        plan, net, n = self.plan, self.sc.network, self.n
        mask = net.adjacency
        cum, X = np.zeros((n, n)), np.zeros((n, n))
        start = CellView(time=0.0, workload=np.zeros(n),
                         replicas=np.asarray(self.k, dtype=float), delays=net.delays, mask=mask)
        for i in self.sources:  # a flow router's first rows (the reference's initial_row)
            X[i] = (plan.base.initial_row(start, i) if plan.ip[K_KERNEL] == K_FLOW
                    else mask[i] / mask[i].sum())
            cum[i] = np.cumsum(X[i])
        sess_i = self.rq.i[ks.SESS]
        sessions = int(sess_i.max()) + 1 if sess_i.shape[0] else 0
        kind = plan.cost or CostKind.LATENCY
        self.routing = ks.Routing(
            cum=cum, X=X, av=np.zeros((n, n)),
            sess=np.full((2, max(sessions, 0)), ks.NONE, dtype=np.int64),
            F=np.zeros((1, n)), G=np.ascontiguousarray(static_cost(kind, net.delays), dtype=float),
            F_lat=np.zeros((1, n)),
            G_lat=np.ascontiguousarray(static_cost(CostKind.LATENCY, net.delays), dtype=float),
            user_state=(plan.user_state.copy() if plan.user_state is not None
                        else np.zeros(0)),
            scratch_f=np.zeros((3, n)), scratch_b=np.zeros((2, n), bool),
            scratch_i=np.zeros((3, 3 * n + 8), dtype=np.int64))
        if plan.ip[K_USES_F] or plan.ip[K_USES_F_LAT]:
            self._tables(64)
        if any(s.kind is ServerKind.RATE for s in self.sc.servers):
            self.cl = self.cl._replace(rate=self._rate_table(64))

    def _first_events(self) -> None:
        """The reference engine's first pushes, in its order."""
        sc, (h_t, h_i), ci = self.sc, self.clock, self.ctl.ci
        ks.heap_push(h_t, h_i, ci, sc.probe_period_s, int(Event.PROBE), 0, 0)
        for t, cell, online in outage_events(sc.outages, self.k):
            ks.heap_push(h_t, h_i, ci, t, int(Event.OUTAGE), cell, online)
        ks.heap_push(h_t, h_i, ci, 0.0, int(Event.RECORD), 0, 0)
        if sc.estimation is not None:
            ks.heap_push(h_t, h_i, ci, sc.estimation.period_s, int(Event.REFIT), 0, 0)
        if sc.model_noise is not None and sc.model_noise.period_s is not None:
            ks.heap_push(h_t, h_i, ci, sc.model_noise.period_s, int(Event.NOISE), 0, 0)

    # -- tables ------------------------------------------------------------------------------
    def _cost_table(self, kind: CostKind, rows: int) -> np.ndarray:
        """f_j(N) at N = 0 … rows−1 (at least) for the current models (RIF: current online)."""
        n = self.n
        self._check_table(rows)
        if kind is CostKind.RIF:
            grid = np.broadcast_to(np.arange(rows, dtype=float)[:, None], (rows, n))
            online = self.cl.ce_i[ks.ONLINE].astype(float)
            return np.ascontiguousarray(cell_cost(kind, self.models.bank, grid, online))
        tab = self.models.tables.get(kind)  # the reference engine's table (same values)
        if tab.covers(np.array([rows - 1.0])):
            return np.ascontiguousarray(tab.table, dtype=float)
        grid = np.broadcast_to(np.arange(rows, dtype=float)[:, None], (rows, n))
        return np.ascontiguousarray(cell_cost(kind, self.models.bank, grid), dtype=float)

    def _check_table(self, rows: int) -> None:
        check_memory(rows * self.n * 8.0, f"a cost table for a queue of {rows - 1} requests "
                                          f"(the compiled engine; engine='reference' needs none)")

    def _tables(self, rows: int) -> None:
        """Cost tables of the current models covering N = 0 … rows−1; a table that grows at
        least doubles (as the reference's :class:`~lbtheory.routers.CostTables` do)."""
        rt, ip = self.routing, self.plan.ip
        have = max(rt.F.shape[0], rt.F_lat.shape[0])
        rows = max(rows, have, 2 * have if rows > have else 0)
        if ip[K_USES_F]:
            rt = rt._replace(F=self._cost_table(self.plan.cost, rows))
        if ip[K_USES_F_LAT]:
            rt = rt._replace(F_lat=self._cost_table(CostKind.LATENCY, rows))
        self.routing = rt

    def _rate_table(self, rows: int) -> np.ndarray:
        """μ_j(N) of the declared models at N = 0 … rows−1, evaluated as the reference engine
        does (one scalar call per N), for the rate cells (0 elsewhere)."""
        self._check_table(rows)
        tab = np.zeros((rows, self.n))
        for j, (spec, m) in enumerate(zip(self.sc.servers, self.sc.network.services)):
            if spec.kind is ServerKind.RATE:
                tab[1:, j] = [float(m.rate(float(w))) for w in range(1, rows)]
        return tab

    # -- the loop and its pauses -------------------------------------------------------------
    def loop(self) -> None:
        handlers = {ks.P_GROW_HEAP: self._grow_heap, ks.P_GROW_HISTORY: self._grow_history,
                    ks.P_GROW_SERIES: self._grow_series, ks.P_GROW_ROUTING: self._grow_routing,
                    ks.P_COST_TABLE: self._new_tables, ks.P_RATE_TABLE: self._grow_rate,
                    ks.P_MNLB_SOLVE: self._solve, ks.P_REFIT: self._refit,
                    ks.P_NOISE: self._noise,
                    ks.P_OUTAGE: self._outage, ks.P_LEAF_STREAM: self._refill_leaf,
                    ks.P_BAD_ROUTE: self._bad_route}
        p = self.plan
        loop = run_events if p.user_route is None else run_events_user
        while True:
            code = loop(self.rq, self.cl, self.clock, self.probes, self.routing, self.rec,
                        self.ctl, self.rng, p.user_observe, p.user_route)
            if code == ks.P_DONE:
                return
            self.pauses[code] += 1
            handlers[code]()

    def _grow_heap(self) -> None:
        size = 2 * self.clock.t.shape[0]
        self.clock = ks.Clock(_grow(self.clock.t, size), _grow(self.clock.i, size))

    def _grow_history(self) -> None:
        pr = self.probes
        C = 2 * pr.hist_t.shape[1]
        self.probes = pr._replace(hist_t=_grow(pr.hist_t, C, 1), hist_n=_grow(pr.hist_n, C, 1))

    def _grow_series(self) -> None:
        rec = self.rec
        m = 2 * rec.series_t.shape[0]
        self.rec = rec._replace(series_t=_grow(rec.series_t, m),
                                series_N=_grow(rec.series_N, m))

    def _grow_routing(self) -> None:
        rec = self.rec
        m = 2 * rec.route_t.shape[0] + 1
        self.rec = rec._replace(route_t=_grow(rec.route_t, m), route_x=_grow(rec.route_x, m))

    def _new_tables(self) -> None:
        """New cost tables: larger, for changed models, or (RIF) for new probed replicas."""
        ci = self.ctl.ci
        self._tables(int(ci[ks.I_NEED]))
        ci[ks.I_STALE] = 0
        ci[ks.I_DONE_FLAG] = 1

    def _grow_rate(self) -> None:
        rows = max(int(self.ctl.ci[ks.I_NEED]), 2 * self.cl.rate.shape[0])
        self.cl = self.cl._replace(rate=self._rate_table(rows))

    def _refill_leaf(self) -> None:
        """Append a block of the leaf stream (uniforms, numpy's log1p(−u)) to the unused rest."""
        ci = self.ctl.ci
        pos = int(ci[ks.I_LEAF_POS])
        self._leaf_block = min(_LEAF_BLOCK, 2 * self._leaf_block)  # short runs draw little
        u = self.leaf_rng.random(self._leaf_block)
        leaf = np.concatenate([self.cl.leaf[:, pos:], np.stack([u, np.log1p(-u)])], axis=1)
        self.cl = self.cl._replace(leaf=leaf)
        ci[ks.I_LEAF_POS] = 0

    def _solve(self) -> None:
        """MNLB's LP at the time of the last probe round (:meth:`MNLBRouter.solve`)."""
        cf, ci, ce_f, net = self.ctl.cf, self.ctl.ci, self.cl.ce_f, self.sc.network
        state = MNLBState(self.program, (), cf[ks.F_NEXT_SOLVE], ce_f[ks.COUNTS].copy(),
                          cf[ks.F_WINDOW], int(ci[ks.I_SOLVES]))
        probed = ce_f[ks.PROBED_K].copy()
        cap = probed * np.asarray(self.sc.server_rates(), dtype=float)
        view = CellView(time=float(cf[ks.F_PROBE_T]), workload=np.zeros(self.n), replicas=probed,
                        delays=net.delays, mask=net.adjacency, capacity=cap,
                        arrival_rates=net.arrival_rates)
        new = self.plan.base.solve(state, view)
        self.program = new.program
        cum = self.routing.cum
        for i, row in enumerate(new.cum):
            cum[i] = row if row is not None else 0.0
        ce_f[ks.COUNTS] = new.counts
        cf[ks.F_NEXT_SOLVE], cf[ks.F_WINDOW] = new.next_solve, new.window_start
        ci[ks.I_SOLVES] = new.solves

    def _refit(self) -> None:
        """The cells refit their latency models on their windows (:meth:`SeenModels.refit`)."""
        w = self.sc.estimation.window
        ce_i, est, ci, ip = self.cl.ce_i, self.rec.est, self.ctl.ci, self.plan.ip
        for j in range(self.n):
            c = int(ce_i[ks.EST_COUNT, j])
            idx = np.arange(c) if c <= w else (np.arange(w) + c) % w
            self.models.samples[j] = deque(zip(est[0, j, idx].tolist(),
                                               est[1, j, idx].tolist()), maxlen=w)
        self.models.refit()
        ci[ks.I_STALE] = int(bool(ip[K_USES_F] or ip[K_USES_F_LAT]))
        ci[ks.I_DONE_FLAG] = 1

    def _noise(self) -> None:
        """The model noise is redrawn (:meth:`SeenModels.redraw`): new cost tables."""
        self.models.redraw()
        ci = self.ctl.ci
        ci[ks.I_STALE] = int(bool(self.plan.ip[K_USES_F] or self.plan.ip[K_USES_F_LAT]))
        ci[ks.I_DONE_FLAG] = 1

    def _outage(self) -> None:
        """The online servers of a cell change: the models routers see follow (rescaled)."""
        h_i, ci = self.clock.i, self.ctl.ci
        a, b = int(h_i[0, ks.EV_A]), int(h_i[0, ks.EV_B])
        self.cluster.online[a] = b
        self.models.outage(a)
        ci[ks.I_STALE] = 1
        ci[ks.I_DONE_FLAG] = 1

    def _bad_route(self) -> None:
        ci = self.ctl.ci
        j = int(ci[ks.I_BAD_DST])
        raise residency_error(self.router, int(ci[ks.I_BAD_SRC]), None if j < 0 else j)

    # -- the result --------------------------------------------------------------------------
    def records(self) -> RunRecords:
        ci, ce_f, ce_i = self.ctl.ci, self.cl.ce_f, self.cl.ce_i
        rq_f, rq_i, rec = self.rq.f, self.rq.i, self.rec
        R = int(ci[ks.I_NEXT])
        check_conservation(R, int(ci[ks.I_COMPLETED]), int(ci[ks.I_ERRORS]), int(ci[ks.I_ON_WIRE]),
                           int(ce_i[ks.N].sum()))
        m, mr = int(ci[ks.I_SERIES_N]), int(ci[ks.I_ROUTE_N])
        return RunRecords(
            requests=R, completed=int(ci[ks.I_COMPLETED]), errors=int(ci[ks.I_ERRORS]),
            events=int(ci[ks.I_EVENTS]), cache_hits=int(ci[ks.I_CACHE_HITS]),
            status=rq_i[ks.STATUS, :R].astype(np.int8), dest=rq_i[ks.DEST, :R],
            t_done=rq_f[ks.T_DONE, :R], t_cell=rq_f[ks.T_CELL, :R],
            wait=rq_f[ks.WAIT, :R], n_arr=rq_f[ks.N_ARR, :R],
            routed=self.probes.nn_i[ks.ROUTED].copy(),
            cell_errors=ce_i[ks.ERRORS].copy(),
            utilisation=cell_utilisation(self.sc, ce_f[ks.BUSY_PRE], ce_f[ks.BUSY_SLOT], self.T),
            series_t=rec.series_t[:m].copy(), series_N=rec.series_N[:m].astype(float),
            models=self.models.final(self.sc), routing_t=rec.route_t[:mr].copy(),
            routing_x=rec.route_x[:mr].copy(), routing_sources=tuple(self.sources))


def _requests(arr: Workload, R: int, src: np.ndarray) -> ks.Requests:
    """The per-request arrays of the first R arrivals (sources ``src``)."""
    rq_f = np.zeros((9, R))
    rq_f[ks.AT] = arr.arrival_s[:R]
    rq_f[ks.PROMPT], rq_f[ks.OUTPUT] = arr.prompt_tokens[:R], arr.output_tokens[:R]
    rq_f[ks.WORK] = arr.work[:R] if arr.work is not None else 1.0
    rq_f[ks.T_CELL] = rq_f[ks.T_DONE] = np.nan
    rq_i = np.zeros((6, R), dtype=np.int64)
    rq_i[ks.SRC] = src
    rq_i[ks.DEST] = rq_i[ks.NXT] = ks.NONE
    if arr.session is not None:
        rq_i[ks.SESS] = np.unique(arr.session[:R], return_inverse=True)[1]
    else:
        rq_i[ks.SESS] = ks.NONE
    return ks.Requests(rq_f, rq_i)
