"""The compiled engine's event loop (issue 21): the reference loop of :mod:`._engine` over the
arrays of :mod:`._kernels_state`, in one ``@njit`` function that runs until the horizon or a
pause.

Every pause happens *before* the next event (or arrival) is consumed, and only for the rare
things Python does better: larger arrays, new cost tables (a workload beyond the table, a
refit, an outage, RIF's probed replicas), MNLB's LP, the estimation refit, a refill of the leaf
stream. The driver answers and calls :func:`run_events` again; the loop then repeats the
checks (they are idempotent) and goes on. Nothing returns to Python per event or per probe
round.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _kernels_state as ks
from ._kernels_routers import (
    K_NEEDS_W,
    K_OUTAGE_PAUSE,
    K_RECORD_EVERY,
    K_RIF,
    K_USES_F,
    K_USES_F_LAT,
    LAST_CELL,
    NEED_SOLVE,
    observe_round,
    probe_workloads,
    route_request,
)
from ._kernels_servers import arrive_at_cell, serve_event
from ._kernels_state import compact_history, heap_pop, heap_push
from ._records import Event

__all__ = ["run_events", "run_events_user"]

_ARRIVE, _PROBE, _OUTAGE = int(Event.ARRIVE), int(Event.PROBE), int(Event.OUTAGE)
_RECORD, _REFIT, _NOISE = int(Event.RECORD), int(Event.REFIT), int(Event.NOISE)
#: the probe round at t = 0 (a pseudo event kind: not in the heap, not counted).
_ROUND0 = -1


@njit(cache=True, inline="always", error_model="numpy")
def _probe_ready(ce_f: np.ndarray, ce_i: np.ndarray, tau: np.ndarray, W: np.ndarray,
                 nn_i: np.ndarray, hist_t: np.ndarray, hist_n: np.ndarray, sources: np.ndarray,
                 F: np.ndarray, F_lat: np.ndarray, ip: np.ndarray, ci: np.ndarray,
                 route_t: np.ndarray, t: float, stale: np.ndarray, cf: np.ndarray) -> int:
    """Checks before the probe round at t (reads W): P_DONE when it can run, else the pause."""
    if ip[K_NEEDS_W]:
        need = probe_workloads(ce_i, tau, W, nn_i, hist_t, hist_n, sources, t, stale, cf,
                               ci[ks.I_ROUNDS]) + 1
        if (ip[K_USES_F] and F.shape[0] < need) or (ip[K_USES_F_LAT] and F_lat.shape[0] < need):
            ci[ks.I_NEED] = need
            return ks.P_COST_TABLE
    if ci[ks.I_STALE]:
        return ks.P_COST_TABLE
    if ip[K_RIF] and not ci[ks.I_DONE_FLAG]:
        for j in range(W.shape[0]):
            if ce_f[ks.PROBED_K, j] != ce_i[ks.ONLINE, j]:
                return ks.P_COST_TABLE
    every = ip[K_RECORD_EVERY]
    if every > 0 and (ci[ks.I_ROUNDS] + 1) % every == 0 and ci[ks.I_ROUTE_N] >= route_t.shape[0]:
        return ks.P_GROW_ROUTING
    return ks.P_DONE


@njit(cache=True, inline="always", error_model="numpy")
def _record_routing(X: np.ndarray, sources: np.ndarray, ip: np.ndarray, ci: np.ndarray,
                    route_t: np.ndarray, route_x: np.ndarray, t: float) -> None:
    """Count the round; every ``K_RECORD_EVERY``-th, record the sources' routing rows."""
    ci[ks.I_ROUNDS] += 1
    every = ip[K_RECORD_EVERY]
    if every > 0 and ci[ks.I_ROUNDS] % every == 0:
        m = ci[ks.I_ROUTE_N]
        route_t[m] = t
        for k in range(sources.shape[0]):
            for j in range(X.shape[1]):
                route_x[m, k, j] = X[sources[k], j]
        ci[ks.I_ROUTE_N] = m + 1


@njit(cache=True, inline="always", error_model="numpy")
def _route_arrival(rq_f: np.ndarray, rq_i: np.ndarray, ce_f: np.ndarray, ce_i: np.ndarray,
                   h_t: np.ndarray, h_i: np.ndarray, tau: np.ndarray, W: np.ndarray,
                   cum: np.ndarray, av: np.ndarray, nn_i: np.ndarray, mask: np.ndarray,
                   sess: np.ndarray, F_lat: np.ndarray, G_lat: np.ndarray, ip: np.ndarray,
                   fp: np.ndarray, ci: np.ndarray, cf: np.ndarray, scratch_f: np.ndarray,
                   scratch_i: np.ndarray, user_state: np.ndarray, r: int, t: float,
                   rng: np.random.Generator, user_route) -> int:
    """Request r reaches its source's root at t: route it onto the wire (or pause)."""
    i, s = rq_i[ks.SRC, r], rq_i[ks.SESS, r]
    j = route_request(ce_f, ce_i, tau, W, cum, av, mask, sess, F_lat, G_lat, ip, fp, cf,
                      scratch_f, scratch_i, user_state, i, s, rng, user_route)
    if j == NEED_SOLVE:
        return ks.P_MNLB_SOLVE
    if j < 0 or j >= W.shape[0] or not mask[i, j]:
        ci[ks.I_BAD_SRC], ci[ks.I_BAD_DST] = i, j
        return ks.P_BAD_ROUTE
    ci[ks.I_EVENTS] += 1
    if s != ks.NONE:
        if sess[LAST_CELL, s] == j:
            rq_i[ks.CACHED, r] = 1
            ci[ks.I_CACHE_HITS] += 1
        sess[LAST_CELL, s] = j
    rq_i[ks.DEST, r] = j
    nn_i[ks.ROUTED, i, j] += 1
    ci[ks.I_ON_WIRE] += 1
    heap_push(h_t, h_i, ci, t + tau[i, j], _ARRIVE, r, j)
    ci[ks.I_NEXT] = r + 1
    return ks.P_DONE


@njit(cache=True, inline="always", error_model="numpy")
def _event_ready(ce_i: np.ndarray, rate: np.ndarray, series_t: np.ndarray, ip: np.ndarray,
                 ci: np.ndarray, kind: int, b: int) -> int:
    """Checks before an event other than a probe round: P_DONE, or the pause it needs."""
    if kind == _ARRIVE:
        if ce_i[ks.KIND, b] == ks.KIND_RATE and ce_i[ks.N, b] + 2 > rate.shape[0]:
            ci[ks.I_NEED] = ce_i[ks.N, b] + 2
            return ks.P_RATE_TABLE
    elif kind == _RECORD:
        if ci[ks.I_SERIES_N] >= series_t.shape[0]:
            return ks.P_GROW_SERIES
    elif kind == _REFIT:
        if not ci[ks.I_DONE_FLAG]:
            return ks.P_REFIT
    elif kind == _OUTAGE:
        if ip[K_OUTAGE_PAUSE] and not ci[ks.I_DONE_FLAG]:
            return ks.P_OUTAGE
    elif kind == _NOISE:
        if not ci[ks.I_DONE_FLAG]:
            return ks.P_NOISE
    return ks.P_DONE


@njit(cache=True, inline="always", error_model="numpy")
def _arrays(rq: ks.Requests, cl: ks.Cluster, clock: ks.Clock, probes: ks.Probes,
            routing: ks.Routing, rec: ks.Recorded, ctl: ks.Control) -> tuple:
    """The records' arrays in :func:`_loop`'s argument order."""
    return (rq.f, rq.i, cl.ce_f, cl.ce_i, cl.sv_f, cl.sv_i, clock.t, clock.i, probes.tau,
            probes.W, routing.cum, routing.X, routing.av, probes.nn_i, probes.mask,
            probes.hist_t, probes.hist_n, probes.sources, routing.sess, routing.F, routing.G,
            routing.F_lat, routing.G_lat, cl.rate, cl.leaf, rec.series_t, rec.series_N, rec.est,
            rec.route_t, rec.route_x, ctl.ip, ctl.fp, ctl.ci, ctl.cf, routing.scratch_f,
            routing.scratch_b, routing.scratch_i, routing.user_state, cl.leaf_rr, probes.stale)


@njit(cache=True, error_model="numpy", _nrt=False)
def run_events(rq: ks.Requests, cl: ks.Cluster, clock: ks.Clock, probes: ks.Probes,
               routing: ks.Routing, rec: ks.Recorded, ctl: ks.Control,
               rng: np.random.Generator, user_observe, user_route) -> int:
    """Run events in time order until the horizon (:data:`P_DONE`) or a pause (its code).

    The run's arrays come as the records of :mod:`._kernels_state` (a pause may replace an
    array: the driver calls again with new records); the loop itself, :func:`_loop`, takes them
    as plain arrays (LLVM optimises the hot loop over array arguments best: reading them out of
    the records inside the loop cost flow-grad ≈ 15 %)."""
    return _loop(*_arrays(rq, cl, clock, probes, routing, rec, ctl), rng, user_observe,
                 user_route)


@njit(cache=True, error_model="numpy", _nrt=False)
def _loop(rq_f: np.ndarray, rq_i: np.ndarray, ce_f: np.ndarray, ce_i: np.ndarray,
          sv_f: np.ndarray, sv_i: np.ndarray, h_t: np.ndarray, h_i: np.ndarray,
          tau: np.ndarray, W: np.ndarray, cum: np.ndarray, X: np.ndarray, av: np.ndarray,
          nn_i: np.ndarray, mask: np.ndarray, hist_t: np.ndarray, hist_n: np.ndarray,
          sources: np.ndarray, sess: np.ndarray, F: np.ndarray, G: np.ndarray,
          F_lat: np.ndarray, G_lat: np.ndarray, rate: np.ndarray, leaf: np.ndarray,
          series_t: np.ndarray, series_N: np.ndarray, est: np.ndarray,
          route_t: np.ndarray, route_x: np.ndarray, ip: np.ndarray, fp: np.ndarray,
          ci: np.ndarray, cf: np.ndarray, scratch_f: np.ndarray, scratch_b: np.ndarray,
          scratch_i: np.ndarray, user_state: np.ndarray, leaf_rr: bool, stale: np.ndarray,
          rng: np.random.Generator, user_observe, user_route) -> int:
    """:func:`run_events` on the records' arrays. The first call starts with the probe round at
    t = 0 (not an event, as in the reference). Every helper is inlined: one function, no
    reference counting (``_nrt=False``)."""
    T, delta, saving = cf[ks.F_T], cf[ks.F_DELTA], cf[ks.F_SAVING]
    R = rq_f.shape[1]
    read = ip[K_NEEDS_W] != 0
    while True:
        if ci[ks.I_HIST_FULL]:
            ci[ks.I_HIST_FULL] = 0
            if compact_history(ce_i, nn_i, hist_t, hist_n, sources, read):
                return ks.P_GROW_HISTORY
        if ci[ks.I_HEAP_N] + 2 > h_t.shape[0]:
            return ks.P_GROW_HEAP
        if ci[ks.I_LEAF_POS] + 2 > leaf.shape[1]:
            return ks.P_LEAF_STREAM
        if ci[ks.I_STARTED] == 0:
            kind, a, b, t = _ROUND0, 0, 0, 0.0
        else:
            r = ci[ks.I_NEXT]
            t_arr = rq_f[ks.AT, r] if r < R else np.inf
            t = h_t[0] if ci[ks.I_HEAP_N] > 0 else np.inf
            if t_arr <= t:  # the next arrival: route it onto the wire
                if t_arr >= T:
                    return ks.P_DONE
                code = _route_arrival(rq_f, rq_i, ce_f, ce_i, h_t, h_i, tau, W, cum, av, nn_i,
                                      mask, sess, F_lat, G_lat, ip, fp, ci, cf, scratch_f,
                                      scratch_i, user_state, r, t_arr, rng, user_route)
                if code != ks.P_DONE:
                    return code
                continue
            if t >= T:
                return ks.P_DONE
            kind, a, b = h_i[0, ks.EV_KIND], h_i[0, ks.EV_A], h_i[0, ks.EV_B]
        if kind == _PROBE or kind == _ROUND0:
            code = _probe_ready(ce_f, ce_i, tau, W, nn_i, hist_t, hist_n, sources, F, F_lat,
                                ip, ci, route_t, t, stale, cf)
        else:
            code = _event_ready(ce_i, rate, series_t, ip, ci, kind, b)
        if code != ks.P_DONE:
            return code
        ci[ks.I_DONE_FLAG] = 0
        if kind == _ROUND0:
            ci[ks.I_STARTED] = 1
        else:
            heap_pop(h_t, h_i, ci)
            ci[ks.I_EVENTS] += 1
        if kind == _ARRIVE:
            ci[ks.I_ON_WIRE] -= 1
            rq_f[ks.T_CELL, a] = t
            arrive_at_cell(rq_f, rq_i, ce_f, ce_i, sv_f, sv_i, h_t, h_i, hist_t, hist_n, leaf,
                           rate, ci, T, saving, leaf_rr, a, b, t)
        elif kind == _PROBE or kind == _ROUND0:
            observe_round(ce_f, ce_i, tau, W, cum, X, av, mask, sources, F, G, ip, fp, ci, cf,
                          scratch_f, scratch_b, user_state, t, user_observe)
            _record_routing(X, sources, ip, ci, route_t, route_x, t)
            if kind == _PROBE:
                heap_push(h_t, h_i, ci, t + delta, _PROBE, 0, 0)
        elif kind == _REFIT:
            heap_push(h_t, h_i, ci, t + cf[ks.F_REFIT], _REFIT, 0, 0)
        elif kind == _NOISE:
            heap_push(h_t, h_i, ci, t + cf[ks.F_NOISE], _NOISE, 0, 0)
        elif kind == _OUTAGE:
            ce_i[ks.ONLINE, a] = b
        elif kind == _RECORD:
            m = ci[ks.I_SERIES_N]
            series_t[m] = t
            for j in range(W.shape[0]):
                series_N[m, j] = ce_i[ks.N, j]
            ci[ks.I_SERIES_N] = m + 1
            heap_push(h_t, h_i, ci, t + cf[ks.F_RECORD], _RECORD, 0, 0)
        else:
            serve_event(rq_f, rq_i, ce_f, ce_i, sv_f, sv_i, h_t, h_i, hist_t, hist_n, leaf,
                        rate, est, ci, T, saving, kind, a, b, t)


#: :func:`run_events` with numba's reference counting, for a user's kernels
#: (:class:`~lbtheory.sim.KernelRouter`), which may allocate; specialised to their functions
#: on first use in a process (not cached: numba cannot cache a loop that takes functions).
_loop_user = njit(error_model="numpy")(_loop.py_func)


@njit(error_model="numpy")
def run_events_user(rq: ks.Requests, cl: ks.Cluster, clock: ks.Clock, probes: ks.Probes,
                    routing: ks.Routing, rec: ks.Recorded, ctl: ks.Control,
                    rng: np.random.Generator, user_observe, user_route) -> int:
    """:func:`run_events` for a user's kernels (:data:`_loop_user`)."""
    return _loop_user(*_arrays(rq, cl, clock, probes, routing, rec, ctl), rng, user_observe,
                      user_route)
