"""``lbtheory fluid``: simulate the delayed fluid model on a topology file."""

from __future__ import annotations

import argparse

import numpy as np

from ..io import dumps_json, load_topology, save_figure_atomic

NAME = "fluid"
HELP = ("Delayed fluid model (THEORY §2–3): flow or discrete routing with the rif/latency/gradient "
        "cost; prints the final state, or JSON with t, workload, routing, total_latency_rate, "
        "final_distance_to_equilibrium.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``lbtheory fluid``."""
    parser.add_argument("topology", help="topology file (YAML/JSON)")
    parser.add_argument("--mechanism", choices=("flow", "discrete"), default="flow")
    parser.add_argument("--cost", choices=("rif", "latency", "gradient"), default="gradient")
    parser.add_argument("--stepsize", type=float, default=None,
                        help="flow-routing stepsize η, 1/(cost unit·s) (required for flow)")
    parser.add_argument("--t1", type=float, required=True, help="horizon (s)")
    parser.add_argument("--dt", type=float, default=1e-3, help="step (s); default 1 ms")
    parser.add_argument("--save-every", type=int, default=None,
                        help="steps between saved points (default: at most 1000 points)")
    parser.add_argument("--interpolate-delays", action="store_true",
                        help="interpolate delays that are not multiples of dt")
    parser.add_argument("--no-equilibrium", action="store_true",
                        help="skip the CVXPY equilibrium (final distance reported as null)")
    parser.add_argument("--plot", default=None, metavar="F.png",
                        help="write workloads and routing over time to this image")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _plot(sol, path: str) -> None:
    from ..plotting import figure

    fig, (ax1, ax2) = figure(nrows=2, height=5.0, sharex=True)
    for j, name in enumerate(sol.names):
        ax1.plot(sol.t, sol.workload[:, j], label=name)
        if sol.equilibrium_workload is not None:
            ax1.axhline(sol.equilibrium_workload[j], ls=":", lw=0.8, color=f"C{j}")
    ax1.set_ylabel("workload N_j (requests)")
    ax1.legend(ncol=3)
    adj = np.any(sol.routing > 0, axis=0)
    for i, j in zip(*np.nonzero(adj)):
        ax2.plot(sol.t, sol.routing[:, i, j], lw=1, label=f"{sol.names[i]}→{sol.names[j]}")
    ax2.set_ylabel("routing x_ij")
    ax2.set_xlabel("t (s)")
    ax2.legend(ncol=3, fontsize=7)
    save_figure_atomic(fig, path)


def run(args: argparse.Namespace) -> int:
    """Simulate and print a summary or JSON."""
    import jax

    from ..fluid import simulate_fluid

    net = load_topology(args.topology)
    with jax.enable_x64(True):  # float64 for this run only (no global state change)
        sol = simulate_fluid(net, mechanism=args.mechanism, cost=args.cost,
                             stepsize=args.stepsize, t1=args.t1, dt=args.dt,
                             save_every=args.save_every,
                             delay_mode="interpolate" if args.interpolate_delays else "snap",
                             equilibrium=None if args.no_equilibrium else "auto")
    if args.plot:
        _plot(sol, args.plot)
    if args.json:
        print(dumps_json({"topology": str(args.topology), **sol.to_dict()}))
        return 0
    fd = sol.final_distance_to_equilibrium
    print(f"{args.mechanism} routing, {args.cost} cost, t1 = {args.t1:g} s, status {sol.status}")
    print(f"mean total latency rate {sol.mean_total_latency_rate:.6g} request·s/s "
          f"(mean latency {sol.mean_total_latency_rate / net.total_demand:.6g} s)")
    for j, name in enumerate(sol.names):
        eq = "" if sol.equilibrium_workload is None else \
            f"   N* = {sol.equilibrium_workload[j]:.6g}"
        print(f"  {name:<12} N(t1) = {sol.workload[-1, j]:.6g}{eq}")
    print("final distance to equilibrium: " + ("n/a" if fd is None else f"{fd:.3g} requests"))
    return 0
