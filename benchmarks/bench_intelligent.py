"""Intelligent Router benchmark (issues 15, 21): the compiled instance simulator against the
Python reference, environment decisions per second, the paper-budget training run, numba compile
time and router decision latency. Prints Markdown tables with the command and the machine load.

Run:  .venv/bin/python benchmarks/bench_intelligent.py [--quick] [--reps N] [--skip-train]
      [--vllm-only] [--clock wall|cpu]

* **simulator** — the same workload, router and cluster on both engines (outcomes are identical,
  bit for bit): wall time of ``simulate`` (median of ``--reps``), the ratio, simulated requests
  and decode iterations per wall second; 4 instances at 20 req/s (2,000 requests) and 16
  instances at 80 req/s (4,000 requests), Azure code + conversation mix;
* **environment** — ``RoutingEnv.step`` per second on one 2,000-request episode (4 instances,
  20 req/s, static guidance so the guidance term is computed, random valid actions), both
  engines (the same episode, bit for bit);
* **training** — one Double-DQN training run at the paper's budget: 20 episodes × 2,000
  requests, one router (``wg-rl``), seed 0, ``DQNConfig`` defaults otherwise; wall time split
  into the environment (``RoutingEnv.step``), the Q-network forward (``greedy_action``: it also
  waits for the previous asynchronous update), the update call (``double_dqn_step``) and the
  rest (replay buffer, exploration, episode bookkeeping, JAX compilation);
* **compile** — numba's first call in a fresh process with an empty cache (what a fresh clone
  pays once) and with the cache filled;
* **decision latency** — Double-DQN forward + masked argmax vs round robin's ``route``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from lbtheory.intelligent import (
    ClusterConfig,
    DQNConfig,
    EnvConfig,
    RoutingEnv,
    _dqn,
    greedy_action,
    simulate,
    split_net,
    train_dqn,
)
from lbtheory.intelligent import _env as env_module
from lbtheory.registry import make_router
from lbtheory.stats import percentile
from lbtheory.workloads import mix_traces, read_trace

ROOT = Path(__file__).resolve().parents[1]
TRACES = [ROOT / "examples" / "traces" / f"AzureLLMInferenceTrace_{k}.csv"
          for k in ("code", "conv")]


def load() -> str:
    """The 1-minute load average (what ``uptime`` shows first)."""
    return f"{os.getloadavg()[0]:.2f}"


#: the clock of the simulator tables: wall (``time.perf_counter``) or this process's CPU time
#: (``time.process_time``; ``--clock cpu``), steadier on a machine shared with other jobs.
CLOCK = time.perf_counter


def _median_time(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = CLOCK()
        fn()
        times.append(CLOCK() - t0)
    return float(np.median(times))


def sim_speed(traces, m: int, rate: float, n: int, router: str, reps: int) -> dict:
    wl = mix_traces(traces, n_requests=n, seed=0, rate_rps=rate)
    cfg = ClusterConfig(n_instances=m)
    simulate(wl, make_router(router, "instances"), cfg, engine="compiled")  # compile
    res = {}
    for engine in ("reference", "compiled"):
        res[engine] = _median_time(
            lambda e=engine: simulate(wl, make_router(router, "instances"), cfg, engine=e), reps)
    out = simulate(wl, make_router(router, "instances"), cfg, engine="compiled")
    return {"m": m, "rate": rate, "n": n, "router": router, "ref_s": res["reference"],
            "comp_s": res["compiled"], "ratio": res["reference"] / res["compiled"],
            "req_per_s": n / res["compiled"], "iters_per_s": out.iterations.sum() / res["compiled"]}


def vllm_speed(setup: str, n: int, router: str, reps: int) -> dict:
    """The vLLM-faithful model (issue 35) on a Knowl setup's workload: reference vs compiled,
    and the legacy model's compiled time on the same workload and hardware. ``SETUP-swap``:
    the setup with swap preemption."""
    from lbtheory.intelligent._setups import SETUPS, setup_workload

    name, swap = setup.removesuffix("-swap"), setup.endswith("-swap")
    st = SETUPS[name]
    wl = setup_workload(st, 0, n)
    cfg = st.cluster(preemption="swap") if swap else st.cluster()
    old = ClusterConfig(n_instances=cfg.n_instances, kv_budget_tokens=cfg.kv_budget_tokens,
                        timing=cfg.timing, chunked_prefill=cfg.chunked_prefill,
                        max_prefill_tokens=cfg.max_prefill_tokens)
    for c in (cfg, old):
        simulate(wl, make_router(router, "instances"), c, engine="compiled")  # compile
    t = {e: _median_time(lambda e=e: simulate(wl, make_router(router, "instances"), cfg,
                                              engine=e), reps) for e in ("reference", "compiled")}
    t_old = _median_time(lambda: simulate(wl, make_router(router, "instances"), old,
                                          engine="compiled"), reps)
    return {"ref_s": t["reference"], "comp_s": t["compiled"], "old_s": t_old,
            "ratio": t["reference"] / t["compiled"]}


def env_speed(traces, n: int, reps: int) -> dict:
    cfg = ClusterConfig(n_instances=4)
    ec = EnvConfig(guidance="static")

    def episode(engine: str) -> tuple[float, int]:
        env = RoutingEnv(lambda s: mix_traces(traces, n_requests=n, seed=s, rate_rps=20.0), cfg,
                         ec, engine=engine)
        rng = np.random.default_rng(0)
        obs, info = env.reset(seed=1)
        done, steps = False, 0
        t0 = time.perf_counter()
        while not done:
            a = int(rng.choice(np.flatnonzero(info["action_mask"])))
            obs, _, done, _, info = env.step(a)
            steps += 1
        return time.perf_counter() - t0, steps

    episode("compiled")  # compile
    out = {}
    for engine in ("reference", "compiled"):
        walls, steps = zip(*(episode(engine) for _ in range(reps)))
        out[engine] = steps[0] / float(np.median(walls))
        out["steps"] = steps[0]
    return out


class _Timer:
    """Wraps a function and sums its wall time."""

    def __init__(self, fn):
        self.fn, self.total, self.calls = fn, 0.0, 0

    def __call__(self, *a, **k):
        t0 = time.perf_counter()
        try:
            return self.fn(*a, **k)
        finally:
            self.total += time.perf_counter() - t0
            self.calls += 1


def train_time(traces, episodes: int, n: int) -> dict:
    """One training run; the breakdown wraps the env step, the forward and the update call."""
    step = _Timer(env_module.RoutingEnv.step)
    fwd = _Timer(_dqn.greedy_action)
    upd_timer: list[_Timer] = []
    orig_step_factory = _dqn.double_dqn_step

    def timed_factory(lr):
        opt, fn = orig_step_factory(lr)
        upd_timer.append(_Timer(fn))
        return opt, upd_timer[-1]

    marks: list[float] = []
    env_module.RoutingEnv.step = lambda self, a: step(self, a)
    _dqn.greedy_action, _dqn.double_dqn_step = fwd, timed_factory
    try:
        t0 = time.perf_counter()
        res = train_dqn(lambda s: mix_traces(traces, n_requests=n, seed=s, rate_rps=20.0),
                        ClusterConfig(n_instances=4), DQNConfig(router="wg-rl",
                                                                episodes=episodes, seed=0),
                        progress=lambda k, st: marks.append(time.perf_counter()))
        wall = time.perf_counter() - t0
    finally:
        env_module.RoutingEnv.step = step.fn
        _dqn.greedy_action, _dqn.double_dqn_step = fwd.fn, orig_step_factory
    upd = upd_timer[0]
    return {"episodes": episodes, "n": n, "wall_s": wall, "first_episode_s": marks[0] - t0,
            "steps": sum(h["steps"] for h in res.history), "env_s": step.total,
            "fwd_s": fwd.total, "fwd_calls": fwd.calls, "upd_s": upd.total,
            "upd_calls": upd.calls, "last_e2e_s": res.history[-1]["mean_e2e_s"], "res": res}


_COMPILE_SNIPPET = """
import time
t0 = time.perf_counter()
from lbtheory.intelligent import ClusterConfig, EnvConfig, RoutingEnv, simulate
from lbtheory.registry import make_router
from lbtheory.workloads import workload_from_arrays
wl = workload_from_arrays([0.0, 0.01, 0.02], [5, 6, 7], [3, 4, 5])
t1 = time.perf_counter()
for name in ("rr", "p2c", "minmin"):
    simulate(wl, make_router(name, "instances"), ClusterConfig(n_instances=2))
t2 = time.perf_counter()
env = RoutingEnv(lambda s: wl, ClusterConfig(n_instances=2), EnvConfig(guidance="static"))
env.reset(seed=0)
env.step(0)
t3 = time.perf_counter()
print(t2 - t1, t3 - t2)
"""


def compile_time() -> dict:
    """First simulate / first env step in fresh processes: empty numba cache, then filled."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        out = []
        for _ in range(2):
            r = subprocess.run([sys.executable, "-c", _COMPILE_SNIPPET], env=env, check=True,
                               capture_output=True, text=True)
            out.append([float(x) for x in r.stdout.split()])
    return {"cold_sim_s": out[0][0], "cold_env_s": out[0][1], "warm_sim_s": out[1][0],
            "warm_env_s": out[1][1]}


def decision_latency(traces, res, n_dec: int) -> dict:
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
    return {"dqn_p50_us": percentile(t_dqn, 50) * us, "dqn_p99_us": percentile(t_dqn, 99) * us,
            "rr_p50_us": percentile(t_rr, 50) * us, "rr_p99_us": percentile(t_rr, 99) * us}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs (CI smoke)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions per timing (median)")
    ap.add_argument("--skip-train", action="store_true", help="skip the training run")
    ap.add_argument("--vllm-only", action="store_true",
                    help="only the vLLM-faithful instance model's table (issue 35)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time the simulator tables by wall clock or by this process's CPU "
                         "time (steadier when other jobs share the machine)")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.vllm_only:
        reps = 1 if args.quick else args.reps
        print("$ .venv/bin/python benchmarks/bench_intelligent.py " + " ".join(sys.argv[1:]))
        print(f"\nload (1-min average) at start: {load()}; {os.cpu_count()} CPUs\n")
        print("| setup | requests | router | reference (s) | compiled (s) | ratio | legacy model "
              "compiled (s) |\n|---|---|---|---|---|---|---|", flush=True)
        for setup, n in (("k4", 2000), ("k4-swap", 2000), ("k5-chunked", 2000),
                         ("k5-chunked-swap", 2000)):
            for router in ("rr", "heuristic"):
                r = vllm_speed(setup, n, router, reps)
                print(f"| {setup} | {n} | {router} | {r['ref_s']:.3f} | {r['comp_s']:.4f} | "
                      f"{r['ratio']:.0f}× | {r['old_s']:.4f} |", flush=True)
        return
    reps = 1 if args.quick else args.reps
    traces = [read_trace(p) for p in TRACES]
    cmd = "$ .venv/bin/python benchmarks/bench_intelligent.py " + " ".join(sys.argv[1:])
    print(f"{cmd}\n\nload (1-min average) at start: {load()}; {os.cpu_count()} CPUs\n", flush=True)

    c = compile_time()
    print("| numba first call (fresh process) | empty cache (s) | cache filled (s) |\n|---|---|---|"
          f"\n| 3 routers' simulate | {c['cold_sim_s']:.1f} | {c['warm_sim_s']:.2f} |"
          f"\n| first env step | {c['cold_env_s']:.1f} | {c['warm_env_s']:.2f} |\n", flush=True)

    k = 4 if args.quick else 1
    print("| instances | λ (req/s) | requests | router | reference (s) | compiled (s) | ratio "
          "| requests / s | iterations / s |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    for m, rate, n in ((4, 20.0, 2000 // k), (16, 80.0, 4000 // k)):
        for router in ("rr", "minmin", "heuristic"):
            r = sim_speed(traces, m, rate, n, router, reps)
            print(f"| {m} | {rate:g} | {n} | {router} | {r['ref_s']:.3f} | {r['comp_s']:.4f} | "
                  f"{r['ratio']:.0f}× | {r['req_per_s']:,.0f} | {r['iters_per_s']:,.0f} |",
                  flush=True)

    e = env_speed(traces, 2000 // k, max(1, reps // 2))
    print(f"\n| environment (4 instances, 20 req/s, {2000 // k} requests, {e['steps']} steps) "
          f"| decisions / s |\n|---|---|\n| reference | {e['reference']:,.0f} |"
          f"\n| compiled | {e['compiled']:,.0f} ({e['compiled'] / e['reference']:.0f}×) |\n",
          flush=True)

    if args.skip_train:
        print(f"load at end: {load()}")
        return
    episodes, n = (2, 300) if args.quick else (20, 2000)
    t = train_time(traces, episodes, n)
    rest = t["wall_s"] - t["env_s"] - t["fwd_s"] - t["upd_s"]
    print(f"| training wg-rl, {episodes} × {n} requests, seed 0 ({t['steps']:,} steps) | s | "
          f"share |\n|---|---|---|\n| **wall** | **{t['wall_s']:.1f}** | 100 % |")
    for label, v in ((f"environment (RoutingEnv.step × {t['steps']:,})", t["env_s"]),
                     (f"Q forward (greedy_action × {t['fwd_calls']:,})", t["fwd_s"]),
                     (f"update call (double_dqn_step × {t['upd_calls']:,})", t["upd_s"]),
                     ("rest (replay, exploration, bookkeeping, JAX compile)", rest)):
        print(f"| {label} | {v:.1f} | {100 * v / t['wall_s']:.0f} % |")
    print(f"\nfirst episode (JAX compile included): {t['first_episode_s']:.1f} s; last episode "
          f"mean E2E {t['last_e2e_s']:.1f} s\n", flush=True)
    d = decision_latency(traces, t["res"], 500 if args.quick else 2000)
    print(f"decision latency: Double-DQN P50 {d['dqn_p50_us']:.0f} µs, P99 {d['dqn_p99_us']:.0f} "
          f"µs; round robin P50 {d['rr_p50_us']:.1f} µs, P99 {d['rr_p99_us']:.1f} µs "
          f"(budget 1000 µs)\n\nload at end: {load()}")


if __name__ == "__main__":
    main()
