"""Headroom routers (evaluation only): how much any router could gain on a workload.

``clairvoyant`` — a rollout router with true output lengths and the future arrivals: at each
decision it tries every instance for the head of the router queue, finishes the episode from
there with JSQ (request counts, lowest index on ties: the queue still routed at this epoch, every
later epoch too) and keeps the instance whose finished episode has the lowest total E2E.

``oracle-defer`` — the same with deferral: one more candidate leaves the whole router queue
waiting to the next epoch (the paper's a = m) and finishes with JSQ from there; when deferral
wins, the epoch ends.

Both look at the exact future the simulator will produce (they copy the compiled simulator's
state), so they are an upper bound on what a one-step-greedy router with perfect knowledge finds
— not the optimum (a rollout policy improves on its base policy, JSQ, but need not be optimal).
Cost: decisions × candidates × one episode; evaluation only (reduce ``--requests`` if slow).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..workloads import Workload
from ._compiled import CompiledClusterSim
from ._core import ARRIVAL, FINISH, QH, QT, CoreState, advance, dispatch
from ._engine import ClusterConfig
from ._rkernels import CODES, route_builtin, run_builtin

__all__ = ["HEADROOM_POLICIES", "simulate_headroom"]

#: the evaluation-only routers: name -> whether deferral is a candidate.
HEADROOM_POLICIES = {"clairvoyant": False, "oracle-defer": True}

_JSQ = CODES["jsq"]


@njit(cache=True)
def _copy(s):
    return CoreState(s.ri.copy(), s.rf.copy(), s.mi.copy(), s.gi.copy(), s.gf.copy(), s.log_i,
                     s.log_f)


@njit(cache=True)
def _route_queue(s, params, rstate, rng):
    """Route the whole router queue at this epoch with JSQ."""
    while s.gi[QT] > s.gi[QH]:
        pos, m = route_builtin(s, _JSQ, params, rstate, rng)
        dispatch(s, pos, m)


@njit(cache=True)
def _total_e2e(s):
    return np.sum(s.rf[FINISH] - s.rf[ARRIVAL])


@njit(cache=True)
def _rollout_loop(s, defer, rng):
    """Run ``s`` to the end with the rollout router (module docstring); returns decisions.
    ``rng``: JSQ's (with lowest-index ties it draws nothing)."""
    params = np.zeros(2)
    rstate = np.zeros(1, np.int64)
    n_inst = s.mi.shape[1]
    decisions = 0
    while advance(s):
        while s.gi[QT] > s.gi[QH]:
            decisions += 1
            best = np.inf
            best_m = 0
            for m in range(n_inst):
                c = _copy(s)
                dispatch(c, 0, m)
                _route_queue(c, params, rstate, rng)
                run_builtin(c, _JSQ, params, rstate, rng)
                v = _total_e2e(c)
                if v < best:
                    best = v
                    best_m = m
            if defer:
                c = _copy(s)
                run_builtin(c, _JSQ, params, rstate, rng)  # advances first: the queue waits
                if _total_e2e(c) < best:
                    break
            dispatch(s, 0, best_m)
    return decisions


def simulate_headroom(workload: Workload, config: ClusterConfig, policy: str = "clairvoyant",
                      predicted_output: np.ndarray | None = None):
    """Serve ``workload`` with a headroom router (``"clairvoyant"`` or ``"oracle-defer"``) on
    the compiled engine; an :class:`~lbtheory.intelligent.InstanceResult`. The rollouts use
    the true lengths whatever ``predicted_output`` says (it only fills the view's loads)."""
    from ._simulate import result_of

    if policy not in HEADROOM_POLICIES:
        from ..errors import ParameterError

        raise ParameterError(f"policy must be one of {', '.join(HEADROOM_POLICIES)}, got "
                             f"{policy!r}")
    sim = CompiledClusterSim(workload, config, predicted_output)
    _rollout_loop(sim.state, HEADROOM_POLICIES[policy], np.random.default_rng(0))
    return result_of(sim, policy)
