"""Figures for BalanceRoute from ``experiments/results/`` (reads results only).

Run:  .venv/bin/python paper_figures/balanceroute.py [--results DIR] [--out DIR]
Reads, under the results root (default the committed ``experiments/results``),
``balanceroute/{scaling,load_traces,horizon}.json`` (``experiments/balanceroute.py``) and,
when present, ``balanceroute-tables/tables.json`` and ``balanceroute-ablation/ablation.json``
(``experiments/balanceroute_tables.py``, ``experiments/balanceroute_ablation.py``; a missing one
is skipped with one line on stderr). Writes ``balanceroute_scaling.png``,
``balanceroute_load_traces.png``, ``balanceroute_horizon.png``, ``balanceroute_tables.png`` and
``balanceroute_ablation.png`` into ``--out`` (default ``paper_figures/out``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib.ticker
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _figcli, also when loaded by path
from _figcli import OUT, RESULTS, MissingResults, require, run, save  # noqa: E402

from lbtheory.plotting import POLICY_COLORS, figure  # noqa: E402

#: results files under the results root: (files, sweep, minutes on 2 cores)
MAIN = (("balanceroute/scaling.json", "balanceroute/load_traces.json",
         "balanceroute/horizon.json"), "balanceroute", 1.5)
TABLES = (("balanceroute-tables/tables.json",), "balanceroute-tables", 20)
ABLATION = (("balanceroute-ablation/ablation.json",), "balanceroute-ablation", 15)


#: marker and line style per policy: baselines dashed with distinct markers, BalanceRoute solid
STYLES: dict[str, tuple[str, str]] = {
    "random": ("v", "--"), "rr": ("s", "--"), "p2c": ("D", "--"), "jsq": ("^", "--"),
    "jsq-tokens": ("P", "--"), "br0": ("o", "-"), "brh-oracle": ("X", "-"),
    "brh-survival": ("*", "-"), "brh-exactmatch": ("d", ":"),
}


def scaling(path: Path, out: Path) -> Path:
    res = json.loads(path.read_text())["results"]
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
    return save(fig, out / "balanceroute_scaling.png")


def load_traces(path: Path, out: Path) -> Path:
    res = json.loads(path.read_text())["results"]
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
    return save(fig, out / "balanceroute_load_traces.png")


def _horizon_caption(res: dict, Hs: list[int]) -> str:
    """The caption's numbers, computed from the results (never typed)."""
    br0 = res["0"]["brh-oracle"]  # BR-H with H = 0 makes exactly BR-0's decisions (tested)
    ratio = {h: res[str(h)]["brh-oracle"] / br0 for h in Hs}
    short = [h for h in Hs if 0 < h <= 5]
    best = min((h for h in Hs if h > 0), key=lambda h: ratio[h])
    lines = ["BR-H is deterministic: every point is reproducible, not noise."]
    if short:
        lines.append(f"Short horizons (H = {', '.join(map(str, short))}) give "
                     f"{min(ratio[h] for h in short):.2f}–{max(ratio[h] for h in short):.2f}× "
                     f"BR-0's imbalance: the projected margins count only requests already in "
                     f"flight,")
        lines.append("so a replica whose requests finish within H steps looks empty although "
                     "its slots are refilled next tick (notebook 05).")
    lines.append(f"Oracle's best horizon is H = {best} ({ratio[best]:.2f}× BR-0); at the seed's "
                 f"H = {Hs[-1]} it is {ratio[Hs[-1]]:.2f}× BR-0 — the seed reports BR-H < BR-0, "
                 f"not reproduced here.")
    return "\n".join(lines)


def horizon(path: Path, out: Path) -> Path:
    res = json.loads(path.read_text())["results"]
    Hs = sorted(int(h) for h in res)
    fig, ax = figure()
    for pol in ("brh-oracle", "brh-survival"):
        marker, ls = STYLES[pol]
        ax.plot(Hs, [res[str(h)][pol] for h in Hs], marker=marker, ls=ls, label=pol,
                color=POLICY_COLORS[pol])
    ax.axhline(res["0"]["brh-oracle"], color=POLICY_COLORS["br0"], ls=":", lw=1.2,
               label="br0 (= BR-H at H = 0)")
    ax.set_xlabel("look-ahead horizon H (decode steps)")
    ax.set_ylabel(r"mean imbalance $\bar I$ (tokens)")
    ax.set_title("BR-H horizon sweep, G = 8, Azure conv trace", fontsize=9)
    ax.legend(fontsize=8)
    fig.text(0.5, -0.02, _horizon_caption(res, Hs), ha="center", va="top", fontsize=8,
             color="0.3")
    return save(fig, out / "balanceroute_horizon.png")


def tables(path: Path, out: Path) -> Path:
    """Mean imbalance vs G on both traces: whole trace (markers) and 95 % CI over windows."""
    table = json.loads(path.read_text())["table"]
    fig, axes = figure(nrows=1, ncols=len(table), width=10.5, height=3.8, sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (trace, by_g) in zip(axes, table.items()):
        Gs = sorted(int(g) for g in by_g)
        for pol in by_g[str(Gs[0])]:
            marker, ls = STYLES.get(pol, ("o", "-"))
            whole = [by_g[str(g)][pol]["whole"]["mean_imbalance"] for g in Gs]
            win = [by_g[str(g)][pol]["mean_imbalance_windows"] for g in Gs]
            ax.plot(Gs, whole, marker=marker, ls=ls, ms=6, mfc="none", lw=1.2, label=pol,
                    color=POLICY_COLORS.get(pol))
            ax.errorbar(Gs, [w["mean"] for w in win], yerr=[w["half_width"] for w in win],
                        fmt="none", lw=0.8, capsize=2, color=POLICY_COLORS.get(pol), alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(Gs, [str(g) for g in Gs])
        ax.set_xlabel("decode replicas G")
        ax.set_title(f"Azure {trace} trace (2023), saturation replay", fontsize=9)
    axes[0].set_ylabel(r"mean imbalance $\bar I$ (tokens)")
    axes[-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5),
                    title="policy (dashed: baselines)", title_fontsize=8)
    first = next(iter(next(iter(table.values())).values()))
    n = int(next(iter(first.values()))["mean_imbalance_windows"]["n"])
    fig.text(0.5, -0.04, f"markers: whole trace; bars: mean ± 95 % t-interval over {n} disjoint "
             "request windows (clipped at the axis)", ha="center", va="top", fontsize=8,
             color="0.3")
    return save(fig, out / "balanceroute_tables.png")


def ablation(path: Path, out: Path) -> Path:
    """BR-H(Oracle) / BR-0 mean imbalance per factor value, one factor at a time, both traces."""
    data = json.loads(path.read_text())
    cells = [c for c in data["cells"] if c["config"]["min_output"] is None]
    base = data["config"]["base"]
    traces = list(dict.fromkeys(c["config"]["trace"] for c in cells))
    panels = [("H", "horizon H (steps)"), ("gamma", r"discount $\gamma$"),
              ("beta_over_G", r"penalty $\beta / G$"), ("alpha", r"reward weight $\alpha$")]
    fig, axes = figure(nrows=1, ncols=len(panels), width=12, height=3.4, sharey=True)
    for ax, (factor, label) in zip(axes, panels):
        for ti, (trace, marker) in enumerate(zip(traces, ("o", "s"))):
            for pi, (proj, ls, name) in enumerate((
                    ({}, "-", "seed projection"),
                    ({"own_load": "projected", "lifetime": "exact", "refill": "pool-mean"}, "--",
                     "all-projected + refill"))):
                want = base | proj
                pts = sorted((c["config"][factor], c["over_br0"]) for c in cells
                             if c["config"]["trace"] == trace and c["config"]["policy"] == "brh"
                             and all(c["config"][k] == v for k, v in want.items()
                                     if k != factor))
                if len(pts) > 1:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, ls=ls,
                            mfc="none", label=f"{trace}, {name}", color=f"C{2 * ti + pi}")
        ax.axhline(1.0, color="0.4", lw=0.8, ls=":")
        ax.set_xlabel(label)
        ax.set_yscale("log")
    ticks = [0.5, 0.75, 1, 1.5, 2, 4, 8]
    axes[0].set_yticks(ticks, [f"{t:g}" for t in ticks])
    axes[0].yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes[0].set_ylabel("BR-H(Oracle) / BR-0 imbalance")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 0.98), ncol=4)
    fig.text(0.5, -0.04, "G = 8, whole traces; below the dotted line BR-H beats BR-0; other "
             "factors at the seed's defaults (H = 80, γ = 1, β = G, α = 1)", ha="center",
             va="top", fontsize=8, color="0.3")
    return save(fig, out / "balanceroute_ablation.png")


def main(results: Path = RESULTS, out: Path = OUT) -> list[Path]:
    """Draw every figure whose results exist under ``results`` into ``out``; returns the PNGs'
    paths. The three ``balanceroute`` files must exist; tables and ablation are optional."""
    files, sweep, minutes = MAIN
    sc, lt, hz = require(results, *files, sweep=sweep, minutes=minutes)
    out = Path(out)
    written = [scaling(sc, out), load_traces(lt, out), horizon(hz, out)]
    for (files, sweep, minutes), draw in ((TABLES, tables), (ABLATION, ablation)):
        try:
            (path,) = require(results, *files, sweep=sweep, minutes=minutes)
        except MissingResults as exc:
            print(f"skipped: {exc}", file=sys.stderr)
            continue
        written.append(draw(path, out))
    return written


if __name__ == "__main__":
    run(main, __doc__)
