"""Figure: price of anarchy of the Braess network vs demand (reads results only).

Run:  .venv/bin/python paper_figures/poa_braess.py [--results DIR] [--out DIR]
Reads ``poa-braess/poa_vs_demand.json`` under the results root (default the committed
``experiments/results``); writes ``poa_braess.png`` into ``--out`` (default
``paper_figures/out``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _figcli, also when loaded by path
from _figcli import OUT, RESULTS, require, run, save  # noqa: E402

from lbtheory.plotting import POLICY_COLORS, figure  # noqa: E402


def main(results: Path = RESULTS, out: Path = OUT) -> Path:
    """Draw the figure from ``results`` into ``out``; returns the PNG's path."""
    (res,) = require(results, "poa-braess/poa_vs_demand.json", sweep="poa-braess", minutes=0.3)
    rows = json.loads(res.read_text())["results"]
    d = np.array([r["demand"] for r in rows])
    fig, (ax1, ax2) = figure(ncols=2, width=9.0, height=3.4)
    ax1.plot(d, [r["price_of_anarchy"] for r in rows], color=POLICY_COLORS["wardrop"],
             label="PoA (Wardrop / optimum)")
    ax1.axhline(4 / 3, ls="--", color="0.5", lw=0.8, label="affine bound 4/3")
    ax1.set_xlabel("total demand d (vehicles per unit time)")
    ax1.set_ylabel(r"PoA = $\mathrm{TSTT(UE)}\,/\,\mathrm{TSTT(SO)}$")
    ax1.legend(loc="center right", fontsize=8)
    per = {k: np.array([r[k] for r in rows]) / d for k in
           ("wardrop_tstt", "no_bridge_tstt", "system_optimum_tstt")}
    ax2.plot(d, per["wardrop_tstt"], color=POLICY_COLORS["wardrop"], label="UE with bridge")
    ax2.plot(d, per["no_bridge_tstt"], color="0.3", ls=":", label="UE without bridge")
    ax2.plot(d, per["system_optimum_tstt"], color=POLICY_COLORS["system_optimum"], ls="--",
             label="system optimum")
    ax2.set_xlabel("total demand d (vehicles per unit time)")
    ax2.set_ylabel("mean travel time TSTT/d (time units)")
    ax2.legend(fontsize=8)
    fig.suptitle("Braess network (TNTP example costs): flow in vehicles per unit time, travel "
                 "time in time units")
    # the kinks are real: the set of used paths changes with d (bridge unused at low demand,
    # then used by every traveller, then partly used); between kinks the curve is smooth
    fig.text(0.5, -0.02, "Kinks in the PoA curve mark demands where the set of used paths "
             "changes (the bridge path enters or leaves use); between them the curve is smooth.",
             ha="center", va="top", fontsize=8, color="0.3")
    return save(fig, Path(out) / "poa_braess.png")


if __name__ == "__main__":
    run(main, __doc__)
