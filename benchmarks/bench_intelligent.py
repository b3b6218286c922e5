"""Intelligent Router benchmark (issue 15): simulator speed, training env steps, decision latency.

Run:  .venv/bin/python benchmarks/bench_intelligent.py [--quick]

* simulated decode iterations per wall second (round robin; 4 instances at 20 req/s and 16
  instances at 80 req/s, Azure code + conversation mix, 2,000 / 4,000 requests; median of 3);
* environment steps per second during Double-DQN training (wg-rl, 3 episodes × 300 requests,
  updates included, first episode's JIT compile excluded);
* router decision latency: Double-DQN forward + masked argmax (P50/P99 over 2,000 decisions on
  states of a real episode) vs round robin's ``route`` on the same states; building the state
  (observation / view) is excluded for both. The paper's budget is 1 ms per decision.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from lbtheory.intelligent import (
    ClusterConfig,
    ClusterSim,
    DQNConfig,
    RoutingEnv,
    greedy_action,
    run_router,
    split_net,
    train_dqn,
)
from lbtheory.registry import make_router
from lbtheory.stats import median_wall_time, percentile
from lbtheory.workloads import mix_traces, read_trace

TRACES = [Path(__file__).resolve().parents[1] / "examples" / "traces" /
          f"AzureLLMInferenceTrace_{k}.csv" for k in ("code", "conv")]


def sim_speed(traces, m: int, rate: float, n: int, reps: int) -> dict[str, float]:
    wl = mix_traces(traces, n_requests=n, seed=0, rate_rps=rate)
    cfg = ClusterConfig(n_instances=m)

    def once():
        sim = ClusterSim(wl, cfg)
        run_router(sim, make_router("rr", "instances"))
        return sum(i.n_iter for i in sim.inst)

    wall, iters = median_wall_time(once, reps)
    return {"instances": m, "requests": n, "iterations": iters, "wall_s": wall,
            "iterations_per_s": iters / wall}


def train_speed(traces, episodes: int, n: int) -> tuple[dict[str, float], object]:
    cfg = ClusterConfig(n_instances=4)
    marks: list[tuple[float, int]] = []

    def progress(k, stats):
        marks.append((time.perf_counter(), stats["steps"]))

    t0 = time.perf_counter()
    res = train_dqn(lambda s: mix_traces(traces, n_requests=n, seed=s, rate_rps=20.0), cfg,
                    DQNConfig(router="wg-rl", episodes=episodes, seed=0, learning_starts=200),
                    progress=progress)
    steps = sum(s for _, s in marks[1:])
    wall = marks[-1][0] - marks[0][0] if len(marks) > 1 else marks[0][0] - t0
    return {"episodes": episodes, "steps_timed": steps, "wall_s": wall,
            "steps_per_s": steps / wall}, res


def decision_latency(traces, res, n_dec: int) -> dict[str, float]:
    cfg = ClusterConfig(n_instances=4)
    env = RoutingEnv(lambda s: mix_traces(traces, n_requests=1000, seed=s, rate_rps=20.0), cfg,
                     res.env_config)
    obs, info = env.reset(seed=5)
    rr = make_router("rr", "instances")
    state = rr.init(0)
    rng = np.random.default_rng(0)
    t_dqn, t_rr = [], []
    split = split_net(res.net)
    greedy_action(split, obs, info["action_mask"])  # compile
    while len(t_dqn) < n_dec:
        t0 = time.perf_counter()
        greedy_action(split, obs, info["action_mask"])
        t1 = time.perf_counter()
        view = env.sim.view()
        t2 = time.perf_counter()
        decision, state = rr.route(state, view, rng)
        t3 = time.perf_counter()
        t_dqn.append(t1 - t0)
        t_rr.append(t3 - t2)
        obs, _, done, trunc, info = env.step(decision)
        if done or trunc:
            obs, info = env.reset(seed=len(t_dqn))
    us = 1e6
    return {"decisions": n_dec,
            "dqn_p50_us": percentile(t_dqn, 50) * us, "dqn_p99_us": percentile(t_dqn, 99) * us,
            "rr_p50_us": percentile(t_rr, 50) * us, "rr_p99_us": percentile(t_rr, 99) * us}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs")
    args = ap.parse_args()
    traces = [read_trace(p) for p in TRACES]
    k = 4 if args.quick else 1
    for m, rate, n in ((4, 20.0, 2000 // k), (16, 80.0, 4000 // k)):
        r = sim_speed(traces, m, rate, n, 1 if args.quick else 3)
        print(f"simulator m = {m:>2}: {r['iterations']} decode iterations in {r['wall_s']:.2f} s "
              f"-> {r['iterations_per_s']:.0f} iterations/s", flush=True)
    t, res = train_speed(traces, 2 if args.quick else 3, 300)
    print(f"training: {t['steps_timed']} env steps in {t['wall_s']:.2f} s -> "
          f"{t['steps_per_s']:.0f} steps/s (updates included)", flush=True)
    d = decision_latency(traces, res, 500 if args.quick else 2000)
    print(f"decision latency: Double-DQN P50 {d['dqn_p50_us']:.0f} µs, P99 {d['dqn_p99_us']:.0f} µs"
          f"; round robin P50 {d['rr_p50_us']:.1f} µs, P99 {d['rr_p99_us']:.1f} µs "
          f"(budget 1000 µs)")


if __name__ == "__main__":
    main()
