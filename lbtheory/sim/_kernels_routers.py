"""The compiled engine's probes and root routers (issue 21): one probe round (stale workloads
N_j(t − τ_ij) for every source), the per-round router kernels and the per-request decisions.

Each kernel runs a router of :mod:`lbtheory.routers` (the reference) with the same random draws
from the same ``numpy.random.Generator`` (numba advances the Python object's PCG64 stream), so
both engines route every request to the same cell; the decisions themselves are the shared
kernels next to the Python routers (:func:`~lbtheory.routers.sample_index_kernel`,
:func:`~lbtheory.routers.round_robin_pick`, :func:`~lbtheory.routers.jsq_pick`,
:func:`~lbtheory.routers.power_of_d_pick_into`), here only fed the cell view:

* ``K_RAND`` — :class:`~lbtheory.routers.RandomRouter` (∝ probed replicas);
* ``K_RR`` — :class:`~lbtheory.routers.RoundRobinRouter`; ``K_JSQ`` —
  :class:`~lbtheory.routers.JSQRouter`; ``K_POD`` — :class:`~lbtheory.routers.PowerOfDRouter`;
* ``K_DISC`` / ``K_FLOW`` — DLB's discrete (1) and flow (2) routers: costs f_j(N̂_ij) + g_ij
  from tables the driver builds with :func:`lbtheory.costs.cell_cost` and
  :func:`lbtheory.costs.static_cost` (no formula here), then the compiled rules of
  :mod:`lbtheory.simplex` (:func:`~lbtheory.simplex.argmin_row_kernel`,
  :func:`~lbtheory.simplex.flow_update_row_kernel`);
* ``K_MNLB`` — MNLB's held weights (the LP is solved by the driver, in Python, every period);
* ``K_USER`` — a user's numba kernels (:class:`~lbtheory.sim.KernelRouter`);
* error aversion (:class:`~lbtheory.routers.ErrorAversion`) and affinity
  (:class:`~lbtheory.routers.AffinityRouter`) around any of them.

Per (source i, cell j) arrays (n, n): ``W`` probed workloads, ``cum`` cumulative routing
weights, ``X`` flow rows, ``av`` aversion probabilities; ``sess`` (2, sessions): pinned cell
and previous cell of each session.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..routers import (
    cumulative_kernel,
    jsq_pick,
    power_of_d_pick_into,
    round_robin_pick,
    sample_index_kernel,
)
from ..simplex import argmin_row_kernel, flow_update_row_kernel
from ._kernels_state import (
    COUNTS,
    CURSOR,
    ERR_EMA,
    F_LEAF,
    F_NEXT_AVERT,
    F_NEXT_SOLVE,
    F_PROBE_T,
    F_REPLICAS,
    F_SHARE,
    HIST_LEN,
    I_ONLINE_SEEN,
    LAST_T,
    NONE,
    ONLINE,
    POINTER,
    PROBED_ERR,
    PROBED_K,
)

__all__ = ["probe_workloads", "observe_round", "route_request", "NEED_SOLVE"]

# kernels (ip[K_KERNEL])
K_RAND, K_RR, K_JSQ, K_POD, K_DISC, K_FLOW, K_MNLB, K_USER = range(8)
# ip: int64 parameters
K_KERNEL, K_TIES_RANDOM, K_PER_REPLICA, K_D, K_AVERSION, K_AFFINITY, K_NEEDS_W, \
    K_RECORD_EVERY, K_USES_F, K_USES_F_LAT, K_RIF, K_OUTAGE_PAUSE = range(12)
N_K = 12
# fp: float64 parameters
R_ETA, R_AV_PERIOD, R_KAPPA_UP, R_KAPPA_DOWN, R_MARGIN, R_P_EXPLORE, R_AFF_SAVING, \
    R_RTOL = range(8)
N_R = 8
# sess rows
PINS, LAST_CELL = range(2)

#: route_request's answer when MNLB must re-solve first (nothing was changed or drawn).
NEED_SOLVE = -2


@njit(cache=True, error_model="numpy")
def read_time(t: float, tau: float, share: float, jit: float, phase: float,
              L: float) -> float:
    """u_ij(k) of :mod:`._staleness`'s docstring (before the max; ``share`` = S·[k mod R ≠ 0]):
    the time a probe's workload was read. One definition: the reference engine
    (:mod:`._probes`) calls this compiled function too."""
    u = t - tau
    u = u - share  # S on a peer replica's round, 0.0 (no change) on the router's own
    u = u - jit
    if L > 0.0:
        u = phase + L * math.floor((u - phase) / L)
    return u


@njit(cache=True, error_model="numpy")
def probe_workloads(ce_i: np.ndarray, tau: np.ndarray, W: np.ndarray, nn_i: np.ndarray,
                    hist_t: np.ndarray, hist_n: np.ndarray, sources: np.ndarray,
                    t: float, stale: np.ndarray, cf: np.ndarray, k: int) -> int:
    """W[i, j] = N_j(q_ij) for every source i (the last history entry at or before that
    time; 0 before any), q_ij the read time of round k (:mod:`._staleness`; t − τ_ij without
    a probing model); the largest value read. Repeating it at the same t changes nothing."""
    top = 0
    n = W.shape[0]
    L = cf[F_LEAF]
    share = cf[F_SHARE] if k % int(cf[F_REPLICAS]) != 0 else 0.0
    km = 2 + k % (stale.shape[0] - 2)
    for i in sources:
        for j in range(n):
            u = read_time(t, tau[i, j], share, stale[km, i, j], stale[1, 0, j], L)
            if u > stale[0, i, j]:
                stale[0, i, j] = u
            q = stale[0, i, j]
            c = nn_i[CURSOR, i, j]
            L_h = ce_i[HIST_LEN, j]
            while c + 1 < L_h and hist_t[j, c + 1] <= q:
                c += 1
            nn_i[CURSOR, i, j] = c
            w = hist_n[j, c] if c >= 0 else 0
            W[i, j] = w
            top = max(top, w)
    return top


@njit(cache=True, error_model="numpy")
def _cost_row(F: np.ndarray, G: np.ndarray, W: np.ndarray, mask: np.ndarray, i: int,
              out: np.ndarray) -> None:
    """ĉ_ij = f_j(N̂_ij) + g_ij on source i's admissible cells, +inf elsewhere."""
    for j in range(out.shape[0]):
        out[j] = F[int(W[i, j]), j] + G[i, j] if mask[i, j] else np.inf


@njit(cache=True, error_model="numpy")
def _aversion_control(ce_f: np.ndarray, av: np.ndarray, mask: np.ndarray, sources: np.ndarray,
                      fp: np.ndarray, cf: np.ndarray, t: float) -> None:
    """:meth:`~lbtheory.routers.ErrorAversion._control` for every source of the round."""
    if t < cf[F_NEXT_AVERT]:
        return
    n = av.shape[0]
    for i in sources:
        best = np.inf
        for j in range(n):
            if mask[i, j]:
                best = min(best, ce_f[PROBED_ERR, j])
        if best == np.inf:
            continue
        for j in range(n):
            e = ce_f[PROBED_ERR, j]
            if mask[i, j] and e > best + fp[R_MARGIN]:
                v = min(1.0, av[i, j] + fp[R_KAPPA_UP] * (e - best))
            else:
                v = max(0.0, av[i, j] - fp[R_KAPPA_DOWN])
            av[i, j] = min(v, 1.0 - fp[R_P_EXPLORE]) if mask[i, j] else 0.0
    cf[F_NEXT_AVERT] = t + fp[R_AV_PERIOD]


@njit(cache=True, inline="always", error_model="numpy")
def observe_round(ce_f: np.ndarray, ce_i: np.ndarray, tau: np.ndarray, W: np.ndarray,
                  cum: np.ndarray, X: np.ndarray, av: np.ndarray, mask: np.ndarray,
                  sources: np.ndarray, F: np.ndarray, G: np.ndarray, ip: np.ndarray,
                  fp: np.ndarray, ci: np.ndarray, cf: np.ndarray, scratch_f: np.ndarray,
                  scratch_b: np.ndarray, user_state: np.ndarray, t: float,
                  user_observe) -> None:
    """A probe round reached every source at t (s): the probed replicas and error EMAs, then
    the router's ``observe_round`` (W must be current: :func:`probe_workloads`)."""
    n = W.shape[0]
    cf[F_PROBE_T] = t
    fresh = ci[I_ONLINE_SEEN] == 0
    for j in range(n):
        if ce_f[PROBED_K, j] != ce_i[ONLINE, j]:
            ce_f[PROBED_K, j] = ce_i[ONLINE, j]
            fresh = True
        ce_f[PROBED_ERR, j] = ce_f[ERR_EMA, j]
    ci[I_ONLINE_SEEN] = 1
    if sources.shape[0] == 0:
        return
    if ip[K_AVERSION]:
        _aversion_control(ce_f, av, mask, sources, fp, cf, t)
    kernel = ip[K_KERNEL]
    row, tmp = scratch_f[0], scratch_f[1]
    if kernel == K_RAND:
        if fresh:  # weights ∝ probed replicas on the residency row
            for i in sources:
                for j in range(n):
                    row[j] = ce_f[PROBED_K, j] if mask[i, j] else 0.0
                cumulative_kernel(row, cum[i])
    elif kernel == K_DISC:
        for i in sources:
            _cost_row(F, G, W, mask, i, row)
            argmin_row_kernel(row, mask[i], fp[R_RTOL], tmp)
            cumulative_kernel(tmp, cum[i])
    elif kernel == K_FLOW:
        for i in sources:
            step = fp[R_ETA] * max(0.0, t - ce_f[LAST_T, i])
            if step > 0:
                _cost_row(F, G, W, mask, i, row)
                flow_update_row_kernel(X[i], row, step, mask[i], tmp, scratch_f[2],
                                       scratch_b[0], scratch_b[1])
                for j in range(n):
                    X[i, j] = tmp[j]
                cumulative_kernel(tmp, cum[i])
                ce_f[LAST_T, i] = t
    elif kernel == K_USER and user_observe is not None:
        user_observe(t, W, ce_f[PROBED_K], tau, mask, sources, user_state)


@njit(cache=True, error_model="numpy")
def _route_least(ce_f: np.ndarray, W: np.ndarray, mask: np.ndarray, ip: np.ndarray,
                 scratch_f: np.ndarray, scratch_i: np.ndarray, i: int,
                 rng: np.random.Generator) -> int:
    """JSQ or power of d for source i (the shared kernels of :mod:`lbtheory.routers`) on the
    probed requests, per probed replica with ``K_PER_REPLICA``."""
    load = W[i]
    if ip[K_PER_REPLICA]:
        load = scratch_f[0]
        for j in range(W.shape[1]):
            load[j] = W[i, j] / ce_f[PROBED_K, j]
    if ip[K_KERNEL] == K_JSQ:
        return jsq_pick(load, mask[i], ip[K_TIES_RANDOM] != 0, rng)
    return power_of_d_pick_into(load, mask[i], ip[K_D], rng, scratch_i[0], scratch_i[1])


@njit(cache=True, error_model="numpy")
def _route_base(ce_f: np.ndarray, ce_i: np.ndarray, tau: np.ndarray, W: np.ndarray,
                cum: np.ndarray, mask: np.ndarray, ip: np.ndarray, cf: np.ndarray,
                scratch_f: np.ndarray, scratch_i: np.ndarray, user_state: np.ndarray, i: int,
                rng: np.random.Generator, user_route) -> int:
    """The wrapped router's decision for a request of source i (NONE: no eligible cell)."""
    kernel = ip[K_KERNEL]
    if kernel == K_RAND or kernel == K_DISC or kernel == K_FLOW:
        return sample_index_kernel(cum[i], rng)
    if kernel == K_MNLB:
        if cf[F_PROBE_T] >= cf[F_NEXT_SOLVE]:
            return NEED_SOLVE
        ce_f[COUNTS, i] += 1.0
        return sample_index_kernel(cum[i], rng)
    if kernel == K_RR:
        g, ce_i[POINTER, i] = round_robin_pick(mask[i], ce_i[POINTER, i])
        return g
    if kernel == K_JSQ or kernel == K_POD:
        return _route_least(ce_f, W, mask, ip, scratch_f, scratch_i, i, rng)
    if user_route is not None:
        return user_route(cf[F_PROBE_T], i, W[i], ce_f[PROBED_K], tau, mask, user_state, rng)
    return NONE


@njit(cache=True, error_model="numpy")
def _route_averse(ce_f: np.ndarray, ce_i: np.ndarray, tau: np.ndarray, W: np.ndarray,
                  cum: np.ndarray, av: np.ndarray, mask: np.ndarray, ip: np.ndarray,
                  cf: np.ndarray, scratch_f: np.ndarray, scratch_i: np.ndarray,
                  user_state: np.ndarray, i: int, rng: np.random.Generator, user_route) -> int:
    """:meth:`~lbtheory.routers.ErrorAversion.route` around the base decision."""
    j = _route_base(ce_f, ce_i, tau, W, cum, mask, ip, cf, scratch_f, scratch_i, user_state, i,
                    rng, user_route)
    if j < 0 or not ip[K_AVERSION]:
        return j
    if av[i, j] <= 0 or rng.random() >= av[i, j]:
        return j
    total = 0.0
    n = W.shape[0]
    for k in range(n):
        w = ce_f[PROBED_K, k] * (1.0 - av[i, k]) if mask[i, k] and k != j else 0.0
        scratch_f[0, k] = w
        total += w
    if not total > 0:  # no other admissible cell, or all fully averse
        return j
    cumulative_kernel(scratch_f[0], scratch_f[1])
    return sample_index_kernel(scratch_f[1], rng)


@njit(cache=True, inline="always", error_model="numpy")
def route_request(ce_f: np.ndarray, ce_i: np.ndarray, tau: np.ndarray, W: np.ndarray,
                  cum: np.ndarray, av: np.ndarray, mask: np.ndarray, sess: np.ndarray,
                  F_lat: np.ndarray, G_lat: np.ndarray, ip: np.ndarray, fp: np.ndarray,
                  cf: np.ndarray, scratch_f: np.ndarray, scratch_i: np.ndarray,
                  user_state: np.ndarray, i: int, s: int, rng: np.random.Generator,
                  user_route) -> int:
    """The cell of a request of source i (session s or NONE): affinity's rule, then the
    (error-averse) router. :data:`NEED_SOLVE`: MNLB must re-solve first (nothing changed)."""
    if ip[K_AFFINITY] and s != NONE:
        js = sess[PINS, s]
        if js != NONE and mask[i, js]:
            n = W.shape[0]
            cjs = F_lat[int(W[i, js]), js] + G_lat[i, js]
            others = np.inf
            for k in range(n):
                if k != js and mask[i, k]:
                    others = min(others, F_lat[int(W[i, k]), k] + G_lat[i, k])
            if others == np.inf or cjs - fp[R_AFF_SAVING] < others:
                return js
        j = _route_averse(ce_f, ce_i, tau, W, cum, av, mask, ip, cf, scratch_f, scratch_i,
                          user_state, i, rng, user_route)
        if j >= 0:
            sess[PINS, s] = j
        return j
    return _route_averse(ce_f, ce_i, tau, W, cum, av, mask, ip, cf, scratch_f, scratch_i,
                         user_state, i, rng, user_route)
