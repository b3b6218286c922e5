"""Mixing traces into one workload (task id = trace), with seeded Poisson arrivals.

The Intelligent Router paper serves "mixed requests sampled at λ req/s" from several task traces
(code, conversation, ...); :func:`mix_traces` builds that workload for any simulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .._checks import Seed, as_generator, check_int, check_real
from ..errors import ParameterError
from ._workload import Workload, poisson_arrivals, workload_from_arrays

__all__ = ["mix_traces"]


def mix_traces(traces: Sequence[Workload], *, n_requests: int, seed: Seed,
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
        ParameterError: no traces, ``n_requests`` < 1 or more than the traces hold, a bad
            window, a negative seed or ``rate_rps`` ≤ 0.
    """
    if not traces:
        raise ParameterError("mix_traces: traces must not be empty")
    lo, hi = window
    if not 0.0 <= lo < hi <= 1.0:
        raise ParameterError(f"mix_traces: window must satisfy 0 <= a < b <= 1, got {window}")
    rng = as_generator(seed)
    n_requests = check_int(n_requests, "n_requests", low=1)
    traces = [tr.select((np.arange(len(tr)) >= round(lo * len(tr)))
                        & (np.arange(len(tr)) < round(hi * len(tr)))) for tr in traces]
    total = sum(len(tr) for tr in traces)
    if n_requests > total:
        raise ParameterError(f"n_requests = {n_requests} exceeds the {total} requests in the "
                             f"traces")
    names = tuple(names) if names is not None else \
        tuple(Path(tr.path).stem or f"task{i}" for i, tr in enumerate(traces))
    t = np.concatenate([tr.arrival_s for tr in traces])
    p = np.concatenate([tr.prompt_tokens for tr in traces])
    o = np.concatenate([tr.output_tokens for tr in traces])
    k = np.concatenate([np.full(len(tr), i) for i, tr in enumerate(traces)])
    if rate_rps is None:
        idx = np.argsort(t, kind="stable")[:n_requests]
        return workload_from_arrays(t[idx] - t[idx].min(), p[idx], o[idx], task=k[idx],
                                    task_names=names)
    rate = check_real(rate_rps, "rate_rps", unit="req/s", low=0.0, low_open=True)
    idx = rng.choice(total, size=n_requests, replace=False)
    return workload_from_arrays(poisson_arrivals(rng, n_requests, rate), p[idx], o[idx],
                                task=k[idx], task_names=names)
