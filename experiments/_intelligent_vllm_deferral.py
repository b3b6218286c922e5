"""What limits (or makes) the learnt routers on the vLLM-faithful model? The deferral ablation.

Run (a script, not a sweep experiment: the leading underscore keeps ``lbtheory sweep`` from
loading it)::

    PYTHONPATH=experiments .venv/bin/python experiments/_intelligent_vllm_deferral.py \\
        --router wg-rl --seeds 1 0

Retrains the given cells of ``intelligent-router-vllm-k4`` exactly (same config, same seed: the
training is deterministic, checked against the committed cell's evaluation) and evaluates the
same network twice on the 10 evaluation episodes, full length and 500 requests: as trained (the
paper's action space, deferral allowed) and with waiting masked whenever an instance is a valid
action (:class:`lbtheory.intelligent.DQNRouter` ``defer=False``). The difference is what the
learnt deferral costs or gains. Writes ``deferral.json`` next to the table's summary
(atomically, one seed at a time). Run on all 10 cells (WG-RL and WA-RL, seeds 0-4): first WG-RL
seeds 1 and 0 (the largest and smallest router wait) and WA-RL seed 2, then the rest (two
processes: the second wrote to another ``--out`` and was merged into ``deferral.json``).

``--setup k5`` does the same for ``intelligent-router-vllm-k5``. There the session's time left
room for two trainings after the table, so the rule (written 19:27 UTC, when 4 of the 10 RL
cells had finished and no WA-RL cell): the WG-RL and the WA-RL training seed with the largest
gain (most negative full-length Δ) in the table — the ablation asks where a gain comes from.
``--setup k5-chunked``: the same rule, written (2026-12-03, 21:42 UTC) before any RL cell of
``intelligent-router-vllm-k5-chunked`` had finished — the WG-RL and the WA-RL seed with the most
negative full-length Δ (they turned out to be WG-RL seed 3 and WA-RL seed 1); the two trainings
ran as two processes (``--out`` to two folders, merged into ``deferral.json``).
``--setup k8``: the rule written 2026-12-05, 15:20 UTC, when WG-RL's five cells and WA-RL's seed
0 of ``intelligent-router-vllm-k8`` had finished (their full-length figures known, the table not
written): retrain the WG-RL seed with the largest full-length router wait (seed 1, 7.2 s) — where
deferral weighs most — started 15:34 beside the sweep's last cells; then, if the session
leaves time, the WG-RL seed with the most negative full-length Δ (seed 3: started 16:26,
stopped at 16:35 to leave both cores to the table's last cells when the sweep had to restart;
run in the next session, 2026-12-05 18:03–18:17 UTC). The short episodes are Knowl 8's
headroom episodes (2,000 requests, ``HEADROOM_REQUESTS``), as in its table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from intelligent_router_vllm import BUDGET, EVAL_SEED0, HEADROOM_REQUESTS, evaluate, train

from lbtheory.io import run_manifest, write_json_atomic

RESULTS = Path("experiments/results")


def _mean(part: dict, key: str) -> float:
    return float(np.mean([r[key] for r in part.values()]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--router", default="wg-rl")
    ap.add_argument("--reading", default="hurl")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--setup", default="k4", choices=["k4", "k5", "k5-chunked", "k8"],
                    help="the experiment intelligent-router-vllm-SETUP whose cells are retrained")
    ap.add_argument("--out", default=None,
                    help="folder of deferral.json (default: the experiment's results folder)")
    a = ap.parse_args(argv)
    b = BUDGET["full"]
    out = Path(a.out) if a.out else RESULTS / f"intelligent-router-vllm-{a.setup}"
    out_file = out / "deferral.json"
    done = json.loads(out_file.read_text()) if out_file.exists() else {"runs": {}}
    for seed in a.seeds:
        config = {"part": "rl", "router": a.router, "reading": a.reading, "train_seed": seed,
                  "episodes": b["episodes"], "setup": a.setup, "requests": b["requests"],
                  "fit_requests": b["fit_requests"],
                  "headroom_requests": HEADROOM_REQUESTS.get(a.setup, b["headroom_requests"]),
                  "eval_seeds": [EVAL_SEED0 + k for k in range(b["eval_episodes"])]}
        res, st, train_s = train(config)
        runs = {"defer": evaluate(res, st, config), "no_defer": evaluate(res, st, config,
                                                                          defer=False)}
        row = {"config": config, "train_s": train_s, **runs,
               "summary": {k: {p: {"e2e_s": _mean(v[p], "e2e_s"),
                                   "router_wait_s": _mean(v[p], "router_wait_s"),
                                   "preemptions_per_request": _mean(
                                       v[p], "preemptions_per_request")}
                               for p in ("full", "short")} for k, v in runs.items()}}
        done["runs"][f"{a.router}-{a.reading}-{seed}"] = row
        done["manifest"] = run_manifest({"router": a.router, "seeds": a.seeds, "setup": a.setup},
                                        seed=seed)
        write_json_atomic(out_file, done)
        print(json.dumps({f"{a.router} seed {seed}": row["summary"]}, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
