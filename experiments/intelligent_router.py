"""Intelligent Router (arXiv 2408.13510, THEORY §10): routers vs round robin; batching vs routing.

Run:  .venv/bin/python experiments/intelligent_router.py [--quick]

Writes ``experiments/results/intelligent_router/`` (atomically):

* ``latency.json`` — 4 instances, Azure code + conversation mix, Poisson 20 req/s (saturation), the
  true output lengths (oracle predictor): per router and evaluation seed the summary, and the paired
  change of mean E2E latency vs round robin (%, mean and 95% t-interval over seeds);
* ``learning_curves.json`` — per-episode return and mean E2E of each Double-DQN router;
* ``batching_vs_routing.json`` — 2 instances, "ordered arrivals" [R]: all code requests first,
  then all conversation requests (random order within each block), Poisson 20 req/s: mean E2E per
  (router, instance batcher FCFS / shortest-prompt-first);
* ``summary.md`` — both tables, generated from the JSON;
* ``checkpoints/<router>/`` — the trained parameters with their config.

CPU budget (2 shared cores): the paper trains on 20 episodes × 2,000 requests and evaluates 20
episodes; the default here trains 20 episodes × 1,000 requests per RL router and evaluates 5 new
seeds × 1,000 requests — the same episode length as training: a first run evaluated on 2,000-request
episodes, whose queue states lie outside the training range, and Baseline RL was 3.5× worse than
round robin there (``--quick``: 3 × 300 and 2 × 300). Nothing is tuned towards the paper.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy import stats as sst

from lbtheory.intelligent import (
    ClusterConfig,
    DQNConfig,
    RoutingEnv,
    decode_balancer,
    greedy_rollout,
    make_heuristic,
    mix_traces,
    save_checkpoint,
    simulate,
    size_partition,
    train_dqn,
    workload_from_arrays,
)
from lbtheory.io import run_manifest, write_json_atomic, write_text_atomic
from lbtheory.workloads import read_trace

ROOT = Path(__file__).resolve().parents[1]
TRACES = [ROOT / "examples" / "traces" / f"AzureLLMInferenceTrace_{k}.csv"
          for k in ("code", "conv")]
OUT = ROOT / "experiments" / "results" / "intelligent_router"
HEURISTICS = ["rr", "jsq", "minmin", "maxcap", "heuristic"]
RL = [("rl", "hurl"), ("wa-rl", "hurl"), ("wg-rl", "hurl"), ("wg-rl", "literal")]
PAPER = {"jsq": -0.46, "minmin": -1.50, "maxcap": -2.60, "rl": -4.35, "wa-rl": -7.79,
         "wg-rl-hurl": -11.43, "wg-rl-literal": -11.43}


def _ci(x: np.ndarray) -> tuple[float, float]:
    """Mean and half-width of the 95% t-interval (nan half-width for one sample)."""
    x = np.asarray(x, float)
    if x.size < 2:
        return float(x.mean()), float("nan")
    return float(x.mean()), float(sst.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))


def _table(per: dict, eval_seeds: list[int]) -> dict:
    rr = np.array([per["rr"][s]["latency"]["mean"] for s in eval_seeds])
    table = {}
    for name, runs in per.items():
        mean_e2e = np.array([runs[s]["latency"]["mean"] for s in eval_seeds])
        delta = 100.0 * (mean_e2e / rr - 1.0)
        m, h = _ci(mean_e2e)
        dm, dh = _ci(delta)
        table[name] = {"mean_e2e_s": m, "mean_e2e_ci95_s": h, "delta_vs_rr_pct": dm,
                       "delta_ci95_pct": dh, "paper_delta_pct": PAPER.get(name),
                       "completed": [runs[s]["completed"] for s in eval_seeds],
                       "router_wait_mean_s": float(np.mean([runs[s]["router_wait"]["mean"]
                                                            for s in eval_seeds])),
                       "ttft_mean_s": float(np.mean([runs[s]["ttft"]["mean"]
                                                     for s in eval_seeds])),
                       "preemptions": float(np.mean([runs[s]["preemptions"]
                                                     for s in eval_seeds])),
                       "runs": {str(s): runs[s] for s in eval_seeds}}
    return table


def latency_table(traces, args, checkpoint=None) -> tuple[dict, dict]:
    cfg = ClusterConfig(n_instances=4)

    def train_wl(seed: int):
        return mix_traces(traces, n_requests=args.train_requests, seed=seed, rate_rps=20.0)

    eval_seeds = [1000 + s for s in range(args.eval_seeds)]
    workloads = {s: mix_traces(traces, n_requests=args.eval_requests, seed=s, rate_rps=20.0)
                 for s in eval_seeds}
    per: dict[str, dict[int, dict]] = {}
    for name in HEURISTICS:
        per[name] = {s: simulate(wl, make_heuristic(name), cfg).summary()
                     for s, wl in workloads.items()}
        print(f"{name}: " + ", ".join(f"{v['latency']['mean']:.2f}" for v in per[name].values()),
              flush=True)
    curves = {}
    for router, reading in RL:
        label = router if router != "wg-rl" else f"wg-rl-{reading}"
        t0 = time.time()
        dq = DQNConfig(router=router, reading=reading, episodes=args.episodes, seed=0)
        res = train_dqn(train_wl, cfg, dq)
        save_checkpoint(res, OUT / "checkpoints" / label)
        curves[label] = res.history
        per[label] = {}
        for s, wl in workloads.items():
            env = RoutingEnv(lambda _s, wl=wl: wl, cfg, res.env_config)
            per[label][s] = greedy_rollout(res.net, env, s, label).summary()
        print(f"{label} ({time.time() - t0:.0f} s): "
              + ", ".join(f"{v['latency']['mean']:.2f}" for v in per[label].values()), flush=True)
        if checkpoint is not None:  # partial results after every RL router
            checkpoint(_table(per, eval_seeds), curves)
    return _table(per, eval_seeds), curves


def batching_vs_routing(traces, args) -> dict:
    """2 instances, ordered arrivals (task blocks: code, then conversation), router × batcher."""
    wl0 = mix_traces(traces, n_requests=args.bvr_requests, seed=7, rate_rps=20.0)
    order = np.argsort(wl0.task, kind="stable")
    wl = workload_from_arrays(wl0.arrival_s, wl0.prompt_tokens[order], wl0.output_tokens[order],
                              wl0.task[order], task_names=wl0.task_names)
    threshold = int(np.median(wl.prompt_tokens + wl.output_tokens))
    routers = {"small-large": lambda: size_partition(threshold), "rr": lambda: make_heuristic("rr"),
               "decode-balancer": decode_balancer}
    out: dict = {"threshold_tokens": threshold, "requests": len(wl), "results": {}}
    for rname, make in routers.items():
        for batcher in ("fcfs", "spf"):
            cfg = ClusterConfig(n_instances=2, admission=batcher)
            s = simulate(wl, make(), cfg).summary()
            out["results"].setdefault(rname, {})[batcher] = s
            print(f"bvr {rname}/{batcher}: {s['latency']['mean']:.2f}", flush=True)
    return out


def _markdown(table: dict, bvr: dict, args) -> str:
    lines = ["# Intelligent Router — measured (lbtheory) vs published (arXiv 2408.13510)", "",
             f"4 instances, Azure 2023 code + conversation mix, Poisson 20 req/s, oracle output "
             f"lengths; RL trained {args.episodes} episodes × {args.train_requests} requests; "
             f"evaluated on {args.eval_seeds} seeds × {args.eval_requests} requests (paired with "
             f"round robin). 95% t-intervals over seeds.", "",
             "| router | mean E2E (s) | Δ vs RR (%) | paper Δ (%) | router wait (s) | "
             "TTFT (s) | preemptions | completed |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in table.items():
        paper = "—" if r["paper_delta_pct"] is None else f"{r['paper_delta_pct']:+.2f}"
        lines.append(f"| {name} | {r['mean_e2e_s']:.2f} ± {r['mean_e2e_ci95_s']:.2f} | "
                     f"{r['delta_vs_rr_pct']:+.2f} ± {r['delta_ci95_pct']:.2f} | {paper} | "
                     f"{r['router_wait_mean_s']:.3f} | {r['ttft_mean_s']:.2f} | "
                     f"{r['preemptions']:.0f} | {min(r['completed'])}/{args.eval_requests} |")
    lines += ["", f"## Batching vs routing (2 instances, {bvr['requests']} requests, code block "
              f"then conversation block; small/large threshold {bvr['threshold_tokens']} "
              f"tokens)", "",
              "| router | FCFS batcher E2E (s) | shortest-prompt-first E2E (s) |", "|---|---|---|"]
    for rname, r in bvr["results"].items():
        lines.append(f"| {rname} | {r['fcfs']['latency']['mean']:.2f} | "
                     f"{r['spf']['latency']['mean']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny budget (smoke test)")
    args = ap.parse_args()
    q = args.quick
    args.episodes, args.train_requests = (3, 300) if q else (20, 1000)
    args.eval_seeds, args.eval_requests = (2, 300) if q else (5, 1000)
    args.bvr_requests = 600 if q else 3000
    traces = [read_trace(p) for p in TRACES]
    conf = {k: v for k, v in vars(args).items()} | {"traces": [p.name for p in TRACES],
                                                    "instances": 4, "rate_rps": 20.0}
    bvr = batching_vs_routing(traces, args)
    write_json_atomic(OUT / "batching_vs_routing.json",
                      {"config": conf, "manifest": run_manifest(conf, seed=7), **bvr})

    def write(table: dict, curves: dict) -> None:
        write_json_atomic(OUT / "latency.json", {"config": conf,
                                                 "manifest": run_manifest(conf, seed=0),
                                                 "routers": table})
        write_json_atomic(OUT / "learning_curves.json", {"config": conf, "curves": curves})
        write_text_atomic(OUT / "summary.md", _markdown(table, bvr, args))

    table, curves = latency_table(traces, args, checkpoint=write)
    write(table, curves)
    print((OUT / "summary.md").read_text())


if __name__ == "__main__":
    main()
