"""The result of one simulated run and its JSON summary (the ``lbtheory simulate`` contract)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..stats import mean, percentiles, ratio

__all__ = ["SimResult"]


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
                "in_flight": self.in_flight, "error_rate": self.error_rate,
                "latency": self.latency_summary(), "per_cell": per_cell,
                "events": self.events, "wall_seconds": self.wall_seconds}
