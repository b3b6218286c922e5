"""Seeded synthetic task mixes: the Intelligent Router's five-task workload and a
production-trace-like mix (THEORY §10; arXiv 2408.13510 Knowl 4 and 7).

A task has lognormal prompt and output lengths (tokens; a median and a log-standard deviation
σ each, rounded and clipped to ``[1, max]``) and a share of the requests. :func:`task_mix` draws
``n_requests`` requests — the task of each by its share, then its lengths — with Poisson
arrivals at ``rate_rps`` (the first at 0), all from one ``numpy`` Generator seeded by ``seed``.

:data:`FIVE_TASKS` [R]: the seed names five public NLP tasks with short prompts and outputs up to
≈4,000 tokens but prints no length distributions. We take the five tasks behind its references,
one per prompt/decode shape, with medians from the datasets' typical lengths (Llama-2
tokens, a ≈20-token task instruction included) — not fitted to any published latency:

========================  ==============  ==============  ========================================
task                      prompt median   output median   shape
========================  ==============  ==============  ========================================
code (HumanEval)          140 (σ 0.45)    250 (σ 0.7)     balanced, outputs to 2,048
long-form QA (ELI5)       50 (σ 0.5)      600 (σ 0.7)     decode-heavy, outputs to 4,000
extractive QA (SQuAD)     200 (σ 0.35)    20 (σ 0.8)      prompt-heavy, short answers
translation (OPUS)        60 (σ 0.5)      60 (σ 0.5)      output ≈ prompt
sentiment (IMDB)          300 (σ 0.6)     8 (σ 0.8)       prompt-heavy, a label and a few words
========================  ==============  ==============  ========================================

:data:`PRODUCTION_LIKE` [R]: three applications (retrieval-augmented QA, summarisation, chat)
whose medians are scaled so that the mix's expected prompt and output lengths are the
production trace's means, 5,526.64 and 112.69 tokens (Knowl 7; the trace is not public).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._checks import Seed, as_generator, check_int, check_real
from ..errors import ParameterError
from ._workload import Workload, poisson_arrivals, workload_from_arrays

__all__ = ["TaskShape", "task_mix", "scale_to_means", "FIVE_TASKS", "PRODUCTION_LIKE",
           "PRODUCTION_MEANS", "five_task_workload", "production_like_workload"]


@dataclass(frozen=True)
class TaskShape:
    """One task's request shape: lognormal prompt and output lengths (tokens) and its share.

    Attributes:
        name: task name (the workload's ``task_names`` entry).
        prompt_median, output_median: medians (tokens, > 0).
        prompt_sigma, output_sigma: log-standard deviations (≥ 0).
        weight: share of the requests (relative, > 0).
        prompt_max, output_max: clip (tokens, ≥ 1).
    """

    name: str
    prompt_median: float
    prompt_sigma: float
    output_median: float
    output_sigma: float
    weight: float = 1.0
    prompt_max: int = 32_768
    output_max: int = 4_096

    def __post_init__(self) -> None:
        for f in ("prompt_median", "output_median", "weight"):
            check_real(getattr(self, f), f"TaskShape.{f}", low=0.0, low_open=True)
        for f in ("prompt_sigma", "output_sigma"):
            check_real(getattr(self, f), f"TaskShape.{f}", low=0.0, high=5.0)
        for f in ("prompt_max", "output_max"):
            check_int(getattr(self, f), f"TaskShape.{f}", low=1, unit="tokens")

    def mean_prompt(self) -> float:
        """Expected prompt length before rounding and clipping (tokens)."""
        return self.prompt_median * math.exp(self.prompt_sigma ** 2 / 2)

    def mean_output(self) -> float:
        """Expected output length before rounding and clipping (tokens)."""
        return self.output_median * math.exp(self.output_sigma ** 2 / 2)


FIVE_TASKS: tuple[TaskShape, ...] = (
    TaskShape("code", 140, 0.45, 250, 0.7, output_max=2048),
    TaskShape("long-qa", 50, 0.5, 600, 0.7, output_max=4000),
    TaskShape("qa", 200, 0.35, 20, 0.8),
    TaskShape("translation", 60, 0.5, 60, 0.5),
    TaskShape("sentiment", 300, 0.6, 8, 0.8),
)

#: Knowl 7's production trace: mean prompt and mean output length (tokens).
PRODUCTION_MEANS = (5526.64, 112.69)


def _weights(tasks: Sequence[TaskShape]) -> np.ndarray:
    w = np.array([t.weight for t in tasks], dtype=float)
    return w / w.sum()


def scale_to_means(tasks: Sequence[TaskShape], prompt_mean: float,
                   output_mean: float) -> tuple[TaskShape, ...]:
    """The tasks with their prompt (output) medians multiplied by one factor each, so that the
    mix's expected prompt (output) length before rounding and clipping is ``prompt_mean``
    (``output_mean``) tokens."""
    w = _weights(tasks)
    fp = prompt_mean / float(w @ [t.mean_prompt() for t in tasks])
    fo = output_mean / float(w @ [t.mean_output() for t in tasks])
    return tuple(dataclasses.replace(t, prompt_median=t.prompt_median * fp,
                                     output_median=t.output_median * fo) for t in tasks)


PRODUCTION_LIKE: tuple[TaskShape, ...] = scale_to_means((
    TaskShape("rag", 6000, 0.45, 60, 0.8, weight=0.55, output_max=2048),
    TaskShape("summarise", 3500, 0.5, 150, 0.6, weight=0.25, output_max=2048),
    TaskShape("chat", 1200, 0.8, 120, 0.9, weight=0.20, output_max=2048),
), *PRODUCTION_MEANS)


def _lognormal(rng: np.random.Generator, median: np.ndarray, sigma: np.ndarray,
               top: np.ndarray) -> np.ndarray:
    x = np.exp(np.log(median) + sigma * rng.standard_normal(median.size))
    return np.clip(np.rint(x), 1, top).astype(np.int64)


def task_mix(tasks: Sequence[TaskShape], *, n_requests: int, seed: Seed,
             rate_rps: float) -> Workload:
    """``n_requests`` requests of the task mix with Poisson arrivals at ``rate_rps`` (req/s),
    the first at 0 (module docstring); same ``seed`` ⇒ identical workload.

    Raises:
        ParameterError: no tasks, ``n_requests`` < 1, a bad seed or ``rate_rps`` ≤ 0.
    """
    if not tasks:
        raise ParameterError("task_mix: tasks must not be empty")
    n = check_int(n_requests, "n_requests", low=1)
    rate = check_real(rate_rps, "rate_rps", unit="req/s", low=0.0, low_open=True)
    rng = as_generator(seed)
    k = rng.choice(len(tasks), size=n, p=_weights(tasks))
    col = {f: np.array([getattr(t, f) for t in tasks], dtype=float)[k]
           for f in ("prompt_median", "prompt_sigma", "prompt_max", "output_median",
                     "output_sigma", "output_max")}
    prompt = _lognormal(rng, col["prompt_median"], col["prompt_sigma"], col["prompt_max"])
    output = _lognormal(rng, col["output_median"], col["output_sigma"], col["output_max"])
    return workload_from_arrays(poisson_arrivals(rng, n, rate), prompt, output, task=k,
                                task_names=tuple(t.name for t in tasks))


def five_task_workload(n_requests: int, *, seed: Seed, rate_rps: float = 20.0) -> Workload:
    """:func:`task_mix` of :data:`FIVE_TASKS` (the seed's Knowl 4 workload, λ = 20 req/s)."""
    return task_mix(FIVE_TASKS, n_requests=n_requests, seed=seed, rate_rps=rate_rps)


def production_like_workload(n_requests: int, *, seed: Seed, rate_rps: float = 80.0) -> Workload:
    """:func:`task_mix` of :data:`PRODUCTION_LIKE` (the seed's Knowl 7 trace, λ = 80 req/s)."""
    return task_mix(PRODUCTION_LIKE, n_requests=n_requests, seed=seed, rate_rps=rate_rps)
