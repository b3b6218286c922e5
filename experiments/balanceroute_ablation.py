"""BalanceRoute ablation (issue 14): why BR-H(Oracle) loses to BR-0, piece by piece.

Run:  .venv/bin/python experiments/balanceroute_ablation.py [--requests N]

Writes ``experiments/results/balanceroute_ablation/ablation.json`` (atomically, with
:func:`lbtheory.io.run_manifest`): mean imbalance (tokens) of BR-0, JSQ and BR-H with the Oracle
predictor on the first ``N`` requests (default 4000) of the Azure conversation trace at G = 8
(32 slots, pool window 128, saturation replay), over

* ``grid``: H ∈ {0, 10, 40, 80, 160} × γ ∈ {0.9, 1} × β ∈ {1, G} (α = 1) for the current
  projection and for the all-projected one (running+placed margins, projected own load, exact
  lifetimes);
* ``pieces``: the 8 projections (a) margins ``placed``/``running`` × (b) own load
  ``constant``/``projected`` × (c) lifetime ``clamped``/``exact``, for every H at γ = 1, β = G;
* ``held_out``: the same prefix of the Azure *code* trace (not used to read the grid): BR-0, JSQ and
  BR-H(Oracle) at H = 80, γ ∈ {0.9, 1}, β = G, current vs all-projected.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from lbtheory.barrier import DecodeConfig, br0, brh, jsq, simulate_decode
from lbtheory.barrier.predictors import OraclePredictor
from lbtheory.barrier.schedulers import Lifetime, MarginSource, OwnLoad
from lbtheory.barrier.sim import decode_steps
from lbtheory.io import run_manifest, write_json_atomic
from lbtheory.workloads import read_trace

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_conv.csv"
HELD_OUT = ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_code.csv"
OUT = ROOT / "experiments" / "results" / "balanceroute_ablation"
G = 8
HORIZONS = [0, 10, 40, 80, 160]
GAMMAS = [0.9, 1.0]
BETAS = [1.0, float(G)]
CURRENT = (MarginSource.PLACED, OwnLoad.CONSTANT, Lifetime.CLAMPED)
PROJECTED = (MarginSource.PLACED, OwnLoad.PROJECTED, Lifetime.EXACT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=4000, help="trace prefix length")
    args = ap.parse_args()
    cfg = DecodeConfig(replicas=G)
    trace = read_trace(TRACE).head(args.requests)

    def imb(router, tr=trace) -> float:
        return round(simulate_decode(tr, router, config=cfg).summary()["mean_imbalance"], 1)

    def brh_imb(H: int, gamma: float, beta: float, proj: tuple, tr=trace) -> float:
        m, o, lt = proj
        steps = decode_steps(tr)
        return imb(brh(lambda: OraclePredictor(steps), horizon=H, gamma=gamma, alpha=1.0,
                       beta=beta, margins=m, own_load=o, lifetime=lt), tr)

    grid = []
    for proj, H, gamma, beta in itertools.product([CURRENT, PROJECTED], HORIZONS, GAMMAS, BETAS):
        grid.append({"margins": proj[0].value, "own_load": proj[1].value,
                     "lifetime": proj[2].value, "H": H, "gamma": gamma, "beta": beta,
                     "mean_imbalance": brh_imb(H, gamma, beta, proj)})
    pieces = []
    for proj in itertools.product(MarginSource, OwnLoad, Lifetime):
        row = {"margins": proj[0].value, "own_load": proj[1].value, "lifetime": proj[2].value}
        row.update({f"H={H}": brh_imb(H, 1.0, float(G), proj) for H in HORIZONS})
        pieces.append(row)
    code = read_trace(HELD_OUT).head(args.requests)
    held_out = {"trace": HELD_OUT.name, "requests": len(code), "br0": imb(br0(), code),
                "jsq": imb(jsq(), code),
                "brh_oracle_H80": [{"projection": name, "gamma": gamma,
                                    "mean_imbalance": brh_imb(80, gamma, float(G), proj, code)}
                                   for name, proj in (("current", CURRENT),
                                                      ("projected", PROJECTED))
                                   for gamma in GAMMAS]}
    config = {"trace": TRACE.name, "requests": len(trace), "predictor": "oracle", "alpha": 1.0,
              **cfg.to_dict()}
    out = {"config": config, "manifest": run_manifest(config, seed=0),
           "reference": {"br0": imb(br0()), "jsq": imb(jsq())},
           "grid": grid, "pieces": pieces, "held_out": held_out}
    write_json_atomic(OUT / "ablation.json", out)


if __name__ == "__main__":
    main()
