"""Figure: stability chart of flow routing — stepsize vs mean network delay (reads results only).

Run:  .venv/bin/python paper_figures/stability_chart.py [--results DIR] [--out DIR]
Reads ``stability-chart/stability_chart.json`` under the results root (default the committed
``experiments/results``); writes ``stability_chart.png`` into ``--out`` (default
``paper_figures/out``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullFormatter

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _figcli, also when loaded by path
from _figcli import OUT, RESULTS, require, run, save  # noqa: E402

from lbtheory.plotting import figure  # noqa: E402

#: η is in 1/(cost unit·s); the gradient cost here is in seconds, so 1/s² (as ``stepsize --help``)
ETA_LABEL = "stepsize η (1/(cost unit·s) = 1/s²)"


def main(results: Path = RESULTS, out: Path = OUT) -> Path:
    """Draw the figure from ``results`` into ``out``; returns the PNG's path."""
    (res,) = require(results, "stability-chart/stability_chart.json", sweep="stability-chart",
                     minutes=0.5)
    data = json.loads(res.read_text())
    fig, (ax1, ax2, ax3) = figure(ncols=3, width=13.0, height=3.8)
    fig.subplots_adjust(wspace=0.4)  # room for the y labels; legends sit below each panel
    sym = data["symmetric"]
    tau = np.array([r["mean_delay"] for r in sym])
    ax1.fill_between(tau, [r["lower_bound"] for r in sym], [r["upper_bound"] for r in sym],
                     color="0.85", label="§7.5 bounds a/T … (π/2)a/T")
    ax1.plot(tau, [r["critical"] for r in sym], "k-", label="exact threshold (collocation)")
    ax1.plot(tau, [r["closed_form"] for r in sym], "kx", ms=5, label="closed form θ tan θ = aT")
    ax1.plot(tau, [r["rule"] for r in sym], "b--", lw=1, label="empirical rule (not a theorem)")
    p = data["practice"]["symmetric"]
    ax1.plot(tau, p["kappa"] / tau, "m:", label=f"DLB practice η = {p['kappa']:.3g}/τ")
    for r in sym:
        for s in r["simulated"]:
            ok = s["verdict"] == "converges"
            ax1.plot(r["mean_delay"], s["stepsize"], "o" if ok else "^", ms=6,
                     color="tab:green" if ok else "tab:red", mfc="none")
    ax1.plot([], [], "o", color="tab:green", mfc="none", label="fluid run: converges")
    ax1.plot([], [], "^", color="tab:red", mfc="none", label="fluid run: oscillates")
    ax1.set(xscale="log", yscale="log", xlabel="one-way delay τ (s)",
            ylabel=ETA_LABEL, title="symmetric two cells (§7.5)")
    ax1.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.2))

    sc = [r for r in data["scaled"] if "critical" in r]
    md = np.array([r["mean_delay"] for r in sc])
    ax2.plot(md, [r["critical"] for r in sc], "k-o", ms=3, label="exact threshold")
    ax2.plot(md, [r["rule"] for r in sc], "b--", lw=1, label="empirical rule")
    p = data["practice"]["scaled"]
    ax2.plot(md, p["kappa"] / md, "m:", label="DLB practice κ/mean delay")
    ax2.set(xscale="log", yscale="log", xlabel="rate-weighted mean one-way delay (s)",
            ylabel=ETA_LABEL, title="random 4-cell network, delays scaled")
    ax2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.2))

    colors = {"gradient": "tab:green", "gradient-bipartite": "tab:olive", "latency": "tab:red",
              "rif": "tab:blue"}
    allr = [x for v in data["survey"].values() for x in v["ratios"]]
    bins = np.geomspace(min(min(allr), 0.9), max(allr) * 1.1, 25) if allr else 10
    for cost, v in data["survey"].items():
        if v["ratios"]:
            ax3.hist(v["ratios"], bins=bins, histtype="step", color=colors.get(cost, "k"),
                     label=f"{cost}: {v['rule_below_critical']}/{v['instances']} safe")
    ax3.axvline(1.0, color="k", lw=0.8, ls="--",
                label="ratio 1: rule = threshold (left of it the rule is unsafe)")
    ax3.set(xscale="log", xlabel="exact threshold / empirical rule (dimensionless)",
            ylabel="instances (count)", title="random topologies")
    ax3.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.2))
    for ax in (ax1, ax2, ax3):
        ax.xaxis.set_minor_formatter(NullFormatter())
    return save(fig, Path(out) / "stability_chart.png")


if __name__ == "__main__":
    run(main, __doc__)
