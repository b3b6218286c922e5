"""Knowl 6 of arXiv 2408.13510 (appendix C.2): instance batchers against routers on two
instances, 3,000 requests of four classes in four arrival orders.

The seed names the classes (light/heavy prompt × light/heavy output: LL, LH, HL, HH), the
orders, the batchers (bin packing, least work left, FCFS), the routers (dedicated small–large,
round robin, decode balancer), two instances and 3,000 requests; it gives no lengths, rate,
hardware or metric definition. Ours, all [R], fixed before any Knowl 6 run and never tuned
toward the seed's numbers:

* **Lengths** (tokens; lognormal median, log-sd, clip): *light* 100, 0.5, ≤ 250 — Knowl 3's
  first output bucket (0–250 tokens, 0–0.5 s); *heavy* 1,500, 0.25, ≤ 2,000 — its long bucket
  (1,000–4,000 tokens) capped so that a heavy prompt plus a heavy output fits Llama-2's
  4,096-token context. The seed uses the same two words for both phases, so prompts and outputs
  share the two shapes.
* **Orders** (:data:`ORDERS`): ``lh-hl-random`` 1,500 LH and 1,500 HL requests in a random
  order; ``four-random`` 750 of each class in a random order; ``lh-then-hl`` the same 3,000
  requests as ``lh-hl-random``, the LH ones first; ``hl-then-lh`` the HL ones first. Orders 1, 3
  and 4 of one seed hold the same requests (same lengths) at the same arrival times: only the
  class order differs.
* **Arrivals**: Poisson at 20 req/s (Knowl 4's rate on the same hardware): the 3,000 requests
  arrive within ≈ 150 s, far faster than two instances serve them, so the instances' waiting
  queues hold hundreds of requests — where the batcher's order can matter.
* **Cluster**: two Llama-2-7B / V100 instances of the vLLM-faithful model
  (:func:`~lbtheory.intelligent._setups.vllm_cluster`, Knowl 4's hardware, the seed's main
  testbed) with the batcher under test as the admission order.
* **Routers**: round robin; the decode balancer = JSQ on committed tokens (``jsq-tokens``:
  Σ prompt + predicted output per instance); dedicated small–large = size-interval assignment
  on the predicted output (:class:`SizePartitionRouter` with ``size="output"``): outputs in
  Knowl 3's first bucket (≤ 250 tokens, :data:`SMALL_OUTPUT_TOKENS`) to instance 0, the rest to
  instance 1. (The package's default size, prompt + output, cannot tell LH from HL here: both
  total ≈ 1,600 tokens.)
* **Predictions**: routers and batchers see the true output lengths (an oracle predictor): the
  table compares routing with batching, and the oracle gives the length-aware batchers their
  best case, which makes "routing dominates batching" the harder claim to confirm.
* **Metric**: the seed's "total end-to-end latency" is read as the **makespan**, the time from
  the first arrival to the last completion (s): its values (425–705 s for 3,000 requests)
  cannot be a sum of per-request latencies (3,000 requests of ≥ 100 tokens each at ≥ 20 ms per
  decode step sum to ≥ 6,000 s), and the identical 704.50 s of every batcher under small–large
  fits a drain time (one instance's work) better than a mean. The mean E2E is reported beside.
"""

from __future__ import annotations

import numpy as np

from .._checks import check_int, check_option, check_real
from ..errors import ParameterError
from ..workloads import Workload, workload_from_arrays
from ..workloads._workload import poisson_arrivals
from ._engine import ClusterConfig
from ._setups import vllm_cluster

__all__ = ["ORDERS", "CLASSES", "LIGHT", "HEAVY", "SMALL_OUTPUT_TOKENS", "knowl6_workload",
           "knowl6_cluster"]

#: the two length shapes [R]: (median, log-sd, largest) tokens
LIGHT = (100.0, 0.5, 250)
HEAVY = (1500.0, 0.25, 2000)
#: class -> (prompt shape, output shape)
CLASSES = {"LL": (LIGHT, LIGHT), "LH": (LIGHT, HEAVY), "HL": (HEAVY, LIGHT), "HH": (HEAVY, HEAVY)}
#: the four arrival orders, in the seed's column order
ORDERS = ("lh-hl-random", "four-random", "lh-then-hl", "hl-then-lh")
#: the small–large router's threshold on the predicted output (tokens): below it is small
SMALL_OUTPUT_TOKENS = 251


def _draw(rng: np.random.Generator, shape: tuple[float, float, int], n: int) -> np.ndarray:
    median, sigma, top = shape
    return np.clip(np.rint(median * np.exp(sigma * rng.standard_normal(n))), 1, top).astype(
        np.int64)


def knowl6_workload(order: str, n_requests: int = 3000, *, seed: int,
                    rate_rps: float = 20.0) -> Workload:
    """The requests of one arrival ``order`` (:data:`ORDERS`; module docstring); the task of
    each request is its class (``task_names`` = the four classes). Same seed ⇒ orders
    ``lh-hl-random``, ``lh-then-hl`` and ``hl-then-lh`` hold the same requests and arrivals.

    Raises:
        ParameterError: an unknown order, ``n_requests`` not a positive multiple of 4, or a
            rate ≤ 0.
    """
    if order not in ORDERS:
        raise ParameterError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    n = check_int(n_requests, "n_requests", low=4)
    if n % 4:
        raise ParameterError(f"n_requests must be a multiple of 4 (equal classes), got {n}")
    rate = check_real(rate_rps, "rate_rps", unit="req/s", low=0.0, low_open=True)
    names = tuple(CLASSES)
    rng = np.random.default_rng([seed, 1 if order == "four-random" else 0])
    arrival = poisson_arrivals(rng, n, rate)
    kinds = ["LH", "HL"] if order != "four-random" else list(names)
    cls = np.repeat([names.index(k) for k in kinds], n // len(kinds))
    prompt = np.concatenate([_draw(rng, CLASSES[k][0], n // len(kinds)) for k in kinds])
    output = np.concatenate([_draw(rng, CLASSES[k][1], n // len(kinds)) for k in kinds])
    perm = rng.permutation(n)  # drawn for every order: the orders share the requests
    if order in ("lh-hl-random", "four-random"):
        idx = perm
    elif order == "lh-then-hl":
        idx = np.arange(n)
    else:
        idx = np.roll(np.arange(n), n // 2)
    return workload_from_arrays(arrival, prompt[idx], output[idx], task=cls[idx],
                                task_names=names)


def knowl6_cluster(admission: str, **overrides: object) -> ClusterConfig:
    """Two Llama-2-7B / V100 instances of the vLLM-faithful model batching with
    ``admission`` (an :class:`~lbtheory.intelligent.Admission` value)."""
    from ._admission import Admission

    adm = check_option(Admission, admission, "admission")
    return vllm_cluster("v100", 2, admission=adm, **overrides)
