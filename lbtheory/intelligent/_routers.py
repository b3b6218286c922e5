"""Heuristic routers of the Intelligent Router paper (THEORY §10), on the one router contract.

Each is a frozen config with ``init`` / ``observe`` / ``route(state, view, rng)`` (see
:mod:`lbtheory.routers`); the view is an :class:`~lbtheory.intelligent.InstanceView`. They are
deterministic; ties go to the lowest instance index (and, for Min-Min, the earliest queued
request). Round robin, JSQ, JSQ-tokens (the decode balancer) and power of two are the shared
baselines of :mod:`lbtheory.routers` (``make_router("rr", "instances")``).

* ``minmin`` — Min-Min [R reading for a streaming router]: over the first ``view`` queued requests
  and all instances, the pair with the smallest estimated completion time
  ``ECT = t([W_m, p_i], n_m, K_m) + d_i · t([], n_m + 1, K_m + p_i + d_i/2)`` (``W_m`` waiting
  prefill tokens, ``n_m`` running requests, ``K_m`` KV in use; ``t`` the iteration-time model).
* ``maxcap`` — Maximum Capacity Usage [R]: the instance with the most free capacity now,
  ``min(1 − (n_m + 1)/max_batch, 1 − (K_m + W_m + p_i)/kv_budget)`` (``K_m`` KV in use, ``W_m``
  waiting prefill tokens; it uses no output-length prediction).
* ``heuristic`` — the greedy mixing heuristic: ``argmax_m r_mix`` (the choice with h = 0), under
  the estimator's ``"split"`` reading [R] by default: the prompt term sees each instance's
  prefill backlog, the decode term its decode context, so the request's own prompt length
  decides which matters (:mod:`._impact`; the literal reading is least-loaded routing).
* ``small-large`` — dedicated small/large partition (:class:`SizePartitionRouter`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .._checks import check_int
from ..errors import ParameterError
from ..routers import Assignment, Stateless
from ._engine import InstanceView
from ._impact import ImpactParams, calibrate_impact, instance_loads, mixing_argmax
from ._rkernels import completion_estimates_s, maxcap_pick, size_partition_pick

__all__ = ["MinMinRouter", "MaxCapacityRouter", "MixingRouter", "SizePartitionRouter",
           "estimated_completion_s"]


def estimated_completion_s(view: InstanceView, prompt: np.ndarray,
                           output_pred: np.ndarray) -> np.ndarray:
    """ECT matrix (requests × instances, s) used by Min-Min (module docstring):
    :func:`~lbtheory.intelligent._rkernels.completion_estimate_s`, the compiled engine's."""
    i64 = np.int64
    return completion_estimates_s(view.config.timing.coefficients(),
                                  np.asarray(view.waiting_prefill_tokens, i64),
                                  np.asarray(view.n_running, i64), np.asarray(view.kv_used, i64),
                                  np.asarray(prompt, float), np.asarray(output_pred, float))


@dataclasses.dataclass(frozen=True)
class MinMinRouter(Stateless):
    """Min-Min over the visible router queue (module docstring)."""

    name: str = "minmin"

    def route(self, state: Any, view: InstanceView,
              rng: np.random.Generator) -> tuple[Assignment, Any]:
        """The (request, instance) pair of least estimated completion time."""
        ect = estimated_completion_s(view, view.queue_prompt, view.queue_output_pred)
        i, m = np.unravel_index(int(np.argmin(ect)), ect.shape)
        return Assignment(np.array([i]), np.array([m])), state


@dataclasses.dataclass(frozen=True)
class MaxCapacityRouter(Stateless):
    """Maximum Capacity Usage: the instance with the most free batch/KV capacity."""

    name: str = "maxcap"

    def route(self, state: Any, view: InstanceView, rng: np.random.Generator) -> tuple[int, Any]:
        """argmax of the free capacity for the head request (:func:`maxcap_pick`)."""
        cfg = view.config
        i64 = np.int64
        return int(maxcap_pick(np.asarray(view.n_running + view.n_waiting, i64),
                               np.asarray(view.kv_committed, i64), int(view.queue_prompt[0]),
                               cfg.max_batch, cfg.kv_budget_tokens)), state


@dataclasses.dataclass(frozen=True)
class MixingRouter:
    """Greedy mixing heuristic: ``argmax_m r_mix`` (``params`` default: calibrated from the
    cluster's iteration-time model at the first decision)."""

    params: ImpactParams | None = None
    name: str = "heuristic"

    def init(self, seed: int = 0) -> ImpactParams | None:
        """The estimator's parameters, or None until calibrated."""
        return self.params

    def observe(self, state: ImpactParams | None, view: InstanceView) -> ImpactParams | None:
        """Nothing to learn."""
        return state

    def route(self, state: ImpactParams | None, view: InstanceView,
              rng: np.random.Generator) -> tuple[int, ImpactParams]:
        """argmax of r_mix for the head request (:func:`mixing_argmax`)."""
        prm = state if state is not None else calibrate_impact(view.config.timing)
        x, y = instance_loads(prm, view.load_tokens, view.waiting_prefill_tokens, view.kv_used)
        return int(mixing_argmax(int(view.queue_prompt[0]), int(view.queue_output_pred[0]),
                                 np.asarray(x, float), np.asarray(y, float),
                                 prm.kernel_params())), prm


@dataclasses.dataclass(frozen=True)
class SizePartitionRouter:
    """Dedicated small/large partition (2 or more instances): requests whose size is below
    ``threshold_tokens`` go round robin to the first half of the instances, the others to the
    second half — the "Dedicated Small-Large" router of the paper's batching-vs-routing table
    [R]. ``size``: ``"total"`` (prompt + predicted output, the default) or ``"output"`` (the
    predicted output alone: the decode iterations, a request's service time — size-interval
    task assignment)."""

    threshold_tokens: int = 1024
    name: str = "small-large"
    size: str = "total"

    def __post_init__(self) -> None:
        check_int(self.threshold_tokens, "SizePartitionRouter.threshold_tokens", low=0)
        if self.size not in ("total", "output"):
            raise ParameterError(f"SizePartitionRouter.size must be 'total' or 'output', got "
                                 f"{self.size!r}")

    def init(self, seed: int = 0) -> tuple[int, int]:
        """Round-robin pointers of the small and the large half."""
        return (0, 0)

    def observe(self, state: tuple[int, int], view: InstanceView) -> tuple[int, int]:
        """Nothing to learn."""
        return state

    def route(self, state: tuple[int, int], view: InstanceView,
              rng: np.random.Generator) -> tuple[int, tuple[int, int]]:
        """The next instance of the head request's half (:func:`size_partition_pick`)."""
        size = int(view.queue_output_pred[0]) + (
            int(view.queue_prompt[0]) if self.size == "total" else 0)
        small = size < self.threshold_tokens
        pointers = np.array(state, dtype=np.int64)
        g = size_partition_pick(small, view.config.n_instances, pointers)
        return int(g), (int(pointers[0]), int(pointers[1]))
