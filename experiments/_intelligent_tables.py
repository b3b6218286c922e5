"""Tables of the Intelligent Router experiment (not an experiment: the leading ``_`` keeps it out
of ``lbtheory sweep`` discovery): per-table summaries with 95 % intervals, the published numbers,
the verdicts by the rule of ``experiments/intelligent_router.py``, and the Markdown file
``experiments/results/intelligent_router.md``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from lbtheory.io import write_text_atomic
from lbtheory.stats import mean_ci

_WG = ("wg-rl-hurl", "wg-rl-literal")
#: the seed's Δ vs round robin (%) per table and router (Knowl 4, 5, 7, 8); both λ_k readings
#: are compared with the one published WG-RL number. Knowl 5 with chunked prefill: recomputed
#: against the chunked round robin's 247.30 s (the seed's % are against 248.41 s unchunked).
PAPER: dict[str, dict[str, float]] = {
    "k4": {"jsq": -0.46, "maxcap": -2.60, "minmin": -1.50, "rl": -4.35, "wa-rl": -7.79,
           **{w: -11.43 for w in _WG}},
    "k5": {"rl": -3.15, "wa-rl": -6.74, **{w: -10.71 for w in _WG}},
    "k5-chunked": {"rl": round(100 * (240.68 / 247.30 - 1), 2),
                   "wa-rl": round(100 * (231.12 / 247.30 - 1), 2),
                   **{w: round(100 * (220.93 / 247.30 - 1), 2) for w in _WG}},
    "k7": {"rl": -2.28, "wa-rl": -4.39, **{w: -7.84 for w in _WG}},
    "k8": {"rl": -5.84, "wa-rl": -6.64, **{w: -11.62 for w in _WG}},
}
#: the seed's round-robin mean E2E (s) per table (Knowl 4: implied, inconsistent; THEORY §10)
PAPER_RR = {"k4": "≈168–173 (implied)", "k5": "248.41", "k5-chunked": "247.30",
            "k7": "1005.31", "k8": "—", "k4-25": "—"}
#: the seed's mean router wait (s), Knowl 4
PAPER_WAIT = {"rl": 0.59, "wa-rl": 4.41, **{w: 2.05 for w in _WG}}
TITLES = {"k4": "Knowl 4 — 4 × V100 (Llama-2-7B), five-task mix, λ = 20 req/s",
          "k5": "Knowl 5 — 4 × A100 (Llama-3.1-8B), five-task mix, λ = 80 req/s",
          "k5-chunked": "Knowl 5 — the same with chunked prefill (1,024 tokens per iteration)",
          "k7": "Knowl 7 — production-like mix, 4 × A100, λ = 80 req/s, chunked prefill 1,024",
          "k8": "Knowl 8 — 8 × V100, five-task mix, λ = 40 req/s",
          "k4-25": "Not in the seed: Knowl 4's cluster at λ = 25 req/s (where the heuristics gain "
                   "most; chosen from the load sweep below)"}
ORDER = ("k4", "k5", "k5-chunked", "k7", "k8", "k4-25")
COLLAPSE = 1.5
RULE = """\
**Verdict rule** (written before the runs; `experiments/intelligent_router.py`). For a router
with a published Δ_seed (negative = better than round robin) and a measured Δ with its 95 %
Student-t interval — over the 5 training seeds for an RL router (each seed's Δ averaged over the
10 evaluation episodes), over the 10 episodes for a heuristic: **reproduced** if the interval
contains Δ_seed or lies entirely below it; **partly** if it lies entirely below 0 but above
Δ_seed; **not reproduced** if it contains 0 or lies above it. An RL router whose greedy policy
sent more than 1.5× its fair share of an episode's requests to one instance (any seed, any
episode) is **collapsed** (and not reproduced). Nothing was tuned toward a published number."""


def rl_label(router: str, reading: str) -> str:
    """A table row's name for an RL router: WG-RL carries its λ_k reading."""
    return router if router != "wg-rl" else f"wg-rl-{reading}"


def _ci(x) -> tuple[float, float, float]:
    return mean_ci(np.asarray(x, dtype=float))


def verdict(lo: float, hi: float, paper: float | None, collapsed: bool) -> str:
    """The rule of the module's :data:`RULE` for an interval ``[lo, hi]`` (%)."""
    if paper is None:
        return "—"
    if collapsed:
        return "not reproduced (collapsed)"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "no interval"
    if lo <= paper <= hi or hi < paper:
        return "reproduced"
    if hi < 0:
        return "partly"
    return "not reproduced"


def ideal_e2e_s(rr: dict, seeds: list) -> float:
    """Mean over the evaluation episodes ``seeds`` of the requests' ideal times, each alone on an
    idle instance (s): no router can bring the mean E2E below it. Read from round robin's cell
    ``rr``, where the experiment stores it per episode (``ideal_e2e_s``: seed -> s)."""
    if "ideal_e2e_s" not in rr:
        raise KeyError("round robin's cell has no 'ideal_e2e_s' per episode (written by "
                       "experiments/intelligent_router.py since issue 32; its collect step adds "
                       "it to older cached cells)")
    return float(np.mean([rr["ideal_e2e_s"][s] for s in seeds]))


def _e2e(run: dict, seeds: list) -> np.ndarray:
    """A router's mean E2E latency (s) per evaluation episode, in the order of ``seeds``."""
    return np.array([run["eval"][s]["latency"]["mean"] for s in seeds])


def _delta_pct(run: dict, rr: np.ndarray, seeds: list) -> np.ndarray:
    """A router's per-episode Δ vs round robin's E2E ``rr`` (%)."""
    return 100.0 * (_e2e(run, seeds) / rr - 1.0)


def summarise_table(table: str, rows: list) -> dict:
    """Per-router numbers of one table from its cells ``(config, result)``."""
    heur = {c["router"]: r for c, r in rows if c["part"] == "heuristic"}
    rl: dict[str, list[dict]] = {}
    for c, r in rows:
        if c["part"] == "rl":
            rl.setdefault(r["label"], []).append(r)
    seeds = sorted(heur["rr"]["eval"], key=int)
    rr = _e2e(heur["rr"], seeds)

    def stats(runs: list[dict]) -> dict:
        ev = [r["eval"][s] for r in runs for s in seeds]
        return {"mean_e2e_s": float(np.mean([e["latency"]["mean"] for e in ev])),
                "router_wait_s": float(np.mean([e["router_wait"]["mean"] for e in ev])),
                "ttft_s": float(np.mean([e["ttft"]["mean"] for e in ev])),
                "preemptions": float(np.mean([e["preemptions"] for e in ev])),
                "max_share": float(max(max(e["shares"]) for e in ev)),
                "collapsed_episodes": int(sum(max(e["shares"]) > COLLAPSE for e in ev)),
                "runs": len(ev),
                "completed_min": int(min(e["completed"] for e in ev))}

    out: dict = {}
    for name, run in heur.items():
        d = _delta_pct(run, rr, seeds)
        m, lo, hi = _ci(d)
        out[name] = {"kind": "heuristic", **stats([run]), "delta_pct": m, "delta_lo": lo,
                     "delta_hi": hi, "per_episode_delta": d.tolist()}
    for name, runs in rl.items():
        runs = sorted(runs, key=lambda r: r["train_seed"])
        per_seed = [float(np.mean(_delta_pct(r, rr, seeds))) for r in runs]
        m, lo, hi = _ci(per_seed)
        out[name] = {"kind": "rl", **stats(runs), "delta_pct": m, "delta_lo": lo,
                     "delta_hi": hi, "per_seed_delta": per_seed,
                     "train_s": float(np.mean([r["train_s"] for r in runs])),
                     "diverged": sum(r["status"] != "completed" for r in runs),
                     "horizon_s": float(np.mean([r["scales"]["horizon_s"] for r in runs])),
                     "last_wait_fraction": float(np.mean([r["history"][-1]["wait_fraction"]
                                                          for r in runs]))}
        if all("eval_last" in r for r in runs):  # version 6: the selected network's cells
            last = [{**r, "eval": r["eval_last"]} for r in runs]
            lm, llo, lhi = _ci([float(np.mean(_delta_pct(r, rr, seeds))) for r in last])
            out[name].update(selected_episodes=[r["selected_episode"] for r in runs],
                             last_delta_pct=lm, last_delta_lo=llo, last_delta_hi=lhi,
                             last_max_share=stats(last)["max_share"],
                             last_collapsed_episodes=stats(last)["collapsed_episodes"])
    for name, r in out.items():
        paper = PAPER.get(table, {}).get(name)
        r["paper_delta_pct"] = paper
        r["verdict"] = verdict(r["delta_lo"], r["delta_hi"], paper,
                               r["kind"] == "rl" and r["max_share"] > COLLAPSE)
    loads = list(heur["rr"]["offered_load"].values())
    load = {k: float(np.mean([x[k] for x in loads])) for k in
            ("rate_rps", "prefill_demand", "decode_demand", "utilisation", "decode_tps")}
    ideal = ideal_e2e_s(heur["rr"], seeds)
    return {"routers": out, "episodes": len(seeds), "offered_load": load, "ideal_e2e_s": ideal,
            "headroom_pct": 100.0 * (1.0 - ideal / float(np.mean(rr))),
            "predictor_accuracy": heur["rr"]["predictor_accuracy"],
            "small_large_threshold": heur["rr"]["threshold"]}


def summarise_load(rows: list) -> list[dict]:
    """The load sweep's rows: per (table, rate factor) the offered load, round robin's mean
    E2E and each heuristic's Δ vs round robin (%) with its 95 % interval over the episodes."""
    cells: dict[tuple, dict] = {}
    for c, r in rows:
        cells.setdefault((c["table"], c["load_factor"]), {})[c["router"]] = r
    out = []
    for (table, factor), runs in sorted(cells.items()):
        seeds = sorted(runs["rr"]["eval"], key=int)
        rr = _e2e(runs["rr"], seeds)
        loads = list(runs["rr"]["offered_load"].values())
        row = {"table": table, "load_factor": factor,
               "rate_rps": float(np.mean([x["rate_rps"] for x in loads])),
               "utilisation": float(np.mean([x["utilisation"] for x in loads])),
               "rr_e2e_s": float(np.mean(rr)), "delta_pct": {}}
        for name, run in runs.items():
            if name != "rr":
                m, lo, hi = _ci(_delta_pct(run, rr, seeds))
                row["delta_pct"][name] = {"mean": m, "lo": lo, "hi": hi,
                                          "max_share": float(max(max(e["shares"]) for e in
                                                                 run["eval"].values()))}
        out.append(row)
    return out


def _load_md(s: dict) -> list[str]:
    rows = s["rows"]
    names = list(rows[0]["delta_pct"])
    lines = ["## Where routing matters: the heuristics across offered load", "",
             "Knowl 4's and Knowl 5's clusters and mixes at multiples of the tables' rates "
             f"(profile **{s['profile']}**, {s['config']['eval_episodes']} evaluation episodes "
             "each); Δ vs round robin (%) with 95 % intervals over the episodes. The seed's "
             "round-robin latencies (168–248 s for these tables) sit in the overloaded rows.",
             "", "| cluster | × rate | λ (req/s) | load | RR E2E (s) | "
             + " | ".join(names) + " |", "|---" * (5 + len(names)) + "|"]
    for r in rows:
        cells = [f"{d['mean']:+.1f} [{_f(d['lo'], 1)}, {_f(d['hi'], 1)}]"
                 for d in r["delta_pct"].values()]
        lines.append(f"| {r['table']} | {r['load_factor']:g} | {r['rate_rps']:.0f} | "
                     f"{r['utilisation']:.2f} | {r['rr_e2e_s']:.1f} | " + " | ".join(cells)
                     + " |")
    return lines + [""]


def _f(x: float, nd: int = 2) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.{nd}f}"


def _episodes(r: dict) -> str:
    """Evaluation runs (seed × episode) whose greedy policy sent more than 1.5× the fair share
    to one instance, of all runs ("—" for summaries written before the count existed)."""
    if "collapsed_episodes" not in r:
        return "—"
    return f"{r['collapsed_episodes']}/{r['runs']}"


def _network_note(config: dict) -> str:
    """Which Q-network the table's RL rows used (summaries before experiment version 4 name
    none: the unconstrained symmetric network)."""
    if config.get("selection") == "validation":
        return (f" RL rows: the {config['network']} Q-network, the network kept after the "
                f"training episode whose greedy policy served {config['validation_episodes']} "
                f"held-out validation episodes best (experiment version {config['version']}); "
                f"the last column evaluates the network after the last episode on the same "
                f"evaluation episodes.")
    if config.get("network"):
        return f" RL rows: the {config['network']} Q-network (experiment version " \
               f"{config.get('version')})."
    return (" **RL rows: the earlier unconstrained symmetric Q-network** (experiment version 3;"
            " not re-run with the monotone network this session).")


def _table_md(table: str, s: dict) -> list[str]:
    c, ld = s["config"], s["offered_load"]
    regime = "overloaded" if ld["utilisation"] >= 1 else "below capacity"
    lines = [f"## {TITLES[table]}", "",
             f"Profile **{s['profile']}**: {c['episodes']} training episodes × {c['requests']:,} "
             f"requests, {c['train_seeds']} training seed(s), {s['episodes']} evaluation "
             f"episodes of {c['requests']:,} requests. Offered load {ld['rate_rps']:.1f} req/s: "
             f"prefill {ld['prefill_demand']:.2f} + decode {ld['decode_demand']:.2f} = "
             f"**{ld['utilisation']:.2f}** of capacity ({regime}). Predicted lengths "
             f"(histogram classifier, buckets at {ld['decode_tps']:.1f} tokens/s): bucket "
             f"accuracy {100 * s['predictor_accuracy']:.1f} % on the fit sample. Headroom "
             f"(a loose bound: batching slows every request even under a perfect router): the "
             f"requests alone on idle instances would average {s['ideal_e2e_s']:.2f} s, "
             f"{s['headroom_pct']:.0f} % below round robin. Seed's round robin: "
             f"{PAPER_RR[table]} s." + _network_note(c), "",
             "| router | mean E2E (s) | Δ vs RR (%) [95 % CI] | seed's Δ (%) | verdict | "
             "router wait (s) | TTFT (s) | preemptions | max share | episodes > 1.5× | "
             "train (s) | kept after episode | last network: Δ (%) [95 % CI], max share |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in s["routers"].items():
        paper = "—" if r["paper_delta_pct"] is None else f"{r['paper_delta_pct']:+.2f}"
        wait = _f(r["router_wait_s"], 3)
        if table == "k4" and name in PAPER_WAIT:
            wait += f" (seed {PAPER_WAIT[name]})"
        delta = "0 (reference)" if name == "rr" else \
            f"{r['delta_pct']:+.2f} [{_f(r['delta_lo'])}, {_f(r['delta_hi'])}]"
        lines.append(f"| {name} | {_f(r['mean_e2e_s'])} | {delta} | {paper} | {r['verdict']} | "
                     f"{wait} | {_f(r['ttft_s'])} | {r['preemptions']:.0f} | "
                     f"{r['max_share']:.2f} | {_episodes(r)} | "
                     f"{_f(r.get('train_s', float('nan')), 0)} | {_selection(r)} |")
    return lines + [""]


def _selection(r: dict) -> str:
    """The RL row's kept episodes (per training seed) and what the network after the last
    episode gave on the same evaluation episodes (summaries before version 6: "—")."""
    if "selected_episodes" not in r:
        return "— | —"
    kept = ", ".join(str(k) for k in r["selected_episodes"])
    return (f"{kept} | {r['last_delta_pct']:+.2f} [{_f(r['last_delta_lo'])}, "
            f"{_f(r['last_delta_hi'])}], {r['last_max_share']:.2f}")


def _bvr_md(s: dict) -> list[str]:
    """Knowl 6's section (:func:`_knowl6_table.markdown`; summaries before issue 35, of the
    ordered-Azure FCFS/SPF table, are skipped)."""
    from _knowl6_table import markdown

    return markdown(s) if "cells" in s else []


def write_results(root: Path) -> Path:
    """Write ``root/intelligent_router.md`` from the table summaries present under ``root``."""
    root = Path(root)
    lines = ["# Intelligent Router (arXiv 2408.13510): the seed's tables re-measured", "",
             "Generated by `experiments/intelligent_router.py` (collect step) from "
             "`intelligent-router-*/summary.json`; Δ = 100 (E2E / E2E of round robin on the "
             "same episode − 1). Every router sees predicted output lengths. \"episodes > "
             "1.5×\": evaluation runs (training seed × episode) in which one instance got more "
             "than 1.5× its fair share; `tools/intelligent_share_diagnosis.py TABLE ROUTER` "
             "replays a table's seed-0 checkpoint and compares each greedy choice with the "
             "instances' loads (how often it picked the least / most loaded one vs a uniform "
             "choice on the same states).", "", RULE, ""]
    found = []
    for table in ORDER:
        p = root / f"intelligent-router-{table}" / "summary.json"
        if p.exists():
            found.append(table)
            lines += _table_md(table, json.loads(p.read_text(encoding="utf-8")))
    missing = [t for t in ORDER if t not in found]
    if missing:
        lines += [f"Not run (no summary): {', '.join(missing)}.", ""]
    load = root / "intelligent-router-load" / "summary.json"
    if load.exists():
        lines += _load_md(json.loads(load.read_text(encoding="utf-8")))
    bvr = root / "intelligent-router-bvr" / "summary.json"
    if bvr.exists():
        lines += _bvr_md(json.loads(bvr.read_text(encoding="utf-8")))
    path = root / "intelligent_router.md"
    write_text_atomic(path, "\n".join(lines))
    return path
