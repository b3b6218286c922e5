"""Argument checks: the one definition of "a finite real number in a range" and of option parsing.

Every module that validates a scalar parameter (a capacity, a delay, a horizon, a percentile) or
an option given as an enum-or-string calls these, so the rule and the wording of the error are
the same everywhere. Messages name the parameter, the expected range and the unit, e.g.
``MM1Latency.capacity must be positive (req/s), got -1.0`` or
``percentile q must be in [0, 100], got 101``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from .errors import LBTheoryError, ParameterError, StepsizeError

__all__ = ["check_real", "check_reals", "check_fields", "check_option", "check_int", "check_seed",
           "check_bool", "range_text", "MAX_SEED", "check_ticks", "MAX_TICKS", "check_memory",
           "memory_limit_bytes", "validate_stepsize", "Seed", "as_generator", "as_seed"]

#: Largest seed accepted (numpy's SeedSequence takes any non-negative integer; 2**63 − 1 keeps
#: seeds representable in JSON, int64 arrays and every compiled kernel).
MAX_SEED = 2**63 - 1

#: The one randomness convention outside JAX: a ``seed=`` keyword taking an int (a fresh,
#: reproducible stream) or a ``numpy.random.Generator`` (draws from it, advancing it).
Seed = int | np.random.Generator

E = TypeVar("E", bound=enum.Enum)
#: What the checks raise: an error class, or any callable building one from the message (a file
#: reader passes ``lambda msg: DataFormatError(msg, path=..., field=...)``).
ErrorFactory = type[LBTheoryError] | Callable[[str], LBTheoryError]


def range_text(low: float | None = None, high: float | None = None, *, low_open: bool = False,
               high_open: bool = False) -> str:
    """The expected range in words: ``positive``, ``non-negative``, ``>= 1``, ``in [0, 100]``.

    Example:
        >>> range_text(0.0, low_open=True), range_text(0.0, 1.0, low_open=True)
        ('positive', 'in (0, 1]')
    """
    if low is not None and high is not None:
        return (f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}")
    if low is not None:
        if low == 0:
            return "positive" if low_open else "non-negative"
        return f"{'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high:g}"
    return "finite"


def _adjective(rule: str) -> str:
    """``"positive "`` / ``"non-negative "`` for those rules, else ``""``."""
    return f"{rule} " if rule in ("positive", "non-negative") else ""


def _message(name: str, rule: str, unit: str, value: Any, kind: str = "range") -> str:
    """``{name} must be {rule}, got {value} ({name}: expected a … number of {unit})``.

    ``kind``: ``"type"`` (not a real number), ``"finite"`` (nan/inf) or ``"range"``. Both
    phrasings are kept, so messages read ``X must be positive, got …`` and also contain
    ``X: expected a positive finite number``.
    """
    adj = f"{rule} " if rule in ("positive", "non-negative") else ""
    tail = "" if adj or rule == "finite" else f" {rule}"
    desc = f"a {adj}{'' if kind == 'type' else 'finite '}number{tail}"
    if kind == "type":
        must = "a real number" if rule == "finite" else f"a real number ({rule})"
    elif kind == "finite":
        must = "finite" if rule == "finite" else f"finite and {rule}"
    else:
        must = rule
    of_unit = f" of {unit}" if unit else ""
    return f"{name} must be {must}, got {value!r} ({name}: expected {desc}{of_unit})"


def check_real(value: Any, name: str, *, unit: str = "", low: float | None = None,
               high: float | None = None, low_open: bool = False, high_open: bool = False,
               error: ErrorFactory = ParameterError) -> float:
    """``value`` as a finite ``float`` in the given range, else ``error`` naming ``name``.

    Args:
        value: a real number (``bool`` is refused; a one-element array is not a scalar).
        name: the parameter as the user knows it (``"t1"``, ``"MM1Latency.capacity"``).
        unit: unit shown in the message (``"s"``, ``"req/s"``); ``""`` for none.
        low, high: bounds (``None``: unbounded on that side).
        low_open, high_open: exclude the bound itself (``low=0, low_open=True``: positive).
        error: the :class:`~lbtheory.errors.LBTheoryError` subclass to raise.

    Raises:
        error: not a real number, not finite, or out of range.

    Example:
        >>> check_real(3, "K", low=0.0, low_open=True)
        3.0
    """
    rule = range_text(low, high, low_open=low_open, high_open=high_open)
    if isinstance(value, (bool, np.bool_, str, bytes, np.str_, np.bytes_)) \
            or np.ndim(value) != 0:  # '1.25' is text, not a number (files parse their own)
        raise error(_message(name, rule, unit, value, 'type'))
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise error(_message(name, rule, unit, value, 'type')) from None
    except OverflowError:  # an int beyond the float range (a file can hold 10**400)
        raise error(_message(name, rule, unit, value, 'finite')) from None
    if not math.isfinite(v):
        raise error(_message(name, rule, unit, value, 'finite'))
    if ((low is not None and (v <= low if low_open else v < low))
            or (high is not None and (v >= high if high_open else v > high))):
        raise error(_message(name, rule, unit, value))
    return v


def check_reals(values: Any, name: str, *, unit: str = "", low: float | None = None,
                high: float | None = None, low_open: bool = False, high_open: bool = False,
                error: ErrorFactory = ParameterError) -> np.ndarray:
    """Elementwise :func:`check_real` for a scalar or an array (parameters stacked per cell).

    Returns:
        ``values`` as a float array of the same shape.
    """
    rule = range_text(low, high, low_open=low_open, high_open=high_open)
    try:
        kind = np.asarray(values).dtype.kind
    except (TypeError, ValueError):
        kind = "O"
    if kind in "USV":  # text is not a number (files parse their own)
        raise error(_message(name, rule, unit, values, 'type'))
    try:
        v = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise error(_message(name, rule, unit, values, 'type')) from None
    except OverflowError:
        raise error(_message(name, rule, unit, values, 'finite')) from None
    if not np.all(np.isfinite(v)):
        raise error(_message(name, rule, unit, values, 'finite'))
    bad = np.zeros(v.shape, dtype=bool)
    if low is not None:
        bad |= v <= low if low_open else v < low
    if high is not None:
        bad |= v >= high if high_open else v > high
    if np.any(bad):
        raise error(_message(name, rule, unit, values))
    return v


_RULES = {"positive": {"low": 0.0, "low_open": True}, "non-negative": {"low": 0.0},
          "finite": {}}


def check_fields(cls_name: str, obj: Any, rules: dict[str, str], *,
                 error: ErrorFactory = ParameterError) -> None:
    """Check fields of a frozen dataclass: ``rules`` maps field → ``"positive"``,
    ``"non-negative"`` or ``"finite"``; scalars or arrays (elementwise).

    Raises:
        error: ``"{cls_name}.{field} must be positive, got …"`` for the first bad field.
    """
    for field, rule in rules.items():
        check_reals(getattr(obj, field), f"{cls_name}.{field}", error=error, **_RULES[rule])


def check_option(cls: type[E], value: Any, name: str, *,
                 error: ErrorFactory = ParameterError) -> E:
    """Coerce ``value`` (a member of the enum ``cls`` or its value) to ``cls``.

    Raises:
        error: naming ``name`` and the allowed values, e.g.
            ``guard_scope must be 'candidates' or 'pool', got 'all'``.

    Example:
        >>> import enum
        >>> class Color(enum.StrEnum):
        ...     RED = "red"
        >>> check_option(Color, "red", "color") is Color.RED
        True
    """
    try:
        return cls(value)
    except ValueError:
        allowed = [repr(m.value) for m in cls]
        words = " or ".join(allowed) if len(allowed) <= 2 else \
            "one of " + ", ".join(allowed)
        raise error(f"{name} must be {words}, got {value!r}") from None


def check_int(value: Any, name: str, *, low: int | None = None, high: int | None = None,
              unit: str = "", integral_float: bool = False,
              error: ErrorFactory = ParameterError) -> int:
    """``value`` as an ``int`` in ``[low, high]``, else ``error`` naming ``name``.

    The one integer check: ``bool`` is refused (``True`` is not 1 request), numpy integers are
    accepted, floats only when ``integral_float`` (file readers: ``4.0`` → 4; ``4.7`` is always
    refused, never truncated).

    Raises:
        error: ``"{name} must be an integer >= 1, got 0"``.

    Example:
        >>> check_int(3, "replicas", low=1)
        3
    """
    if low is not None and high is not None:
        words = f"an integer in [{low}, {high}]"
    elif low is not None:
        words = "a non-negative integer" if low == 0 else f"an integer >= {low}"
    else:
        words = "an integer" if high is None else f"an integer <= {high}"
    of_unit = f" ({unit})" if unit else ""
    msg = f"{name} must be {words}{of_unit}, got {value!r}"
    if isinstance(value, (bool, np.bool_)):
        raise error(msg)
    if isinstance(value, (int, np.integer)):
        v = int(value)
    elif integral_float and isinstance(value, (float, np.floating)) and math.isfinite(value) \
            and float(value).is_integer():
        v = int(value)
    else:
        raise error(msg)
    if (low is not None and v < low) or (high is not None and v > high):
        raise error(msg)
    if abs(v) > MAX_SEED:  # beyond 64-bit integers: no kernel, array or JSON file holds it
        raise error(f"{msg} (beyond the 64-bit integers, |value| <= {MAX_SEED})")
    return v


#: Most clock ticks (decision epochs, probe rounds) a simulated run may span: float64 time then
#: still resolves a tick to 1e-3 of its length (2^53 ≈ 9e15), and a run that needs more is a
#: typo (a rate of 1e-300 req/s, a probe period of 1 ns), not an experiment.
MAX_TICKS = 10**12


def check_ticks(span_s: float, tick_s: float, what: str, *,
                error: ErrorFactory = ParameterError) -> float:
    """Refuse a run whose ``span_s`` (s) holds more than :data:`MAX_TICKS` ticks of ``tick_s``
    (s); returns the number of ticks."""
    ticks = float(span_s) / float(tick_s)
    if not ticks <= MAX_TICKS:
        raise error(f"{what}: {span_s:.3g} s of {tick_s:g}-s ticks is {ticks:.3g} ticks, more "
                    f"than the {MAX_TICKS:.0e} a simulated clock resolves (float64 time); "
                    f"shorten the run or lengthen the tick")
    return ticks


def memory_limit_bytes() -> int:
    """The memory one run may plan to use (bytes): ``LBTHEORY_MAX_MEMORY_GB`` (default 8 GiB —
    a third of the 24-GiB machines this project is sized for). A run that would need more is
    refused up front (:func:`check_memory`), never started and killed halfway."""
    import os

    text = os.environ.get("LBTHEORY_MAX_MEMORY_GB", "8")
    try:
        gb = float(text)
    except ValueError:
        raise ParameterError(f"LBTHEORY_MAX_MEMORY_GB must be a number of GiB, got "
                             f"{text!r}") from None
    if not (math.isfinite(gb) and gb > 0):
        raise ParameterError(f"LBTHEORY_MAX_MEMORY_GB must be positive, got {text!r}")
    return int(gb * 2**30)


def check_memory(need_bytes: float, what: str, *, error: ErrorFactory = ParameterError) -> None:
    """Refuse a run whose planned memory ``need_bytes`` exceeds :func:`memory_limit_bytes`,
    naming what needs it and how much."""
    limit = memory_limit_bytes()
    if not need_bytes <= limit:
        raise error(f"{what} would need about {need_bytes / 2**30:.3g} GiB, more than the "
                    f"{limit / 2**30:.3g} GiB limit (LBTHEORY_MAX_MEMORY_GB); make the run "
                    f"smaller")


def check_seed(value: Any, name: str = "seed", *,
               error: ErrorFactory = ParameterError) -> int:
    """A seed: an integer in ``[0, MAX_SEED]`` (numpy refuses negative seeds with a traceback)."""
    return check_int(value, name, low=0, high=MAX_SEED, error=error)


def as_generator(seed: Any, name: str = "seed", *,
                 error: ErrorFactory = ParameterError) -> np.random.Generator:
    """``seed`` as a Generator: an int seeds a new ``numpy.random.default_rng`` (checked by
    :func:`check_seed`), a Generator is returned as is (the caller draws from it).

    Example:
        >>> bool(as_generator(7).integers(100) == as_generator(7).integers(100))
        True
    """
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(check_seed(seed, name, error=error))


def as_seed(seed: Any, name: str = "seed", *, error: ErrorFactory = ParameterError) -> int:
    """``seed`` as an int seed, for functions that derive their own streams from one integer
    (and record it): an int is checked (:func:`check_seed`); a Generator gives one draw in
    ``[0, MAX_SEED]`` (so the same Generator state gives the same run)."""
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, MAX_SEED, endpoint=True))
    return check_seed(seed, name, error=error)


def validate_stepsize(value: Any, name: str = "stepsize") -> float:
    """A stepsize: a positive finite float, or :class:`StepsizeError` naming ``name`` (the
    stability check itself is :func:`lbtheory.stability.check_stepsize`)."""
    return check_real(value, name, low=0.0, low_open=True, error=StepsizeError)


def check_path(value: Any, name: str, *, error: ErrorFactory = ParameterError) -> Any:
    """``value`` as a :class:`pathlib.Path` if it is a ``str`` or ``os.PathLike`` (a number,
    ``None`` or bytes is refused naming ``name``)."""
    import os
    from pathlib import Path

    if isinstance(value, (str, os.PathLike)) and not isinstance(os.fspath(value), bytes):
        return Path(value)
    raise error(f"{name} must be a file path (str or os.PathLike), got {value!r}")


def check_bool(value: Any, name: str, *, error: ErrorFactory = ParameterError) -> bool:
    """``value`` if it is a ``bool`` (``1``, ``"yes"`` and ``None`` are refused), else ``error``."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise error(f"{name} must be true or false, got {value!r}")
