"""The result of one simulated run and its JSON summary (the ``lbtheory simulate`` contract)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import RequestOutcome, RunStatus, warn_deprecated
from ..stats import goodput_latency, ratio, run_summary
from ._records import DONE, ERROR
from ._staleness import age_summary

__all__ = ["SimResult", "RunRecords", "build_result"]


@dataclasses.dataclass(frozen=True)
class SimResult:
    """One run of one policy (:class:`~lbtheory.stats.RunResult`).

    Per-request arrays (``outcome``, ``cell``, ``arrival_s``, ``latency_s``, ``wait_s``,
    ``network_s``, ``completion_s``, ``arrival_workload``) are in **workload order**: index ``k``
    is the ``k``-th request of the arrivals (arrival order), over the ``requests`` requests that
    arrived in [0, duration). A request that did not complete has NaN in the latency arrays;
    ``outcome`` says why (:class:`~lbtheory.errors.RequestOutcome`). Use ``res.done`` to select
    the completed ones and :meth:`completion_order` for them in completion order.

    Attributes:
        policy: router name; seed: the run's seed; duration_s: horizon (s).
        names: cell names.
        requests: arrivals in [0, duration); completed / errors / in_flight: their fate at the
            horizon (conservation: requests = completed + errors + in_flight).
        outcome: :class:`~lbtheory.errors.RequestOutcome` code of each request (``int8``):
            completed, error (overflow) or unfinished (in flight at the horizon).
        cell: the cell each request was routed to (−1: not yet routed at the horizon).
        arrival_s: arrival time of each request at its source's root router (s).
        latency_s: end-to-end latency of each request, network (2τ) + queueing + serving (s);
            NaN unless completed.
        wait_s: queueing part of each request's latency (s; NaN unless completed).
        network_s: network part (2τ_ij, s) of each request's latency (NaN unless completed).
        completion_s: completion time of each request (s; NaN unless completed) — for
            latency time series.
        arrival_workload: N_j at the cell when each request reached it, itself included (NaN
            unless completed) — with the serving latency ``latency_s − network_s`` the
            (N, latency) samples a latency fit uses (DLB §3.3).
        error_s: times (s) at which the overflow errors happened, sorted (events, not per
            request).
        routed: counts of requests sent i → j (n×n).
        cell_errors: overflow errors per cell.
        utilisation: time-average busy fraction of each cell's bottleneck stage (nominal servers).
        mean_workload: time-average requests at each cell's servers (queued + in service).
        series_t, series_workload: sampled workloads N_j(t) (for plots).
        events: events processed; wall_seconds: wall-clock time of the run.
        models: the service models the routers saw at the end (fitted ones with estimation).
        cache_hits: requests sent to the cell of their session's previous request (affinity).
        status: :class:`~lbtheory.errors.RunStatus` — ``completed`` (every request that arrived
            finished or was rejected) or ``truncated`` (the horizon ended with ``in_flight``
            requests still queued, in service or on the wire: their latency is unknown, so the
            latency summary covers the completed ones only).
        engine: the engine that ran, ``"compiled"`` or ``"reference"``; engine_note: why the
            reference engine ran when ``engine="auto"`` asked for the compiled one ("" else).
        routing_t, routing_x: routing rows x_i of the sources (``routing_x[m, k]`` is source
            ``routing_sources[k]``'s row) recorded every ``record_routing_every``-th probe
            round at the times ``routing_t`` (s); empty unless asked for.
        probe_age_s: per request, the age (s) of the probed workloads its router acted on
            (:func:`lbtheory.sim._staleness.probe_ages`: time since the instants the view's
            workloads were read, averaged over the source's admissible cells).
    """

    policy: str
    seed: int
    duration_s: float
    names: tuple[str, ...]
    requests: int
    completed: int
    errors: int
    in_flight: int
    latency_s: np.ndarray
    wait_s: np.ndarray
    network_s: np.ndarray
    routed: np.ndarray
    cell_errors: np.ndarray
    utilisation: np.ndarray
    mean_workload: np.ndarray
    series_t: np.ndarray
    series_workload: np.ndarray
    events: int
    wall_seconds: float
    models: tuple = ()
    cache_hits: int = 0
    completion_s: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    error_s: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    status: RunStatus = RunStatus.COMPLETED
    engine: str = "reference"
    engine_note: str = ""
    routing_t: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    routing_x: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0, 0)))
    routing_sources: tuple[int, ...] = ()
    arrival_s: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    arrival_workload: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    outcome: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int8))
    cell: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    probe_age_s: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))

    @property
    def done(self) -> np.ndarray:
        """Mask of the completed requests (workload order)."""
        return self.outcome == RequestOutcome.COMPLETED

    def completion_order(self) -> np.ndarray:
        """Indices of the completed requests in completion order (ties in workload order):
        ``res.latency_s[res.completion_order()]`` is the stream of latencies as they finished."""
        idx = np.flatnonzero(self.done)
        return idx[np.argsort(self.completion_s[idx], kind="stable")]

    def serving_latency(self) -> np.ndarray:
        """Mean serving latency per cell (s): latency minus the 2τ network part, over the
        completed requests served there (NaN for a cell that completed none) — the simulated
        counterpart of ℓ_j(N_j) in ``lbtheory equilibrium``'s table."""
        done = self.done
        cells = self.cell[done]
        serve = (self.latency_s - self.network_s)[done]
        n = len(self.names)
        count = np.bincount(cells, minlength=n)
        total = np.bincount(cells, weights=serve, minlength=n)
        return np.divide(total, count, out=np.full(n, np.nan), where=count > 0)

    @property
    def error_rate(self) -> float:
        """errors / (completed + errors) (nan when nothing finished)."""
        return ratio(self.errors, self.completed + self.errors)

    def latency_summary(self) -> dict[str, float]:
        """Deprecated: ``summary()["latency"]``."""
        warn_deprecated("SimResult.latency_summary()", 'SimResult.summary()["latency"]')
        return self.summary()["latency"]

    def to_dict(self) -> dict[str, Any]:
        """Deprecated: :meth:`summary`."""
        warn_deprecated("SimResult.to_dict()", "SimResult.summary()")
        return self.summary()

    def summary(self) -> dict[str, Any]:
        """The per-policy JSON object of ``lbtheory simulate --json``: the common keys of
        :data:`~lbtheory.stats.SUMMARY_KEYS` (latency of the completed requests, s) plus
        in_flight, error_rate, per_cell, events, wall_seconds and engine; ``latency_goodput``
        (:func:`~lbtheory.stats.goodput_latency`: rejected requests at the timeout) and
        ``probe_age_s`` (mean and p90 of the per-request information age, s)."""
        serving = self.serving_latency()
        per_cell = [{"name": nm, "routed": int(self.routed[:, j].sum()),
                     "errors": int(self.cell_errors[j]),
                     "utilisation": float(self.utilisation[j]),
                     "mean_workload": float(self.mean_workload[j]),
                     "mean_serving_latency": float(serving[j])}
                    for j, nm in enumerate(self.names)]
        # the common head (latencies summed in completion order: the order the engines'
        # records stream and earlier releases summed, so means are reproduced to the last
        # bit), with the keys in the order the JSON contract has always printed them
        head = run_summary(requests=self.requests, completed=self.completed,
                           errors=self.errors, status=self.status,
                           latency_s=self.latency_s[self.completion_order()])
        return {"requests": head["requests"], "completed": head["completed"],
                "errors": head["errors"], "in_flight": self.in_flight, "status": head["status"],
                "error_rate": self.error_rate, "latency": head["latency"], "per_cell": per_cell,
                "events": self.events, "wall_seconds": self.wall_seconds,
                "engine": self.engine,
                "latency_goodput": goodput_latency(self.latency_s[self.done], self.errors),
                "probe_age_s": age_summary(self.probe_age_s)}


@dataclasses.dataclass(frozen=True)
class RunRecords:
    """What an engine hands to :func:`build_result`: counters, and arrays over the ``requests``
    requests that arrived (status, routed cell, completion and cell-arrival times in s, queueing
    s, requests at the cell on arrival), per-cell totals, the sampled series, the models routers
    saw and the routing rows."""

    requests: int
    completed: int
    errors: int
    events: int
    cache_hits: int
    status: np.ndarray
    dest: np.ndarray
    t_done: np.ndarray
    t_cell: np.ndarray
    wait: np.ndarray
    n_arr: np.ndarray
    routed: np.ndarray
    cell_errors: np.ndarray
    utilisation: np.ndarray
    series_t: np.ndarray
    series_N: np.ndarray
    models: tuple
    routing_t: np.ndarray
    routing_x: np.ndarray
    routing_sources: tuple[int, ...]


def build_result(sc: Any, arr: Any, T: float, rr: RunRecords, *, policy: str, seed: int,
                 wall: float, engine: str, note: str = "",
                 probe_age_s: np.ndarray | None = None) -> SimResult:
    """Freeze a finished run of either engine into a :class:`SimResult`."""
    n, R = sc.network.n, rr.requests
    status, dest, t_done, t_cell = rr.status, rr.dest, rr.t_done, rr.t_cell
    done = status == DONE
    src = arr.source[:R] if arr.source is not None else np.zeros(0, dtype=np.int64)
    tau = sc.network.delays[src, np.maximum(dest, 0)]
    outcome = np.full(R, RequestOutcome.UNFINISHED, dtype=np.int8)
    outcome[done] = RequestOutcome.COMPLETED
    outcome[status == ERROR] = RequestOutcome.ERROR

    def completed(x: np.ndarray) -> np.ndarray:  # per request, NaN unless completed
        return np.where(done, np.asarray(x, dtype=float), np.nan)

    # time-average workload: Σ over requests of time spent at the cell within [0, T)
    at_cell = (status != ERROR) & np.isfinite(t_cell)
    stay = np.minimum(np.where(done, t_done, T), T) - t_cell
    wl = np.bincount(dest[at_cell], weights=stay[at_cell], minlength=n) / T
    in_flight = int(R - rr.completed - rr.errors)
    return SimResult(
        policy=policy, seed=int(seed), duration_s=T, names=sc.network.names,
        requests=int(R), completed=int(rr.completed), errors=int(rr.errors),
        in_flight=in_flight, latency_s=completed(t_done - arr.arrival_s[:R] + tau),
        wait_s=completed(rr.wait), network_s=completed(2.0 * tau),
        routed=np.asarray(rr.routed, dtype=np.int64),
        cell_errors=np.asarray(rr.cell_errors, dtype=np.int64), utilisation=rr.utilisation,
        mean_workload=wl, series_t=np.asarray(rr.series_t, dtype=float),
        series_workload=np.asarray(rr.series_N, dtype=float).reshape(-1, n),
        events=int(rr.events), wall_seconds=float(wall), models=rr.models,
        cache_hits=int(rr.cache_hits), completion_s=completed(t_done),
        error_s=np.sort(t_cell[status == ERROR]),
        status=RunStatus.TRUNCATED if in_flight else RunStatus.COMPLETED,
        engine=engine, engine_note=note, routing_t=np.asarray(rr.routing_t, dtype=float),
        routing_x=np.asarray(rr.routing_x, dtype=float),
        routing_sources=tuple(int(i) for i in rr.routing_sources),
        arrival_s=np.asarray(arr.arrival_s[:R], dtype=float),
        arrival_workload=completed(rr.n_arr), outcome=outcome,
        cell=np.asarray(dest, dtype=np.int64).copy(),
        probe_age_s=(np.zeros(0) if probe_age_s is None
                     else np.asarray(probe_age_s, dtype=float)[:R]))
