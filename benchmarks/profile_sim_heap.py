"""What bounds the compiled DLB engine (issue 21): the event heap's share of the time per request.

On the bench_sim "engines" scenario (4-cell Appendix-B, seed 1, 80 % load, 10-ms probes, 600
simulated s) this script measures, for Rand and Flow-Grad:

1. the compiled run's wall time per completed request, and the events it pushed (the loop's own
   counter ``ci[I_SEQ]``) and the heap's mean size (sampled at every pause/return of the loop, and
   bounded by the heap array's final capacity);
2. the cost of one ``heap_push`` + ``heap_pop`` pair of the engine's own heap kernels (the same
   numba functions, inlined into a loop) on a heap held at that size, with exponential event
   times as in the simulator;
3. the heap's share = events per request × (push + pop) / time per request.

The reference engine uses Python's ``heapq`` on tuples; its ratio to the compiled engine cannot
exceed (its time per request) / (the compiled heap's time per request) however fast the rest of
the compiled loop becomes.

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/profile_sim_heap.py`` (~1 min).
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
from numba import njit

from lbtheory.registry import make_router
from lbtheory.sim import _compiled, appendix_b_scenario, generate_arrivals, simulate
from lbtheory.sim import _kernels_state as ks


@njit(cache=False)
def _heap_cycle(h_t, h_i, ci, n_ops, seed):  # pragma: no cover - numba
    """n_ops pops, each followed by one push at (popped time + Exp(1)): a steady-state heap."""
    np.random.seed(seed)
    for _ in range(n_ops):
        t = h_t[0]
        ks.heap_pop(h_t, h_i, ci)
        ks.heap_push(h_t, h_i, ci, t + np.random.exponential(1.0), 1, 0, 0)
    return h_t[0]


def heap_ns(size: int, n_ops: int = 2_000_000, reps: int = 5) -> float:
    """Median ns per (pop + push) pair on a heap of ``size`` events."""
    out = []
    for r in range(reps):
        h_t = np.empty(size + 8)
        h_i = np.zeros((size + 8, 4), dtype=np.int64)
        ci = np.zeros(32, dtype=np.int64)
        rng = np.random.default_rng(r)
        for t in rng.exponential(1.0, size):
            ks.heap_push.py_func(h_t, h_i, ci, float(t), 1, 0, 0)
        _heap_cycle(h_t, h_i, ci, 1000, r)  # compile / warm
        t0 = time.perf_counter()
        _heap_cycle(h_t, h_i, ci, n_ops, r)
        out.append((time.perf_counter() - t0) / n_ops * 1e9)
    return statistics.median(out)


def main() -> None:
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}; 2 CPUs\n")
    sc = appendix_b_scenario(1, n_cells=4)
    T = 600.0
    arr = generate_arrivals(sc, T, 0)
    seen: dict[str, list] = {}
    original = _compiled._Run.loop

    def loop(self):  # record the counters the loop leaves behind
        original(self)
        seen.setdefault("seq", []).append(int(self.ctl.ci[ks.I_SEQ]))
        seen.setdefault("heap", []).append(int(self.clock.t.shape[0]))

    _compiled._Run.loop = loop
    print("| policy | wall s | completed | ns / request | events pushed | events / request | "
          "heap capacity | heap ns (push+pop) | heap share |")
    print("|---|---|---|---|---|---|---|---|---|")
    try:
        for pol in ("rand", "flow-grad"):
            simulate(sc, make_router(pol), duration_s=1.0, seed=0, engine="compiled")  # warm
            walls = []
            for _ in range(5):
                seen.clear()
                t0 = time.perf_counter()
                res = simulate(sc, make_router(pol), duration_s=T, seed=0, arrivals=arr,
                               engine="compiled")
                walls.append(time.perf_counter() - t0)
            wall = statistics.median(walls)
            ns_req = wall / res.completed * 1e9
            events = seen["seq"][-1]
            per_req = events / res.completed
            # in flight ≈ λ × mean latency: one pending event each, plus the probe round's
            size = max(8, int(round(float(np.sum(sc.network.arrival_rates))
                                    * float(np.mean(res.latency_s[res.done])))))
            h = heap_ns(size)
            share = per_req * h / ns_req
            print(f"| {pol} | {wall:.3f} | {res.completed:,} | {ns_req:.0f} | {events:,} | "
                  f"{per_req:.2f} | {seen['heap'][-1]:,} (mean size ≈ {size}) | {h:.1f} | "
                  f"{100 * share:.0f} % |")
    finally:
        _compiled._Run.loop = original


if __name__ == "__main__":
    main()
