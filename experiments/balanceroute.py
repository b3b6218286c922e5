"""BalanceRoute on the Azure conversation trace: imbalance vs G per policy, load traces, H sweep.

Run:  .venv/bin/python experiments/balanceroute.py [--quick]
      (or ``lbtheory sweep balanceroute``)

Writes ``experiments/results/balanceroute/`` (atomically, each with its config and
:func:`lbtheory.io.run_manifest`), the files ``paper_figures/balanceroute.py`` reads:

* ``scaling.json`` — summaries of every policy at G ∈ {4, 8, 16};
* ``load_traces.json`` — per-replica loads of 8 replicas under JSQ and BR-0 (400 steps from the
  middle of the run);
* ``horizon.json`` — BR-H (Oracle and Survival) mean imbalance vs the horizon H at G = 8.

Whole trace (quick profile: its first 400 requests), saturation replay, 32 slots per replica,
pool window 128, step time 1 µs/token · M + 20 ms (package defaults). The G = 4/8/16 tables of
both traces with CIs are ``experiments/balanceroute_tables.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from _balanceroute_common import make_policy, run_policy, window

from lbtheory.barrier import DecodeConfig, simulate_decode
from lbtheory.io import run_manifest, write_json_atomic
from lbtheory.sweep import Experiment, script_main

POLICIES = ["random", "rr", "p2c", "jsq", "jsq-tokens", "br0", "brh-oracle", "brh-survival"]
HORIZONS = [0, 2, 5, 10, 20, 40, 80]
SEED = 0
TRACE = "conv"
LOAD_WINDOW = 400


def make_grid(profile: str) -> list[dict[str, Any]]:
    """Cells of the three result files (quick: the first 400 requests)."""
    limit = 400 if profile == "quick" else None
    base = {"trace": TRACE, "limit": limit, "seed": SEED}
    return ([base | {"kind": "scaling", "G": G, "policy": p} for G in (4, 8, 16)
             for p in POLICIES]
            + [base | {"kind": "load_traces", "G": 8, "policy": p} for p in ("jsq", "br0")]
            + [base | {"kind": "horizon", "G": 8, "policy": p, "H": H} for H in HORIZONS
               for p in ("brh-oracle", "brh-survival")])


def run_cell(config: dict[str, Any]) -> dict[str, Any]:
    """A summary (scaling, horizon) or a window of per-replica loads (load_traces)."""
    tr = window(config["trace"], 1, 0, config["limit"])
    if config["kind"] == "scaling":
        return run_policy(tr, config["policy"], config["G"], seed=config["seed"])
    if config["kind"] == "horizon":
        return run_policy(tr, config["policy"], config["G"], seed=config["seed"],
                          horizon=config["H"])
    res = simulate_decode(tr, make_policy(config["policy"], tr),
                          config=DecodeConfig(replicas=config["G"], record_loads=True),
                          seed=config["seed"])
    k0 = res.measure_steps // 2
    return {"loads": res.loads[k0:k0 + LOAD_WINDOW].tolist(), "first_step": k0,
            "mean_imbalance": res.summary()["mean_imbalance"]}


def summarise(rows: list[tuple[dict, dict]], out_dir: Path, profile: str) -> None:
    """``scaling.json``, ``load_traces.json`` and ``horizon.json`` (the figure script's inputs)."""
    requests = len(window(TRACE, 1, 0, rows[0][0]["limit"]))
    base = {"trace": TRACE, "requests": requests, "seed": SEED, "policies": POLICIES,
            "profile": profile}
    scaling: dict[str, dict[str, Any]] = {}
    traces: dict[str, Any] = {}
    sweep: dict[str, dict[str, float]] = {}
    for c, r in rows:
        if c["kind"] == "scaling":
            scaling.setdefault(str(c["G"]), {})[c["policy"]] = r
        elif c["kind"] == "load_traces":
            traces[c["policy"]] = r
        else:
            sweep.setdefault(str(c["H"]), {})[c["policy"]] = r["mean_imbalance"]
    for name, conf, results in (
            ("scaling.json", base | {"replicas": [4, 8, 16], "sim": DecodeConfig().to_dict()},
             scaling),
            ("load_traces.json", base | {"replicas": 8, "window_steps": LOAD_WINDOW,
                                         "sim": DecodeConfig(replicas=8).to_dict()}, traces),
            ("horizon.json", base | {"replicas": 8, "horizons": HORIZONS, "gamma": 1.0,
                                     "alpha": 1.0, "beta": "G"}, sweep)):
        write_json_atomic(out_dir / name, {"config": conf, "results": results,
                                           "manifest": run_manifest(conf, seed=SEED)})


EXPERIMENT = Experiment(
    name="balanceroute",
    description="BalanceRoute on the Azure conv trace: imbalance vs G, load traces, H sweep",
    grid=make_grid, cell=run_cell, collect=summarise, group="balanceroute")

if __name__ == "__main__":
    sys.exit(script_main(EXPERIMENT))
