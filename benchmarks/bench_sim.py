"""Benchmark of the DLB event simulator (issues 11 and 21): completed requests per wall second.

Four Markdown tables, every ratio measured in the same run (medians of ``--repeats`` runs; the
machine's load average is printed with them):

1. **engines** — a 4-cell Appendix-B scenario at 80 % load with 10-ms probes, Rand and Flow-Grad,
   the compiled engine against the reference engine on the same arrivals (and a check that both
   gave the same latencies, bit for bit);
2. **cells** — the compiled engine on 4, 10, 50 and 200 cells: how the probe round's n² cost
   (every source probes every cell, every 10 ms) grows;
3. **peers** — what a user would write instead, on the same network of M/M/c cells with random
   routing (∝ servers, round robin inside a cell, unbounded FIFO queues, no probes): lbtheory's
   compiled engine, SimPy (``pip install simpy``, in the dev extras) and a bare ``heapq`` loop;
   the mean latencies agree (same model);
4. **memory and compile** — peak resident memory of a 10-cell 600-s run, and the engine's
   first-call compile time with an empty numba cache (CI's case) and the cached load, each in a
   fresh process.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sim.py            # ~4 min
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sim.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import subprocess
import sys
import tempfile
from collections import deque

import numpy as np

from lbtheory.registry import make_router
from lbtheory.sim import appendix_b_scenario, generate_arrivals, scenario_from_dict, simulate
from lbtheory.stats import median_wall_time


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def engines(T: float, reps: int) -> None:
    sc = appendix_b_scenario(1, n_cells=4)
    arr = generate_arrivals(sc, T, 0)
    print(f"\n**Engines** — 4-cell Appendix-B scenario (seed 1, 80 % load, {sc.network.n} cells, "
          f"probes every {sc.probe_period_s * 1e3:g} ms), {T:g} simulated s, {len(arr):,} "
          f"requests; {load()}\n")
    print("| policy | compiled wall s | compiled req/s | reference wall s | reference req/s | "
          "ratio | same latencies |")
    print("|---|---|---|---|---|---|---|")
    for pol in ("rand", "flow-grad"):
        runs = {}
        for engine in ("compiled", "reference"):
            simulate(sc, make_router(pol), duration_s=1.0, seed=0, engine=engine)  # warm
            runs[engine] = median_wall_time(
                lambda e=engine, p=pol: simulate(sc, make_router(p), duration_s=T, seed=0,
                                                 arrivals=arr, engine=e), reps)
        (tc, rc), (tr, rr) = runs["compiled"], runs["reference"]
        same = rc.latency_s.tobytes() == rr.latency_s.tobytes()
        print(f"| {pol} | {tc:.3f} | {rc.completed / tc:,.0f} | {tr:.2f} | "
              f"{rr.completed / tr:,.0f} | {tr / tc:,.0f}× | {'yes' if same else 'NO'} |")


def cells(target: int, reps: int) -> None:
    print(f"\n**Cells** — compiled engine, Appendix-B scenarios (seed 1, 80 % load, 10-ms "
          f"probes), ≈ {target:,} requests each; {load()}\n")
    print("| cells | λ req/s | simulated s | probe rounds | Rand req/s | Flow-Grad req/s | "
          "Flow-Grad µs per round |")
    print("|---|---|---|---|---|---|---|")
    for n in (4, 10, 50, 200):
        sc = appendix_b_scenario(1, n_cells=n)
        lam = float(sc.network.arrival_rates.sum())
        T = target / lam
        arr = generate_arrivals(sc, T, 0)
        rounds = T / sc.probe_period_s
        rate = {}
        for pol in ("rand", "flow-grad"):
            simulate(sc, make_router(pol), duration_s=0.5, seed=0, engine="compiled")
            t, res = median_wall_time(lambda p=pol, sc=sc, T=T, arr=arr: simulate(
                sc, make_router(p), duration_s=T, seed=0, arrivals=arr, engine="compiled"), reps)
            rate[pol] = (res.completed / t, t)
        print(f"| {n} | {lam:,.0f} | {T:.1f} | {rounds:,.0f} | {rate['rand'][0]:,.0f} | "
              f"{rate['flow-grad'][0]:,.0f} | {1e6 * rate['flow-grad'][1] / rounds:.1f} |")


def mmc_network(T: float, slots: int = 8, rho: float = 0.8):
    """The 4-cell Appendix-B topology with M/M/c servers at load ρ under routing ∝ servers."""
    ab = appendix_b_scenario(1, n_cells=4)
    net = ab.network
    k = [c.replicas for c in net.cells]
    lam = float(net.arrival_rates.sum())
    mean_s = rho * sum(k) * slots / lam
    d = {"cells": [{"name": c.name, "replicas": c.replicas, "arrival_rate": c.arrival_rate,
                    "service": {"model": "mm1", "capacity": c.replicas * slots / mean_s,
                                "K": float(slots)}} for c in net.cells],
         "arcs": [{"from": a.source, "to": a.target, "delay": a.delay} for a in net.arcs],
         "simulation": {"server": {"kind": "mmc", "slots": slots, "mean_service_s": mean_s,
                                   "queue_limit": None},
                        "leaf_policy": "rr", "probe_period_s": T}}
    return scenario_from_dict(d), mean_s


def _peer_inputs(sc, arr):
    net = sc.network
    k = np.array([c.replicas for c in net.cells])
    cell = np.random.default_rng(1).choice(net.n, size=len(arr), p=k / k.sum())
    return (k.tolist(), net.delays.tolist(), arr.arrival_s.tolist(), arr.source.tolist(),
            arr.work.tolist(), cell.tolist())


def heapq_loop(sc, arr, T: float, mean_s: float, slots: int) -> tuple[int, float]:
    """The bare loop: arrival → cell (pre-drawn ∝ servers) → wire → round-robin server →
    c slots, FIFO; completions within the horizon and their mean latency (s)."""
    k, delay, at, src, work, cell = _peer_inputs(sc, arr)
    base = np.concatenate([[0], np.cumsum(k)]).tolist()
    S = base[-1]
    busy, queue, rr = [0] * S, [deque() for _ in range(S)], [0] * len(k)
    heap: list = []
    seq = done = 0
    total = 0.0
    for r, t in enumerate(at):
        seq += 1
        heapq.heappush(heap, (t + delay[src[r]][cell[r]], seq, 0, r, 0))
    while heap:
        t, _, kind, r, s = heapq.heappop(heap)
        if t >= T:
            break
        if kind == 0:                                   # reaches its cell
            j = cell[r]
            s = base[j] + rr[j] % k[j]
            rr[j] += 1
            if busy[s] < slots:
                busy[s] += 1
                seq += 1
                heapq.heappush(heap, (t + work[r] * mean_s, seq, 1, r, s))
            else:
                queue[s].append(r)
        else:                                           # service ends
            done += 1
            total += t - at[r] + delay[src[r]][cell[r]]
            if queue[s]:
                r2 = queue[s].popleft()
                seq += 1
                heapq.heappush(heap, (t + work[r2] * mean_s, seq, 1, r2, s))
            else:
                busy[s] -= 1
    return done, total / max(done, 1)


def simpy_model(sc, arr, T: float, mean_s: float, slots: int) -> tuple[int, float]:
    """The same model in SimPy: a process per request, a Resource of c slots per server."""
    import simpy

    k, delay, at, src, work, cell = _peer_inputs(sc, arr)
    base = np.concatenate([[0], np.cumsum(k)]).tolist()
    env = simpy.Environment()
    servers = [simpy.Resource(env, capacity=slots) for _ in range(base[-1])]
    rr = [0] * len(k)
    stats = [0, 0.0]

    def request(r):
        i, j = src[r], cell[r]
        yield env.timeout(delay[i][j])
        s = base[j] + rr[j] % k[j]
        rr[j] += 1
        with servers[s].request() as slot:
            yield slot
            yield env.timeout(work[r] * mean_s)
        stats[0] += 1
        stats[1] += env.now - at[r] + delay[i][j]

    def source():
        for r, t in enumerate(at):
            yield env.timeout(t - env.now)
            env.process(request(r))

    env.process(source())
    env.run(until=T)
    return stats[0], stats[1] / max(stats[0], 1)


def peers(T: float, reps: int) -> None:
    slots = 8
    sc, mean_s = mmc_network(T, slots)
    arr = generate_arrivals(sc, T, 0)
    print(f"\n**Peers** — the 4-cell network as M/M/{slots} servers (mean service "
          f"{mean_s:.3f} s, 80 % load), random routing ∝ servers, round robin in the cell, no "
          f"probes; {T:g} simulated s, {len(arr):,} requests; {load()}\n")
    print("| simulator | wall s | completed | req/s | mean latency s | lbtheory compiled is |")
    print("|---|---|---|---|---|---|")
    simulate(sc, make_router("rand"), duration_s=1.0, seed=0, engine="compiled")
    t_lb, res = median_wall_time(lambda: simulate(sc, make_router("rand"), duration_s=T,
                                                  seed=0, arrivals=arr, engine="compiled"), reps)
    rows = [("lbtheory (compiled)", t_lb, res.completed,
             float(np.mean(res.latency_s[res.done])))]
    t_h, (done_h, lat_h) = median_wall_time(lambda: heapq_loop(sc, arr, T, mean_s, slots), reps)
    rows.append(("bare heapq loop", t_h, done_h, lat_h))
    t_s, (done_s, lat_s) = median_wall_time(lambda: simpy_model(sc, arr, T, mean_s, slots), reps)
    rows.append(("SimPy 4", t_s, done_s, lat_s))
    lb_rate = res.completed / t_lb
    for name, t, done, lat in rows:
        rel = "—" if name.startswith("lbtheory") else f"{lb_rate / (done / t):,.0f}× faster"
        print(f"| {name} | {t:.3f} | {done:,} | {done / t:,.0f} | {lat:.4f} | {rel} |")


# Peak RSS from /proc/self/status VmHWM (this process's own address space, reset at exec):
# getrusage's ru_maxrss is inherited from the parent across fork + exec on Linux, so a child of
# a benchmark that already grew to 500 MB reported 500 MB whatever it used itself.
_PROBE = """
import json, resource, sys, time

def peak_mb():
    try:
        with open("/proc/self/status") as fh:
            return next(int(x.split()[1]) for x in fh if x.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

t0 = time.perf_counter()
from lbtheory.registry import make_router
from lbtheory.sim import appendix_b_scenario, simulate
t1 = time.perf_counter()
rss0 = peak_mb()
sc = appendix_b_scenario(1, n_cells=int(sys.argv[1]))
res = simulate(sc, make_router("flow-grad"), duration_s=float(sys.argv[2]), seed=0,
               engine="compiled")
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "first_run_s": t2 - t1, "requests": res.requests,
                  "rss_before_mb": rss0, "peak_mb": peak_mb()}))
"""


def _fresh(cells: int, T: float, cache: str) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _PROBE, str(cells), str(T)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def memory_and_compile(T: float) -> None:
    with tempfile.TemporaryDirectory() as cache:
        cold = _fresh(4, 1.0, cache)
        warm = _fresh(4, 1.0, cache)
        big = _fresh(10, T, cache)
    print(f"\n**Memory and compile** — fresh processes, flow-grad; {load()}\n")
    print("| what | seconds | peak RSS MB |")
    print("|---|---|---|")
    print(f"| import lbtheory.sim (+ numba, JAX) | {warm['import_s']:.2f} | "
          f"{warm['rss_before_mb']:.0f} |")
    print(f"| first run, empty numba cache (compile + write cache) | {cold['first_run_s']:.1f} "
          f"| {cold['peak_mb']:.0f} |")
    print(f"| first run, warm cache (load) | {warm['first_run_s']:.2f} | {warm['peak_mb']:.0f} |")
    print(f"| 10 cells, {T:g} s, {big['requests']:,} requests (warm cache) | "
          f"{big['first_run_s']:.2f} | {big['peak_mb']:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short horizons, one repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--section", choices=("all", "engines", "cells", "peers", "memory"),
                    default="all")
    args = ap.parse_args()
    reps = 1 if args.quick else args.repeats
    s = args.section
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs")
    if s in ("all", "engines"):
        engines(30.0 if args.quick else 600.0, reps)
    if s in ("all", "cells"):
        cells(20_000 if args.quick else 150_000, reps)
    if s in ("all", "peers"):
        peers(60.0 if args.quick else 600.0, reps)
    if s in ("all", "memory"):
        memory_and_compile(60.0 if args.quick else 600.0)


if __name__ == "__main__":
    main()
