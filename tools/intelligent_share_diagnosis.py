"""Why a trained Intelligent-Router policy drifts onto one instance: replay the training-seed-0
checkpoint that a table's RL cell carries on that table's evaluation episodes, and for every
routing decision compare the chosen instance with the load the router saw.

Per episode it prints the instances' shares (1 = fair), how often the greedy choice was an
instance with the fewest requests ("to-least") or strictly the most ("to-most"), each beside
what a uniformly random choice on the *same* states would give, and the mean spread of the
instances' Q-values relative to |Q|. A load-aware policy sends far more than the random rate to
the least-loaded instance; a policy at or below it ignores (or inverts) the queue signal.

It also prints each instance's share of the prompt and output tokens and its mean output
length: an instance can take 1.8× its share of *requests* while taking less than its share of
the *work* (a lane for short outputs, not an overload).

``--train-seed N`` retrains training seed ``N`` of the cell's configuration instead (training is
deterministic: the same network as the sweep's, ≈ 2 min) — for a flagged seed other than 0.

Usage (after ``lbtheory sweep intelligent-router-k4 --profile full``):
    .venv/bin/python tools/intelligent_share_diagnosis.py k4 wg-rl-hurl
    .venv/bin/python tools/intelligent_share_diagnosis.py k5 wg-rl-hurl --train-seed 3
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    train_seed = None
    if len(argv) == 4 and argv[2] == "--train-seed" and argv[3].isdigit():
        train_seed, argv = int(argv[3]), argv[:2]
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    table, label = argv
    sys.path.insert(0, str(ROOT / "experiments"))
    import intelligent_router as ir

    from lbtheory.intelligent import (
        load_checkpoint,
        observation,
        q_values,
        train_dqn,
    )
    from lbtheory.intelligent._dqn import DQNRouter
    from lbtheory.intelligent._simulate import make_sim, result_of, run_router

    cells = []
    for f in (ROOT / "experiments" / "results" / f"intelligent-router-{table}" / "cells").glob(
            "*.json"):
        d = json.loads(f.read_text(encoding="utf-8"))
        r = d["result"]
        if d["config"].get("part") == "rl" and r["label"] == label and (
                "checkpoint" in r or train_seed is not None):
            cells.append((d["created_utc"], d))
    if not cells:
        print(f"error: no {label} checkpoint under intelligent-router-{table}", file=sys.stderr)
        return 2
    cell = max(cells, key=lambda c: c[0])[1]
    st = ir._setup(cell["config"])
    if train_seed is None:
        with tempfile.TemporaryDirectory() as tmp:
            for name, blob in cell["result"]["checkpoint"].items():
                Path(tmp, name).write_bytes(base64.b64decode(blob))
            res = load_checkpoint(tmp, st["cluster"])
    else:
        res = train_dqn(st["workload_fn"], st["cluster"],
                        ir.dqn_config(cell["config"], train_seed),
                        env_config=st["env"], predict_fn=st["predict_fn"])
    log: list[tuple] = []

    class Tracing:
        name = label

        def __init__(self) -> None:
            self.inner = DQNRouter(res.net, res.env_config, label)

        def init(self, seed: int = 0):
            return self.inner.init(seed)

        def observe(self, state, view):
            return state

        def route(self, state, view, rng):
            a, state = self.inner.route(state, view, rng)
            if a is not None:
                q = np.asarray(q_values(res.net, observation(view, res.env_config)))
                log.append((a, view.n_running + view.n_waiting, q))
            return a, state

    print(f"{table} {label}, training seed {train_seed or 0} "
          + ("(retrained)" if train_seed is not None else
             f"(cell {cell['key'][:12]}, {cell['created_utc']})"))
    for seed in cell["config"]["eval_seeds"]:
        log.clear()
        wl = st["workload_fn"](seed)
        sim = make_sim(wl, st["cluster"], np.asarray(st["predict_fn"](wl)))
        run_router(sim, Tracing(), seed=seed)
        out = result_of(sim, label)
        a = np.array([x[0] for x in log])
        on = np.array([x[1] for x in log])
        m = on.shape[1]
        q = np.array([x[2] for x in log])[:, :m]
        chosen = on[np.arange(len(a)), a]
        lo, hi = on.min(1), on.max(1)
        spread = hi > lo
        share = np.bincount(a, minlength=m) / len(a) * m
        least, most = np.mean(chosen == lo), np.mean((chosen == hi) & spread)
        r_least = np.mean((on == lo[:, None]).sum(1) / m)
        r_most = np.mean((on == hi[:, None]).sum(1) / m * spread)
        gap = np.mean(np.ptp(q, 1) / np.abs(q).mean(1))
        print(f"episode {seed}: E2E {np.nanmean(out.e2e_s):6.2f} s, shares {np.round(share, 2)}, "
              f"to-least {least:.2f} (random {r_least:.2f}), to-most {most:.2f} "
              f"(random {r_most:.2f}), Q spread/|Q| {gap:.3f}, "
              f"preemptions {out.summary()['preemptions']}")
        inst = out.instance
        for i in range(m):
            sel = inst == i
            print(f"  instance {i}: requests {np.mean(sel) * m:.2f}x, prompt tokens "
                  f"{wl.prompt_tokens[sel].sum() / wl.prompt_tokens.sum() * m:.2f}x, output "
                  f"tokens {wl.output_tokens[sel].sum() / wl.output_tokens.sum() * m:.2f}x, "
                  f"mean output {wl.output_tokens[sel].mean():.0f} tokens, "
                  f"E2E {np.nanmean(out.e2e_s[sel]):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
