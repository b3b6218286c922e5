"""The help formatter every ``lbtheory`` command and sub-action uses, and the CLI vocabulary's
one way to keep an old flag spelling working (one definition each).

The vocabulary (one flag per concept across subcommands): ``--policy`` (comma-separated) picks
what a simulating subcommand runs; ``--duration`` is a time horizon (s); ``--requests`` a request
count; ``--instances`` LLM instances (``intelligent``), ``--replicas`` decode replicas
(``barrier``); ``--out`` is always a folder (a single file is ``--output FILE``); utilisation is
accepted in both spellings. An old spelling stays a hidden alias (:func:`option`): it parses to
the same value, is absent from ``--help``, and an error about its value names the spelling typed
(:func:`spelling`).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["HelpFormatter", "option", "spelling"]


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
    that a later error can name the spelling the user typed."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
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
                            default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return act


def spelling(args: argparse.Namespace, dest: str, flag: str) -> str:
    """The option string the user typed for ``dest`` (an old alias or the current ``flag``), for
    an error message that names what the user wrote; ``flag`` when the default is in use."""
    return getattr(args, "_spelling", {}).get(dest) or flag
