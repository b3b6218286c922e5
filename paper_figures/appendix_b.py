"""Figures of the DLB Appendix-B experiments 1–7 (reads results only; never simulates).

Run:  .venv/bin/python paper_figures/appendix_b.py [--results DIR] [--out DIR]
Reads ``appendix-b-*/summary.json`` under the results root (default the committed
``experiments/results``; written by ``experiments/appendix_b.py``) and writes
``appendix_b_{baseline,utilisation,noise,y,events,homogeneous,eta}.png`` into ``--out`` (default
``paper_figures/out``); a missing summary ends it with exit code 2 and one line. Every figure's
title names the profile it was computed with (quick / reduced / full = DLB's protocol). Colours are
:func:`lbtheory.plotting.policy_color` (the same in every figure of the project); Rand is the
normaliser, so in normalised panels it is the dotted line at 1, not a series; an interval is
drawn only where at least two scenarios give one.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _figcli, also when loaded by path
from _figcli import OUT, RESULTS, require, run, save  # noqa: E402

from lbtheory.plotting import figure, policy_color  # noqa: E402
from lbtheory.sim import EVENT_WINDOW  # noqa: E402

ORDER = ("rand", "mnlb", "rr", "jsq", "p2c", "disc-rif", "disc-lat", "disc-grad", "flow-rif",
         "flow-lat", "flow-grad")
MARKERS = {"rand": "o", "mnlb": "D", "rr": "v", "jsq": "^", "p2c": "<", "disc-rif": "s",
           "disc-lat": "s", "disc-grad": "s", "flow-rif": "o", "flow-lat": "o",
           "flow-grad": "o"}


def _subtitle(s: dict, ci: bool = True, spread: str | None = None) -> str:
    """Profile, sample and run length; ``spread`` (default: the 95 % CI, or the mean when
    ``ci`` is False) says what the drawn statistic is."""
    dur = "/".join(f"{d:g}" for d in s["duration_s"])
    warm = "/".join(f"{w:g}" for w in s.get("warmup_s", [0.0]))
    n, t = len(s["scenarios"]), len(s["trials"])
    if spread is None:
        spread = ("95 % CI over scenarios" if n > 1 else "one scenario: no interval") if ci \
            else "mean over scenarios × trials"
    return (f"profile {s['profile']}: {n} scenario{'s' if n > 1 else ''} × {t} "
            f"trial{'s' if t > 1 else ''} per level, {dur} s per run (first {warm} s discarded); "
            f"{spread}" + ("" if s["profile"] == "full" else " — not DLB's full protocol"))


def _pols(g: dict, rand: bool = False) -> list[str]:
    return [p for p in ORDER if p in g["policies"] and (rand or p != "rand")]


def _err(c: dict, k: float = 1.0) -> tuple[float, float, float]:
    """(mean, below, above) × k; no bar without an interval (fewer than two scenarios)."""
    m = np.nan if c["mean"] is None else k * c["mean"]
    if c.get("lo") is None or c.get("n", 0) < 2:
        return m, 0.0, 0.0
    return m, max(m - k * c["lo"], 0.0), max(k * c["hi"] - m, 0.0)


def _style(p: str) -> dict:
    return {"color": policy_color(p), "marker": MARKERS.get(p, "o"),
            "ls": "--" if p.startswith("disc") else ":" if p in ("rand", "mnlb") else "-"}


def _error_axis(ax, values: list[float]) -> None:
    """Error rates are ≥ 0: the axis starts at 0 and, when every rate is 0, shows 0–0.1 %."""
    top = max([v for v in values if np.isfinite(v)] + [0.0])
    ax.set_ylim(0.0, 1.15 * top if top > 0 else 0.1)


def fig_bars(s: dict, title: str, level_key: str, path: Path) -> Path:
    """Fig 6-style: normalised mean and p90 per policy (bars, 95 % CI), one panel per level."""
    groups = sorted(s["groups"], key=lambda g: g["level"][level_key])
    fig, axes = figure(ncols=len(groups), width=4.8 * len(groups) + 2.0, height=4.4,
                       squeeze=False, sharey=True)
    for ax, g in zip(axes[0], groups):
        pols = _pols(g)
        x = np.arange(len(pols))
        for k, (metric, lab) in enumerate((("mean_norm", "mean"), ("p90_norm", "p90"))):
            vals = [_err(g["policies"][p][metric]) for p in pols]
            ax.bar(x + (k - 0.5) * 0.38, [v[0] for v in vals], 0.38,
                   yerr=np.array([[v[1] for v in vals], [v[2] for v in vals]]), capsize=2,
                   color=[policy_color(p) for p in pols], alpha=1.0 if k == 0 else 0.45,
                   edgecolor="k", lw=0.5, label=f"{lab} latency / Rand's")
        ax.axhline(1.0, color="k", lw=0.8, ls=":", label="Rand (= 1)")
        ax.set_xticks(x, pols, rotation=45, ha="right")
        ax.set_xlabel("routing policy")
        ax.set_title(f"{level_key} = {g['level'][level_key]:g}", fontsize=9)
        ax.set_ylim(0.0, None)
    axes[0, 0].set_ylabel("latency / Rand's on the same arrivals")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(facecolor="0.35", edgecolor="k", lw=0.5, label="mean latency / Rand's"),
               Patch(facecolor="0.35", alpha=0.45, edgecolor="k", lw=0.5,
                     label="p90 latency / Rand's"),
               Line2D([], [], color="k", lw=0.8, ls=":", label="Rand (= 1)")]
    axes[0, -1].legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       title="bar colour: policy\nbars: 95 % CI over scenarios",
                       title_fontsize=7)
    fig.suptitle(f"{title}\n{_subtitle(s)}", fontsize=9)
    fig.tight_layout()
    return save(fig, path)


def fig_lines(s: dict, title: str, key: str, xlabel: str, path: Path, *,
              logx: bool = False) -> Path:
    """Fig 7 / Fig 10-style: normalised mean and p90 (Rand = 1) and the error rate (%, Rand
    included) against a swept level."""
    groups = sorted(s["groups"], key=lambda g: g["level"][key])
    xs = np.array([g["level"][key] for g in groups], dtype=float)
    fig, axes = figure(ncols=3, width=16.0, height=4.4)
    panels = [("mean_norm", "mean latency / Rand's", False),
              ("p90_norm", "p90 latency / Rand's", False),
              ("error_rate", "overflow error rate (%)", True)]
    pols = _pols(groups[0], rand=True)
    for ax, (metric, ylabel, errors) in zip(axes, panels):
        k = 100.0 if errors else 1.0
        seen = []
        for j, p in enumerate(pols):
            if p == "rand" and not errors:
                continue
            v = [_err(g["policies"][p][metric], k) for g in groups]
            # a small horizontal offset per policy keeps equal values (Rand's, 0 %) apart
            off = (j - len(pols) / 2) * 0.006 * (np.log(xs[-1] / xs[0]) if logx else
                                                 (xs[-1] - xs[0]))
            xp = xs * np.exp(off) if logx else xs + off
            ax.errorbar(xp, [a[0] for a in v], yerr=[[a[1] for a in v], [a[2] for a in v]],
                        ms=4, lw=1.3, capsize=2, label=p, zorder=3 if p == "rand" else 2,
                        **_style(p))
            seen += [a[0] + a[2] for a in v]
        if errors:
            _error_axis(ax, seen)
        else:
            ax.axhline(1.0, color="k", lw=0.8, ls=":", label="Rand (= 1)")
        # a long level description is wrapped so neighbouring panels' labels never overlap
        ax.set(xlabel=xlabel if "\n" in xlabel else textwrap.fill(xlabel, 46), ylabel=ylabel)
        if logx:
            from matplotlib.ticker import NullFormatter, NullLocator

            ax.set_xscale("log")
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(xs, [f"{x:g}" for x in xs], rotation=45)
    h, lab = axes[0].get_legend_handles_labels()
    h2, lab2 = axes[2].get_legend_handles_labels()
    extra = [(a, b) for a, b in zip(h2, lab2) if b == "rand"]
    axes[-1].legend([*h, *[a for a, _ in extra]], [*lab, *[b for _, b in extra]], fontsize=7,
                    loc="upper left", bbox_to_anchor=(1.02, 1.0),
                    title="bars: 95 % CI over scenarios", title_fontsize=7)
    fig.suptitle(f"{title}\n{_subtitle(s)}", fontsize=9)
    fig.tight_layout()
    return save(fig, path)


def fig_events(s: dict, path: Path) -> Path:
    """Burst / outage time series: mean latency of the requests completed in each bin (averaged
    over cells), overflow errors per bin (summed over cells)."""
    events = [e for e in ("burst", "outage") if e in s["series"]]
    fig, axes = figure(nrows=2, ncols=len(events), width=6.2 * len(events) + 2.0, height=6.8,
                       squeeze=False, sharex=True)
    T = max(s["duration_s"])
    W = max(s.get("warmup_s", [0.0]))
    w0, w1 = EVENT_WINDOW
    for c, ev in enumerate(events):
        e = s["series"][ev]
        t = np.array(e["t_mid_s"])
        errs = []
        for p in [q for q in ORDER if q in e["policies"]]:
            d = e["policies"][p]
            lat = np.array([np.nan if v is None else v for v in d["mean"]])
            st = _style(p)
            st.pop("marker")
            axes[0, c].plot(t, lat, lw=1.3, label=p, zorder=3 if p == "rand" else 2, **st)
            axes[1, c].plot(t, d["errors"], lw=1.3, zorder=3 if p == "rand" else 2, **st)
            errs += list(d["errors"])
        for r in (0, 1):
            axes[r, c].axvspan(w0 * T, w1 * T, color="0.9", zorder=0,
                               label="event window" if r == 0 else None)
            if W > 0:
                axes[r, c].axvspan(0.0, W, color="0.75", alpha=0.5, hatch="//", zorder=0,
                                   label="warm-up (not measured)" if r == 0 else None)
        axes[0, c].set(ylabel="mean latency of completions (s)",
                       title=f"{ev} in [{w0 * T:g}, {w1 * T:g}) s (shaded)")
        axes[1, c].set(xlabel="simulated time (s)", ylabel="overflow errors per bin\n"
                                                          "(all cells and runs summed)")
        top = max(errs + [0])
        axes[1, c].set_ylim(0.0, 1.15 * top if top > 0 else 1.0)
    axes[0, -1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"Exp 5: demand burst to 95 % and capacity outage (bins of "
                 f"{T / len(s['series'][events[0]]['t_mid_s']):g} s)\n{_subtitle(s, ci=False)}",
                 fontsize=9)
    fig.tight_layout()
    return save(fig, path)


#: η/η_crit range shown by the experiment-7 figure; default-rule points outside it are drawn
#: at the edge (open triangles) and counted in the legend.
ETA_RANGE = (0.05, 6.0)


def fig_eta(s: dict, path: Path) -> Path:
    """η/η_crit against the workload variation relative to Rand, the spectral peak relative to
    Rand, and the normalised mean latency: points per scenario × trial, medians per factor."""
    pts = [p for p in s["points"] if p["eta_over_crit"] is not None]
    fig, axes = figure(ncols=3, width=17.0, height=4.6)
    panels = (("workload_var_rel", "fast workload variation / Rand's"),
              ("peak_ratio", "spectral peak / Rand's (0.4–20 s periods)"),
              ("mean_norm", "mean latency / Rand's"))
    lo, hi = ETA_RANGE
    facs = sorted({float(p["rule"]) for p in pts if p["rule"] != "dlb"})
    for pol in sorted({p["policy"] for p in pts}):
        col = policy_color(pol)
        mine = [p for p in pts if p["policy"] == pol]
        dlb = [p for p in mine if p["rule"] == "dlb"]
        out = sum(1 for p in dlb if not lo <= p["eta_over_crit"] <= hi)
        for ax, (key, _) in zip(axes, panels):
            q = [p for p in mine if p["rule"] != "dlb" and p[key] is not None]
            # a small fixed horizontal jitter (one draw per point) keeps the dots of a factor apart
            jit = np.exp(np.random.default_rng(0).normal(0.0, 0.03, len(q)))
            ax.plot([p["eta_over_crit"] * j for p, j in zip(q, jit)], [p[key] for p in q],
                    ls="none", marker=".", ms=3, color=col, alpha=0.35)
            med = [np.median([p[key] for p in q if p["rule"] == f"{f:g}"] or [np.nan])
                   for f in facs]
            ax.plot(facs, med, color=col, lw=1.8, marker="o", ms=4,
                    label=f"{pol}: median at factor × η_crit")
            d = [p for p in dlb if p[key] is not None]
            ax.plot([min(max(p["eta_over_crit"], lo), hi) for p in d], [p[key] for p in d],
                    ls="none", marker="^", ms=5, mfc=col, mec="k", mew=0.4, color=col,
                    label=f"{pol}: default rule" + (f" ({out} beyond the axis, at its edge)"
                                                     if out else ""))
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    for ax, (key, ylabel) in zip(axes, panels):
        ax.axvline(1.0, color="k", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlim(lo * 0.8, hi * 1.25)
        ax.xaxis.set_major_locator(FixedLocator([0.1, 0.25, 0.5, 1.0, 1.5, 3.0]))
        ax.xaxis.set_major_formatter(lambda v, _: f"{v:g}")
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("η / η_crit (fluid model at equilibrium, feedback delay τ + δ/2)")
        ax.set_ylabel(ylabel)
        ax.axhline(1.0, color="0.5", ls=":", lw=0.8)
        if key == "peak_ratio":
            ax.set_yscale("log")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                    title="dots: one scenario × trial", title_fontsize=7)
    fig.suptitle("Exp 7: does the fluid model's critical stepsize predict oscillation in the "
                 "simulated cluster? (it ignores request-level randomness)\n"
                 + _subtitle(s, spread="dots: each scenario × trial, lines: medians"),
                 fontsize=9)
    fig.tight_layout()
    return save(fig, path)


#: the seven experiments of the ``appendix-b`` sweep group, in figure order
NAMES = ("baseline", "utilisation", "noise", "y", "events", "homogeneous", "eta")


def main(results: Path = RESULTS, out: Path = OUT) -> list[Path]:
    """Write every Appendix-B figure from the summaries under ``results`` into ``out``; returns
    the PNGs' paths. Every summary must exist (the group sweep writes all seven)."""
    paths = require(results, *[f"appendix-b-{n}/summary.json" for n in NAMES],
                    sweep="appendix-b", profile="full", minutes=57)
    S = {n: json.loads(p.read_text(encoding="utf-8")) for n, p in zip(NAMES, paths)}
    out = Path(out)
    return [
        fig_bars(S["baseline"], "Exp 1 (Fig 6-style): latency relative to Rand at 80 % "
                 "utilisation", "utilisation", out / "appendix_b_baseline.png"),
        fig_lines(S["utilisation"], "Exp 2 (Fig 7-style): utilisation sweep", "utilisation",
                  "utilisation Λ / Σμ̄ (mean demand / capacity)",
                  out / "appendix_b_utilisation.png"),
        fig_lines(S["noise"], "Exp 3 (Fig 10-style): latency-model noise ε", "noise_eps",
                  "noise ε: each fitted parameter of each cell × (1 + εξ),\n"
                  "ξ ~ U[−1, 1] drawn per parameter and trial",
                  out / "appendix_b_noise.png"),
        fig_lines(S["y"], "Exp 4: processing-time scaling y (token times ÷ y, rates × y)", "y",
                  "y (large = short 'sand' requests)", out / "appendix_b_y.png", logx=True),
        fig_events(S["events"], out / "appendix_b_events.png"),
        fig_bars(S["homogeneous"], "Exp 6: homogeneous cells, small delays", "utilisation",
                 out / "appendix_b_homogeneous.png"),
        fig_eta(S["eta"], out / "appendix_b_eta.png"),
    ]


if __name__ == "__main__":
    run(main, __doc__)
