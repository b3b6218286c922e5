"""BalanceRoute on the Azure conversation trace: imbalance vs G per policy, load traces, H sweep.

Run:  .venv/bin/python experiments/balanceroute.py [--quick]

Writes ``experiments/results/balanceroute/`` (atomically):

* ``scaling.json`` — summaries of every policy at G ∈ {4, 8, 16};
* ``load_traces.json`` — per-replica loads of 8 replicas under JSQ and BR-0 (a window of steps);
* ``horizon.json`` — BR-H (Oracle and Survival) mean imbalance vs the horizon H at G = 8;

each with its config and :func:`lbtheory.io.run_manifest`. Saturation replay, 32 slots per replica,
pool window 128, step time 1 µs/token · M + 20 ms (package defaults).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lbtheory.barrier import DecodeConfig
from lbtheory.barrier.compare import compare_policies, summary_table
from lbtheory.io import run_manifest, write_json_atomic
from lbtheory.workloads import read_trace

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_conv.csv"
OUT = ROOT / "experiments" / "results" / "balanceroute"
POLICIES = ["random", "rr", "p2c", "jsq", "jsq-tokens", "br0", "brh-oracle", "brh-survival"]
SEED = 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="first 3000 requests only")
    args = ap.parse_args()
    trace = read_trace(TRACE)
    if args.quick:
        trace = trace.head(3000)
    base = {"trace": TRACE.name, "requests": len(trace), "seed": SEED, "policies": POLICIES}

    scaling = {}
    for G in (4, 8, 16):
        cfg = DecodeConfig(replicas=G)
        scaling[str(G)] = summary_table(compare_policies(trace, POLICIES, config=cfg, seed=SEED))
        print(f"G={G}: " + ", ".join(f"{k} {v['mean_imbalance']:.0f}"
                                     for k, v in scaling[str(G)].items()), flush=True)
    conf = base | {"replicas": [4, 8, 16], "sim": DecodeConfig().to_dict()}
    write_json_atomic(OUT / "scaling.json", {"config": conf,
                                             "manifest": run_manifest(conf, seed=SEED),
                                             "results": scaling})

    cfg8 = DecodeConfig(replicas=8, record_loads=True)
    runs = compare_policies(trace, ["jsq", "br0"], config=cfg8, seed=SEED)
    k0 = runs["jsq"].measure_steps // 2
    window = slice(k0, k0 + 400)
    traces = {name: {"loads": res.loads[window], "first_step": k0,
                     "mean_imbalance": res.summary()["mean_imbalance"]}
              for name, res in runs.items()}
    conf = base | {"replicas": 8, "window_steps": 400, "sim": cfg8.to_dict()}
    write_json_atomic(OUT / "load_traces.json", {"config": conf,
                                                 "manifest": run_manifest(conf, seed=SEED),
                                                 "results": traces})

    horizons = [0, 5, 10, 20, 40, 80]
    sweep: dict[str, dict[str, float]] = {}
    for H in horizons:
        res = compare_policies(trace, ["brh-oracle", "brh-survival"], horizon=H,
                               config=DecodeConfig(replicas=8), seed=SEED)
        sweep[str(H)] = {k: v.summary()["mean_imbalance"] for k, v in res.items()}
        print(f"H={H}: {sweep[str(H)]}", flush=True)
    conf = base | {"replicas": 8, "horizons": horizons, "gamma": 1.0, "alpha": 1.0, "beta": "G"}
    write_json_atomic(OUT / "horizon.json", {"config": conf,
                                             "manifest": run_manifest(conf, seed=SEED),
                                             "results": sweep})


if __name__ == "__main__":
    main()
