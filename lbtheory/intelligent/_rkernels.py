"""Router kernels of the compiled instance simulator, and its routing loop.

A router kernel is a numba function ``kernel(s, code, params, rstate, rng) -> (pos, target)``:
it reads the simulator's state ``s`` (:class:`~lbtheory.intelligent._core.CoreState`; the
router queue is ``s.ri[RQ, s.gi[QH]:s.gi[QT]]``, head first), its options ``params`` (float64),
its state ``rstate`` (int64, updated in place) and the run's ``numpy.random.Generator``, and
answers the queue position ``pos`` to send to instance ``target`` — or ``pos = -1`` to wait
for the next epoch. The loop (:func:`run_builtin`) asks again while the queue is not empty, as
:func:`~lbtheory.intelligent.run_router` does.

The registry's instance policies are one kernel, :func:`route_builtin`, branching on ``code``
(:data:`CODES`); each branch reproduces its Python router's decision and its draws from ``rng``
(the cross-engine tests check them bit for bit). The shared baselines (round robin, JSQ, random,
power of d) call their kernels in :mod:`lbtheory.routers._baselines` with the loads an
:class:`~lbtheory.intelligent.InstanceView` shows. Compiled with ``cache=True``.

A user's own compiled router is a kernel of the same signature; :func:`routing_loop` compiles
the same loop with it in place of :func:`route_builtin` (in each new process: numba cannot
cache a function that takes another as an argument).
"""

from __future__ import annotations

import types

import numpy as np
from numba import njit

from ..routers import jsq_pick, power_of_d_pick, round_robin_pick, uniform_pick
from ._core import (
    BUDGET,
    KV_USED,
    LOAD,
    MAX_BATCH,
    N_ADM,
    N_RUN,
    N_WAIT,
    PRED,
    QH,
    QT,
    QUEUE_VIEW,
    RQ,
    WAIT_TOK,
    P,
    advance,
    dispatch,
)
from ._impact import mixing_argmax
from ._timing import iteration_seconds

#: numba caches a compiled kernel together with the :mod:`._core` functions it calls, but checks
#: only *this* file when deciding whether the cache is stale: bump this whenever ``_core.py``
#: changes (2: chunked prefill; 3: shared preemption and iteration start; 4: swap preemption;
#: 5: swap preemption with chunked prefill).
CORE_REVISION = 5

__all__ = ["CODES", "route_builtin", "run_builtin", "routing_loop", "mixing_loads",
           "completion_estimate_s", "completion_estimates_s", "capacity", "maxcap_pick",
           "size_partition_pick"]

#: kernel codes of the registry's instance policies.
CODES = {"rr": 0, "jsq": 1, "random": 2, "p2c": 3, "minmin": 4, "maxcap": 5, "heuristic": 6,
         "small-large": 7}
_RR, _JSQ, _RANDOM, _P2C, _MINMIN, _MAXCAP, _MIXING, _SMALL_LARGE = range(8)


@njit(cache=True)
def _loads(mi, tokens):
    """What the shared JSQ / power-of-d baselines compare on an instance view: requests on each
    instance (running + waiting), or its committed tokens (float64, as the views give them)."""
    n_inst = mi.shape[1]
    out = np.empty(n_inst)
    for m in range(n_inst):
        out[m] = mi[LOAD, m] if tokens else mi[N_RUN, m] + mi[N_ADM, m] + mi[N_WAIT, m]
    return out


@njit(cache=True)
def completion_estimate_s(coef, wait_tokens, n_running, kv_used, p, d):
    """Min-Min's estimated completion time (s) of a request of ``p`` prompt and ``d``
    predicted output tokens on an instance with ``wait_tokens`` waiting prefill tokens,
    ``n_running`` running (and admitted) requests and ``kv_used`` KV tokens in use:
    ``t([W, p], n, K) + d · t([], n + 1, K + p + d/2)`` (``t``: :func:`iteration_seconds` with
    the five coefficients ``coef``) — the one definition, both engines."""
    w = float(wait_tokens)
    pf = float(p)
    df = float(d)
    n = float(n_running)
    kv = float(kv_used)
    if wait_tokens > 0:
        first = iteration_seconds(coef, w + pf, w * w + pf * pf, n, kv)
    else:
        first = iteration_seconds(coef, pf, pf * pf, n, kv)
    return first + df * iteration_seconds(coef, 0.0, 0.0, n + 1.0, (kv + pf) + df / 2)


@njit(cache=True)
def completion_estimates_s(coef, wait_tokens, n_running, kv_used, prompt, pred):
    """:func:`completion_estimate_s` of every (request, instance) pair (requests × instances,
    s): the Python Min-Min's matrix."""
    out = np.empty((prompt.size, wait_tokens.size))
    for i in range(prompt.size):
        for m in range(wait_tokens.size):
            out[i, m] = completion_estimate_s(coef, wait_tokens[m], n_running[m], kv_used[m],
                                              prompt[i], pred[i])
    return out


@njit(cache=True)
def _ect(mi, coef, m, p, d):
    """Min-Min's estimated completion time of a (p, d) request on instance ``m`` (s)."""
    return completion_estimate_s(coef, mi[WAIT_TOK, m], mi[N_RUN, m] + mi[N_ADM, m],
                                 mi[KV_USED, m], p, d)


@njit(cache=True)
def _minmin(ri, mi, gi, coef):
    qh = gi[QH]
    rows = min(gi[QT] - qh, gi[QUEUE_VIEW])
    best = np.inf
    best_i = best_m = 0
    for i in range(rows):
        v = ri[RQ, qh + i]
        for m in range(mi.shape[1]):
            e = _ect(mi, coef, m, ri[P, v], ri[PRED, v])
            if (i == 0 and m == 0) or e < best:
                best, best_i, best_m = e, i, m
    return best_i, best_m


@njit(cache=True)
def capacity(n_on, kv_committed, max_batch, kv_budget):
    """An instance's free capacity ``C = min(1 − n/max_batch, 1 − K/kv_budget)`` with ``n``
    requests on it and ``K`` committed KV tokens (in use + waiting prefill): the state's
    capacity entry, the full test of the action mask, and Maximum Capacity Usage (with the
    request added) — one definition."""
    return min(1.0 - n_on / max_batch, 1.0 - kv_committed / kv_budget)


@njit(cache=True)
def maxcap_pick(n_on, kv_committed, p, max_batch, kv_budget):
    """Maximum Capacity Usage: the instance of most :func:`capacity` once the request (``p``
    prompt tokens) is added (the first of equal ones)."""
    best = -np.inf
    best_m = 0
    for m in range(n_on.size):
        free = capacity(n_on[m] + 1, kv_committed[m] + p, max_batch, kv_budget)
        if m == 0 or free > best:
            best, best_m = free, m
    return best_m


@njit(cache=True)
def mixing_loads(mi, params):
    """The loads ``(X, Y)`` the mixing reward's terms see on every instance under the reading
    ``params[5]`` (1: split — prefill backlog, decode context; 0: literal — committed
    tokens)."""
    if params[5] != 0.0:
        return mi[WAIT_TOK], mi[KV_USED]
    return mi[LOAD], mi[LOAD]


@njit(cache=True)
def size_partition_pick(small, n_inst, pointers):
    """Dedicated small/large partition: round robin (:func:`round_robin_pick`) over the first
    half of the ``n_inst`` instances for a small request, over the second half for a large one
    (every request on one instance); ``pointers`` (int64, 2: small, large) move in place."""
    half = max(n_inst // 2, 1)
    if small or n_inst == 1:
        g, pointers[0] = round_robin_pick(half, pointers[0])
        return g
    g, pointers[1] = round_robin_pick(n_inst - half, pointers[1])
    return half + g


@njit(cache=True)
def route_builtin(s, code, params, rstate, rng):
    """The registry's instance policies (module docstring): ``(queue position, instance)``."""
    ri, mi, gi = s.ri, s.mi, s.gi
    n_inst = mi.shape[1]
    head = ri[RQ, gi[QH]]
    if code == _RR:  # every instance is eligible: n_inst targets
        g, rstate[0] = round_robin_pick(n_inst, rstate[0])
        return 0, g
    if code == _JSQ:  # params: tokens (0/1), random ties (0/1)
        return 0, jsq_pick(_loads(mi, params[0] != 0.0), n_inst, params[1] != 0.0, rng)
    if code == _RANDOM:
        return 0, uniform_pick(n_inst, rng)
    if code == _P2C:  # params: d, tokens (0/1)
        return 0, power_of_d_pick(_loads(mi, params[1] != 0.0), n_inst, np.int64(params[0]),
                                  rng)
    if code == _MINMIN:
        return _minmin(ri, mi, gi, s.gf)
    if code == _MAXCAP:
        return 0, maxcap_pick(mi[N_RUN] + mi[N_ADM] + mi[N_WAIT], mi[KV_USED] + mi[WAIT_TOK],
                              ri[P, head], gi[MAX_BATCH], gi[BUDGET])
    if code == _MIXING:  # params: ImpactParams.kernel_params()
        x, y = mixing_loads(mi, params)
        return 0, mixing_argmax(ri[P, head], ri[PRED, head], x, y, params)
    # small-large: params: threshold (tokens), size (0: prompt + output, 1: output); rstate:
    # the two round-robin pointers
    size = ri[PRED, head] if params[1] != 0.0 else ri[P, head] + ri[PRED, head]
    small = size < params[0]
    return 0, size_partition_pick(small, n_inst, rstate)


def _loop(s, code, params, rstate, rng):
    """Run ``s`` to the end, routing with ``route_builtin`` (rebound by :func:`routing_loop`);
    returns 0, or -1 when the router answers a position or instance out of range (the caller
    raises)."""
    n_inst = s.mi.shape[1]
    while advance(s):
        while s.gi[QT] > s.gi[QH]:
            pos, target = route_builtin(s, code, params, rstate, rng)
            if pos < 0:
                break
            if target < 0 or target >= n_inst or pos >= s.gi[QT] - s.gi[QH]:
                return -1
            dispatch(s, pos, target)
    return 0


run_builtin = njit(cache=True)(_loop)


def routing_loop(kernel):
    """The routing loop compiled with ``kernel`` (a numba function with
    :func:`route_builtin`'s signature) in place of :func:`route_builtin`: how a user's compiled
    router runs (compiled once per process; not cached)."""
    glb = dict(_loop.__globals__, route_builtin=kernel)
    fn = types.FunctionType(_loop.__code__, glb, "_loop_" + getattr(kernel, "__name__", "user"))
    return njit(fn)
