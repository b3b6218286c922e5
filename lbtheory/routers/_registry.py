"""Policy names of the CLI contract → router configs."""

from __future__ import annotations

from typing import Any

from ..errors import TopologyError
from ._affinity import AffinityRouter
from ._aversion import ErrorAversion
from ._baselines import JSQRouter, PowerOfDRouter, RandomRouter, RoundRobinRouter
from ._dlb import DiscreteRouter, FlowRouter
from ._mnlb import MNLBRouter
from ._names import POLICY_NAMES

__all__ = ["POLICY_NAMES", "make_router"]

_COST = {"rif": "rif", "lat": "latency", "grad": "gradient"}


def make_router(name: str, *, error_aversion: bool = False, affinity: bool = False,
                **options: Any) -> Any:
    """The router called ``name`` (one of :data:`POLICY_NAMES`); ``options`` go to its config
    (e.g. ``stepsize=`` for flow routers, ``period_s=`` for MNLB, ``d=`` for p2c);
    ``error_aversion=True`` wraps it in :class:`~lbtheory.routers._aversion.ErrorAversion`,
    ``affinity=True`` (outermost) in :class:`~lbtheory.routers._affinity.AffinityRouter`.

    Raises:
        TopologyError: unknown name (the message lists the valid ones) or unknown option.
    """
    if name not in POLICY_NAMES:
        raise TopologyError(f"policy: unknown policy {name!r}; expected one of "
                            f"{list(POLICY_NAMES)}")
    router = _make(name, options)
    router = ErrorAversion(router) if error_aversion else router
    return AffinityRouter(router) if affinity else router


def _make(name: str, options: dict[str, Any]) -> Any:
    mech, _, cost = name.partition("-")
    try:
        if mech == "disc":
            return DiscreteRouter(cost=_COST[cost], **options)
        if mech == "flow":
            return FlowRouter(cost=_COST[cost], **options)
        cls = {"rand": RandomRouter, "mnlb": MNLBRouter, "rr": RoundRobinRouter,
               "jsq": JSQRouter, "p2c": PowerOfDRouter}[name]
        return cls(**options)
    except TypeError as exc:
        raise TopologyError(f"policy {name!r}: bad option(s) {sorted(options)}: {exc}") from None
