"""``simulate``: serve a workload on the cluster with a router; per-request metrics.

Metrics (seconds unless stated), per request: end-to-end latency (finish − arrival), TTFT (first
token − arrival), TBT (mean gap between consecutive tokens; NaN for one-token outputs), router wait
(dispatch − arrival), instance queueing (first admission − dispatch), preemptions (count).
Cluster: total preemptions, throughput (completed requests / makespan, req/s; output tokens /
makespan, tokens/s), the peak KV-cache usage per instance (tokens).

Two engines give the same per-request outcomes, bit for bit: the compiled one
(:class:`~lbtheory.intelligent.CompiledClusterSim`, the default) and the Python reference
(:class:`~lbtheory.intelligent.ClusterSim`, ``engine="reference"``). On the compiled engine the
registry's routers run inside the compiled loop; any other router of the contract is driven
from Python by :func:`run_router` over the compiled simulator's views.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import stats
from .._checks import check_option, check_seed
from ..errors import RunStatus
from ..routers._drive import Driver
from ..workloads import Workload
from ._compiled import CompiledClusterSim, kernel_spec
from ._engine import ClusterConfig, ClusterSim

__all__ = ["InstanceResult", "simulate", "run_router", "result_of", "Engine", "make_sim"]


class Engine(enum.StrEnum):
    """Which instance simulator runs (both give the same per-request outcomes)."""

    #: the compiled engine (the default).
    AUTO = "auto"
    #: :class:`~lbtheory.intelligent.CompiledClusterSim`: numba kernels; the registry's
    #: routers (and users' compiled ones) run inside its loop, other routers in Python.
    COMPILED = "compiled"
    #: :class:`~lbtheory.intelligent.ClusterSim`, the Python reference.
    REFERENCE = "reference"


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
    engine: str = "reference"

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
            "engine": self.engine,
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


def result_of(sim: ClusterSim | CompiledClusterSim, name: str) -> InstanceResult:
    """Freeze a finished (or stopped) simulator of either engine into an
    :class:`InstanceResult`."""
    r = sim.records()
    gen = r["generated_tokens"]
    n_gaps = np.maximum(gen - 1, 0)
    tbt = np.where(n_gaps > 0, r["tbt_sum_s"] / np.maximum(n_gaps, 1), np.nan)
    return InstanceResult(
        router=name, arrival_s=r["arrival_s"], dispatch_s=r["dispatch_s"],
        admit_s=r["admit_s"], first_token_s=r["first_token_s"], finish_s=r["finish_s"],
        tbt_mean_s=tbt, tbt_max_s=r["tbt_max_s"], generated_tokens=gen,
        preempted=r["preempted"], instance=r["instance"], peak_kv_tokens=r["peak_kv_tokens"],
        iterations=r["iterations"], config=sim.cfg,
        status=RunStatus.COMPLETED if sim.done else RunStatus.TRUNCATED, engine=sim.engine)


def run_router(sim: ClusterSim | CompiledClusterSim, router: Any, *, seed: int = 0) -> None:
    """Drive ``sim`` (either engine) to the end with ``router`` (the contract of
    :mod:`lbtheory.routers`) in Python: at each epoch it is asked until it waits (``None``) or
    the queue empties. An ``int`` sends the head of the queue to that instance; an
    :class:`~lbtheory.routers.Assignment` sends queue positions to instances. ``seed`` seeds
    the ``rng`` the router draws from."""
    driver = Driver(router, check_seed(seed), target="instance")
    while sim.advance():
        view = sim.view()
        driver.observe(view)
        while sim.queue_length:
            got = driver.ask(view, sim.queue_length)
            if got is None:
                break
            # later positions first (positions are distinct: the pairs sort by position)
            for p, m in sorted(zip(got[0].tolist(), got[1].tolist()), reverse=True):
                sim.dispatch(p, m)
            if sim.queue_length:
                view = sim.view()


def make_sim(workload: Workload, config: ClusterConfig, predicted_output: np.ndarray | None = None,
             *, engine: Engine | str = Engine.AUTO, **options: Any
             ) -> ClusterSim | CompiledClusterSim:
    """A simulator of ``engine`` (``"auto"``/``"compiled"``: :class:`CompiledClusterSim`;
    ``"reference"``: :class:`ClusterSim`); ``options`` go to its constructor."""
    engine = check_option(Engine, engine, "engine")
    cls = ClusterSim if engine is Engine.REFERENCE else CompiledClusterSim
    return cls(workload, config, predicted_output, **options)


def simulate(workload: Workload, router: Any, config: ClusterConfig | None = None, *,
             predicted_output: np.ndarray | None = None, seed: int = 0,
             engine: Engine | str = Engine.AUTO) -> InstanceResult:
    """Serve ``workload`` on ``config`` (default :class:`ClusterConfig`) routed by ``router``.

    Args:
        workload: the requests.
        router: a router (e.g. ``lbtheory.registry.make_router("jsq", "instances")``).
        config: the cluster.
        predicted_output: output lengths the router sees (tokens; default the true ones).
        seed: seed of the router's random draws.
        engine: ``"auto"`` (default) or ``"compiled"``: the compiled engine — the registry's
            routers (and routers with a ``kernel_spec``) run inside its loop, any other router
            of the contract in Python on the compiled simulator; ``"reference"``: the Python
            :class:`ClusterSim`. Both give the same per-request outcomes; the result records
            which ran (:attr:`InstanceResult.engine`).

    Raises:
        ParameterError: a request larger than the KV budget, a router decision out of range, an
            unknown engine, or a run too large for the available memory.
    """
    cfg = config or ClusterConfig()
    seed = check_seed(seed)
    sim = make_sim(workload, cfg, predicted_output, engine=engine)
    name = getattr(router, "name", "router")
    spec = kernel_spec(router, cfg) if isinstance(sim, CompiledClusterSim) else None
    if spec is not None:
        sim.run(spec, seed=seed, name=name)
    else:
        run_router(sim, router, seed=seed)
    return result_of(sim, name)
