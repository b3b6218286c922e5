"""Figures of the DLB Appendix-B experiments 1–7 (reads results only; never simulates).

Run:  .venv/bin/python paper_figures/appendix_b.py [--results DIR] [--out DIR]
Reads ``experiments/results/appendix-b-*/summary.json`` (written by ``experiments/appendix_b.py``)
and writes ``paper_figures/out/appendix_b_{baseline,utilisation,noise,y,events,homogeneous,
eta}.png``; a figure whose summary is missing is skipped (named on stderr). Every figure's title
names the profile it was computed with (quick / reduced / full = DLB's protocol).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from lbtheory.io import save_figure_atomic
from lbtheory.plotting import POLICY_COLORS, figure
from lbtheory.sim import EVENT_WINDOW

ROOT = Path(__file__).resolve().parents[1]
RES = ROOT / "experiments" / "results"
OUT = ROOT / "paper_figures" / "out"

ORDER = ("rand", "mnlb", "rr", "jsq", "p2c", "disc-rif", "disc-lat", "disc-grad", "flow-rif",
         "flow-lat", "flow-grad")
COLOR = POLICY_COLORS


def _load(results: Path, name: str) -> dict | None:
    p = results / f"appendix-b-{name}" / "summary.json"
    if not p.is_file():
        sys.stderr.write(f"skip {name}: {p} not found (run `lbtheory sweep appendix-b`)\n")
        return None
    return json.loads(p.read_text(encoding="utf-8"))


def _subtitle(s: dict) -> str:
    dur = "/".join(f"{d:g}" for d in s["duration_s"])
    return (f"profile {s['profile']}: {s['cells']} grid cells = {len(s['scenarios'])} "
            f"scenario(s) × {len(s['trials'])} trial(s) × levels, {dur} simulated s per run"
            + ("" if s["profile"] == "full" else " (not DLB's full protocol)"))


def _pols(g: dict) -> list[str]:
    return [p for p in ORDER if p in g["policies"]]


def _err(c: dict) -> tuple[float, float, float]:
    m = np.nan if c["mean"] is None else c["mean"]
    if c["lo"] is None:
        return m, 0.0, 0.0
    return m, m - c["lo"], c["hi"] - m


def fig_bars(s: dict, title: str, level_key: str, path: Path) -> None:
    """Fig 6-style: normalised mean and p90 per policy (bars, 95 % CI), one panel per level."""
    groups = sorted(s["groups"], key=lambda g: g["level"][level_key])
    fig, axes = figure(ncols=len(groups), width=5.2 * len(groups) + 1, height=4.2,
                       squeeze=False)
    for ax, g in zip(axes[0], groups):
        pols = _pols(g)
        x = np.arange(len(pols))
        for k, (metric, lab) in enumerate((("mean_norm", "mean"), ("p90_norm", "p90"))):
            vals = [_err(g["policies"][p][metric]) for p in pols]
            ax.bar(x + (k - 0.5) * 0.38, [v[0] for v in vals], 0.38,
                   yerr=np.array([[v[1] for v in vals], [v[2] for v in vals]]), capsize=2,
                   color=[COLOR[p] for p in pols], alpha=1.0 if k == 0 else 0.5,
                   edgecolor="k", lw=0.5, label=f"{lab} latency / Rand")
        ax.axhline(1.0, color="k", lw=0.8, ls=":")
        ax.set_xticks(x, pols, rotation=45, ha="right")
        ax.set_xlabel("routing policy")
        ax.set_ylabel("latency / Rand's (same arrivals)")
        ax.set_title(f"{level_key} = {g['level'][level_key]:g}", fontsize=9)
        ax.set_ylim(0.0, None)
    axes[0, -1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       title="solid: mean, light: p90\nbars: 95 % CI over cells",
                       title_fontsize=7)
    fig.suptitle(f"{title}\n{_subtitle(s)}", fontsize=9)
    fig.tight_layout()
    print(save_figure_atomic(fig, path))


def fig_lines(s: dict, title: str, key: str, xlabel: str, path: Path, *, logx: bool = False,
              errors: bool = True) -> None:
    """Fig 7 / Fig 10-style: normalised mean (and error rate) against a swept level."""
    groups = sorted(s["groups"], key=lambda g: g["level"][key])
    xs = [g["level"][key] for g in groups]
    fig, axes = figure(ncols=3 if errors else 2, width=15.0 if errors else 10.5, height=4.2)
    panels = [("mean_norm", "mean latency / Rand's"), ("p90_norm", "p90 latency / Rand's")]
    if errors:
        panels.append(("error_rate", "overflow error rate (%)"))
    for ax, (metric, ylabel) in zip(axes, panels):
        for p in _pols(groups[0]):
            k = 100.0 if metric == "error_rate" else 1.0
            v = [_err(g["policies"][p][metric]) for g in groups]
            ax.errorbar(xs, [k * a[0] for a in v], yerr=[[k * a[1] for a in v],
                                                         [k * a[2] for a in v]],
                        color=COLOR[p], marker="o", ms=3, lw=1.2, capsize=2, label=p,
                        ls="--" if p.startswith("disc") else "-")
        if metric != "error_rate":
            ax.axhline(1.0, color="k", lw=0.8, ls=":")
        ax.set(xlabel=xlabel, ylabel=ylabel)
        if logx:
            from matplotlib.ticker import NullFormatter, NullLocator

            ax.set_xscale("log")
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"{title}\n{_subtitle(s)}", fontsize=9)
    fig.tight_layout()
    print(save_figure_atomic(fig, path))


def fig_events(s: dict, path: Path) -> None:
    """Burst / outage time series: mean latency of the requests completed in each bin, errors."""
    events = [e for e in ("burst", "outage") if e in s["series"]]
    fig, axes = figure(nrows=2, ncols=len(events), width=6.0 * len(events) + 1.5, height=6.4,
                       squeeze=False)
    T = max(s["duration_s"])
    w0, w1 = EVENT_WINDOW
    for c, ev in enumerate(events):
        e = s["series"][ev]
        t = np.array(e["t_mid_s"])
        for p in [q for q in ORDER if q in e["policies"]]:
            d = e["policies"][p]
            lat = np.array([np.nan if v is None else v for v in d["mean"]])
            axes[0, c].plot(t, lat, color=COLOR[p], lw=1.2, label=p,
                            ls="--" if p.startswith("disc") else "-")
            axes[1, c].plot(t, d["errors"], color=COLOR[p], lw=1.2,
                            ls="--" if p.startswith("disc") else "-")
        for r in (0, 1):
            axes[r, c].axvspan(w0 * T, w1 * T, color="0.9", zorder=0)
        axes[0, c].set(xlabel="simulated time (s)", ylabel="mean latency of completions (s)",
                       title=f"{ev} in shaded "
                       f"window [{w0 * T:g}, {w1 * T:g}) s")
        axes[1, c].set(xlabel="simulated time (s)", ylabel="overflow errors per bin "
                                                           "(all cells summed)")
    axes[0, -1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"Exp 5: demand burst to 95 % and capacity outage\n{_subtitle(s)}", fontsize=9)
    fig.tight_layout()
    print(save_figure_atomic(fig, path))


def fig_eta(s: dict, path: Path) -> None:
    """η/η_crit against the weight oscillation and the normalised mean latency."""
    pts = [p for p in s["points"] if p["eta_over_crit"] is not None]
    fig, (ax1, ax2) = figure(ncols=2, width=12.0, height=4.4)
    mk = {"flow-grad": "o", "flow-lat": "s", "flow-rif": "^"}
    for pol in sorted({p["policy"] for p in pts}):
        for dlb in (False, True):
            q = [p for p in pts if p["policy"] == pol and (p["rule"] == "dlb") == dlb
                 and p["osc_weights"] is not None]
            if not q:
                continue
            kw = dict(marker=mk.get(pol, "o"), ls="none", ms=5, color=COLOR[pol],
                      mfc=COLOR[pol] if dlb else "none",
                      label=f"{pol}, {'DLB rule' if dlb else 'factor × η_crit'}")
            ax1.plot([p["eta_over_crit"] for p in q], [p["osc_weights"] for p in q], **kw)
            ax2.plot([p["eta_over_crit"] for p in q], [p["mean_norm"] for p in q], **kw)
        fac = sorted({float(p["rule"]) for p in pts if p["policy"] == pol and p["rule"] != "dlb"})
        med = [np.median([p["osc_weights"] for p in pts if p["policy"] == pol
                          and p["rule"] == f"{f:g}" and p["osc_weights"] is not None])
               for f in fac]
        ax1.plot(fac, med, color=COLOR[pol], lw=1.5, label=f"{pol}: median over scenarios")
    for ax in (ax1, ax2):
        ax.axvline(1.0, color="k", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("η / η_crit (η_crit: linearised fluid model at equilibrium)")
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    for ax in (ax1, ax2):
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax1.legend(fontsize=7, loc="best")
    ax1.set_ylabel("routing-weight oscillation (RMS, detrended, prob.)")
    ax2.set_ylabel("mean latency / Rand's")
    ax2.axhline(1.0, color="0.5", ls=":", lw=0.8)
    ax2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"Exp 7: does the fluid-model critical stepsize predict oscillation in the "
                 f"simulated cluster?\n{_subtitle(s)}", fontsize=9)
    fig.tight_layout()
    print(save_figure_atomic(fig, path))


def main(results: Path | None = None, out: Path | None = None) -> int:
    """Write every Appendix-B figure whose summary exists under ``results`` (default
    :data:`RES`) into ``out`` (default :data:`OUT`); returns 0."""
    a = argparse.Namespace(results=RES if results is None else Path(results),
                           out=OUT if out is None else Path(out))
    s = _load(a.results, "baseline")
    if s:
        fig_bars(s, "Exp 1 (Fig 6-style): latency relative to Rand at 80 % utilisation",
                 "utilisation", a.out / "appendix_b_baseline.png")
    s = _load(a.results, "utilisation")
    if s:
        fig_lines(s, "Exp 2 (Fig 7-style): utilisation sweep", "utilisation",
                  "utilisation Λ/Σμ̄", a.out / "appendix_b_utilisation.png")
    s = _load(a.results, "noise")
    if s:
        fig_lines(s, "Exp 3 (Fig 10-style): latency-model noise ε", "noise_eps",
                  "noise ε (routers see ℓ_j × (1 + εξ_j))", a.out / "appendix_b_noise.png")
    s = _load(a.results, "y")
    if s:
        fig_lines(s, "Exp 4: processing-time scaling y (token times ÷ y, rates × y)", "y",
                  "y (large = short 'sand' requests)", a.out / "appendix_b_y.png", logx=True)
    s = _load(a.results, "events")
    if s:
        fig_events(s, a.out / "appendix_b_events.png")
    s = _load(a.results, "homogeneous")
    if s:
        fig_bars(s, "Exp 6: homogeneous cells, small delays", "utilisation",
                 a.out / "appendix_b_homogeneous.png")
    s = _load(a.results, "eta")
    if s:
        fig_eta(s, a.out / "appendix_b_eta.png")
    return 0


if __name__ == "__main__":
    _ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _ap.add_argument("--results", type=Path, default=RES, help="results root")
    _ap.add_argument("--out", type=Path, default=OUT, help="figure directory")
    _a = _ap.parse_args()
    sys.exit(main(_a.results, _a.out))
