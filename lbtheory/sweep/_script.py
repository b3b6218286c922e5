"""Command-line options shared by ``lbtheory sweep`` and the experiment scripts.

Every ``experiments/<file>.py`` ends with ``script_main(EXPERIMENT)`` so that
``python experiments/<file>.py [--quick]`` runs it through the same runner as the CLI.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .._checks import check_int
from ..errors import LBTheoryError
from ._experiment import Experiment, register_by_value
from ._runner import SweepResult, run_sweep

__all__ = ["add_run_arguments", "profile_from_args", "out_from_args", "describe_result",
           "script_main", "DEFAULT_OUT", "QUICK_OUT"]

#: Default results root (relative to the working directory).
DEFAULT_OUT = Path("experiments/results")
#: Default results root of a ``quick`` (CI smoke) run: never the committed results.
QUICK_OUT = Path("out/results")


def add_run_arguments(parser: argparse.ArgumentParser, *, default_scheduler: str) -> None:
    """Add ``--quick --profile --scheduler --workers --batch --out --no-progress`` to
    ``parser``."""
    parser.add_argument("--quick", action="store_true",
                        help="run the 'quick' profile (CI, seconds); same as --profile quick")
    parser.add_argument("--profile", default=None, metavar="NAME",
                        help="grid profile to run (default: each experiment's own, marked * by "
                             "--list; 'full' is the real protocol)")
    parser.add_argument("--scheduler", default=default_scheduler, metavar="ADDR",
                        help="'serial' (in-process), 'local' (a Dask LocalCluster, one worker "
                             "process per core) or a Dask scheduler address such as "
                             f"tcp://host:8786 (default {default_scheduler})")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="worker processes of the local cluster (default: one per core)")
    parser.add_argument("--batch", type=int, default=1, metavar="N",
                        help="cells per Dask task: >1 amortises Dask's per-task cost over cheap "
                             "cells; a batch is saved when it ends (default 1)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help=f"results root; cells cached under DIR/<name>/cells/ (default "
                             f"{DEFAULT_OUT}, and {QUICK_OUT} for a quick run, so a smoke run "
                             f"never overwrites committed results)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar on stderr")


def profile_from_args(args: argparse.Namespace) -> str | None:
    """The profile the options ask for (``None``: each experiment's default).

    Raises:
        SweepError: ``--quick`` together with a different ``--profile``.
        ParameterError: ``--workers`` or ``--batch`` below 1.

    ``--workers`` above the cores (``os.cpu_count()``) is capped there, with a ``warning:``
    line on stderr: more single-threaded worker processes than cores only share them.
    """
    import os

    from ..errors import SweepError

    if args.quick and args.profile not in (None, "quick"):
        raise SweepError(f"--quick conflicts with --profile {args.profile!r}; give one of them")
    if args.workers is not None:
        check_int(args.workers, "--workers", low=1)
        cores = os.cpu_count() or 1
        if args.workers > cores:
            sys.stderr.write(f"warning: --workers {args.workers} is more than the {cores} cores "
                             f"of this machine; using {cores}\n")
            args.workers = cores
    check_int(args.batch, "--batch", low=1)
    return "quick" if args.quick else args.profile


def out_from_args(args: argparse.Namespace, profile: str | None) -> Path:
    """The results root: ``--out``, else :data:`QUICK_OUT` for the quick profile and
    :data:`DEFAULT_OUT` otherwise."""
    if args.out is not None:
        return Path(args.out)
    return QUICK_OUT if profile == "quick" else DEFAULT_OUT


def describe_result(res: SweepResult) -> str:
    """One line: what a sweep computed, reused (and recomputed because its cached file was
    invalid) and where its results are."""
    bad = ""
    if res.invalid:
        key, why = res.invalid[0]
        bad = (f"; {len(res.invalid)} cached cell file(s) were invalid and recomputed (first: "
               f"{key[:12]}…: {why})")
    return (f"{res.experiment} [{res.profile}]: {res.computed + res.cached} cells "
            f"({res.computed} computed, {res.cached} cached{bad}) in {res.wall_s:.1f} s "
            f"-> {res.out_dir}")


def script_main(experiments: Experiment | Sequence[Experiment],
                argv: Sequence[str] | None = None) -> int:
    """Entry point of an experiment file run as a script: parse the shared options, run each
    experiment through :func:`run_sweep`, write one summary line per experiment to stdout.

    Errors are one ``error: ...`` line on stderr and exit code 2 (like the CLI). Use as
    ``if __name__ == "__main__": sys.exit(script_main(EXPERIMENT))``.
    """
    exps = [experiments] if isinstance(experiments, Experiment) else list(experiments)
    main = sys.modules.get("__main__")
    if getattr(main, "__file__", None):  # helper modules next to the script travel by value
        register_by_value(Path(main.__file__).resolve().parent)
    parser = argparse.ArgumentParser(
        description="; ".join(f"{e.name}: {e.description}" for e in exps),
    )
    add_run_arguments(parser, default_scheduler="serial")
    args = parser.parse_args(argv)
    try:
        profile = profile_from_args(args)
        args.out = out_from_args(args, profile)
        for e in exps:
            res = run_sweep(e, profile=profile, backend=args.scheduler, workers=args.workers,
                            out_dir=args.out, progress=not args.no_progress and sys.stderr.isatty(),
                            batch=args.batch)
            sys.stdout.write(describe_result(res) + "\n")
    except KeyboardInterrupt as exc:  # one line, as the CLI prints it (no traceback)
        hint = getattr(exc, "resume_hint", "")
        sys.stderr.write(f"interrupted: {hint}\n" if hint else "interrupted\n")
        return 130
    except LBTheoryError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"error: {exc.strerror or exc}{where}\n")
        return 2
    return 0
