"""Probe staleness sweep (issue 36 item 1): every policy's mean and p90 latency relative to
Rand's as the probes' information ages, on DLB's Appendix-B scenarios.

Each cell is one Appendix-B scenario × trial at one probe period P (the protocol's
:func:`_appendix_b_protocol.appendix_b_cell`), with the [R] probing model of DLB's stack
(:data:`lbtheory.sim.APPENDIX_B_PROBING`: root replicas taking turns, leaf caches, jitter of one
period). The flow stepsize is held at the default rule's value for P = 10 ms
(``eta_probe_period_s``) so that only the staleness changes, as in the issue's measurement.
The effective staleness reported is the measured ``probe_age_s`` (mean over the policies'
requests; it is set by the scenario's delays, P and the probing model, not by the policy).

Profiles:
    * ``full``    — 10 scenarios × 5 trials × 600 s (60 s warm-up) at P ∈ {10, 30, 100, 300,
      1000} ms (``lbtheory sweep appendix-b-staleness --profile full --workers 2``).
    * ``reduced`` — 5 scenarios × 1 trial × 300 s (60 s warm-up), the same periods.
    * ``quick``   — CI: one 3-cell scenario, 30 s, P ∈ {10, 100} ms, four policies.

Summary (``experiments/results/appendix-b-staleness/summary.json``): per period and policy
the normalised mean and p90 (95 % t-interval over scenarios), the error rate and the measured
probe age; ``ranking`` — per period, the paired Flow − Disc difference of the normalised mean
for each cost (negative: Flow better) and the best policy; and a figure ``staleness.png``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from lbtheory.io import run_manifest, save_figure_atomic, write_json_atomic
from lbtheory.stats import mean_ci
from lbtheory.sweep import Experiment, script_main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _appendix_b_protocol import MAIN_POLICIES, appendix_b_cell  # noqa: E402
from appendix_b import summarise_rows  # noqa: E402

PROFILES = ("quick", "reduced", "full")
VERSION = "issue36"
#: probe periods (s): 10 ms (the paper's "every few milliseconds") to 1 s.
PERIODS = {"full": [0.01, 0.03, 0.1, 0.3, 1.0], "reduced": [0.01, 0.03, 0.1, 0.3, 1.0],
           "quick": [0.01, 0.1]}
PROTOCOL: dict[str, dict[str, Any]] = {
    "full": {"scenarios": list(range(10)), "trials": list(range(5)), "duration_s": 600.0,
             "warmup_s": 60.0, "n_cells": None, "policies": list(MAIN_POLICIES)},
    "reduced": {"scenarios": list(range(5)), "trials": [0], "duration_s": 300.0,
                "warmup_s": 60.0, "n_cells": None, "policies": list(MAIN_POLICIES)},
    "quick": {"scenarios": [3], "trials": [0], "duration_s": 30.0, "warmup_s": 5.0,
              "n_cells": 3, "policies": ["rand", "disc-grad", "flow-grad", "mnlb"]},
}
#: the probe period the flow stepsize rule is evaluated at (s): η held fixed across periods.
ETA_PROBE_PERIOD_S = 0.01
COSTS = (("rif", "disc-rif", "flow-rif"), ("lat", "disc-lat", "flow-lat"),
         ("grad", "disc-grad", "flow-grad"))


def grid(profile: str) -> list[dict]:
    """One cell per scenario × trial × probe period."""
    p = PROTOCOL[profile]
    return [{"scenario": s, "trial": t, "duration_s": p["duration_s"],
             "warmup_s": p["warmup_s"], "n_cells": p["n_cells"], "policies": p["policies"],
             "probe_period_s": P, "eta_probe_period_s": ETA_PROBE_PERIOD_S}
            for P in PERIODS[profile] for s in p["scenarios"] for t in p["trials"]]


def _ranking(groups: list[dict]) -> list[dict]:
    """Per period: Flow − Disc of the normalised mean for each cost (paired over scenarios,
    95 % t-interval; negative = Flow better), the best policy by normalised mean and p90, and
    the measured probe age (mean over policies of the per-scenario means, s)."""
    out = []
    for g in sorted(groups, key=lambda g: g["level"]["probe_period_s"]):
        per, pol = g["per_scenario"], g["policies"]
        row: dict[str, Any] = {"probe_period_s": g["level"]["probe_period_s"]}
        for cost, disc, flow in COSTS:
            if disc in per and flow in per:
                d = [f - s for f, s in zip(per[flow]["mean_norm"], per[disc]["mean_norm"])
                     if f is not None and s is not None]
                m, lo, hi = mean_ci(d)
                row[f"flow_minus_disc_{cost}"] = {"mean": m, "lo": lo, "hi": hi, "n": len(d)}
        dlb = [p for p in pol if p not in ("rand",)]
        for metric in ("mean_norm", "p90_norm"):
            row[f"best_{metric}"] = min(dlb, key=lambda p: pol[p][metric]["mean"]
                                        if pol[p][metric]["mean"] is not None else 1e9)
        ages = [pol[p]["probe_age_mean_s"]["mean"] for p in pol
                if pol[p].get("probe_age_mean_s", {}).get("mean") is not None]
        row["probe_age_mean_s"] = sum(ages) / len(ages) if ages else None
        out.append(row)
    return out


def _figure(groups: list[dict], ranking: list[dict], path: Path) -> None:
    """Normalised mean and p90 vs the measured probe age, one line per policy (the level's
    interval over scenarios is wide — scenarios differ in level — so the third panel shows the
    paired Flow − Disc differences with their 95 % intervals, the comparison that matters)."""
    from lbtheory.plotting import figure, policy_color

    gs = sorted(groups, key=lambda g: g["level"]["probe_period_s"])
    x = [g["policies"]["rand"]["probe_age_mean_s"]["mean"] for g in gs]
    fig, axes = figure(ncols=3, width=15.0, height=4.4)
    for ax, metric, title in zip(axes, ("mean_norm", "p90_norm"), ("mean", "p90")):
        for p in gs[0]["policies"]:
            if p == "rand":
                continue
            ax.plot(x, [g["policies"][p][metric]["mean"] for g in gs], marker="o", label=p,
                    color=policy_color(p), linestyle="--" if p.startswith("disc") else "-")
        ax.axhline(1.0, color="0.5", lw=0.8)
        ax.set_ylabel(f"{title} latency / Rand")
        ax.set_title(f"{title} latency vs staleness", pad=22)
    axes[0].legend(fontsize=7, ncol=2)
    ax = axes[2]
    for k, (cost, _, flow) in enumerate(COSTS):
        key = f"flow_minus_disc_{cost}"
        pts = [(xv, r[key]) for xv, r in zip(x, ranking) if key in r]
        if not pts:
            continue
        xs = [xv * (1.0 + 0.06 * (k - 1)) for xv, _ in pts]  # side by side on the log axis
        ys = [d["mean"] for _, d in pts]
        err = [[d["mean"] - d["lo"] if d["lo"] is not None else 0.0 for _, d in pts],
               [d["hi"] - d["mean"] if d["hi"] is not None else 0.0 for _, d in pts]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, color=policy_color(flow),
                    label=f"Flow − Disc, {cost}")
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_ylabel("Flow − Disc of mean / Rand (paired, 95 % CI)")
    ax.set_title("below 0: Flow better", pad=22)
    ax.legend(fontsize=7)
    for a in axes:
        a.set_xscale("log")
        a.set_xlabel("measured probe age, mean (s)")
        # the probe period of each point on a top axis (inside the panel it hid data points)
        top = a.secondary_xaxis("top")
        top.set_xticks(x, [f"{g['level']['probe_period_s'] * 1e3:g}" for g in gs],
                       fontsize=7, color="0.35")
        top.set_xticks([], minor=True)
        top.set_xlabel("probe period P (ms)", fontsize=7, color="0.35")
    save_figure_atomic(fig, path)


def collect(rows: list[tuple[dict, dict]], out_dir: Path, profile: str) -> None:
    """summary.json (groups by probe period, the Flow-vs-Disc ranking) and staleness.png."""
    groups = summarise_rows(rows, ("probe_period_s",))
    ranking = _ranking(groups)
    summary = {"experiment": "appendix-b-staleness", "profile": profile,
               "protocol": PROTOCOL[profile], "periods_s": PERIODS[profile],
               "eta_probe_period_s": ETA_PROBE_PERIOD_S, "cells": len(rows),
               "groups": groups, "ranking": ranking,
               "manifest": run_manifest({"experiment": "appendix-b-staleness",
                                         "profile": profile,
                                         "grid": [c for c, _ in rows]})}
    write_json_atomic(out_dir / "summary.json", summary)
    _figure(groups, ranking, out_dir / "staleness.png")


EXPERIMENT = Experiment(
    name="appendix-b-staleness",
    description="Issue 36: each policy's latency / Rand vs probe staleness (period 10 ms-1 s, "
                "DLB-stack probing model)",
    grid=grid, cell=appendix_b_cell, collect=collect, profiles=PROFILES, version=VERSION,
    default="reduced")

if __name__ == "__main__":
    sys.exit(script_main([EXPERIMENT]))
