"""The compiled engine's state (issue 21): the reference engine's concepts as a few arrays, and
the two data structures every event touches — the event heap and the workload history.

Layout: one 2-D array per concept and dtype, one row per field (the row constants below),
grouped into seven typed records (NamedTuples of arrays, which numba passes as structs):
:class:`Requests`, :class:`Cluster`, :class:`Clock`, :class:`Probes`, :class:`Routing`,
:class:`Recorded`, :class:`Control`. The loop (:func:`~._kernels_loop.run_events`) takes the
records, unpacks them once per call and hands plain arrays to the kernels; it is compiled
without numba's reference counting (``_nrt=False``): the kernels allocate nothing and only index
arrays the driver owns. (A tuple-of-arrays engine with reference counting that read the tuples
per event spent 3 µs per event in atomic increments — 86 % of its time in a profile; this one
spends ≈ 0.2 µs.) A record is immutable: the driver grows an array by ``_replace``.

* requests: ``rq_f`` float64 (9, R), ``rq_i`` int64 (6, R) — inputs and records of the
  reference's :class:`~._records.Records`;
* cells: ``ce_f`` float64 (10, n), ``ce_i`` int64 (15, n) — servers' spec, workload N_j, error
  EMA, busy seconds, counters, what the last probe round saw, router state per source;
* servers: ``sv_f`` float64 (1, S), ``sv_i`` int64 (9, S) — busy slots, prefill engine,
  outstanding load, FIFO queues (linked lists through ``rq_i[NXT]``: a request waits in at most
  one queue);
* the network and per-(source i, cell j) state, (n, n) each: ``tau`` one-way delays (s),
  ``mask`` residency (bool), ``W`` probed workloads, ``cum`` / ``X`` / ``av`` the routers'
  cumulative weights, flow rows and aversion (:mod:`._kernels_routers`); ``nn_i`` int64
  (2, n, n): routed counts and probe cursors;
* the clock: ``h_t`` float64 (cap,) and ``h_i`` int64 (cap, 4) — a binary heap keyed by
  (time s, push sequence) with payload (kind, a, b): ties in time come out in push order, like
  the reference's ``heapq``;
* the workload history ``hist_t`` / ``hist_n`` (n, C): per cell the changes of N_j since the
  oldest probe still reading them; a cursor per (source, cell) only moves forward (probe times
  grow), so a probe of N_j(t − τ_ij) is amortised O(1);
* scalars: ``ci`` int64 and ``cf`` float64 (the ``I_*`` and ``F_*`` constants).

A kernel never returns to Python per event: when an array is full or Python has work to do (a
refit, an LP solve, a larger cost table) the loop *pauses* before it consumes the next event and
returns a ``P_*`` code; the driver (:mod:`._compiled`) answers and calls the loop again.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

__all__ = ["heap_push", "heap_pop", "set_workload", "compact_history", "Requests", "Cluster",
           "Clock", "Probes", "Routing", "Recorded", "Control"]

# -- rq_f rows (float64, per request) ------------------------------------------------------
AT, PROMPT, OUTPUT, WORK, T_CELL, T_DONE, WAIT, T_MARK, N_ARR = range(9)
# -- rq_i rows (int64, per request): source, dense session (NONE), routed cell, next in queue,
# status (PENDING / DONE / ERROR), prefix-cache hit (0/1)
SRC, SESS, DEST, NXT, STATUS, CACHED = range(6)
# -- ce_f rows (float64, per cell): mmc mean service s, prefill / decode s per token, leaf error
# EMA, prefill / slot busy seconds (rate cells: completions), the last round's probed replicas
# and error EMA, flow routers' last update time (s) and MNLB's counts, per source
MEAN_S, TP, TD, ERR_EMA, BUSY_PRE, BUSY_SLOT, PROBED_K, PROBED_ERR, LAST_T, COUNTS = range(10)
# -- ce_i rows (int64, per cell): servers, online servers, first server, kind (KIND_*), slots,
# queue limit (NONE: none), leaf round-robin pointer, workload N_j, overflow errors, rate-cell
# FIFO head / tail and completion version, history entries in use, round-robin pointer per
# source, estimation samples ever taken
K, ONLINE, BASE, KIND, SLOTS, LIMIT, RR_NEXT, N, ERRORS, RQ_HEAD, RQ_TAIL, VERSION, HIST_LEN, \
    POINTER, EST_COUNT = range(15)
# -- sv_f rows: outstanding load; sv_i rows: cell, busy slots, prefill engine busy (0/1), queue
# for a slot / the prefill engine, queue for a decode slot (head, tail, length)
LOAD = 0
CELL, BUSY, PRE_BUSY, Q_HEAD, Q_TAIL, Q_LEN, D_HEAD, D_TAIL, D_LEN = range(9)
# -- nn_i planes: routed counts i → j, probe cursors
ROUTED, CURSOR = range(2)
# -- h_i columns
SEQ, EV_KIND, EV_A, EV_B = range(4)

# -- ci: int64 scalars ---------------------------------------------------------------------
I_NEXT = 0          # next arrival (request index)
I_SEQ = 1           # last push sequence number
I_HEAP_N = 2        # events in the heap
I_COMPLETED = 3
I_ERRORS = 4
I_ON_WIRE = 5
I_EVENTS = 6
I_CACHE_HITS = 7
I_SERIES_N = 8      # sampled workload points
I_STARTED = 9       # the t = 0 probe round is done
I_DONE_FLAG = 10    # Python did the work of the event at the heap's top (refit, outage, tables)
I_HIST_FULL = 11    # a history row filled up: compact (and maybe grow) before the next event
I_NEED = 12         # rows the driver must provide after a table pause
I_LEAF_POS = 13     # next unused draw of the leaf stream
I_ROUNDS = 14       # probe rounds observed (routing records)
I_ROUTE_N = 15      # recorded routing rows
I_BAD_SRC = 16      # a user kernel's decision off the residency row: source, cell
I_BAD_DST = 17
I_ONLINE_SEEN = 18  # a probe round has read the online counts
I_SOLVES = 19       # MNLB LP solves
I_STALE = 20        # the models changed (refit, outage): new cost tables at the next round
N_I = 21

# -- cf: float64 scalars -------------------------------------------------------------------
F_T = 0             # horizon (s)
F_DELTA = 1         # probe period (s)
F_RECORD = 2        # series sampling period (s)
F_REFIT = 3         # estimation refit period (s)
F_PROBE_T = 4       # time of the last probe round (the views' time, s)
F_NEXT_SOLVE = 5    # MNLB: time of the next LP solve (s)
F_WINDOW = 6        # MNLB: start of the current counting window (s)
F_NEXT_AVERT = 7    # error aversion: time of the next control update (s)
F_SAVING = 8        # prefix-cache prefill saving (fraction)
F_SHARE = 9         # probing: a peer replica's round reaches the router this late (s)
F_LEAF = 10         # probing: leaf cache period (s; 0 = none)
F_REPLICAS = 11     # probing: root replicas taking turns (a count, as a float)
F_NOISE = 12        # model noise redraw period (s; 0 = never)
N_F = 13

# -- pause codes: why the loop returned ---------------------------------------------------
P_DONE = 0          # horizon reached
P_GROW_HEAP = 1
P_GROW_HISTORY = 2
P_GROW_SERIES = 3
P_COST_TABLE = 4    # new cost tables: a probed workload beyond them (rows in ci[I_NEED]),
                    # changed models, or (RIF) changed probed replicas
P_RATE_TABLE = 5    # a rate cell's workload beyond the μ_j(N) table
P_MNLB_SOLVE = 6
P_REFIT = 7
P_OUTAGE = 8        # the routers' models change with the online servers
P_BAD_ROUTE = 9     # a user kernel sent a request off its residency row
P_LEAF_STREAM = 10  # the leaf stream's buffer ran out
P_GROW_ROUTING = 11
P_NOISE = 12        # the routers' model noise is redrawn

#: "no queue limit" / "no session" / "no request" in int64 arrays.
NONE = -1
#: server kinds (ce_i[KIND]).
KIND_APPENDIX_B, KIND_MMC, KIND_RATE = 0, 1, 2



# -- the records: the arrays of one run, by concept (module docstring) ---------------------
class Requests(NamedTuple):
    """Per request: ``f`` float64 (9, R) (rows AT … N_ARR), ``i`` int64 (6, R) (SRC … CACHED)."""

    f: np.ndarray
    i: np.ndarray


class Cluster(NamedTuple):
    """Cells and servers: ``ce_f`` (10, n), ``ce_i`` (15, n), ``sv_f`` (1, S), ``sv_i`` (9, S)
    (rows above); ``rate`` μ_j(N) of the rate cells (rows N, columns j; 1/s); ``leaf`` the leaf
    stream's next draws (2, m: uniforms, log1p(−u)); ``leaf_rr`` the leaves route round robin."""

    ce_f: np.ndarray
    ce_i: np.ndarray
    sv_f: np.ndarray
    sv_i: np.ndarray
    rate: np.ndarray
    leaf: np.ndarray
    leaf_rr: bool


class Clock(NamedTuple):
    """The event heap: times ``t`` (cap,) s and ``i`` (cap, 4) int64 (SEQ, EV_KIND, EV_A, EV_B)."""

    t: np.ndarray
    i: np.ndarray


class Probes(NamedTuple):
    """The network and what probes read: ``tau`` one-way delays (n, n) s, ``mask`` residency
    (n, n) bool, ``sources`` (cells with arrivals, int64), ``W`` probed workloads (n, n),
    ``nn_i`` int64 (2, n, n) routed counts and probe cursors, the workload history ``hist_t``
    (s) / ``hist_n`` (n, C), and ``stale`` the probing model's read times, leaf phases and
    jitter table (:func:`~._staleness.stale_tables`)."""

    tau: np.ndarray
    mask: np.ndarray
    sources: np.ndarray
    W: np.ndarray
    nn_i: np.ndarray
    hist_t: np.ndarray
    hist_n: np.ndarray
    stale: np.ndarray


class Routing(NamedTuple):
    """The routers' state (:mod:`._kernels_routers`): cumulative weights ``cum``, flow rows
    ``X``, aversion ``av`` (n, n each); ``sess`` int64 (2, sessions); cost tables ``F`` /
    ``F_lat`` (rows N, columns j) and static costs ``G`` / ``G_lat`` (n, n); a user kernel's
    ``user_state``; scratch rows ``scratch_f`` (3, n), ``scratch_b`` (2, n), ``scratch_i``."""

    cum: np.ndarray
    X: np.ndarray
    av: np.ndarray
    sess: np.ndarray
    F: np.ndarray
    G: np.ndarray
    F_lat: np.ndarray
    G_lat: np.ndarray
    user_state: np.ndarray
    scratch_f: np.ndarray
    scratch_b: np.ndarray
    scratch_i: np.ndarray


class Recorded(NamedTuple):
    """What the run records besides the requests: the sampled workloads ``series_t`` (s) /
    ``series_N`` (rows, n), the estimation windows ``est`` (2, n, window: N at arrival, serving
    latency s) and the routing rows ``route_t`` (s) / ``route_x`` (rows, sources, n)."""

    series_t: np.ndarray
    series_N: np.ndarray
    est: np.ndarray
    route_t: np.ndarray
    route_x: np.ndarray


class Control(NamedTuple):
    """The router plan's parameters ``ip`` (int64, ``K_*``) / ``fp`` (float64, ``R_*``) and the
    run's scalars ``ci`` (int64, ``I_*``) / ``cf`` (float64, ``F_*``)."""

    ip: np.ndarray
    fp: np.ndarray
    ci: np.ndarray
    cf: np.ndarray


# -- the heap --------------------------------------------------------------------------------
@njit(cache=True, inline="always", error_model="numpy")
def _move(h_t: np.ndarray, h_i: np.ndarray, dst: int, src: int) -> None:
    h_t[dst] = h_t[src]
    h_i[dst, SEQ], h_i[dst, EV_KIND] = h_i[src, SEQ], h_i[src, EV_KIND]
    h_i[dst, EV_A], h_i[dst, EV_B] = h_i[src, EV_A], h_i[src, EV_B]


@njit(cache=True, inline="always", error_model="numpy")
def _place(h_t: np.ndarray, h_i: np.ndarray, i: int, t: float, seq: int, kind: int, a: int,
           b: int) -> None:
    h_t[i] = t
    h_i[i, SEQ], h_i[i, EV_KIND], h_i[i, EV_A], h_i[i, EV_B] = seq, kind, a, b


@njit(cache=True, inline="always", error_model="numpy")
def heap_push(h_t: np.ndarray, h_i: np.ndarray, ci: np.ndarray, t: float, kind: int, a: int,
              b: int) -> None:
    """Schedule event ``kind`` with arguments (a, b) at time t (s); the caller checked room."""
    ci[I_SEQ] += 1
    seq = ci[I_SEQ]
    i = ci[I_HEAP_N]
    ci[I_HEAP_N] = i + 1
    while i > 0:
        p = (i - 1) >> 1
        if h_t[p] <= t:  # equal times: the parent was pushed earlier (smaller sequence)
            break
        _move(h_t, h_i, i, p)
        i = p
    _place(h_t, h_i, i, t, seq, kind, a, b)


@njit(cache=True, inline="always", error_model="numpy")
def heap_pop(h_t: np.ndarray, h_i: np.ndarray, ci: np.ndarray) -> None:
    """Remove the top event (read it at index 0 first)."""
    m = ci[I_HEAP_N] - 1
    ci[I_HEAP_N] = m
    if m == 0:
        return
    t, seq = h_t[m], h_i[m, SEQ]
    kind, a, b = h_i[m, EV_KIND], h_i[m, EV_A], h_i[m, EV_B]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= m:
            break
        if c + 1 < m and (h_t[c + 1] < h_t[c] or
                          (h_t[c + 1] == h_t[c] and h_i[c + 1, SEQ] < h_i[c, SEQ])):
            c += 1
        if t < h_t[c] or (t == h_t[c] and seq < h_i[c, SEQ]):
            break
        _move(h_t, h_i, i, c)
        i = c
    _place(h_t, h_i, i, t, seq, kind, a, b)


# -- the workload history ------------------------------------------------------------------
@njit(cache=True, inline="always", error_model="numpy")
def set_workload(ce_i: np.ndarray, hist_t: np.ndarray, hist_n: np.ndarray, ci: np.ndarray,
                 j: int, t: float, delta: int) -> None:
    """N_j += delta at time t (s), kept in the history probes read (one entry per time)."""
    Nj = ce_i[N, j] + delta
    ce_i[N, j] = Nj
    if hist_t.shape[1] == 1:  # no probe reads the history (the driver keeps one column)
        return
    L = ce_i[HIST_LEN, j]
    if hist_t[j, L - 1] == t:
        hist_n[j, L - 1] = Nj
        return
    hist_t[j, L] = t
    hist_n[j, L] = Nj
    ce_i[HIST_LEN, j] = L + 1
    if L + 1 == hist_t.shape[1]:
        ci[I_HIST_FULL] = 1


@njit(cache=True, error_model="numpy")
def compact_history(ce_i: np.ndarray, nn_i: np.ndarray, hist_t: np.ndarray,
                    hist_n: np.ndarray, sources: np.ndarray, read: bool) -> bool:
    """Drop the entries no probe will read again (before every source's cursor; all but the
    last when the router does not ``read`` probed workloads); whether some row is still more
    than half full (then the driver doubles the rows)."""
    n, C = hist_t.shape
    crowded = False
    for j in range(n):
        L = ce_i[HIST_LEN, j]
        m = L - 1
        if read:
            for i in sources:
                m = min(m, nn_i[CURSOR, i, j])
        if m > 0:
            for e in range(m, L):
                hist_t[j, e - m] = hist_t[j, e]
                hist_n[j, e - m] = hist_n[j, e]
            ce_i[HIST_LEN, j] = L - m
            if read:
                for i in sources:
                    nn_i[CURSOR, i, j] -= m
        crowded |= ce_i[HIST_LEN, j] > C // 2
    return crowded
