"""Figure: the six DLB policies in the delayed fluid model, flow converging vs discrete herding.

Reads ``fluid-six-policies/results.json`` under the results root (default the committed
``experiments/results``) and writes ``fluid_six_policies.png``: N_c1(t) − N*_c1 for every delay,
one panel per (mechanism, cost), and the late oscillation amplitude against the delay.

Run:  .venv/bin/python paper_figures/fluid_six_policies.py [--results DIR] [--out DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _figcli, also when loaded by path
from _figcli import OUT, RESULTS, require, run, save  # noqa: E402

from lbtheory.plotting import figure  # noqa: E402

WINDOW_S = 30.0


def main(results: Path = RESULTS, out: Path = OUT) -> Path:
    """Draw the figure from ``results`` into ``out``; returns the PNG's path."""
    (res,) = require(results, "fluid-six-policies/results.json", sweep="fluid-six-policies",
                     minutes=0.3)
    data = json.loads(res.read_text())
    runs = data["runs"]
    costs = list(dict.fromkeys(r["cost"] for r in runs))
    delays = sorted({r["delay"] for r in runs})
    fig, axes = figure(nrows=3, ncols=3, width=10.0, height=7.5, sharey="row")
    top = {"flow": 0.0, "discrete": 0.0}  # the largest |deviation| of each row: nothing clipped
    for col, cost in enumerate(costs):
        for row, mech in enumerate(("flow", "discrete")):
            ax = axes[row, col]
            # longest delay first, so the small oscillations of short delays are drawn on top
            for k, d in reversed(list(enumerate(delays))):
                r = next(r for r in runs if (r["cost"], r["mechanism"], r["delay"]) ==
                         (cost, mech, d))
                t = np.asarray(r["t"])
                keep = t <= WINDOW_S
                dev = np.asarray(r["workload"])[keep, 0] - r["equilibrium_workload"][0]
                top[mech] = max(top[mech], float(np.abs(dev).max()))
                ax.plot(t[keep], dev, lw=0.8, color=f"C{k}", label=f"τ = {1e3 * d:g} ms")
            ax.set_title(f"{mech} · {cost}", fontsize=9)
            ax.set_xlabel("t (s)")
            if col == 0:
                ax.set_ylabel(r"$N_{c1} - N^*_{c1}$ (requests)")
        ax = axes[2, col]
        for mech, marker in (("flow", "o-"), ("discrete", "s--")):
            amp = [next(r["tail_amplitude"] for r in runs
                        if (r["cost"], r["mechanism"], r["delay"]) == (cost, mech, d))
                   for d in delays]
            ax.plot(1e3 * np.asarray(delays), amp, marker, label=mech)
        ax.set_xlabel("one-way delay τ (ms)")
        if col == 0:
            ax.set_ylabel(r"late peak-to-peak $N_{c1}$ (requests)")
        ax.legend(fontsize=7)
    for row, mech in enumerate(("flow", "discrete")):
        axes[row, 0].set_ylim(-1.05 * top[mech], 1.05 * top[mech])
    handles, labels = axes[0, 0].get_legend_handles_labels()
    axes[0, 0].legend(handles[::-1], labels[::-1], fontsize=7, ncol=2)
    fig.suptitle("Delayed fluid model: flow routing converges, discrete routing herds "
                 "(amplitude ∝ delay)", fontsize=10)
    fig.tight_layout()
    return save(fig, Path(out) / "fluid_six_policies.png")


if __name__ == "__main__":
    run(main, __doc__)
