"""DLB cell (root) routers: the six algorithms, Rand, MNLB, round robin, JSQ, power-of-d.

Each router is a frozen config with pure ``init(seed)``, ``observe(state, view, source)`` and
``route(state, view, source, rng) -> (destination, state)`` (the optax pattern, STYLE.md); see
:mod:`lbtheory.routers._base`. Cost signals come from :mod:`lbtheory.costs`, the flow step from
:func:`lbtheory.simplex.flow_update` — nothing is re-coded here. BalanceRoute's decode-slot
schedulers are a different thing and live in :mod:`lbtheory.barrier`.

Names are loaded lazily (like ``lbtheory``'s facade) so that ``lbtheory --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._names import POLICY_NAMES

_EXPORTS = {
    "RouterView": "_base", "mean_network_delay": "_base", "sample_index": "_base",
    "JSQRouter": "_baselines", "PowerOfDRouter": "_baselines", "RandomRouter": "_baselines",
    "RoundRobinRouter": "_baselines", "DEFAULT_STEPSIZE_SCALE": "_dlb",
    "DiscreteRouter": "_dlb", "FlowRouter": "_dlb", "MNLBProgram": "_mnlb",
    "MNLBRouter": "_mnlb", "make_router": "_registry", "ErrorAversion": "_aversion",
    "AffinityRouter": "_affinity",
    "fit_latency_model": "_estimation", "perturb_model": "_estimation",
}

__all__ = ["POLICY_NAMES", *_EXPORTS]


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'lbtheory.routers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
