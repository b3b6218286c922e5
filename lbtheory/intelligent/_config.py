"""The instance simulator's configuration, :class:`ClusterConfig` (both engines read it; the
module docstring of :mod:`._engine` states the semantics of every option)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._checks import check_int, check_memory, check_option, check_real
from ..errors import ParameterError
from ..workloads import Workload
from ._admission import Admission
from ._swap import Preemption
from ._timing import IterationTimeModel

__all__ = ["ClusterConfig"]


@dataclass(frozen=True)
class ClusterConfig:
    """Cluster of identical instances.

    Attributes:
        n_instances: number of instances m (≥ 1).
        kv_budget_tokens: KV-cache capacity of one instance (tokens) [R default 32768: ≈16 GB of
            a V100-32GB at 0.5 MB per Llama-2-7B token].
        max_batch: most requests in one iteration (vLLM's ``max_num_seqs``, default 256).
        max_prefill_tokens: most prefill tokens per iteration (default 8192); a longer request is
            admitted alone.
        epoch_s: router decision epoch (s), the paper's 0.02 s minimum decode batch time.
        timing: the iteration-time model.
        admission: the instance batcher's admission order, :class:`Admission` or its value:
            ``"fcfs"`` (vLLM's default), ``"spf"``, ``"lwl"`` or ``"bin-packing"`` (defined
            there); preempted requests always resume first.
        chunked_prefill: split prefills into chunks; ``max_prefill_tokens`` is then the
            iteration's token budget, decodes included (module docstring).
        block_tokens: KV-cache block size (tokens): a request holds ``ceil(tokens / block)``
            blocks of the ``kv_budget_tokens // block_tokens`` an instance has (vLLM's paged KV,
            16; the default 1 is the token-exact legacy model).
        watermark: fraction of the blocks an admission must leave free (vLLM's
            ``watermark``, 0.01; default 0: the legacy model). Decoding ignores it.
        prefill_priority: without chunked prefill, an iteration that admits prefills runs no
            decodes (vLLM's default scheduler: prompts first, the running requests stall);
            default False: the legacy model mixes them.
        preemption: how a running request is preempted when the blocks run out,
            :class:`~._swap.Preemption` or its value: ``"recompute"`` (default; vLLM v0's for
            one sequence) or ``"swap"`` (its KV moves to the CPU swap space and back; vLLM's
            schedulers: needs ``prefill_priority`` or chunked prefill).
        swap_blocks: CPU swap space of one instance in KV blocks (``"swap"`` only; a preempted
            request that does not fit is recomputed) [R: :func:`~._swap.swap_options`, vLLM's
            default 4 GiB; :func:`~lbtheory.intelligent.vllm_cluster` derives it per model].
        swap_block_s: seconds to move one KV block between GPU and CPU, either way
            (``"swap"`` only) [R: block bytes over the PCIe bandwidth, :mod:`._swap`].
    """

    n_instances: int = 4
    kv_budget_tokens: int = 32768
    max_batch: int = 256
    max_prefill_tokens: int = 8192
    epoch_s: float = 0.02
    timing: IterationTimeModel = field(default_factory=IterationTimeModel)
    admission: Admission | str = Admission.FCFS
    chunked_prefill: bool = False
    block_tokens: int = 1
    watermark: float = 0.0
    prefill_priority: bool = False
    preemption: Preemption | str = Preemption.RECOMPUTE
    swap_blocks: int = 0
    swap_block_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("chunked_prefill", "prefill_priority"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(f"ClusterConfig.{name} must be True or False, got "
                                     f"{getattr(self, name)!r}")
        check_int(self.block_tokens, "ClusterConfig.block_tokens", low=1)
        check_real(self.watermark, "ClusterConfig.watermark", low=0.0, high=0.5)
        object.__setattr__(self, "admission",
                           check_option(Admission, self.admission, "ClusterConfig.admission"))
        for name in ("n_instances", "kv_budget_tokens", "max_batch", "max_prefill_tokens"):
            check_int(getattr(self, name), f"ClusterConfig.{name}", low=1)
        # each instance keeps Python request queues and per-instance view arrays (~2 KiB)
        check_memory(2048.0 * self.n_instances, f"a cluster of {self.n_instances:,} instances")
        check_real(self.epoch_s, "ClusterConfig.epoch_s", unit="s", low=0.0, low_open=True)
        object.__setattr__(self, "preemption", check_option(Preemption, self.preemption,
                                                            "ClusterConfig.preemption"))
        check_int(self.swap_blocks, "ClusterConfig.swap_blocks", low=0)
        check_real(self.swap_block_s, "ClusterConfig.swap_block_s", unit="s", low=0.0)
        if self.swap and not (self.chunked_prefill or self.prefill_priority):
            raise ParameterError("ClusterConfig.preemption = 'swap' follows vLLM's schedulers: "
                                 "it needs prefill_priority=True (the default scheduler) or "
                                 "chunked_prefill=True")

    @property
    def swap(self) -> bool:
        """Whether preemption swaps (``preemption == "swap"``)."""
        return self.preemption is Preemption.SWAP

    @property
    def total_blocks(self) -> int:
        """KV-cache blocks of one instance (``kv_budget_tokens // block_tokens``)."""
        return self.kv_budget_tokens // self.block_tokens

    @property
    def watermark_blocks(self) -> int:
        """Blocks an admission leaves free (vLLM's ``int(watermark · blocks)``)."""
        return int(self.watermark * self.total_blocks)

    def blocks(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` tokens of KV (``ceil(tokens / block_tokens)``)."""
        return -(-tokens // self.block_tokens)

    def check_workload(self, wl: Workload) -> None:
        """Raise :class:`ParameterError` if a request cannot fit one instance's KV budget
        (with the block size and the admission watermark)."""
        need = np.maximum(wl.prompt_tokens, 1) + np.maximum(wl.output_tokens, 1)
        b = self.block_tokens
        cap = (self.total_blocks - self.watermark_blocks) * b
        big = np.flatnonzero(-(-need // b) * b > cap)
        if big.size:
            i = int(big[0])
            raise ParameterError(
                f"kv_budget_tokens = {self.kv_budget_tokens} is smaller than request {i} "
                f"(prompt {wl.prompt_tokens[i]} + output {wl.output_tokens[i]} = {need[i]} "
                f"tokens); expected a budget >= {int(need.max())} tokens (plus block rounding "
                f"and the watermark)")
