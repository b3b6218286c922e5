"""The ``lbtheory`` command.

Subcommands live in :mod:`lbtheory.commands`, one module each, discovered automatically. A command
module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int`` (and may
define ``EPILOG``, examples shown at the end of its ``--help``). Any
:class:`~lbtheory.errors.LBTheoryError` becomes a one-line ``error: ...`` on stderr and exit code 2.

Flags follow one vocabulary across subcommands (:mod:`lbtheory.commands._help`): ``--policy``,
``--duration``, ``--requests``, ``--out`` (a folder); old spellings stay hidden aliases.

Exit codes: 0 success; 1 the command ran and a check it performs failed (``stepsize``: the verdict
is UNSTABLE); 2 bad input (a malformed file, an invalid option, an output that cannot be written)
or a failed solve; 130 interrupted (Ctrl-C: one ``interrupted`` line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from .errors import LBTheoryError

__all__ = ["main", "build_parser"]


#: Subcommands in the order of the README's CLI tour; others follow alphabetically.
COMMAND_ORDER: tuple[str, ...] = ("equilibrium", "fluid", "stepsize", "barrier", "simulate",
                                  "intelligent")

#: Examples for subcommands whose module defines no ``EPILOG``.
_EXAMPLES: dict[str, str] = {
    "equilibrium": "examples:\n"
                   "  lbtheory equilibrium examples/three_cells.yaml --plot out/three_cells.png\n"
                   "  lbtheory equilibrium examples/tntp/Braess-Example/Braess_net.tntp \\\n"
                   "      --trips examples/tntp/Braess-Example/Braess_trips.tntp --json",
    "fluid": "example:\n  lbtheory fluid examples/three_cells.yaml --mechanism flow --cost "
             "gradient "
             "--stepsize 0.5 --duration 60 --plot out/fluid.png",
    "stepsize": "example:\n  lbtheory stepsize examples/three_cells.yaml --stepsize 0.05\n"
                "exit code 1 when the verdict is UNSTABLE (0 stable, 2 bad input)",
    "barrier": "example:\n  lbtheory barrier examples/traces/AzureLLMInferenceTrace_conv.csv "
               "--replicas 8 --requests 2000",
    "simulate": "example:\n  lbtheory simulate examples/sim_two_cells.yaml --json",
}


def _command_modules(only: str | None = None) -> list:
    """The command modules (``lbtheory/commands/NAME.py``), or only the one named ``only`` when
    such a file exists: a command's module imports what the command needs (numba, CVXPY, JAX),
    so building every parser for one command cost a traffic-assignment run ≈ 0.3 s of imports
    it never uses."""
    from . import commands

    names = [info.name for info in pkgutil.iter_modules(commands.__path__)
             if not info.name.startswith("_")]
    if only in names:
        mod = importlib.import_module(f"{commands.__name__}.{only}")
        if mod.NAME == only:
            return [mod]
    mods = [importlib.import_module(f"{commands.__name__}.{name}") for name in names]
    rank = {name: k for k, name in enumerate(COMMAND_ORDER)}
    return sorted(mods, key=lambda m: (rank.get(m.NAME, len(rank)), m.NAME))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every discovered subcommand, or with the subcommand ``only``
    alone when there is one of that name (what :func:`main` builds for ``lbtheory NAME ...``)."""
    from .commands._help import HelpFormatter

    parser = argparse.ArgumentParser(
        prog="lbtheory", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Load balancing under delayed feedback (DLB, BalanceRoute, the Intelligent "
                    "Router): equilibria and\nthe price of anarchy of a topology or a traffic "
                    "network, delayed fluid models, exact stepsize\nbounds, and simulators of "
                    "DLB's cell routers, BalanceRoute's decode replicas and the Intelligent\n"
                    "Router's LLM instances; experiment sweeps that cache and resume.",
        epilog="Run 'lbtheory COMMAND --help' for a command's options and an example. Exit "
               "codes: 0 ok,\n1 a check failed (stepsize: UNSTABLE), 2 bad input or a failed "
               "solve. One flag per concept in every\ncommand: --policy (comma-separated), "
               "--duration (s), --requests, --out DIR (a folder; --output FILE\nfor one file).")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"lbtheory {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in _command_modules(only):
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=textwrap.fill(mod.HELP, 79),
                           epilog=getattr(mod, "EPILOG", None) or _EXAMPLES.get(mod.NAME),
                           formatter_class=HelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str,
                      lineno: int, file: object = None, line: str | None = None) -> None:
    """Warnings as one ``warning: ...`` line on stderr (no source line): what a user reads."""
    print(f"warning: {message}", file=sys.stderr)


def _non_interactive_backend() -> None:
    """The command writes figures to files and never shows a window: matplotlib's Agg backend,
    unless the user chose one (``MPLBACKEND``) or the host process has already imported
    matplotlib (a notebook calling :func:`main` keeps its own backend). Setting the variable,
    not calling ``matplotlib.use``, keeps matplotlib out of commands that draw nothing."""
    if "matplotlib" not in sys.modules:
        os.environ.setdefault("MPLBACKEND", "Agg")


#: Exit code of a run ended by Ctrl-C (128 + SIGINT, the shell's convention).
EXIT_INTERRUPTED = 130


def interrupted_line(exc: KeyboardInterrupt) -> str:
    """The one line a Ctrl-C prints: ``interrupted``, and for a sweep how many cells are cached
    where and that a rerun resumes (:attr:`lbtheory.sweep.SweepInterrupted.resume_hint`)."""
    hint = getattr(exc, "resume_hint", "")
    return f"interrupted: {hint}" if hint else "interrupted"


#: Seconds a Ctrl-C may wait for the main thread to raise KeyboardInterrupt before the process
#: ends anyway: a JAX scan (``fluid``) runs in native code and does not return to Python until
#: it ends, so the interpreter's own handler would wait for the whole run.
HARD_EXIT_AFTER_S = 3.0
#: Seconds the cleanup after a raised KeyboardInterrupt may take (closing a Dask cluster)
#: before the process ends anyway (a KeyboardInterrupt raised inside a callback is swallowed).
HARD_EXIT_CLEANUP_S = 30.0


@contextlib.contextmanager
def _interruptible() -> Iterator[threading.Event]:
    """Ctrl-C ends the run promptly even inside native code: SIGINT raises KeyboardInterrupt as
    usual (the caller prints its one line, then sets the yielded event), and also wakes a
    watcher thread (``signal.set_wakeup_fd``) that prints ``interrupted`` and exits with
    :data:`EXIT_INTERRUPTED` when no KeyboardInterrupt was raised within
    :data:`HARD_EXIT_AFTER_S`, or it was but not handled within :data:`HARD_EXIT_CLEANUP_S`.
    Main thread only; elsewhere only the event is yielded."""
    import os
    import signal
    import socket

    handled = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield handled
        return
    raised, swallowed = threading.Event(), threading.Event()
    unraisable = sys.unraisablehook

    def hook(info: Any) -> None:  # a KeyboardInterrupt raised in a callback: no traceback
        if issubclass(info.exc_type, KeyboardInterrupt):
            swallowed.set()
        else:
            unraisable(info)

    def on_sigint(signum: int, frame: object) -> None:
        raised.set()
        raise KeyboardInterrupt

    def watch(sock: socket.socket) -> None:
        try:
            while signal.SIGINT not in (data := sock.recv(64)):
                if not data:  # closed: the command ended
                    return
        except OSError:  # closed: the command ended
            return
        if raised.wait(HARD_EXIT_AFTER_S):
            end = time.monotonic() + HARD_EXIT_CLEANUP_S
            while not (handled.wait(0.1) or swallowed.is_set() or time.monotonic() > end):
                pass
        if not handled.is_set():
            print("interrupted", file=sys.stderr, flush=True)
            sys.stdout.flush()
            os._exit(EXIT_INTERRUPTED)

    r, w = socket.socketpair()
    w.setblocking(False)
    old_handler = signal.signal(signal.SIGINT, on_sigint)
    sys.unraisablehook = hook
    old_fd = signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
    threading.Thread(target=watch, args=(r,), daemon=True, name="lbtheory-ctrl-c").start()
    try:
        yield handled
    finally:
        signal.set_wakeup_fd(old_fd)
        signal.signal(signal.SIGINT, old_handler)
        sys.unraisablehook = unraisable
        r.shutdown(socket.SHUT_RDWR)
        r.close()
        w.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (0 ok, 1 a check failed, 2 bad input or a
    failed solve, 130 interrupted by Ctrl-C: one ``interrupted`` line, no traceback).
    Warnings print as one ``warning:`` line each; they never change the exit code."""
    import warnings

    _non_interactive_backend()
    with warnings.catch_warnings(), _interruptible() as handled:
        warnings.showwarning = _one_line_warning
        try:
            argv = list(sys.argv[1:] if argv is None else argv)
            parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
            args = parser.parse_args(argv)  # a numeric flag's error is raised while parsing
            return int(args._run(args) or 0)
        except KeyboardInterrupt as exc:
            print(interrupted_line(exc), file=sys.stderr)
            handled.set()
            return EXIT_INTERRUPTED
        except LBTheoryError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:  # missing file, a directory, no permission, disk full, ...
            where = f": {exc.filename}" if exc.filename else ""
            print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
            return 2


def entry() -> None:
    """The ``lbtheory`` console script: :func:`main`, then exit with its code. After a Ctrl-C
    the process ends without interpreter finalisation (``os._exit``): a JAX scan or numba
    threads may still be running in native code, and tearing the interpreter down under them
    crashed the process (SIGSEGV after the ``interrupted`` line, seen in CI)."""
    code = main()
    if code == EXIT_INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
