"""``lbtheory simulate``: run DLB routers and baselines on the discrete-event cluster simulator."""

from __future__ import annotations

import argparse

import numpy as np

from ..errors import DataFormatError, ParameterError
from ..io import dumps_json, save_figure_atomic

NAME = "simulate"
HELP = ("Discrete-event simulation of root routers on a cell cluster (DLB §3, App. B): a scenario "
        "file (topology + 'simulation:' section) or a generated Appendix-B scenario; prints "
        "latency mean/p50/p90/p99 (s), errors and per-cell utilisation per policy.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``lbtheory simulate``."""
    from ..registry import POLICY_NAMES

    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.add_argument("scenario", nargs="?", default=None,
                        help="scenario file (YAML/JSON): topology plus a 'simulation:' section")
    parser.add_argument("--appendix-b", type=int, default=None, metavar="SEED",
                        help="generate DLB's Appendix-B scenario with this seed instead of a file")
    parser.add_argument("--cells", type=int, default=None,
                        help="number of cells of the Appendix-B scenario (default: U{2..10})")
    parser.add_argument("--utilisation", type=float, default=0.8,
                        help="Appendix-B target utilisation Λ/Σμ̄")
    parser.add_argument("--burst", action="store_true",
                        help="Appendix-B: demand burst to 95%% in [0.3, 0.7]·duration")
    parser.add_argument("--outage", action="store_true",
                        help="Appendix-B: capacity outage to >95%% in [0.3, 0.7]·duration")
    parser.add_argument("--y", type=float, default=1.0,
                        help="Appendix-B: token times ÷ y and rates × y (utilisation unchanged)")
    parser.add_argument("--noise", type=float, default=0.0,
                        help="Appendix-B: latency-model noise ε (fitted ℓ × (1 + εξ))")
    parser.add_argument("--policy", default="flow-grad",
                        help="policy or comma-separated policies, each run on the same "
                             "arrivals; one of " + ", ".join(POLICY_NAMES))
    parser.add_argument("--duration", type=float, default=60.0, help="horizon (s)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of arrivals, request sizes and routing draws")
    parser.add_argument("--stepsize", type=float, default=None,
                        help="flow-routing stepsize η, 1/(cost unit·s) (default: "
                             "0.01/mean one-way delay)")
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
        return load_scenario(args.scenario)
    return appendix_b_scenario(args.appendix_b, n_cells=args.cells, utilisation=args.utilisation,
                               duration_s=args.duration, burst=args.burst, outage=args.outage,
                               noise_eps=args.noise, y=args.y)


def _plot(results: list, path: str) -> None:
    from ..plotting import figure

    fig, (ax1, ax2) = figure(nrows=2, height=6.0)
    for k, r in enumerate(results):
        lat = np.sort(r.latency_s)
        ax1.plot(lat, np.arange(1, lat.size + 1) / max(lat.size, 1), label=r.policy,
                 color=f"C{k}")
        for j in range(len(r.names)):
            ax2.plot(r.series_t, r.series_workload[:, j], lw=0.8, color=f"C{k}",
                     ls=("-", "--", ":", "-.")[j % 4],
                     label=f"{r.policy}: {r.names[j]}" if len(results) * len(r.names) <= 12
                     else None)
    ax1.set_xlabel("end-to-end latency (s)")
    ax1.set_ylabel("CDF")
    ax1.legend()
    ax2.set_xlabel("t (s)")
    ax2.set_ylabel("requests at cell N_j")
    if len(results) * len(results[0].names) <= 12:
        ax2.legend(ncol=2, fontsize=7)
    save_figure_atomic(fig, path)


def run(args: argparse.Namespace) -> int:
    """Validate everything, simulate each policy on the same arrivals, print, plot."""
    from ..sim import generate_arrivals, simulate
    from ..stats import ratio

    if not (np.isfinite(args.duration) and args.duration > 0):
        raise DataFormatError(f"--duration: expected a positive number of seconds, got "
                              f"{args.duration!r}", field="duration")
    routers = _routers(args.policy, args.stepsize, args.error_aversion, args.affinity)
    if args.normalise and "rand" not in [n for n, _ in routers]:
        raise ParameterError("--normalise: add 'rand' to --policy (latency is normalised by it)")
    sc = _scenario(args)
    import dataclasses

    from ..sim import Affinity, Estimation

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
    if args.plot:
        _plot(results, args.plot)
    if args.json:
        print(dumps_json({"scenario": sc.name, "policies": {r.policy: r.to_dict()
                                                             for r in results}}))
        return 0
    print(f"scenario {sc.name}: {sc.network.n} cells, {args.duration:g} s, seed {args.seed}, "
          f"{len(arrivals)} requests")
    extra = f" {'mean/rand':>9} {'p90/rand':>9}" if args.normalise else ""
    print(f"{'policy':<10} {'mean':>8} {'p50':>8} {'p90':>8} {'p99':>8} {'errors':>7} "
          f"{'err%':>6}{extra}  (latency s)")
    base = next((r.latency_summary() for r in results if r.policy == "rand"), None)
    for r in results:
        s = r.latency_summary()
        norm = (f" {ratio(s['mean'], base['mean']):9.3f} {ratio(s['p90'], base['p90']):9.3f}"
                if args.normalise else "")
        print(f"{r.policy:<10} {s['mean']:8.4f} {s['p50']:8.4f} {s['p90']:8.4f} {s['p99']:8.4f} "
              f"{r.errors:7d} {100 * r.error_rate:6.2f}{norm}")
    return 0
