"""Seeded request streams: Poisson arrivals per source cell and request sizes, as a
:class:`~lbtheory.workloads.Workload` (the one request type) with its ``source`` (the cell the
request enters) and ``work`` (an Exp(1) service requirement, used by ``mmc`` servers) columns.

The arrivals of a (scenario, seed, duration) depend on nothing else, so every policy of a
comparison runs on exactly the same requests (``lbtheory simulate --policy a,b``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._checks import check_real, check_seed
from ..errors import DataFormatError
from ..workloads import Workload, workload_from_arrays
from ._scenario import Scenario

__all__ = ["generate_arrivals", "arrivals_from_trace", "with_sessions", "seed_streams"]


def seed_streams(seed: int) -> list[np.random.SeedSequence]:
    """Independent seed sequences: arrivals, router, leaf routing, spare (in this order)."""
    return np.random.SeedSequence(check_seed(seed)).spawn(4)


def _rate_segments(scenario: Scenario, i: int, duration_s: float) -> list[tuple]:
    """Piecewise-constant λ_i(t) on [0, duration): (start, end, rate req/s)."""
    lam = scenario.network.cells[i].arrival_rate
    cuts = {0.0, duration_s}
    for b in scenario.bursts:
        if b.cell == i:
            cuts.update((min(b.start_s, duration_s), min(b.end_s, duration_s)))
    pts = sorted(cuts)
    segs = []
    for a, e in zip(pts[:-1], pts[1:]):
        mid = 0.5 * (a + e)
        f = 1.0
        for b in scenario.bursts:
            if b.cell == i and b.start_s <= mid < b.end_s:
                f *= b.factor
        segs.append((a, e, lam * f))
    return segs


def generate_arrivals(scenario: Scenario, duration_s: float, seed: int) -> Workload:
    """Poisson arrivals on [0, duration_s) with the scenario's rates and bursts (seeded): a
    :class:`~lbtheory.workloads.Workload` with ``source`` and ``work`` columns."""
    scenario.check_run(duration_s)
    rng = np.random.default_rng(seed_streams(seed)[0])
    times, srcs = [], []
    for i in range(scenario.network.n):
        for a, e, rate in _rate_segments(scenario, i, duration_s):
            if rate <= 0:
                continue
            k = rng.poisson(rate * (e - a))
            times.append(np.sort(rng.uniform(a, e, size=k)))
            srcs.append(np.full(k, i, dtype=np.int64))
    t = np.concatenate(times) if times else np.zeros(0)
    s = np.concatenate(srcs) if srcs else np.zeros(0, dtype=np.int64)
    order = np.argsort(t, kind="stable")
    t, s = t[order], s[order]
    R = t.shape[0]
    unit = rng.exponential(1.0, size=R)
    P, D = scenario.prompt_tokens, scenario.output_tokens
    prompt = np.maximum(1.0, P.shift + np.rint(rng.gamma(P.shape, P.scale, size=R)))
    output = np.maximum(1.0, D.shift + np.rint(rng.gamma(D.shape, D.scale, size=R)))
    arr = _workload(t, prompt, output, s, unit)
    return arr if scenario.affinity is None else with_sessions(arr, scenario, seed)


def _workload(t: np.ndarray, prompt: np.ndarray, output: np.ndarray, source: np.ndarray,
              work: np.ndarray) -> Workload:
    if t.size == 0:  # no arrival at all (every rate 0, or a horizon shorter than every gap)
        z = np.zeros(0)
        return Workload(z, z.astype(np.int64), z.astype(np.int64), source=z.astype(np.int64),
                        work=z)
    return workload_from_arrays(t, prompt, output, source=source, work=work)


def with_sessions(arr: Workload, scenario: Scenario, seed: int) -> Workload:
    """Give each request a session [R]: with probability ``followup_fraction`` it continues one
    of its source's ``active_sessions`` most recent sessions (uniformly), else it opens a new
    one (DLB §3.5: 60–70% of requests can use prefix caching)."""
    aff = scenario.affinity
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 7919]))
    u = rng.random(len(arr)).tolist()
    pick = rng.random(len(arr)).tolist()
    recent: dict[int, list[int]] = {}
    out = np.empty(len(arr), dtype=np.int64)
    nxt = 0
    for r, i in enumerate(arr.source.tolist()):
        pool = recent.setdefault(i, [])
        if pool and u[r] < aff.followup_fraction:
            out[r] = pool[int(pick[r] * len(pool))]
        else:
            out[r] = nxt
            pool.append(nxt)
            nxt += 1
            if len(pool) > aff.active_sessions:
                pool.pop(0)
    return dataclasses.replace(arr, session=out)  # ids 0, 1, … by construction


def arrivals_from_trace(trace: Workload, scenario: Scenario, duration_s: float, seed: int, *,
                        time_scale: float = 1.0) -> Workload:
    """Replay a request trace (:func:`lbtheory.workloads.read_trace`): arrival times (×
    ``time_scale``) and token counts from the trace, each request's source cell drawn ∝ λ_i of
    the scenario (seeded); requests at or after ``duration_s`` are dropped.

    Raises:
        DataFormatError: no cell has arrivals, or ``time_scale`` is not positive.
    """
    lam = scenario.network.arrival_rates
    if not lam.sum() > 0:
        raise DataFormatError("trace replay: no cell has arrivals (arrival_rate) to assign "
                              "the trace's requests to", field="arrival_rate")
    check_real(time_scale, "trace replay: time_scale", low=0.0, low_open=True,
               error=lambda msg: DataFormatError(msg, field="time_scale"))
    t = np.asarray(trace.arrival_s, dtype=float) * time_scale
    keep = t < duration_s
    t = t[keep]
    rng = np.random.default_rng(seed_streams(seed)[0])
    src = rng.choice(len(lam), size=t.size, p=lam / lam.sum()).astype(np.int64)
    unit = rng.exponential(1.0, size=t.size)
    # [R] at least one token each: a prefill always emits one
    prompt = np.maximum(1.0, np.asarray(trace.prompt_tokens, dtype=float)[keep])
    output = np.maximum(1.0, np.asarray(trace.output_tokens, dtype=float)[keep])
    arr = _workload(t, prompt, output, src, unit)
    return arr if scenario.affinity is None else with_sessions(arr, scenario, seed)
