"""The compiled engine's servers (issue 21): the leaves and the three server kinds of
:mod:`._servers`, operation for operation (same arithmetic in the same order, so the records
are bit-identical to the reference engine's). Arrays and their rows: :mod:`._kernels_state`.

* leaf routing: round robin, or power of two choices on outstanding load drawn from the run's
  leaf stream (buffered by the driver, shared with the rate servers in draw order) — the
  decisions :func:`~lbtheory.routers.round_robin_pick` and ``two_choices`` of
  :mod:`lbtheory.routers._baselines`, which the reference engine's leaf calls too;
* ``mmc``: c slots, exponential service ``work × mean_service_s``;
* ``appendix_b``: one prefill engine (P·t_p s, × (1 − saving) on a prefix-cache hit), then a
  decode slot (D·t_d s);
* ``rate``: one FIFO per cell completing at μ_j(N_j), looked up in a table the driver builds
  with the declared service model (no formula here); the exponential draw uses numpy's
  log1p(−u) from the buffered stream (numba's log1p differs from numpy's in the last bit for
  ≈ 7 % of arguments).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..routers._baselines import round_robin_pick, two_choices
from ._kernels_state import (
    BASE,
    BUSY,
    BUSY_PRE,
    BUSY_SLOT,
    CACHED,
    CELL,
    D_HEAD,
    D_LEN,
    D_TAIL,
    ERR_EMA,
    ERRORS,
    EST_COUNT,
    I_COMPLETED,
    I_ERRORS,
    I_LEAF_POS,
    KIND,
    KIND_MMC,
    KIND_RATE,
    LIMIT,
    LOAD,
    MEAN_S,
    N_ARR,
    NONE,
    NXT,
    ONLINE,
    OUTPUT,
    PRE_BUSY,
    PROMPT,
    Q_HEAD,
    Q_LEN,
    Q_TAIL,
    RQ_HEAD,
    RQ_TAIL,
    RR_NEXT,
    SLOTS,
    STATUS,
    T_CELL,
    T_DONE,
    T_MARK,
    TD,
    TP,
    VERSION,
    WAIT,
    WORK,
    N,
    heap_push,
    set_workload,
)
from ._records import DONE, ERROR, Event
from ._servers import ERROR_EMA_ALPHA

__all__ = ["arrive_at_cell", "serve_event"]

_MMC_DONE, _PREFILL_DONE = int(Event.MMC_DONE), int(Event.PREFILL_DONE)
_DECODE_DONE, _RATE_DONE = int(Event.DECODE_DONE), int(Event.RATE_DONE)
_ALPHA = ERROR_EMA_ALPHA


@njit(cache=True, inline="always", error_model="numpy")
def _leaf(ce_i: np.ndarray, sv_f: np.ndarray, leaf: np.ndarray, leaf_rr: bool, ci: np.ndarray,
          j: int) -> int:
    """The server of cell j a request goes to (:meth:`~._servers.Cluster.leaf`)."""
    m = ce_i[ONLINE, j]
    b = ce_i[BASE, j]
    if m == 1:
        return b
    if leaf_rr:
        s, ce_i[RR_NEXT, j] = round_robin_pick(m, ce_i[RR_NEXT, j])
        return b + s
    p = ci[I_LEAF_POS]
    ci[I_LEAF_POS] = p + 2
    x, y = two_choices(leaf[0, p], leaf[0, p + 1], m)
    sx, sy = b + x, b + y
    return sy if sv_f[LOAD, sy] < sv_f[LOAD, sx] else sx


@njit(cache=True, inline="always", error_model="numpy")
def _busy_until(t: float, dur: float, T: float) -> float:
    return max(0.0, min(t + dur, T) - t)


@njit(cache=True, error_model="numpy")
def _reject(rq_i: np.ndarray, ce_f: np.ndarray, ce_i: np.ndarray, ci: np.ndarray, r: int,
            j: int) -> None:
    rq_i[STATUS, r] = ERROR
    ci[I_ERRORS] += 1
    ce_i[ERRORS, j] += 1
    ce_f[ERR_EMA, j] += _ALPHA * (1.0 - ce_f[ERR_EMA, j])


@njit(cache=True, inline="always", error_model="numpy")
def _finish(rq_f: np.ndarray, rq_i: np.ndarray, ce_f: np.ndarray, ce_i: np.ndarray,
            hist_t: np.ndarray, hist_n: np.ndarray, est: np.ndarray, ci: np.ndarray, r: int,
            j: int, t: float) -> None:
    rq_i[STATUS, r] = DONE
    rq_f[T_DONE, r] = t
    ci[I_COMPLETED] += 1
    set_workload(ce_i, hist_t, hist_n, ci, j, t, -1)
    ce_f[ERR_EMA, j] -= _ALPHA * ce_f[ERR_EMA, j]
    w = est.shape[2]
    if w > 0:  # estimation: the cell's (N at arrival, serving latency) sample, ring buffer
        k = ce_i[EST_COUNT, j] % w
        est[0, j, k] = rq_f[N_ARR, r]
        est[1, j, k] = t - rq_f[T_CELL, r]
        ce_i[EST_COUNT, j] += 1


@njit(cache=True, inline="always", error_model="numpy")
def _enqueue(q: np.ndarray, head: int, tail: int, rq_i: np.ndarray, s: int, r: int) -> None:
    """Append request r to the FIFO whose head / tail are rows ``head`` / ``tail`` of q."""
    rq_i[NXT, r] = NONE
    if q[head, s] == NONE:
        q[head, s] = r
    else:
        rq_i[NXT, q[tail, s]] = r
    q[tail, s] = r


@njit(cache=True, inline="always", error_model="numpy")
def _dequeue(q: np.ndarray, head: int, tail: int, rq_i: np.ndarray, s: int) -> int:
    r = q[head, s]
    q[head, s] = rq_i[NXT, r]
    if q[head, s] == NONE:
        q[tail, s] = NONE
    return r


@njit(cache=True, inline="always", error_model="numpy")
def _start_slot(rq_f: np.ndarray, ce_f: np.ndarray, sv_i: np.ndarray, h_t: np.ndarray,
                h_i: np.ndarray, ci: np.ndarray, T: float, r: int, s: int, j: int, t: float,
                decode: bool) -> None:
    """Request r takes a slot of server s (cell j) at t (:meth:`~._servers.Cluster.start_slot`):
    a decode slot (D·t_d s, waited since its prefill ended) or an mmc slot (work × mean s,
    waited since it reached the cell)."""
    if decode:
        since, dur, done = rq_f[T_MARK, r], rq_f[OUTPUT, r] * ce_f[TD, j], _DECODE_DONE
    else:
        since, dur, done = rq_f[T_CELL, r], rq_f[WORK, r] * ce_f[MEAN_S, j], _MMC_DONE
    sv_i[BUSY, s] += 1
    rq_f[WAIT, r] += t - since
    ce_f[BUSY_SLOT, j] += _busy_until(t, dur, T)
    heap_push(h_t, h_i, ci, t + dur, done, r, s)


@njit(cache=True, inline="always", error_model="numpy")
def _slot_done(rq_f: np.ndarray, rq_i: np.ndarray, ce_f: np.ndarray, ce_i: np.ndarray,
               sv_f: np.ndarray, sv_i: np.ndarray, h_t: np.ndarray, h_i: np.ndarray,
               hist_t: np.ndarray, hist_n: np.ndarray, est: np.ndarray, ci: np.ndarray,
               T: float, r: int, s: int, j: int, t: float, decode: bool) -> None:
    """Request r's slot on server s ends at t: it completes, and the next request waiting for
    a slot (decode queue, or the mmc queue) takes it."""
    sv_i[BUSY, s] -= 1
    sv_f[LOAD, s] -= rq_f[PROMPT, r] + rq_f[OUTPUT, r] if decode else 1.0
    _finish(rq_f, rq_i, ce_f, ce_i, hist_t, hist_n, est, ci, r, j, t)
    head, tail, length = (D_HEAD, D_TAIL, D_LEN) if decode else (Q_HEAD, Q_TAIL, Q_LEN)
    if sv_i[length, s] > 0:
        sv_i[length, s] -= 1
        r2 = _dequeue(sv_i, head, tail, rq_i, s)
        _start_slot(rq_f, ce_f, sv_i, h_t, h_i, ci, T, r2, s, j, t, decode)


@njit(cache=True, error_model="numpy")
def _start_prefill(rq_f: np.ndarray, rq_i: np.ndarray, ce_f: np.ndarray, sv_i: np.ndarray,
                   h_t: np.ndarray, h_i: np.ndarray, ci: np.ndarray, T: float, saving: float,
                   r: int, s: int, j: int, t: float) -> None:
    sv_i[PRE_BUSY, s] = 1
    rq_f[WAIT, r] += t - rq_f[T_CELL, r]
    dur = rq_f[PROMPT, r] * ce_f[TP, j]
    if rq_i[CACHED, r]:
        dur *= 1.0 - saving
    ce_f[BUSY_PRE, j] += _busy_until(t, dur, T)
    heap_push(h_t, h_i, ci, t + dur, _PREFILL_DONE, r, s)


@njit(cache=True, error_model="numpy")
def _schedule_rate(ce_i: np.ndarray, rate: np.ndarray, leaf: np.ndarray, h_t: np.ndarray,
                   h_i: np.ndarray, ci: np.ndarray, j: int, t: float) -> None:
    ce_i[VERSION, j] += 1
    Nj = ce_i[N, j]
    if Nj > 0:
        p = ci[I_LEAF_POS]
        ci[I_LEAF_POS] = p + 1
        heap_push(h_t, h_i, ci, t - leaf[1, p] / rate[Nj, j], _RATE_DONE, j, ce_i[VERSION, j])


@njit(cache=True, inline="always", error_model="numpy")
def arrive_at_cell(rq_f: np.ndarray, rq_i: np.ndarray, ce_f: np.ndarray, ce_i: np.ndarray,
                   sv_f: np.ndarray, sv_i: np.ndarray, h_t: np.ndarray, h_i: np.ndarray,
                   hist_t: np.ndarray, hist_n: np.ndarray, leaf: np.ndarray, rate: np.ndarray,
                   ci: np.ndarray, T: float, saving: float, leaf_rr: bool, r: int, j: int,
                   t: float) -> None:
    """Request r reaches cell j at time t (s): its kind's ``arrive``."""
    kind = ce_i[KIND, j]
    if kind == KIND_RATE:
        _enqueue(ce_i, RQ_HEAD, RQ_TAIL, rq_i, j, r)
        set_workload(ce_i, hist_t, hist_n, ci, j, t, 1)
        rq_f[N_ARR, r] = ce_i[N, j]
        _schedule_rate(ce_i, rate, leaf, h_t, h_i, ci, j, t)
        return
    s = _leaf(ce_i, sv_f, leaf, leaf_rr, ci, j)
    lim = ce_i[LIMIT, j]
    if kind == KIND_MMC:
        if sv_i[BUSY, s] < ce_i[SLOTS, j]:
            _start_slot(rq_f, ce_f, sv_i, h_t, h_i, ci, T, r, s, j, t, False)
        elif lim != NONE and sv_i[Q_LEN, s] >= lim:
            _reject(rq_i, ce_f, ce_i, ci, r, j)
            return
        else:
            _enqueue(sv_i, Q_HEAD, Q_TAIL, rq_i, s, r)
            sv_i[Q_LEN, s] += 1
        sv_f[LOAD, s] += 1.0
    else:
        if lim != NONE and sv_i[Q_LEN, s] + sv_i[D_LEN, s] >= lim and sv_i[PRE_BUSY, s]:
            _reject(rq_i, ce_f, ce_i, ci, r, j)
            return
        if not sv_i[PRE_BUSY, s]:
            _start_prefill(rq_f, rq_i, ce_f, sv_i, h_t, h_i, ci, T, saving, r, s, j, t)
        else:
            _enqueue(sv_i, Q_HEAD, Q_TAIL, rq_i, s, r)
            sv_i[Q_LEN, s] += 1
        sv_f[LOAD, s] += rq_f[PROMPT, r] + rq_f[OUTPUT, r]
    set_workload(ce_i, hist_t, hist_n, ci, j, t, 1)
    rq_f[N_ARR, r] = ce_i[N, j]


@njit(cache=True, inline="always", error_model="numpy")
def serve_event(rq_f: np.ndarray, rq_i: np.ndarray, ce_f: np.ndarray, ce_i: np.ndarray,
                sv_f: np.ndarray, sv_i: np.ndarray, h_t: np.ndarray, h_i: np.ndarray,
                hist_t: np.ndarray, hist_n: np.ndarray, leaf: np.ndarray, rate: np.ndarray,
                est: np.ndarray, ci: np.ndarray, T: float, saving: float, kind: int, a: int,
                b: int, t: float) -> None:
    """A service event of the heap: MMC_DONE, PREFILL_DONE, DECODE_DONE or RATE_DONE."""
    if kind == _RATE_DONE:
        j = a
        if b != ce_i[VERSION, j]:
            return  # superseded by a later change of N_j
        r = _dequeue(ce_i, RQ_HEAD, RQ_TAIL, rq_i, j)
        ce_f[BUSY_SLOT, j] += 1.0
        _finish(rq_f, rq_i, ce_f, ce_i, hist_t, hist_n, est, ci, r, j, t)
        _schedule_rate(ce_i, rate, leaf, h_t, h_i, ci, j, t)
        return
    r, s = a, b
    j = sv_i[CELL, s]
    if kind == _PREFILL_DONE:
        sv_i[PRE_BUSY, s] = 0
        rq_f[T_MARK, r] = t
        if sv_i[BUSY, s] < ce_i[SLOTS, j]:
            _start_slot(rq_f, ce_f, sv_i, h_t, h_i, ci, T, r, s, j, t, True)
        else:
            _enqueue(sv_i, D_HEAD, D_TAIL, rq_i, s, r)
            sv_i[D_LEN, s] += 1
        if sv_i[Q_LEN, s] > 0:
            sv_i[Q_LEN, s] -= 1
            r2 = _dequeue(sv_i, Q_HEAD, Q_TAIL, rq_i, s)
            _start_prefill(rq_f, rq_i, ce_f, sv_i, h_t, h_i, ci, T, saving, r2, s, j, t)
    else:  # MMC_DONE or DECODE_DONE
        _slot_done(rq_f, rq_i, ce_f, ce_i, sv_f, sv_i, h_t, h_i, hist_t, hist_n, est, ci, T,
                   r, s, j, t, kind == _DECODE_DONE)
