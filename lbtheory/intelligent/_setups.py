"""The seed's Knowl setups on the vLLM-faithful instance model (arXiv 2408.13510; issue 35).

A :class:`KnowlSetup` fixes the cluster (hardware profile, instances, chunked prefill), the
workload (task mix, rate, requests) and the operating point (one calibrated scalar).

**Profiles** [R], fixed before any table ran:

* Llama-2-7B on a V100-32GB (Knowl 4, 8): ``base_s = 0.020`` — the seed's own "minimum decode
  batch execution time (e.g., 0.02 s)", its decision epoch; the per-token slopes are the
  package's first-principles V100 values (:class:`IterationTimeModel` defaults). KV:
  0.9 × 32 GB − 13.5 GB of fp16 weights − 1 GB of activations ≈ 14.3 GB at 0.5 MiB per token
  ≈ 27,300 tokens: 1,704 blocks of 16 (27,264 tokens).
* Llama-3.1-8B on an A100-80GB (Knowl 5, 7): ``base_s = 0.010`` — a published vLLM measurement
  (J. Musgrave, "vLLM throughput-latency sweep on NVIDIA A100", johnmusgrave.com: ≈ 75 tokens/s
  single-request decode of Llama-3.1-8B bf16 at a 1,024-token prompt on an A100-40GB, i.e.
  13.3 ms per step) scaled by the memory bandwidths (1.56 → 2.04 TB/s): 10.2 ms, rounded; the
  slopes of :data:`A100_LLAMA31_8B`; KV :data:`A100_KV_BUDGET_TOKENS` (25,000 blocks).
* vLLM's scheduler defaults: 16-token blocks, watermark 0.01, ``max_num_seqs`` 256,
  ``max_num_batched_tokens`` 8,192 (without chunked prefill; the chunk budget with it), prompts
  first without chunked prefill, recompute preemption. ``vllm_cluster(..., preemption="swap")``
  swaps instead (:mod:`._swap`): 4 GiB of CPU swap space per GPU (vLLM's default) — 512 blocks
  of Llama-2-7B's 8 MiB, 2,048 of Llama-3.1-8B's 2 MiB — moved at PCIe's effective 12 GB/s
  (V100, PCIe 3.0 × 16) or 25 GB/s (A100, PCIe 4.0 × 16) [R], with or without chunked prefill.

**Calibration rule** (written before any calibration ran). Each setup has one scalar, the
**output-length scale** ``s``: every task's output median is multiplied by ``s`` (lengths still
clipped at the task's maximum, 4,000 tokens for the longest). Why this scalar: the issue's
measurement found the regime set by output lengths (our mix's mean output ≈ 240 tokens where the
seed's datasets reach 4,000), and the KV budget is a hardware fact derived above, so it stays
physical. ``s`` is found by bisection on ``log s`` in [1/4, 16] so that **round robin's** mean
E2E, averaged over the calibration workload seeds 9,000 and 9,001 (never used for evaluation),
at the setup's request count, matches the seed's round robin within 10 % — no other router is
ever run during calibration. Targets (the seed): Knowl 4 ≈ 168 s (−19.18 s = −11.43 %),
Knowl 5 248.41 s, Knowl 7 1,005.31 s. Knowl 5 with chunked prefill keeps Knowl 5's ``s`` (the
same workload; its round robin, 247.30 s in the seed, is then a check, not a fit); Knowl 8 (no
published absolute) keeps Knowl 4's ``s`` (the same hardware and mix). Knowl 7's lengths are the
production trace's published means, so scaling its outputs would contradict them: its scalar is
reported but a setup whose target lies outside the bracket is reported as not calibrated.

**Amendment** (written after the rule above failed on the A100 setups — round robin at ``s`` = 16,
the bracket's top, gave 65 s for Knowl 5 and 713 s for Knowl 7 against 248 s and 1,005 s: the
outputs saturate at their 4,000-token clip — and before any amended calibration ran): the five
tasks are the same datasets on both testbeds, so the A100 setups keep **Knowl 4's output
scale** (Knowl 7 its published means, scale 1), and their one scalar is the **KV budget in
blocks** ``B`` — the A100 quantity the seed does not report (vLLM sizes it from
``gpu_memory_utilization``, the activation profile and the model length; our 25,000 blocks is a
derivation, not a measurement). ``B`` is found by bisection on ``log B`` in [200, 25,000] blocks
so that round robin's mean E2E (same seeds, round robin only) is within 10 % of the seed's.
Knowl 5 with chunked prefill keeps Knowl 5's ``B``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..workloads import FIVE_TASKS, PRODUCTION_LIKE, TaskShape, Workload, task_mix
from ._engine import ClusterConfig
from ._swap import (
    LLAMA2_7B_KV_BYTES,
    LLAMA31_8B_KV_BYTES,
    PCIE3_BYTES_S,
    PCIE4_BYTES_S,
    Preemption,
    swap_options,
)
from ._timing import A100_KV_BUDGET_TOKENS, A100_LLAMA31_8B, IterationTimeModel

__all__ = ["KnowlSetup", "SETUPS", "V100_LLAMA2_7B_VLLM", "A100_LLAMA31_8B_VLLM",
           "V100_KV_TOKENS", "vllm_cluster", "setup_workload", "calibrate_output_scale",
           "bisect_log", "CALIBRATION_SEEDS"]

#: Llama-2-7B / V100-32GB under vLLM [R] (module docstring).
V100_LLAMA2_7B_VLLM = dataclasses.replace(IterationTimeModel(), base_s=0.020)
#: Llama-3.1-8B / A100-80GB under vLLM [R] (module docstring).
A100_LLAMA31_8B_VLLM = dataclasses.replace(A100_LLAMA31_8B, base_s=0.010)
#: KV cache of one V100-32GB serving Llama-2-7B (tokens; 1,704 blocks of 16) [R].
V100_KV_TOKENS = 1704 * 16
#: workload seeds of the calibration (never evaluation seeds).
CALIBRATION_SEEDS = (9000, 9001)

#: per hardware: timing, KV tokens, KV bytes per token, host-device bytes/s [R]
_HARDWARE = {"v100": (V100_LLAMA2_7B_VLLM, V100_KV_TOKENS, LLAMA2_7B_KV_BYTES, PCIE3_BYTES_S),
             "a100": (A100_LLAMA31_8B_VLLM, A100_KV_BUDGET_TOKENS, LLAMA31_8B_KV_BYTES,
                      PCIE4_BYTES_S)}


def vllm_cluster(hardware: str, n_instances: int, chunk_tokens: int | None = None,
                 preemption: Preemption | str = Preemption.RECOMPUTE,
                 **overrides: object) -> ClusterConfig:
    """A cluster of the vLLM-faithful model (module docstring) on ``hardware`` ("v100" or
    "a100"), with chunked prefill of ``chunk_tokens`` per iteration when given; with
    ``preemption="swap"``, the hardware's swap space and transfer time (``overrides`` win)."""
    if hardware not in _HARDWARE:
        raise ParameterError(f"hardware must be one of {', '.join(_HARDWARE)}, got "
                             f"{hardware!r}")
    timing, kv, kv_bytes, bandwidth = _HARDWARE[hardware]
    chunk = {"chunked_prefill": True, "max_prefill_tokens": int(chunk_tokens)} \
        if chunk_tokens else {"prefill_priority": True}
    kw = dict(n_instances=n_instances, kv_budget_tokens=kv, max_batch=256,
              max_prefill_tokens=8192, timing=timing, block_tokens=16, watermark=0.01)
    if preemption != Preemption.RECOMPUTE:  # ClusterConfig checks the value
        kw |= {"preemption": preemption} | swap_options(kv_bytes, bandwidth, 16)
    return ClusterConfig(**(kw | chunk | overrides))


@dataclass(frozen=True)
class KnowlSetup:
    """One Knowl setup (module docstring).

    Attributes:
        name: ``k4``, ``k5``, ``k5-chunked``, ``k7``, ``k8``.
        hardware: ``"v100"`` or ``"a100"``.
        instances, rate_rps, requests: cluster size, Poisson rate (req/s), requests/episode.
        mix: ``"five-task"`` or ``"production"``.
        chunk_tokens: chunked prefill's per-iteration token budget (None: off).
        paper_rr_s: the seed's round-robin mean E2E (s; None where it prints none).
        output_scale: the output-length scale (calibrated on Knowl 4; 1: none).
        kv_blocks: the KV budget in 16-token blocks (None: the hardware's derived budget;
            calibrated on the A100 setups).
    """

    name: str
    hardware: str
    instances: int
    rate_rps: float
    requests: int
    mix: str = "five-task"
    chunk_tokens: int | None = None
    paper_rr_s: float | None = None
    output_scale: float = 1.0
    kv_blocks: int | None = None

    def cluster(self, **overrides: object) -> ClusterConfig:
        """The setup's cluster."""
        kv = {} if self.kv_blocks is None else {"kv_budget_tokens": 16 * self.kv_blocks}
        return vllm_cluster(self.hardware, self.instances, self.chunk_tokens, **(kv | overrides))

    def tasks(self, output_scale: float | None = None) -> tuple[TaskShape, ...]:
        """The task mix with output medians × ``output_scale`` (default: the setup's)."""
        s = self.output_scale if output_scale is None else output_scale
        base = FIVE_TASKS if self.mix == "five-task" else PRODUCTION_LIKE
        return tuple(dataclasses.replace(t, output_median=t.output_median * s) for t in base)


def setup_workload(setup: KnowlSetup, seed: int, n_requests: int | None = None,
                   output_scale: float | None = None) -> Workload:
    """A seeded episode of ``setup`` (``n_requests`` default: the setup's)."""
    return task_mix(setup.tasks(output_scale), n_requests=n_requests or setup.requests,
                    seed=seed, rate_rps=setup.rate_rps)


#: Knowl 4's calibrated output scale: round robin 164.5 s vs the seed's 168 s (2.1 % off).
_K4_SCALE = 2.5937
#: the setups; scalars from :func:`calibrate_output_scale` (experiments/results/
#: intelligent-headroom). Knowl 5 and 7 are **not calibrated**: no KV budget in the bracket
#: reaches the seed's round robin (closest: 600 blocks, 173.5 s vs 248.4 s; 2,600 blocks, the
#: smallest that holds Knowl 7's largest request, 375.7 s vs 1,005.3 s); they run at that closest
#: point, marked so in every table.
SETUPS: dict[str, KnowlSetup] = {s.name: s for s in (
    KnowlSetup("k4", "v100", 4, 20.0, 2000, paper_rr_s=168.0, output_scale=_K4_SCALE),
    KnowlSetup("k5", "a100", 4, 80.0, 2000, paper_rr_s=248.41, output_scale=_K4_SCALE,
               kv_blocks=600),
    KnowlSetup("k5-chunked", "a100", 4, 80.0, 2000, chunk_tokens=1024, paper_rr_s=247.30,
               output_scale=_K4_SCALE, kv_blocks=600),
    KnowlSetup("k7", "a100", 4, 80.0, 4000, mix="production", chunk_tokens=1024,
               paper_rr_s=1005.31, kv_blocks=2600),
    KnowlSetup("k8", "v100", 8, 40.0, 4000, output_scale=_K4_SCALE),
)}


def rr_mean_e2e(setup: KnowlSetup, output_scale: float | None = None,
                seeds: Sequence[int] = CALIBRATION_SEEDS, n_requests: int | None = None,
                kv_blocks: int | None = None) -> float:
    """Round robin's mean E2E (s) over ``seeds`` at ``output_scale`` (default the setup's) and
    ``kv_blocks`` (default the setup's) on the compiled engine."""
    from ..registry import make_router
    from ._simulate import simulate

    if kv_blocks is not None:
        setup = dataclasses.replace(setup, kv_blocks=int(kv_blocks))
    cfg = setup.cluster()
    vals = [simulate(setup_workload(setup, s, n_requests, output_scale),
                     make_router("rr", "instances"), cfg).summary()["latency"]["mean"]
            for s in seeds]
    return float(np.mean(vals))


def bisect_log(f: Callable[[float], float], low: float, high: float, target: float, *,
               rising: bool = True, steps: int = 12, within: float = 0.10) -> None:
    """The calibration's search (module docstring): ``f`` (monotone: ``rising`` or falling in
    x) at both ends of [``low``, ``high``] — the end with the larger value first — then, if
    ``target`` lies within ``within`` (relative) of that range, bisection on ``log x`` until
    ``f`` is within ``within`` of ``target`` or after ``steps`` halvings. ``f`` records its
    own probes (the caller keeps the one closest to ``target``)."""
    top, bottom = (f(high), f(low)) if rising else (f(low), f(high))
    if top < target * (1 - within) or bottom > target * (1 + within):
        return
    lo, hi = math.log(low), math.log(high)
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        v = f(math.exp(mid))
        if abs(v / target - 1.0) <= within:
            return
        lo, hi = (mid, hi) if (v < target) == rising else (lo, mid)


def calibrate_output_scale(setup: KnowlSetup, *, scalar: str = "output_scale",
                           low: float = 0.25, high: float = 16.0, steps: int = 12,
                           n_requests: int | None = None,
                           progress: Callable[[float, float], None] | None = None
                           ) -> dict[str, object]:
    """The rule of the module docstring: bisection on the log of ``scalar`` (``"output_scale"``
    in [``low``, ``high``], or ``"kv_blocks"``, rounded to whole blocks) until round robin's
    mean E2E is within 10 % of ``setup.paper_rr_s`` (or ``steps`` halvings). Returns the
    scalar's value, round robin's E2E there, the target, whether it is within 10 % and every
    probe."""
    if setup.paper_rr_s is None:
        raise ParameterError(f"setup {setup.name} has no published round robin to calibrate to")
    if scalar not in ("output_scale", "kv_blocks"):
        raise ParameterError(f"scalar must be 'output_scale' or 'kv_blocks', got {scalar!r}")
    target = setup.paper_rr_s
    probes: list[tuple[float, float]] = []
    rising = scalar == "output_scale"  # E2E grows with the outputs, falls with the KV

    def f(s: float) -> float:
        if scalar == "kv_blocks":
            s = float(round(s))
            v = rr_mean_e2e(setup, kv_blocks=int(s), n_requests=n_requests)
        else:
            v = rr_mean_e2e(setup, s, n_requests=n_requests)
        probes.append((s, v))
        if progress is not None:
            progress(s, v)
        return v

    bisect_log(f, low, high, target, rising=rising, steps=steps)
    s, v = min(probes, key=lambda p: abs(p[1] - target))
    return {"scale": s, "rr_e2e_s": v, "target_s": target,
            "within_10pct": bool(abs(v / target - 1.0) <= 0.10), "probes": probes}
