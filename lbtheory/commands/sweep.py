"""``lbtheory sweep``: run an experiment (or a group of them) through the cached, resumable runner.

Experiments are the ``EXPERIMENT``/``EXPERIMENTS`` objects of ``--experiments-dir/*.py`` (files
whose name starts with ``_`` are helpers and are not imported). Each cell's result is cached under
``--out/<name>/cells/`` by a hash of (name, config, lbtheory version), so a killed sweep restarts
where it stopped, and a finished one reruns nothing. Exit codes: 0 ok, 2 bad input (unknown
experiment, malformed grid, unreachable scheduler, a failed cell).
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "sweep"
HELP = ("Run an experiment sweep (or a group, or --all) with cached, resumable cells on a serial, "
        "local-Dask or remote-Dask backend; --list names every experiment.")
EPILOG = ("examples:\n"
          "  lbtheory sweep --list\n"
          "  lbtheory sweep poa-braess --quick --scheduler serial\n"
          "  lbtheory sweep appendix-b --workers 2\n"
          "  lbtheory sweep --all --scheduler tcp://host:8786\n"
          "a killed sweep resumes: rerun the same command; only missing cells are computed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``lbtheory sweep``."""
    from ..sweep import add_run_arguments

    parser.add_argument("experiment", nargs="?", default=None, metavar="EXPERIMENT_OR_GROUP",
                        help="experiment name or group name (see --list)")
    parser.add_argument("--list", action="store_true",
                        help="list experiments: name, group, profiles (cells each), description")
    parser.add_argument("--all", action="store_true", help="run every experiment")
    parser.add_argument("--if-missing", action="store_true",
                        help="skip an experiment that already has results under --out (a "
                             "sweep_<profile>.json of any profile): compute only the experiments "
                             "that were never run")
    add_run_arguments(parser, default_scheduler="local")
    parser.add_argument("--experiments-dir", type=Path, default=Path("experiments"),
                        metavar="DIR", help="folder of experiment files *.py (default "
                                            "experiments)")


def _cells(exp, profile: str) -> str:
    try:
        return str(len(exp.grid(profile)))
    except Exception:  # noqa: BLE001 - a listing must not fail on one broken grid
        return "?"


def format_list(experiments: dict) -> str:
    """The ``--list`` table: name, group, profiles with their cell counts, description."""
    rows = [(e.name, e.group or "-",
             " ".join(f"{p}{'*' if p == e.default_profile else ''}:{_cells(e, p)}"
                      for p in e.profiles), e.description)
            for e in experiments.values()]
    head = ("EXPERIMENT", "GROUP", "PROFILES (cells; * default)", "DESCRIPTION")
    widths = [max(len(r[k]) for r in [head, *rows]) for k in range(3)]
    return "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}".rstrip()
                     for a, b, c, d in [head, *rows])


def _named_file(directory: Path, name: str) -> list | None:
    """Fast path: experiment ``name`` from ``directory/<name with _ for ->.py`` alone (importing
    every experiment file costs seconds); ``None`` when that file does not define it."""
    from ..sweep import load_experiments

    f = Path(directory) / f"{name.replace('-', '_')}.py"
    if f.name.startswith("_") or not f.is_file():
        return None
    own = [e for e in load_experiments(f) if e.name == name]
    return own or None


def run(args: argparse.Namespace) -> int:
    import contextlib
    import sys

    from ..errors import SweepError
    from ..sweep import (
        dask_client,
        describe_result,
        discover_experiments,
        out_from_args,
        pending_cells,
        profile_from_args,
        run_sweep,
        select_experiments,
    )

    profile = profile_from_args(args)
    args.out = out_from_args(args, profile)
    if args.list:
        print(format_list(discover_experiments(args.experiments_dir)))
        return 0
    if args.all and args.experiment:
        raise SweepError(f"give an experiment name ({args.experiment!r}) or --all, not both")
    if not args.all and not args.experiment:
        raise SweepError("expected an experiment or group name, --all, or --list")
    chosen = _named_file(args.experiments_dir, args.experiment) if args.experiment else None
    if chosen is None:
        known = discover_experiments(args.experiments_dir)
        chosen = select_experiments(known, "all" if args.all else args.experiment)
    if args.if_missing:
        chosen = [e for e in chosen if not any((args.out / e.name).glob("sweep_*.json"))]
    for exp in chosen:  # validate every profile before running anything
        p = exp.default_profile if profile is None else profile
        if p not in exp.profiles:
            raise SweepError(f"experiment {exp.name!r}: unknown profile {p!r}; expected one of "
                             f"{', '.join(exp.profiles)}")
    progress = not args.no_progress and sys.stderr.isatty()
    with contextlib.ExitStack() as stack:
        client = None  # one Dask cluster for all chosen experiments, started only when needed
        for exp in chosen:
            if (client is None and args.scheduler != "serial"
                    and pending_cells(exp, profile, args.out)):
                client = stack.enter_context(dask_client(args.scheduler, args.workers))
            res = run_sweep(exp, profile=profile, backend=args.scheduler, workers=args.workers,
                            out_dir=args.out, progress=progress, client=client,
                            batch=args.batch)
            print(describe_result(res), flush=True)
    return 0
