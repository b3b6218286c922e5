"""Figures for BalanceRoute from ``experiments/results/balanceroute/`` (reads results only).

Run:  .venv/bin/python paper_figures/balanceroute.py
Writes ``paper_figures/out/balanceroute_scaling.png``, ``balanceroute_load_traces.png`` and
``balanceroute_horizon.png``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lbtheory.io import save_figure_atomic
from lbtheory.plotting import POLICY_COLORS, figure

ROOT = Path(__file__).resolve().parents[1]
RES = ROOT / "experiments" / "results" / "balanceroute"
OUT = ROOT / "paper_figures" / "out"


def _load(name: str) -> dict:
    return json.loads((RES / name).read_text())


#: marker and line style per policy: baselines dashed with distinct markers, BalanceRoute solid
STYLES: dict[str, tuple[str, str]] = {
    "random": ("v", "--"), "rr": ("s", "--"), "p2c": ("D", "--"), "jsq": ("^", "--"),
    "jsq-tokens": ("P", "--"), "br0": ("o", "-"), "brh-oracle": ("X", "-"),
    "brh-survival": ("*", "-"),
}


def scaling() -> None:
    res = _load("scaling.json")["results"]
    Gs = sorted(int(g) for g in res)
    fig, ax = figure(width=6.8)
    for pol in res[str(Gs[0])]:
        marker, ls = STYLES.get(pol, ("o", "-"))
        ax.plot(Gs, [res[str(g)][pol]["mean_imbalance"] for g in Gs], marker=marker, ls=ls,
                ms=6, mfc="none", lw=1.2, label=pol, color=POLICY_COLORS.get(pol))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(Gs, [str(g) for g in Gs])
    ax.set_xlabel("decode replicas G")
    ax.set_ylabel(r"mean imbalance $\bar I$ (tokens)")
    ax.set_title("Azure conv trace, saturation replay")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5),
              title="policy (dashed: baselines)", title_fontsize=8)
    save_figure_atomic(fig, OUT / "balanceroute_scaling.png")


def load_traces() -> None:
    res = _load("load_traces.json")["results"]
    fig, axes = figure(nrows=1, ncols=2, width=10, height=3.6, sharey=True)
    lines = []
    for ax, pol in zip(axes, ("jsq", "br0")):
        L = np.asarray(res[pol]["loads"], dtype=float)
        k = res[pol]["first_step"] + np.arange(L.shape[0])
        lines = ax.plot(k, L / 1e3, lw=0.7)
        ax.set_title(f"{pol}: mean imbalance {res[pol]['mean_imbalance']:,.0f} tokens",
                     fontsize=9)
        ax.set_xlabel("decode step k")
    axes[0].set_ylabel(r"KV load $L_g(k)$ (thousand tokens)")
    fig.legend(lines, [f"replica {g}" for g in range(len(lines))], loc="lower center",
               bbox_to_anchor=(0.5, -0.1), ncol=len(lines), fontsize=8)
    save_figure_atomic(fig, OUT / "balanceroute_load_traces.png")


def horizon() -> None:
    res = _load("horizon.json")["results"]
    Hs = sorted(int(h) for h in res)
    fig, ax = figure()
    for pol in ("brh-oracle", "brh-survival"):
        marker, ls = STYLES[pol]
        ax.plot(Hs, [res[str(h)][pol] for h in Hs], marker=marker, ls=ls, label=pol,
                color=POLICY_COLORS[pol])
    ax.set_xlabel("look-ahead horizon H (decode steps)")
    ax.set_ylabel(r"mean imbalance $\bar I$ (tokens)")
    ax.set_title("BR-H horizon sweep, G = 8, Azure conv trace", fontsize=9)
    ax.legend()
    # measured, not noise: BR-H is deterministic (no seed); on the first 3000 requests of this
    # trace H = 2 and H = 5 give ~2x the imbalance of H = 0 (BR-0) and of H >= 10
    fig.text(0.5, -0.02, "BR-H is deterministic: the bump at short horizons (H = 2-5) is "
             "reproducible, not noise. Our reading (notebook 05):\nthe projected margins count "
             "only requests already in flight, so a replica whose requests finish within H steps\n"
             "looks empty although its slots are refilled next tick; longer horizons dilute "
             "this bias.", ha="center", va="top", fontsize=8, color="0.3")
    save_figure_atomic(fig, OUT / "balanceroute_horizon.png")


if __name__ == "__main__":
    scaling()
    load_traces()
    horizon()
