"""Knowl 6 (batching vs routing) of the Intelligent Router experiments: the paper's table, the
two claims' rules (fixed before the full run) and the markdown table (ours beside the paper's).

The setup (classes, orders, cluster, routers, metric) is :mod:`lbtheory.intelligent._knowl6`'s.
"""

from __future__ import annotations

import numpy as np

BATCHERS = ("bin-packing", "lwl", "fcfs")
ROUTERS = ("small-large", "rr", "decode-balancer")
ORDERS = ("lh-hl-random", "four-random", "lh-then-hl", "hl-then-lh")
LABELS = {"bin-packing": "Bin packing", "lwl": "Least work left", "fcfs": "FCFS",
          "small-large": "Dedicated small–large", "rr": "Round robin",
          "decode-balancer": "Decode balancer", "lh-hl-random": "(LH, HL) random",
          "four-random": "four classes random", "lh-then-hl": "LH, then HL",
          "hl-then-lh": "HL, then LH"}

#: the paper's "Total End-to-End Latency (s)", batcher -> router -> the four orders
PAPER = {
    "bin-packing": {"small-large": (704.50, 644.75, 566.25, 588.15),
                    "rr": (581.50, 559.30, 424.80, 440.68),
                    "decode-balancer": (595.82, 555.40, 424.82, 440.81)},
    "lwl": {"small-large": (704.50, 641.81, 566.25, 588.15),
            "rr": (585.14, 554.00, 424.64, 440.82),
            "decode-balancer": (596.95, 559.97, 424.66, 440.81)},
    "fcfs": {"small-large": (704.50, 648.66, 566.25, 588.15),
             "rr": (607.45, 572.16, 424.80, 440.82),
             "decode-balancer": (605.65, 573.17, 424.82, 440.81)},
}

#: the two claims' rules, written before the full run (the lead's brief, adopted unchanged)
RULES = """\
**Rules** (fixed before the full run; applied alike to the paper's table and to ours, ours on the
mean over the workload seeds and on each seed alone). T(o, b, r) is the makespan of order o,
batcher b, router r.

* **Routing dominates batching** — in every arrival order o, the smallest spread across routers
  at a fixed batcher, min_b [max_r T − min_r T], exceeds the largest spread across batchers at a
  fixed router, max_r [max_b T − min_b T]. Confirmed when it holds in all four orders.
* **Ordered arrivals equalise the batchers** — in orders 3 and 4 (LH then HL, HL then LH), for
  every router, the batchers' spread (max_b T − min_b T) / min_b T is below 1 %. Confirmed when
  it holds for all six (order, router) pairs."""


def _spreads(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``t[o, b, r]`` -> (routers' spread per (o, b), batchers' spread per (o, r), batchers'
    relative spread per (o, r))."""
    across_r = t.max(axis=2) - t.min(axis=2)
    across_b = t.max(axis=1) - t.min(axis=1)
    return across_r, across_b, across_b / t.min(axis=1)


def claims(t: np.ndarray) -> dict:
    """The two rules on a makespan array ``t[order, batcher, router]`` (s)."""
    across_r, across_b, rel = _spreads(t)
    dom = (across_r.min(axis=1) > across_b.max(axis=1)).tolist()
    equal = (rel[2:] < 0.01).tolist()
    return {"routing_dominates": {"per_order": dom, "holds": all(dom),
                                  "min_router_spread_s": across_r.min(axis=1).tolist(),
                                  "max_batcher_spread_s": across_b.max(axis=1).tolist()},
            "ordered_equalise": {"per_order_router": equal,
                                 "holds": all(all(x) for x in equal),
                                 "batcher_spread_pct": (100 * rel).tolist()}}


def _array(rows: list, key: str, seed: int | None = None) -> np.ndarray:
    """``[order, batcher, router]`` of ``key`` (mean over seeds, or one seed)."""
    t = np.full((len(ORDERS), len(BATCHERS), len(ROUTERS)), np.nan)
    for c, r in rows:
        runs = r["runs"] if seed is None else {str(seed): r["runs"][str(seed)]}
        t[ORDERS.index(c["order"]), BATCHERS.index(c["batcher"]), ROUTERS.index(c["router"])] = \
            np.mean([x[key] for x in runs.values()])
    return t


def summarise(rows: list) -> dict:
    """The table (means over seeds, ranges) and both rules on ours and on the paper's."""
    seeds = sorted({int(s) for _, r in rows for s in r["runs"]})
    mk = _array(rows, "makespan_s")
    per_seed = [claims(_array(rows, "makespan_s", s)) for s in seeds]
    paper = np.array([[PAPER[b][r] for r in ROUTERS] for b in BATCHERS]).transpose(2, 0, 1)
    cells = []
    for c, r in rows:
        ms = [x["makespan_s"] for x in r["runs"].values()]
        cells.append({"order": c["order"], "batcher": c["batcher"], "router": c["router"],
                      "makespan_s": float(np.mean(ms)), "makespan_min_s": float(min(ms)),
                      "makespan_max_s": float(max(ms)),
                      "mean_e2e_s": float(np.mean([x["mean_e2e_s"] for x in r["runs"].values()])),
                      "preemptions_per_request": float(np.mean(
                          [x["preemptions_per_request"] for x in r["runs"].values()])),
                      "paper_s": PAPER[c["batcher"]][c["router"]][ORDERS.index(c["order"])]})
    return {"seeds": seeds, "cells": cells, "claims": claims(mk),
            "claims_per_seed": {
                "routing_dominates": sum(p["routing_dominates"]["holds"] for p in per_seed),
                "ordered_equalise": sum(p["ordered_equalise"]["holds"] for p in per_seed)},
            "claims_mean_e2e": claims(_array(rows, "mean_e2e_s")),
            "paper_claims": claims(paper)}


def _per_seed(s: dict, claim: str) -> str:
    n = len(s["seeds"])
    return f"holds in {s['claims_per_seed'][claim]}/{n} seeds alone; " if n > 1 else ""


def _verdict(ok: bool) -> str:
    return "**confirmed**" if ok else "**refuted**"


def markdown(s: dict) -> list[str]:
    """The Knowl 6 section: the table (ours: mean makespan over the seeds [range]; the paper's),
    the rules and their outcome."""
    n = len(s["seeds"])
    seeds = f"workload seed {s['seeds'][0]}" if n == 1 else f"{n} workload seeds"
    lines = [f"## Knowl 6 — batching vs routing (2 × Llama-2-7B/V100, vLLM model; {s['requests']:,}"
             f" requests at {s['rate_rps']:g} req/s; {seeds})", "",
             "Total E2E read as the makespan (first arrival to last completion, s; module "
             "docstring of `lbtheory.intelligent._knowl6`). Ours"
             + (": mean over the seeds [min–max]" if n > 1 else "")
             + "; the paper's beside it. Mean E2E per request and preemptions per request "
             "(ours) in the last columns of each order.", "",
             "| batcher | router | " + " | ".join(
                 f"{LABELS[o]}: ours | paper | mean E2E | preempt./req" for o in ORDERS) + " |",
             "|---|---|" + "---|" * (4 * len(ORDERS))]
    by = {(c["order"], c["batcher"], c["router"]): c for c in s["cells"]}
    for b in BATCHERS:
        for r in ROUTERS:
            row = [f"{LABELS[b]} | {LABELS[r]}"]
            for o in ORDERS:
                c = by[(o, b, r)]
                rng = f" [{c['makespan_min_s']:.0f}–{c['makespan_max_s']:.0f}]" if n > 1 else ""
                row.append(f"{c['makespan_s']:.1f}{rng} | {c['paper_s']:.2f} | "
                           f"{c['mean_e2e_s']:.1f} | {c['preemptions_per_request']:.2f}")
            lines.append("| " + " | ".join(row) + " |")
    ours, paper = s["claims"], s["paper_claims"]
    rd, oe = ours["routing_dominates"], ours["ordered_equalise"]
    spread = "; ".join(f"{LABELS[o]} {a:.1f} vs {b:.1f} s" for o, a, b in zip(
        ORDERS, rd["min_router_spread_s"], rd["max_batcher_spread_s"]))
    rel = "; ".join(f"{LABELS[o]}: " + ", ".join(f"{LABELS[r]} {x:.2f} %" for r, x in zip(
        ROUTERS, s_o)) for o, s_o in zip(ORDERS[2:], oe["batcher_spread_pct"][2:]))
    lines += ["", RULES, "",
              f"* Routing dominates batching: {_verdict(rd['holds'])} on the means (smallest "
              f"routers' spread vs largest batchers' spread: {spread}); "
              f"{_per_seed(s, 'routing_dominates')}on the mean E2E "
              f"reading: {_verdict(s['claims_mean_e2e']['routing_dominates']['holds'])}; the "
              f"paper's table: {_verdict(paper['routing_dominates']['holds'])}.",
              f"* Ordered arrivals equalise the batchers: {_verdict(oe['holds'])} on the means "
              f"(batchers' spread — {rel}); "
              f"{_per_seed(s, 'ordered_equalise')}on the mean E2E "
              f"reading: {_verdict(s['claims_mean_e2e']['ordered_equalise']['holds'])}; the "
              f"paper's table: {_verdict(paper['ordered_equalise']['holds'])}.", ""]
    return lines
