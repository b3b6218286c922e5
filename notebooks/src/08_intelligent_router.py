CELLS = [
("md", """
# 08 — Intelligent Router: prefill/decode interference and learned routing

`lbtheory.intelligent` reconstructs the Intelligent Router of arXiv 2408.13510 (THEORY §10):
m identical LLM instances with continuous batching, a KV-cache budget with preemption by
recomputation and an iteration-time model in which prefill tokens and decode context both add time;
a router queue in front with a 20 ms decision epoch. This notebook runs everything on a **tiny
budget** (a few hundred requests, two training episodes) so CI can execute it; the full comparison
with confidence intervals is `experiments/intelligent_router.py`, whose stored results are shown at
the end when present.
"""),
("code", """
from pathlib import Path
import json
import numpy as np
from lbtheory.workloads import read_trace
from lbtheory.stats import mean, percentile
from lbtheory.plotting import figure
from lbtheory.intelligent import (
    ClusterConfig, IterationTimeModel, fit_iteration_model, calibrate_impact, mixing_reward,
    simulate, BucketSpec, evaluate_length_predictor, DQNConfig, train_dqn, RoutingEnv,
    greedy_rollout, SizePartitionRouter)
from lbtheory.registry import make_router
from lbtheory.workloads import mix_traces, workload_from_arrays

HEURISTIC_ROUTERS = ("rr", "jsq", "minmin", "maxcap", "heuristic")


def make_heuristic(name):
    return make_router(name, "instances")

traces = [read_trace(f"../examples/traces/AzureLLMInferenceTrace_{k}.csv") for k in ("code", "conv")]
cfg = ClusterConfig(n_instances=4)
print(cfg.timing)
"""),
("md", """
## The iteration-time model and its calibration
One iteration costs `base + a_p Σq + a_q Σq² + a_n n_decode + a_c · context` (seconds). The
defaults are first-principles orders of magnitude for Llama-2-7B on a V100 [R]. Measured slopes
replace them: `fit_iteration_model` is a least-squares fit; here it recovers the defaults from
noisy synthetic measurements (1% noise).
"""),
("code", """
rng = np.random.default_rng(0)
n = 300
q = rng.integers(0, 4000, n) * (rng.random(n) < 0.5)
nd = rng.integers(0, 64, n)
ctx = nd * rng.integers(100, 1500, n)
t = np.array([cfg.timing.iteration_time([a] if a else [], b, c) for a, b, c in zip(q, nd, ctx)])
fit = fit_iteration_model(q, q.astype(float) ** 2, nd, ctx, t * (1 + 0.01 * rng.standard_normal(n)))
for name, a, b in zip(("base", "prefill", "attention", "decode/seq", "context"),
                      cfg.timing.coefficients(), fit.coefficients()):
    print(f"{name:>10}: true {a:.3e}   fitted {b:.3e}")
"""),
("md", """
## Workload-impact estimator
`T_p = grad₁(p² + L_m)`, `r_p`, `r_d = −grad₂(L_m + p + d)` and `r_mix = α r_p + (1 − α) r_d`
with grad₁, grad₂, ε calibrated from the iteration-time model [R]. `r_mix` falls as an instance's
committed tokens `L_m` grow, so the greedy heuristic prefers the instance with the fewest.
"""),
("code", """
impact = calibrate_impact(cfg.timing)
print(impact)
loads = np.array([0, 20_000, 60_000, 120_000])
print("r_mix for p = 2000, d = 100 on instances with L =", loads, ":",
      np.round(mixing_reward(2000, 100, loads, impact), 3))
"""),
("md", """
## Heuristic routers on the Azure code + conversation mix
Three seeds × 300 requests at 20 req/s on 4 instances (saturation); mean E2E latency with a
min–max bar over seeds. The tiny sample makes the differences noise-sized; see the experiment for
5 × 2,000.
"""),
("code", """
seeds = [1, 2, 3]
wls = {s: mix_traces(traces, n_requests=300, seed=s, rate_rps=20.0) for s in seeds}
e2e = {name: np.array([mean(simulate(wls[s], make_heuristic(name), cfg).e2e_s) for s in seeds])
       for name in HEURISTIC_ROUTERS}
fig, ax = figure(width=6, height=3)
names = list(e2e)
vals = np.array([e2e[n].mean() for n in names])
err = np.array([[vals[i] - e2e[n].min(), e2e[n].max() - vals[i]] for i, n in enumerate(names)]).T
ax.bar(names, vals, yerr=err, capsize=4, color="#8c8c8c")
ax.set_ylabel("mean E2E latency (s)")
for n in names:
    print(f"{n:>10}: {e2e[n].mean():7.2f} s  ({100 * (e2e[n] / e2e['rr'] - 1).mean():+.1f}% vs rr)")
"""),
("md", """
## Output-length predictor
A histogram classifier on (task, log₂ prompt tokens, a lagged same-task output bucket), trained on
the first 70% of each trace and tested on the rest (chronological). Time buckets at 500 tokens/s
(the paper's) put most Azure outputs in the first bucket, so the majority baseline is strong; at a
per-request decode speed of 50 tokens/s the buckets are informative.
"""),
("code", """
wl_all = mix_traces(traces, n_requests=sum(len(t) for t in traces), seed=0)
for spec in (BucketSpec("time", decode_tps=500.0), BucketSpec("time", decode_tps=50.0)):
    rep = evaluate_length_predictor(wl_all.prompt_tokens, wl_all.task, wl_all.output_tokens,
                                    spec=spec)
    print(f"{spec.decode_tps:>5.0f} tok/s: accuracy {rep.accuracy:.3f} vs majority "
          f"{rep.baseline_accuracy:.3f} ({rep.n_test} held out)")
print(rep.confusion)
"""),
("md", """
## Double-DQN routers (tiny budget)
Workload-Guided RL with the HuRL reading of λ_k (guidance weight γe^{−β_d k}, vanishing); two
episodes of 100 requests. This only shows the machinery and the learning-curve format: a router
trained this briefly is not expected to beat round robin.
"""),
("code", """
def small_wl(seed):
    return mix_traces(traces, n_requests=100, seed=seed, rate_rps=20.0)

res = train_dqn(small_wl, cfg, DQNConfig(router="wg-rl", reading="hurl", episodes=2, seed=0,
                                          learning_starts=64, hidden=(64, 64)))
fig, ax = figure(width=5, height=2.6)
ax.plot([h["episode"] for h in res.history], [h["mean_e2e_s"] for h in res.history], "o-")
ax.set_xlabel("episode"); ax.set_ylabel("mean E2E (s)")
env = RoutingEnv(small_wl, cfg, res.env_config)
r = greedy_rollout(res.net, env, 99, "wg-rl")
print("greedy wg-rl on a new episode:", round(mean(r.e2e_s), 2), "s;  rr:",
      round(mean(simulate(small_wl(99), make_heuristic("rr"), cfg).e2e_s), 2), "s")
"""),
("md", """
## Batching vs routing (Knowl 6)
Two instances; "ordered arrivals" [R]: a block of code requests, then a block of conversation
requests. Each router × instance batcher (FCFS, shortest prompt first). The paper reports that a
bad partition (dedicated small/large) hurts every batcher alike.
"""),
("code", """
w0 = mix_traces(traces, n_requests=400, seed=7, rate_rps=20.0)
o = np.argsort(w0.task, kind="stable")
wl = workload_from_arrays(w0.arrival_s, w0.prompt_tokens[o], w0.output_tokens[o], task=w0.task[o])
thr = int(np.median(wl.prompt_tokens + wl.output_tokens))
print(f"{'router':>16} {'FCFS':>8} {'SPF':>8}")
for name, mk in {"small-large": lambda: SizePartitionRouter(thr), "rr": lambda: make_heuristic("rr"),
                 "decode-balancer": lambda: make_heuristic("jsq-tokens")}.items():
    row = [mean(simulate(wl, mk(), ClusterConfig(n_instances=2, admission=b)).e2e_s)
           for b in ("fcfs", "spf")]
    print(f"{name:>16} {row[0]:7.2f}s {row[1]:7.2f}s")
"""),
("md", """
## Stored results of the full experiment
Read (not recomputed) from `experiments/results/intelligent-router/` when the experiment has run.
"""),
("code", """
res_dir = Path("../experiments/results/intelligent-router")
p = res_dir / "summary.md"
print(p.read_text() if p.exists() else "run: .venv/bin/lbtheory sweep intelligent-router")
if (res_dir / "latency.json").exists():
    table = json.loads((res_dir / "latency.json").read_text())["routers"]
    fig, ax = figure(width=7, height=3)
    names = list(table)
    ax.bar(names, [table[n]["mean_e2e_s"] for n in names],
           yerr=[table[n]["mean_e2e_ci95_s"] for n in names], capsize=4, color="#8c8c8c")
    ax.set_ylabel("mean E2E latency (s), 95% CI")
    ax.tick_params(axis="x", rotation=30)
if (res_dir / "learning_curves.json").exists():
    curves = json.loads((res_dir / "learning_curves.json").read_text())["curves"]
    fig, ax = figure(width=6, height=3)
    for name, hist in curves.items():
        ax.plot([h["episode"] for h in hist], [h["mean_e2e_s"] for h in hist], "o-", ms=3,
                label=name)
    ax.set_xlabel("training episode"); ax.set_ylabel("mean E2E (s)"); ax.legend()
"""),
]
