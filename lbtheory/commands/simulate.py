"""``lbtheory simulate``: run DLB routers and baselines on the discrete-event cluster simulator."""

from __future__ import annotations

import argparse

import numpy as np

from ..errors import DataFormatError, ParameterError
from ..io import dumps_json, save_figure_atomic
from ._help import MAX_INT, compiling_notice, number, utilisation, warn

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
                        help="scenario file (YAML/JSON): a topology plus an optional 'simulation:' "
                        "section (without one every cell runs rate servers, i.e. its service "
                        "model; docs/topology.md)")
    number(parser, "--appendix-b", kind=int, default=None, metavar="SEED",
           help="generate DLB's Appendix-B scenario with this seed instead of a file "
           "(latency models fitted to the simulated cells, time-varying arrivals)")
    number(parser, "--cells", kind=int, low=1, default=None,
           help="number of cells of the Appendix-B scenario (default: U{2..10})")
    utilisation(parser, "--utilisation", "--utilization", default=0.8,
                help="Appendix-B target utilisation Λ/Σμ̄, a fraction of capacity (either "
                     "spelling; above 1 a warning, above 2 an error)")
    parser.add_argument("--burst", action="store_true",
                        help="Appendix-B: demand burst to 95%% in [0.3, 0.7]·duration")
    parser.add_argument("--outage", action="store_true",
                        help="Appendix-B: capacity outage to >95%% in [0.3, 0.7]·duration")
    number(parser, "--y", default=1.0, low=0.0, low_open=True,
           help="Appendix-B: token times ÷ y and rates × y (utilisation unchanged)")
    number(parser, "--noise", default=0.0, low=0.0, high=1.0, high_open=True,
           help="Appendix-B: latency-model noise ε (fitted parameters × (1 + εξ), "
                "ξ ~ U[-1, 1]; see --noise-mode)")
    parser.add_argument("--noise-mode", default="independent",
                        choices=("independent", "joint", "scenario"),
                        help="Appendix-B noise: one ξ per parameter per run (independent), "
                             "one per cell per run (joint), or one per cell fixed with the "
                             "scenario (the earlier generator)")
    number(parser, "--noise-period", default=None, low=0.0, low_open=True, high=1e6,
           metavar="S", help="Appendix-B: redraw the noise every S seconds (default: once)")
    parser.add_argument("--policy", default="flow-grad",
                        help="policy or comma-separated policies, each run on the same "
                             "arrivals; one of " + ", ".join(POLICY_NAMES))
    number(parser, "--duration", default=60.0, help="horizon (s)")
    number(parser, "--seed", kind=int, low=0, high=MAX_INT, default=0,
           help="seed of arrivals, request sizes and routing draws")
    number(parser, "--stepsize", default=None,
           help="flow-routing stepsize η, 1/(cost unit·s) (default: a per-cost "
                "constant / (mean one-way delay + probe period/2))")
    number(parser, "--probe-period", default=None, low=0.0, low_open=True, high=3600.0,
           metavar="S",
           help="root routers' probe period (s), overriding the scenario's (Appendix-B "
                "default 0.01); the JSON reports probe_age_s, the age of the workloads each "
                "request was routed on (mean, p90)")
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
    try:
        return appendix_b_scenario(args.appendix_b, n_cells=args.cells,
                                   utilisation=args.utilisation, duration_s=args.duration,
                                   burst=args.burst, outage=args.outage, noise_eps=args.noise,
                                   y=args.y, noise_mode=args.noise_mode,
                                   noise_period_s=args.noise_period)
    except ParameterError as exc:  # name the flag the user typed beside the parameter
        text = str(exc)
        flag = next((f for name, f in _GENERATOR_FLAGS.items()
                     if text.startswith(f"appendix_b.{name}")), None)
        if flag is None:
            raise
        raise ParameterError(f"{flag}: {text}") from None


#: appendix_b_scenario's parameters -> the simulate flag that sets each.
_GENERATOR_FLAGS = {"seed": "--appendix-b", "n_cells": "--cells", "utilisation": "--utilisation",
                    "duration_s": "--duration", "noise_eps": "--noise", "y": "--y",
                    "noise_period_s": "--noise-period"}


#: options that shape only a generated --appendix-b scenario, with their defaults.
_GENERATOR_OPTIONS = {"cells": None, "utilisation": 0.8, "burst": False, "outage": False,
                      "y": 1.0, "noise": 0.0, "noise_mode": "independent",
                      "noise_period": None}

#: an in-flight share above this at the horizon earns a warning (latency covers completed
#: requests only).
IN_FLIGHT_WARNING = 0.05
#: an error (overflow) rate above this earns a warning: the cluster rejected most requests, so
#: the latency columns describe the few that got through.
ERROR_RATE_WARNING = 0.5


def _fmt(v: float, width: int = 8, digits: int = 4) -> str:
    """A number for the table, or a dash when there is none (no completed request)."""
    return f"{v:{width}.{digits}f}" if np.isfinite(v) else f"{'—':>{width}}"


def _plot(results: list, path: str, sc=None) -> None:
    """Latency CDFs, and each policy's latency quantiles relative to the first policy's (the
    gain the CDFs hide when they overlap); below, one workload panel per policy: N_j(t) of every
    cell (one colour per cell, the same in every panel; one legend below), burst and outage
    windows shaded. Every policy keeps its legend entry however many policies and cells."""
    from ..plotting import figure, policy_color
    from ..stats import percentile

    cols = 2 if len(results) > 1 else 1
    work = [f"w{k}" for k in range(len(results))]
    work += ["."] * (-len(work) % cols)
    mosaic = [["cdf", "ratio"][:cols]] + [work[k:k + cols] for k in range(0, len(work), cols)]
    fig, axes = figure(mosaic=mosaic, width=5.2 * cols + 1.0, height=3.4 * len(mosaic))
    ax1, ax2 = axes["cdf"], axes.get("ratio")
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
    ax1.set(xlabel="end-to-end latency (s)", ylabel="CDF (fraction of completed requests)",
            title="latency distribution")
    ax1.legend(fontsize=8, loc="lower right", title="policy", title_fontsize=8)
    if ax2 is not None:
        ax2.axhline(1.0, color="0.4", lw=0.8, ls=":")
        ax2.set(xlabel="latency percentile (%)", ylabel=f"latency / {base.policy}'s (ratio)",
                title=f"each percentile relative to {base.policy}")
        ax2.legend(fontsize=8, title="policy", title_fontsize=8)
    styles = ("-", "--", ":", "-.")
    first = axes["w0"]
    for k, r in enumerate(results):
        ax = axes[f"w{k}"]
        if ax is not first:
            ax.sharex(first)
            ax.sharey(first)
        for j, name in enumerate(r.names):  # ten colours, then the next line style
            ax.plot(r.series_t, r.series_workload[:, j], lw=0.9, color=f"C{j % 10}",
                    ls=styles[(j // 10) % 4], label=f"cell {name}")
        if sc is not None:
            for items, colour, what in ((sc.bursts, "tab:orange", "burst"),
                                        (sc.outages, "tab:red", "outage")):
                for e, ev in enumerate(items):
                    ax.axvspan(ev.start_s, ev.end_s, color=colour, alpha=0.12,
                               label=f"{what} at {sc.network.names[ev.cell]}" if e < 3 else None)
        ax.set_title(f"{r.policy}: requests at each cell", fontsize=9, color=policy_color(r.policy))
        ax.set(xlabel="t (s)", ylabel="requests at the cell N_j(t)")
    fig.tight_layout()
    handles, labels = first.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(len(labels), 6), fontsize=8,
               title="workload panels: one colour per cell", title_fontsize=8)
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
    if args.scenario is not None:  # a file's events beyond --duration: clipped, said once
        sc, clipped = sc.clipped(args.duration)
        if clipped:
            import sys

            print(f"warning: --duration {args.duration:g} s ends before the scenario's events: "
                  f"{'; '.join(clipped)} (pass a longer --duration to simulate them)",
                  file=sys.stderr)
    sc.check_horizon(args.duration)
    if args.trace is not None:
        from ..sim import arrivals_from_trace
        from ..workloads import read_trace

        arrivals = arrivals_from_trace(read_trace(args.trace), sc, args.duration, args.seed)
    else:
        arrivals = generate_arrivals(sc, args.duration, args.seed)
    if args.engine != "reference":  # compile (or load) kernels before any run's clock starts
        from ..sim import kernels_cached, warm_up

        compiling_notice(kernels_cached())
        warm_up(sc, [router for _, router in _routers(args.policy, args.stepsize,
                                                       args.error_aversion, args.affinity)],
                engine=args.engine)
    results = [simulate(sc, router, duration_s=args.duration, seed=args.seed,
                        arrivals=arrivals, policy=name, engine=args.engine)
               for name, router in routers]
    steps = stepsize_reports(sc, routers)
    if args.plot:
        _plot(results, args.plot, sc)
    servers = server_report(sc, generated=args.scenario is None)
    if args.json:
        print(dumps_json({"scenario": sc.name, "servers": servers, "policies": {
            r.policy: r.summary() | ({"stepsize": steps[r.policy]} if r.policy in steps else {})
            for r in results}}))
        _warn_in_flight(results, len(arrivals))
        _warn_stepsize(steps)
        return 0
    engines = "/".join(sorted({r.engine for r in results}))
    print(f"scenario {sc.name}: {sc.network.n} cells, {args.duration:g} s, seed {args.seed}, "
          f"{len(arrivals)} requests, {engines} engine")
    print(f"servers: {servers['note']}")
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
        print(format_stepsize(name, st, generated=args.scenario is None))
    _warn_in_flight(results, len(arrivals))
    _warn_stepsize(steps)
    return 0


def server_report(sc, generated: bool = False) -> dict:
    """The JSON ``servers`` object: each cell's server kind, whether every cell simulates its
    service model (``rate`` servers) and a one-line ``note`` saying what the servers realise
    (``generated``: an --appendix-b scenario, whose service models are fits to its servers)."""
    off = sc.cells_off_service_model()
    kinds = {c.name: str(s.kind) for c, s in zip(sc.network.cells, sc.servers)}
    if generated and off:
        note = ("appendix_b — DLB's Appendix-B inference servers; the cells' service models "
                "(what the latency/gradient routers and the fluid η_crit use) are latency "
                "curves fitted to them")
    elif not off:
        note = ("rate — each cell completes requests at μ_j(N_j) of its service model, so "
                "latencies estimate `lbtheory equilibrium`'s ℓ_j(N) (plus queueing noise)")
    else:
        used = sorted({kinds[c] for c in off})
        note = (f"{'/'.join(used)} at {', '.join(off)} — not the file's service models: those "
                f"cells' latencies are the servers', not `lbtheory equilibrium`'s ℓ_j(N) "
                f"(simulation.server.kind: rate simulates the service models)")
    return {"kinds": kinds, "service_models": not off, "note": note}


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
    from ..routers import DEFAULT_STEPSIZE_SCALES, CellView, mean_network_delay
    from ..routers._dlb import MIN_DELAY_S
    from ..stability import critical_stepsize

    net, crit = sc.network, {}
    out = {}

    def solve(cost, period: float) -> tuple[float | None, str | None]:
        if (cost, period) in crit:
            return crit[cost, period]
        if not float(np.sum(net.arrival_rates)) > 0:
            crit[cost, period] = (None, "no arrivals: the fluid model has no operating point")
            return crit[cost, period]
        try:
            c = float(critical_stepsize(net, cost, probe_period_s=period).critical_stepsize)
            crit[cost, period] = (c, None) if np.isfinite(c) else (
                None, "the linearised fluid model is stable for every stepsize (its "
                      "equilibrium routes on a vertex, or no loop has a delay)")
        except (LBTheoryError, ValueError, np.linalg.LinAlgError) as exc:
            crit[cost, period] = (None, f"{type(exc).__name__}: {exc}")
        return crit[cost, period]

    for name, router in routers:
        flow = _flow_router(router)
        if flow is None:
            continue
        view = CellView(time=0.0, workload=np.zeros(net.n), replicas=np.ones(net.n),
                        delays=net.delays, mask=net.adjacency, probe_period_s=sc.probe_period_s)
        eta = float(flow.eta(view))
        if flow.stepsize is not None:
            rule = "given (--stepsize)"
        else:
            scale = (DEFAULT_STEPSIZE_SCALES[flow.cost] if flow.stepsize_scale is None
                     else flow.stepsize_scale)
            delay = mean_network_delay(view)
            rule = (f"default {scale:g}/(mean one-way delay {delay:.4g} s + probe period/2 "
                    f"{0.5 * sc.probe_period_s:.4g} s)"
                    + (f", delay floored at {MIN_DELAY_S:g} s"
                       if delay + 0.5 * sc.probe_period_s < MIN_DELAY_S else ""))
        c, reason = solve(flow.cost, float(sc.probe_period_s))
        c0, _ = solve(flow.cost, 0.0)
        out[name] = {"eta": eta, "eta_rule": rule, "eta_crit": c,
                     "eta_over_crit": eta / c if c else None,
                     "eta_crit_continuous": c0, "cost": flow.cost.value,
                     "probe_period_s": float(sc.probe_period_s),
                     "service_models": not sc.cells_off_service_model(),
                     "basis": STEPSIZE_BASIS, "reason": reason}
    return out


def format_stepsize(name: str, st: dict, generated: bool = False) -> str:
    """Two lines per flow policy: its η and the rule that chose it; the fluid model's η_crit
    with this probe period, the continuous-update value ``lbtheory stepsize`` prints, and why
    they differ (``generated``: an --appendix-b scenario, which has no file to give
    ``lbtheory stepsize``)."""
    from .stepsize import ETA_UNITS

    unit = ETA_UNITS.get(st["cost"], "1/(cost unit·s)")
    head = f"{name}: η = {st['eta']:.4g} {unit}, {st['eta_rule']}"
    crit, period = st["eta_crit"], st["probe_period_s"]
    if crit is None:
        return f"{head}\n  fluid-model η_crit: n/a ({st['reason']})"
    c0 = st["eta_crit_continuous"]
    cont = f"{c0:.4g}" if c0 is not None else "none (stable for every stepsize)"
    same = (f"continuous updates: {cont}" if generated else
            f"`lbtheory stepsize --cost {st['cost']} --probe-period {period:g}` reports the "
            f"same; without --probe-period it assumes continuous updates: {cont}")
    whose = "fitted" if generated else "file's"
    model = ("" if st["service_models"] else
             f"; it is the fluid model of the {whose} service models, not of these servers")
    return (f"{head}\n  fluid-model η_crit = {crit:.4g} with feedback delay τ + δ/2, probe "
            f"period δ = {period:g} s ({same}){model}; η/η_crit = {st['eta_over_crit']:.3g}")


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
    """Warnings on stderr (the exit code stays 0): no arrivals; an error rate above
    :data:`ERROR_RATE_WARNING`; requests left in flight above :data:`IN_FLIGHT_WARNING`."""
    if requests == 0:
        warn("no request arrived (every arrival rate is 0 or the horizon is shorter than the "
             "first arrival): nothing to measure")
        return
    for r in results:
        if r.error_rate > ERROR_RATE_WARNING:
            warn(f"{r.policy}: {100 * r.error_rate:.1f}% of the requests were rejected (queue "
                 f"overflow): the cluster is overloaded (is the utilisation a fraction, e.g. "
                 f"0.8?); its latency covers the {r.completed} completed requests only")
        share = r.in_flight / max(r.requests, 1)
        if share > IN_FLIGHT_WARNING:
            warn(f"{r.policy}: {100 * share:.0f}% of the requests are still in flight at the "
                 f"horizon (the cluster is overloaded or the run too short); its latency covers "
                 f"the {r.completed} completed requests only")
