"""Headroom before training (issue 35, item 4): round robin, JSQ and the headroom routers
(clairvoyant rollout, oracle deferral) on each Knowl setup of the vLLM-faithful model, at the
operating point of :data:`lbtheory.intelligent._setups.SETUPS`.

Run (a script, not a sweep experiment: the leading underscore keeps `lbtheory sweep` from
loading it):  PYTHONPATH=. python experiments/_intelligent_headroom.py [--requests 500] [--seeds 2]
      [--out experiments/results/intelligent-headroom] [--preemption recompute|swap]

Protocol (fixed before the run): evaluation workload seeds 20,000, 20,001, … (never the
calibration seeds 9,000/9,001); the headroom routers cost decisions × candidates × one episode,
so they run on the first ``--requests`` requests of each episode (reduced; round robin and JSQ
are reported both there and at the setup's full request count; noted 2026-12-05: for a
synthetic set-up the reduced episode is ``setup_workload(setup, seed, --requests)``, a separate
draw of the same seed, not a prefix of the full one — with ``--trace`` it is the prefix).
Headroom = 100 (E2E of the
clairvoyant / E2E of round robin − 1) % on the same episode; a setup with a headroom above −3 %
has no room for any router (the issue's rule). Writes ``headroom.json`` (with the run's config
and package versions) and ``summary.md`` atomically.

``--preemption swap`` (2026-12-05) measures the same with vLLM's swap preemption; the runs that
the RESULTS compare, both modes on the same ten seeds (decided before either ran): ``--setups
k4,k5 --seeds 10 --policies clairvoyant --preemption recompute|swap --out
experiments/results/intelligent-headroom/preemption-MODE``, and, once swap worked with chunked
prefill, ``--setups k5-chunked`` with swap (``preemption-swap-chunked``; its recompute figures
are the k5-chunked table's).

Knowl 7 and 8 at the same ten seeds (written 2026-12-05, before either ran; their first
measurement had two seeds): ``--setups k7,k8 --seeds 10 --policies clairvoyant --out
experiments/results/intelligent-headroom/k7-k8-10seeds``; and, because Knowl 8's 500-request
prefix is only 12.5 s of its arrivals (its episodes are 4,000), Knowl 8 with the clairvoyant on
2,000 requests, the first three seeds: ``--setups k8 --seeds 3 --requests 2000 --policies
clairvoyant --out experiments/results/intelligent-headroom/k8-2000``.

Knowl 7 on a *public* production trace (written 2026-12-05, before any of it ran). The seed's
trace is not public; the Azure LLM inference traces of 2023 (bundled, ``examples/traces/``) are
one-hour production traces of the same kind. ``--trace FILE`` (repeatable) replaces the setup's
synthetic mix by the trace(s): each episode is ``mix_traces(traces, n_requests=<the setup's>,
seed, rate_rps=<the setup's>)`` — requests drawn without replacement, Poisson arrivals at the
setup's rate (the seed's "sampled at λ req/s") —, and the headroom routers run on its first
``--requests`` requests. Cluster and operating point are Knowl 7's (4 × A100, chunk 1,024,
2,600 KV blocks: its uncalibrated closest point; 80 req/s, 4,000 requests). Runs: the code trace
(prompt-dominated, 2,048 / 27.9 tokens on average — the closest public analogue of the seed's
5,526.64 / 112.69), the conversation trace (1,155 / 211), and both mixed (task = trace):
``--setups k7 --seeds 10 --policies clairvoyant --trace examples/traces/AzureLLMInferenceTrace_
{code,conv}.csv --out experiments/results/intelligent-headroom/k7-azure-{code,conv,mixed}``.
Then (written after those three ran, before the next): the code trace had the largest
headroom on 500 requests (−5.5 %), and the headroom shrank with the episode's length on Knowl 5
(−12.6 % on 500, −2.4 % on 2,000), so the clairvoyant on whole 4,000-request episodes, where it
is cheap enough: the code trace at ten seeds (``--requests 4000 --out …/k7-azure-code-4000``)
and the synthetic Knowl 7 at three (``--seeds 3 --requests 4000 --out …/k7-4000``); with
``jsq-tokens`` (JSQ on committed tokens, the decode balancer) beside JSQ, an exploratory
reference (``--baselines rr,jsq,jsq-tokens``), since JSQ counts requests and the code trace's
prompts vary 3–7,437 tokens.
And (written when Knowl 8's clairvoyant had gained −7.8 % and −8.8 % on 2,000 requests, against
−1.7 % on 500): Knowl 8 on whole 4,000-request episodes, two seeds (≈ 10 min each):
``--setups k8 --seeds 2 --requests 4000 --baselines rr,jsq,jsq-tokens --out …/k8-4000``.
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
from lbtheory.stats import mean_ci
from lbtheory.workloads import mix_traces, read_trace

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
    ap.add_argument("--baselines", default="rr,jsq",
                    help="routers run at the full and the reduced length (rr first)")
    ap.add_argument("--trace", action="append", default=[],
                    help="a trace file replacing the setups' synthetic mix (repeatable: mixed)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    traces = [read_trace(p) for p in a.trace]
    base = a.baselines.split(",")
    if base[0] != "rr":
        ap.error("--baselines must start with rr (the reference of every Δ)")

    def episode(st, seed: int):
        if not traces:
            return setup_workload(st, seed)
        return mix_traces(traces, n_requests=st.requests, seed=seed, rate_rps=st.rate_rps)

    def prefix(st, seed: int, full):
        if not traces:
            return setup_workload(st, seed, a.requests)
        return full.select(np.arange(len(full)) < a.requests)

    rows: dict = {}
    for name in a.setups.split(","):
        st = SETUPS[name]
        cfg = st.cluster(preemption=a.preemption)
        rows[name] = {"setup": {"hardware": st.hardware, "instances": st.instances,
                                "rate_rps": st.rate_rps, "requests": st.requests,
                                "output_scale": st.output_scale, "kv_blocks": st.kv_blocks,
                                "paper_rr_s": st.paper_rr_s,
                                "traces": [{"path": t.path, "requests": len(t),
                                            "mean_prompt_tokens": float(t.prompt_tokens.mean()),
                                            "mean_output_tokens": float(t.output_tokens.mean())}
                                           for t in traces]},
                        "full": {}, "reduced": {}}
        for k in range(a.seeds):
            seed = EVAL_SEED0 + k
            full = episode(st, seed)
            rows[name]["full"][seed] = {r: _row(simulate(full, make_router(r, "instances"), cfg))
                                        for r in base}
            wl = prefix(st, seed, full)
            red = {r: _row(simulate(wl, make_router(r, "instances"), cfg)) for r in base}
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
             f"seeds, {a.preemption} preemption"
             + (f", requests from {', '.join(Path(p).name for p in a.trace)}" if a.trace
                else ""), "",
             f"Headroom routers on {a.requests}-request episodes of the same seeds (reduced); "
             f"the baselines ({', '.join(base)}) also at the setup's full count. "
             f"Δ = mean over seeds of 100 (E2E / E2E of round robin − 1) %; brackets: 95 % "
             f"t-interval over the seeds (3 seeds or more).", "",
             "| setup | RR full (s) | paper RR (s) | "
             + "".join(f"{b.upper()} full Δ | " for b in base[1:]) + "RR reduced (s) | "
             + "".join(f"{b.upper()} Δ | " for b in base[1:])
             + "clairvoyant Δ | oracle-defer Δ | RR preempt./req |",
             "|---" * (7 + 2 * len(base[1:])) + "|"]

    def delta(d: dict, p: str) -> str:
        v = [100 * (r[p]["e2e_s"] / r["rr"]["e2e_s"] - 1) for r in d.values() if p in r]
        if not v:
            return "—"
        m, lo, hi = mean_ci(v)  # 95 % t-interval over the seeds (from 3 seeds on)
        return f"{m:+.1f} %" + (f" [{lo:+.1f}, {hi:+.1f}]" if len(v) >= 3 else "")

    for name, r in rows.items():
        full, red = r["full"], r["reduced"]
        rr_full = np.mean([x["rr"]["e2e_s"] for x in full.values()])
        rr_red = np.mean([x["rr"]["e2e_s"] for x in red.values()])
        pre = np.mean([x["rr"]["preemptions_per_request"] for x in full.values()])
        paper = r["setup"]["paper_rr_s"]
        lines.append(f"| {name} | {rr_full:.1f} | {paper if paper else '—'} | "
                     + "".join(f"{delta(full, b)} | " for b in base[1:]) + f"{rr_red:.1f} | "
                     + "".join(f"{delta(red, b)} | " for b in base[1:])
                     + f"{delta(red, 'clairvoyant')} | {delta(red, 'oracle-defer')} | "
                     f"{pre:.2f} |")
    text = "\n".join(lines) + "\n"
    tmp = out / "summary.md.tmp"
    tmp.write_text(text)
    tmp.replace(out / "summary.md")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
