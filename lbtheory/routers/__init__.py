"""Routers: the one router contract, the baselines every simulator shares, and DLB's cell routers.

* :mod:`._contract` — the contract (a frozen config with pure ``init`` / ``observe`` /
  ``route``), :class:`Assignment` and the :class:`TargetView` every simulator's view implements;
* :mod:`._baselines` — random (DLB's Rand), round robin, JSQ (by requests or tokens) and power of
  d, written once for all three simulators, with their numba kernels for compiled engines
  (``round_robin_pick``, ``uniform_pick``, ``jsq_pick``, ``power_of_d_pick``);
* :mod:`._view` — the DLB cell view (:class:`CellView`) and the cost helpers of the cell routers;
* :mod:`._dlb` — DLB's six algorithms (discrete / flow × RIF / latency / gradient);
* :mod:`._mnlb`, :mod:`._aversion`, :mod:`._affinity`, :mod:`._estimation` — MNLB, error aversion,
  affinity routing and online latency estimation.

Cost signals come from :mod:`lbtheory.costs`, the flow step from
:func:`lbtheory.simplex.flow_update` — nothing is re-coded here. Routers are made by name through
the one policy registry, :mod:`lbtheory.registry`. Names are loaded lazily (like ``lbtheory``'s
facade) so that ``lbtheory --help`` stays fast. ``__all__`` is the public page; the engines'
internal kernels and cost tables (``integers_below``, ``cost_matrix`` …) stay importable from
here but are not part of it.
"""

#: name -> private module defining it (loaded on first use).
_EXPORTS = {
    "Router": "_contract", "TargetView": "_contract", "Assignment": "_contract",
    "Decision": "_contract", "NoState": "_contract", "sample_index": "_contract",
    "cumulative": "_contract", "Stateless": "_contract", "IgnoresObservations": "_contract",
    "IdenticalTargets": "_contract", "KernelSpec": "_kernel", "RoundObserver": "_contract",
    "SessionRouter": "_contract", "KernelProvider": "_contract", "Driver": "_drive",
    "RandomRouter": "_baselines", "RoundRobinRouter": "_baselines", "JSQRouter": "_baselines",
    "PowerOfDRouter": "_baselines", "Ties": "_baselines", "Load": "_baselines",
    "round_robin_pick": "_baselines", "uniform_pick": "_baselines", "jsq_pick": "_baselines",
    "power_of_d_pick": "_baselines", "choice_without_replacement": "_baselines",
    "integers_below": "_baselines", "power_of_d_pick_into": "_baselines",
    "sample_index_kernel": "_contract", "cumulative_kernel": "_contract",
    "CellView": "_view", "CostTables": "_view", "mean_network_delay": "_view",
    "cost_row": "_view", "cost_matrix": "_view",
    "DEFAULT_STEPSIZE_SCALES": "_dlb", "DiscreteRouter": "_dlb", "FlowRouter": "_dlb",
    "MNLBProgram": "_mnlb", "MNLBRouter": "_mnlb", "MNLBState": "_mnlb",
    "ErrorAversion": "_aversion",
    "AffinityRouter": "_affinity",
    "fit_latency_model": "_estimation", "perturb_model": "_estimation",
    "scale_to_replicas": "_estimation", "FitFamily": "_estimation",
    "SOFTNESS_FLOOR": "_estimation", "latency_noise": "_estimation",
}
#: importable, but internal plumbing of the engines and routers (not in ``__all__``).
_INTERNAL = frozenset({
    "cumulative", "cumulative_kernel", "sample_index_kernel", "choice_without_replacement",
    "integers_below", "power_of_d_pick_into", "CostTables", "mean_network_delay", "cost_row",
    "cost_matrix", "MNLBProgram",
})
#: old name -> new name: deprecated aliases kept for one release.
_DEPRECATED = {"RouterView": "CellView"}

__all__ = [name for name in _EXPORTS if name not in _INTERNAL]


def __getattr__(name: str) -> object:
    if name in _DEPRECATED:
        new = _DEPRECATED[name]
        from ..errors import warn_deprecated

        warn_deprecated(f"lbtheory.routers.{name}", f"lbtheory.routers.{new}")
        return __getattr__(new)
    if name in ("make_router", "POLICY_NAMES"):  # moved up to the one registry (0.2)
        raise AttributeError(f"lbtheory.routers.{name} moved to lbtheory.registry.{name} (the "
                             f"one policy registry of every simulator)")
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'lbtheory.routers' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``)."""
    return sorted(__all__)
