"""What do the Knowl 8 seeds that gain route where? The favoured instance, request by request.

Run (a script, not a sweep experiment)::

    PYTHONPATH=experiments .venv/bin/python experiments/_intelligent_vllm_lanes.py \\
        --setup k8 --router wg-rl --seed 3

The question, written 2026-12-05, 18:24 UTC, before any run (issue 35): in Knowl 8's table the
two trainings that gain (WG-RL seed 3, −4.4 %; WA-RL seed 2, −5.5 %) send one instance about
twice its fair share of requests, so the protocol's collapse flag marks them. Is that an
overload, or a lane — one instance serving many *short* requests, as a size-interval router
would? Retrains the cell exactly (deterministic: its evaluation is checked against the
committed cell's, to the digit) and, on the 10 evaluation episodes at full length, with the
greedy policy as trained, compares the favoured instance (the one with most requests in each
episode) with the others: its share of the requests, of the prompt tokens and of the output
tokens (× the number of instances: 1 = fair), the mean true output of its requests, each
task's share sent there; and per task the mean E2E under the router and under round robin on
the same episodes. A lane shows as a request share well above 1 with an output-token share at
or below 1; an overload as both above 1. Writes ``lanes-<router>-<seed>.json`` next to the
table's summary (atomically).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from intelligent_router_vllm import BUDGET, EVAL_SEED0, HEADROOM_REQUESTS, _row, train

from lbtheory.io import run_manifest, write_json_atomic

RESULTS = Path("experiments/results")


def favoured(instance: np.ndarray, wl, m: int) -> dict:
    """The most-loaded instance's shares (× m) and the mean output there vs elsewhere."""
    inst = np.asarray(instance)
    fav = int(np.bincount(inst[inst >= 0], minlength=m).argmax())
    at = inst == fav
    prompt, out = np.asarray(wl.prompt_tokens, float), np.asarray(wl.output_tokens, float)
    task = np.asarray(wl.task)
    return {"instance": fav,
            "request_share": float(at.mean() * m),
            "prompt_token_share": float(prompt[at].sum() / prompt.sum() * m),
            "output_token_share": float(out[at].sum() / out.sum() * m),
            "mean_output_there": float(out[at].mean()),
            "mean_output_elsewhere": float(out[~at].mean()),
            "task_share_there": {name: float((at & (task == k)).sum() / max((task == k).sum(), 1)
                                             * m)
                                 for k, name in enumerate(wl.task_names)}}


def per_task_e2e(res, wl) -> dict:
    """Mean E2E (s) per task."""
    e2e = np.asarray(res.finish_s) - np.asarray(res.arrival_s)
    task = np.asarray(wl.task)
    return {name: float(np.nanmean(e2e[task == k])) for k, name in enumerate(wl.task_names)}


def committed_cell(folder: Path, label: str, seed: int) -> dict | None:
    """The committed RL cell's result for ``label`` and training seed ``seed`` (None if absent)."""
    for f in sorted((folder / "cells").glob("*.json")):
        r = json.loads(f.read_text()).get("result", {})
        if r.get("label") == label and r.get("train_seed") == seed:
            return r
    return None


def main(argv: list[str] | None = None) -> int:
    from _intelligent_tables import rl_label

    from lbtheory.intelligent import RoutingEnv, greedy_rollout, simulate
    from lbtheory.registry import make_router

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setup", default="k8", choices=["k4", "k5", "k5-chunked", "k8"])
    ap.add_argument("--router", default="wg-rl")
    ap.add_argument("--reading", default="hurl")
    ap.add_argument("--seed", type=int, default=3)
    a = ap.parse_args(argv)
    b = BUDGET["full"]
    config = {"part": "rl", "router": a.router, "reading": a.reading, "train_seed": a.seed,
              "episodes": b["episodes"], "setup": a.setup, "requests": b["requests"],
              "fit_requests": b["fit_requests"],
              "headroom_requests": HEADROOM_REQUESTS.get(a.setup, b["headroom_requests"]),
              "eval_seeds": [EVAL_SEED0 + k for k in range(b["eval_episodes"])]}
    res, st, train_s = train(config)
    m = st["setup"].instances
    label = rl_label(a.router, a.reading)
    env = RoutingEnv(st["workload_fn"], st["cluster"], res.env_config, st["predict_fn"])
    episodes = {}
    for s in config["eval_seeds"]:
        wl = st["workload_fn"](s)
        r = greedy_rollout(res.net, env, s, label)
        rr = simulate(wl, make_router("rr", "instances"), st["cluster"],
                      predicted_output=st["predict_fn"](wl))
        episodes[str(s)] = {"e2e_s": _row(r, m)["e2e_s"], "rr_e2e_s": _row(rr, m)["e2e_s"],
                            "favoured": favoured(r.instance, wl, m),
                            "task_e2e_s": per_task_e2e(r, wl),
                            "rr_task_e2e_s": per_task_e2e(rr, wl)}
        f = episodes[str(s)]["favoured"]
        print(f"episode {s}: E2E {episodes[str(s)]['e2e_s']:.1f} s (rr "
              f"{episodes[str(s)]['rr_e2e_s']:.1f}); favoured instance: requests "
              f"{f['request_share']:.2f}x, output tokens {f['output_token_share']:.2f}x, mean "
              f"output {f['mean_output_there']:.0f} vs {f['mean_output_elsewhere']:.0f}",
              file=sys.stderr)
    folder = RESULTS / f"intelligent-router-vllm-{a.setup}"
    cell = committed_cell(folder, label, a.seed)
    same = None if cell is None else all(
        cell["full"][k]["e2e_s"] == v["e2e_s"] for k, v in episodes.items())
    print(f"retraining's evaluation identical to the committed cell's: {same}", file=sys.stderr)
    out = folder / f"lanes-{label}-{a.seed}.json"
    write_json_atomic(out, {"question": __doc__.split("\n\n")[3], "config": config,
                            "train_s": train_s, "identical_to_cell": same,
                            "episodes": episodes,
                            "manifest": run_manifest(vars(a))})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
