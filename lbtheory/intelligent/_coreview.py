"""Read-only kernels over the compiled simulator's state (:mod:`._core`) for the router's view
and the environment's observation: T̂_c, the fewest output tokens left per instance, the ids of
an instance's queues."""

from __future__ import annotations

import numpy as np
from numba import njit

from ._core import _KERNEL, BATCH0, GEN, N_RUN, NXT, PRED
from ._timing import iteration_seconds

__all__ = ["earliest_completion_s", "fewest_left", "chain_ids"]


@njit(**_KERNEL)
def earliest_completion_s(coef, n_decode, kv_used, fewest):
    """T̂_c [R]: min over instances with decoding requests (``n_decode[m] > 0``) of
    ``fewest[m]`` (the fewest predicted output tokens left, at least 1) × the instance's
    current decode iteration time (s); inf when nothing decodes."""
    best = np.inf
    for m in range(len(n_decode)):
        if n_decode[m] > 0:
            t = fewest[m] * iteration_seconds(coef, 0.0, 0.0, float(n_decode[m]),
                                              float(kv_used[m]))
            if t < best:
                best = t
    return best


@njit(**_KERNEL)
def fewest_left(s, out):
    """Per instance, the fewest predicted output tokens left (at least 1) among its running
    (decoding) requests, into ``out``; 0 where none runs."""
    ri, mi = s.ri, s.mi
    for m in range(mi.shape[1]):
        best = 0
        for i in range(mi[N_RUN, m]):
            v = mi[BATCH0 + i, m]
            left = max(ri[PRED, v] - ri[GEN, v], 1)
            if best == 0 or left < best:
                best = left
        out[m] = best


@njit(**_KERNEL)
def chain_ids(s, v, out):
    """The requests of a queue from its head ``v`` (the waiting queue of instance ``m`` from
    ``mi[WHEAD, m]``, its swapped queue from ``mi[SHEAD, m]``), into ``out``; returns how
    many."""
    k = 0
    while v >= 0:
        out[k] = v
        k += 1
        v = s.ri[NXT, v]
    return k
