"""BalanceRoute tick-time benchmark and full decode simulation (issue 6).

Run:  .venv/bin/python benchmarks/bench_barrier.py [--reps 200] [--ref-reps 20] [--quick]

Per (G, pool size P) it times one scheduling tick of BR-0 (``router.schedule``, pool sort
included) on states drawn from the Azure conversation trace:

* Stage 1 only: every replica has 4 free slots and ``S_greedy = 0`` (reports µs per request);
  ``stage1x2`` has 8 free slots and reports the *marginal* cost per extra request;
* Stage 2 only: one free slot per replica and ``S_greedy = ∞``;
* full tick: 2 free slots per replica with the default ``S_greedy = G`` (Stage 1 then Stage 2).

The baseline, measured in the same run, is a plain-Python reference implementation of the same
tick (linear scans instead of binary search / heap; ``itertools`` subsets); both must return the
same assignments, which the script asserts. Then it times the full saturation replay of the
conversation trace at G = 8 for every policy.
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np

from lbtheory.barrier import BRParams, DecodeConfig, ReplicaView, br0, simulate_decode
from lbtheory.registry import BARRIER_POLICIES, POLICIES, make_router
from lbtheory.stats import percentile
from lbtheory.workloads import read_trace

CONV = Path(__file__).resolve().parents[1] / "examples" / "traces" / \
    "AzureLLMInferenceTrace_conv.csv"


def make_view(rng: np.random.Generator, trace, G: int, P: int, free: int,
              slots: int = 32) -> ReplicaView:
    """A tick state: replicas half full of trace requests, a pool of P trace requests."""
    n = len(trace)
    per = slots - free
    ids = rng.choice(n, size=G * per + P, replace=False)
    act = ids[:G * per].reshape(G, per)
    dec = rng.integers(0, 200, size=(G, per))
    loads = (trace.prompt_tokens[act] + dec).sum(axis=1)
    pool = np.sort(ids[G * per:])
    slot_ids = np.full((G, slots), -1, dtype=np.int64)
    slot_ids[:, :per] = act
    slot_prompt = np.zeros((G, slots), dtype=np.int64)
    slot_prompt[:, :per] = trace.prompt_tokens[act]
    slot_start = np.zeros((G, slots), dtype=np.int64)
    slot_start[:, :per] = 1000 - dec
    return ReplicaView(1000, loads.astype(np.int64), np.full(G, free, dtype=np.int64),
                       np.full(G, per, dtype=np.int64), pool, trace.prompt_tokens[pool],
                       np.zeros(P, dtype=np.int64), slot_ids, slot_prompt, slot_start, [], [])


def reference_tick(view: ReplicaView, s_greedy: int, r_max: int = 4):
    """Plain-Python BR-0 tick: linear scans, no bisect/heap (same decisions as the package)."""
    G = len(view.loads)
    load = view.loads.tolist()
    cap = view.free.tolist()
    ids = view.pool_ids.tolist()
    pool = [(s, -i, p) for p, (s, i) in enumerate(zip(view.pool_prompt.tolist(), ids))]
    pool.sort()
    out = []

    def F(delta, g):
        m = max(load) - load[g]
        return delta - G * max(delta - m, 0)

    def key(g):
        return (cap[g], -load[g], -g)

    s_tot = sum(cap)
    while s_tot > s_greedy and pool:
        g = max((g for g in range(G) if cap[g] > 0), key=key)
        best = max(range(len(pool)), key=lambda j: (F(pool[j][0], g), pool[j][0], pool[j][1]))
        s, _, p = pool.pop(best)
        out.append((p, g))
        load[g] += s
        cap[g] -= 1
        s_tot -= 1
    done = set()
    while pool:
        cands = [g for g in range(G) if cap[g] > 0 and g not in done]
        if not cands:
            break
        g = max(cands, key=key)
        n = min(r_max, len(pool))
        top = list(range(len(pool) - 1, len(pool) - 1 - n, -1))
        best_q, best_f = None, None
        for k in range(min(cap[g], r_max, n), 0, -1):
            for q in itertools.combinations(range(n), k):
                f = F(sum(pool[top[c]][0] for c in q), g)
                if best_f is None or f > best_f:
                    best_q, best_f = q, f
        if best_f <= 0:
            best_q = (max(range(n), key=lambda c: (F(pool[top[c]][0], g), -c)),)
        delta = 0
        for j in sorted((top[c] for c in best_q), reverse=True):
            s, _, p = pool.pop(j)
            out.append((p, g))
            delta += s
        load[g] += delta
        cap[g] -= len(best_q)
        if cap[g] == 0:
            done.add(g)
    return out


def time_ns(fn, reps: int) -> np.ndarray:
    out = np.empty(reps)
    for r in range(reps):
        t0 = time.perf_counter_ns()
        fn(r)
        out[r] = time.perf_counter_ns() - t0
    return out / 1e3  # µs


def bench_ticks(trace, reps: int, ref_reps: int, Gs, Ps) -> list[dict]:
    rows = []
    modes = {"stage1": (4, 0), "stage1x2": (8, 0), "stage2": (1, 10**9), "full": (2, None)}
    for G in Gs:
        for P in Ps:
            for mode, (free, s_greedy) in modes.items():
                rng = np.random.default_rng(G * 10_000 + P)
                views = [make_view(rng, trace, G, P, free) for _ in range(reps)]
                router = br0(BRParams(s_greedy=s_greedy, max_wait=None))
                st, rng0 = router.init(0), np.random.default_rng(0)
                sg = G if s_greedy is None else s_greedy
                for v in views[:ref_reps]:  # same decisions as the reference
                    d, _ = router.route(st, v, rng0)
                    assert list(zip(d.positions.tolist(), d.targets.tolist())) == \
                        reference_tick(v, sg)
                ours = time_ns(lambda r, f=router.route, v=views, st=st, g=rng0: f(st, v[r], g),
                               reps)
                ref = time_ns(lambda r, v=views, sg=sg: reference_tick(v[r], sg), ref_reps)
                n_assigned = G * free
                rows.append(dict(G=G, P=P, mode=mode, p50=percentile(ours, 50),
                                 p99=percentile(ours, 99), ref_p50=percentile(ref, 50),
                                 per_req=percentile(ours, 50) / n_assigned))
                r = rows[-1]
                if mode == "stage1x2":  # marginal Stage-1 cost: (t(8 free) − t(4 free)) / 4G
                    r["per_req"] = (r["p50"] - rows[-2]["p50"]) / (4 * G)
                print(f"G={G:3d} P={P:5d} {mode:6s}  P50 {r['p50']:8.1f} µs  P99 {r['p99']:8.1f} µs"
                      f"  per request {r['per_req']:6.2f} µs  reference P50 {r['ref_p50']:9.1f} µs"
                      f"  speed-up x{r['ref_p50'] / r['p50']:.1f}", flush=True)
    return rows


def bench_simulation(trace, G: int = 8) -> None:
    for name in BARRIER_POLICIES:
        extra = {"workload": trace} if "workload" in POLICIES[name].needs else {}
        router = make_router(name, "replicas", **extra)
        t0 = time.perf_counter()
        res = simulate_decode(trace, router, config=DecodeConfig(replicas=G))
        wall = time.perf_counter() - t0
        print(f"simulate conv trace G={G} {name:14s} {wall:6.2f} s  ({res.max_load.size} steps, "
              f"{1e6 * wall / res.max_load.size:6.1f} µs/step)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--ref-reps", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="G=16, P=256 only; no simulation")
    args = ap.parse_args()
    trace = read_trace(CONV)
    Gs, Ps = ((16,), (256,)) if args.quick else ((8, 16, 32), (64, 256, 1024))
    bench_ticks(trace, args.reps, args.ref_reps, Gs, Ps)
    if not args.quick:
        bench_simulation(trace)


if __name__ == "__main__":
    main()
