"""``simulate``: serve a workload on the cluster with a router; per-request metrics.

Metrics (seconds unless stated), per request: end-to-end latency (finish − arrival), TTFT (first
token − arrival), TBT (mean gap between consecutive tokens; NaN for one-token outputs), router wait
(dispatch − arrival), instance queueing (first admission − dispatch), preemptions (count).
Cluster: total preemptions, throughput (completed requests / makespan, req/s; output tokens /
makespan, tokens/s), the peak KV-cache usage per instance (tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import stats
from .._checks import check_seed
from ..errors import ParameterError, RunStatus
from ..routers import Assignment
from ..workloads import Workload
from ._engine import ClusterConfig, ClusterSim

__all__ = ["InstanceResult", "simulate", "run_router", "result_of"]


@dataclass(frozen=True)
class InstanceResult:
    """Outcome of one simulation (arrays per request, in workload order).

    ``status`` (:class:`~lbtheory.errors.RunStatus`): ``completed`` when every request finished,
    ``truncated`` when a run was stopped early (an RL episode cut at ``max_steps``) and some
    requests never finished (their times are NaN).
    """

    router: str
    arrival_s: np.ndarray
    dispatch_s: np.ndarray
    admit_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    tbt_mean_s: np.ndarray
    tbt_max_s: np.ndarray
    generated_tokens: np.ndarray
    preempted: np.ndarray
    instance: np.ndarray
    peak_kv_tokens: np.ndarray
    iterations: np.ndarray
    config: ClusterConfig
    status: RunStatus = RunStatus.COMPLETED

    @property
    def completed(self) -> int:
        """Requests that finished."""
        return int(np.isfinite(self.finish_s).sum())

    @property
    def e2e_s(self) -> np.ndarray:
        """End-to-end latency per request (s)."""
        return self.finish_s - self.arrival_s

    @property
    def ttft_s(self) -> np.ndarray:
        """Time to first token per request (s)."""
        return self.first_token_s - self.arrival_s

    @property
    def router_wait_s(self) -> np.ndarray:
        """Time in the router queue per request (s)."""
        return self.dispatch_s - self.arrival_s

    @property
    def instance_queue_s(self) -> np.ndarray:
        """Time from dispatch to first admission into a batch (s)."""
        return self.admit_s - self.dispatch_s

    @property
    def makespan_s(self) -> float:
        """Last finish time (s)."""
        return float(np.nanmax(self.finish_s))

    def summary(self) -> dict[str, Any]:
        """The CLI's JSON block: requests, completed, preemptions, latency, ttft, router_wait,
        plus tbt, instance_queue and throughput (s, req/s, tokens/s)."""
        done = np.isfinite(self.finish_s)
        e2e, ttft = self.e2e_s[done], self.ttft_s[done]
        tbt = self.tbt_mean_s[done & np.isfinite(self.tbt_mean_s)]
        span = self.makespan_s
        return {
            "requests": int(self.arrival_s.size),
            "completed": int(done.sum()),
            "status": self.status.value,
            "preemptions": int(self.preempted.sum()),
            "latency": {"mean": stats.mean(e2e), "p50": stats.percentile(e2e, 50),
                        "p99": stats.percentile(e2e, 99)},
            "ttft": {"mean": stats.mean(ttft), "p99": stats.percentile(ttft, 99)},
            "router_wait": {"mean": stats.mean(self.router_wait_s[done])},
            "tbt": {"mean": stats.mean(tbt), "p99": stats.percentile(tbt, 99)},
            "instance_queue": {"mean": stats.mean(self.instance_queue_s[done])},
            "throughput": {"requests_per_s": stats.ratio(done.sum(), span),
                           "tokens_per_s": stats.ratio(self.generated_tokens.sum(), span)},
        }


def result_of(sim: ClusterSim, name: str) -> InstanceResult:
    """Freeze a finished (or stopped) :class:`ClusterSim` into an :class:`InstanceResult`."""
    f = np.array
    n_gaps = np.maximum(f(sim.gen) - 1, 0)
    tbt = np.where(n_gaps > 0, f(sim.tbt_sum) / np.maximum(n_gaps, 1), np.nan)
    return InstanceResult(
        router=name, arrival_s=f(sim.arrival), dispatch_s=f(sim.dispatch_s),
        admit_s=f(sim.admit_s), first_token_s=f(sim.first_token_s), finish_s=f(sim.finish_s),
        tbt_mean_s=tbt, tbt_max_s=f(sim.tbt_max), generated_tokens=f(sim.gen),
        preempted=f(sim.preempted), instance=f(sim.instance_of),
        peak_kv_tokens=f([i.peak_kv for i in sim.inst]), iterations=f([i.n_iter for i in sim.inst]),
        config=sim.cfg, status=RunStatus.COMPLETED if sim.done else RunStatus.TRUNCATED)


def run_router(sim: ClusterSim, router: Any, *, seed: int = 0) -> None:
    """Drive ``sim`` to the end with ``router`` (the contract of :mod:`lbtheory.routers`): at
    each epoch it is asked until it waits (``None``) or the queue empties. An ``int`` sends the
    head of the queue to that instance; an :class:`~lbtheory.routers.Assignment` sends queue
    positions to instances. ``seed`` seeds the ``rng`` the router draws from."""
    rng = np.random.default_rng(check_seed(seed))
    state = router.init(seed)
    name = getattr(router, "name", "router")
    while sim.advance():
        view = sim.view()
        state = router.observe(state, view)
        while sim.queue:
            decision, state = router.route(state, view, rng)
            if decision is None:
                break
            if isinstance(decision, Assignment):
                pairs = list(zip(np.asarray(decision.positions).tolist(),
                                 np.asarray(decision.targets).tolist()))
            else:
                pairs = [(0, decision)]
            if not pairs:
                break
            n = len(sim.queue)
            pos_list = [p for p, _ in pairs]
            if len(set(pos_list)) != len(pos_list) or not all(0 <= p < n for p in pos_list):
                raise ParameterError(f"router {name} chose queue positions {pos_list} of {n}")
            for p, m in sorted(pairs, key=lambda pm: -pm[0]):  # later positions first
                sim.dispatch(p, int(m))
            if sim.queue:
                view = sim.view()


def simulate(workload: Workload, router: Any, config: ClusterConfig | None = None, *,
             predicted_output: np.ndarray | None = None, seed: int = 0) -> InstanceResult:
    """Serve ``workload`` on ``config`` (default :class:`ClusterConfig`) routed by ``router``.

    Args:
        workload: the requests.
        router: a router (e.g. ``lbtheory.registry.make_router("jsq", "instances")``).
        config: the cluster.
        predicted_output: output lengths the router sees (tokens; default the true ones).
        seed: seed of the router's random draws.

    Raises:
        ParameterError: a request larger than the KV budget, or a router decision out of range.
    """
    sim = ClusterSim(workload, config or ClusterConfig(), predicted_output)
    run_router(sim, router, seed=seed)
    return result_of(sim, getattr(router, "name", "router"))
