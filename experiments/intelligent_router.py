"""Intelligent Router (arXiv 2408.13510, THEORY §10): routers vs round robin; batching vs routing.

Run:  .venv/bin/lbtheory sweep intelligent-router [--quick]
      (or .venv/bin/python experiments/intelligent_router.py [--quick])

Sweep cells (cached, resumable; see :mod:`lbtheory.sweep`): the batching-vs-routing study, each
heuristic router on each evaluation seed, and each RL router (training + evaluation on every seed;
its checkpoint files travel in the cell's result and are written by ``collect``). Writes
``experiments/results/intelligent-router/`` (atomically):

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

import base64
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from lbtheory.io import run_manifest, write_bytes_atomic, write_json_atomic, write_text_atomic
from lbtheory.stats import mean_ci
from lbtheory.sweep import Experiment, script_main

ROOT = Path(__file__).resolve().parents[1]
TRACES = [ROOT / "examples" / "traces" / f"AzureLLMInferenceTrace_{k}.csv"
          for k in ("code", "conv")]
HEURISTICS = ["rr", "jsq", "minmin", "maxcap", "heuristic"]
RL = [("rl", "hurl"), ("wa-rl", "hurl"), ("wg-rl", "hurl"), ("wg-rl", "literal")]
PAPER = {"jsq": -0.46, "minmin": -1.50, "maxcap": -2.60, "rl": -4.35, "wa-rl": -7.79,
         "wg-rl-hurl": -11.43, "wg-rl-literal": -11.43}
#: per profile: RL training episodes × requests, evaluation seeds × requests, BvR requests
BUDGET = {"quick": {"episodes": 3, "train_requests": 300, "eval_seeds": 2, "eval_requests": 300,
                    "bvr_requests": 600},
          "full": {"episodes": 20, "train_requests": 1000, "eval_seeds": 5,
                   "eval_requests": 1000, "bvr_requests": 3000}}
RATE_RPS = 20.0


def _traces() -> list:
    from lbtheory.workloads import read_trace

    return [read_trace(p) for p in TRACES]


def _label(router: str, reading: str) -> str:
    return router if router != "wg-rl" else f"wg-rl-{reading}"


def grid(profile: str) -> list[dict]:
    """Cells: ``bvr``; ``heuristic`` per (router, evaluation seed); ``rl`` per RL router."""
    b = BUDGET[profile]
    seeds = [1000 + s for s in range(b["eval_seeds"])]
    cells = [{"part": "bvr", "requests": b["bvr_requests"], "seed": 7, "rate_rps": RATE_RPS}]
    cells += [{"part": "heuristic", "router": name, "eval_seed": s,
               "eval_requests": b["eval_requests"], "rate_rps": RATE_RPS, "instances": 4}
              for name in HEURISTICS for s in seeds]
    cells += [{"part": "rl", "router": router, "reading": reading, "seed": 0,
               "episodes": b["episodes"], "train_requests": b["train_requests"],
               "eval_seeds": seeds, "eval_requests": b["eval_requests"], "rate_rps": RATE_RPS,
               "instances": 4}
              for router, reading in RL]
    return cells


def cell(config: dict) -> dict:
    """One cell of :func:`grid`: a JSON summary (RL cells add history and checkpoint files)."""
    part = config["part"]
    if part == "bvr":
        return batching_vs_routing(config)
    if part == "heuristic":
        return heuristic_run(config)
    return rl_run(config)


def _eval_workload(traces, config: dict, seed: int):
    from lbtheory.workloads import mix_traces

    return mix_traces(traces, n_requests=config["eval_requests"], seed=seed,
                      rate_rps=config["rate_rps"])


def heuristic_run(config: dict) -> dict:
    """Summary of one heuristic router on one evaluation seed (4 instances)."""
    from lbtheory.intelligent import ClusterConfig, simulate
    from lbtheory.registry import make_router

    wl = _eval_workload(_traces(), config, config["eval_seed"])
    return simulate(wl, make_router(config["router"], "instances"),
                    ClusterConfig(n_instances=config["instances"])).summary()


def rl_run(config: dict) -> dict:
    """Train one Double-DQN router, evaluate it greedily on every evaluation seed; the
    checkpoint files (``save_checkpoint``'s format) are returned, base64-encoded."""
    from lbtheory.intelligent import (
        ClusterConfig,
        DQNConfig,
        RoutingEnv,
        greedy_rollout,
        save_checkpoint,
        train_dqn,
    )
    from lbtheory.workloads import mix_traces

    traces = _traces()
    cfg = ClusterConfig(n_instances=config["instances"])
    label = _label(config["router"], config["reading"])

    def train_wl(seed: int):
        return mix_traces(traces, n_requests=config["train_requests"], seed=seed,
                          rate_rps=config["rate_rps"])

    dq = DQNConfig(router=config["router"], reading=config["reading"],
                   episodes=config["episodes"], seed=config["seed"])
    res = train_dqn(train_wl, cfg, dq)
    evals = {}
    for s in config["eval_seeds"]:
        wl = _eval_workload(traces, config, s)
        env = RoutingEnv(lambda _s, wl=wl: wl, cfg, res.env_config)
        evals[str(s)] = greedy_rollout(res.net, env, s, label).summary()
    with tempfile.TemporaryDirectory() as tmp:  # the one checkpoint format, read back
        save_checkpoint(res, tmp)
        files = {f.name: base64.b64encode(f.read_bytes()).decode("ascii")
                 for f in sorted(Path(tmp).iterdir())}
    return {"label": label, "history": res.history, "eval": evals, "checkpoint": files}


def batching_vs_routing(config: dict) -> dict:
    """2 instances, ordered arrivals (task blocks: code, then conversation), router × batcher."""
    from lbtheory.intelligent import ClusterConfig, SizePartitionRouter, simulate
    from lbtheory.registry import make_router
    from lbtheory.workloads import mix_traces, workload_from_arrays

    wl0 = mix_traces(_traces(), n_requests=config["requests"], seed=config["seed"],
                     rate_rps=config["rate_rps"])
    order = np.argsort(wl0.task, kind="stable")
    wl = workload_from_arrays(wl0.arrival_s, wl0.prompt_tokens[order], wl0.output_tokens[order],
                              task=wl0.task[order], task_names=wl0.task_names)
    threshold = int(np.median(wl.prompt_tokens + wl.output_tokens))
    routers = {"small-large": lambda: SizePartitionRouter(threshold),
               "rr": lambda: make_router("rr", "instances"),
               "decode-balancer": lambda: make_router("jsq-tokens", "instances")}
    out: dict = {"threshold_tokens": threshold, "requests": len(wl), "results": {}}
    for rname, make in routers.items():
        for batcher in ("fcfs", "spf"):
            s = simulate(wl, make(), ClusterConfig(n_instances=2, admission=batcher)).summary()
            out["results"].setdefault(rname, {})[batcher] = s
    return out


def _ci(x: np.ndarray) -> tuple[float, float]:
    """Mean and half-width of the 95% t-interval (nan half-width for one sample)."""
    m, _, hi = mean_ci(x)
    return m, hi - m


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


def collect(rows: list, out_dir: Path, profile: str) -> None:
    """Write latency.json, learning_curves.json, batching_vs_routing.json, summary.md and the
    RL checkpoints, from the cells (same files and keys as before the runner)."""
    b = BUDGET[profile]
    args = SimpleNamespace(quick=profile == "quick", **b)
    conf = {"quick": profile == "quick", **b, "traces": [p.name for p in TRACES],
            "instances": 4, "rate_rps": RATE_RPS, "profile": profile}
    bvr = next(r for c, r in rows if c["part"] == "bvr")
    write_json_atomic(out_dir / "batching_vs_routing.json",
                      {"config": conf, "manifest": run_manifest(conf, seed=7), **bvr})
    eval_seeds = [1000 + s for s in range(b["eval_seeds"])]
    per: dict[str, dict[int, dict]] = {}
    for c, r in rows:
        if c["part"] == "heuristic":
            per.setdefault(c["router"], {})[c["eval_seed"]] = r
    curves = {}
    for c, r in rows:
        if c["part"] == "rl":
            label = r["label"]
            per[label] = {int(s): v for s, v in r["eval"].items()}
            curves[label] = r["history"]
            for fname, data in r["checkpoint"].items():
                write_bytes_atomic(out_dir / "checkpoints" / label / fname,
                                   base64.b64decode(data))
    table = _table(per, eval_seeds)
    write_json_atomic(out_dir / "latency.json", {"config": conf,
                                                 "manifest": run_manifest(conf, seed=0),
                                                 "routers": table})
    write_json_atomic(out_dir / "learning_curves.json", {"config": conf, "curves": curves})
    write_text_atomic(out_dir / "summary.md", _markdown(table, bvr, args))


EXPERIMENT = Experiment(name="intelligent-router", description="Intelligent Router (arXiv "
                        "2408.13510): heuristic and Double-DQN routers vs round robin; batching "
                        "vs routing", grid=grid, cell=cell, collect=collect)

if __name__ == "__main__":
    sys.exit(script_main(EXPERIMENT))
