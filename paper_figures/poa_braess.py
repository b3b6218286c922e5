"""Figure: price of anarchy of the Braess network vs demand (reads results only).

Run:  .venv/bin/python paper_figures/poa_braess.py
Reads ``experiments/results/poa_braess/poa_vs_demand.json``; writes
``paper_figures/out/poa_braess.png``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lbtheory.io import save_figure_atomic
from lbtheory.plotting import POLICY_COLORS, figure

ROOT = Path(__file__).resolve().parents[1]
RES = ROOT / "experiments" / "results" / "poa_braess" / "poa_vs_demand.json"
OUT = ROOT / "paper_figures" / "out"


def main() -> None:
    rows = json.loads(RES.read_text())["results"]
    d = np.array([r["demand"] for r in rows])
    fig, (ax1, ax2) = figure(ncols=2, width=9.0, height=3.4)
    ax1.plot(d, [r["price_of_anarchy"] for r in rows], color=POLICY_COLORS["wardrop"])
    ax1.axhline(4 / 3, ls="--", color="0.5", lw=0.8, label="affine bound 4/3")
    ax1.set_xlabel("demand")
    ax1.set_ylabel("PoA = TSTT(UE) / TSTT(SO)")
    ax1.legend()
    per = {k: np.array([r[k] for r in rows]) / d for k in
           ("wardrop_tstt", "no_bridge_tstt", "system_optimum_tstt")}
    ax2.plot(d, per["wardrop_tstt"], color=POLICY_COLORS["wardrop"], label="UE with bridge")
    ax2.plot(d, per["no_bridge_tstt"], color="0.3", ls=":", label="UE without bridge")
    ax2.plot(d, per["system_optimum_tstt"], color=POLICY_COLORS["system_optimum"], ls="--",
             label="system optimum")
    ax2.set_xlabel("demand")
    ax2.set_ylabel("mean travel time per unit")
    ax2.legend(fontsize=8)
    fig.suptitle("Braess network (TNTP example costs)")
    save_figure_atomic(fig, OUT / "poa_braess.png")


if __name__ == "__main__":
    main()
