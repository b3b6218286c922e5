"""The lane the gaining Knowl 8 seeds learnt, as a fixed rule: how much headroom does it take?

Run (a script, not a sweep experiment)::

    PYTHONPATH=experiments .venv/bin/python experiments/_intelligent_vllm_lane_rule.py

The rule, written 2026-12-05, 19:00 UTC, before any run (issue 35). **Post hoc**: it was designed
after ``_intelligent_vllm_lanes.py`` showed that the two Knowl 8 trainings that gain send the
prompt-heavy, short-answer requests to one instance; it is a diagnostic of that mechanism, not
an entry of any table, and nothing in it is tuned on the evaluation episodes. A request is
*prompt-heavy* when its prompt is longer than its predicted output (the split of the seed's
Knowl 1: prefill-heavy vs decode-heavy requests; the router sees the predicted output, never
the true one). The lane gets k = max(1, round(m · W_p / W)) of the m instances (the first k),
where W_p / W is the prompt-heavy requests' share of the token work Σ (prompt + predicted
output) on the set-up's fitting workload (the predictor's, never an evaluation episode) — a
size-interval assignment that equalises token work per instance. The other requests use the
remaining m − k instances. Within each class: round robin (``lane-rr``) or the least token
load (``lane-jsq-tokens``, the package's JSQ on tokens restricted to the class); both variants
are reported, neither is chosen. Set-ups: Knowl 8 (where the lanes were found) and Knowl 4 (the
calibrated set-up), on the tables' 10 evaluation episodes at full length and at the headroom
length, Δ mean E2E vs round robin with 95 % t-intervals and its ratio to the clairvoyant's
mean Δ (the tables' headroom cells). Writes ``lane-rule.json`` next to each table's summary
(atomically).

Extension (written 2026-12-05, 19:01 UTC, after the Knowl 8 run — lane-jsq-tokens −17.7 % at
full length against the clairvoyant's −5.9 % — and before any other set-up ran): the same rule,
unchanged, on Knowl 5 and Knowl 5 with chunked prefill as well (``--setups k8,k4,k5,k5-chunked``;
uncalibrated set-ups, as their tables).

Extension 2 (written 2026-12-05, 19:18 UTC, after the four set-ups above and before this ran):
Knowl 7 (``--setups k7``; the production-like mix, uncalibrated, where the clairvoyant found
under 3 % and no table was made), the rule unchanged except that k is at most m − 1 (both
classes keep an instance); its reference is the whole-episode clairvoyant of
``intelligent-headroom/k7-4000`` (3 of the same evaluation seeds). Written to
``intelligent-headroom/k7-lane-rule.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
from intelligent_router_vllm import BUDGET, EVAL_SEED0, FIT_SEED, HEADROOM_REQUESTS, _row, _setup

from lbtheory.io import run_manifest, write_json_atomic
from lbtheory.stats import mean_ci

RESULTS = Path("experiments/results")


@dataclasses.dataclass(frozen=True)
class LaneRouter:
    """Prompt-heavy requests (prompt > predicted output) on instances ``[0, k)``, the others on
    ``[k, m)``; within a class round robin (``within="rr"``) or least token load
    (``"jsq-tokens"``, ties to the lowest index)."""

    k: int
    within: str = "rr"
    name: str = "lane"

    def init(self, seed: int = 0) -> tuple[int, int]:
        """Round-robin pointers of the two classes."""
        return (0, 0)

    def observe(self, state: tuple[int, int], view) -> tuple[int, int]:
        """Nothing to learn."""
        return state

    def route(self, state: tuple[int, int], view, rng) -> tuple[int, tuple[int, int]]:
        """The head request's class, then its instance within the class."""
        m = view.config.n_instances
        heavy = int(view.queue_prompt[0]) > int(view.queue_output_pred[0])
        lo, hi = (0, self.k) if heavy else (self.k, m)
        if self.within == "jsq-tokens":
            return lo + int(np.argmin(np.asarray(view.load_tokens)[lo:hi])), state
        p = state[0] if heavy else state[1]
        g = lo + p % (hi - lo)
        return g, ((p + 1, state[1]) if heavy else (state[0], p + 1))


def lane_size(st: dict, fit_requests: int) -> tuple[int, float]:
    """``(k, W_p / W)`` on the set-up's fitting workload (module docstring)."""
    from lbtheory.intelligent._setups import setup_workload

    fit = setup_workload(st["setup"], FIT_SEED, fit_requests)
    pred = np.asarray(st["predict_fn"](fit), dtype=float)
    prompt = np.asarray(fit.prompt_tokens, dtype=float)
    heavy = prompt > np.floor(pred)
    share = float((prompt[heavy] + pred[heavy]).sum() / (prompt + pred).sum())
    m = st["setup"].instances
    if m < 2:
        raise ValueError(f"a lane needs at least 2 instances, the set-up has {m}")
    return min(max(1, round(m * share)), m - 1), share  # both classes keep an instance


def clairvoyant_delta(folder: Path) -> dict:
    """The clairvoyant's mean Δ (%) vs round robin at full and headroom length: the table's
    headroom figures (``summary.json``, computed from its headroom cells); for Knowl 7 (no table)
    the whole-episode figure of ``intelligent-headroom/k7-4000`` (Extension 2)."""
    if not (folder / "summary.json").exists():
        h = json.loads((RESULTS / "intelligent-headroom" / "k7-4000" / "headroom.json")
                       .read_text())["setups"]["k7"]["reduced"]  # 4,000 = whole episodes
        d = [100 * (v["clairvoyant"]["e2e_s"] / v["rr"]["e2e_s"] - 1) for v in h.values()
             if "clairvoyant" in v]
        return {"full": float(np.mean(d)) if d else None, "short": None}
    sm = json.loads((folder / "summary.json").read_text())
    return {"full": float(sm["clairvoyant_full_delta_pct"][0]),
            "short": float(sm["clairvoyant_delta_pct"][0])}


def main(argv: list[str] | None = None) -> int:
    from lbtheory.intelligent import simulate
    from lbtheory.registry import make_router

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setups", default="k8,k4")
    a = ap.parse_args(argv)
    b = BUDGET["full"]
    for name in a.setups.split(","):
        config = {"setup": name, "requests": b["requests"], "fit_requests": b["fit_requests"],
                  "headroom_requests": HEADROOM_REQUESTS.get(name, b["headroom_requests"]),
                  "eval_seeds": [EVAL_SEED0 + k for k in range(b["eval_episodes"])]}
        st = _setup(config)
        m = st["setup"].instances
        k, share = lane_size(st, b["fit_requests"])
        routers = {"rr": make_router("rr", "instances"), "lane-rr": LaneRouter(k, "rr", "lane-rr"),
                   "lane-jsq-tokens": LaneRouter(k, "jsq-tokens", "lane-jsq-tokens")}
        rows: dict = {r: {"full": {}, "short": {}} for r in routers}
        for s in config["eval_seeds"]:
            for part, fn in (("full", st["workload_fn"]), ("short", st["short_fn"])):
                wl = fn(s)
                pred = st["predict_fn"](wl)
                for r, router in routers.items():
                    res = simulate(wl, router, st["cluster"], predicted_output=pred)
                    rows[r][part][str(s)] = _row(res, m)
        folder = RESULTS / f"intelligent-router-vllm-{name}"
        out = folder / "lane-rule.json"
        if not folder.is_dir():  # Knowl 7: no table (Extension 2)
            out = RESULTS / "intelligent-headroom" / f"{name}-lane-rule.json"
        rr = {p: {s: v["e2e_s"] for s, v in rows["rr"][p].items()} for p in ("full", "short")}
        clair = clairvoyant_delta(folder)
        summary = {}
        for r in ("lane-rr", "lane-jsq-tokens"):
            summary[r] = {}
            for part in ("full", "short"):
                d = [100 * (rows[r][part][s]["e2e_s"] / rr[part][s] - 1) for s in rr[part]]
                mu, lo, hi = mean_ci(np.asarray(d))
                summary[r][part] = {
                    "delta_pct": [float(mu), float(lo), float(hi)],
                    "share_of_clairvoyant": (None if not clair[part]
                                             else float(mu / clair[part])),
                    "max_share": float(np.median([v["max_share"]
                                                  for v in rows[r][part].values()]))}
                cl = "—" if clair[part] is None else f"{clair[part]:+.2f} %"
                print(f"{name} {r:16s} {part:5s}: Δ {mu:+.2f} % [{lo:+.2f}, {hi:+.2f}] vs rr; "
                      f"clairvoyant {cl}", file=sys.stderr)
        write_json_atomic(out, {
            "rule": next(p for p in __doc__.split("\n\n") if p.startswith("The rule")),
            "config": config, "lane_instances": k, "prompt_heavy_work_share": share,
            "clairvoyant_delta_pct": clair, "summary": summary, "episodes": rows,
            "manifest": run_manifest(vars(a))})
        print(f"{name}: lane of {k} of {m} instances (prompt-heavy token-work share "
              f"{share:.3f})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
