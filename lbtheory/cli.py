"""The ``lbtheory`` command.

Subcommands live in :mod:`lbtheory.commands`, one module each, discovered automatically. A command
module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``. Any
:class:`~lbtheory.errors.LBTheoryError` becomes a one-line ``error: ...`` on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from .errors import LBTheoryError

__all__ = ["main", "build_parser"]


def _command_modules() -> list:
    from . import commands

    mods = []
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        mods.append(importlib.import_module(f"{commands.__name__}.{info.name}"))
    return mods


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every discovered subcommand."""
    parser = argparse.ArgumentParser(
        prog="lbtheory",
        description="Load balancing under delayed feedback: equilibria, price of anarchy, fluid "
                    "models, stepsize verification and BalanceRoute imbalance.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"lbtheory {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (0 ok, 2 bad input or failed solve)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except LBTheoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"error: {exc.strerror or exc}: {exc.filename}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
