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

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import stats
from .._checks import Seed, as_seed, check_option, check_seed
from ..errors import Engine, RunStatus, warn_deprecated
from ..routers._drive import Driver
from ..workloads import Workload
from ._compiled import CompiledClusterSim, kernel_spec
from ._engine import ClusterConfig, ClusterSim

__all__ = ["InstanceResult", "simulate_instances", "simulate", "run_router", "result_of", "Engine",
           "make_sim"]


@dataclass(frozen=True)
class InstanceResult(stats.QueuedRunOutcomes):
    """Outcome of one simulation (:class:`~lbtheory.stats.RunResult`): arrays per request in
    **workload order** (index ``k`` is the ``k``-th request of the workload); a request that did
    not finish has NaN times (``outcome``: :class:`~lbtheory.errors.RequestOutcome`).

    ``policy`` is the router's name (``router`` is its deprecated alias). ``status``
    (:class:`~lbtheory.errors.RunStatus`): ``completed`` when every request finished,
    ``truncated`` when a run was stopped early (an RL episode cut at ``max_steps``) and some
    requests never finished (their times are NaN). No request is rejected (``errors`` is 0).
    """

    policy: str
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
    recomputed_tokens: np.ndarray | None = None
    tbt_var_s2: np.ndarray | None = None
    swaps: np.ndarray | None = None

    def _router_alias(self) -> str:
        """Deprecated: :attr:`policy`."""
        warn_deprecated("InstanceResult.router", "InstanceResult.policy")
        return self.policy

    #: deprecated alias of :attr:`policy` (warns; removed in 0.3)
    router = property(_router_alias)

    @property
    def done(self) -> np.ndarray:
        """Mask of the requests that finished (workload order)."""
        return np.isfinite(self.finish_s)

    @property
    def e2e_s(self) -> np.ndarray:
        """End-to-end latency per request (s; NaN unless it finished)."""
        return self.finish_s - self.arrival_s

    @property
    def latency_s(self) -> np.ndarray:
        """End-to-end latency per request (s; NaN unless it finished): :attr:`e2e_s`, under
        the name every simulator's result uses."""
        return self.e2e_s

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
        """Last finish time (s; nan when nothing finished)."""
        done = self.done
        return float(self.finish_s[done].max()) if done.any() else float("nan")

    def summary(self) -> dict[str, Any]:
        """The CLI's JSON block: the common keys of :data:`~lbtheory.stats.SUMMARY_KEYS`
        (requests, completed, errors, status, latency = E2E of the finished requests), plus
        engine, preemptions, ttft, router_wait, tbt, instance_queue and throughput (s, req/s,
        tokens/s); with swap preemption also ``swaps_per_request``."""
        done = self.done
        ttft = self.ttft_s[done]
        tbt = self.tbt_mean_s[done & np.isfinite(self.tbt_mean_s)]
        span = self.makespan_s
        return stats.run_summary(
            requests=self.arrival_s.size, completed=done.sum(), errors=self.errors,
            status=self.status, latency_s=self.e2e_s[done]) | {
            "engine": self.engine,
            "preemptions": int(self.preempted.sum()),
            "preemptions_per_request": stats.ratio(self.preempted.sum(), self.arrival_s.size),
            "ttft": {"mean": stats.mean(ttft), "p99": stats.percentile(ttft, 99)},
            "router_wait": {"mean": stats.mean(self.router_wait_s[done])},
            "tbt": {"mean": stats.mean(tbt), "p99": stats.percentile(tbt, 99)} | _tbt_var(
                self.tbt_var_s2, done),
            "instance_queue": {"mean": stats.mean(self.instance_queue_s[done])},
            "throughput": {"requests_per_s": stats.ratio(done.sum(), span),
                           "tokens_per_s": stats.ratio(self.generated_tokens.sum(), span)},
        } | self._swap_summary()

    def _swap_summary(self) -> dict[str, Any]:
        """``swaps_per_request`` with swap preemption (vLLM model), nothing otherwise."""
        if self.swaps is None or getattr(self.config, "preemption", "recompute") != "swap":
            return {}
        return {"swaps_per_request": stats.ratio(self.swaps.sum(), self.arrival_s.size)}


def _tbt_var(var: np.ndarray | None, done: np.ndarray) -> dict[str, float]:
    """Percentiles of the per-request TBT variance (s²; Knowl 4's streaming-stability
    measure) over finished requests with two gaps or more."""
    if var is None:
        return {}
    v = var[done & np.isfinite(var)]
    return {"var_p50": stats.percentile(v, 50), "var_p99": stats.percentile(v, 99)}


def result_of(sim: ClusterSim | CompiledClusterSim, name: str) -> InstanceResult:
    """Freeze a finished (or stopped) simulator of either engine into an
    :class:`InstanceResult`."""
    r = sim.records()
    gen = r["generated_tokens"]
    n_gaps = np.maximum(gen - 1, 0)
    tbt = np.where(n_gaps > 0, r["tbt_sum_s"] / np.maximum(n_gaps, 1), np.nan)
    return InstanceResult(
        policy=name, arrival_s=r["arrival_s"], dispatch_s=r["dispatch_s"],
        admit_s=r["admit_s"], first_token_s=r["first_token_s"], finish_s=r["finish_s"],
        tbt_mean_s=tbt, tbt_max_s=r["tbt_max_s"], generated_tokens=gen,
        preempted=r["preempted"], instance=r["instance"], peak_kv_tokens=r["peak_kv_tokens"],
        iterations=r["iterations"], config=sim.cfg,
        status=RunStatus.COMPLETED if sim.done else RunStatus.TRUNCATED, engine=sim.engine,
        recomputed_tokens=r["recomputed_tokens"], swaps=r["swaps"],
        tbt_var_s2=np.where(n_gaps > 1, np.maximum(r["tbt_sq_s2"] / np.maximum(n_gaps, 1)
                                                   - tbt * tbt, 0.0), np.nan))


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


def simulate_instances(workload: Workload, router: Any, config: ClusterConfig | None = None, *,
             predicted_output: np.ndarray | None = None, seed: Seed = 0,
             engine: Engine | str = Engine.AUTO) -> InstanceResult:
    """Serve ``workload`` on ``config`` (default :class:`ClusterConfig`) routed by ``router``.

    Args:
        workload: the requests.
        router: a router (e.g. ``lbtheory.registry.make_router("jsq", "instances")``).
        config: the cluster.
        predicted_output: output lengths the router sees (tokens; default the true ones).
        seed: seed of the router's random draws (an int, or a ``numpy.random.Generator``: one
            int is drawn from it).
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
    seed = as_seed(seed)
    sim = make_sim(workload, cfg, predicted_output, engine=engine)
    from ..routers._drive import check_router_object

    check_router_object(router)
    name = getattr(router, "name", "router")
    spec = kernel_spec(router, cfg) if isinstance(sim, CompiledClusterSim) else None
    if spec is not None:
        sim.run(spec, seed=seed, name=name)
    else:
        run_router(sim, router, seed=seed)
    return result_of(sim, name)


#: the module-level name of :func:`simulate_instances` (``lbtheory.intelligent.simulate``;
#: not deprecated).
simulate = simulate_instances
