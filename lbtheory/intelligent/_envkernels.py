"""numba kernels of the routing environment: the observation vector (the one definition, also
behind :func:`~lbtheory.intelligent.observation` of a view) and the compiled environment step.

The compiled step (:func:`env_step`) applies one action to a
:class:`~lbtheory.intelligent.CompiledClusterSim`'s state — dispatch the head request, then
advance to the next decision when the action waits or the queue emptied — and charges the
elapsed interval (:func:`charge_interval`, which the reference engine's environment calls
too: one definition of the progress cost), without building a view. The environment
(:class:`~lbtheory.intelligent.RoutingEnv`) assembles the reward in Python.

Per-request labels of the state (``ri[LABEL0]``: prompt bucket, ``ri[LABEL0 + 1]``:
``n_p`` + decode bucket) make ``mi[HIST0 + b, m]`` the per-instance bucket counts P and D.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._core import (
    ARRIVAL,
    BUDGET,
    EPOCH_S,
    FINISH,
    GEN,
    HIST0,
    KV_USED,
    LABEL0,
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
)
from ._coreview import earliest_completion_s, fewest_left
from ._impact import guidance_penalty_kernel
from ._rkernels import capacity, mixing_loads

#: numba caches a compiled kernel together with the :mod:`._core` functions it calls, but checks
#: only *this* file when deciding whether the cache is stale: bump this whenever ``_core.py``
#: changes (2: chunked prefill; 3: shared preemption and iteration start; 4: swap preemption;
#: 5: swap preemption with chunked prefill).
CORE_REVISION = 5

__all__ = ["OBS_HIGH", "fill_observation", "observe_state", "env_step", "MAX_WAIT_TOL",
           "guidance_h", "charge_interval", "capacity_feature", "all_full", "is_full",
           "bounded_load_cap", "fill_mask"]

#: upper bound of every observation entry (the entries are scaled to O(1); clipped here).
OBS_HIGH = 1.0e4
#: tolerance of the wait mask's comparison (s).
MAX_WAIT_TOL = 1e-12


@njit(cache=True)
def capacity_feature(cap):
    """The capacity entry of the state [R]: ``C`` itself while ``C ≥ 0`` (free room), and
    ``−log(1 − C)`` below (committed work beyond the batch or KV limit, in units of the limit):
    continuous, increasing and never clipped, so an instance ten limits deep still differs
    from one two limits deep (a clip at −4 made them equal)."""
    return cap if cap >= 0.0 else -np.log1p(-cap)


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
        obs[k + i] = capacity_feature(capacity(n_on[i], kv_committed[i], max_batch, kv_budget))
    obs[k + m] = 0.0 if t_min == np.inf else t_min / 10.0
    if queue_length:
        obs[k + m + 1] = head_wait_s / max_wait_s if max_wait_s > 0.0 else 0.0
    for j in range(obs.size):
        obs[j] = min(obs[j], OBS_HIGH)


@njit(cache=True)
def is_full(n_on, kv_committed, max_batch, kv_budget):
    """An instance is full: a full batch or more committed KV (in use + waiting prefill,
    tokens) than its budget (capacity ``C_m ≤ 0``) — it could not start a request now."""
    return capacity(n_on, kv_committed, max_batch, kv_budget) <= 0.0


@njit(cache=True)
def all_full(n_on, kv_committed, max_batch, kv_budget):
    """Every instance is full (:func:`is_full`)."""
    for i in range(n_on.size):
        if not is_full(n_on[i], kv_committed[i], max_batch, kv_budget):
            return False
    return True


@njit(cache=True)
def bounded_load_cap(total_on, n_instances, balance):
    """The bounded-loads cap [R] (Mirrokni, Thorup & Zadimoghaddam 2018): with ``total_on``
    requests on the instances and one more to place, an instance may take it only while it
    holds fewer than ``⌈c (total_on + 1) / m⌉`` (``c = balance ≥ 1``). The least-loaded instance
    holds at most ``⌊total_on / m⌋ < ⌈(total_on + 1) / m⌉``, so one instance is always open."""
    return int(np.ceil(balance * (total_on + 1) / n_instances - 1e-9))


@njit(cache=True)
def fill_mask(mask, queue_length, head_wait_s, max_wait_s, n_on, kv_committed, max_batch,
              kv_budget, only_full, balance):
    """The action mask of a decision [R] (one definition for both engines and the trained
    router; module docstring of :mod:`lbtheory.intelligent._env`), written into ``mask``
    (bool, ``m + 1``). Waiting (the last entry): the head request has waited less than
    ``max_wait_s`` and — with ``only_full`` — every instance is full (:func:`all_full`).
    Routing to instance ``i``: always while it has room (the request starts at once); a full
    instance (:func:`is_full`: the request would queue there) only while it holds fewer
    requests (``n_on``) than :func:`bounded_load_cap` (``balance > 0``; 0: no cap)."""
    m = n_on.size
    mask[:] = True
    if not queue_length:
        return
    mask[m] = head_wait_s < max_wait_s - MAX_WAIT_TOL and (
        not only_full or all_full(n_on, kv_committed, max_batch, kv_budget))
    if balance > 0.0:
        cap = bounded_load_cap(n_on.sum(), m, balance)
        for i in range(m):
            if n_on[i] >= cap and is_full(n_on[i], kv_committed[i], max_batch, kv_budget):
                mask[i] = False


@njit(cache=True)
def observe_state(s, obs, mask, n_p, n_bins, max_wait_s, only_full, balance):
    """The observation and action mask of the current decision of a compiled state (labels
    as in the module docstring)."""
    ri, rf, mi, gi, gf = s.ri, s.rf, s.mi, s.gi, s.gf
    n_inst = mi.shape[1]
    qlen = gi[QT] - gi[QH]
    head_prompt = 0
    head_bucket = 0
    head_wait = 0.0
    now = gf[NOW]
    if qlen:
        h = ri[RQ, gi[QH]]
        head_prompt = ri[P, h]
        head_bucket = ri[LABEL0 + 1, h] - n_p
        head_wait = now - rf[ARRIVAL, h]
    kv_committed = mi[KV_USED] + mi[WAIT_TOK]
    fill_mask(mask, qlen, head_wait, max_wait_s, mi[N_ON], kv_committed, gi[MAX_BATCH],
              gi[BUDGET], only_full, balance)
    fewest = np.zeros(n_inst, np.int64)
    fewest_left(s, fewest)
    t_min = earliest_completion_s(gf, mi[N_RUN], mi[KV_USED], fewest)
    h0 = gi[HIST0]
    fill_observation(obs, qlen, head_prompt, head_bucket, mi[h0:h0 + n_bins], n_p, mi[N_ON],
                     kv_committed, gi[MAX_BATCH], gi[BUDGET], t_min, head_wait, max_wait_s)


@njit(cache=True)
def charge_interval(arrival, finish, gen, pred, inv_ideal, first, n_arrived, t0, t1, horizon_s,
                    paper, epoch_s):
    """The progress cost and discounted completions of the interval ``(t0, t1]`` (s; ``t1 =
    inf``: to the end of the drain): ``(cost, completions)``.

    Every request arrived by ``t1`` (ids ``< n_arrived``) and not finished by ``t0`` is charged
    over the part ``[a, b]`` of the interval it spends in the system (``a = max(t0, arrival)``,
    ``b = min(t1, finish)``), discounted in continuous time from ``t0``:
    ``∫_a^b e^{−(t − t0)/H} dt`` (``b − a`` when ``horizon_s = H`` is inf). ``paper``: weighted
    by the seed's ``(1/T̂_j)(1 − f_j) / epoch_s`` (``f_j = min(1, o_j / max(d̂_j, 1))`` at
    ``t1``; ``inv_ideal`` = 1/T̂_j), i.e. per epoch as THEORY §10 writes it; otherwise weight 1,
    so the cost of a whole episode is the sum of the requests' latencies (s) exactly.
    ``completions`` counts the requests finishing in ``(t0, t1]``, each discounted by
    ``e^{−(finish − t0)/H}``. ``first[0]`` is the lowest id not finished by ``t0`` (kept up to
    date; ``finish`` is NaN until a request finishes)."""
    lo = first[0]
    while lo < n_arrived and finish[lo] <= t0:
        lo += 1
    first[0] = lo
    discount = horizon_s < np.inf
    cost = 0.0
    done = 0.0
    for v in range(lo, n_arrived):
        f = finish[v]
        if f <= t0:
            continue
        a = max(t0, arrival[v])
        b = f if f < t1 else t1
        if b > a:
            if discount:
                w = horizon_s * (np.exp(-(a - t0) / horizon_s) - np.exp(-(b - t0) / horizon_s))
            else:
                w = b - a
            if paper:
                w *= inv_ideal[v] * (1.0 - min(1.0, gen[v] / max(pred[v], 1.0))) / epoch_s
            cost += w
        if f <= t1:
            done += np.exp(-(f - t0) / horizon_s) if discount else 1.0
    return cost, done


@njit(cache=True)
def env_step(s, action, inv_ideal, pred, first, t0, horizon_s, paper, out):
    """Apply one action: ``action >= 0`` sends the head request to that instance; then, when
    the action waits (``-1``) or the queue emptied, advance to the next decision and charge
    ``(t0, new epoch]`` (``(t0, inf)`` when the episode ends: the whole drain) by
    :func:`charge_interval` into ``out = [cost, completions]``. Returns ``(advanced, alive)``
    (``pred``: the predicted outputs as float; ``first``: :func:`charge_interval`'s pointer)."""
    gi = s.gi
    if action >= 0:
        dispatch(s, 0, action)
        if gi[QT] > gi[QH]:
            return False, True
    alive = advance(s)
    t1 = s.gf[NOW] if alive else np.inf
    out[0], out[1] = charge_interval(s.rf[ARRIVAL], s.rf[FINISH], s.ri[GEN], pred, inv_ideal,
                                     first, gi[NEXT_ARRIVAL], t0, t1, horizon_s, paper,
                                     s.gf[EPOCH_S])
    return True, alive


@njit(cache=True)
def guidance_h(s, choice, impact):
    """h = r_mix(choice) − max_l r_mix(l) for the head request (``impact``:
    :meth:`~lbtheory.intelligent.ImpactParams.kernel_params`):
    :func:`~lbtheory.intelligent._impact.guidance_penalty_kernel` on the state's loads, as
    :func:`~lbtheory.intelligent.guidance_penalty` on a view's."""
    ri = s.ri
    h = ri[RQ, s.gi[QH]]
    x, y = mixing_loads(s.mi, impact)
    return guidance_penalty_kernel(choice, ri[P, h], ri[PRED, h], x, y, impact)
