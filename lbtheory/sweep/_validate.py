"""What a cell's result must look like: :class:`CellField` and :func:`check_result`.

A cached cell file is read back by a later run and fed to the experiment's ``collect``; a file
edited by hand, written by another tool or truncated in an odd way must not reach a summary. Two
layers of checks, both applied to every result read from the cache *and* every freshly computed
one:

* generic (every experiment): the result is a non-empty JSON object; no number anywhere in it is
  NaN or ±infinity (the runner writes non-finite floats as ``null``, so a literal ``NaN`` was not
  written by it) or has magnitude :data:`MAX_MAGNITUDE` or more (no quantity of these experiments
  comes near it; ``-1e308`` is a corrupted value, not a latency);
* the experiment's own ``cell_schema`` (:attr:`~lbtheory.sweep.Experiment.cell_schema`): the
  top-level keys its ``collect`` reads, each with a kind and optional bounds.

A cached result that fails is recomputed (and the run says how many); a computed one that fails
is a failed cell.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CellField", "check_result", "MAX_MAGNITUDE"]

#: Numbers at or above this magnitude are refused in any result (see the module docstring).
MAX_MAGNITUDE: float = 1e300

_KINDS: dict[str, tuple[type, ...]] = {
    "real": (int, float), "int": (int,), "str": (str,), "bool": (bool,), "list": (list,),
    "dict": (dict,), "any": (object,)}


@dataclass(frozen=True)
class CellField:
    """One top-level key of a cell's result.

    Attributes:
        kind: ``"real"``, ``"int"``, ``"str"``, ``"bool"``, ``"list"``, ``"dict"`` or ``"any"``.
        low: smallest allowed value (``"real"``/``"int"``; inclusive), or ``None``.
        high: largest allowed value (inclusive), or ``None``.
        nullable: ``null`` (a non-finite float the runner wrote as ``null``) is allowed.
        optional: the key may be absent.
    """

    kind: str = "real"
    low: float | None = None
    high: float | None = None
    nullable: bool = False
    optional: bool = False

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"CellField kind {self.kind!r}: expected one of {', '.join(_KINDS)}")

    def problem(self, key: str, value: Any) -> str | None:
        """Why ``value`` is not acceptable for ``key``, or ``None``."""
        if value is None:
            return None if self.nullable else f"{key!r} is null; expected a {self.kind}"
        if self.kind != "any":
            ok = isinstance(value, _KINDS[self.kind])
            if self.kind in ("real", "int") and isinstance(value, bool):
                ok = False  # JSON true/false is not a number
            if not ok:
                return f"{key!r} is {type(value).__name__} {_short(value)}; expected a {self.kind}"
        if self.kind in ("real", "int"):
            if self.low is not None and value < self.low:
                return f"{key!r} = {value!r} is below {self.low!r}"
            if self.high is not None and value > self.high:
                return f"{key!r} = {value!r} is above {self.high!r}"
        return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _bad_number(obj: Any, path: str) -> str | None:
    """The first non-finite or implausibly large number in ``obj`` (depth first), or ``None``."""
    stack = [(obj, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                return f"{where or 'result'} is {node!r}; a stored result holds only finite numbers"
            if abs(node) >= MAX_MAGNITUDE:
                return f"{where or 'result'} = {node!r}: magnitude ≥ {MAX_MAGNITUDE:g}"
        elif isinstance(node, int) and not isinstance(node, bool):
            if abs(node) >= MAX_MAGNITUDE:
                return f"{where or 'result'} = {node!r}: magnitude ≥ {MAX_MAGNITUDE:g}"
        elif isinstance(node, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))
    return None


def check_result(result: Any, schema: Mapping[str, CellField] | None = None) -> str | None:
    """Why ``result`` is not a valid cell result (one line), or ``None`` when it is.

    Args:
        result: a cell's result as read from JSON (or computed and made JSON-safe).
        schema: the experiment's ``cell_schema`` (top-level key → :class:`CellField`), or None
            for the generic checks only.
    """
    if not isinstance(result, dict):
        return f"the result is {type(result).__name__} {_short(result)}; expected a JSON object"
    if not result:
        return "the result is an empty object"
    bad = _bad_number(result, "")
    if bad is not None:
        return bad
    for key, spec in (schema or {}).items():
        if key not in result:
            if not spec.optional:
                return f"key {key!r} is missing"
            continue
        why = spec.problem(key, result[key])
        if why is not None:
            return why
    return None
