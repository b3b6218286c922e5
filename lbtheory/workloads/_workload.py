"""The one request type: a :class:`Workload` (requests in arrival order) and its one validator.

Every simulator of the package reads requests from a ``Workload``: the DLB cell simulator
(:mod:`lbtheory.sim`, which also reads ``source`` and ``work``), the Intelligent Router's
instance simulator (:mod:`lbtheory.intelligent`, ``task``) and BalanceRoute's decode simulator
(:mod:`lbtheory.barrier`, ``prompt_key``). The trace readers (:mod:`.traces`), the trace mixer
(:mod:`._mix`) and the DLB arrival generator all build one through :func:`workload_from_arrays`,
so the rules below are stated once:

* ``arrival_s`` finite and non-decreasing (unsorted input is sorted, stable, with a
  :class:`TraceOrderWarning` — or refused with ``on_unsorted="error"``);
* token counts integers in ``[0, MAX_TOKENS[field]]`` (a simulator that needs at least one
  token — a prefill always emits one — applies ``max(·, 1)`` itself and says so);
* optional columns have one entry per request; ``task`` ids index ``task_names``.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..errors import DataFormatError

__all__ = ["Workload", "TraceOrderWarning", "workload_from_arrays", "MAX_TOKENS"]

#: Largest prompt / output length accepted per request (tokens): 10 million prompt tokens (above
#: the longest context window of current models) and 1 million output tokens (a decode simulation
#: takes one step per output token). Larger counts are data errors, refused when the trace is read.
MAX_TOKENS: dict[str, int] = {"prompt_tokens": 10_000_000, "output_tokens": 1_000_000}


class TraceOrderWarning(UserWarning):
    """A trace's timestamps were not sorted; the reader sorted them (stable)."""


@dataclasses.dataclass(frozen=True)
class Workload:
    """Requests in arrival order (columns of equal length ``n``).

    Attributes:
        arrival_s: arrival times (s, float64, non-decreasing). Trace readers start them at 0.
        prompt_tokens: prompt lengths (tokens, int64 ≥ 0).
        output_tokens: output lengths (tokens, int64 ≥ 0).
        task: task id per request (int64, index into ``task_names``) or ``None`` — the Intelligent
            Router's "task type" (e.g. code vs conversation).
        task_names: one name per task id.
        session: session id per request (int64) or ``None``; a follow-up shares the id of an
            earlier request (DLB affinity routing, §3.5).
        prompt_key: prompt identity per request (the joined prefix-block hashes of a Mooncake
            trace, a hash or id column; ``""`` unknown) or ``None`` — BalanceRoute's ExactMatch
            predictor keys on it.
        source: source (origin) cell index per request (int64) or ``None`` — where a DLB request
            enters the cluster.
        work: service requirement per request in units of a server's mean service time
            (float64, ≥ 0; Exp(1) draws for M/M/c validation servers) or ``None``.
        path: the file the requests were read from (``""`` if generated).
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    task: np.ndarray | None = None
    task_names: tuple[str, ...] = ()
    session: np.ndarray | None = None
    prompt_key: tuple[str, ...] | None = None
    source: np.ndarray | None = None
    work: np.ndarray | None = None
    path: str = ""

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    def _take(self, index: Any) -> dict[str, Any]:
        cols: dict[str, Any] = {}
        for f in ("arrival_s", "prompt_tokens", "output_tokens", "task", "session", "source",
                  "work"):
            v = getattr(self, f)
            cols[f] = None if v is None else v[index]
        if self.prompt_key is not None:
            cols["prompt_key"] = tuple(np.asarray(self.prompt_key, dtype=object)[index].tolist())
        return cols

    def head(self, n: int) -> Workload:
        """The first ``n`` requests."""
        return dataclasses.replace(self, **self._take(slice(0, n)))

    def select(self, mask: np.ndarray) -> Workload:
        """The requests where boolean ``mask`` is true (order kept), times relative to the first
        one kept (a window of a trace is a trace)."""
        cols = self._take(np.asarray(mask, dtype=bool))
        t = cols["arrival_s"]
        cols["arrival_s"] = t - t[0] if t.size else t
        return dataclasses.replace(self, **cols)

    def with_columns(self, **columns: Any) -> Workload:
        """A copy with some columns replaced (validated again: lengths, ranges)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields.update(columns)
        return workload_from_arrays(**fields)


def _column(values: Any, name: str, n: int, path: str, line_of: np.ndarray) -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    if arr.size != n:
        raise DataFormatError(f"columns have different lengths: {name} has {arr.size} entries, "
                              f"expected {n} (one per request)", path=path, field=name)
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise DataFormatError(f"{name} is not a finite number", path=path,
                              line=int(line_of[bad[0]]), field=name)
    return arr


def _counts(arr: np.ndarray, name: str, path: str, line_of: np.ndarray,
            high: int | None = None, noun: str = "value") -> np.ndarray:
    """Integers ≥ 0 (≤ ``high``), as int64; names the first bad line."""
    unit = " tokens" if noun == "token count" else ""
    checks = [(arr < 0, f"negative {noun} {{v:g}} in {name}")]
    if high is not None:
        checks.append((arr > high, f"{noun} {{v:g}} in {name} is absurd: expected at most "
                                   f"{high:,}{unit} per request"))
    checks.append((arr != np.round(arr), f"{noun} {{v:g}} in {name} is not an integer"))
    for cond, what in checks:
        bad = np.flatnonzero(cond)
        if bad.size:
            raise DataFormatError(what.format(v=arr[bad[0]]), path=path,
                                  line=int(line_of[bad[0]]), field=name)
    return arr.astype(np.int64)


def workload_from_arrays(arrival_s: Any, prompt_tokens: Any, output_tokens: Any, *,
                         task: Any = None, task_names: Sequence[str] | None = None,
                         session: Any = None, prompt_key: Any = None, source: Any = None,
                         work: Any = None, path: str = "", rebase: bool = False,
                         on_unsorted: Literal["sort", "error"] = "sort",
                         lines: np.ndarray | None = None) -> Workload:
    """Validate columns into a :class:`Workload` — the one validator of requests.

    Args:
        arrival_s: arrival times (s).
        prompt_tokens, output_tokens: token counts (integers ≥ 0, at most :data:`MAX_TOKENS`).
        task, task_names: optional task ids (integers in ``[0, len(task_names))``) and names
            (default ``task0, task1, …``).
        session, source: optional integer ids ≥ 0 per request.
        prompt_key: optional prompt identity per request (converted to ``str``).
        work: optional service requirement per request (≥ 0, units of mean service time).
        path: file name used in error messages (and kept in the workload).
        rebase: shift the times so the first request arrives at 0 (the trace readers do).
        on_unsorted: ``"sort"`` (stable sort + :class:`TraceOrderWarning`) or ``"error"``.
        lines: file line of each request, for messages (default: index + 2, as for a CSV).

    Raises:
        DataFormatError: unequal lengths, no requests, a non-finite time, a negative, fractional
            or absurd token count, a bad task id, or unsorted times with ``on_unsorted="error"``.
    """
    t = np.asarray(arrival_s, dtype=float).ravel()
    n = t.size
    if n == 0:
        raise DataFormatError("the trace has no requests", path=path, field="arrival_s")
    line_of = np.arange(n) + 2 if lines is None else np.asarray(lines)
    t = _column(t, "arrival", n, path, line_of)
    cols: dict[str, Any] = {}
    for name, values in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        cols[name] = _counts(_column(values, name, n, path, line_of), name, path, line_of,
                             MAX_TOKENS[name], "token count")
    for name, values in (("task", task), ("session", session), ("source", source)):
        cols[name] = None if values is None else \
            _counts(_column(values, name, n, path, line_of), name, path, line_of)
    names: tuple[str, ...] = ()
    if cols["task"] is not None:
        k = cols["task"]
        names = tuple(task_names) if task_names is not None else \
            tuple(f"task{i}" for i in range(int(k.max()) + 1))
        bad = np.flatnonzero(k >= len(names))
        if bad.size:
            raise DataFormatError(f"task id {k[bad[0]]} has no name: expected ids in "
                                  f"[0, {len(names)})", path=path, line=int(line_of[bad[0]]),
                                  field="task")
    cols["work"] = None
    if work is not None:
        w = _column(work, "work", n, path, line_of)
        if np.any(w < 0):
            raise DataFormatError("work must be >= 0 (units of mean service time)", path=path,
                                  field="work")
        cols["work"] = w
    keys = None
    if prompt_key is not None:
        keys = tuple("" if k is None else str(k) for k in prompt_key)
        if len(keys) != n:
            raise DataFormatError(f"prompt_key has {len(keys)} entries, expected {n}",
                                  path=path, field="prompt_key")
    down = np.flatnonzero(np.diff(t) < 0)
    if down.size:
        where = int(line_of[down[0] + 1])
        if on_unsorted == "error":
            raise DataFormatError("timestamps are not sorted (earlier than the previous line)",
                                  path=path, line=where, field="arrival")
        warnings.warn(f"{path or 'trace'}:{where}: timestamps are not sorted; sorting the "
                      f"{n} requests by arrival (stable)", TraceOrderWarning, stacklevel=3)
        order = np.argsort(t, kind="stable")
        t = t[order]
        cols = {k: None if v is None else v[order] for k, v in cols.items()}
        if keys is not None:
            keys = tuple(keys[i] for i in order)
    if rebase:
        t = t - t[0]
    return Workload(t, cols["prompt_tokens"], cols["output_tokens"], task=cols["task"],
                    task_names=names, session=cols["session"], prompt_key=keys,
                    source=cols["source"], work=cols["work"], path=path)


def poisson_arrivals(rng: np.random.Generator, n: int, rate_rps: float) -> np.ndarray:
    """``n`` Poisson arrival times (s) at ``rate_rps`` requests/s, the first at 0 (the gaps
    are drawn from ``rng``, n exponential draws)."""
    gaps = rng.exponential(1.0 / rate_rps, size=n)
    return np.cumsum(gaps) - gaps[0]
