"""``lbtheory simulate``: run DLB routers and baselines on the discrete-event cluster simulator."""

from __future__ import annotations

import argparse

import numpy as np

from ..errors import DataFormatError, ParameterError
from ..io import dumps_json, save_figure_atomic

NAME = "simulate"
HELP = ("Discrete-event simulation of root routers on a cell cluster (DLB §3, App. B): a scenario "
        "file (topology + 'simulation:' section) or a generated Appendix-B scenario; prints "
        "end-to-end latency mean/p50/p90/p99 (s), overflow errors and requests still in flight "
        "per policy, and each flow policy's stepsize η next to the fluid model's critical "
        "stepsize η_crit (a warning on stderr when η is beyond it); --json adds per-cell routed "
        "requests, errors, utilisation and mean workload.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``lbtheory simulate``."""
    from ..registry import POLICY_NAMES

    parser.add_argument("scenario", nargs="?", default=None,
                        help="scenario file (YAML/JSON): topology plus a 'simulation:' section")
    parser.add_argument("--appendix-b", type=int, default=None, metavar="SEED",
                        help="generate DLB's Appendix-B scenario with this seed instead of a file "
                        "(latency models fitted to the simulated cells, time-varying arrivals)")
    parser.add_argument("--cells", type=int, default=None,
                        help="number of cells of the Appendix-B scenario (default: U{2..10})")
    parser.add_argument("--utilisation", "--utilization", type=float, default=0.8,
                        help="Appendix-B target utilisation Λ/Σμ̄ (either spelling)")
    parser.add_argument("--burst", action="store_true",
                        help="Appendix-B: demand burst to 95%% in [0.3, 0.7]·duration")
    parser.add_argument("--outage", action="store_true",
                        help="Appendix-B: capacity outage to >95%% in [0.3, 0.7]·duration")
    parser.add_argument("--y", type=float, default=1.0,
                        help="Appendix-B: token times ÷ y and rates × y (utilisation unchanged)")
    parser.add_argument("--noise", type=float, default=0.0,
                        help="Appendix-B: latency-model noise ε (fitted parameters × "
                             "(1 + εξ), ξ ~ U[-1, 1]; see --noise-mode)")
    parser.add_argument("--noise-mode", default="independent",
                        choices=("independent", "joint", "scenario"),
                        help="Appendix-B noise: one ξ per parameter per run (independent), "
                             "one per cell per run (joint), or one per cell fixed with the "
                             "scenario (the pre-issue-36 generator)")
    parser.add_argument("--noise-period", type=float, default=None, metavar="S",
                        help="Appendix-B: redraw the noise every S seconds (default: once)")
    parser.add_argument("--policy", default="flow-grad",
                        help="policy or comma-separated policies, each run on the same "
                             "arrivals; one of " + ", ".join(POLICY_NAMES))
    parser.add_argument("--duration", type=float, default=60.0, help="horizon (s)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of arrivals, request sizes and routing draws")
    parser.add_argument("--stepsize", type=float, default=None,
                        help="flow-routing stepsize η, 1/(cost unit·s) (default: a per-cost "
                             "constant / (mean one-way delay + probe period/2))")
    parser.add_argument("--probe-period", type=float, default=None, metavar="S",
                        help="root routers' probe period (s), overriding the scenario's "
                             "(Appendix-B default 0.01); the JSON reports probe_age_s, the "
                             "age of the workloads each request was routed on (mean, p90)")
    parser.add_argument("--estimate", action="store_true",
                        help="cells fit their latency model online (softplus, sliding window; "
                             "a scenario's own 'estimation:' section takes precedence)")
    parser.add_argument("--error-aversion", action="store_true",
                        help="wrap every policy in DLB's error aversion (§3.4)")
    parser.add_argument("--affinity", action="store_true",
                        help="sessions with prefix caching (a scenario's 'affinity:' section, "
                             "else defaults) and affinity routing around every policy (§3.5)")
    parser.add_argument("--trace", default=None, metavar="FILE",
                        help="replay a request trace (CSV/JSONL: arrival, prompt, output "
                             "tokens) instead of Poisson arrivals; sources drawn ∝ λ_i")
    parser.add_argument("--normalise", action="store_true",
                        help="text output: add mean and p90 latency relative to rand "
                             "(rand must be among the policies)")
    parser.add_argument("--engine", default="auto", choices=("auto", "compiled", "reference"),
                        help="simulation engine: auto = compiled (numba) when it supports the "
                             "policy, else the reference (pure Python) engine")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--plot", default=None, metavar="F.png",
                        help="write latency CDFs and per-cell workloads to this image")


def _routers(spec: str, stepsize: float | None, error_aversion: bool = False,
             affinity: bool = False) -> list[tuple[str, object]]:
    from ..registry import make_router, parse_policies

    try:
        names = parse_policies(spec, "cells")
    except ParameterError as exc:
        raise ParameterError(f"--policy: {exc}") from None
    out = []
    for p in names:
        opts = {"stepsize": stepsize} if stepsize is not None and p.startswith("flow-") else {}
        out.append((p, make_router(p, error_aversion=error_aversion, affinity=affinity,
                                   **opts)))
    return out


def _scenario(args: argparse.Namespace):
    from ..sim import appendix_b_scenario, load_scenario

    if (args.scenario is None) == (args.appendix_b is None):
        raise DataFormatError("scenario: give exactly one of a SCENARIO file or --appendix-b SEED",
                              field="scenario")
    if args.scenario is not None:
        generator_only = [f"--{k.replace('_', '-')}" for k, default in _GENERATOR_OPTIONS.items()
                          if getattr(args, k) != default]
        if generator_only:
            raise ParameterError(f"{', '.join(generator_only)}: options of the generated "
                                 f"--appendix-b scenario; a scenario file sets its own cells, "
                                 f"rates and events")
        return load_scenario(args.scenario)
    return appendix_b_scenario(args.appendix_b, n_cells=args.cells, utilisation=args.utilisation,
                               duration_s=args.duration, burst=args.burst, outage=args.outage,
                               noise_eps=args.noise, y=args.y, noise_mode=args.noise_mode,
                               noise_period_s=args.noise_period)


#: options that shape only a generated --appendix-b scenario, with their defaults.
_GENERATOR_OPTIONS = {"cells": None, "utilisation": 0.8, "burst": False, "outage": False,
                      "y": 1.0, "noise": 0.0, "noise_mode": "independent",
                      "noise_period": None}

#: an in-flight share above this at the horizon earns a warning (latency covers completed
#: requests only).
IN_FLIGHT_WARNING = 0.05


def _fmt(v: float, width: int = 8, digits: int = 4) -> str:
    """A number for the table, or a dash when there is none (no completed request)."""
    return f"{v:{width}.{digits}f}" if np.isfinite(v) else f"{'—':>{width}}"


def _plot(results: list, path: str, sc=None) -> None:
    """Three panels: latency CDFs; each policy's latency quantiles relative to the first
    policy's (the gain the CDFs hide when they overlap); per-cell workloads N_j(t), with burst
    and outage windows shaded."""
    from ..plotting import figure, policy_color
    from ..stats import percentile

    fig, (ax1, ax2, ax3) = figure(nrows=3, height=8.4)
    base = results[0]
    q = np.linspace(1.0, 99.0, 99)
    lat0 = base.latency_s[base.done]
    qb = np.array([percentile(lat0, x) for x in q]) if lat0.size else None
    for r in results:
        lat = np.sort(r.latency_s[r.done])
        ax1.plot(lat, np.arange(1, lat.size + 1) / max(lat.size, 1), label=r.policy,
                 color=policy_color(r.policy))
        if r is not base and qb is not None and lat.size:
            ratio = np.array([percentile(lat, x) for x in q]) / qb
            ax2.plot(q, ratio, color=policy_color(r.policy),
                     label=f"{r.policy} / {base.policy}")
    ax1.set_xlabel("end-to-end latency (s)")
    ax1.set_ylabel("CDF")
    ax1.legend(fontsize=8)
    ax2.axhline(1.0, color="0.4", lw=0.8, ls=":")
    ax2.set_xlabel("latency percentile")
    ax2.set_ylabel(f"latency / {base.policy}'s")
    if len(results) > 1:
        ax2.legend(fontsize=8)
    styles = ("-", "--", ":", "-.")
    for r in results:
        for j in range(len(r.names)):
            ax3.plot(r.series_t, r.series_workload[:, j], lw=0.8, color=policy_color(r.policy),
                     ls=styles[j % 4], label=f"{r.policy}: {r.names[j]}"
                     if len(results) * len(r.names) <= 12 else None)
    if sc is not None:
        for items, colour, what in ((sc.bursts, "tab:orange", "burst"),
                                    (sc.outages, "tab:red", "outage")):
            for k, ev in enumerate(items):
                ax3.axvspan(ev.start_s, ev.end_s, color=colour, alpha=0.12,
                            label=f"{what} at {sc.network.names[ev.cell]}" if k < 3 else None)
    ax3.set_xlabel("t (s)")
    ax3.set_ylabel("requests at cell N_j")
    if len(results) * len(results[0].names) <= 12:
        ax3.legend(ncol=3, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    fig.tight_layout()
    save_figure_atomic(fig, path)


def run(args: argparse.Namespace) -> int:
    """Validate everything, simulate each policy on the same arrivals, print, plot."""
    from ..sim import generate_arrivals, simulate
    from ..stats import ratio

    if not (np.isfinite(args.duration) and args.duration > 0):
        raise DataFormatError(f"--duration: expected a positive number of seconds, got "
                              f"{args.duration!r}", field="duration")
    routers = _routers(args.policy, args.stepsize, args.error_aversion, args.affinity)
    if args.plot:
        from ..io import FIGURE_FORMATS, check_output_path

        check_output_path(args.plot, what="figure", flag="--plot", formats=FIGURE_FORMATS)
    if args.normalise and "rand" not in [n for n, _ in routers]:
        raise ParameterError("--normalise: add 'rand' to --policy (latency is normalised by it)")
    sc = _scenario(args)
    import dataclasses

    from ..sim import Affinity, Estimation

    if args.probe_period is not None:
        from .._checks import check_real

        sc = dataclasses.replace(sc, probe_period_s=check_real(
            args.probe_period, "--probe-period", unit="s", low=0.0, low_open=True))
    if args.estimate and sc.estimation is None:
        sc = dataclasses.replace(sc, estimation=Estimation())
    if args.affinity and sc.affinity is None:
        sc = dataclasses.replace(sc, affinity=Affinity())
    sc.check_horizon(args.duration)
    if args.trace is not None:
        from ..sim import arrivals_from_trace
        from ..workloads import read_trace

        arrivals = arrivals_from_trace(read_trace(args.trace), sc, args.duration, args.seed)
    else:
        arrivals = generate_arrivals(sc, args.duration, args.seed)
    results = [simulate(sc, router, duration_s=args.duration, seed=args.seed,
                        arrivals=arrivals, policy=name, engine=args.engine)
               for name, router in routers]
    steps = stepsize_reports(sc, routers)
    if args.plot:
        _plot(results, args.plot, sc)
    if args.json:
        print(dumps_json({"scenario": sc.name, "policies": {
            r.policy: r.summary() | ({"stepsize": steps[r.policy]} if r.policy in steps else {})
            for r in results}}))
        _warn_in_flight(results, len(arrivals))
        _warn_stepsize(steps)
        return 0
    engines = "/".join(sorted({r.engine for r in results}))
    print(f"scenario {sc.name}: {sc.network.n} cells, {args.duration:g} s, seed {args.seed}, "
          f"{len(arrivals)} requests, {engines} engine")
    extra = f" {'mean/rand':>9} {'p90/rand':>9}" if args.normalise else ""
    print(f"{'policy':<10} {'mean':>8} {'p50':>8} {'p90':>8} {'p99':>8} {'errors':>7} "
          f"{'err%':>6} {'in flight':>9}{extra}  (latency s)")
    base = next((r.summary()["latency"] for r in results if r.policy == "rand"), None)
    for r in results:
        s = r.summary()["latency"]
        norm = (f" {_fmt(ratio(s['mean'], base['mean']), 9, 3)} "
                f"{_fmt(ratio(s['p90'], base['p90']), 9, 3)}" if args.normalise else "")
        print(f"{r.policy:<10} {_fmt(s['mean'])} {_fmt(s['p50'])} {_fmt(s['p90'])} "
              f"{_fmt(s['p99'])} {r.errors:7d} {_fmt(100 * r.error_rate, 6, 2)} "
              f"{r.in_flight:9d}{norm}")
    age = results[0].summary()["probe_age_s"] if results else None
    if age and age["mean"] is not None:  # the same for every policy: set by the probes
        print(f"probe age (the workloads a request is routed on): mean {age['mean']:.4g} s, "
              f"p90 {age['p90']:.4g} s (probe period {sc.probe_period_s:g} s)")
    for name, st in steps.items():
        crit = st["eta_crit"]
        print(f"{name}: stepsize η = {st['eta']:.4g} 1/(cost unit·s); fluid η_crit = "
              + (f"{crit:.4g} (η/η_crit = {st['eta_over_crit']:.3g})" if crit is not None
                 else f"n/a ({st['reason']})"))
    _warn_in_flight(results, len(arrivals))
    _warn_stepsize(steps)
    return 0


#: what the reported η_crit is (JSON ``stepsize.basis``).
STEPSIZE_BASIS = ("exact critical stepsize of the fluid model linearised at its equilibrium, "
                  "feedback delay τ + δ_probe/2 (lbtheory.stability.critical_stepsize); it "
                  "ignores request-level randomness")


def _flow_router(router: object):
    """The FlowRouter inside error aversion / affinity wrappers, or None."""
    from ..routers import FlowRouter

    while router is not None and not isinstance(router, FlowRouter):
        router = getattr(router, "router", None)
    return router


def stepsize_reports(sc, routers: list[tuple[str, object]]) -> dict[str, dict]:
    """Per flow policy: its stepsize η, the fluid model's η_crit for its cost with the probe
    period (None with the reason when there is no finite one) and η/η_crit."""
    from ..errors import LBTheoryError
    from ..routers import CellView
    from ..stability import critical_stepsize

    net, crit = sc.network, {}
    out = {}
    for name, router in routers:
        flow = _flow_router(router)
        if flow is None:
            continue
        eta = float(flow.eta(CellView(time=0.0, workload=np.zeros(net.n),
                                      replicas=np.ones(net.n), delays=net.delays,
                                      mask=net.adjacency, probe_period_s=sc.probe_period_s)))
        if flow.cost not in crit and not float(np.sum(net.arrival_rates)) > 0:
            crit[flow.cost] = (None, "no arrivals: the fluid model has no operating point")
        if flow.cost not in crit:
            try:
                c = float(critical_stepsize(net, flow.cost,
                                            probe_period_s=sc.probe_period_s).critical_stepsize)
                crit[flow.cost] = (c, None) if np.isfinite(c) else (
                    None, "the linearised fluid model is stable for every stepsize (its "
                          "equilibrium routes on a vertex, or no loop has a delay)")
            except (LBTheoryError, ValueError, np.linalg.LinAlgError) as exc:
                crit[flow.cost] = (None, f"{type(exc).__name__}: {exc}")
        c, reason = crit[flow.cost]
        out[name] = {"eta": eta, "eta_crit": c, "eta_over_crit": eta / c if c else None,
                     "cost": flow.cost.value, "probe_period_s": float(sc.probe_period_s),
                     "basis": STEPSIZE_BASIS, "reason": reason}
    return out


def _warn_stepsize(steps: dict[str, dict]) -> None:
    """A warning on stderr (the exit code stays 0) for each flow policy whose η is beyond the
    fluid model's η_crit (each probe round's step η·δ beyond η_crit·δ)."""
    import sys

    for name, st in steps.items():
        if st["eta_over_crit"] is not None and st["eta_over_crit"] > 1.0:
            print(f"warning: {name}: stepsize η = {st['eta']:.4g} is {st['eta_over_crit']:.3g}× "
                  f"the fluid model's critical stepsize η_crit = {st['eta_crit']:.4g} for this "
                  f"topology and probe period ({st['probe_period_s']:g} s): each probe round's "
                  f"step η·δ is beyond η_crit·δ, and flow routing may oscillate; pass a smaller "
                  f"--stepsize", file=sys.stderr)


def _warn_in_flight(results: list, requests: int) -> None:
    """Warnings on stderr (the exit code stays 0): no arrivals; requests left in flight."""
    import sys

    if requests == 0:
        print("warning: no request arrived (every arrival rate is 0 or the horizon is shorter "
              "than the first arrival): nothing to measure", file=sys.stderr)
        return
    for r in results:
        share = r.in_flight / max(r.requests, 1)
        if share > IN_FLIGHT_WARNING:
            print(f"warning: {r.policy}: {100 * share:.0f}% of the requests are still in flight "
                  f"at the horizon (the cluster is overloaded or the run too short); its latency "
                  f"covers the {r.completed} completed requests only", file=sys.stderr)
