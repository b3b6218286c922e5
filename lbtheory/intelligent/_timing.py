"""Iteration-time model of one LLM instance and its least-squares calibration (THEORY §10).

One iteration of continuous (iteration-level) batching runs the prefill of the newly admitted
requests and one decode step of every running request together, so both add time — the
prefill/decode interference the Intelligent Router exploits::

    t_iter = base_s + prefill_s_per_token · Σ_k q_k + attention_s_per_token2 · Σ_k q_k²
             + decode_s_per_seq · n_decode + context_s_per_token · C

``q_k`` are the prefill lengths (tokens) admitted in this iteration, ``n_decode`` the number of
decoding requests and ``C`` the total context (tokens already in their KV cache) those requests
attend to.

Defaults [R] (Llama-2-7B fp16 on one V100-32GB, the paper's first testbed; orders of magnitude from
first principles, not measurements): reading the 13.5 GB of weights at ≈900 GB/s gives
``base_s = 0.015`` s (the minimum decode batch time, ≈ the paper's 0.02 s decision epoch);
14 GFLOP/token at ≈60 TFLOP/s gives ``prefill_s_per_token = 2e-4`` s; attention's 4·L·d·q² FLOPs
give ``attention_s_per_token2 = 8e-9`` s; reading 0.5 MB of KV per context token gives
``context_s_per_token = 6e-7`` s; ``decode_s_per_seq = 1e-4`` s of per-sequence overhead. Use
:func:`fit_iteration_model` to replace them with measured slopes.

:data:`A100_LLAMA31_8B` [R] (the seed's second testbed, Knowl 5 and 7), by the same rules:
16 GB of bf16 weights at ≈2.0 TB/s give ``base_s = 0.008``; 16 GFLOP/token at ≈190 TFLOP/s
(60% of 312) give ``prefill_s_per_token = 8.4e-5``; ``4 L d q²`` = 524k q² FLOPs give
``attention_s_per_token2 = 2.8e-9``; 131 kB of KV per token (GQA: 2 × 32 layers × 8 KV heads
× 128 × 2 bytes) at 2 TB/s give ``context_s_per_token = 6.6e-8``; ``decode_s_per_seq = 5e-5``.
Its KV budget, :data:`A100_KV_BUDGET_TOKENS` = 400,000 tokens: 0.9 × 80 GB − 16 GB of weights
over 131 kB per token ≈ 427k, rounded down.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from .._checks import check_real
from ..errors import ModelError

__all__ = ["IterationTimeModel", "fit_iteration_model", "ITERATION_FEATURES", "iteration_seconds",
           "A100_LLAMA31_8B", "A100_KV_BUDGET_TOKENS"]

#: Names of the model's coefficients, in the column order :func:`fit_iteration_model` uses.
ITERATION_FEATURES: tuple[str, ...] = ("base_s", "prefill_s_per_token", "attention_s_per_token2",
                                       "decode_s_per_seq", "context_s_per_token")


@njit(cache=True)
def iteration_seconds(coef: np.ndarray, sum_q: float, sum_q2: float, n_decode: float,
                      context_tokens: float) -> float:
    """The iteration-time formula (module docstring), the one definition: ``coef`` are the five
    coefficients in :data:`ITERATION_FEATURES` order, ``sum_q`` = Σ q_k and ``sum_q2`` = Σ q_k²
    the prefill tokens (tokens, tokens²), ``n_decode`` the decoding requests and
    ``context_tokens`` their context (tokens); seconds. Compiled for the compiled engine's
    kernels; :meth:`IterationTimeModel.iteration_time` calls its Python body, so both engines
    evaluate the same expression in the same order."""
    return (coef[0] + coef[1] * sum_q + coef[2] * sum_q2 + coef[3] * n_decode
            + coef[4] * context_tokens)


_iteration_seconds_py = iteration_seconds.py_func


@dataclass(frozen=True)
class IterationTimeModel:
    """Seconds one batched iteration takes (module docstring has the formula and defaults).

    Attributes:
        base_s: fixed time per iteration (s), e.g. reading the weights once.
        prefill_s_per_token: time per prefilled token (s/token).
        attention_s_per_token2: time per squared prefill length (s/token²), attention's quadratic.
        decode_s_per_seq: time per decoding request (s/request).
        context_s_per_token: time per context token read by the decoding requests (s/token).
    """

    base_s: float = 0.015
    prefill_s_per_token: float = 2.0e-4
    attention_s_per_token2: float = 8.0e-9
    decode_s_per_seq: float = 1.0e-4
    context_s_per_token: float = 6.0e-7

    def __post_init__(self) -> None:
        check_real(self.base_s, "IterationTimeModel.base_s", unit="s", low=0.0, low_open=True,
                   error=ModelError)
        for name in ITERATION_FEATURES[1:]:
            check_real(getattr(self, name), f"IterationTimeModel.{name}", low=0.0, error=ModelError)
        object.__setattr__(self, "_coef", tuple(float(getattr(self, n))
                                                for n in ITERATION_FEATURES))

    def iteration_time(self, prefill_tokens: Sequence[int] = (), n_decode: int = 0,
                       context_tokens: int = 0) -> float:
        """Seconds of one iteration prefilling ``prefill_tokens`` (tokens per request) while
        ``n_decode`` requests with ``context_tokens`` total context decode one token each."""
        sum_q = sum_q2 = 0.0
        for x in prefill_tokens:
            x = float(x)
            sum_q += x
            sum_q2 += x * x
        return float(_iteration_seconds_py(self._coef, sum_q, sum_q2, float(n_decode),
                                           float(context_tokens)))

    def seconds(self, sum_q: float, sum_q2: float, n_decode: int, context_tokens: int) -> float:
        """Seconds of one iteration from the sums ``Σ q`` and ``Σ q²`` of its prefill work
        (tokens, tokens²; chunked prefill passes ``Σ (c² + 2 c o)`` for chunks ``c`` at
        offsets ``o``), its decoding requests and their context (tokens)."""
        return float(_iteration_seconds_py(self._coef, float(sum_q), float(sum_q2),
                                           float(n_decode), float(context_tokens)))

    def coefficients(self) -> np.ndarray:
        """The five coefficients in :data:`ITERATION_FEATURES` order."""
        return np.array([getattr(self, n) for n in ITERATION_FEATURES], dtype=float)


#: Llama-3.1-8B on one A100-80GB [R] (module docstring).
A100_LLAMA31_8B = IterationTimeModel(base_s=0.008, prefill_s_per_token=8.4e-5,
                                     attention_s_per_token2=2.8e-9, decode_s_per_seq=5e-5,
                                     context_s_per_token=6.6e-8)
#: KV-cache budget of one A100-80GB serving Llama-3.1-8B (tokens) [R].
A100_KV_BUDGET_TOKENS = 400_000


def fit_iteration_model(prefill_tokens: Sequence[float], prefill_tokens_sq: Sequence[float],
                        n_decode: Sequence[float], context_tokens: Sequence[float],
                        time_s: Sequence[float]) -> IterationTimeModel:
    """Least-squares fit of :class:`IterationTimeModel` to measured iterations.

    Each sample is one measured iteration: total prefill tokens Σq (tokens), Σq² (tokens²), the
    number of decoding requests, their total context (tokens) and the measured time (s).
    Negative fitted slopes (noise around a true zero) are clipped to 0.

    Raises:
        ModelError: unequal lengths, non-finite values, fewer samples than coefficients, or a
            design matrix without full column rank (the samples do not vary enough to separate
            the slopes — e.g. no iteration with prefill, or no decoding).
    """
    cols = [np.asarray(c, dtype=float).ravel() for c in
            (prefill_tokens, prefill_tokens_sq, n_decode, context_tokens, time_s)]
    names = ("prefill_tokens", "prefill_tokens_sq", "n_decode", "context_tokens", "time_s")
    n = cols[0].size
    for name, c in zip(names, cols):
        if c.size != n:
            raise ModelError(f"fit_iteration_model: {name} has {c.size} samples, expected {n}")
        if not np.all(np.isfinite(c)):
            raise ModelError(f"fit_iteration_model: {name} must be finite")
    if n < len(ITERATION_FEATURES):
        raise ModelError(f"fit_iteration_model: need at least {len(ITERATION_FEATURES)} samples, "
                         f"got {n}")
    design = np.column_stack([np.ones(n), *cols[:4]])
    scale = np.maximum(np.abs(design).max(axis=0), 1e-300)
    coef, _, rank, _ = np.linalg.lstsq(design / scale, cols[4], rcond=None)
    if rank < design.shape[1]:
        raise ModelError("fit_iteration_model: samples do not separate the five slopes (rank "
                         f"{rank} < 5); vary prefill lengths, batch sizes and contexts")
    coef = coef / scale
    coef[1:] = np.maximum(coef[1:], 0.0)
    if coef[0] <= 0:
        raise ModelError(f"fit_iteration_model: fitted base_s = {coef[0]:.3g} s is not positive")
    return IterationTimeModel(*(float(c) for c in coef))
