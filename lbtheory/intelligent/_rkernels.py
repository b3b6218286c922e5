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
from ._impact import mixing_reward_scalar
from ._timing import iteration_seconds

#: numba caches a compiled kernel together with the :mod:`._core` functions it calls, but checks
#: only *this* file when deciding whether the cache is stale: bump this whenever ``_core.py``
#: changes (2: chunked prefill; 3: shared preemption and iteration start).
CORE_REVISION = 3

__all__ = ["CODES", "route_builtin", "run_builtin", "routing_loop", "mixing_at"]

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
def _ect(mi, coef, m, p, d):
    """Min-Min's estimated completion time of a (p, d) request on instance ``m`` (s)."""
    w = float(mi[WAIT_TOK, m])
    pf = float(p)
    n = float(mi[N_RUN, m] + mi[N_ADM, m])
    kv = mi[KV_USED, m]
    if mi[WAIT_TOK, m] > 0:
        first = iteration_seconds(coef, w + pf, w * w + pf * pf, n, float(kv))
    else:
        first = iteration_seconds(coef, pf, pf * pf, n, float(kv))
    return first + d * iteration_seconds(coef, 0.0, 0.0, n + 1.0, (kv + p) + d / 2)


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
def _maxcap(mi, gi, p):
    best = -np.inf
    best_m = 0
    for m in range(mi.shape[1]):
        a = 1.0 - (mi[N_RUN, m] + mi[N_ADM, m] + mi[N_WAIT, m] + 1) / gi[MAX_BATCH]
        b = 1.0 - (mi[KV_USED, m] + mi[WAIT_TOK, m] + p) / gi[BUDGET]
        free = min(a, b)
        if m == 0 or free > best:
            best, best_m = free, m
    return best_m


@njit(cache=True)
def mixing_at(mi, m, p, d, params):
    """r_mix of a (p, d) request on instance ``m`` (``params``:
    :meth:`~lbtheory.intelligent.ImpactParams.kernel_params`; the loads of its reading)."""
    if params[5] != 0.0:  # split: prefill backlog, decode context
        x = float(mi[WAIT_TOK, m])
        y = float(mi[KV_USED, m])
    else:
        x = y = float(mi[LOAD, m])
    return mixing_reward_scalar(float(p), float(d), x, y, params[0], params[1], params[2],
                                params[3], params[4])


@njit(cache=True)
def _mixing(mi, p, d, params):
    best = -np.inf
    best_m = 0
    for m in range(mi.shape[1]):
        r = mixing_at(mi, m, p, d, params)
        if m == 0 or r > best:
            best, best_m = r, m
    return best_m


@njit(cache=True)
def route_builtin(s, code, params, rstate, rng):
    """The registry's instance policies (module docstring): ``(queue position, instance)``."""
    ri, mi, gi = s.ri, s.mi, s.gi
    n_inst = mi.shape[1]
    head = ri[RQ, gi[QH]]
    if code == _RR:
        g, rstate[0] = round_robin_pick(np.ones(n_inst, np.bool_), rstate[0])
        return 0, g
    if code == _JSQ:  # params: tokens (0/1), random ties (0/1)
        return 0, jsq_pick(_loads(mi, params[0] != 0.0), np.ones(n_inst, np.bool_),
                           params[1] != 0.0, rng)
    if code == _RANDOM:
        return 0, uniform_pick(np.ones(n_inst, np.bool_), rng)
    if code == _P2C:  # params: d, tokens (0/1)
        return 0, power_of_d_pick(_loads(mi, params[1] != 0.0), np.ones(n_inst, np.bool_),
                                  np.int64(params[0]), rng)
    if code == _MINMIN:
        return _minmin(ri, mi, gi, s.gf)
    if code == _MAXCAP:
        return 0, _maxcap(mi, gi, ri[P, head])
    if code == _MIXING:  # params: ImpactParams.kernel_params()
        return 0, _mixing(mi, ri[P, head], ri[PRED, head], params)
    # small-large: params: threshold (tokens); rstate: the two round-robin positions
    half = max(n_inst // 2, 1)
    if ri[P, head] + ri[PRED, head] < params[0] or n_inst == 1:
        g = rstate[0] % half
        rstate[0] += 1
        return 0, g
    g = half + rstate[1] % (n_inst - half)
    rstate[1] += 1
    return 0, g


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
