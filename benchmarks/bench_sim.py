"""Benchmark of the DLB event simulator (issue 11): simulated requests per wall second.

Appendix-B scenarios with 4 and 10 cells at 80% utilisation; flow-grad routing with probe rounds
every 10 ms (the default) and latency estimation on (softplus refit every 5 s), against a bare
``heapq`` loop of the same server model (prefill engine + 8 decode slots, bounded queue) on the
same arrivals, with random routing ∝ replicas and no probes, measured in the same run. Medians
of ``--repeats`` runs.

    .venv/bin/python benchmarks/bench_sim.py            # full run (prints a Markdown table)
    .venv/bin/python benchmarks/bench_sim.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
from collections import deque

import numpy as np

from lbtheory.registry import make_router
from lbtheory.sim import Estimation, appendix_b_scenario, generate_arrivals, simulate
from lbtheory.stats import median_wall_time


def bare_loop(sc, arr, T: float) -> int:
    """Baseline: arrivals → random cell ∝ k_j → random server → prefill → decode; no probes."""
    net = sc.network
    k = np.array([c.replicas for c in net.cells])
    rng = np.random.default_rng(0)
    cells = rng.choice(net.n, size=len(arr), p=k / k.sum()).tolist()
    servers = rng.random(len(arr)).tolist()
    base = np.concatenate([[0], np.cumsum(k)]).tolist()
    S = base[-1]
    pre_busy, busy = [False] * S, [0] * S
    q, dq = [deque() for _ in range(S)], [deque() for _ in range(S)]
    tp = [s.prefill_s_per_token for s in sc.servers]
    td = [s.decode_s_per_token for s in sc.servers]
    cell_of = [j for j in range(net.n) for _ in range(k[j])]
    P, D = arr.prompt_tokens.tolist(), arr.output_tokens.tolist()
    delay = net.delays.tolist()
    src = arr.source.tolist()
    heap: list = []
    seq = 0
    for r, t in enumerate(arr.time_s.tolist()):
        if t >= T:
            break
        seq += 1
        j = cells[r]
        heapq.heappush(heap, (t + delay[src[r]][j], seq, 0, r, base[j] + int(servers[r] * k[j])))
    done = 0
    while heap:
        t, _, kind, r, s = heapq.heappop(heap)
        if t >= T:
            break
        j = cell_of[s]
        if kind == 0:                                   # arrival at the server
            if not pre_busy[s]:
                pre_busy[s] = True
                seq += 1
                heapq.heappush(heap, (t + P[r] * tp[j], seq, 1, r, s))
            elif len(q[s]) + len(dq[s]) < 32:
                q[s].append(r)
        elif kind == 1:                                 # prefill done
            pre_busy[s] = False
            if busy[s] < 8:
                busy[s] += 1
                seq += 1
                heapq.heappush(heap, (t + D[r] * td[j], seq, 2, r, s))
            else:
                dq[s].append(r)
            if q[s]:
                r2 = q[s].popleft()
                pre_busy[s] = True
                seq += 1
                heapq.heappush(heap, (t + P[r2] * tp[j], seq, 1, r2, s))
        else:                                           # decode done
            busy[s] -= 1
            done += 1
            if dq[s]:
                r2 = dq[s].popleft()
                busy[s] += 1
                seq += 1
                heapq.heappush(heap, (t + D[r2] * td[j], seq, 2, r2, s))
    return done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short horizon, one repeat")
    ap.add_argument("--duration", type=float, default=120.0, help="simulated seconds")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    T = 15.0 if args.quick else args.duration
    reps = 1 if args.quick else args.repeats
    print("| cells | requests | policy | probe period | wall s | simulated req/s | bare heapq "
          "req/s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (4, 10):
        sc = dataclasses.replace(appendix_b_scenario(1, n_cells=n), estimation=Estimation())
        arr = generate_arrivals(sc, T, 0)
        R = int((arr.time_s < T).sum())
        t_bare, _ = median_wall_time(lambda sc=sc, arr=arr: bare_loop(sc, arr, T), reps)
        t_sim, res = median_wall_time(
            lambda sc=sc, arr=arr: simulate(sc, make_router("flow-grad"), duration_s=T, seed=0,
                                            arrivals=arr), reps)
        print(f"| {n} | {R} | flow-grad | {sc.probe_period_s * 1e3:g} ms | {t_sim:.2f} | "
              f"{R / t_sim:,.0f} | {R / t_bare:,.0f} | {t_bare / t_sim:.3f} |")


if __name__ == "__main__":
    main()
