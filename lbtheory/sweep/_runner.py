"""Run an :class:`~lbtheory.sweep.Experiment`: cached cells, Dask backends, resumable.

Each cell's result is written to ``<out_dir>/<name>/cells/<key>.json`` (atomically, as soon as it
finishes), so a sweep that is killed keeps every finished cell and a restart computes only the
missing ones. Backends: ``"serial"`` (in-process), ``"local"`` (a ``dask.distributed``
LocalCluster, one single-threaded worker process per core) or a scheduler address
(``"tcp://host:8786"``). Dask is the engine; nothing here pools processes or queues tasks.

Cell functions from experiment files loaded by path (not importable on a worker) reach the
workers by value: :func:`~lbtheory.sweep.load_experiments` registers their modules with
``cloudpickle.register_pickle_by_value``, and the function is scattered once per sweep
(``Client.scatter``: Dask serialises it with cloudpickle, which honours that registry, and keeps
it in worker memory for every task of the sweep).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._checks import check_bool, check_int
from ..errors import RunStatus, SweepError
from ..io import package_versions, run_manifest, to_jsonable, write_json_atomic
from ._experiment import Experiment, _guarded, _version, cache_key
from ._validate import check_result

__all__ = ["SweepResult", "SweepInterrupted", "run_sweep", "pending_cells", "cell_path",
           "dask_client", "CONNECT_TIMEOUT_S"]

#: Seconds to wait for a remote Dask scheduler before giving up.
CONNECT_TIMEOUT_S: float = 5.0


@dataclass
class SweepResult:
    """What :func:`run_sweep` did.

    Attributes:
        experiment: the experiment's name.
        profile: the profile that was run.
        rows: ``(config, result)`` pairs in grid order (what ``collect`` received).
        computed: cells computed in this run.
        cached: cells read from the cache.
        out_dir: ``<out_dir>/<name>``, where cells and summaries are.
        wall_s: wall-clock seconds of the whole run, s.
        backend: the backend used (``"serial"``, ``"local"`` or the scheduler address).
        status: :attr:`~lbtheory.errors.RunStatus.COMPLETED` (every cell has a result and
            ``collect`` ran) or :attr:`~lbtheory.errors.RunStatus.FAILED` (cells raised under
            ``run_sweep(..., throw=False)``: ``rows`` holds the others, ``errors`` the failures,
            and ``collect`` did not run). No other member occurs: a sweep has no horizon to
            truncate and nothing to diverge.
        errors: ``(config, "ExceptionType: message")`` of each failed cell, in grid order.
        invalid: ``(cell key, reason)`` of each cached cell file that did not hold a valid
            result (:func:`~lbtheory.sweep.check_result`: corrupt JSON, another config, a
            result failing the experiment's ``cell_schema``) and was therefore recomputed.
    """

    experiment: str
    profile: str
    rows: list[tuple[dict, dict]] = field(repr=False)
    computed: int
    cached: int
    out_dir: Path
    wall_s: float
    backend: str
    status: RunStatus = RunStatus.COMPLETED
    errors: list[tuple[dict, str]] = field(default_factory=list, repr=False)
    invalid: list[tuple[str, str]] = field(default_factory=list, repr=False)


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_sweep`: every finished cell is saved, and a rerun of the same
    sweep computes only the others. A ``KeyboardInterrupt`` (code that catches that still
    does); the CLI prints one line from it.

    Attributes:
        cached: cells of the grid whose results are saved (read from the cache or computed
            before the interrupt).
        cells_dir: the folder holding them (``<out_dir>/<name>/cells``).
    """

    def __init__(self, cached: int, cells_dir: Path) -> None:
        self.cached = int(cached)
        self.cells_dir = Path(cells_dir)
        super().__init__(self.resume_hint)

    @property
    def resume_hint(self) -> str:
        """What the interrupt line says after ``interrupted: ``."""
        return (f"{self.cached} cell{'' if self.cached == 1 else 's'} cached in "
                f"{self.cells_dir}; rerun the same command to resume")


def cell_path(out_dir: Path, name: str, key: str) -> Path:
    """Where the cell with cache key ``key`` of experiment ``name`` is stored."""
    return Path(out_dir) / name / "cells" / f"{key}.json"


class CellExit(Exception):
    """A cell called ``sys.exit``: reported as a failed cell (it must not end the sweep, or a
    Dask worker, with exit code 0)."""


def _timed(cell: Any, config: dict) -> tuple[Any, float]:
    """Run one cell (on a worker or in-process); returns its result and wall time in s."""
    t0 = time.perf_counter()
    try:
        out = cell(config)
    except SystemExit as exc:
        raise CellExit(f"the cell called sys.exit({exc.code!r}); a cell must return a dict or "
                       f"raise") from None
    return out, time.perf_counter() - t0


def _timed_batch(cell: Any, configs: list[dict]) -> list[tuple[bool, Any, float]]:
    """Run a batch of cells on a Dask worker; ``(ok, result or exception, wall s)`` per config,
    so one failing cell spoils no other."""
    out: list[tuple[bool, Any, float]] = []
    for config in configs:
        try:
            out.append((True, *_timed(cell, config)))
        except Exception as exc:  # noqa: BLE001 - reported by the runner
            out.append((False, exc, 0.0))
    return out


def _read_cached(path: Path, config: dict,
                 schema: Any = None) -> tuple[dict | None, str | None]:
    """``(result, None)`` when ``path`` is a complete, valid cell file for ``config``;
    ``(None, None)`` when there is no file; ``(None, reason)`` when the file is there but
    unusable (unreadable, not JSON, another config, no result, or a result that fails
    :func:`~lbtheory.sweep.check_result` against ``schema``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"not JSON ({exc})"
    except RecursionError:
        return None, "not JSON (nested too deeply)"
    if not isinstance(data, dict) or "result" not in data:
        return None, "not a cell file (no 'result')"
    if data.get("config") != config:
        return None, "its config differs from the grid's"
    why = check_result(data["result"], schema)
    if why is not None:
        return None, why
    return data["result"], None


#: A temporary cell file older than this (s) is an orphan of a killed run: writes take ms.
ORPHAN_AGE_S: float = 60.0


def _remove_orphans(cells_dir: Path) -> int:
    """Delete temporary files left in ``cells_dir`` by a run killed mid-write; returns how many.

    Only files older than :data:`ORPHAN_AGE_S` go, so a concurrent run's write is never touched.
    """
    n = 0
    now = time.time()
    for f in cells_dir.glob(".*.tmp") if cells_dir.is_dir() else ():
        try:
            if now - f.stat().st_mtime > ORPHAN_AGE_S:
                f.unlink()
                n += 1
        except OSError:  # pragma: no cover - removed meanwhile
            pass
    return n


@functools.lru_cache(maxsize=1)
def _versions() -> dict[str, str]:
    """Package versions recorded in every cell file (read once per process)."""
    return package_versions()


def _check_backend(backend: str, workers: int | None) -> None:
    if not isinstance(backend, str) or not (backend in ("serial", "local") or "://" in backend):
        raise SweepError(f"backend {backend!r}: expected 'serial', 'local' or a Dask scheduler "
                         f"address such as tcp://host:8786")
    if workers is not None:
        check_int(workers, "workers", low=1, unit="worker processes; None: one per core")


@contextlib.contextmanager
def _quiet_distributed() -> Iterator[None]:
    """Keep ``distributed``'s own log lines (connection retries, cluster shutdown) off stderr."""
    loggers = [logging.getLogger(n) for n in ("distributed", "tornado", "asyncio")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, lv in zip(loggers, levels, strict=True):
            lg.setLevel(lv)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while the block runs (processes started in it inherit that), in the main
    thread only (elsewhere signals cannot be changed and nothing is done)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def dask_client(backend: str, workers: int | None = None) -> Iterator[Any]:
    """A ``distributed.Client`` for ``"local"`` (a LocalCluster with ``workers`` single-threaded
    processes, default one per core) or a scheduler address; closed on exit.

    Raises:
        SweepError: the scheduler at ``backend`` cannot be reached within
            :data:`CONNECT_TIMEOUT_S` seconds; the message names the address.
    """
    from distributed import Client, LocalCluster

    with _quiet_distributed():
        if backend == "local":
            n = workers or os.cpu_count() or 1
            import dask

            # the worker processes start with Ctrl-C ignored (a terminal sends it to the whole
            # process group): this process stops the sweep and closes them, without their
            # tracebacks. No worker time-to-live: a cell that runs one compiled (numba) kernel
            # for minutes holds its worker's GIL, so the worker sends no heartbeat; past the
            # default 5 minutes the scheduler removed both workers and every pending cell was
            # cancelled ("already forgotten": Knowl 8's whole-episode clairvoyant cells, ≈ 11
            # min each). The workers are this machine's processes: their nannies see deaths.
            with _sigint_ignored(), dask.config.set({"distributed.scheduler.worker-ttl": None}):
                cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=logging.CRITICAL)
            client = Client(cluster)
        else:
            cluster = None
            try:
                client = Client(backend, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError, ValueError) as exc:
                raise SweepError(f"scheduler {backend!r}: cannot connect within "
                                 f"{CONNECT_TIMEOUT_S:g} s ({type(exc).__name__}: {exc}); "
                                 f"expected the address of a running Dask scheduler, e.g. "
                                 f"tcp://host:8786") from None
    try:
        yield client
    finally:
        with _quiet_distributed():
            client.close()
            if cluster is not None:
                cluster.close()


def _progress(total: int, initial: int, desc: str, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="cell", file=sys.stderr,
                disable=not enabled, dynamic_ncols=True, smoothing=0.1)


def pending_cells(experiment: Experiment, profile: str | None = None,
                  out_dir: str | os.PathLike = Path("experiments/results")) -> int:
    """How many cells of ``experiment``'s ``profile`` grid have no cell file under ``out_dir``.

    A file-existence check (no file is read): the CLI asks it only to decide whether to start a
    Dask cluster; :func:`run_sweep` validates every cached file and recomputes a corrupt one.
    """
    configs = experiment.configs(profile)
    version = _version()
    return sum(not cell_path(Path(out_dir), experiment.name,
                             cache_key(experiment.name, c, version, experiment.version)).is_file()
               for c in configs)


def run_sweep(experiment: Experiment, profile: str | None = None, backend: str = "serial",
              workers: int | None = None, out_dir: str | os.PathLike = Path("experiments/results"),
              progress: bool = False, *, client: Any = None, batch: int = 1,
              throw: bool = True) -> SweepResult:
    """Run every cell of ``experiment``'s grid for ``profile`` that is not cached, then collect.

    Args:
        experiment: the sweep to run.
        profile: a name in ``experiment.profiles`` (default: ``"full"`` when listed).
        backend: ``"serial"``, ``"local"`` (LocalCluster, ``workers`` processes, default one per
            core) or a Dask scheduler address (``"tcp://host:8786"``).
        workers: number of local worker processes (``"local"`` only).
        out_dir: results root; cells go to ``<out_dir>/<name>/cells/``, and ``collect`` writes
            under ``<out_dir>/<name>/``.
        progress: show a tqdm bar (cells done / total, ETA) on stderr.
        client: an open ``distributed.Client`` to run on instead of starting one for
            ``backend`` (lets several sweeps share one cluster); ignored when nothing is missing.
        batch: cells per Dask task (default 1: each cell is saved as soon as it finishes); more
            amortises Dask's per-task cost over cheap cells, and a batch is saved when it ends.
        throw: raise :class:`~lbtheory.errors.SweepError` when cells raise (after every other
            cell ran and was saved); ``False`` returns a result with status ``FAILED`` listing
            them instead (``collect`` does not run on a partial grid, so no summary and no
            ``sweep_<profile>.json`` is written). A Dask task the scheduler drops (cancelled,
            e.g. workers removed after missed heartbeats) is resubmitted once before it counts.

    Returns:
        A :class:`SweepResult` with the rows given to ``collect``, computed/cached counts and
        the status.

    Raises:
        SweepError: a malformed grid, unknown profile or backend, unreachable scheduler, a result
            that is not a JSON object, or (``throw``) cells that raised.
        ParameterError: ``workers``, ``batch`` or ``throw`` of the wrong type or range.
    """
    if not isinstance(experiment, Experiment):
        raise SweepError(f"experiment: expected an lbtheory.sweep.Experiment, got "
                         f"{type(experiment).__name__}")
    _check_backend(backend, workers)
    check_int(batch, "batch", low=1, unit="cells per Dask task")
    check_bool(throw, "throw")
    t_start = time.perf_counter()
    profile = experiment.default_profile if profile is None else profile
    configs = experiment.configs(profile)
    name, root = experiment.name, Path(out_dir)
    version = _version()
    keys = [cache_key(name, c, version, experiment.version) for c in configs]
    paths = [cell_path(root, name, k) for k in keys]
    _remove_orphans(root / name / "cells")
    read = [_read_cached(p, c, experiment.cell_schema)
            for p, c in zip(paths, configs, strict=True)]
    results: list[dict | None] = [r for r, _ in read]
    invalid = [(keys[i], why) for i, (_, why) in enumerate(read) if why is not None]
    missing = [i for i, r in enumerate(results) if r is None]
    n_cached = len(configs) - len(missing)
    versions = _versions() if missing else {}
    failures: list[tuple[int, BaseException]] = []

    def store(i: int, out: Any, wall: float) -> None:
        if not isinstance(out, dict):
            raise SweepError(f"experiment {name!r}: cell returned {type(out).__name__} for "
                             f"config {configs[i]}; expected a dict")
        try:
            clean = to_jsonable(out)
        except (TypeError, ValueError) as exc:
            raise SweepError(f"experiment {name!r}: the result of config {configs[i]} is not "
                             f"JSON-serialisable ({exc})") from None
        why = check_result(clean, experiment.cell_schema)
        if why is not None:  # a failed cell: nothing is stored, nothing reaches collect
            failures.append((i, SweepError(f"invalid result: {why}")))
            return
        # no fsync: a cell file is complete or absent (os.replace), and one that a power loss
        # emptied fails to parse and is recomputed; fsync would cost ms per cell (measured)
        write_json_atomic(paths[i], {
            "experiment": name, "key": keys[i], "config": configs[i], "result": clean,
            "wall_s": wall, "lbtheory_version": version, "versions": versions,
            "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")},
            indent=None, fsync=False)
        results[i] = clean

    bar = _progress(len(configs), n_cached, f"{name} [{profile}]", progress)
    try:
        if missing and backend == "serial" and client is None:
            for i in missing:
                try:
                    out, wall = _timed(experiment.cell, configs[i])
                except Exception as exc:  # noqa: BLE001 - reported after the others ran
                    failures.append((i, exc))
                else:
                    store(i, out, wall)
                bar.update(1)
        elif missing:
            from distributed import as_completed

            with contextlib.ExitStack() as stack:
                if client is None:
                    client = stack.enter_context(dask_client(backend, workers))
                # by value (cloudpickle honours register_pickle_by_value), once per sweep
                [cell] = client.scatter([experiment.cell], broadcast=True, hash=False)
                chunks = [missing[k:k + batch] for k in range(0, len(missing), batch)]
                fl = client.map(_timed_batch, [cell] * len(chunks),
                                [[configs[i] for i in ch] for ch in chunks],
                                key=[f"{name}-{keys[ch[0]]}-{len(ch)}" for ch in chunks],
                                pure=False)
                futs = dict(zip(fl, range(len(chunks)), strict=True))
                del fl
                retried: set[int] = set()
                scattered = [cell]
                pending = as_completed(futs)
                for fut in pending:
                    k = futs.pop(fut)
                    ch = chunks[k]
                    try:
                        outs = fut.result()
                    except CancelledError as exc:
                        # the scheduler dropped the task, not the cell: e.g. the workers were
                        # removed after missed heartbeats (a paused machine), perhaps with the
                        # scattered cell. Resubmit the batch, once; scatter the cell again only
                        # if it was lost (once per loss, not once per dropped batch).
                        fut.release()
                        if k in retried:
                            failures.extend((i, exc) for i in ch)
                            bar.update(len(ch))
                            continue
                        retried.add(k)
                        if cell.status != "finished":
                            [cell] = client.scatter([experiment.cell], broadcast=True,
                                                    hash=False)
                            scattered.append(cell)
                        new = client.submit(_timed_batch, cell, [configs[i] for i in ch],
                                            key=f"{name}-{keys[ch[0]]}-{len(ch)}-retry",
                                            pure=False)
                        futs[new] = k
                        pending.add(new)
                        continue
                    except Exception as exc:  # noqa: BLE001 - a worker died (error): the
                        # whole batch failed, the other batches go on
                        failures.extend((i, exc) for i in ch)
                    else:
                        for i, (ok, out, wall) in zip(ch, outs, strict=True):
                            if ok:
                                store(i, out, wall)
                            else:
                                failures.append((i, out))
                    bar.update(len(ch))
                    fut.release()
                for c in scattered:
                    c.release()
    except KeyboardInterrupt:  # Ctrl-C: every stored cell is on disk; say so, and resume
        raise SweepInterrupted(sum(r is not None for r in results), root / name / "cells") \
            from None
    finally:
        bar.close()
    rows = [(c, r) for c, r in zip(configs, results, strict=True) if r is not None]
    if failures:
        failures.sort(key=lambda f: f[0])  # grid order, not completion order
        i, exc = failures[0]
        if throw:
            raise SweepError(f"experiment {name!r}: {len(failures)} of {len(missing)} cells "
                             f"failed (the others are saved); first: config {configs[i]}: "
                             f"{type(exc).__name__}: {exc}") from exc
        return SweepResult(experiment=name, profile=profile, rows=rows,
                           computed=len(missing) - len(failures), cached=n_cached,
                           out_dir=root / name, wall_s=time.perf_counter() - t_start,
                           backend=backend, status=RunStatus.FAILED,
                           errors=[(configs[j], f"{type(e).__name__}: {e}") for j, e in failures],
                           invalid=invalid)
    exp_dir = root / name
    _guarded(experiment.collect, f"experiment {name!r}: collect", rows, exp_dir, profile)
    write_json_atomic(exp_dir / f"sweep_{profile}.json", {
        "experiment": name, "profile": profile, "cells": len(configs),
        "computed": len(missing), "cached": n_cached, "invalid_recomputed": len(invalid),
        "backend": backend,
        "cell_keys": keys,
        "manifest": run_manifest({"experiment": name, "profile": profile,
                                  "description": experiment.description})})
    return SweepResult(experiment=name, profile=profile, rows=rows, computed=len(missing),
                       cached=n_cached, out_dir=exp_dir,
                       wall_s=time.perf_counter() - t_start, backend=backend, invalid=invalid)
