"""Heuristic routers of the Intelligent Router paper (THEORY §10), as ``(init, route)`` factories.

A router is a :class:`Router`: ``init(n_instances) -> state`` and
``route(state, view) -> (decision, state)`` where ``decision`` is ``(queue_position, instance)``
or ``None`` (wait until the next epoch). They are deterministic; ties go to the lowest instance
index (and, for Min-Min, the earliest queued request).

* ``rr`` — round robin over instances, head of the queue.
* ``jsq`` — join the shortest queue: fewest requests on the instance (running + waiting).
* ``minmin`` — Min-Min [R reading for a streaming router]: over the first ``view`` queued requests
  and all instances, the pair with the smallest estimated completion time
  ``ECT = t([W_m, p_i], n_m, K_m) + d_i · t([], n_m + 1, K_m + p_i + d_i/2)`` (``W_m`` waiting
  prefill tokens, ``n_m`` running requests, ``K_m`` KV in use; ``t`` the iteration-time model).
* ``maxcap`` — Maximum Capacity Usage [R]: the instance with the most free capacity now,
  ``min(1 − (n_m + 1)/max_batch, 1 − (K_m + W_m + p_i)/kv_budget)`` (``K_m`` KV in use, ``W_m``
  waiting prefill tokens; it uses no output-length prediction).
* ``heuristic`` — the greedy mixing heuristic: ``argmax_m r_mix`` (the choice with h = 0).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..errors import ModelError
from ._engine import ClusterView
from ._impact import ImpactParams, calibrate_impact, mixing_reward

__all__ = ["Router", "Decision", "round_robin", "jsq", "min_min", "max_capacity",
           "mixing_heuristic", "size_partition", "decode_balancer", "estimated_completion_s",
           "HEURISTIC_ROUTERS", "make_heuristic"]

Decision = tuple[int, int] | None


class Router(NamedTuple):
    """A routing policy: ``init(n_instances) -> state``; ``route(state, view) -> (decision,
    state)``."""

    name: str
    init: Callable[[int], Any]
    route: Callable[[Any, ClusterView], tuple[Decision, Any]]


def round_robin() -> Router:
    """Round robin: instance ``k mod m`` for the k-th routed request."""
    def route(state: int, view: ClusterView) -> tuple[Decision, int]:
        m = view.config.n_instances
        return (0, state % m), (state + 1) % m
    return Router("rr", lambda m: 0, route)


def jsq() -> Router:
    """Join the shortest queue (running + waiting requests on the instance)."""
    def route(state: None, view: ClusterView) -> tuple[Decision, None]:
        return (0, int(np.argmin(view.n_running + view.n_waiting))), None
    return Router("jsq", lambda m: None, route)


def estimated_completion_s(view: ClusterView, prompt: np.ndarray,
                           output_pred: np.ndarray) -> np.ndarray:
    """ECT matrix (requests × instances, s) used by Min-Min (module docstring)."""
    tm = view.config.timing
    out = np.empty((len(prompt), view.config.n_instances))
    for i, (p, d) in enumerate(zip(prompt.tolist(), output_pred.tolist())):
        for m in range(view.config.n_instances):
            w, n, kv = (int(view.waiting_prefill_tokens[m]), int(view.n_running[m]),
                        int(view.kv_used[m]))
            out[i, m] = (tm.iteration_time([w, p] if w else [p], n, kv)
                         + d * tm.iteration_time((), n + 1, kv + p + d / 2))
    return out


def min_min() -> Router:
    """Min-Min over the visible router queue (module docstring)."""
    def route(state: None, view: ClusterView) -> tuple[Decision, None]:
        ect = estimated_completion_s(view, view.queue_prompt, view.queue_output_pred)
        i, m = np.unravel_index(int(np.argmin(ect)), ect.shape)
        return (int(i), int(m)), None
    return Router("minmin", lambda m: None, route)


def max_capacity() -> Router:
    """Maximum Capacity Usage: the instance with the most free batch/KV capacity."""
    def route(state: None, view: ClusterView) -> tuple[Decision, None]:
        cfg = view.config
        p = int(view.queue_prompt[0])
        free = np.minimum(1.0 - (view.n_running + view.n_waiting + 1) / cfg.max_batch,
                          1.0 - (view.kv_committed + p) / cfg.kv_budget_tokens)
        return (0, int(np.argmax(free))), None
    return Router("maxcap", lambda m: None, route)


def mixing_heuristic(params: ImpactParams | None = None) -> Router:
    """Greedy mixing heuristic: ``argmax_m r_mix`` (params default: calibrated from the cluster's
    iteration-time model at ``init``)."""
    def init(m: int) -> ImpactParams | None:
        return params

    def route(state: ImpactParams | None, view: ClusterView) -> tuple[Decision, Any]:
        prm = state if state is not None else calibrate_impact(view.config.timing)
        r = mixing_reward(int(view.queue_prompt[0]), int(view.queue_output_pred[0]),
                          view.load_tokens, prm)
        return (0, int(np.argmax(r))), prm
    return Router("heuristic", init, route)


def size_partition(threshold_tokens: int) -> Router:
    """Dedicated small/large partition (2 or more instances): requests with prompt + predicted
    output below ``threshold_tokens`` go round robin to the first half of the instances, the
    others to the second half — the "Dedicated Small-Large" router of the paper's
    batching-vs-routing table [R]."""
    def route(state: tuple[int, int], view: ClusterView) -> tuple[Decision, tuple[int, int]]:
        m = view.config.n_instances
        half = max(m // 2, 1)
        small = int(view.queue_prompt[0]) + int(view.queue_output_pred[0]) < threshold_tokens
        i_s, i_l = state
        if small or m == 1:
            return (0, i_s % half), (i_s + 1, i_l)
        return (0, half + i_l % (m - half)), (i_s, i_l + 1)
    return Router("small-large", lambda m: (0, 0), route)


def decode_balancer() -> Router:
    """Decode balancer [R]: the instance with the fewest committed prompt + predicted output
    tokens (``L_m``), i.e. balances the decode work."""
    def route(state: None, view: ClusterView) -> tuple[Decision, None]:
        return (0, int(np.argmin(view.load_tokens))), None
    return Router("decode-balancer", lambda m: None, route)


HEURISTIC_ROUTERS: dict[str, Callable[[], Router]] = {
    "rr": round_robin, "jsq": jsq, "minmin": min_min, "maxcap": max_capacity,
    "heuristic": mixing_heuristic,
}


def make_heuristic(name: str) -> Router:
    """The heuristic router called ``name`` (one of :data:`HEURISTIC_ROUTERS`).

    Raises:
        ModelError: unknown name (the message lists the known ones).
    """
    if name not in HEURISTIC_ROUTERS:
        raise ModelError(f"unknown router {name!r}: expected one of "
                         f"{', '.join(HEURISTIC_ROUTERS)}")
    return HEURISTIC_ROUTERS[name]()
