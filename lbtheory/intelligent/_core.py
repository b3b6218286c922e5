"""The compiled instance simulator's state and its numba kernels (the engine of
:class:`~lbtheory.intelligent.CompiledClusterSim`).

Same semantics as the reference :class:`~lbtheory.intelligent.ClusterSim` (its module docstring
states them; the cross-engine tests check the two bit for bit). The state is a
:class:`CoreState` of seven arrays, indexed by the row constants below:

* ``ri[row, v]`` (int64, per request ``v`` in workload order): prompt ``P`` and output ``D``
  (each ``max(·, 1)``), predicted output ``PRED``, tokens emitted ``GEN``, ``PREEMPTED``
  (count), ``INSTANCE`` (−1 until dispatched), the links ``NXT`` / ``PRV`` of the instance
  waiting queues (−1: none), the router queue ``RQ`` (``ri[RQ, gi[QH]:gi[QT]]``: request ids,
  head first), with chunked prefill ``LEFT`` (prefill tokens still to compute) and ``CHUNK``
  (this iteration's chunk), ``RECOMP`` (KV tokens preemptions discarded, computed again),
  ``SWAPS`` (preemptions by swapping), then ``gi[N_LABELS]`` rows of histogram labels from
  ``LABEL0``;
* ``rf[row, v]`` (float64, s): ``ARRIVAL``, ``DISPATCH``, ``ADMIT`` (first admission),
  ``FIRST`` / ``LAST`` (token times), ``FINISH`` (NaN until they happen), ``TBT_SUM`` /
  ``TBT_MAX`` / ``TBT_SQ`` (gaps between tokens: sum, largest, sum of squares);
* ``mi[row, m]`` (int64, per instance ``m``): ``N_RUN`` running requests and ``N_ADM`` admitted
  into the current iteration (the batch ``mi[BATCH0 + i, m]``, running first), ``N_WAIT``
  waiting requests (a linked list ``WHEAD`` → ``ri[NXT]`` → … ``WTAIL``), ``KV_USED`` (KV of the
  running requests), ``WAIT_TOK`` (prompt + generated tokens of the waiting requests), ``LOAD``
  (Σ prompt + predicted output of the requests on it), ``N_ON`` (requests on it), ``PEAK_KV``,
  ``N_ITER``, ``PONLY`` (1: the current iteration is prefill-only, ``prefill_priority``),
  swap preemption's queue ``SHEAD`` → ``ri[NXT]`` → … ``STAIL`` (its requests also count in
  ``N_WAIT``), ``CPU_USED`` (its blocks) and ``MOVED`` (blocks swapped this iteration);
  from row ``gi[HIST0]``, how many requests on the instance carry each label (the
  environment's prompt and decode buckets; none for a plain simulation);
* ``gi`` (int64) and ``gf`` (float64): counters, clock, configuration (the KV budget also in
  blocks: ``BLOCK`` tokens each, ``TOTAL_BLK`` of them, ``CAP_BLK`` = total − watermark; swap
  preemption: ``SWAP`` and ``CPU_BLK``, ``gf[SWAP_S]`` s per block moved), the iteration-time
  coefficients (``gf[:5]``) and each instance's end of iteration
  ``gf[BUSY0 + m]`` (s; inf when idle);
* ``log_i`` / ``log_f``: the iteration log when recording (instance, id offsets and ids;
  start and end times).

Few arrays on purpose: numba counts references to every array of a tuple at each call
boundary. An admission order other than FCFS keeps each waiting queue ordered at all times
(preempted requests first, then fresh ones by :func:`~._admission.admission_key`, compared by
``_after``; bin packing admits from anywhere in the queue): the reference sorts at every
iteration start, and the two agree because preempted requests only ever enter at the front and
fresh ones only by dispatch, between two starts. Chunked prefill: ``_start_chunked`` / the
chunked branch of ``_finish``, the reference's ``_start_chunked`` / ``_finish`` step for step.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ._kernelopts import _KERNEL
from ._swap import swap_seconds
from ._timing import iteration_seconds

__all__ = ["CoreState", "advance", "dispatch", "queue_length"]

# ri rows
P, D, PRED, GEN, PREEMPTED, INSTANCE, NXT, PRV, RQ, LEFT, CHUNK, RECOMP, SWAPS, LABEL0 = range(14)
# rf rows
ARRIVAL, DISPATCH, ADMIT, FIRST, LAST, FINISH, TBT_SUM, TBT_MAX, TBT_SQ = range(9)
N_RF = 9
# mi rows
(N_RUN, N_ADM, N_WAIT, WHEAD, WTAIL, KV_USED, WAIT_TOK, LOAD, N_ON, PEAK_KV, N_ITER, PONLY,
 SHEAD, STAIL, CPU_USED, MOVED, BATCH0) = range(17)
# gi entries: counters, then configuration
(NEXT_ARRIVAL, EPOCH_K, N_DONE, PREEMPTIONS, QH, QT, N_LOG_ITER, N_LOG_IDS, BUDGET, MAX_BATCH,
 MAX_PREFILL, ADMISSION, QUEUE_VIEW, RECORD, HIST0, N_LABELS, LOG_IDS0, CHUNKED, BLOCK, TOTAL_BLK,
 CAP_BLK, PRIO, SWAP, CPU_BLK) = range(24)
N_GI = 24
# gf entries: the five iteration-time coefficients (so ``gf`` is the ``coef`` argument of
# :func:`iteration_seconds`), the clock, the epoch, the swap time per block, then per-instance
# busy times
NOW, EPOCH_S, SWAP_S, BUSY0 = 5, 6, 7, 8
_EPS = 1e-12


class CoreState(NamedTuple):
    """The compiled simulator's arrays (module docstring)."""

    ri: np.ndarray
    rf: np.ndarray
    mi: np.ndarray
    gi: np.ndarray
    gf: np.ndarray
    log_i: np.ndarray
    log_f: np.ndarray


# -- the waiting queues (doubly linked lists) ---------------------------------------------------
# (``head`` / ``tail``: the rows of the list's ends, the waiting queue's or the swapped queue's)
@njit(**_KERNEL)
def _push_front(ri, mi, m, v, head=WHEAD, tail=WTAIL):
    h = mi[head, m]
    ri[NXT, v] = h
    ri[PRV, v] = -1
    if h < 0:
        mi[tail, m] = v
    else:
        ri[PRV, h] = v
    mi[head, m] = v
    mi[N_WAIT, m] += 1


@njit(**_KERNEL)
def _insert_after(ri, mi, m, u, v, head=WHEAD, tail=WTAIL):
    """Link ``v`` after ``u`` in instance ``m``'s waiting queue (``u = -1``: at the front)."""
    if u < 0:
        _push_front(ri, mi, m, v, head, tail)
        return
    w = ri[NXT, u]
    ri[PRV, v] = u
    ri[NXT, v] = w
    ri[NXT, u] = v
    if w < 0:
        mi[tail, m] = v
    else:
        ri[PRV, w] = v
    mi[N_WAIT, m] += 1


@njit(**_KERNEL)
def _unlink(ri, mi, m, v, head=WHEAD, tail=WTAIL):
    """Take ``v`` out of instance ``m``'s waiting queue (the head, or any under bin packing)."""
    u, w = ri[PRV, v], ri[NXT, v]
    if u < 0:
        mi[head, m] = w
    else:
        ri[NXT, u] = w
    if w < 0:
        mi[tail, m] = u
    else:
        ri[PRV, w] = u
    ri[NXT, v] = -1
    ri[PRV, v] = -1
    mi[N_WAIT, m] -= 1


@njit(**_KERNEL)
def _after(ri, adm, u, v):
    """Whether fresh waiting request ``u`` goes behind ``v`` under admission code ``adm``
    (:data:`~._admission.ADMISSION_CODES`: 1 SPF, 2 LWL, 3 bin packing), i.e.
    ``admission_key(u) > admission_key(v)``."""
    if adm == 1:
        a, c = ri[P, u], ri[P, v]
    elif adm == 2:
        a, c = ri[PRED, u], ri[PRED, v]
        if a == c:
            a, c = ri[P, u], ri[P, v]
    else:  # decreasing footprint
        a, c = ri[P, v] + ri[PRED, v], ri[P, u] + ri[PRED, u]
    return a > c or (a == c and u > v)


# -- swap preemption (the reference's ``_preempt`` and ``_swap_in``) -----------------------------
@njit(**_KERNEL)
def _swap_out(ri, mi, m, v, h):
    """Request ``v`` (``h`` blocks) to the tail of instance ``m``'s swapped queue."""
    _insert_after(ri, mi, m, mi[STAIL, m], v, SHEAD, STAIL)
    mi[CPU_USED, m] += h
    mi[MOVED, m] += h
    ri[SWAPS, v] += 1


@njit(**_KERNEL)
def _swap_in(ri, mi, gi, m, need, tok, sum_q, sum_q2):
    """Swap requests back in (oldest preemption first) while the batch has room and ``need``
    plus their blocks with the next token fit above the watermark; they join the batch's end.
    Chunked prefill: while ``tok`` is left, a decode takes one token, a partial prefill a chunk
    (``CHUNK``, ``Σq``, ``Σq²``). Returns ``(need, tok, Σq, Σq²)`` (the reference's)."""
    b = gi[BLOCK]
    chunked = gi[CHUNKED] != 0
    nr = mi[N_RUN, m]
    v = mi[SHEAD, m]
    while v >= 0 and nr < gi[MAX_BATCH] and (not chunked or tok > 0):
        full = ri[P, v] + ri[GEN, v]
        nb = (full + b) // b
        if need + nb > gi[CAP_BLK]:
            break
        w = ri[NXT, v]
        _unlink(ri, mi, m, v, SHEAD, STAIL)
        h = (full + b - 1) // b
        mi[CPU_USED, m] -= h
        mi[MOVED, m] += h
        mi[BATCH0 + nr, m] = v
        nr += 1
        lv = ri[LEFT, v]
        mi[KV_USED, m] += full - lv
        need += nb
        if chunked:
            c = min(lv, tok) if lv > 0 else 1
            tok -= c
            ri[CHUNK, v] = c if lv > 0 else 0
            if lv > 0:
                x = float(c)
                o = float(full - lv)
                sum_q += x
                sum_q2 += x * x + 2.0 * x * o
        v = w
    mi[N_RUN, m] = nr
    return need, tok, sum_q, sum_q2


# -- one instance --------------------------------------------------------------------------------
@njit(**_KERNEL)
def _preempt(ri, mi, gi, m):
    """Preempt (the most recently admitted first) while the running requests' KV, their next
    token and the reserved rest of their prefills (chunked prefill; ``LEFT`` is 0 otherwise)
    exceed the budget: by swapping where the option and the free CPU blocks allow, else by
    recomputation. Returns ``(need, preempted)``: the KV the running requests will need, and
    whether any was preempted."""
    budget = gi[TOTAL_BLK]
    b = gi[BLOCK]
    nr = mi[N_RUN, m]
    if b == 1:  # token-exact: Σ (P + GEN + 1) = KV + one token each + the reserved prefills
        need = mi[KV_USED, m] + nr
        for i in range(nr):
            need += ri[LEFT, mi[BATCH0 + i, m]]
    else:
        need = 0
        for i in range(nr):
            v = mi[BATCH0 + i, m]
            need += (ri[P, v] + ri[GEN, v] + b) // b
    preempted = False
    while need > budget and nr > 0:
        nr -= 1
        v = mi[BATCH0 + nr, m]
        full = ri[P, v] + ri[GEN, v]
        mi[KV_USED, m] -= full - ri[LEFT, v]
        need -= (full + b) // b
        ri[PREEMPTED, v] += 1
        gi[PREEMPTIONS] += 1
        preempted = True
        h = (full + b - 1) // b
        if gi[SWAP] != 0 and mi[CPU_USED, m] + h <= gi[CPU_BLK]:  # the KV to the CPU
            _swap_out(ri, mi, m, v, h)
            continue
        ri[RECOMP, v] += full - ri[LEFT, v]
        ri[LEFT, v] = 0
        _push_front(ri, mi, m, v)
        mi[WAIT_TOK, m] += full
    mi[N_RUN, m] = nr
    return need, preempted


@njit(**_KERNEL)
def _admit_one(ri, rf, mi, m, t, nv, slot, v):
    """Move waiting request ``v`` (``nv`` tokens to prefill) into batch slot ``slot``."""
    _unlink(ri, mi, m, v)
    mi[WAIT_TOK, m] -= nv
    mi[BATCH0 + slot, m] = v
    if np.isnan(rf[ADMIT, v]):
        rf[ADMIT, v] = t
    return v


@njit(**_KERNEL)
def _begin(mi, gf, m, t, need, na, sum_q, sum_q2, n_decode, context, gi_block):
    """Start the iteration formed (``na`` admitted; ``need`` blocks of ``gi_block`` tokens),
    or mark the instance idle."""
    mi[N_ADM, m] = na
    if mi[N_RUN, m] == 0 and na == 0:
        gf[BUSY0 + m] = np.inf
        return
    if need * gi_block > mi[PEAK_KV, m]:
        mi[PEAK_KV, m] = need * gi_block
    mi[N_ITER, m] += 1
    dt = iteration_seconds(gf, sum_q, sum_q2, float(n_decode), float(context))
    if mi[MOVED, m] > 0:
        dt += swap_seconds(mi[MOVED, m], gf[SWAP_S])
    gf[BUSY0 + m] = t + dt


@njit(**_KERNEL)
def _start_chunked(ri, rf, mi, gi, gf, m, t):
    """:func:`_start` with chunked prefill (the reference's ``_start_chunked``)."""
    mi[MOVED, m] = 0
    need, preempted = _preempt(ri, mi, gi, m)
    nr = mi[N_RUN, m]
    n_dec = 0
    partial_kv = 0
    for i in range(nr):
        v = mi[BATCH0 + i, m]
        if ri[LEFT, v] == 0:
            n_dec += 1
        else:
            partial_kv += ri[P, v] + ri[GEN, v] - ri[LEFT, v]
    tok = gi[MAX_PREFILL] - n_dec
    sum_q = 0.0
    sum_q2 = 0.0
    for i in range(nr):
        v = mi[BATCH0 + i, m]
        ri[CHUNK, v] = 0
        if ri[LEFT, v] > 0 and tok > 0:
            c = min(ri[LEFT, v], tok)
            ri[CHUNK, v] = c
            tok -= c
            x = float(c)
            o = float(ri[P, v] + ri[GEN, v] - ri[LEFT, v])
            sum_q += x
            sum_q2 += x * x + 2.0 * x * o
    if mi[SHEAD, m] >= 0 and not preempted:  # swap preemption: running first, then swapped in
        k = nr
        need, tok, sum_q, sum_q2 = _swap_in(ri, mi, gi, m, need, tok, sum_q, sum_q2)
        nr = mi[N_RUN, m]
        for i in range(k, nr):
            v = mi[BATCH0 + i, m]
            if ri[LEFT, v] == 0:
                n_dec += 1
            else:
                partial_kv += ri[P, v] + ri[GEN, v] - ri[LEFT, v]
    na = 0
    b = gi[BLOCK]
    if (not preempted or nr == 0) and mi[SHEAD, m] < 0:
        u = mi[WHEAD, m]  # the next candidate (bin packing skips what does not fit)
        while u >= 0 and nr + na < gi[MAX_BATCH] and tok > 0:
            nv = ri[P, u] + ri[GEN, u]
            nb = (nv + b) // b
            v, u = u, ri[NXT, u]
            if need + nb > gi[CAP_BLK]:
                if gi[ADMISSION] != 3:
                    break
                continue
            _admit_one(ri, rf, mi, m, t, nv, nr + na, v)
            na += 1
            ri[LEFT, v] = nv
            c = min(nv, tok)
            ri[CHUNK, v] = c
            tok -= c
            need += nb
            x = float(c)
            sum_q += x
            sum_q2 += x * x
    _begin(mi, gf, m, t, need, na, sum_q, sum_q2, n_dec, mi[KV_USED, m] - partial_kv, gi[BLOCK])


@njit(**_KERNEL)
def _admit_prefills(ri, rf, mi, gi, m, t, need):
    """Admit waiting requests while the batch has room, the prefill tokens fit
    ``MAX_PREFILL`` (the first always does) and ``need`` (blocks) plus the request's prompt and
    first token fit the blocks left above the watermark (the reference's
    ``_admit_prefills``). Returns ``(need, admitted, Σ q, Σ q²)``."""
    nr = mi[N_RUN, m]
    b = gi[BLOCK]
    na = 0
    sum_q = 0.0
    sum_q2 = 0.0
    qtok = 0
    u = mi[WHEAD, m]  # the next candidate (bin packing skips what does not fit)
    while u >= 0 and nr + na < gi[MAX_BATCH]:
        nv = ri[P, u] + ri[GEN, u]
        nb = (nv + b) // b
        v, u = u, ri[NXT, u]
        if (na > 0 and qtok + nv > gi[MAX_PREFILL]) or need + nb > gi[CAP_BLK]:
            if gi[ADMISSION] != 3:
                break
            continue
        _admit_one(ri, rf, mi, m, t, nv, nr + na, v)
        na += 1
        x = float(nv)
        sum_q += x
        sum_q2 += x * x
        qtok += nv
        need += nb
    return need, na, sum_q, sum_q2


@njit(**_KERNEL)
def _start(ri, rf, mi, gi, gf, m, t):
    """Form and start the next iteration of instance ``m`` at time ``t`` (s): preempt (the
    most recently admitted first) while the running requests' next tokens do not fit the
    budget, else admit waiting requests or swap swapped ones in (the reference's ``_start``)."""
    if gi[CHUNKED] != 0:
        _start_chunked(ri, rf, mi, gi, gf, m, t)
        return
    mi[PONLY, m] = 0
    b = gi[BLOCK]
    if gi[PRIO] != 0:  # vLLM: prompts first; a prefill iteration runs no decodes
        nr = mi[N_RUN, m]
        held = 0  # blocks held now, and with every running request's next token
        grown = 0
        for i in range(nr):
            v = mi[BATCH0 + i, m]
            x = ri[P, v] + ri[GEN, v]
            h = (x + b - 1) // b
            held += h
            grown += h + (1 if x == h * b else 0)  # a full last block: one division, not two
        mi[MOVED, m] = 0
        if mi[SHEAD, m] < 0:  # no prompt while a request is swapped out
            need, na, sum_q, sum_q2 = _admit_prefills(ri, rf, mi, gi, m, t, held)
            if na > 0:
                mi[PONLY, m] = 1
                _begin(mi, gf, m, t, need, na, sum_q, sum_q2, 0, 0, b)
                return
        preempted = False
        if grown > gi[TOTAL_BLK]:  # else _preempt would find ``grown`` and preempt nothing
            grown, preempted = _preempt(ri, mi, gi, m)
        if mi[SHEAD, m] >= 0 and not preempted:
            grown = _swap_in(ri, mi, gi, m, grown, 0, 0.0, 0.0)[0]
        _begin(mi, gf, m, t, grown, 0, 0.0, 0.0, mi[N_RUN, m], mi[KV_USED, m], b)
        return
    need, preempted = _preempt(ri, mi, gi, m)
    nr = mi[N_RUN, m]
    na = 0
    sum_q = 0.0
    sum_q2 = 0.0
    if not preempted or nr == 0:
        need, na, sum_q, sum_q2 = _admit_prefills(ri, rf, mi, gi, m, t, need)
    _begin(mi, gf, m, t, need, na, sum_q, sum_q2, nr, mi[KV_USED, m], b)


@njit(**_KERNEL)
def _finish(ri, rf, mi, gi, gf, m):
    """End the current iteration of instance ``m``: every scheduled request emits one token,
    finished ones leave (freeing their KV); returns the end time (s)."""
    t = gf[BUSY0 + m]
    nr = mi[N_RUN, m]
    nb = nr + mi[N_ADM, m]
    chunked = gi[CHUNKED] != 0
    if chunked:
        kv = mi[KV_USED, m]
        for i in range(nb):
            v = mi[BATCH0 + i, m]
            c = ri[CHUNK, v]
            kv += c + (1 if ri[LEFT, v] == c else 0)  # a decode token, a chunk, a first token
    else:
        kv = mi[KV_USED, m] + (0 if mi[PONLY, m] != 0 else nr)
        for i in range(nr, nb):
            v = mi[BATCH0 + i, m]
            kv += ri[P, v] + ri[GEN, v] + 1
    # a prefill-only iteration (prefill_priority): the running requests stall, emit nothing
    first = nr if mi[PONLY, m] != 0 else 0
    still = first
    done = 0
    freed = 0
    hist0 = gi[HIST0]
    for i in range(first, nb):
        v = mi[BATCH0 + i, m]
        if chunked and ri[LEFT, v] > 0:
            ri[LEFT, v] -= ri[CHUNK, v]
            ri[CHUNK, v] = 0
            if ri[LEFT, v] > 0:  # prefill not complete: no token yet
                mi[BATCH0 + still, m] = v
                still += 1
                continue
        g = ri[GEN, v] + 1
        ri[GEN, v] = g
        if np.isnan(rf[FIRST, v]):
            rf[FIRST, v] = t
        else:
            gap = t - rf[LAST, v]
            rf[TBT_SUM, v] += gap
            rf[TBT_SQ, v] += gap * gap
            if gap > rf[TBT_MAX, v]:
                rf[TBT_MAX, v] = gap
        rf[LAST, v] = t
        if g >= ri[D, v]:
            kv -= ri[P, v] + g
            rf[FINISH, v] = t
            done += 1
            freed += ri[P, v] + ri[PRED, v]
            for c in range(gi[N_LABELS]):
                mi[hist0 + ri[LABEL0 + c, v], m] -= 1
        else:
            mi[BATCH0 + still, m] = v
            still += 1
    gi[N_DONE] += done
    mi[LOAD, m] -= freed
    mi[N_ON, m] -= done
    mi[N_RUN, m] = still
    mi[N_ADM, m] = 0
    mi[KV_USED, m] = kv
    return t


@njit(**_KERNEL)
def _log(mi, gi, gf, log_i, log_f, m, t):
    """Record the iteration just started: ``log_i[k]`` its instance, ``log_i[K + k]`` the end
    of its ids in ``log_i[2K:]`` (``K = gi[LOG_IDS0] // 2``), ``log_f[2k:2k + 2]`` its times."""
    k = gi[N_LOG_ITER]
    j = gi[N_LOG_IDS]
    ids0 = gi[LOG_IDS0]
    if k >= ids0 // 2 or ids0 + j + mi[N_RUN, m] + mi[N_ADM, m] > log_i.size:
        gi[RECORD] = 2  # the log is full: stop recording (iterations_log refuses to answer)
        return
    log_i[k] = m
    log_f[2 * k] = t
    log_f[2 * k + 1] = gf[BUSY0 + m]
    for i in range(mi[N_RUN, m] + mi[N_ADM, m]):
        log_i[ids0 + j] = mi[BATCH0 + i, m]
        j += 1
    log_i[ids0 // 2 + k] = j
    gi[N_LOG_ITER] = k + 1
    gi[N_LOG_IDS] = j


@njit(**_KERNEL)
def _run_instance(s, m, t_start, t_until):
    """Instance ``m``: start an iteration at ``t_start`` when it is ≥ 0, then end and start
    iterations while the current one ends by ``t_until`` (s; ``inf``: until idle)."""
    ri, rf, mi, gi, gf = s.ri, s.rf, s.mi, s.gi, s.gf
    record = gi[RECORD] == 1
    if t_start >= 0.0:
        _start(ri, rf, mi, gi, gf, m, t_start)
        if record and gf[BUSY0 + m] < np.inf:
            _log(mi, gi, gf, s.log_i, s.log_f, m, t_start)
    while gf[BUSY0 + m] < np.inf and gf[BUSY0 + m] <= t_until + _EPS:
        t = _finish(ri, rf, mi, gi, gf, m)
        _start(ri, rf, mi, gi, gf, m, t)
        if record and gf[BUSY0 + m] < np.inf:
            _log(mi, gi, gf, s.log_i, s.log_f, m, t)


# -- the cluster and the router queue -----------------------------------------------------------
@njit(**_KERNEL)
def queue_length(s):
    """Requests in the router queue."""
    return s.gi[QT] - s.gi[QH]


@njit(**_KERNEL)
def advance(s):
    """Move to the next decision epoch with a non-empty router queue and run the instances up
    to it (True); when no request is left to route, run the instances to the end (False). The
    reference's ``ClusterSim.advance``."""
    ri, rf, mi, gi, gf = s.ri, s.rf, s.mi, s.gi, s.gf
    n = ri.shape[1]
    n_inst = mi.shape[1]
    for m in range(n_inst):  # requests routed at the last epoch start together
        if gf[BUSY0 + m] == np.inf and mi[N_WAIT, m] > 0:
            _run_instance(s, m, gf[NOW], -np.inf)
    epoch = gf[EPOCH_S]
    if gi[QT] == gi[QH]:
        nxt = gi[NEXT_ARRIVAL]
        if nxt >= n:
            for m in range(n_inst):
                _run_instance(s, m, -1.0, np.inf)
            return False
        k_arr = np.int64(np.ceil(rf[ARRIVAL, nxt] / epoch - 1e-9))
        gi[EPOCH_K] = max(gi[EPOCH_K] + 1, k_arr)
    else:
        gi[EPOCH_K] += 1
    t = gi[EPOCH_K] * epoch
    gf[NOW] = t
    for m in range(n_inst):
        if gf[BUSY0 + m] <= t + _EPS:
            _run_instance(s, m, -1.0, t)
    nxt = gi[NEXT_ARRIVAL]
    qt = gi[QT]
    while nxt < n and rf[ARRIVAL, nxt] <= t + _EPS:
        ri[RQ, qt] = nxt
        qt += 1
        nxt += 1
    gi[NEXT_ARRIVAL] = nxt
    gi[QT] = qt
    return True


@njit(**_KERNEL)
def dispatch(s, pos, m):
    """Route the request at router-queue position ``pos`` to instance ``m``; return its id (the
    caller checks the ranges)."""
    ri, mi, gi = s.ri, s.mi, s.gi
    qh = gi[QH]
    v = ri[RQ, qh + pos]
    for i in range(qh + pos, qh, -1):  # close the gap: earlier requests move back one place
        ri[RQ, i] = ri[RQ, i - 1]
    gi[QH] = qh + 1
    s.rf[DISPATCH, v] = s.gf[NOW]
    ri[INSTANCE, v] = m
    u = mi[WTAIL, m]
    adm = gi[ADMISSION]
    if adm != 0:  # in the batcher's order: behind resumed requests and fresh ones keyed before
        while u >= 0 and ri[PREEMPTED, u] == 0 and _after(ri, adm, u, v):
            u = ri[PRV, u]
    _insert_after(ri, mi, m, u, v)
    mi[WAIT_TOK, m] += ri[P, v]
    mi[LOAD, m] += ri[P, v] + ri[PRED, v]
    mi[N_ON, m] += 1
    for c in range(gi[N_LABELS]):
        mi[gi[HIST0] + ri[LABEL0 + c, v], m] += 1
    return v
