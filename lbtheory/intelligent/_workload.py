"""Request workloads for the Intelligent Router: traces mixed by task, seeded arrivals.

A :class:`Workload` is what the instance simulator serves: per request an arrival time (s), a
prompt length and an output length (tokens) and a task id (which trace it came from — the paper's
"task type", e.g. code vs conversation). It is built from one or more
:class:`~lbtheory.workloads.Trace` objects by :func:`mix_traces`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._checks import check_real
from ..errors import DataFormatError, ModelError
from ..workloads import Trace

__all__ = ["Workload", "mix_traces", "workload_from_arrays"]


@dataclass(frozen=True)
class Workload:
    """Requests in arrival order.

    Attributes:
        arrival_s: arrival times at the router (s, non-decreasing, float64).
        prompt_tokens: prompt lengths (tokens, int64 ≥ 1).
        output_tokens: output lengths (tokens, int64 ≥ 1; a trace's 0 becomes 1 [R]: the prefill
            iteration always emits one token).
        task: task id per request (int64, index into ``task_names``).
        task_names: one name per task (e.g. the trace file stems).
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    task: np.ndarray
    task_names: tuple[str, ...] = ("task0",)

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])


def workload_from_arrays(arrival_s: Sequence[float], prompt_tokens: Sequence[int],
                         output_tokens: Sequence[int], task: Sequence[int] | None = None, *,
                         task_names: Sequence[str] | None = None) -> Workload:
    """Validate arrays into a :class:`Workload` (arrivals must be sorted).

    Raises:
        DataFormatError: unequal lengths, an empty workload, unsorted or non-finite arrivals, a
            prompt with fewer than 1 token, a negative output length, or a bad task id.
    """
    t = np.asarray(arrival_s, dtype=float).ravel()
    p = np.asarray(prompt_tokens, dtype=float).ravel()
    o = np.asarray(output_tokens, dtype=float).ravel()
    k = np.zeros(t.size) if task is None else np.asarray(task, dtype=float).ravel()
    n = t.size
    for name, arr in (("prompt_tokens", p), ("output_tokens", o), ("task", k)):
        if arr.size != n:
            raise DataFormatError(f"{name} has {arr.size} entries, expected {n}", field=name)
    if n == 0:
        raise DataFormatError("workload has no requests", field="arrival_s")
    for name, arr in (("arrival_s", t), ("prompt_tokens", p), ("output_tokens", o), ("task", k)):
        if not np.all(np.isfinite(arr)):
            raise DataFormatError(f"{name} must be finite", field=name)
    if np.any(np.diff(t) < 0):
        raise DataFormatError("arrival_s must be non-decreasing", field="arrival_s")
    if np.any(p < 1) or np.any(p != np.round(p)):
        raise DataFormatError("prompt_tokens must be integers >= 1", field="prompt_tokens")
    if np.any(o < 0) or np.any(o != np.round(o)):
        raise DataFormatError("output_tokens must be integers >= 0", field="output_tokens")
    names = tuple(task_names) if task_names is not None else \
        tuple(f"task{i}" for i in range(int(k.max()) + 1))
    if np.any(k < 0) or np.any(k >= len(names)) or np.any(k != np.round(k)):
        raise DataFormatError(f"task ids must be integers in [0, {len(names)})", field="task")
    return Workload(t, p.astype(np.int64), np.maximum(o, 1).astype(np.int64), k.astype(np.int64),
                    names)


def mix_traces(traces: Sequence[Trace], *, n_requests: int, seed: int,
               rate_rps: float | None = None, names: Sequence[str] | None = None,
               window: tuple[float, float] = (0.0, 1.0)) -> Workload:
    """Mix request traces into one workload of ``n_requests`` (task id = trace index).

    With ``rate_rps`` (req/s): ``n_requests`` requests drawn uniformly without replacement from
    the pooled traces (each trace's share ∝ its size), Poisson arrivals at ``rate_rps`` — the
    paper's "mixed requests sampled at λ req/s". Without it: the traces' own timestamps (each
    relative to its first request) merged, and the first ``n_requests``. Seeded: same ``seed`` ⇒
    identical workload. ``window = (a, b)`` keeps only the requests between fractions ``a`` and
    ``b`` of each trace (by position), e.g. ``(0, 0.5)`` to fit a predictor and ``(0.5, 1)`` to
    evaluate on disjoint requests.

    Raises:
        ModelError: ``n_requests`` < 1 or more than the traces hold, or ``rate_rps`` ≤ 0.
        DataFormatError: a trace with a prompt of 0 tokens.
    """
    if not traces:
        raise ModelError("mix_traces: traces must not be empty")
    lo, hi = window
    if not 0.0 <= lo < hi <= 1.0:
        raise ModelError(f"mix_traces: window must satisfy 0 <= a < b <= 1, got {window}")
    traces = [tr.select((np.arange(len(tr)) >= round(lo * len(tr)))
                        & (np.arange(len(tr)) < round(hi * len(tr)))) for tr in traces]
    if isinstance(n_requests, bool) or int(n_requests) != n_requests or n_requests < 1:
        raise ModelError(f"n_requests must be an integer >= 1, got {n_requests}")
    total = sum(len(tr) for tr in traces)
    if n_requests > total:
        raise ModelError(f"n_requests = {n_requests} exceeds the {total} requests in the traces")
    names = tuple(names) if names is not None else \
        tuple(Path(tr.path).stem or f"task{i}" for i, tr in enumerate(traces))
    t = np.concatenate([tr.arrival_s for tr in traces])
    p = np.concatenate([tr.prompt_tokens for tr in traces])
    o = np.concatenate([tr.output_tokens for tr in traces])
    k = np.concatenate([np.full(len(tr), i) for i, tr in enumerate(traces)])
    bad = np.flatnonzero(p < 1)
    if bad.size:
        i = int(k[bad[0]])
        raise DataFormatError(f"a request has {p[bad[0]]} prompt tokens (expected >= 1)",
                              path=traces[i].path, field="prompt_tokens")
    rng = np.random.default_rng(seed)
    if rate_rps is None:
        idx = np.argsort(t, kind="stable")[:n_requests]
        return workload_from_arrays(t[idx] - t[idx].min(), p[idx], o[idx], k[idx],
                                    task_names=names)
    rate = check_real(rate_rps, "rate_rps", unit="req/s", low=0.0, low_open=True)
    idx = rng.choice(total, size=n_requests, replace=False)
    gaps = rng.exponential(1.0 / rate, size=n_requests)
    arr = np.cumsum(gaps) - gaps[0]
    return workload_from_arrays(arr, p[idx], o[idx], k[idx], task_names=names)
