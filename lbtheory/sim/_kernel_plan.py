"""Which router and scenario the compiled engine runs, and with which kernel parameters.

:func:`plan_kernel` maps a router to a :class:`KernelPlan`, or returns the reason it cannot,
which ``simulate(engine="auto")`` records in ``SimResult.engine_note`` before running the
reference engine. The kernel of a root router comes from its policy registry entry
(:func:`lbtheory.registry.compiled_kernel`, by exact router type: a subclass may change
behaviour the kernel would not see) or from the router's own ``kernel_spec(scenario)`` (a
:class:`~lbtheory.sim.KernelRouter`); error aversion around it and affinity outermost are
handled here. Every scenario runs (the three server kinds, both leaf policies, bursts, outages,
estimation, affinity).

The ``plan_*`` functions are the registry's cell kernels (``kernels={"cells": ...}``): each
takes ``(router, scenario)`` and answers a :class:`Builtin` (kernel parameters) or a reason.
A user's kernel answers a :class:`~lbtheory.routers.KernelSpec` instead (``K_USER``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from ..costs import CostKind
from ..errors import ParameterError
from ..registry import Simulator, compiled_kernel
from ..routers import (
    AffinityRouter,
    CellView,
    ErrorAversion,
    FlowRouter,
    JSQRouter,
    KernelProvider,
    KernelSpec,
    Load,
    PowerOfDRouter,
    Ties,
)
from ..simplex import TIE_RTOL
from ..workloads import Workload
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

__all__ = ["KernelPlan", "plan_kernel", "Builtin"]

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
    user_state: np.ndarray | None = None   # a user kernel's initial state (copied per run)


class Builtin(NamedTuple):
    """A built-in cell kernel: ``ip`` / ``fp`` entries (``K_*`` / ``R_*`` -> value)."""

    ip: dict[int, int]
    fp: dict[int, float] = {}


def plan_random(router: Any, sc: Scenario) -> Builtin:
    """:class:`~lbtheory.routers.RandomRouter` (∝ probed replicas)."""
    return Builtin({K_KERNEL: K_RAND})


def plan_rr(router: Any, sc: Scenario) -> Builtin:
    """:class:`~lbtheory.routers.RoundRobinRouter`."""
    return Builtin({K_KERNEL: K_RR})


def plan_queue(router: Any, sc: Scenario) -> Builtin | str:
    """:class:`~lbtheory.routers.JSQRouter` / :class:`~lbtheory.routers.PowerOfDRouter` on
    the probed requests."""
    if router.load is not Load.REQUESTS:
        return f"{router.name}: load={router.load.value!r} (cells report requests, not tokens)"
    jsq = type(router) is JSQRouter
    return Builtin({K_KERNEL: K_JSQ if jsq else K_POD, K_PER_REPLICA: bool(router.per_replica),
                    K_TIES_RANDOM: jsq and router.ties is Ties.RANDOM,
                    K_D: router.d if type(router) is PowerOfDRouter else 0, K_NEEDS_W: 1})


def plan_dlb(router: Any, sc: Scenario) -> Builtin:
    """DLB's discrete and flow routers (η as :class:`~lbtheory.routers.FlowRouter` fixes it on
    its first view)."""
    flow = type(router) is FlowRouter
    ip = {K_KERNEL: K_FLOW if flow else K_DISC, K_NEEDS_W: 1, K_USES_F: 1,
          K_RIF: router.cost is CostKind.RIF}
    if not flow:
        return Builtin(ip)
    net = sc.network
    eta = router.eta(CellView(time=0.0, workload=np.zeros(net.n), replicas=np.ones(net.n),
                              delays=net.delays, mask=net.adjacency,
                              probe_period_s=sc.probe_period_s))
    return Builtin(ip, {R_ETA: eta})


def plan_mnlb(router: Any, sc: Scenario) -> Builtin:
    """MNLB: held weights in the kernel, the LP solved by the driver every period."""
    return Builtin({K_KERNEL: K_MNLB})


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
    planner = compiled_kernel(base, Simulator.CELLS)
    if planner is not None:
        out = planner(base, sc)
    elif isinstance(base, KernelProvider):
        out = base.kernel_spec(sc)
    else:
        return (f"{getattr(router, 'name', type(router).__name__)}: {type(base).__name__} has "
                f"no compiled kernel (a Python router; see lbtheory.routers.KernelSpec)")
    if isinstance(out, str):
        return out
    spec, cost = None, None
    if isinstance(out, KernelSpec):
        spec = out
        ip[K_KERNEL], ip[K_NEEDS_W] = K_USER, 1
    elif isinstance(out, Builtin):
        for k, v in out.ip.items():
            ip[k] = v
        for k, v in out.fp.items():
            fp[k] = v
        cost = base.cost if ip[K_KERNEL] in (K_DISC, K_FLOW) else None
    else:
        raise ParameterError(f"{getattr(router, 'name', type(router).__name__)}: its cell "
                             f"kernel function returned {type(out).__name__}, expected a "
                             f"KernelSpec (lbtheory.routers.KernelSpec) or a reason (str)")
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
    return KernelPlan(ip=ip, fp=fp, cost=cost, base=base,
                      user_observe=None if spec is None else spec.observe,
                      user_route=None if spec is None else spec.route,
                      user_state=None if spec is None else spec.fresh_state())
