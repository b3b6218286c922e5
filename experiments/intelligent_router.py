"""Intelligent Router (arXiv 2408.13510, THEORY §10): the seed's tables re-measured with intervals.

Run:  .venv/bin/lbtheory sweep intelligent-router --scheduler serial   (every table; resumable)
      .venv/bin/lbtheory sweep intelligent-router-k4 --scheduler serial (one table)
      (``--quick``: a smoke run of each table, written under out/results)

Each table is one experiment of the group ``intelligent-router`` (cells cached, resumable):

==============  ===========================================================================
``k4``          Knowl 4: 4 × Llama-2-7B / V100 (the default timing model), the five-task mix
                at λ = 20 req/s, 20 training episodes × 2,000 requests
``k5``          Knowl 5: 4 × Llama-3.1-8B / A100 (:data:`~lbtheory.intelligent.A100_LLAMA31_8B`,
                400k-token KV), the five-task mix at λ = 80 req/s, 20 × 2,000
``k5-chunked``  the same with chunked prefill (1,024-token iteration budget)
``k7``          Knowl 7: the production-like mix (mean prompt 5,527, mean output 113 tokens)
                on 4 A100 instances at λ = 80 req/s with chunked prefill (1,024), 20 × 4,000
``k8``          Knowl 8: 8 V100 instances, the five-task mix at λ = 40 req/s, 20 × 4,000
``k4-25``       not in the seed: Knowl 4 at λ = 25 req/s, the rate where the load sweep
                (``load``, run first) found the heuristics' largest gain over round robin
                (−3.0 to −4.3 %): does a learnt router find headroom where there is some?
``bvr``         Knowl 6: 3 batchers × 3 routers × 4 arrival orders of four request classes on
                2 V100 instances, 3,000 requests, workload seeds 0-4
                (:mod:`lbtheory.intelligent._knowl6`; table and rules: ``_knowl6_table``)
``load``        where routing matters: the heuristics on Knowl 4's and Knowl 5's clusters
                at 0.5–3× the tables' rates (the seed's round-robin latencies, 168–1,005 s,
                describe overloaded clusters; the tables' rates give 3.8–8 s here)
==============  ===========================================================================

**Protocol** (fixed before any run; nothing tuned toward a published number). Requests come from
:mod:`lbtheory.workloads`' seeded task mixes. Every router sees *predicted* output lengths, as
the seed's do: the histogram classifier (:func:`~lbtheory.intelligent.fit_length_predictor`)
fitted on 20,000 requests of the table's mix (seed 10,000; completion-time buckets at the
cluster's decode speed, :func:`~lbtheory.intelligent.bucket_spec_for`); the RL state uses the
same buckets and prompt buckets at the fit sample's quartiles. Heuristics: round robin, random,
JSQ, the decode balancer (JSQ on tokens), Min-Min, MaxCap, the mixing heuristic (split reading)
and a small/large partition (threshold: the fit sample's median prompt + output). RL: Baseline
RL, WA-RL, WG-RL with both readings of λ_k; each trained with 5 training seeds (``seed = 100
s``: network, exploration and episodes ``100 s + k``), ``DQNConfig`` defaults (monotone symmetric
network, derived horizon, scales, ε schedule) and ``EnvConfig`` defaults, which since experiment
version 5 include the bounded-loads cap (a full instance holding ⌈1.25 (n + 1) / m⌉ or more of
the n requests on the instances is closed; [R], fixed before the runs: the collapse on Knowl 7,
issue 22). Since version 6 the router evaluated is the network whose greedy policy served two
held-out validation episodes best (``DQNConfig.selection`` "validation", workload seeds
``100 s + 20`` and ``100 s + 21``, checked after every training episode; [R], fixed before the
runs: a Knowl 5 seed drifted to a short-output lane while ε sat at its floor). Evaluation: the
same 10 held-out episodes for every router (workload seeds 20,000–20,009, never seen in
development or training), greedy policies. Δ = 100 (E2E / E2E of round robin on the same
episode − 1) %.

**Verdict rule** (fixed before any run). For a router with a published Δ_seed (negative =
better than round robin) and measured Δ with its 95 % Student-t interval — over the 5 training
seeds for an RL router (each seed's Δ averaged over the 10 episodes), over the 10 episodes for
a heuristic:

* **reproduced** — the interval contains Δ_seed or lies entirely below it;
* **partly** — the interval lies entirely below 0 but above Δ_seed (better than round robin,
  by less than published);
* **not reproduced** — the interval contains 0 or lies above it;
* an RL router whose greedy policy sent more than 1.5× its fair share of an episode's requests
  to one instance (any seed, any episode) is marked **collapsed** (and not reproduced).

The seed's Knowl 5 "with chunked prefill" percentages are relative to round robin *without*
chunking; the table shows them recomputed against the chunked round robin (from its E2E
column), which is what the measured Δ compares with.

Writes ``experiments/results/intelligent-router-<table>/summary.json`` per table and
``experiments/results/intelligent_router.md`` (all tables present; committed).
"""

from __future__ import annotations

import base64
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _intelligent_tables import PAPER, rl_label, summarise_load, summarise_table, write_results

from lbtheory.io import run_manifest, write_json_atomic
from lbtheory.sweep import Experiment, script_main

HEURISTICS = ["rr", "random", "jsq", "jsq-tokens", "minmin", "maxcap", "heuristic",
              "small-large"]
RL = [("rl", "hurl"), ("wa-rl", "hurl"), ("wg-rl", "hurl"), ("wg-rl", "literal")]
#: table -> cluster and workload (module docstring)
TABLES = {
    "k4": {"instances": 4, "hardware": "v100", "mix": "five-task", "rate_rps": 20.0,
           "requests": 2000, "chunk": 0},
    "k5": {"instances": 4, "hardware": "a100", "mix": "five-task", "rate_rps": 80.0,
           "requests": 2000, "chunk": 0},
    "k5-chunked": {"instances": 4, "hardware": "a100", "mix": "five-task", "rate_rps": 80.0,
                   "requests": 2000, "chunk": 1024},
    "k7": {"instances": 4, "hardware": "a100", "mix": "production-like", "rate_rps": 80.0,
           "requests": 4000, "chunk": 1024},
    "k8": {"instances": 8, "hardware": "v100", "mix": "five-task", "rate_rps": 40.0,
           "requests": 4000, "chunk": 0},
    "k4-25": {"instances": 4, "hardware": "v100", "mix": "five-task", "rate_rps": 25.0,
              "requests": 2000, "chunk": 0},
}
#: per profile: training episodes, training seeds, evaluation episodes, fit sample, requests cap
BUDGET = {"quick": {"episodes": 2, "train_seeds": 1, "eval_episodes": 2, "fit_requests": 2000,
                    "max_requests": 200},
          "full": {"episodes": 20, "train_seeds": 5, "eval_episodes": 10,
                   "fit_requests": 20000, "max_requests": None}}
FIT_SEED, EVAL_SEED0 = 10_000, 20_000
#: 4: the monotone Q-network (``DQNConfig.network`` default "monotone"); 5: with the
#: bounded-loads cap (``EnvConfig.balance_factor`` 1.25; run on Knowl 4, 7, 8 and 4 at 25 req/s,
#: where it can bind — on Knowl 5 no instance is ever full, so it never binds there); 6: every
#: table, with the network chosen on held-out validation episodes (``DQNConfig.selection``
#: "validation", two episodes with workload seeds ``100 s + 20``, ``100 s + 21``: fixed before
#: the runs) instead of the network after the last episode (issue 22: a Knowl 5 seed drifted
#: to a short-output lane while ε sat at its floor).
VERSION = "6"


def _grid(table: str):
    def grid(profile: str) -> list[dict]:
        b = BUDGET[profile]
        t = dict(TABLES[table])
        if b["max_requests"]:
            t["requests"] = min(t["requests"], b["max_requests"])
        common = {"table": table, **t, "fit_requests": b["fit_requests"],
                  "eval_seeds": [EVAL_SEED0 + k for k in range(b["eval_episodes"])]}
        cells = [{"part": "heuristic", "router": r, **common} for r in HEURISTICS]
        cells += [{"part": "rl", "router": r, "reading": rd, "train_seed": s,
                   "episodes": b["episodes"], **common}
                  for r, rd in RL for s in range(b["train_seeds"])]
        return cells
    grid.__name__ = f"grid_{table.replace('-', '_')}"
    return grid


def _setup(config: dict) -> dict:
    """Cluster, workloads, the fitted predictor and the RL state's buckets of a table."""
    from lbtheory.intelligent import (
        A100_KV_BUDGET_TOKENS,
        A100_LLAMA31_8B,
        ClusterConfig,
        EnvConfig,
        bucket_spec_for,
        fit_length_predictor,
        prompt_edges_for,
    )
    from lbtheory.workloads import five_task_workload, production_like_workload

    hw = {} if config["hardware"] == "v100" else {
        "timing": A100_LLAMA31_8B, "kv_budget_tokens": A100_KV_BUDGET_TOKENS}
    chunk = {"max_prefill_tokens": config["chunk"], "chunked_prefill": True} \
        if config["chunk"] else {}
    cluster = ClusterConfig(n_instances=config["instances"], **hw, **chunk)
    gen = five_task_workload if config["mix"] == "five-task" else production_like_workload

    def workload_fn(seed: int):
        return gen(config["requests"], seed=seed, rate_rps=config["rate_rps"])

    fit = gen(config["fit_requests"], seed=FIT_SEED, rate_rps=config["rate_rps"])
    spec = bucket_spec_for(fit, cluster)
    model = fit_length_predictor(fit.prompt_tokens, fit.task, fit.output_tokens, spec=spec)

    def predict_fn(wl):
        return model.predict(wl.prompt_tokens, wl.task, wl.output_tokens)[1]

    fit_pred = predict_fn(fit)
    return {"cluster": cluster, "workload_fn": workload_fn, "predict_fn": predict_fn,
            "env": EnvConfig(prompt_edges=prompt_edges_for(fit), buckets=spec),
            "threshold": int(np.median(fit.prompt_tokens + fit_pred)),
            "predictor_accuracy": float(np.mean(spec.bucket(fit_pred) ==
                                                spec.bucket(fit.output_tokens)))}


def _ideal_e2e_s(cluster, wl) -> float:
    """Mean of an episode's requests' ideal times, each alone on an idle instance (s): no router
    can bring the episode's mean E2E below it (the tables' headroom)."""
    from lbtheory.intelligent import ideal_time_s

    return float(np.mean(ideal_time_s(cluster, np.maximum(wl.prompt_tokens, 1),
                                      np.maximum(wl.output_tokens, 1))))


def _with_ideal(rows: list) -> list:
    """``rows`` with round robin's per-episode ideal E2E (``ideal_e2e_s``: seed -> s), which the
    tables read, computed here for a cell cached before the cell stored it (issue 32; the
    workloads and the cluster depend on the config only, not on the fitted predictor)."""
    out = []
    for c, r in rows:
        if c["part"] == "heuristic" and c["router"] == "rr" and "ideal_e2e_s" not in r:
            st = _setup({**c, "fit_requests": 1000})
            r = {**r, "ideal_e2e_s": {s: _ideal_e2e_s(st["cluster"], st["workload_fn"](int(s)))
                                      for s in r["eval"]}}
        out.append((c, r))
    return out


def _run_summary(res, m: int) -> dict:
    """An episode's summary with the instances' shares (fraction × m; 1 = fair)."""
    share = np.bincount(res.instance[res.instance >= 0], minlength=m) / len(res.instance) * m
    return {**res.summary(), "shares": share.tolist()}


def heuristic_run(config: dict) -> dict:
    """One heuristic on every evaluation episode of a table."""
    from lbtheory.intelligent import SizePartitionRouter, offered_load, simulate
    from lbtheory.registry import make_router

    st = _setup(config)
    cfg, m = st["cluster"], config["instances"]
    runs, loads, ideal = {}, {}, {}
    for s in config["eval_seeds"]:
        wl = st["workload_fn"](s)
        ideal[str(s)] = _ideal_e2e_s(cfg, wl)
        router = SizePartitionRouter(st["threshold"]) if config["router"] == "small-large" \
            else make_router(config["router"], "instances")
        res = simulate(wl, router, cfg, predicted_output=st["predict_fn"](wl))
        runs[str(s)] = _run_summary(res, m)
        loads[str(s)] = offered_load(wl, cfg).as_dict()
    return {"label": config["router"], "eval": runs, "offered_load": loads,
            "ideal_e2e_s": ideal, "predictor_accuracy": st["predictor_accuracy"],
            "threshold": st["threshold"]}


def dqn_config(config: dict, train_seed: int):
    """The training options of an RL cell's router for training seed ``train_seed`` (seed
    ``100 · train_seed``; everything else ``DQNConfig``'s defaults)."""
    from lbtheory.intelligent import DQNConfig

    return DQNConfig(router=config["router"], reading=config["reading"],
                     episodes=config["episodes"], seed=100 * train_seed)


def rl_run(config: dict) -> dict:
    """Train one Double-DQN router (one training seed), evaluate it greedily on every
    evaluation episode; the checkpoint of training seed 0 travels base64-encoded."""
    from dataclasses import asdict

    from lbtheory.intelligent import (
        RoutingEnv,
        greedy_rollout,
        save_checkpoint,
        train_dqn,
    )

    st = _setup(config)
    cfg, m = st["cluster"], config["instances"]
    label = rl_label(config["router"], config["reading"])
    dq = dqn_config(config, config["train_seed"])
    t0 = time.perf_counter()
    res = train_dqn(st["workload_fn"], cfg, dq, env_config=st["env"],
                    predict_fn=st["predict_fn"])
    train_s = time.perf_counter() - t0
    env = RoutingEnv(st["workload_fn"], cfg, res.env_config, st["predict_fn"])
    runs = {str(s): _run_summary(greedy_rollout(res.net, env, s, label), m)
            for s in config["eval_seeds"]}
    # the network after the last episode (what version 5 evaluated), on the same episodes
    last = runs if res.last_net is res.net else {
        str(s): _run_summary(greedy_rollout(res.last_net, env, s, label), m)
        for s in config["eval_seeds"]}
    out = {"label": label, "train_seed": config["train_seed"], "history": res.history,
           "selected_episode": res.selected_episode, "eval_last": last,
           "status": res.status.value, "train_s": train_s, "eval": runs,
           "calibration": asdict(res.calibration),
           "scales": {"horizon_s": res.env_config.horizon_s,
                      "reward_scale": res.env_config.reward_scale,
                      "guidance_scale": res.env_config.guidance_scale}}
    if config["train_seed"] == 0:
        with tempfile.TemporaryDirectory() as tmp:  # the one checkpoint format, read back
            save_checkpoint(res, tmp)
            out["checkpoint"] = {f.name: base64.b64encode(f.read_bytes()).decode("ascii")
                                 for f in sorted(Path(tmp).iterdir())}
    return out


def cell(config: dict) -> dict:
    """One cell: a Knowl 6 (``bvr``) cell, a heuristic on a table's episodes, or one RL
    training seed."""
    if config["part"] == "bvr":
        return batching_vs_routing(config)
    if config["part"] == "heuristic":
        return heuristic_run(config)
    return rl_run(config)


def batching_vs_routing(config: dict) -> dict:
    """Knowl 6: one (order, batcher, router) cell on every workload seed: makespan (the
    seed's "total E2E", s), mean E2E (s), preemptions per request, instance 0's share."""
    from lbtheory.intelligent import SizePartitionRouter, simulate
    from lbtheory.intelligent._knowl6 import SMALL_OUTPUT_TOKENS, knowl6_cluster, knowl6_workload
    from lbtheory.registry import make_router

    cfg = knowl6_cluster(config["batcher"])
    runs = {}
    for seed in config["seeds"]:
        wl = knowl6_workload(config["order"], config["requests"], seed=seed,
                             rate_rps=config["rate_rps"])
        router = SizePartitionRouter(SMALL_OUTPUT_TOKENS, size="output") \
            if config["router"] == "small-large" else make_router(
                {"rr": "rr", "decode-balancer": "jsq-tokens"}[config["router"]], "instances")
        res = simulate(wl, router, cfg)
        if res.completed != len(wl):
            raise RuntimeError(f"Knowl 6 cell {config}: {res.completed} of {len(wl)} finished")
        runs[str(seed)] = {"makespan_s": float(np.max(res.finish_s) - wl.arrival_s[0]),
                           "mean_e2e_s": float(np.mean(res.e2e_s)),
                           "preemptions_per_request": float(np.mean(res.preempted)),
                           "share_instance0": float(np.mean(res.instance == 0))}
    return {"runs": runs}


def _collector(table: str):
    def collect(rows: list, out_dir: Path, profile: str) -> None:
        conf = {"table": table, **TABLES[table], "profile": profile, **BUDGET[profile],
                "heuristics": HEURISTICS, "rl": RL, "fit_seed": FIT_SEED,
                "eval_seed0": EVAL_SEED0, "version": VERSION, "network": "monotone",
                "balance_factor": 1.25, "selection": "validation", "validation_episodes": 2}
        summary = {"table": table, "profile": profile, "config": conf,
                   "manifest": run_manifest(conf, seed=FIT_SEED),
                   **summarise_table(table, _with_ideal(rows))}
        write_json_atomic(out_dir / "summary.json", summary)
        write_results(out_dir.parent)
    collect.__name__ = f"collect_{table.replace('-', '_')}"
    return collect


#: Knowl 6 per profile: requests and workload seeds (seed 0 first; seeds 1-4 added after it as
#: a robustness check, the rules unchanged)
BVR = {"quick": {"requests": 400, "seeds": [0]},
       "full": {"requests": 3000, "seeds": [0, 1, 2, 3, 4]}}


def _bvr_grid(profile: str) -> list[dict]:
    from _knowl6_table import BATCHERS, ORDERS, ROUTERS

    return [{"part": "bvr", "order": o, "batcher": b, "router": r, "rate_rps": 20.0,
             **BVR[profile]} for o in ORDERS for b in BATCHERS for r in ROUTERS]


def _bvr_collect(rows: list, out_dir: Path, profile: str) -> None:
    from _knowl6_table import markdown, summarise

    from lbtheory.io import write_text_atomic

    conf = {"profile": profile, "instances": 2, "hardware": "v100", "rate_rps": 20.0,
            **BVR[profile]}
    s = {"table": "bvr", "profile": profile, "config": conf,
         "manifest": run_manifest(conf, seed=0), "requests": BVR[profile]["requests"],
         "rate_rps": 20.0, **summarise(rows)}
    write_json_atomic(out_dir / "summary.json", s)
    write_text_atomic(out_dir / "knowl6.md", "\n".join(markdown(s)))


#: the load sweep [R] (fixed before the run): Knowl 4's and Knowl 5's clusters and mixes at
#: these multiples of the tables' rates, the heuristics only, the tables' 10 evaluation episodes
LOAD_TABLES = ("k4", "k5")
LOAD_FACTORS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)
LOAD_ROUTERS = ["rr", "random", "jsq", "jsq-tokens", "minmin", "maxcap", "heuristic"]


def _load_grid(profile: str) -> list[dict]:
    """Cells of the load sweep: (table, rate factor, heuristic)."""
    b = BUDGET[profile]
    factors = LOAD_FACTORS if profile == "full" else (1.0, 2.0)
    cells = []
    for table in LOAD_TABLES:
        t = dict(TABLES[table])
        if b["max_requests"]:
            t["requests"] = min(t["requests"], b["max_requests"])
        for f in factors:
            cells += [{"part": "heuristic", "router": r, "table": table, **t,
                       "rate_rps": f * TABLES[table]["rate_rps"], "load_factor": f,
                       "fit_requests": b["fit_requests"],
                       "eval_seeds": [EVAL_SEED0 + k for k in range(b["eval_episodes"])]}
                      for r in LOAD_ROUTERS]
    return cells


def _load_collect(rows: list, out_dir: Path, profile: str) -> None:
    conf = {"profile": profile, "tables": LOAD_TABLES, "factors": LOAD_FACTORS,
            "routers": LOAD_ROUTERS, **BUDGET[profile], "fit_seed": FIT_SEED,
            "eval_seed0": EVAL_SEED0}
    write_json_atomic(out_dir / "summary.json", {
        "table": "load", "profile": profile, "config": conf,
        "manifest": run_manifest(conf, seed=FIT_SEED), "rows": summarise_load(rows)})
    write_results(out_dir.parent)


def _description(table: str) -> str:
    if table == "k4-25":
        return ("Intelligent Router: the Knowl 4 cluster at 25 req/s (not in the seed; where the "
                "heuristics gain most): heuristic and Double-DQN routers vs round robin")
    return (f"Intelligent Router (arXiv 2408.13510) Knowl "
            f"{table[1:].replace('-chunked', ' chunked prefill')}: heuristic and "
            f"Double-DQN routers vs round robin, 95% intervals")


EXPERIMENTS = [
    *[Experiment(name=f"intelligent-router-{t}", group="intelligent-router",
                 description=_description(t),
                 grid=_grid(t), cell=cell, collect=_collector(t), version=VERSION)
      for t in TABLES],
    Experiment(name="intelligent-router-load", group="intelligent-router",
               description="Intelligent Router: heuristics vs round robin on the Knowl 4/5 "
                           "clusters from half to three times the tables' rates",
               grid=_load_grid, cell=cell, collect=_load_collect, version=VERSION),
    Experiment(name="intelligent-router-bvr", group="intelligent-router",
               description="Intelligent Router Knowl 6: 3 batchers x 3 routers x 4 arrival "
                           "orders (2 instances, 3,000 requests)", grid=_bvr_grid, cell=cell,
               collect=_bvr_collect, version=VERSION),
]
assert set(PAPER) <= set(TABLES)

if __name__ == "__main__":
    sys.exit(script_main(EXPERIMENTS))
