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


def scaling() -> None:
    res = _load("scaling.json")["results"]
    Gs = sorted(int(g) for g in res)
    fig, ax = figure()
    for pol in res[str(Gs[0])]:
        ax.plot(Gs, [res[str(g)][pol]["mean_imbalance"] for g in Gs], "o-", label=pol,
                color=POLICY_COLORS.get(pol))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(Gs, [str(g) for g in Gs])
    ax.set_xlabel("replicas G")
    ax.set_ylabel("mean imbalance I(k) (tokens)")
    ax.set_title("Azure conv trace, saturation replay")
    ax.legend(fontsize=7, ncol=2)
    save_figure_atomic(fig, OUT / "balanceroute_scaling.png")


def load_traces() -> None:
    res = _load("load_traces.json")["results"]
    fig, axes = figure(nrows=1, ncols=2, width=10, height=3.6, sharey=True)
    for ax, pol in zip(axes, ("jsq", "br0")):
        L = np.asarray(res[pol]["loads"], dtype=float)
        k = res[pol]["first_step"] + np.arange(L.shape[0])
        ax.plot(k, L / 1e3, lw=0.7)
        ax.set_title(f"{pol}: mean imbalance {res[pol]['mean_imbalance']:,.0f} tokens")
        ax.set_xlabel("decode step k")
    axes[0].set_ylabel("load L_g (k tokens)")
    save_figure_atomic(fig, OUT / "balanceroute_load_traces.png")


def horizon() -> None:
    res = _load("horizon.json")["results"]
    Hs = sorted(int(h) for h in res)
    fig, ax = figure()
    for pol in ("brh-oracle", "brh-survival"):
        ax.plot(Hs, [res[str(h)][pol] for h in Hs], "o-", label=pol, color=POLICY_COLORS[pol])
    ax.set_xlabel("horizon H (steps)")
    ax.set_ylabel("mean imbalance (tokens), G = 8")
    ax.legend()
    save_figure_atomic(fig, OUT / "balanceroute_horizon.png")


if __name__ == "__main__":
    scaling()
    load_traces()
    horizon()
