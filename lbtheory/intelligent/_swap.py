"""Swap preemption of the vLLM-faithful instance model (vLLM v0's ``preemption_mode="swap"``):
the option, its [R] parameters and the one formula of its cost, shared by both instance engines.

Semantics (the reference :mod:`._engine` states them in full; vLLM v0's
``Scheduler._schedule_default`` and, with chunked prefill, ``_schedule_chunked_prefill``): a
request preempted by swapping moves its KV blocks to the
instance's CPU swap space and joins the instance's *swapped* queue, keeping its progress (no
recomputed tokens); while that queue is non-empty no prompt is admitted; an iteration without
a preemption swaps requests back in, oldest preemption first, while their blocks (with the next
token) and the admission watermark fit, and they decode in it. Moving ``n`` blocks (out or in)
adds :func:`swap_seconds` to the iteration. [R] A preempted request that the free CPU swap space
cannot hold is preempted by recomputation instead (vLLM raises "Aborted due to the lack of CPU
swap space" and stops the engine; a simulator that stopped would report nothing).

[R] parameters (:func:`swap_options`): the CPU swap space is vLLM's default ``swap_space`` of
4 GiB per GPU (:data:`SWAP_SPACE_BYTES`), in blocks of ``block_tokens`` × the model's KV bytes
per token — Llama-2-7B fp16: 32 layers × 2 (K, V) × 4,096 × 2 bytes = 0.5 MiB per token, 8 MiB
per 16-token block, 512 blocks; Llama-3.1-8B bf16: 32 layers × 8 KV heads × 128 × 2 × 2 bytes
= 128 KiB per token, 2 MiB per block, 2,048 blocks. The transfer rate is PCIe's effective
host-device bandwidth (pinned memory, one direction at a time): V100's PCIe 3.0 × 16,
≈ 12 GB/s of its 15.75 GB/s peak; A100's PCIe 4.0 × 16, ≈ 25 GB/s of its 31.5 GB/s peak (both
the usual ≈ 80 % of the link rate that ``bandwidthTest`` reports).
"""

from __future__ import annotations

import enum

from numba import njit

__all__ = ["Preemption", "swap_seconds", "swap_options", "SWAP_SPACE_BYTES",
           "LLAMA2_7B_KV_BYTES", "LLAMA31_8B_KV_BYTES", "PCIE3_BYTES_S", "PCIE4_BYTES_S"]

#: vLLM's default CPU swap space per GPU (``swap_space = 4`` GiB) [R].
SWAP_SPACE_BYTES = 4 * 2**30
#: KV bytes per token of Llama-2-7B in fp16: 32 layers × 2 × 4,096 × 2 bytes (0.5 MiB) [R].
LLAMA2_7B_KV_BYTES = 32 * 2 * 4096 * 2
#: KV bytes per token of Llama-3.1-8B in bf16: 32 layers × 8 KV heads × 128 × 2 × 2 bytes [R].
LLAMA31_8B_KV_BYTES = 32 * 8 * 128 * 2 * 2
#: effective host-device bandwidth of PCIe 3.0 × 16 (V100 PCIe), bytes/s [R].
PCIE3_BYTES_S = 12e9
#: effective host-device bandwidth of PCIe 4.0 × 16 (A100 PCIe), bytes/s [R].
PCIE4_BYTES_S = 25e9


class Preemption(enum.StrEnum):
    """How an instance preempts a running request when the KV blocks run out."""

    #: discard its KV and prefill it again later (vLLM v0's default for one sequence).
    RECOMPUTE = "recompute"
    #: move its KV blocks to the CPU swap space and back (module docstring).
    SWAP = "swap"


@njit(cache=True)
def swap_seconds(n_blocks: int, block_s: float) -> float:
    """Seconds an iteration spends moving ``n_blocks`` KV blocks between GPU and CPU
    (``block_s`` s each: block bytes / bandwidth), the one definition: the compiled engine
    calls it, the reference its Python body."""
    return n_blocks * block_s


swap_seconds_py = swap_seconds.py_func


def swap_options(kv_bytes_per_token: int, bandwidth_bytes_s: float, block_tokens: int = 16,
                 space_bytes: int = SWAP_SPACE_BYTES) -> dict[str, int | float]:
    """The :class:`~lbtheory.intelligent.ClusterConfig` swap parameters of a model and link:
    ``swap_blocks`` (CPU blocks in ``space_bytes``) and ``swap_block_s`` (s to move one block)."""
    block_bytes = block_tokens * kv_bytes_per_token
    return {"swap_blocks": int(space_bytes // block_bytes),
            "swap_block_s": block_bytes / float(bandwidth_bytes_s)}
