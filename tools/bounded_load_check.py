"""Where the bounded-loads cap of the routing environment can bind (issue 22).

The cap (``EnvConfig.balance_factor``, :func:`lbtheory.intelligent._envkernels.fill_mask`)
closes an instance only while it is full and holds ⌈c (n + 1) / m⌉ or more of the n requests
on the instances. This tool counts, on a table's first evaluation episodes, the decisions at
which some instance is full and at which the cap closes one, under round robin, random and
JSQ routing; and with ``--retrain CELL.json`` re-runs a cached RL cell of
``experiments/intelligent_router.py`` with the current code and compares its evaluation with
the cached one bit for bit (a table where the cap never binds keeps its results).

Run:  .venv/bin/python tools/bounded_load_check.py k4 k5 k5-chunked k7 k8
      .venv/bin/python tools/bounded_load_check.py --retrain experiments/results/.../cells/X.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))

import intelligent_router as ir  # noqa: E402

from lbtheory.intelligent import RoutingEnv, _core  # noqa: E402
from lbtheory.intelligent._envkernels import is_full  # noqa: E402


def count(table: str, episodes: int) -> None:
    """Print, per policy, decisions / with a full instance / with an instance closed."""
    conf = {**ir.TABLES[table], "fit_requests": ir.BUDGET["full"]["fit_requests"]}
    st = ir._setup(conf)
    env = RoutingEnv(st["workload_fn"], st["cluster"], st["env"], st["predict_fn"])
    m = conf["instances"]
    for pol in ("rr", "random", "jsq"):
        rng = np.random.default_rng(0)
        total = any_full = closed = 0
        for ep in range(episodes):
            _, info = env.reset(seed=ir.EVAL_SEED0 + ep)
            done = trunc = False
            k = 0
            while not (done or trunc):
                mi, gi = env.sim.state.mi, env.sim.state.gi
                kv = mi[_core.KV_USED] + mi[_core.WAIT_TOK]
                any_full += any(is_full(mi[_core.N_ON][i], kv[i], gi[_core.MAX_BATCH],
                                        gi[_core.BUDGET]) for i in range(m))
                closed += not info["action_mask"][:m].all()
                total += 1
                a = (k % m if pol == "rr" else int(rng.integers(m)) if pol == "random"
                     else int(np.argmin(mi[_core.N_ON])))
                k += 1
                _, _, done, trunc, info = env.step(a)
        print(f"{table:11s} {pol:7s} decisions {total:6d}  an instance full {any_full:6d}  "
              f"cap closes one {closed:6d}", flush=True)


def retrain(path: Path) -> int:
    """Re-run a cached RL cell; 0 when its evaluation is bit-identical, 1 otherwise."""
    cached = json.loads(path.read_text())
    fresh = ir.rl_run(cached["config"])
    same = fresh["eval"] == cached["result"]["eval"]
    worst = max(max(v["shares"]) for v in fresh["eval"].values())
    print(f"{path.name[:12]}: {cached['config']['router']} seed "
          f"{cached['config']['train_seed']}: evaluation "
          f"{'bit-identical' if same else 'DIFFERS'} (max share {worst:.2f})")
    return 0 if same else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tables", nargs="*", help=f"tables of {sorted(ir.TABLES)}")
    ap.add_argument("--episodes", type=int, default=3, help="evaluation episodes (default 3)")
    ap.add_argument("--retrain", type=Path, help="a cached RL cell to re-run and compare")
    a = ap.parse_args()
    bad = [t for t in a.tables if t not in ir.TABLES]
    if bad:
        print(f"unknown table(s) {bad}; expected some of {sorted(ir.TABLES)}", file=sys.stderr)
        return 2
    for t in a.tables:
        count(t, a.episodes)
    return retrain(a.retrain) if a.retrain else 0


if __name__ == "__main__":
    sys.exit(main())
