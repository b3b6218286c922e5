"""The result of one simulated run and its JSON summary (the ``lbtheory simulate`` contract)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import RunStatus
from ..stats import mean, percentiles, ratio
from ._records import DONE, ERROR

__all__ = ["SimResult", "RunRecords", "build_result"]


@dataclasses.dataclass(frozen=True)
class SimResult:
    """One run of one policy.

    Attributes:
        policy: router name; seed: the run's seed; duration_s: horizon (s).
        names: cell names.
        requests: arrivals in [0, duration); completed / errors / in_flight: their fate at the
            horizon (conservation: requests = completed + errors + in_flight).
        latency_s: end-to-end latency of each completed request, network (2τ) + queueing +
            serving (s), in completion order.
        wait_s: queueing part of each completed request (s).
        network_s: network part (2τ_ij, s) of each completed request.
        routed: counts of requests sent i → j (n×n).
        cell_errors: overflow errors per cell.
        utilisation: time-average busy fraction of each cell's bottleneck stage (nominal servers).
        mean_workload: time-average requests at each cell's servers (queued + in service).
        series_t, series_workload: sampled workloads N_j(t) (for plots).
        events: events processed; wall_seconds: wall-clock time of the run.
        models: the service models the routers saw at the end (fitted ones with estimation).
        cache_hits: requests sent to the cell of their session's previous request (affinity).
        completion_s: completion time of each completed request (s), aligned with
            ``latency_s`` (completion order) — for latency time series.
        error_s: times (s) at which the overflow errors happened, sorted.
        status: :class:`~lbtheory.errors.RunStatus` — ``completed`` (every request that arrived
            finished or was rejected) or ``truncated`` (the horizon ended with ``in_flight``
            requests still queued, in service or on the wire: their latency is unknown, so the
            latency summary covers the completed ones only).
        engine: the engine that ran, ``"compiled"`` or ``"reference"``; engine_note: why the
            reference engine ran when ``engine="auto"`` asked for the compiled one ("" else).
        arrival_s: arrival time at the source's root router of each completed request (s),
            aligned with ``latency_s`` (to discard a warm-up).
        arrival_workload: N_j at the cell when each completed request reached it, itself
            included, aligned with ``latency_s`` — with the serving latency
            ``latency_s − network_s`` the (N, latency) samples a latency fit uses (DLB §3.3).
        routing_t, routing_x: routing rows x_i of the sources (``routing_x[m, k]`` is source
            ``routing_sources[k]``'s row) recorded every ``record_routing_every``-th probe
            round at the times ``routing_t`` (s); empty unless asked for.
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

    @property
    def error_rate(self) -> float:
        """errors / (completed + errors) (nan when nothing finished)."""
        return ratio(self.errors, self.completed + self.errors)

    def latency_summary(self) -> dict[str, float]:
        """mean, p50, p90, p99 of end-to-end latency (s)."""
        out = {"mean": mean(self.latency_s)}
        out.update(percentiles(self.latency_s, (50.0, 90.0, 99.0)))
        return out

    def to_dict(self) -> dict[str, Any]:
        """The per-policy JSON object of ``lbtheory simulate --json`` (latencies in seconds)."""
        per_cell = [{"name": nm, "routed": int(self.routed[:, j].sum()),
                     "errors": int(self.cell_errors[j]),
                     "utilisation": float(self.utilisation[j]),
                     "mean_workload": float(self.mean_workload[j])}
                    for j, nm in enumerate(self.names)]
        return {"requests": self.requests, "completed": self.completed, "errors": self.errors,
                "in_flight": self.in_flight, "status": self.status.value,
                "error_rate": self.error_rate,
                "latency": self.latency_summary(), "per_cell": per_cell,
                "events": self.events, "wall_seconds": self.wall_seconds,
                "engine": self.engine}


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
                 wall: float, engine: str, note: str = "") -> SimResult:
    """Freeze a finished run of either engine into a :class:`SimResult`."""
    n, R = sc.network.n, rr.requests
    status, dest, t_done, t_cell = rr.status, rr.dest, rr.t_done, rr.t_cell
    done = status == DONE
    src = arr.source[:R] if arr.source is not None else np.zeros(0, dtype=np.int64)
    tau = sc.network.delays[src, np.maximum(dest, 0)]
    order = np.argsort(t_done[done], kind="stable")
    lat = (t_done - arr.arrival_s[:R] + tau)[done][order]
    # time-average workload: Σ over requests of time spent at the cell within [0, T)
    at_cell = (status != ERROR) & np.isfinite(t_cell)
    stay = np.minimum(np.where(done, t_done, T), T) - t_cell
    wl = np.bincount(dest[at_cell], weights=stay[at_cell], minlength=n) / T
    in_flight = int(R - rr.completed - rr.errors)
    return SimResult(
        policy=policy, seed=int(seed), duration_s=T, names=sc.network.names,
        requests=int(R), completed=int(rr.completed), errors=int(rr.errors),
        in_flight=in_flight, latency_s=lat, wait_s=rr.wait[done][order],
        network_s=(2.0 * tau)[done][order], routed=np.asarray(rr.routed, dtype=np.int64),
        cell_errors=np.asarray(rr.cell_errors, dtype=np.int64), utilisation=rr.utilisation,
        mean_workload=wl, series_t=np.asarray(rr.series_t, dtype=float),
        series_workload=np.asarray(rr.series_N, dtype=float).reshape(-1, n),
        events=int(rr.events), wall_seconds=float(wall), models=rr.models,
        cache_hits=int(rr.cache_hits), completion_s=t_done[done][order],
        error_s=np.sort(t_cell[status == ERROR]),
        status=RunStatus.TRUNCATED if in_flight else RunStatus.COMPLETED,
        engine=engine, engine_note=note, routing_t=np.asarray(rr.routing_t, dtype=float),
        routing_x=np.asarray(rr.routing_x, dtype=float),
        routing_sources=tuple(int(i) for i in rr.routing_sources),
        arrival_s=np.asarray(arr.arrival_s[:R], dtype=float)[done][order],
        arrival_workload=np.asarray(rr.n_arr, dtype=float)[done][order])
