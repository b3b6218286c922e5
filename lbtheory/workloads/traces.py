"""Request-trace readers: Azure LLM inference CSVs and any CSV/JSONL with the same three columns.

A trace is read into the one request type, :class:`~lbtheory.workloads.Workload`: an arrival time
(s, relative to the first request), a prompt length (tokens) and an output length (tokens), plus
an optional prompt identity (a hash or id) that the ExactMatch predictor of
BalanceRoute can key on (THEORY §9.4).

Accepted column names (case-insensitive; the first match wins):

* arrival: ``TIMESTAMP``, ``timestamp``, ``arrival_time``, ``arrival_s``, ``arrival``, ``time`` —
  either a number of seconds or an ISO-like date-time (``2023-11-16 18:17:03.9799600``);
* prompt: ``ContextTokens``, ``prompt_tokens``, ``input_tokens``, ``prompt_len``;
* output: ``GeneratedTokens``, ``output_tokens``, ``completion_tokens``, ``output_len``;
* optional key: ``prompt_hash``, ``prompt_id``, ``hash``, ``hash_ids``.

**Mooncake format** (JSONL with ``timestamp`` in **milliseconds**, ``input_length``,
``output_length`` and, usually, ``hash_ids``, the list of the prompt's prefix-block hashes):
recognised by its field names — ``timestamp`` with ``input_length`` and ``output_length`` (with or
without ``hash_ids``); the timestamps are converted to seconds (a :class:`TraceFormatWarning` says
so when ``hash_ids`` is absent) and the prompt key is the joined block-hash list, so ExactMatch
keys on the prompt's prefix hashes.

Errors are :class:`~lbtheory.errors.DataFormatError` naming the file, the 1-based line (the CSV
header is line 1) and the field. Token counts must be numbers (a JSON ``true`` is refused, not
read as 1); date-times must lie in years 1900–2200 (outside, numpy's calendar would wrap them); a
UTF-8 byte-order mark is accepted and a UTF-16 one is named.

**Unsorted timestamps**: by default the reader sorts the requests by arrival time (stable, so
ties keep file order) and emits a :class:`TraceOrderWarning` naming the first out-of-order line;
with ``on_unsorted="error"`` it refuses with a ``DataFormatError`` instead.
"""

from __future__ import annotations

import csv
import json
import os
import warnings
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..errors import DataFormatError, ParameterError
from ._workload import MAX_TOKENS, TraceOrderWarning, Workload, workload_from_arrays

__all__ = ["read_trace", "trace_from_arrays", "COLUMN_ALIASES", "MAX_TOKENS",
           "TraceOrderWarning", "TraceFormatWarning"]


class TraceFormatWarning(UserWarning):
    """A trace's format was inferred (e.g. Mooncake millisecond timestamps without hash_ids)."""

#: Accepted column names per field, lower-case.
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "arrival": ("timestamp", "arrival_time", "arrival_s", "arrival", "time"),
    "prompt": ("contexttokens", "prompt_tokens", "input_tokens", "prompt_len", "input_length"),
    "output": ("generatedtokens", "output_tokens", "completion_tokens", "output_len",
               "output_length"),
    "key": ("prompt_hash", "prompt_id", "hash", "hash_ids"),
}


def trace_from_arrays(arrival_s: Any, prompt_tokens: Any, output_tokens: Any, *,
                      prompt_key: Any = None, path: str = "",
                      on_unsorted: Literal["sort", "error"] = "sort",
                      lines: np.ndarray | None = None) -> Workload:
    """A trace from arrays: :func:`~lbtheory.workloads.workload_from_arrays` with the times
    shifted to start at 0 (what every reader returns).

    Raises:
        DataFormatError: see :func:`~lbtheory.workloads.workload_from_arrays`.
    """
    return workload_from_arrays(arrival_s, prompt_tokens, output_tokens, prompt_key=prompt_key,
                                path=path, rebase=True, on_unsorted=on_unsorted, lines=lines)


def _find_column(names: list[str], field: str) -> str | None:
    lower = {name.strip().lower(): name for name in names}
    for alias in COLUMN_ALIASES[field]:
        if alias in lower:
            return lower[alias]
    return None


#: date-times outside these years are refused (numpy's ns calendar wraps past 2262).
_YEARS = (1900, 2200)


def _parse_time(value: Any, path: str, line: int) -> float:
    if isinstance(value, bool):
        raise DataFormatError(f"arrival time {value!r} is not a number or a date-time",
                              path=path, line=line, field="arrival")
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        year = int(str(np.datetime64(text.replace(" ", "T", 1)).astype("datetime64[Y]")))
    except (ValueError, OverflowError):
        raise DataFormatError(f"cannot parse time {text!r}", path=path, line=line,
                              field="arrival") from None
    if not _YEARS[0] <= year <= _YEARS[1]:
        raise DataFormatError(f"date-time {text!r} is outside the years {_YEARS[0]}–{_YEARS[1]}",
                              path=path, line=line, field="arrival")
    return np.datetime64(text.replace(" ", "T", 1), "ns").astype(np.int64) / 1e9


def _parse_count(value: Any, path: str, line: int, field: str) -> float:
    if isinstance(value, bool):  # JSON true/false: not a token count
        raise DataFormatError(f"{field} value {value!r} is not a number", path=path, line=line,
                              field=field)
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise DataFormatError(f"{field} value {value!r} is not a number", path=path, line=line,
                              field=field) from None


def _hash_key(value: Any, path: str, line: int, field: str) -> str:
    """Prompt key of a Mooncake record: its prefix-block hashes joined by ``-`` (``""`` if none)."""
    if value is None:
        return ""
    if not isinstance(value, list) or not all(isinstance(h, int | str) and
                                              not isinstance(h, bool) for h in value):
        raise DataFormatError(f"{field} must be a list of block hashes (integers or strings), "
                              f"got {value!r}", path=path, line=line, field=field)
    return "-".join(str(h) for h in value)


def _rows(path: Path) -> tuple[list[str], list[tuple[int, dict[str, Any]]]]:
    """Header names and (line, record) pairs of a CSV or JSONL file."""
    if path.is_dir():
        raise DataFormatError("expected a trace file (CSV/JSONL), got a directory", path=str(path))
    raw = path.read_bytes()
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise DataFormatError("the file is UTF-16 (it starts with a UTF-16 byte-order mark); "
                              "save it as UTF-8", path=str(path))
    try:
        text = raw.decode("utf-8-sig")  # a UTF-8 byte-order mark is dropped
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"not a text file: byte {exc.start} is not UTF-8; expected a CSV "
                              f"or JSONL trace", path=str(path)) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise DataFormatError("not a text file: contains a NUL byte; expected a CSV or JSONL "
                              "trace", path=str(path), line=line)
    if path.suffix.lower() in (".jsonl", ".ndjson") or text.lstrip().startswith("{"):
        records: list[tuple[int, dict[str, Any]]] = []
        names: dict[str, None] = {}
        for lineno, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise DataFormatError(f"invalid JSON ({exc.msg})", path=str(path),
                                      line=lineno) from None
            if not isinstance(rec, dict):
                raise DataFormatError("each JSONL line must be an object", path=str(path),
                                      line=lineno)
            names.update(dict.fromkeys(rec))
            records.append((lineno, rec))
        return list(names), records
    reader = csv.DictReader(text.splitlines())
    try:
        header = list(reader.fieldnames or [])
        return header, [(i + 2, row) for i, row in enumerate(reader)]
    except csv.Error as exc:
        raise DataFormatError(f"not a valid CSV ({exc})", path=str(path),
                              line=reader.line_num or None) from None


def read_trace(path: str | os.PathLike, *,
               on_unsorted: Literal["sort", "error"] = "sort") -> Workload:
    """Read a request trace from a CSV or JSONL file.

    Args:
        path: an Azure LLM inference CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``) or any
            CSV/JSONL with arrival / prompt / output columns (see the module docstring).
        on_unsorted: ``"sort"`` (default: stable sort with a :class:`TraceOrderWarning`) or
            ``"error"`` (refuse unsorted timestamps).

    Raises:
        DataFormatError: a missing column, an unparsable value, a negative token count, an empty
            file, or unsorted timestamps with ``on_unsorted="error"``.
        FileNotFoundError: ``path`` does not exist.
    """
    from .._checks import check_path

    p = check_path(path, "read_trace: path")
    if on_unsorted not in ("sort", "error"):
        raise ParameterError(f"on_unsorted must be 'sort' or 'error', got {on_unsorted!r}")
    names, rows = _rows(p)
    cols = {}
    for field in ("arrival", "prompt", "output"):
        col = _find_column(names, field)
        if col is None:
            raise DataFormatError(
                f"missing column for {field}: expected one of {', '.join(COLUMN_ALIASES[field])} "
                f"(found {', '.join(names) or 'none'})", path=str(p), line=1, field=field)
        cols[field] = col
    key_col = _find_column(names, "key")
    lower = {nm.strip().lower() for nm in names}
    mooncake = (key_col is not None and key_col.strip().lower() == "hash_ids") or \
        {"timestamp", "input_length", "output_length"} <= lower
    if mooncake and key_col is None:
        warnings.warn(f"{p}: Mooncake schema (timestamp, input_length, output_length) without "
                      f"hash_ids: timestamps read as milliseconds", TraceFormatWarning,
                      stacklevel=2)
    n = len(rows)
    t = np.empty(n)
    s = np.empty(n)
    o = np.empty(n)
    lines = np.empty(n, dtype=np.int64)
    keys: list[str] | None = [] if key_col is not None else None
    for j, (line, rec) in enumerate(rows):
        for field in ("arrival", "prompt", "output"):
            if rec.get(cols[field]) in (None, ""):
                raise DataFormatError(f"empty {cols[field]}", path=str(p), line=line,
                                      field=cols[field])
        t[j] = _parse_time(rec[cols["arrival"]], str(p), line)
        s[j] = _parse_count(rec[cols["prompt"]], str(p), line, cols["prompt"])
        o[j] = _parse_count(rec[cols["output"]], str(p), line, cols["output"])
        lines[j] = line
        if mooncake:
            t[j] /= 1000.0  # Mooncake timestamps are milliseconds
            if keys is not None:
                keys.append(_hash_key(rec.get(key_col), str(p), line, key_col))
        elif keys is not None:
            keys.append(str(rec.get(key_col, "")))
    return trace_from_arrays(t, s, o, prompt_key=keys, path=str(p), on_unsorted=on_unsorted,
                             lines=lines)
