"""``lbtheory stepsize``: is this flow-routing stepsize locally stable, and how far from the edge?

Prints the exact critical stepsize (a common scale on the per-source stepsizes, THEORY §7.6) of the
fluid model with the file's delays (``--probe-period δ`` adds the δ/2 feedback delay of routers
that probe every δ s, as ``lbtheory simulate`` does), the empirical rule (NOT a guarantee), the
margin of ``--stepsize`` and the verdict from the exact linear analysis: locally stable (with the
decay rate) or unstable (rightmost root and period).
JSON keys ``critical_stepsize``, ``empirical_rule``, ``rightmost_root`` ([re, im]) and ``verdict``
(``"stable"``/``"unstable"``) are a stable contract. Exit code 0 when the verdict is stable, 1 when
it is unstable (so scripts and CI can test it), 2 on bad input.

Units: η is in 1/(cost unit·s); the latency and gradient costs are in seconds, so there η is in
1/s²; the RIF cost is in requests per replica, so η is in replicas/(request·s).
"""

from __future__ import annotations

import argparse
import math

from ._help import number

NAME = "stepsize"
HELP = ("Exact critical stepsize of flow routing with delays, the empirical rule, and a "
        "stable/unstable verdict for a given stepsize.")


#: Largest ``--nodes`` [R]: THEORY §7.6 reports 30–40 nodes for 8 digits; 256 leaves room,
#: and the dense eigenvalue problem grows as (cells × nodes)³.
MAX_NODES = 256
#: Largest ``--stepsize`` [R]: 10^4–10^6× the critical stepsizes of the bundled topologies
#: (1–100); far beyond, the collocation overflows (1e308 printed numpy warnings and a garbage
#: root), while the verdict there is UNSTABLE anyway.
MAX_STEPSIZE = 1e6


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topology", help="cell network (.yaml/.yml/.json)")
    parser.add_argument("--cost", default="gradient", choices=["gradient", "latency", "rif"],
                        help="cost signal routed on (default gradient)")
    number(parser, "--stepsize", default=None, low=0.0, low_open=True,
           help="stepsize η to assess, in 1/(cost unit·s) (= 1/s² for the latency "
                "and gradient costs, whose unit is s); same for every source "
                "(default: the empirical rule)")
    number(parser, "--probe-period", default=0.0, low=0.0, high=3600.0, unit="s",
           metavar="SECONDS",
           help="routers update every this many seconds: the fluid model's feedback delay "
                "becomes τ + δ/2 (default 0: continuous updates; `lbtheory simulate` uses its "
                "scenario's simulation.probe_period_s, 0.01 s unless set)")
    number(parser, "--nodes", kind=int, default=16, high=MAX_NODES,
           help="Chebyshev degree of the collocation (default 16)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from .._checks import check_real, validate_stepsize
    from ..io import dumps_json, load_topology
    from ..stability import check_stepsize, symmetric_threshold, with_probe_period

    if args.stepsize is not None:
        validate_stepsize(args.stepsize, "--stepsize")
        if args.stepsize > MAX_STEPSIZE:
            from ..errors import StepsizeError

            raise StepsizeError(f"--stepsize {args.stepsize:g} is beyond {MAX_STEPSIZE:g} "
                                f"1/(cost unit·s), where the analysis overflows (critical "
                                f"stepsizes are ~1–100): it is UNSTABLE")
    period = check_real(args.probe_period, "--probe-period", unit="s", low=0.0)
    net = load_topology(args.topology)
    # the fluid model of routers probing every δ s: every feedback loop is δ/2 longer
    fb = with_probe_period(net, period)
    rep = check_stepsize(fb, args.cost, args.stepsize, n_nodes=args.nodes)
    closed = symmetric_threshold(fb, rep.critical.linearisation.point)
    out = rep.to_dict()
    out["closed_form_two_cell"] = None if closed is None else closed.eta_crit
    out["probe_period_s"] = period
    out["max_delay_s"] = net.max_delay
    if args.json:
        print(dumps_json(out))
    else:
        print(format_report(out, stepsize_given=args.stepsize is not None))
    return 0 if out["verdict"] == "stable" else 1  # exit 1: the check failed (UNSTABLE)


def _num(v: float | None, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isinf(v)):
        return "none (stable for every stepsize)" if unit == "eta" else "inf"
    return f"{v:.6g}"


#: the unit of the stepsize η per cost signal: η·ĉ·δ is a routing probability, so η is
#: 1/(cost unit · s) — seconds for latency/gradient, requests per replica for RIF.
ETA_UNITS = {"latency": "1/s²", "gradient": "1/s²", "rif": "replicas/(request·s)"}


def format_report(d: dict, *, stepsize_given: bool = True) -> str:
    """Readable report of :meth:`StepsizeReport.to_dict`."""
    crit = d["critical_stepsize"]
    unit = ETA_UNITS.get(str(d["cost"]), "1/(cost unit·s)")
    period = d.get("probe_period_s", 0.0)
    feedback = ("routers updated continuously (--probe-period 0)" if not period else
                f"routers probing every δ = {period:g} s (feedback delay τ + δ/2)")
    lines = [f"cost signal:             {d['cost']} (stepsize η in {unit})",
             f"fluid model:             one-way delays τ up to {d.get('max_delay_s', 0.0):.4g} "
             f"s, {feedback}",
             f"exact critical stepsize: {_num(crit, 'eta')}"
             + ("" if crit is None or math.isinf(crit)
                else f"  (η_crit of the linearised fluid model at its equilibrium; oscillation "
                     f"period at onset {d['crossing_period']:.4g} s)")]
    if d.get("closed_form_two_cell") is not None:
        lines.append(f"closed form (§7.5):      {d['closed_form_two_cell']:.6g}")
    rule = d["empirical_rule"]
    lines.append(f"empirical rule (§7.6):   {_num(rule)}  "
                 "(min over sources of μ'_j/(Λ_j·f'_j·2τ̄_i): a rule from random tests, NOT a "
                 "guarantee)")
    unbounded = rule is None or (isinstance(rule, float) and math.isinf(rule))
    what = "stepsize" if stepsize_given else (
        "stepsize (placeholder 1: the empirical rule is unbounded; pass --stepsize)" if unbounded
        else "stepsize (= empirical rule)")
    lines.append(f"{what}: {d['stepsize']:.6g}; margin critical/stepsize = {_num(d['margin'])}")
    re, im = d["rightmost_root"]
    if d["verdict"] == "stable":
        lines.append(f"verdict: locally STABLE (exact linear analysis); perturbations decay at "
                     f"rate {d['decay_rate']:.4g} /s (time constant {1 / d['decay_rate']:.4g} s)")
    else:
        period = "non-oscillatory" if not im else f"period {d['period']:.4g} s"
        lines.append(f"verdict: UNSTABLE (exact linear analysis); rightmost root "
                     f"{re:.4g} {'+' if im >= 0 else '-'} {abs(im):.4g}i /s, {period}")
    if not period:
        lines.append("note: `lbtheory simulate` reports η_crit with its probe period δ (0.01 s "
                     "unless the scenario sets one; feedback delay τ + δ/2, so usually smaller): "
                     "--probe-period 0.01 gives its value. Its default η is another rule, "
                     "scale/(mean one-way delay + δ/2), printed by simulate")
    if not d["critical_verified"]:
        lines.append("note: the collocation check at the critical stepsize found another root "
                     "branch; the critical value is the bisection bracket (about 1 %)")
    return "\n".join(lines)
