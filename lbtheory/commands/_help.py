"""The help formatter every ``lbtheory`` command and sub-action uses, and the CLI vocabulary's
one way to keep an old flag spelling working (one definition each).

The vocabulary (one flag per concept across subcommands): ``--policy`` (comma-separated) picks
what a simulating subcommand runs; ``--duration`` is a time horizon (s); ``--requests`` a request
count; ``--instances`` LLM instances (``intelligent``), ``--replicas`` decode replicas
(``barrier``); ``--out`` is always a folder (a single file is ``--output FILE``); utilisation is
accepted in both spellings. An old spelling stays a hidden alias (:func:`option`): it parses to
the same value, is absent from ``--help``, and an error about its value names the spelling typed
(:func:`spelling`).

Numeric flags (:func:`number`) are parsed by one rule: the text as a finite float (or an int in
the int64 range), in the flag's range, else a one-line :class:`~lbtheory.errors.ParameterError`
naming the spelling typed (``--timeout 1e400``, ``nan`` and ``--seed 1e30`` never reach a
computation). :func:`warn` is the one ``warning:`` line a command prints.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

__all__ = ["HelpFormatter", "option", "spelling", "number", "Number", "warn", "MAX_INT",
           "utilisation", "Utilisation", "UTILISATION_ERROR", "COMPILING",
           "compiling_notice"]

#: Largest integer a numeric flag takes (int64: every count and seed fits a numpy/numba int).
MAX_INT = 2**63 - 1


def warn(message: str) -> None:
    """The one ``warning: ...`` line on stderr a command prints (the exit code is unchanged)."""
    print(f"warning: {message}", file=sys.stderr)


#: What a command prints (stderr) before numba compiles its kernels for the first time.
COMPILING = "compiling kernels once (~15 s)…"


def compiling_notice(cached: bool) -> None:
    """Print :data:`COMPILING` on stderr unless the kernels are ``cached`` (then loading them
    takes about a second and nothing is printed)."""
    if not cached:
        print(COMPILING, file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class Number:
    """How a numeric flag's text is read: ``kind`` float (finite, :func:`~lbtheory._checks.
    check_real`) or int (:func:`~lbtheory._checks.check_int`, within int64), in ``[low, high]``
    (open ends with ``low_open``/``high_open``), ``unit`` named in the message."""

    kind: type = float
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    unit: str = ""

    def parse(self, text: str, flag: str) -> float | int:
        """``text`` as a number of this kind and range, else ParameterError naming ``flag``."""
        from .._checks import check_int, check_real
        from ..errors import ParameterError

        if self.kind is int:
            try:
                value: Any = int(text)
            except ValueError:
                value = text  # refused below, with the range in the message
            value = check_int(value, flag, low=None if self.low is None else int(self.low),
                              high=None if self.high is None else int(self.high),
                              unit=self.unit)
            if not -MAX_INT - 1 <= value <= MAX_INT:
                raise ParameterError(f"{flag} must be an integer of at most 19 digits (int64), "
                                     f"got {text}")
            return value
        return check_real(as_float(text), flag, unit=self.unit, low=self.low, high=self.high,
                          low_open=self.low_open, high_open=self.high_open)


def as_float(text: str) -> Any:
    """``text`` as a float when Python reads it as one (``"1e-3"``, ``"nan"``), else the text
    itself, which the ``_checks`` functions then refuse by name (they take no strings)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return text


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown after each option's help (unless it already states one, or there is none
    to show); description and epilog kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text.lower() or action.default is None or action.default is False
                or action.default == argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


class _Spelled(argparse.Action):
    """``store``, remembering which option string set the value (``namespace._spelling``), so
    that a later error can name the spelling the user typed; with ``number=`` a
    :class:`Number` reads the text (its error names that spelling)."""

    def __init__(self, option_strings: list[str], dest: str, *, number: Number | None = None,
                 **kwargs: Any) -> None:
        self.number = number
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if self.number is not None:
            values = self.number.parse(values, option_string or self.dest)
        setattr(namespace, self.dest, values)
        spelled = dict(getattr(namespace, "_spelling", {}))
        spelled[self.dest] = option_string
        namespace._spelling = spelled


def option(parser: argparse.ArgumentParser, *flags: str, aliases: tuple[str, ...] = (),
           **kwargs: Any) -> argparse.Action:
    """Add the option ``flags`` (shown in ``--help``) and its old spellings ``aliases``: hidden
    from help and usage, the same destination, type and choices, so either spelling parses to the
    same namespace. Returns the visible action."""
    act = parser.add_argument(*flags, action=_Spelled, **kwargs)
    for old in aliases:
        parser.add_argument(old, action=_Spelled, dest=act.dest, type=act.type,
                            choices=act.choices, metavar=act.metavar,
                            default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                            **({"number": act.number} if act.number is not None else {}))
    return act


def number(parser: argparse.ArgumentParser, *flags: str, kind: type = float,
           low: float | None = None, high: float | None = None, low_open: bool = False,
           high_open: bool = False, unit: str = "", aliases: tuple[str, ...] = (),
           **kwargs: Any) -> argparse.Action:
    """A numeric option (:func:`option`, so ``aliases`` work too) read by :class:`Number`: the
    one place a flag's text becomes a number. Errors are raised while parsing (the CLI prints
    one ``error:`` line, exit 2)."""
    spec = Number(kind, low, high, low_open, high_open, unit)
    return option(parser, *flags, aliases=aliases, number=spec, **kwargs)


#: A utilisation above this is refused as a percentage typed for a fraction (80 for 0.80).
UTILISATION_ERROR = 2.0


class Utilisation(Number):
    """A utilisation Λ/Σμ̄ (a positive fraction of capacity): above :data:`UTILISATION_ERROR`
    a ParameterError suggesting the fraction (``80`` → "did you mean 0.80?"); above 1 a
    warning (demand beyond capacity: queues grow, requests overflow)."""

    def parse(self, text: str, flag: str) -> float:
        from .._checks import check_real
        from ..errors import ParameterError

        percent = text.strip().endswith("%")  # "80%": a percentage, said so below
        value = check_real(as_float(text.strip().rstrip("%") if percent else text), flag, low=0.0,
                           low_open=True)
        if percent or value > UTILISATION_ERROR:
            hint = (f"; did you mean {value / 100:.2f}?" if value <= 100 else "")
            raise ParameterError(f"{flag} {text} is not a utilisation: it is the fraction "
                                 f"Λ/Σμ̄ of capacity (1 = demand equals capacity), accepted up "
                                 f"to {UTILISATION_ERROR:g}{hint}")
        if value > 1.0:
            warn(f"{flag} {text} is above 1: demand exceeds capacity, so queues grow for the "
                 f"whole run and requests overflow (a fraction: 0.8 is 80 %)")
        return value


def utilisation(parser: argparse.ArgumentParser, *flags: str, **kwargs: Any) -> argparse.Action:
    """A utilisation option (:class:`Utilisation`); every spelling in ``flags`` is shown."""
    return option(parser, *flags, number=Utilisation(), **kwargs)


def spelling(args: argparse.Namespace, dest: str, flag: str) -> str:
    """The option string the user typed for ``dest`` (an old alias or the current ``flag``), for
    an error message that names what the user wrote; ``flag`` when the default is in use."""
    return getattr(args, "_spelling", {}).get(dest) or flag
