"""DLB discrete-event cluster simulator: cells of servers, stale probes, routers, bursts, outages.

:func:`simulate_cells` (``lbtheory.simulate_cells``; :func:`simulate` is the same function)
runs one router (the contract of :mod:`lbtheory.routers`, made by name with
:func:`lbtheory.registry.make_router`) on a :class:`Scenario`; pass the same arrivals (a
:class:`~lbtheory.workloads.Workload` with a ``source`` column, from :func:`generate_arrivals` or
:func:`arrivals_from_trace`) to compare policies on identical requests;
:func:`appendix_b_scenario` draws DLB's Appendix-B scenarios (THEORY §11.1). The Appendix-B
experiment protocol itself (cells of the sweep) lives with its experiment, in
``experiments/_appendix_b_protocol.py``.

Private one-concept modules: ``_scenario`` (scenario files), ``_arrivals`` (seeded requests),
``_records`` (clock and per-request records), ``_servers`` (leaves and the three server kinds),
``_probes`` (probe rounds and the models routers see), ``_engine`` (the reference loop),
``_result``, ``_appendix_b`` (the scenario generator), ``_simulate`` (:func:`simulate`: limits and
the choice of engine); the compiled engine (numba, issue 21): ``_kernel_plan`` (which routers it
runs), ``_kernels_state`` / ``_kernels_servers`` / ``_kernels_routers`` / ``_kernels_loop`` (the
kernels), ``_compiled`` (its driver) and ``_kernel_router`` (:class:`KernelRouter`, a user's
compiled router).

Engines: ``simulate(..., engine="auto")`` runs the compiled engine when it supports the router
(the registry's cell policies, error aversion, affinity, a :class:`KernelRouter`) and the
reference engine otherwise (``SimResult.engine`` / ``engine_note`` say which and why);
``engine="reference"`` picks the reference. Both give the same per-request records.
"""

from ._appendix_b import (
    APPENDIX_B_PROBING,
    APPENDIX_B_RATE_VARIATION,
    EVENT_WINDOW,
    NOISE_MODES,
    appendix_b_scenario,
)
from ._arrivals import (
    arrivals_from_trace,
    generate_arrivals,
    interval_counts,
    rate_profile,
    rate_variation_from_counts,
    seed_streams,
    with_sessions,
)
from ._kernel_router import KernelRouter
from ._result import SimResult
from ._scenario import (
    Affinity,
    Burst,
    Estimation,
    LeafPolicy,
    ModelNoise,
    Outage,
    Probing,
    RateVariation,
    Scenario,
    ServerKind,
    ServerSpec,
    TokenDist,
    load_scenario,
    scenario_from_dict,
)
from ._simulate import Engine, kernels_cached, simulate, simulate_cells, warm_up

__all__ = ["simulate_cells", "simulate", "Engine", "SimResult", "Scenario", "ServerSpec",
           "ServerKind", "LeafPolicy", "TokenDist", "Burst", "Outage", "Affinity",
           "RateVariation", "Probing", "ModelNoise", "Estimation", "load_scenario",
           "scenario_from_dict",
           "generate_arrivals", "arrivals_from_trace", "with_sessions", "seed_streams",
           "appendix_b_scenario",
           "EVENT_WINDOW", "APPENDIX_B_RATE_VARIATION", "APPENDIX_B_PROBING", "NOISE_MODES",
           "KernelRouter", "rate_profile",
           "rate_variation_from_counts", "interval_counts", "warm_up", "kernels_cached"]
