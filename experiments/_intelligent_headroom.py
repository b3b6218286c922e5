"""Headroom before training (issue 35, item 4): round robin, JSQ and the headroom routers
(clairvoyant rollout, oracle deferral) on each Knowl setup of the vLLM-faithful model, at the
operating point of :data:`lbtheory.intelligent._setups.SETUPS`.

Run (a script, not a sweep experiment: the leading underscore keeps `lbtheory sweep` from
loading it):  PYTHONPATH=. python experiments/_intelligent_headroom.py [--requests 500] [--seeds 2]
      [--out experiments/results/intelligent-headroom] [--preemption recompute|swap]

Protocol (fixed before the run): evaluation workload seeds 20,000, 20,001, … (never the
calibration seeds 9,000/9,001); the headroom routers cost decisions × candidates × one episode,
so they run on the first ``--requests`` requests of each episode (reduced; round robin and JSQ
are reported both there and at the setup's full request count). Headroom = 100 (E2E of the
clairvoyant / E2E of round robin − 1) % on the same episode; a setup with a headroom above −3 %
has no room for any router (the issue's rule). Writes ``headroom.json`` (with the run's config
and package versions) and ``summary.md`` atomically.

``--preemption swap`` (2026-12-05) measures the same with vLLM's swap preemption; the runs that
the RESULTS compare, both modes on the same ten seeds (decided before either ran): ``--setups
k4,k5 --seeds 10 --policies clairvoyant --preemption recompute|swap --out
experiments/results/intelligent-headroom/preemption-MODE``, and, once swap worked with chunked
prefill, ``--setups k5-chunked`` with swap (``preemption-swap-chunked``; its recompute figures
are the k5-chunked table's).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from lbtheory.intelligent import simulate
from lbtheory.intelligent._headroom import simulate_headroom
from lbtheory.intelligent._setups import SETUPS, setup_workload
from lbtheory.io import run_manifest, write_json_atomic
from lbtheory.registry import make_router

EVAL_SEED0 = 20_000
KEYS = ("rr", "jsq", "clairvoyant", "oracle-defer")


def _row(res) -> dict:
    s = res.summary()
    return {"e2e_s": s["latency"]["mean"], "router_wait_s": s["router_wait"]["mean"],
            "ttft_s": s["ttft"]["mean"], "tbt_var_p50": s["tbt"].get("var_p50"),
            "tbt_var_p99": s["tbt"].get("var_p99"),
            "preemptions_per_request": s["preemptions_per_request"],
            "completed": s["completed"], "requests": s["requests"]} | (
                {"swaps_per_request": s["swaps_per_request"]} if "swaps_per_request" in s else {})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--setups", default="k4,k5,k5-chunked,k7,k8")
    ap.add_argument("--policies", default="clairvoyant,oracle-defer")
    ap.add_argument("--out", default="experiments/results/intelligent-headroom")
    ap.add_argument("--preemption", default="recompute", choices=("recompute", "swap"))
    a = ap.parse_args(argv)
    out = Path(a.out)
    rows: dict = {}
    for name in a.setups.split(","):
        st = SETUPS[name]
        cfg = st.cluster(preemption=a.preemption)
        rows[name] = {"setup": {"hardware": st.hardware, "instances": st.instances,
                                "rate_rps": st.rate_rps, "requests": st.requests,
                                "output_scale": st.output_scale, "kv_blocks": st.kv_blocks,
                                "paper_rr_s": st.paper_rr_s}, "full": {}, "reduced": {}}
        for k in range(a.seeds):
            seed = EVAL_SEED0 + k
            full = setup_workload(st, seed)
            rows[name]["full"][seed] = {r: _row(simulate(full, make_router(r, "instances"), cfg))
                                        for r in ("rr", "jsq")}
            wl = setup_workload(st, seed, a.requests)
            red = {r: _row(simulate(wl, make_router(r, "instances"), cfg)) for r in ("rr", "jsq")}
            for p in a.policies.split(","):
                t = time.time()
                red[p] = _row(simulate_headroom(wl, cfg, p)) | {"seconds": time.time() - t}
                print(f"{name} seed {seed} {p}: {red[p]['e2e_s']:.2f} s vs rr "
                      f"{red['rr']['e2e_s']:.2f} s ({red[p]['seconds']:.0f} s)", file=sys.stderr,
                      flush=True)
            rows[name]["reduced"][seed] = red
            write_json_atomic(out / "headroom.json", {
                "requests_reduced": a.requests, "preemption": a.preemption, "setups": rows,
                "manifest": run_manifest(vars(a), seed=EVAL_SEED0)})
    lines = [f"# Headroom before training: vLLM-faithful model, {a.seeds} workload "
             f"seeds, {a.preemption} preemption", "",
             f"Headroom routers on the first {a.requests} requests of each episode (reduced); "
             f"round robin and JSQ also at the setup's full count. Δ = mean over seeds of "
             f"100 (E2E / E2E of round robin − 1) %.", "",
             "| setup | RR full (s) | paper RR (s) | JSQ full Δ | RR reduced (s) | JSQ Δ | "
             "clairvoyant Δ | oracle-defer Δ | RR preempt./req |",
             "|---|---|---|---|---|---|---|---|---|"]

    def delta(d: dict, p: str) -> str:
        v = [100 * (r[p]["e2e_s"] / r["rr"]["e2e_s"] - 1) for r in d.values() if p in r]
        return f"{np.mean(v):+.1f} %" if v else "—"

    for name, r in rows.items():
        full, red = r["full"], r["reduced"]
        rr_full = np.mean([x["rr"]["e2e_s"] for x in full.values()])
        rr_red = np.mean([x["rr"]["e2e_s"] for x in red.values()])
        pre = np.mean([x["rr"]["preemptions_per_request"] for x in full.values()])
        paper = r["setup"]["paper_rr_s"]
        lines.append(f"| {name} | {rr_full:.1f} | {paper if paper else '—'} | "
                     f"{delta(full, 'jsq')} | {rr_red:.1f} | {delta(red, 'jsq')} | "
                     f"{delta(red, 'clairvoyant')} | {delta(red, 'oracle-defer')} | {pre:.2f} |")
    text = "\n".join(lines) + "\n"
    tmp = out / "summary.md.tmp"
    tmp.write_text(text)
    tmp.replace(out / "summary.md")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
