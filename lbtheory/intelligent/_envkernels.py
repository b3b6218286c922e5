"""numba kernels of the routing environment: the observation vector (the one definition, also
behind :func:`~lbtheory.intelligent.observation` of a view) and the compiled environment step.

The compiled step (:func:`env_step`) applies one action to a
:class:`~lbtheory.intelligent.CompiledClusterSim`'s state — dispatch the head request, then
advance to the next decision when the action waits or the queue emptied — and returns what the
reward needs (whether time advanced, the progress-penalty terms of the active requests in
request order) and writes the next observation and action mask, without building a view. The
environment (:class:`~lbtheory.intelligent.RoutingEnv`) assembles the reward in Python.

Per-request labels of the state (``ri[LABEL0]``: prompt bucket, ``ri[LABEL0 + 1]``:
``n_p`` + decode bucket) make ``mi[HIST0 + b, m]`` the per-instance bucket counts P and D.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._core import (
    ARRIVAL,
    BUDGET,
    FINISH,
    GEN,
    HIST0,
    KV_USED,
    LABEL0,
    LOAD,
    MAX_BATCH,
    N_ON,
    N_RUN,
    NEXT_ARRIVAL,
    NOW,
    PRED,
    QH,
    QT,
    RQ,
    WAIT_TOK,
    P,
    advance,
    dispatch,
    earliest_completion_s,
    fewest_left,
)
from ._impact import mixing_reward_scalar

__all__ = ["OBS_HIGH", "fill_observation", "observe_state", "env_step", "MAX_WAIT_TOL",
           "guidance_h"]

#: upper bound of every observation entry (the entries are scaled to O(1); clipped here).
OBS_HIGH = 1.0e4
#: tolerance of the wait mask's comparison (s).
MAX_WAIT_TOL = 1e-12


@njit(cache=True)
def fill_observation(obs, queue_length, head_prompt, head_bucket, counts, n_p, n_on,
                     kv_committed, max_batch, kv_budget, t_min, head_wait_s, max_wait_s):
    """Write the state vector of a decision into ``obs`` (float32; layout and scales in
    :mod:`lbtheory.intelligent._env`): ``counts[b, m]`` are instance ``m``'s requests in prompt
    bucket ``b < n_p`` and decode bucket ``b - n_p``; ``n_on`` its requests, ``kv_committed``
    its KV in use + waiting prefill (tokens); ``t_min`` T̂_c (s); ``head_wait_s`` the head
    request's wait (s)."""
    m = n_on.size
    n_d = counts.shape[0] - n_p
    obs[:] = 0.0
    obs[0] = queue_length / 64.0
    if queue_length:
        obs[1] = head_prompt / 4096.0
        obs[2 + head_bucket] = 1.0
    k = 2 + n_d
    for i in range(m):
        for b in range(n_p):
            obs[k + i * n_p + b] = counts[b, i] / 16.0
    k += m * n_p
    for i in range(m):
        for b in range(n_d):
            obs[k + i * n_d + b] = counts[n_p + b, i] / 16.0
    k += m * n_d
    for i in range(m):
        cap = min(1.0 - n_on[i] / max_batch, 1.0 - kv_committed[i] / kv_budget)
        obs[k + i] = max(cap, -4.0)
    obs[k + m] = 0.0 if t_min == np.inf else t_min / 10.0
    if queue_length:
        obs[k + m + 1] = head_wait_s / max_wait_s
    for j in range(obs.size):
        obs[j] = min(obs[j], OBS_HIGH)


@njit(cache=True)
def observe_state(s, obs, mask, n_p, n_bins, max_wait_s):
    """The observation and action mask of the current decision of a compiled state (labels
    as in the module docstring)."""
    ri, rf, mi, gi, gf = s.ri, s.rf, s.mi, s.gi, s.gf
    n_inst = mi.shape[1]
    qlen = gi[QT] - gi[QH]
    head_prompt = 0
    head_bucket = 0
    head_wait = 0.0
    now = gf[NOW]
    mask[:] = True
    if qlen:
        h = ri[RQ, gi[QH]]
        head_prompt = ri[P, h]
        head_bucket = ri[LABEL0 + 1, h] - n_p
        head_wait = now - rf[ARRIVAL, h]
        mask[n_inst] = head_wait < max_wait_s - MAX_WAIT_TOL
    fewest = np.zeros(n_inst, np.int64)
    fewest_left(s, fewest)
    t_min = earliest_completion_s(gf, mi[N_RUN], mi[KV_USED], fewest)
    kv_committed = mi[KV_USED] + mi[WAIT_TOK]
    h0 = gi[HIST0]
    fill_observation(obs, qlen, head_prompt, head_bucket, mi[h0:h0 + n_bins], n_p, mi[N_ON],
                     kv_committed, gi[MAX_BATCH], gi[BUDGET], t_min, head_wait, max_wait_s)


@njit(cache=True)
def env_step(s, action, inv_ideal, pred, first_active, terms):
    """Apply one action: ``action >= 0`` sends the head request to that instance; then, when
    the action waits (``-1``) or the queue emptied, advance to the next decision. Returns
    ``(advanced, alive)``; after an advance, ``terms[:k]`` (``k = first_active[1]``) are the
    progress-penalty terms ``(1/T̂_j)(1 − min(1, o_j / max(d̂_j, 1)))`` of the requests arrived
    and not finished by the new epoch, in request order (``first_active[0]``: the lowest
    request id not finished by then; ``pred`` the predicted outputs as float)."""
    ri, rf, gi = s.ri, s.rf, s.gi
    if action >= 0:
        dispatch(s, 0, action)
        if gi[QT] > gi[QH]:
            return False, True
    alive = advance(s)
    now = s.gf[NOW]
    lo = first_active[0]
    while lo < gi[NEXT_ARRIVAL] and rf[FINISH, lo] <= now + 1e-12:
        lo += 1
    first_active[0] = lo
    k = 0
    for v in range(lo, gi[NEXT_ARRIVAL]):
        if not rf[FINISH, v] <= now + 1e-12:
            f = min(1.0, ri[GEN, v] / max(pred[v], 1.0))
            terms[k] = inv_ideal[v] * (1.0 - f)
            k += 1
    first_active[1] = k
    return True, alive


@njit(cache=True)
def guidance_h(s, choice, impact):
    """h = r_mix(choice) − max_l r_mix(l) for the head request (``impact``: grad1, grad2,
    epsilon_s, alpha) — :func:`~lbtheory.intelligent.guidance_penalty` on the state, through
    :func:`~lbtheory.intelligent._impact.mixing_reward_scalar`."""
    ri, mi = s.ri, s.mi
    h = ri[RQ, s.gi[QH]]
    p = float(ri[P, h])
    d = float(ri[PRED, h])
    best = -np.inf
    mine = 0.0
    for m in range(mi.shape[1]):
        r = mixing_reward_scalar(p, d, float(mi[LOAD, m]), impact[0], impact[1], impact[2],
                                 impact[3])
        if r > best:
            best = r
        if m == choice:
            mine = r
    return mine - best
