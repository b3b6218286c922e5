"""Seeded request streams: Poisson arrivals per source cell (time-varying when the scenario has
a :class:`~lbtheory.sim.RateVariation`) and request sizes, as a
:class:`~lbtheory.workloads.Workload` (the one request type) with its ``source`` (the cell the
request enters) and ``work`` (an Exp(1) service requirement, used by ``mmc`` servers) columns.

The arrivals of a (scenario, seed, duration) depend on nothing else, so every policy of a
comparison runs on exactly the same requests (``lbtheory simulate --policy a,b``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._checks import Seed, as_seed, check_real, check_seed
from ..errors import DataFormatError
from ..workloads import Workload, workload_from_arrays
from ._scenario import Scenario

__all__ = ["generate_arrivals", "arrivals_from_trace", "with_sessions", "seed_streams",
           "rate_profile", "rate_variation_from_counts", "interval_counts"]


def seed_streams(seed: int) -> list[np.random.SeedSequence]:
    """Independent seed sequences: arrivals, router, leaf routing, spare, rate path, probing
    model, model noise (in this order; each is the same as before the ones after it were
    added)."""
    return np.random.SeedSequence(check_seed(seed)).spawn(7)


def _multipliers(scenario: Scenario, duration_s: float, seed: int) -> np.ndarray:
    """m_i,k of :class:`~lbtheory.sim.RateVariation` ((n, K) for the K intervals that start
    before ``duration_s``); ones (n, 1) without rate variation."""
    n, rv = scenario.network.n, scenario.rate_variation
    if rv is None or rv.sigma == 0.0:
        return np.ones((n, 1))
    K = max(1, math.ceil(duration_s / rv.interval_s))
    rng = np.random.default_rng(seed_streams(seed)[4])
    eps = rng.standard_normal((n, K))
    z = np.empty((n, K))
    z[:, 0] = rv.sigma * eps[:, 0]                     # stationary start
    innov = rv.sigma * math.sqrt(1.0 - rv.correlation ** 2)
    for k in range(1, K):
        z[:, k] = rv.correlation * z[:, k - 1] + innov * eps[:, k]
    return np.exp(z - 0.5 * rv.sigma ** 2)


def _cuts(scenario: Scenario, i: int | None, duration_s: float) -> list[float]:
    """Times where λ_i(t) may change on [0, duration) (every source's when ``i`` is None)."""
    cuts = {0.0, duration_s}
    rv = scenario.rate_variation
    if rv is not None and rv.sigma > 0:
        cuts.update(float(t) for t in np.arange(rv.interval_s, duration_s, rv.interval_s))
    for b in scenario.bursts:
        if i is None or b.cell == i:
            cuts.update((min(b.start_s, duration_s), min(b.end_s, duration_s)))
    return sorted(cuts)


def _rate(scenario: Scenario, m: np.ndarray, i: int, t: float) -> float:
    """λ_i(t) (req/s): nominal rate × rate-path multiplier × bursts active at t."""
    rv = scenario.rate_variation
    k = min(int(t // rv.interval_s), m.shape[1] - 1) if m.shape[1] > 1 else 0
    f = float(m[i, k])
    for b in scenario.bursts:
        if b.cell == i and b.start_s <= t < b.end_s:
            f *= b.factor
    return scenario.network.cells[i].arrival_rate * f


def _rate_segments(scenario: Scenario, i: int, duration_s: float,
                   m: np.ndarray) -> list[tuple]:
    """Piecewise-constant λ_i(t) on [0, duration): (start, end, rate req/s)."""
    pts = _cuts(scenario, i, duration_s)
    return [(a, e, _rate(scenario, m, i, 0.5 * (a + e))) for a, e in zip(pts[:-1], pts[1:])]


def rate_profile(scenario: Scenario, duration_s: float,
                 seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The arrival rates :func:`generate_arrivals` draws from, λ_i(t) on [0, duration_s):
    piecewise constant, as ``(edges, rates)`` — ``edges`` (m+1,) s and ``rates`` (n, m) req/s
    on [edges[k], edges[k+1]) — nominal rates × the seed's rate path
    (:class:`~lbtheory.sim.RateVariation`) × bursts."""
    check_real(duration_s, "duration_s", unit="s", low=0.0, low_open=True)
    m = _multipliers(scenario, duration_s, check_seed(seed))
    edges = np.array(_cuts(scenario, None, duration_s))
    mids = 0.5 * (edges[:-1] + edges[1:])
    rates = np.array([[_rate(scenario, m, i, float(t)) for t in mids]
                      for i in range(scenario.network.n)])
    return edges, rates.reshape(scenario.network.n, mids.size)


def rate_variation_from_counts(counts: np.ndarray) -> tuple[float, float]:
    """(sigma, correlation) of :class:`~lbtheory.sim.RateVariation` whose log-normal rate path
    matches the first two moments of per-interval arrival counts (e.g. requests per minute of a
    trace), Poisson noise removed: the rate's variance is var(c) − mean(c) and its lag-1
    autocovariance that of the counts (Poisson noise is independent between intervals); a
    log-normal multiplier with CV² = e^{σ²} − 1 and lag-1 correlation ρ_m has
    e^{σ²φ} − 1 = ρ_m (e^{σ²} − 1). Zero counts are fine (no logarithm of a count is taken).

    Raises:
        DataFormatError: fewer than 3 intervals, or no variation beyond Poisson noise.
    """
    c = np.asarray(counts, dtype=float)
    if c.ndim != 1 or c.size < 3:
        raise DataFormatError(f"rate variation: need at least 3 interval counts, got {c.size}")
    mean, var = float(c.mean()), float(c.var(ddof=1))
    excess = var - mean
    if not (mean > 0 and excess > 0):
        raise DataFormatError(f"rate variation: the counts vary no more than Poisson noise "
                              f"(mean {mean:.4g}, variance {var:.4g}): no rate variation to fit")
    sigma2 = math.log1p(excess / mean ** 2)
    d = c - mean
    acov = float((d[:-1] * d[1:]).sum() / (c.size - 1))
    rho = min(max(acov / excess, 0.0), 1.0 - 1e-9)
    phi = math.log1p(rho * math.expm1(sigma2)) / sigma2
    return math.sqrt(sigma2), min(max(phi, 0.0), 1.0 - 1e-9)


def interval_counts(arrival_s: np.ndarray, interval_s: float = 60.0) -> np.ndarray:
    """Requests per complete interval of a trace's arrival times (s; the first arrival opens
    the first interval, an incomplete last interval is dropped)."""
    t = np.asarray(arrival_s, dtype=float)
    t = t - t.min()
    full = int(t.max() // interval_s)
    return np.bincount(np.floor(t / interval_s).astype(np.int64), minlength=full + 1)[:full]


def generate_arrivals(scenario: Scenario, duration_s: float, seed: Seed) -> Workload:
    """Poisson arrivals on [0, duration_s) with the scenario's rates, rate path
    (:func:`rate_profile`) and bursts (seeded: an int or a ``numpy.random.Generator``, which
    gives one draw): a :class:`~lbtheory.workloads.Workload` with ``source`` and ``work``
    columns."""
    scenario.check_run(duration_s)
    seed = as_seed(seed)
    rng = np.random.default_rng(seed_streams(seed)[0])
    m = _multipliers(scenario, duration_s, seed)
    times, srcs = [], []
    for i in range(scenario.network.n):
        for a, e, rate in _rate_segments(scenario, i, duration_s, m):
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
