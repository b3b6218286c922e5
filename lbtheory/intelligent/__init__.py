"""Intelligent Router (arXiv 2408.13510; THEORY §10): LLM instance simulator with prefill/decode
interference, workload-impact estimator, output-length predictor and routers.

Private one-concept modules re-exported here:

* ``_timing``: :class:`IterationTimeModel` and :func:`fit_iteration_model` (least squares);
* ``_workload``: :class:`Workload` and :func:`mix_traces` (traces mixed by task, seeded arrivals);
* ``_engine``: :class:`ClusterConfig`, :class:`ClusterSim` (continuous batching, KV budget,
  preemption by recomputation, router queue with decision epochs);
* ``_simulate``: :func:`simulate`, :class:`SimResult` (E2E, TTFT, TBT, router wait, ...);
* ``_impact``: the workload-impact estimator (T_p, r_p, r_d, r_mix, h) and its calibration;
* ``_predictor``: the output-length bucket classifier (histogram, with backoff) and its report;
* ``_routers``: round robin, JSQ, Min-Min, Maximum Capacity Usage, greedy mixing heuristic;
* ``_env``: the routing MDP as a ``gymnasium.Env`` (:class:`RoutingEnv`);
* ``_dqn``: Double-DQN routers (JAX + optax + equinox), checkpoints.

The RL names (``_env``, ``_dqn``) load lazily, so the heuristics do not import JAX.
"""

import importlib
from typing import Any

from ._engine import ClusterConfig, ClusterSim, ClusterView
from ._impact import (
    ImpactParams,
    calibrate_impact,
    decode_reward,
    guidance_penalty,
    mixing_reward,
    prompt_impact_s,
    prompt_reward,
)
from ._predictor import (
    BucketSpec,
    LengthPredictor,
    PredictorReport,
    evaluate_length_predictor,
    fit_length_predictor,
    history_feature,
)
from ._routers import (
    HEURISTIC_ROUTERS,
    Router,
    decode_balancer,
    estimated_completion_s,
    jsq,
    make_heuristic,
    max_capacity,
    min_min,
    mixing_heuristic,
    round_robin,
    size_partition,
)
from ._simulate import SimResult, result_of, run_router, simulate
from ._timing import ITERATION_FEATURES, IterationTimeModel, fit_iteration_model
from ._workload import Workload, mix_traces, workload_from_arrays

_LAZY = {
    "EnvConfig": "_env", "RoutingEnv": "_env", "guidance_weight": "_env",
    "observation_size": "_env", "ideal_time_s": "_env",
    "DQNConfig": "_dqn", "TrainResult": "_dqn", "train_dqn": "_dqn", "greedy_rollout": "_dqn",
    "save_checkpoint": "_dqn", "load_checkpoint": "_dqn", "GUIDANCE_OF": "_dqn",
    "q_values": "_dqn",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{mod}", __name__), name)


__all__ = [*_LAZY,
    "ClusterConfig", "ClusterSim", "ClusterView", "ImpactParams", "calibrate_impact",
    "decode_reward", "guidance_penalty", "mixing_reward", "prompt_impact_s", "prompt_reward",
    "HEURISTIC_ROUTERS", "Router", "estimated_completion_s", "jsq", "make_heuristic",
    "max_capacity", "min_min", "mixing_heuristic", "round_robin", "decode_balancer",
    "size_partition", "SimResult", "result_of",
    "run_router", "simulate", "ITERATION_FEATURES", "IterationTimeModel", "fit_iteration_model",
    "Workload", "mix_traces", "workload_from_arrays", "BucketSpec", "LengthPredictor",
    "PredictorReport", "evaluate_length_predictor", "fit_length_predictor", "history_feature",
]
