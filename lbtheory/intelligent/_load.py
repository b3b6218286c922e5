"""Offered load of a workload on a cluster: prefill and decode demand against capacity.

Which regime a run is in decides what routing can change: below capacity, queueing is what a
router saves; above it, latency grows with the number of requests (the run measures a drain)
and every work-conserving router ends at about the same makespan. The estimate [R], from the
iteration-time model ``t = base + a_p Σq + a_q Σq² + a_n n + a_c C`` (s):

* **prefill demand** ``ρ_p = λ · E[a_p p + a_q p²] / m``: the fraction of each instance's time
  spent on the extra work of prefills (λ the arrival rate, req/s; ``m`` instances);
* **decode demand** ``ρ_d = λ · E[d] / (m · μ_d)``: output tokens asked per second against the
  decode capacity ``μ_d = n* / t(n*, C*)`` tokens/s of one instance at its operating point,
  ``n* = min(max_batch, KV budget / k̄)`` decoding requests of mean KV ``k̄ = E[d (p + d/2)] / E[d]``
  (a request holds ``p + d/2`` tokens on average over its ``d`` decode iterations),
  ``C* = n* k̄``;
* **utilisation** ``ρ = ρ_p + ρ_d``: the cluster is *overloaded* when ``ρ ≥ 1``.

``decode_tps`` = ``1 / t(n*, C*)`` is one request's decode speed at that operating point
(tokens/s): the speed of the completion-time buckets of the length predictor [R].
λ is the workload's mean rate ``(n − 1) / (last − first arrival)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..workloads import Workload
from ._engine import ClusterConfig

__all__ = ["OfferedLoad", "offered_load"]


@dataclass(frozen=True)
class OfferedLoad:
    """The estimate of the module docstring.

    Attributes:
        rate_rps: arrival rate λ (req/s; inf when all requests arrive at once).
        mean_prompt_tokens, mean_output_tokens: E[p], E[d] (tokens).
        prefill_demand: ρ_p (instance-time fraction).
        decode_demand: ρ_d (fraction of decode capacity).
        utilisation: ρ = ρ_p + ρ_d.
        decode_batch: n* (requests decoding together on a full instance).
        decode_tps: one request's decode speed at the operating point (tokens/s).
        overloaded: ρ ≥ 1.
    """

    rate_rps: float
    mean_prompt_tokens: float
    mean_output_tokens: float
    prefill_demand: float
    decode_demand: float
    utilisation: float
    decode_batch: float
    decode_tps: float
    overloaded: bool

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (the CLI's ``offered_load`` block)."""
        return {k: (float(v) if not isinstance(v, bool) else v)
                for k, v in asdict(self).items()}

    def describe(self) -> str:
        """One line: λ, ρ_p, ρ_d, ρ and the regime."""
        regime = "OVERLOADED" if self.overloaded else "below capacity"
        return (f"offered load: {self.rate_rps:.3g} req/s, prefill {self.prefill_demand:.2f} + "
                f"decode {self.decode_demand:.2f} = {self.utilisation:.2f} of capacity "
                f"({regime})")

    def warning(self) -> str | None:
        """The overload warning, or None below capacity."""
        if not self.overloaded:
            return None
        return (f"warning: the cluster is overloaded (offered load {self.utilisation:.2f} of "
                f"capacity: prefill {self.prefill_demand:.2f} + decode "
                f"{self.decode_demand:.2f}); latency grows with the number of requests and "
                f"the run measures a drain, where routers differ little")


def offered_load(workload: Workload, config: ClusterConfig) -> OfferedLoad:
    """The offered load of ``workload`` on ``config`` (module docstring)."""
    tm = config.timing
    p = np.maximum(workload.prompt_tokens, 1).astype(float)
    d = np.maximum(workload.output_tokens, 1).astype(float)
    t = workload.arrival_s
    span = float(t[-1] - t[0])
    rate = (len(t) - 1) / span if span > 0 else float("inf")
    m = config.n_instances
    prefill = float(np.mean(tm.prefill_s_per_token * p + tm.attention_s_per_token2 * p * p))
    kbar = float(np.sum(d * (p + d / 2)) / np.sum(d))
    n_star = min(float(config.max_batch), max(config.kv_budget_tokens / kbar, 1.0))
    t_iter = tm.iteration_time((), 0, 0) + tm.decode_s_per_seq * n_star \
        + tm.context_s_per_token * n_star * kbar
    rho_p = rate * prefill / m
    rho_d = rate * float(np.mean(d)) * t_iter / (m * n_star)
    rho = rho_p + rho_d
    return OfferedLoad(rate, float(np.mean(p)), float(np.mean(d)), rho_p, rho_d, rho, n_star,
                       1.0 / t_iter, bool(rho >= 1.0))
