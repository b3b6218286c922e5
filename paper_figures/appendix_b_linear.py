"""Figure of experiment 7 as a test of the linear theory (reads results only; never simulates).

Run:  .venv/bin/python paper_figures/appendix_b_linear.py [--results DIR] [--out DIR]
Reads ``experiments/results/appendix-b-linear/summary.json`` (``experiments/appendix_b_linear.py``)
and, for the last panel, the ``appendix-b-eta/summary.json``; writes
``paper_figures/out/appendix_b_linear.png``. Panels: (a) decay rate σ and (b) frequency ω of
the transient after the weight step against η/η_crit — the linearised model's rightmost root
(line) and the fits of the mean response over seeds (points, ± jackknife standard error), the
onset of sustained oscillation where the predicted σ crosses 0; (c) the mean weight response
at each stepsize beside the predicted mode; (d) the earlier oscillation measure (spectral
peak of the workloads relative to Rand's, median over the Appendix-B scenarios) against η/η_crit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _figcli, also when loaded by path
from _figcli import OUT, RESULTS, require, run, save  # noqa: E402

from lbtheory.plotting import figure, policy_color  # noqa: E402

RES = RESULTS
SIGNALS = {"weights": ("o", "weights y(t)"), "workloads": ("s", "workloads n(t)")}


def _panel_rates(ax, s: dict, key: str, label: str) -> None:
    c = s["predicted_curve"]
    ax.plot([p["factor"] for p in c], [p[key] for p in c], "k-", lw=1.5,
            label="linearised model (rightmost root)")
    for name, (marker, text) in SIGNALS.items():
        x = [p["factor"] * (0.985 if name == "weights" else 1.015) for p in s["points"]]
        y = [p["measured"][name][key] for p in s["points"]]
        e = [p["measured"][name][f"{key}_jackknife_se"] or 0.0 for p in s["points"]]
        ok = [v is not None for v in y]
        ax.errorbar(np.array(x)[ok], np.array(y, dtype=float)[ok], yerr=np.array(e)[ok],
                    fmt=marker, ms=5, capsize=2, mfc="white" if name == "workloads" else None,
                    color="C0" if name == "weights" else "C3",
                    label=f"simulated, fitted: {text}")
    ax.axvline(1.0, color="grey", ls=":", lw=1)
    ax.set_xlabel("η / η_crit")
    ax.set_ylabel(label)


def _panel_series(ax, s: dict) -> None:
    pts = s["points"]
    cmap = __import__("matplotlib").colormaps["viridis"]
    for k, p in enumerate(pts):
        t = np.asarray(p["mean_series"]["t"])
        y = np.asarray(p["mean_series"]["y"])
        off = -0.35 * k
        col = cmap(0.85 * k / max(1, len(pts) - 1))
        ax.plot(t, y + off, color=col, lw=0.8)
        a = s["system"]["step"]
        pr = p["predicted"]
        tt = t[t >= 0]
        ax.plot(tt, off + a * np.exp(-pr["decay"] * tt) * np.cos(pr["frequency"] * tt), "k--",
                lw=0.6)
        ax.text(t[0], off + 0.03, f"{p['factor']:g} η_crit", fontsize=7, color=col)
    ax.set_xlabel("time after the step (s)")
    ax.set_ylabel("mean weight deviation y (offset per η)")
    ax.set_ylim(-0.35 * len(pts) + 0.1, 0.3)
    ax.set_title("(c) mean response (colour) vs the predicted mode a·exp(−σt)·cos(ωt) (dashed)",
                 fontsize=9)


def _panel_spectral(ax, eta: dict | None, s: dict) -> None:
    if eta is not None:
        for pol in sorted({p["policy"] for p in eta["points"]}):
            rules = sorted({p["rule"] for p in eta["points"]
                            if p["policy"] == pol and p["rule"] != "dlb"}, key=float)
            med = [float(np.median([p["peak_ratio"] for p in eta["points"]
                                    if p["policy"] == pol and p["rule"] == r
                                    and p["peak_ratio"] is not None])) for r in rules]
            ax.plot([float(r) for r in rules], med, "o-", color=policy_color(pol), label=pol)
    ax.axvline(1.0, color="grey", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("η / η_crit")
    ax.set_ylabel("spectral peak of workloads / Rand's (median)")
    ax.set_title("(d) workload oscillation vs Rand on the Appendix-B scenarios (full profile)",
                 fontsize=9)
    ax.legend(fontsize=7)


def draw(results: Path, out: Path) -> Path:
    """The figure from ``results`` into ``out`` (MissingResults names the sweep when the
    summary is missing)."""
    [p] = require(results, "appendix-b-linear/summary.json", sweep="appendix-b-linear",
                  minutes=15)
    s = json.loads(p.read_text(encoding="utf-8"))
    q = results / "appendix-b-eta" / "summary.json"
    eta = json.loads(q.read_text(encoding="utf-8")) if q.is_file() else None
    sy = s["system"]
    fig, axes = figure(nrows=2, ncols=2, width=12.0, height=9.0)
    ax = axes.ravel()
    _panel_rates(ax[0], s, "decay", "decay rate σ (1/s)")
    ax[0].axhline(0.0, color="grey", lw=0.6)
    ax[0].axvspan(1.0, max(p["factor"] for p in s["predicted_curve"]), color="C1", alpha=0.08,
                  label="predicted sustained oscillation (σ < 0)")
    ax[0].set_title("(a) decay rate of the transient after the weight step", fontsize=9)
    ax[0].legend(fontsize=7)
    _panel_rates(ax[1], s, "frequency", "frequency ω (rad/s)")
    ax[1].set_title("(b) frequency of the transient", fontsize=9)
    _panel_series(ax[2], s)
    _panel_spectral(ax[3], eta, s)
    fig.suptitle(f"Experiment 7 as a test of the linear theory — two rate-server cells ×"
                 f"{sy['scale']:g}, τ = {1e3 * sy['tau_s']:g} ms, probes every "
                 f"{1e3 * sy['probe_period_s']:g} ms, gradient cost, weight step "
                 f"{sy['step']:g} at t = {sy['t_step']:g} s; η_crit = {sy['eta_crit']:.3g} "
                 f"(profile {s['profile']}, {s['points'][0]['runs']} seeds per η)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return save(fig, Path(out) / "appendix_b_linear.png")


def main(results: Path = RESULTS, out: Path = OUT) -> Path:
    """Write the figure from ``results`` into ``out``; returns its path."""
    return draw(Path(results), Path(out))


if __name__ == "__main__":
    run(main, __doc__)
