"""Output-length predictor: a histogram (lookup-table) bucket classifier (THEORY §10, Knowl 3).

The paper fine-tunes DistilBERT on prompt text; a router without the text knows only the prompt
length, the task type and recent history. This predictor [R] classifies the output length into
buckets from three features:

* ``task`` — the task id (e.g. code vs conversation);
* ``prompt_bin`` — ⌊log2(prompt tokens)⌋ (clipped to ``max_prompt_bin``);
* ``history`` — the bucket of the output of the same-task request ``history_lag`` positions earlier
  in arrival order (a proxy for "recent completed requests": by the time a request arrives, the
  one ``history_lag`` requests before it has usually finished) [R]; ``-1`` when there is none.

Training counts the buckets of every feature cell; prediction takes the majority bucket of the
most specific cell with at least ``min_count`` samples, backing off to (task, prompt_bin), (task)
and the global majority. The predicted output length (tokens, what a router uses) is the mean
training output of the predicted bucket within the task.

Buckets: ``"time"`` — completion-time ranges 0–0.5 s / 0.5–2 s / 2–4 s / more at ``decode_tps``
tokens/s (the paper's 0–250 / 250–1000 / 1000–4000 tokens at 500 tokens/s); ``"equal"`` — equal
``bucket_tokens``-wide buckets (the paper's 250), up to ``n_equal`` buckets (the last open).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from .._checks import check_int, check_real
from ..errors import FitStatus, ModelError, ParameterError

__all__ = ["BucketSpec", "LengthPredictor", "PredictorReport", "fit_length_predictor",
           "evaluate_length_predictor", "history_feature"]


@dataclass(frozen=True)
class BucketSpec:
    """Output-length buckets.

    Attributes:
        kind: ``"time"`` or ``"equal"``.
        decode_tps: decode speed for time buckets (tokens/s).
        bucket_tokens: width of equal buckets (tokens).
        n_equal: number of equal buckets (the last one is open-ended).
    """

    kind: Literal["time", "equal"] = "time"
    decode_tps: float = 500.0
    bucket_tokens: int = 250
    n_equal: int = 8

    def __post_init__(self) -> None:
        if self.kind not in ("time", "equal"):
            raise ParameterError(f"BucketSpec.kind must be 'time' or 'equal', got {self.kind!r}")
        check_real(self.decode_tps, "BucketSpec.decode_tps", unit="tokens/s", low=0.0,
                   low_open=True)
        check_int(self.bucket_tokens, "BucketSpec.bucket_tokens", low=1, unit="tokens")
        check_int(self.n_equal, "BucketSpec.n_equal", low=2)

    @property
    def edges(self) -> np.ndarray:
        """Bucket edges (tokens): bucket ``b`` holds ``edges[b-1] ≤ d < edges[b]``; the last bucket
        is open-ended."""
        if self.kind == "time":
            return np.array([0.5, 2.0, 4.0]) * self.decode_tps
        return self.bucket_tokens * np.arange(1, self.n_equal)

    @property
    def n_buckets(self) -> int:
        """Number of buckets."""
        return int(self.edges.size + 1)

    def bucket(self, output_tokens: np.ndarray) -> np.ndarray:
        """Bucket index of each output length (tokens): the number of edges ≤ it."""
        return np.searchsorted(self.edges, np.asarray(output_tokens, dtype=float), side="right")


def history_feature(buckets: np.ndarray, task: np.ndarray, lag: int) -> np.ndarray:
    """Bucket of the same-task request ``lag`` positions earlier (−1 if none); ``lag = 0``
    disables the feature (all −1)."""
    out = np.full(len(buckets), -1, dtype=np.int64)
    if lag <= 0:
        return out
    for k in np.unique(task):
        idx = np.flatnonzero(task == k)
        out[idx[lag:]] = buckets[idx[:-lag]]
    return out


def _prompt_bin(prompt: np.ndarray, max_bin: int) -> np.ndarray:
    return np.minimum(np.floor(np.log2(np.maximum(prompt, 1))).astype(np.int64), max_bin)


@dataclass(frozen=True)
class LengthPredictor:
    """A fitted histogram classifier (use :func:`fit_length_predictor`)."""

    spec: BucketSpec
    history_lag: int
    min_count: int
    max_prompt_bin: int
    tables: tuple[dict, ...] = field(repr=False)
    bucket_mean: dict = field(repr=False)
    majority: int = 0

    def predict_bucket(self, prompt_tokens: np.ndarray, task: np.ndarray,
                       history: np.ndarray) -> np.ndarray:
        """Predicted bucket per request (features as in the module docstring)."""
        pb = _prompt_bin(np.asarray(prompt_tokens), self.max_prompt_bin)
        out = np.empty(len(pb), dtype=np.int64)
        for i, (k, b, h) in enumerate(zip(np.asarray(task).tolist(), pb.tolist(),
                                          np.asarray(history).tolist())):
            out[i] = self.majority
            for table, key in zip(self.tables, ((k, b, h), (k, b), (k,))):
                hit = table.get(key)
                if hit is not None:
                    out[i] = hit
                    break
        return out

    def predict_tokens(self, buckets: np.ndarray, task: np.ndarray) -> np.ndarray:
        """Predicted output length (tokens): the training mean of (task, bucket)."""
        return np.array([self.bucket_mean.get((int(k), int(b)), self.bucket_mean[(-1, int(b))])
                         for k, b in zip(task, buckets)])

    def predict(self, prompt_tokens: np.ndarray, task: np.ndarray,
                output_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(buckets, tokens) for a request sequence in arrival order; ``output_tokens`` feed only
        the lagged history feature."""
        hist = history_feature(self.spec.bucket(output_tokens), np.asarray(task), self.history_lag)
        b = self.predict_bucket(prompt_tokens, task, hist)
        return b, self.predict_tokens(b, task)


def fit_length_predictor(prompt_tokens: np.ndarray, task: np.ndarray, output_tokens: np.ndarray,
                         *, spec: BucketSpec | None = None, history_lag: int = 32,
                         min_count: int = 5, max_prompt_bin: int = 14) -> LengthPredictor:
    """Fit the histogram classifier on requests in arrival order (tokens).

    Raises:
        ModelError: empty or unequal inputs, ``min_count`` < 1 or ``history_lag`` < 0.
    """
    p, k, o = (np.asarray(a) for a in (prompt_tokens, task, output_tokens))
    if p.size == 0 or not (p.size == k.size == o.size):
        raise ModelError("fit_length_predictor: prompt_tokens, task and output_tokens must be "
                         "non-empty and of equal length")
    if min_count < 1 or history_lag < 0:
        raise ModelError("fit_length_predictor: min_count must be >= 1 and history_lag >= 0")
    spec = spec or BucketSpec()
    y = spec.bucket(o)
    hist = history_feature(y, k, history_lag)
    pb = _prompt_bin(p, max_prompt_bin)
    counters: tuple[defaultdict, ...] = tuple(defaultdict(Counter) for _ in range(3))
    for kk, bb, hh, yy in zip(k.tolist(), pb.tolist(), hist.tolist(), y.tolist()):
        counters[0][(kk, bb, hh)][yy] += 1
        counters[1][(kk, bb)][yy] += 1
        counters[2][(kk,)][yy] += 1
    tables = tuple({key: min(c.items(), key=lambda t: (-t[1], t[0]))[0]
                    for key, c in ctr.items() if sum(c.values()) >= min_count}
                   for ctr in counters)
    means: dict = {}
    for b in range(spec.n_buckets):
        sel = y == b
        edge_lo = 0.0 if b == 0 else float(spec.edges[b - 1])
        means[(-1, b)] = float(o[sel].mean()) if sel.any() else edge_lo
        for kk in np.unique(k):
            s2 = sel & (k == kk)
            if s2.any():
                means[(int(kk), b)] = float(o[s2].mean())
    majority = int(np.bincount(y, minlength=spec.n_buckets).argmax())
    return LengthPredictor(spec, history_lag, min_count, max_prompt_bin, tables, means, majority)


@dataclass(frozen=True)
class PredictorReport:
    """Held-out evaluation: accuracy, the majority-class baseline, confusion[true, predicted].

    ``status`` (:class:`~lbtheory.errors.FitStatus`): ``good`` when the predictor beats the
    majority-class baseline on the held-out requests (accuracy > baseline_accuracy), ``poor``
    when it does not (no better than predicting the majority bucket for everyone),
    ``insufficient_data`` when the split left no training or no test request.
    """

    accuracy: float
    baseline_accuracy: float
    confusion: np.ndarray
    n_train: int
    n_test: int

    @property
    def status(self) -> FitStatus:
        """:class:`~lbtheory.errors.FitStatus` of the held-out evaluation (class docstring)."""
        if self.n_train == 0 or self.n_test == 0:
            return FitStatus.INSUFFICIENT_DATA
        return FitStatus.GOOD if self.accuracy > self.baseline_accuracy else FitStatus.POOR


def evaluate_length_predictor(prompt_tokens: np.ndarray, task: np.ndarray,
                              output_tokens: np.ndarray, *, train_fraction: float = 0.7,
                              **fit_kw) -> PredictorReport:
    """Fit on the first ``train_fraction`` of each task's requests (arrival order), test on the
    rest (a chronological split: no future leaks into training). The baseline predicts the
    training majority bucket for everyone."""
    check_real(train_fraction, "train_fraction", low=0.0, high=1.0, low_open=True, high_open=True)
    p, k, o = (np.asarray(a) for a in (prompt_tokens, task, output_tokens))
    train = np.zeros(p.size, dtype=bool)
    for kk in np.unique(k):
        idx = np.flatnonzero(k == kk)
        train[idx[: int(round(train_fraction * idx.size))]] = True
    model = fit_length_predictor(p[train], k[train], o[train], **fit_kw)
    y = model.spec.bucket(o)
    hist = history_feature(y, k, model.history_lag)  # lag over the full sequence: real history
    test = ~train
    pred = model.predict_bucket(p[test], k[test], hist[test])
    n_b = model.spec.n_buckets
    conf = np.zeros((n_b, n_b), dtype=np.int64)
    np.add.at(conf, (y[test], pred), 1)
    acc = float(np.trace(conf) / max(test.sum(), 1))
    base = float(np.mean(y[test] == model.majority)) if test.any() else float("nan")
    return PredictorReport(acc, base, conf, int(train.sum()), int(test.sum()))
