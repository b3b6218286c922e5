"""Sweep-runner benchmark (issue 12): overhead per cell, local-Dask speed-up, resume after a kill.

Run:  .venv/bin/python benchmarks/bench_sweep.py [--quick] [--workers 2]

1. Runner overhead per grid cell with a no-op cell: (run_sweep wall − the same cells called in a
   plain loop) / cells, median of repeats, for the serial backend and for local Dask on an already
   running cluster (cluster start-up is reported separately), one cell per Dask task and
   ``batch=10``; baseline for Dask: the same no-op tasks through raw ``client.map`` +
   ``as_completed``. Goal ≤ 5 ms/cell.
2. Speed-up of local Dask (``--workers`` processes) over serial on a CPU-bound cell (a pure-Python
   loop, ~0.4 s), cluster start-up included and excluded; goal ≥ 1.8× on 2 cores. The machine may
   be shared, so the 1-minute load average is printed before and after.
3. Resume: ``lbtheory sweep`` (local Dask) on a grid of sleeping cells is SIGKILLed (its whole
   process group) once half the cell files exist, then restarted; the cells log every call, so
   the script counts how many finished cells were computed again (goal: 0).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from lbtheory.sweep import dask_client, load_experiments, run_sweep

BENCH_FILE = textwrap.dedent('''
    import os, time
    from pathlib import Path
    from lbtheory.sweep import Experiment

    def noop_grid(profile):
        return [{"i": i} for i in range(int(os.environ.get("BENCH_N", "200")))]

    def noop(config):
        return {"i": config["i"]}

    def spin_grid(profile):
        return [{"i": i, "n": int(os.environ.get("BENCH_SPIN", "3000000"))}
                for i in range(int(os.environ.get("BENCH_N", "8")))]

    def spin(config):
        s = 0
        for k in range(config["n"]):
            s += (k * config["i"]) % 7
        return {"s": s}

    def sleepy(config):
        with open(os.environ["BENCH_LOG"], "a") as fh:
            fh.write(f"{config['i']}\\n")
        time.sleep(config["sleep"])
        return {"i": config["i"]}

    def sleepy_grid(profile):
        return [{"i": i, "sleep": 0.5} for i in range(16)]

    def nothing(rows, out_dir, profile):
        pass

    EXPERIMENTS = [
        Experiment(name="bench-noop", description="no-op", grid=noop_grid, cell=noop,
                   collect=nothing),
        Experiment(name="bench-spin", description="CPU-bound", grid=spin_grid, cell=spin,
                   collect=nothing),
        Experiment(name="bench-sleepy", description="sleeps", grid=sleepy_grid, cell=sleepy,
                   collect=nothing),
    ]
''')


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _raw_dask(client, configs: list) -> None:
    """Dask alone: a no-op (``dict``, importable on any worker) mapped over the configs,
    results gathered as they complete."""
    from distributed import as_completed

    for fut in as_completed(client.map(dict, configs, pure=False)):
        fut.result()


def overhead(exps: dict, tmp: Path, n: int, reps: int, workers: int) -> None:
    exp = exps["bench-noop"]
    os.environ["BENCH_N"] = str(n)
    configs = exp.configs("full")
    base = statistics.median(_timed(lambda: [exp.cell(c) for c in configs]) for _ in range(reps))
    serial = [(_timed(lambda k=k: run_sweep(exp, "full", out_dir=tmp / f"s{k}")) - base) / n
              for k in range(reps)]
    cached = [(_timed(lambda k=k: run_sweep(exp, "full", out_dir=tmp / f"s{k}")) - base) / n
              for k in range(reps)]
    t0 = time.perf_counter()
    with dask_client("local", workers) as client:
        start = time.perf_counter() - t0
        dask = [(_timed(lambda k=k: run_sweep(exp, "full", out_dir=tmp / f"d{k}",
                                              client=client)) - base) / n for k in range(reps)]
        raw = [_timed(lambda: _raw_dask(client, configs)) / n for _ in range(reps)]
        batched = [(_timed(lambda k=k: run_sweep(exp, "full", out_dir=tmp / f"b{k}", client=client,
                                                 batch=10)) - base) / n for k in range(reps)]
    print(f"[overhead] {n} no-op cells, median of {reps}; plain loop {1e6 * base / n:.1f} µs/cell")
    print(f"  serial        {1e3 * statistics.median(serial):6.2f} ms/cell (goal <= 5)")
    print(f"  serial cached {1e3 * statistics.median(cached):6.2f} ms/cell (all cells read back)")
    print(f"  local Dask    {1e3 * statistics.median(dask):6.2f} ms/cell (goal <= 5; {workers} "
          f"workers, running cluster; start-up {start:.1f} s)")
    print(f"  raw Dask      {1e3 * statistics.median(raw):6.2f} ms/task (baseline: client.map + "
          f"as_completed of the same cells, no runner)")
    print(f"  Dask batch=10 {1e3 * statistics.median(batched):6.2f} ms/cell (--batch 10: 10 cells "
          f"per Dask task)")


def speedup(exps: dict, tmp: Path, n: int, reps: int, workers: int) -> None:
    exp = exps["bench-spin"]
    os.environ["BENCH_N"] = str(n)
    load0 = os.getloadavg()[0]
    serial = [_timed(lambda k=k: run_sweep(exp, "full", out_dir=tmp / f"ss{k}"))
              for k in range(reps)]
    t0 = time.perf_counter()
    with dask_client("local", workers) as client:
        start = time.perf_counter() - t0
        dask = [_timed(lambda k=k: run_sweep(exp, "full", out_dir=tmp / f"sd{k}", client=client))
                for k in range(reps)]
    full = [_timed(lambda k=k: run_sweep(exp, "full", backend="local", workers=workers,
                                         out_dir=tmp / f"sf{k}")) for k in range(reps)]
    s, d, f = (statistics.median(x) for x in (serial, dask, full))
    print(f"[speed-up] {n} CPU-bound cells of {s / n:.2f} s, median of {reps}; load average "
          f"(1 min) {load0:.2f} before, {os.getloadavg()[0]:.2f} after; {os.cpu_count()} cores")
    print(f"  serial {s:.2f} s; local Dask ({workers} workers) {d:.2f} s on a running cluster "
          f"-> {s / d:.2f}x (goal >= 1.8); {f:.2f} s with cluster start-up ({start:.1f} s) "
          f"-> {s / f:.2f}x")


def resume(exp_dir: Path, tmp: Path, workers: int) -> None:
    log, out = tmp / "calls.log", tmp / "resume"
    env = os.environ | {"BENCH_LOG": str(log)}
    cmd = [str(Path(sys.executable).with_name("lbtheory")), "sweep", "bench-sleepy",
           "--experiments-dir", str(exp_dir), "--out", str(out), "--scheduler", "local",
           "--workers", str(workers), "--no-progress"]
    cells = out / "bench-sleepy" / "cells"
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    while len(list(cells.glob("*.json"))) < 8:
        if proc.poll() is not None:
            raise SystemExit("resume benchmark: the sweep ended before it was killed")
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its Dask cluster, like a killed job
    proc.wait()
    killed_at = time.perf_counter() - t0
    done = {json.loads(f.read_text())["config"]["i"] for f in cells.glob("*.json")}
    n_before = len(log.read_text().split())
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    after = [int(x) for x in log.read_text().split()[n_before:]]
    again = sorted(done & set(after))
    print(f"[resume] 16 cells of 0.5 s on local Dask ({workers} workers); killed (SIGKILL, "
          f"process group) after {killed_at:.1f} s with {len(done)} cell files written")
    print(f"  restart: exit {r.returncode}, '{r.stdout.strip()}'; computed {len(after)} cells, "
          f"recomputed {len(again)} of the {len(done)} done before the kill (goal 0); "
          f"{len(list(cells.glob('*.json')))}/16 cell files, "
          f"{len(list(cells.glob('.*.tmp')))} temporary files left")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer cells and repeats")
    ap.add_argument("--workers", type=int, default=2, help="local Dask worker processes")
    ap.add_argument("--spin", type=int, default=3_000_000,
                    help="loop iterations of one CPU-bound speed-up cell (3e6 ≈ 0.3 s; the real "
                         "Appendix-B cells take 20-500 s)")
    args = ap.parse_args()
    if args.spin < 1:
        ap.error(f"--spin: expected a positive number of iterations, got {args.spin}")
    os.environ["BENCH_SPIN"] = str(args.spin)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        (tmp / "exps").mkdir()
        (tmp / "exps" / "bench.py").write_text(BENCH_FILE)
        exps = {e.name: e for e in load_experiments(tmp / "exps" / "bench.py")}
        overhead(exps, tmp, 50 if args.quick else 200, 3 if args.quick else 5, args.workers)
        speedup(exps, tmp, 4 if args.quick else 8, 1 if args.quick else 3, args.workers)
        resume(tmp / "exps", tmp, args.workers)


if __name__ == "__main__":
    main()
