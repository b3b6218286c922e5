"""Intelligent Router (arXiv 2408.13510; THEORY §10): LLM instance simulator with prefill/decode
interference, workload-impact estimator, output-length predictor and routers.

Requests come as the one request type, :class:`lbtheory.workloads.Workload` (``mix_traces``
mixes task traces); routers follow the one contract of :mod:`lbtheory.routers` and see an
:class:`InstanceView`; they are made by name in :mod:`lbtheory.registry`
(``make_router("minmin", "instances")``). Private one-concept modules re-exported here:

* ``_timing``: :class:`IterationTimeModel` and :func:`fit_iteration_model` (least squares);
* ``_engine``: :class:`ClusterConfig`, :class:`ClusterSim` (continuous batching, KV budget,
  preemption by recomputation, router queue with decision epochs) — the Python reference
  engine — and :class:`InstanceView`;
* ``_compiled`` (with the numba kernels of ``_core``, ``_rkernels``): :class:`CompiledClusterSim`,
  the compiled engine (the default; same per-request outcomes as the reference, bit for bit),
  :class:`KernelSpec` and :func:`kernel_spec` (routers that run inside its loop);
* ``_simulate``: :func:`simulate_instances` (``lbtheory.simulate_instances``; :func:`simulate` is
  the same function; ``engine="auto"|"compiled"|"reference"``), :func:`run_router`,
  :func:`make_sim`, :class:`InstanceResult` (E2E, TTFT, TBT, router wait, ..., the engine);
* ``_load``: :func:`offered_load` (prefill and decode demand against capacity; overload);
* ``_impact``: the workload-impact estimator (T_p, r_p, r_d, r_mix, h) and its calibration;
* ``_predictor``: the output-length bucket classifier (histogram, with backoff) and its report;
* ``_routers``: Min-Min, Maximum Capacity Usage, greedy mixing heuristic, small/large partition
  (round robin, JSQ and JSQ-tokens are the shared baselines of :mod:`lbtheory.routers`);
* ``_env``: the routing MDP as a ``gymnasium.Env`` (:class:`RoutingEnv`; its step is one
  compiled kernel call, ``_envkernels``) and its :func:`observation` of a view;
* ``_calibrate``: :func:`calibrate_env` (the reward's horizon and scales from a round-robin
  run) and :func:`bucket_spec_for` (decode buckets at the cluster's decode speed);
* ``_qnet``: the Q-networks (:class:`SymmetricQNetwork`, the plain MLP);
* ``_dqn``: Double-DQN training (JAX + optax + equinox), :class:`DQNRouter`;
* ``_checkpoint``: :func:`save_checkpoint`, :func:`load_checkpoint`, :func:`dqn_router`.

The RL names (``_env``, ``_dqn``) load lazily, so the heuristics do not import JAX.
``__all__`` is the public page; the kernels of the environment and of training
(``routing_mask``, ``double_dqn_step`` …) stay importable from here but are not part of it.
"""

from ..workloads import Workload, mix_traces, workload_from_arrays
from ._compiled import CompiledClusterSim, KernelSpec, kernel_spec
from ._engine import Admission, ClusterConfig, ClusterSim, InstanceView
from ._impact import (
    ImpactParams,
    MixReading,
    calibrate_impact,
    decode_reward,
    guidance_penalty,
    mixing_reward,
    prompt_impact_s,
    prompt_reward,
)
from ._load import OfferedLoad, offered_load
from ._predictor import (
    BucketSpec,
    LengthPredictor,
    PredictorReport,
    evaluate_length_predictor,
    fit_length_predictor,
)
from ._predictor import history_feature as history_feature  # internal: not in __all__
from ._routers import (
    MaxCapacityRouter,
    MinMinRouter,
    MixingRouter,
    SizePartitionRouter,
    estimated_completion_s,
)
from ._simulate import (
    Engine,
    InstanceResult,
    make_sim,
    run_router,
    simulate,
    simulate_instances,
)
from ._simulate import result_of as result_of  # internal: not in __all__
from ._timing import (
    A100_KV_BUDGET_TOKENS,
    A100_LLAMA31_8B,
    ITERATION_FEATURES,
    IterationTimeModel,
    fit_iteration_model,
)

_LAZY = {
    "EnvConfig": "_env", "RoutingEnv": "_env", "guidance_weight": "_env",
    "observation_size": "_env", "ideal_time_s": "_env", "observation": "_env",
    "wait_allowed": "_env", "routing_mask": "_env", "Guidance": "_env", "Reading": "_env",
    "Progress": "_env",
    "episode_labels": "_env", "observation_layout": "_env", "load_sign": "_env",
    "calibrate_env": "_calibrate", "bucket_spec_for": "_calibrate", "Calibration": "_calibrate",
    "prompt_edges_for": "_calibrate",
    "DQNConfig": "_dqn", "TrainResult": "_dqn", "train_dqn": "_dqn", "greedy_rollout": "_dqn",
    "double_dqn_step": "_dqn", "GUIDANCE_OF": "_dqn", "RLKind": "_dqn", "Network": "_dqn",
    "Selection": "_dqn",
    "DQNRouter": "_dqn", "ReplayBuffer": "_dqn", "double_dqn_update": "_dqn",
    "build_network": "_dqn",
    "save_checkpoint": "_checkpoint", "load_checkpoint": "_checkpoint",
    "dqn_router": "_checkpoint",
    "q_values": "_qnet", "split_net": "_qnet", "greedy_action": "_qnet",
    "make_q_network": "_qnet", "SymmetricQNetwork": "_qnet", "MonotoneQNetwork": "_qnet",
}
#: old name -> new name: deprecated aliases kept for one release.
_DEPRECATED = {"SimResult": "InstanceResult", "ClusterView": "InstanceView"}


#: importable, but internal plumbing of the environment and of training (not in ``__all__``).
_INTERNAL = frozenset({
    "load_sign", "observation_layout", "wait_allowed", "routing_mask", "episode_labels",
    "double_dqn_step", "double_dqn_update", "split_net", "build_network", "greedy_action",
    "q_values", "GUIDANCE_OF", "prompt_edges_for", "result_of", "history_feature",
})


def __getattr__(name: str) -> object:
    if name in _DEPRECATED:
        new = _DEPRECATED[name]
        from ..errors import warn_deprecated

        warn_deprecated(f"lbtheory.intelligent.{name}", f"lbtheory.intelligent.{new}")
        return globals()[new]
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{mod}"), name)


def __dir__() -> list[str]:
    """The public names (``__all__``)."""
    return sorted(__all__)


__all__ = [*(name for name in _LAZY if name not in _INTERNAL),
    "Admission", "ClusterConfig", "ClusterSim", "InstanceView", "ImpactParams",
    "calibrate_impact", "decode_reward", "guidance_penalty", "mixing_reward", "prompt_impact_s",
    "prompt_reward", "MinMinRouter", "MaxCapacityRouter", "MixingRouter", "SizePartitionRouter",
    "estimated_completion_s", "MixReading", "InstanceResult", "run_router", "simulate_instances",
    "simulate",
    "CompiledClusterSim", "KernelSpec", "kernel_spec", "Engine", "make_sim",
    "ITERATION_FEATURES", "IterationTimeModel", "A100_LLAMA31_8B", "A100_KV_BUDGET_TOKENS",
    "fit_iteration_model", "Workload", "mix_traces",
    "workload_from_arrays", "BucketSpec", "LengthPredictor", "PredictorReport",
    "evaluate_length_predictor", "fit_length_predictor", "OfferedLoad",
    "offered_load",
]
