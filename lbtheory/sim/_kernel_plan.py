"""Which router and scenario the compiled engine runs, and with which kernel parameters.

:func:`plan_kernel` maps a router of :mod:`lbtheory.routers` (exact types only: a subclass may
change behaviour the kernel would not see) to a :class:`KernelPlan`, or returns the reason it
cannot, which ``simulate(engine="auto")`` records in ``SimResult.engine_note`` before running the
reference engine. Supported: the registry's cell policies (random/rand, rr, jsq, p2c, the six
DLB routers, mnlb), a :class:`~lbtheory.sim.KernelRouter`, error aversion around any of them and
affinity outermost; every scenario (the three server kinds, both leaf policies, bursts,
outages, estimation, affinity).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..costs import CostKind
from ..routers import (
    AffinityRouter,
    CellView,
    DiscreteRouter,
    ErrorAversion,
    FlowRouter,
    JSQRouter,
    Load,
    MNLBRouter,
    PowerOfDRouter,
    RandomRouter,
    RoundRobinRouter,
    Ties,
)
from ..simplex import TIE_RTOL
from ..workloads import Workload
from ._kernel_router import KernelRouter
from ._kernels_routers import (
    K_AFFINITY,
    K_AVERSION,
    K_D,
    K_DISC,
    K_FLOW,
    K_JSQ,
    K_KERNEL,
    K_MNLB,
    K_NEEDS_W,
    K_OUTAGE_PAUSE,
    K_PER_REPLICA,
    K_POD,
    K_RAND,
    K_RIF,
    K_RR,
    K_TIES_RANDOM,
    K_USER,
    K_USES_F,
    K_USES_F_LAT,
    N_K,
    N_R,
    R_AFF_SAVING,
    R_AV_PERIOD,
    R_ETA,
    R_KAPPA_DOWN,
    R_KAPPA_UP,
    R_MARGIN,
    R_P_EXPLORE,
    R_RTOL,
)
from ._scenario import Scenario

__all__ = ["KernelPlan", "plan_kernel"]

#: numpy's ``choice(replace=False)`` switches algorithm above this population (the p2c kernel
#: reproduces the one below it).
_FLOYD_MAX_POP = 10_000


@dataclasses.dataclass(frozen=True)
class KernelPlan:
    """How the compiled engine runs a router: kernel parameters and the Python-side pieces."""

    ip: np.ndarray                 # int64 parameters (K_* of _kernels_routers)
    fp: np.ndarray                 # float64 parameters (R_*)
    cost: CostKind | None          # cost of a discrete / flow router
    base: Any                      # the innermost router (MNLB's LP, a user's kernels)
    user_observe: Any = None
    user_route: Any = None


def _unwrap(router: Any) -> tuple[Any, Any, Any] | str:
    """(affinity, aversion, base): affinity outermost, then error aversion, or a reason."""
    affinity = aversion = None
    r = router
    if type(r) is AffinityRouter:
        affinity, r = r, r.router
    if type(r) is ErrorAversion:
        aversion, r = r, r.router
    if type(r) in (AffinityRouter, ErrorAversion):
        return (f"{type(r).__name__} inside another wrapper: the compiled engine runs affinity "
                f"(outermost) around error aversion around a router")
    return affinity, aversion, r


def plan_kernel(sc: Scenario, router: Any, arrivals: Workload) -> KernelPlan | str:
    """The :class:`KernelPlan` of ``router`` on ``sc``, or why the compiled engine cannot run
    it (a sentence)."""
    net = sc.network
    if net.n > _FLOYD_MAX_POP:
        return f"{net.n} cells: the compiled engine runs at most {_FLOYD_MAX_POP}"
    src = np.unique(arrivals.source) if arrivals.source is not None and len(arrivals) else []
    sources = sorted({int(s) for s in src} | {i for i in range(net.n)
                                             if net.arrival_rates[i] > 0})
    dead = [i for i in sources if not net.adjacency[i].any()]
    if dead:
        return f"source cell index {dead[0]} reaches no cell (the reference engine reports it)"
    parts = _unwrap(router)
    if isinstance(parts, str):
        return parts
    affinity, aversion, base = parts
    ip, fp = np.zeros(N_K, dtype=np.int64), np.zeros(N_R)
    fp[R_RTOL] = TIE_RTOL
    cost = None
    kind = type(base)
    user = (None, None)
    if kind is RandomRouter:
        ip[K_KERNEL] = K_RAND
    elif kind is RoundRobinRouter:
        ip[K_KERNEL] = K_RR
    elif kind in (JSQRouter, PowerOfDRouter):
        if base.load is not Load.REQUESTS:
            return f"{base.name}: load={base.load.value!r} (cells report requests, not tokens)"
        ip[K_KERNEL] = K_JSQ if kind is JSQRouter else K_POD
        ip[K_PER_REPLICA] = bool(base.per_replica)
        ip[K_TIES_RANDOM] = kind is JSQRouter and base.ties is Ties.RANDOM
        ip[K_D] = base.d if kind is PowerOfDRouter else 0
        ip[K_NEEDS_W] = 1
    elif kind in (DiscreteRouter, FlowRouter):
        cost = base.cost
        ip[K_KERNEL] = K_DISC if kind is DiscreteRouter else K_FLOW
        ip[K_NEEDS_W] = ip[K_USES_F] = 1
        ip[K_RIF] = cost is CostKind.RIF
        if kind is FlowRouter:  # η as FlowRouter fixes it on its first view
            fp[R_ETA] = base.eta(CellView(time=0.0, workload=np.zeros(net.n),
                                          replicas=np.ones(net.n), delays=net.delays,
                                          mask=net.adjacency,
                                          probe_period_s=sc.probe_period_s))
    elif kind is MNLBRouter:
        ip[K_KERNEL] = K_MNLB
    elif kind is KernelRouter:
        ip[K_KERNEL] = K_USER
        ip[K_NEEDS_W] = 1
        user = (base.observe_kernel, base.route_kernel)
    else:
        return (f"{getattr(router, 'name', type(router).__name__)}: {kind.__name__} has no "
                f"compiled kernel (a Python router; see lbtheory.sim.KernelRouter)")
    if aversion is not None:
        ip[K_AVERSION] = 1
        fp[R_AV_PERIOD], fp[R_KAPPA_UP], fp[R_KAPPA_DOWN] = (aversion.period_s,
                                                             aversion.kappa_up,
                                                             aversion.kappa_down)
        fp[R_MARGIN], fp[R_P_EXPLORE] = aversion.margin, aversion.p_explore
    if affinity is not None:
        ip[K_AFFINITY] = ip[K_NEEDS_W] = ip[K_USES_F_LAT] = 1
        fp[R_AFF_SAVING] = affinity.saving_s
    models_used = ip[K_USES_F_LAT] or (ip[K_USES_F] and not ip[K_RIF])
    ip[K_OUTAGE_PAUSE] = bool(models_used and sc.estimation is None and sc.outages)
    return KernelPlan(ip=ip, fp=fp, cost=cost, base=base, user_observe=user[0],
                      user_route=user[1])
