"""``lbtheory fluid``: simulate the delayed fluid model on a topology file."""

from __future__ import annotations

import argparse

import numpy as np

from ..io import FIGURE_FORMATS, check_output_path, dumps_json, load_topology, save_figure_atomic
from ..registry import POLICIES
from ._help import number

NAME = "fluid"
HELP = ("Delayed fluid model (THEORY §2–3): flow or discrete routing with the rif/latency/gradient "
        "cost; prints the final state, or JSON with t, workload, routing, total_latency_rate, "
        "final_distance_to_equilibrium.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``lbtheory fluid``."""
    parser.add_argument("topology", help="topology file (YAML/JSON)")
    parser.add_argument("--policy", default=None, metavar="POLICY",
                        choices=tuple(FLUID_POLICIES),
                        help="the fluid counterpart of a DLB policy, one of "
                             + ", ".join(FLUID_POLICIES) + " (disc-*/flow-*: --mechanism "
                             "discrete/flow; *-rif/-lat/-grad: --cost rif/latency/gradient); "
                             "default: from --mechanism and --cost")
    parser.add_argument("--mechanism", choices=("flow", "discrete"), default=None,
                        help="flow: routing probabilities move by the projected-gradient step "
                             "x ← Π(x − η·ĉ) (THEORY §3 (2)); discrete: every source sends all of "
                             "its demand to its cheapest cell (THEORY §3 (1)) (default: flow)")
    parser.add_argument("--cost", choices=("rif", "latency", "gradient"), default=None,
                        help="cost signal (THEORY §4): rif = N_j/k_j (requests per replica); "
                             "latency = ℓ_j(N_j) + 2τ_ij (s); gradient = 1/μ_j'(N_j) + 2τ_ij (s) "
                             "(default: gradient)")
    number(parser, "--stepsize", default=None,
           help="flow-routing stepsize η, 1/(cost unit·s) (required for flow)")
    number(parser, "--duration", aliases=("--t1",), default=None, metavar="SECONDS",
           help="horizon (s), required")
    number(parser, "--dt", default=1e-3, help="step (s); default 1 ms")
    number(parser, "--save-every", kind=int, default=None,
           help="steps between saved points (default: at most 1000 points)")
    parser.add_argument("--interpolate-delays", action="store_true",
                        help="interpolate delays that are not multiples of dt")
    parser.add_argument("--no-equilibrium", action="store_true",
                        help="skip the CVXPY equilibrium (final distance reported as null)")
    parser.add_argument("--plot", default=None, metavar="F.png",
                        help="write workloads and routing over time to this image")
    parser.add_argument("--json", action="store_true", help="print JSON")


#: fluid mechanism of each DLB router class (by the registry's factory name).
_MECHANISMS = {"DiscreteRouter": "discrete", "FlowRouter": "flow"}
#: ``--policy`` names (the registry's DLB policies that have a fluid model: its discrete and
#: flow routers) -> (mechanism, cost), read from their registry entries.
FLUID_POLICIES: dict[str, tuple[str, str]] = {
    e.name: (_MECHANISMS[e.factory.rpartition(":")[2]], e.options["*"]["cost"])
    for e in POLICIES.values() if e.factory.rpartition(":")[2] in _MECHANISMS}


def mechanism_and_cost(args: argparse.Namespace) -> tuple[str, str]:
    """``(mechanism, cost)`` from ``--policy`` or ``--mechanism``/``--cost`` (defaults flow,
    gradient); ParameterError when ``--policy`` and an explicit one disagree."""
    from ..errors import ParameterError

    if args.policy is None:
        return args.mechanism or "flow", args.cost or "gradient"
    mech, cost = FLUID_POLICIES[args.policy]
    for flag, given, implied in (("--mechanism", args.mechanism, mech),
                                 ("--cost", args.cost, cost)):
        if given is not None and given != implied:
            raise ParameterError(f"--policy {args.policy} means {flag} {implied}, but "
                                 f"{flag} {given} was given: drop one of them")
    return mech, cost


def _moving_average(t: np.ndarray, y: np.ndarray, window: float) -> np.ndarray:
    """Trailing moving average of ``y`` (rows = time) over ``window`` seconds."""
    dt = float(np.median(np.diff(t))) if t.size > 1 else window
    w = max(1, int(round(window / dt)))
    c = np.cumsum(np.concatenate([np.zeros((1,) + y.shape[1:]), y]), axis=0)
    idx = np.arange(1, y.shape[0] + 1)
    lo = np.maximum(idx - w, 0)
    return (c[idx] - c[lo]) / (idx - lo).reshape((-1,) + (1,) * (y.ndim - 1))


def _plot(sol, path: str) -> None:
    from ..plotting import figure

    fig, (ax1, ax2) = figure(nrows=2, height=5.5, sharex=True)
    for j, name in enumerate(sol.names):
        ax1.plot(sol.t, sol.workload[:, j], label=f"$N$ at {name}", color=f"C{j}")
        if sol.equilibrium_workload is not None:
            ax1.axhline(sol.equilibrium_workload[j], ls=":", lw=0.9, color=f"C{j}",
                        label=f"$N^*$ at {name} (equilibrium)")
    ax1.set_ylabel("workload $N_j$ (requests)")
    ax1.legend(ncol=2, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    adj = np.any(sol.routing > 0, axis=0)
    routing = sol.routing
    ylabel = "routing $x_{ij}$"
    if sol.mechanism == "discrete" and sol.t.size > 1:
        # discrete routing switches between vertices every few steps: a raw plot is a solid
        # block, so show the share of time each arc was chosen over a trailing window
        window = max(float(sol.t[-1]) / 50.0, float(sol.t[1] - sol.t[0]))
        routing = _moving_average(sol.t, sol.routing, window)
        ylabel = f"share of time on arc\n(trailing {window:.3g} s mean)"
    for i, j in zip(*np.nonzero(adj)):
        ax2.plot(sol.t, routing[:, i, j], lw=1, label=f"{sol.names[i]}→{sol.names[j]}")
    ax2.set_ylabel(ylabel)
    ax2.set_xlabel("time t (s)")
    ax2.legend(ncol=1, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save_figure_atomic(fig, path)


def run(args: argparse.Namespace) -> int:
    """Simulate and print a summary or JSON."""
    from ..fluid import simulate_fluid

    if args.plot:  # refuse an unwritable figure path before any work
        check_output_path(args.plot, what="figure", flag="--plot", formats=FIGURE_FORMATS)
    mechanism, cost = mechanism_and_cost(args)
    if args.duration is None:
        from ..errors import ParameterError

        raise ParameterError("--duration: required, the horizon in seconds (e.g. --duration 60)")
    net = load_topology(args.topology)
    sol = simulate_fluid(net, mechanism=mechanism, cost=cost, stepsize=args.stepsize,
                         t1=args.duration, dt=args.dt, save_every=args.save_every,
                         delay_mode="interpolate" if args.interpolate_delays else "snap",
                         equilibrium=None if args.no_equilibrium else "auto")
    if args.plot:
        _plot(sol, args.plot)
    if args.json:
        print(dumps_json({"topology": str(args.topology), **sol.to_dict()}))
        return 0
    fd = sol.final_distance_to_equilibrium
    print(f"{mechanism} routing, {cost} cost, t1 = {args.duration:g} s, status {sol.status}")
    print(f"mean total latency rate {sol.mean_total_latency_rate:.6g} request·s/s "
          f"(mean latency {sol.mean_total_latency_rate / net.total_demand:.6g} s)")
    for j, name in enumerate(sol.names):
        eq = "" if sol.equilibrium_workload is None else \
            f"   N* = {sol.equilibrium_workload[j]:.6g}"
        print(f"  {name:<12} N(t1) = {sol.workload[-1, j]:.6g}{eq}")
    print("final distance to equilibrium: " + ("n/a" if fd is None else f"{fd:.3g} requests"))
    return 0
