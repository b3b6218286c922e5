"""Scales of the routing MDP derived from the workload, fixed before any training [R].

:func:`calibrate_env` serves one workload (the first training episode's) with round robin and
reads off what the reward needs (:mod:`._env`):

* ``horizon_s`` H = round robin's mean end-to-end latency (s): a routing decision's effects last
  about as long as the requests it delays (a discount of 0.99 per *decision* looked 2–5 s ahead
  while latencies were ≈ 50 s);
* ``reward_scale`` = ``q_target`` / mean ``G_t``, ``G_t`` the discounted progress cost to go
  at each decision of that episode (the completion reward left out: it can cancel most of the
  cost on small problems): round robin's values are then ``q_target`` (3) in size, inside
  1–10;
* ``guidance_scale`` s_h = ρ / σ_h, ρ the mean progress cost of a decision and σ_h the standard
  deviation of the guidance difference ``h`` over round robin's decisions: a typical guidance
  term is then ``w_k`` times a typical decision's cost, instead of ≈1e-5 of it.

:func:`prompt_edges_for` gives prompt-bucket edges at the quartiles of a workload's prompts
[R] (the seed does not print its ``n_p`` buckets; fixed edges 256 / 1,024 / 4,096 put every
five-task prompt in the first bucket and most production prompts in the last two).
:func:`bucket_spec_for` gives the completion-time decode buckets at the cluster's own
per-request decode speed (:func:`~lbtheory.intelligent.offered_load`'s ``decode_tps``): the
seed's 0.5 / 2 / 4 s buckets at 500 tokens/s put nearly all Azure outputs in bucket 0, while a
request on a loaded instance decodes ≈25 tokens/s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from .._checks import check_real
from ..errors import FitStatus, ParameterError
from ..routers import RoundRobinRouter
from ..stats import percentile
from ..workloads import Workload
from ._engine import ClusterConfig
from ._env import EnvConfig, Guidance, RoutingEnv
from ._load import offered_load
from ._predictor import BucketSpec
from ._simulate import Engine, simulate

__all__ = ["calibrate_env", "bucket_spec_for", "prompt_edges_for", "Calibration"]


@dataclasses.dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate_env` measured under round robin (s, raw reward units).

    Attributes:
        mean_latency_s: round robin's mean end-to-end latency.
        decisions: decisions of the episode (round robin never waits: one per request).
        mean_cost_to_go: mean discounted progress cost to go per decision (before scaling).
        progress_per_decision: ρ, the mean discounted progress cost of a decision.
        h_std: σ_h, the standard deviation of h over the decisions.
        decisions_per_s: decisions per second of arrivals (the request rate).

    ``status`` (:class:`~lbtheory.errors.FitStatus`): ``good`` when every scale was measured
    (a finite mean latency, a positive mean cost to go and a varying guidance term h);
    ``insufficient_data`` when the round-robin episode could not give one, so
    :func:`calibrate_env` fell back to its default (``reward_scale`` 1 when no decision had
    a cost to go, ``guidance_scale`` 0 when h never varied) — e.g. a workload in which no
    request ever waits. (``poor`` is not used: a calibration has no quality threshold.)
    """

    mean_latency_s: float
    decisions: int
    mean_cost_to_go: float
    progress_per_decision: float
    h_std: float
    decisions_per_s: float = float("inf")

    @property
    def status(self) -> FitStatus:
        """:class:`~lbtheory.errors.FitStatus` of the calibration (class docstring)."""
        measured = (np.isfinite(self.mean_latency_s) and self.mean_cost_to_go > 0
                    and self.h_std > 0)
        return FitStatus.GOOD if measured else FitStatus.INSUFFICIENT_DATA


def calibrate_env(workload: Workload, cluster: ClusterConfig, env_config: EnvConfig | None = None,
                  predict_fn: Callable[[Workload], np.ndarray] | None = None, *,
                  q_target: float = 3.0, engine: Engine | str = Engine.AUTO
                  ) -> tuple[EnvConfig, Calibration]:
    """Fill the unset (``None``) ``horizon_s``, ``reward_scale`` and ``guidance_scale`` of
    ``env_config`` from a round-robin run on ``workload`` (module docstring); set fields are
    kept. Returns the config and the measurements.

    Raises:
        ParameterError: ``q_target`` not positive.
    """
    q_target = check_real(q_target, "q_target", low=0.0, low_open=True)
    ec = env_config or EnvConfig()
    pred = None if predict_fn is None else np.asarray(predict_fn(workload))
    rr = simulate(workload, RoundRobinRouter(), cluster, predicted_output=pred, engine=engine)
    latency = float(np.nanmean(rr.e2e_s))
    horizon = latency if ec.horizon_s is None else ec.horizon_s
    probe = dataclasses.replace(ec, horizon_s=horizon, reward_scale=1.0, guidance_scale=1.0,
                                guidance=Guidance.NONE)
    env = RoutingEnv(lambda _s: workload, cluster, probe, predict_fn, engine=engine)
    env.reset(seed=0)
    m = cluster.n_instances
    discounts, hs, costs = [], [], []
    done = trunc = False
    while not (done or trunc):
        _, _, done, trunc, info = env.step(env.steps % m)
        discounts.append(info["discount"])
        hs.append(info["h"])
        costs.append(info["progress"])
    if trunc:
        raise ParameterError(f"calibrate_env: the round-robin episode needs more than "
                             f"max_steps = {ec.max_steps} decisions")
    g, togo = 0.0, np.empty(len(costs))
    for t in range(len(costs) - 1, -1, -1):
        g = costs[t] + discounts[t] * g
        togo[t] = g
    span = float(workload.arrival_s[-1] - workload.arrival_s[0])
    cal = Calibration(latency, len(costs), float(np.mean(togo)), float(np.mean(costs)),
                      float(np.std(hs)), len(costs) / span if span > 0 else float("inf"))
    scale = q_target / cal.mean_cost_to_go if cal.mean_cost_to_go > 0 else 1.0
    s_h = cal.progress_per_decision / cal.h_std if cal.h_std > 0 else 0.0
    out = dataclasses.replace(
        ec, horizon_s=horizon,
        reward_scale=scale if ec.reward_scale is None else ec.reward_scale,
        guidance_scale=s_h if ec.guidance_scale is None else ec.guidance_scale)
    return out, cal


def bucket_spec_for(workload: Workload, cluster: ClusterConfig) -> BucketSpec:
    """The seed's completion-time buckets (0.5 / 2 / 4 s) at one request's decode speed on
    ``cluster`` under ``workload``'s load (module docstring)."""
    return BucketSpec("time", decode_tps=offered_load(workload, cluster).decode_tps)


def prompt_edges_for(workload: Workload) -> tuple[int, ...]:
    """Prompt-bucket edges (tokens) at the quartiles of ``workload``'s prompts (module
    docstring); repeated edges are dropped."""
    prompts = np.maximum(workload.prompt_tokens, 1)
    q = [percentile(prompts, p) for p in (25, 50, 75)]
    return tuple(sorted({max(1, int(round(x))) for x in q}))
