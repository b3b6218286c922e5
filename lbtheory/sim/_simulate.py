"""``simulate``: one run of one router on a scenario, on the compiled or the reference engine.

Two engines run the same model (:mod:`._engine`):

* **compiled** (:mod:`._compiled`, numba) — the event loop, servers, probes and the registry's
  cell routers in compiled code; the default whenever it supports the router
  (:mod:`._kernel_plan`);
* **reference** (:mod:`._engine`, a plain ``heapq`` loop) — runs every router of the contract,
  including a user's own Python routers.

``engine="auto"`` (default) takes the compiled engine when it supports the router and the
reference otherwise, saying why in ``SimResult.engine_note``; ``"compiled"`` refuses what it
cannot run; ``"reference"`` always runs the reference. Same scenario, router, seed and arrivals
⇒ both engines give the same per-request records, bit for bit (they share the random streams).

Limits, checked before anything is generated (the house's, naming the limit):
:meth:`Scenario.check_run` (probe rounds, refits, the clock's resolution, the memory of the
expected arrivals under ``LBTHEORY_MAX_MEMORY_GB``) and the memory of the sampled workload
series; the compiled engine also refuses a cost table beyond that memory limit.
"""

from __future__ import annotations

import time as _time
from typing import Any

import numpy as np

from .._checks import Seed, as_seed, check_int, check_memory, check_option, check_real
from ..errors import Engine, ParameterError
from ..workloads import Workload
from ._arrivals import generate_arrivals, seed_streams
from ._compiled import kernels_cached, run_compiled
from ._engine import run_reference
from ._kernel_plan import plan_kernel
from ._result import SimResult, build_result
from ._scenario import Scenario
from ._staleness import probe_ages

__all__ = ["simulate_cells", "simulate", "Engine", "DEFAULT_SERIES_POINTS", "warm_up",
           "kernels_cached"]

#: number of points of the sampled workload series when no period is given.
DEFAULT_SERIES_POINTS = 400


def simulate_cells(scenario: Scenario, router: Any, *, duration_s: float, seed: Seed,
             arrivals: Workload | None = None, policy: str | None = None,
             record_period_s: float | None = None, engine: Engine | str = Engine.AUTO,
             record_routing_every: int = 0) -> SimResult:
    """Simulate ``router`` on ``scenario`` for ``duration_s`` seconds.

    Args:
        scenario: cells, servers, delays, request sizes, bursts and outages.
        router: a router (the contract of :mod:`lbtheory.routers`: ``init`` / ``observe`` /
            ``route``), e.g. ``lbtheory.registry.make_router("flow-grad")``, or a
            :class:`~lbtheory.sim.KernelRouter`.
        duration_s: horizon (s); arrivals in [0, duration).
        seed: seeds arrivals (shared by every policy), the router's and the leaf's draws: an
            int, or a ``numpy.random.Generator`` (one int is drawn from it and recorded).
        arrivals: pre-generated requests with a ``source`` column (default:
            ``generate_arrivals(scenario, duration, seed)``).
        policy: name recorded in the result (default ``router.name``).
        record_period_s: sampling period of the workload series (default duration/400).
        engine: ``"auto"`` (compiled when supported, else reference), ``"compiled"`` or
            ``"reference"`` (module docstring).
        record_routing_every: record a flow router's routing rows every this many probe rounds
            (``SimResult.routing_t`` / ``routing_x``); 0 = never.

    Returns:
        A :class:`SimResult`; same inputs ⇒ bit-identical result (except ``wall_seconds``) on
        either engine; ``SimResult.engine`` says which ran.

    Raises:
        ParameterError: a bad duration, seed, record period or engine, arrivals without sources,
            ``engine="compiled"`` for a router it cannot run (the reason), or a run over the
            limits of the module docstring (named). DataFormatError: a burst or outage outside
            the horizon, too many probe rounds or refits. TopologyError: a router that breaks
            residency. SolverError: a broken conservation invariant (a simulator bug).
    """
    T = check_real(duration_s, "duration_s", unit="s", low=0.0, low_open=True)
    seed = as_seed(seed)
    engine = check_option(Engine, engine, "engine")
    every = check_int(record_routing_every, "record_routing_every", low=0)
    scenario.check_horizon(T)
    if record_period_s is not None:
        check_real(record_period_s, "record_period_s", unit="s", low=0.0, low_open=True)
    period = record_period_s or T / DEFAULT_SERIES_POINTS
    check_real(period, "record_period_s", unit="s", low=0.0, low_open=True)
    scenario.check_run(T)
    check_memory(T / period * scenario.network.n * 8.0,
                 f"a workload series sampled every {period:g} s over {T:g} s")
    wall0 = _time.perf_counter()
    if arrivals is None:
        arrivals = generate_arrivals(scenario, T, seed)
    elif arrivals.source is None and len(arrivals):
        raise ParameterError("arrivals: the cell simulator needs each request's source cell "
                             "(Workload.source); see lbtheory.sim.arrivals_from_trace")
    plan, note = None, ""
    if engine is not Engine.REFERENCE:
        plan = plan_kernel(scenario, router, arrivals)
        if isinstance(plan, str):
            if engine is Engine.COMPILED:
                raise ParameterError(f"engine='compiled' cannot run this: {plan}; use "
                                     f"engine='auto' or 'reference'")
            plan, note = None, plan
    streams = seed_streams(seed)
    if plan is None:
        rr = run_reference(scenario, router, T, streams, arrivals, period, every)
    else:
        rr = run_compiled(scenario, router, plan, T, streams, arrivals, period, every)
    R = rr.requests
    n_arr = len(arrivals.arrival_s)
    src = arrivals.source if arrivals.source is not None else np.zeros(n_arr, dtype=np.int64)
    # the whole arrays (not slices): the policies of one cell share them, and the answer
    ages = probe_ages(scenario, streams[5], arrivals.arrival_s, src, T)[:R]
    return build_result(scenario, arrivals, T, rr,
                        policy=policy or getattr(router, "name", type(router).__name__),
                        seed=seed, wall=_time.perf_counter() - wall0,
                        engine="reference" if plan is None else "compiled", note=note,
                        probe_age_s=ages)


#: the module-level name of :func:`simulate_cells` (``lbtheory.sim.simulate``; not deprecated).
simulate = simulate_cells


def warm_up(scenario: Scenario, routers: list[Any], *, engine: Engine | str = Engine.AUTO) -> None:
    """Compile (or load from numba's cache) what ``engine`` runs for each of ``routers`` on
    ``scenario``, by simulating 1 s of it (bursts and outages dropped, seed 0): a run timed
    after this (``SimResult.wall_seconds``) excludes compiling. Pass fresh routers — these runs
    change their state. :func:`kernels_cached` says whether it will compile."""
    import dataclasses

    short = dataclasses.replace(scenario, bursts=(), outages=())
    horizon = max(1.0, 2.0 * scenario.probe_period_s)
    for router in routers:
        simulate_cells(short, router, duration_s=horizon, seed=0, engine=engine)
