"""Why the A100 set-ups could not be calibrated: an output bound, a time-factor check, a proposal.

Issue 35. Run (a script, not a sweep experiment)::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python experiments/_intelligent_k5_bound.py \\
        [--time-factor | --proposal]

The calibration rule (``lbtheory/intelligent/_setups.py``) scales every task's output *median*;
lengths stay clipped at the task's maximum (4,000 tokens at most). At the bracket's top (× 16)
round robin on Knowl 5 gave 65 s against the seed's 248.41 s. Is that the A100 model (too much
capacity for any workload whose outputs stay under the seed's 4,000 tokens) or our [R] task
shapes (three of the five tasks have outputs of 8–60 tokens, which a median scale of 16 cannot
lift near the clip)? This script answers it without calibrating anything: on Knowl 5's cluster
at the *derived* A100 KV budget (25,000 blocks, before the amendment's smaller budget), the
calibration seeds' episodes (arrivals and prompts as drawn) are served by round robin with
**every** output set to one length L, for L = 1,000 … 4,000 tokens (the seed's ceiling) and the
median scale's top (× 16) for comparison. Round robin only, no other router, and the numbers
are not used to choose a workload: they bound what any workload of the seed's description can
do on this model. Written before running (2026-12-05, 18:04 UTC). Writes
``experiments/results/intelligent-headroom/k5-output-bound.json`` (atomically).

``--time-factor`` (written 2026-12-05, 18:07 UTC, after the output bound above and before any
run of this part): a second diagnostic, **not a calibration of any table**. If the seed's A100
figures come from a slower instance than our [R] profile, one factor ``f`` on every A100
iteration-time coefficient (base and slopes alike; KV budget, workloads and scales as the
setups have them, except the derived 25,000-block budget instead of the amendment's) should
explain all three A100 round robins. ``f`` is found for Knowl 5 by the calibration's bisection
on ``log f`` in [1, 32] (round robin within 10 % of 248.41 s, seeds 9,000 and 9,001); then
Knowl 5-chunked (247.30 s) and Knowl 7 (1,005.31 s) are run **at that f**, as held-out checks,
and Knowl 7's own ``f`` is bisected for comparison. Agreement within 10 % on both checks would
say the seed's A100 numbers are consistent with one slower instance; disagreement, that no
single time scale explains them. Writes ``…/a100-time-factor.json``.

``--proposal`` (written 2026-12-05 after ``--time-factor`` gave K5 f ≈ 10.8 and
K7 f ≈ 2.95, i.e. no single time scale, and before any run of this part; **a proposal for the
issue's owner, not adopted by any table**, since it comes after two failed rules): one scalar per
A100 setup, each fixed by the only free quantity there. Knowl 7's lengths are the trace's
published means, so its scalar is the A100 time factor ``f`` (bisection as above, on Knowl 7;
derived KV budget); Knowl 5 runs on the same hardware, so it inherits that ``f`` and its scalar is
the output-length scale of the original rule (bisection on ``log s`` in [1/4, 16]); Knowl
5-chunked inherits both and is the held-out check (within 10 % of 247.30 s or not). Writes
``…/a100-proposal.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from lbtheory.intelligent import ITERATION_FEATURES
from lbtheory.intelligent._setups import CALIBRATION_SEEDS, SETUPS, bisect_log, setup_workload
from lbtheory.intelligent._simulate import simulate
from lbtheory.io import run_manifest, write_json_atomic
from lbtheory.registry import make_router
from lbtheory.workloads._workload import workload_from_arrays

OUT = Path("experiments/results/intelligent-headroom/k5-output-bound.json")
OUT_F = OUT.with_name("a100-time-factor.json")


def _paragraph(start: str) -> str:
    """The module docstring's paragraph that begins with ``start`` (the rule, as written)."""
    return next(p for p in __doc__.split("\n\n") if p.startswith(start))


def within_10pct(v: float, target: float) -> bool:
    """The calibration's criterion: ``v`` within 10 % of ``target``."""
    return bool(abs(v / target - 1.0) <= 0.10)


def scaled_timing(setup, f: float):
    """``setup``'s iteration-time model with every coefficient × ``f``."""
    t = setup.cluster().timing
    return dataclasses.replace(t, **{n: getattr(t, n) * f for n in ITERATION_FEATURES})


def rr_over_seeds(setup, timing=None, output_scale: float | None = None) -> dict:
    """Round robin's mean E2E (s) and preemptions per request, means over the calibration
    seeds, on ``setup``'s cluster (with ``timing``, default its own) at ``output_scale``
    (default the setup's) — :func:`lbtheory.intelligent._setups.rr_mean_e2e` plus the
    preemptions and a timing model."""
    cfg = setup.cluster() if timing is None else setup.cluster(timing=timing)
    runs = [simulate(setup_workload(setup, seed, output_scale=output_scale),
                     make_router("rr", "instances"), cfg).summary()
            for seed in CALIBRATION_SEEDS]
    return {"e2e_s": float(np.mean([r["latency"]["mean"] for r in runs])),
            "preemptions_per_request": float(np.mean([r["preemptions_per_request"]
                                                      for r in runs]))}


def rr_at_factor(setup, f: float) -> dict:
    """Round robin (:func:`rr_over_seeds`) with every iteration-time coefficient × ``f``."""
    return rr_over_seeds(setup, scaled_timing(setup, f))


def bisect_factor(setup, low: float = 1.0, high: float = 32.0, steps: int = 14) -> dict:
    """The calibration's bisection on ``log f`` (round robin within 10 % of the seed's)."""
    target = setup.paper_rr_s
    probes = []

    def g(f: float) -> float:
        r = rr_at_factor(setup, f)
        probes.append([f, r["e2e_s"], r["preemptions_per_request"]])
        print(f"{setup.name:11s} f = {f:7.3f}: round robin {r['e2e_s']:8.1f} s "
              f"(paper {target} s)", file=sys.stderr)
        return r["e2e_s"]

    bisect_log(g, low, high, target, steps=steps)
    f, v, pre = min(probes, key=lambda p: abs(p[1] - target))
    return {"factor": f, "rr_e2e_s": v, "preemptions_per_request": pre, "target_s": target,
            "within_10pct": within_10pct(v, target), "probes": probes}


def proposal(out: Path) -> None:
    """The ``--proposal`` of the module docstring."""
    derived = {n: dataclasses.replace(SETUPS[n], kv_blocks=None)
               for n in ("k5", "k5-chunked", "k7")}
    k7 = bisect_factor(derived["k7"])
    f = k7["factor"]
    k5 = dataclasses.replace(derived["k5"], output_scale=1.0)
    timing = scaled_timing(k5, f)
    probes = []

    def h(scale: float) -> float:
        r = rr_over_seeds(k5, timing, output_scale=scale)
        v = r["e2e_s"]
        probes.append([scale, v, r["preemptions_per_request"]])
        print(f"k5 at f = {f:.3f}, output scale {scale:7.3f}: round robin {v:8.1f} s",
              file=sys.stderr)
        return v

    target = k5.paper_rr_s
    bisect_log(h, 0.25, 16.0, target, steps=14)
    s, v, pre = min(probes, key=lambda p: abs(p[1] - target))
    check_setup = dataclasses.replace(derived["k5-chunked"], output_scale=s)
    check = rr_at_factor(check_setup, f)
    ct = check_setup.paper_rr_s
    print(f"k5-chunked at f = {f:.3f}, scale {s:.3f}: round robin {check['e2e_s']:.1f} s "
          f"(paper {ct} s)", file=sys.stderr)
    write_json_atomic(out, {
        "rule": _paragraph("``--proposal``"), "router": "rr only",
        "seeds": list(CALIBRATION_SEEDS), "k7_time_factor": k7,
        "k5_output_scale": {"scale": s, "rr_e2e_s": v, "preemptions_per_request": pre,
                            "target_s": target,
                            "within_10pct": within_10pct(v, target),
                            "probes": probes},
        "k5_chunked_check": check | {"target_s": ct, "ratio": check["e2e_s"] / ct,
                                     "within_10pct": within_10pct(check["e2e_s"], ct)},
        "manifest": run_manifest({"out": str(out)})})


def time_factor(out: Path) -> None:
    """The ``--time-factor`` diagnostic of the module docstring."""
    derived = {n: dataclasses.replace(SETUPS[n], kv_blocks=None)
               for n in ("k5", "k5-chunked", "k7")}
    k5 = bisect_factor(derived["k5"])
    checks = {}
    for n in ("k5-chunked", "k7"):
        r = rr_at_factor(derived[n], k5["factor"])
        target = derived[n].paper_rr_s
        checks[n] = r | {"target_s": target, "ratio": r["e2e_s"] / target,
                         "within_10pct": within_10pct(r["e2e_s"], target)}
        print(f"{n:11s} at K5's f = {k5['factor']:.3f}: round robin {r['e2e_s']:.1f} s "
              f"(paper {target} s)", file=sys.stderr)
    k7 = bisect_factor(derived["k7"])
    write_json_atomic(out, {"rule": _paragraph("``--time-factor``"), "router": "rr only",
                            "seeds": list(CALIBRATION_SEEDS), "k5": k5,
                            "checks_at_k5_factor": checks, "k7": k7,
                            "manifest": run_manifest({"out": str(out)})})


def rr_mean(setup, output: int | None, seed: int, scale: float) -> dict:
    """Round robin's mean E2E (s) and preemptions per request on one calibration episode, with
    every output ``output`` tokens (None: the mix's own outputs at median scale ``scale``)."""
    w = setup_workload(setup, seed, output_scale=scale)
    if output is not None:
        w = workload_from_arrays(w.arrival_s, w.prompt_tokens,
                                 np.full(len(w.arrival_s), output), task=w.task,
                                 task_names=w.task_names)
    s = simulate(w, make_router("rr", "instances"), setup.cluster()).summary()
    return {"e2e_s": float(s["latency"]["mean"]),
            "preemptions_per_request": float(s["preemptions_per_request"]),
            "mean_output_tokens": float(np.mean(w.output_tokens))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setups", default="k5,k5-chunked")
    ap.add_argument("--outputs", type=int, nargs="+", default=[1000, 2000, 3000, 4000])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--time-factor", action="store_true",
                    help="the second diagnostic (module docstring) instead of the bound")
    ap.add_argument("--proposal", action="store_true",
                    help="the proposal (module docstring) instead of the bound")
    a = ap.parse_args(argv)
    if a.proposal:
        proposal(a.out or OUT.with_name("a100-proposal.json"))
        return 0
    if a.time_factor:
        time_factor(a.out or OUT_F)
        return 0
    a.out = a.out or OUT
    rows = {}
    for name in a.setups.split(","):
        setup = dataclasses.replace(SETUPS[name], kv_blocks=None)  # the derived budget
        cases = {f"all outputs {n}": (n, 1.0) for n in a.outputs}
        cases["mix, median scale 16"] = (None, 16.0)
        res = {}
        for label, (n, scale) in cases.items():
            t = time.perf_counter()
            per = [rr_mean(setup, n, seed, scale) for seed in CALIBRATION_SEEDS]
            res[label] = {k: float(np.mean([p[k] for p in per])) for k in per[0]} | {
                "per_seed_e2e_s": [p["e2e_s"] for p in per],
                "seconds": time.perf_counter() - t}
            print(f"{name:11s} {label:22s} round robin {res[label]['e2e_s']:8.1f} s "
                  f"(paper {setup.paper_rr_s} s), "
                  f"{res[label]['preemptions_per_request']:.2f} preemptions/request",
                  file=sys.stderr)
        rows[name] = {"kv_budget_tokens": setup.cluster().kv_budget_tokens,
                      "paper_rr_s": setup.paper_rr_s, "requests": setup.requests,
                      "rate_rps": setup.rate_rps, "cases": res}
    write_json_atomic(a.out, {"rule": _paragraph("The calibration rule"), "router": "rr only",
                              "seeds": list(CALIBRATION_SEEDS), "setups": rows,
                              "manifest": run_manifest(vars(a) | {"out": str(a.out)})})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
