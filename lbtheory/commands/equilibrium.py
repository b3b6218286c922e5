"""``lbtheory equilibrium``: Wardrop, system optimum and RIF equilibria, and the price of anarchy.

``TOPOLOGY`` is a cell-network file (YAML/JSON, see README) or a TNTP network (``*.tntp``, with
``--trips``), which is solved as a general routing game.
"""

from __future__ import annotations

import argparse

import numpy as np

from ._help import number

NAME = "equilibrium"
HELP = ("Compute the Wardrop (latency), system-optimum (gradient) and RIF equilibria of a "
        "topology and the price of anarchy.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topology", help="cell network (.yaml/.yml/.json) or TNTP net (.tntp)")
    parser.add_argument("--trips", help="TNTP trips file (with a .tntp network)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--solver", default=None,
                        help="CVXPY solver, one of the installed ones (default CLARABEL, falling "
                             "back to SCS; e.g. SCS, ECOS)")
    parser.add_argument("--method", default=None,
                        choices=["auto", "cvxpy", "gp", "bush", "fw"],
                        help="routing-game solver for a TNTP network: auto (default: CVXPY for "
                             "small games, the bush solver above "
                             "lbtheory.games.solve.AUTO_THRESHOLD origin-arc variables), cvxpy, "
                             "gp (path-based gradient projection), bush (bush-based Algorithm "
                             "B) or fw (bi-conjugate Frank-Wolfe); others are tried if it fails")
    number(parser, "--tol", default=None,
           help="target relative Definition-1 residual, dimensionless, in (0, 1) "
                "(default 1e-6; cell networks only)")
    number(parser, "--gap", default=None, low=0.0, high=1.0, low_open=True, high_open=True,
           help=f"target relative gap of a TNTP routing game, dimensionless: the solvers "
                f"certify [{GAP_RANGE[0]:g}, {GAP_RANGE[1]:g}] (below: an error; above: a "
                f"warning; default 1e-10; TNTP networks only)")
    number(parser, "--threads", kind=int, default=None, low=1,
           help="threads of the bush solver on a TNTP network (default: every "
                "core numba sees, and at most that, with a warning; 1 is "
                "deterministic, more vary the flows in the last bits, every answer "
                "certified to --gap; TNTP networks only)")
    parser.add_argument("--objective", default=None,
                        choices=["wardrop", "system-optimum", "both"],
                        help="equilibria of a TNTP network to solve: wardrop, system-optimum, "
                             "or both and the price of anarchy (default both; TNTP networks "
                             "only)")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="write a figure (.png/.pdf/.svg): per-cell load and PoA as demand "
                             "grows (cell networks only)")


#: Default of ``--tol`` (relative Definition-1 residual).
DEFAULT_TOL = 1e-6

#: The relative gaps ``--gap`` certifies: the range README and BENCHMARKS (bench_tntp_cli)
#: measured on networks up to the Chicago-Sketch size. Below it a target may be unreachable —
#: the certificate's own float64 round-off is ~1e-16 of the travel time on the 5-arc Braess
#: network and grows with the network — and the solvers ran past 60 s (1e-16, 1e-300); above
#: it an answer is certified but rough (flows off by about the gap's share of travel time).
GAP_RANGE = (1e-12, 1e-3)


def check_gap(gap: float) -> float:
    """``--gap`` (already in (0, 1)): below :data:`GAP_RANGE` an error naming the range (no
    solver reaches it: a run would hang), above it a warning (it certifies little)."""
    from ..errors import ParameterError
    from ._help import warn

    low, high = GAP_RANGE
    if gap < low:
        raise ParameterError(f"--gap {gap:g} is below {low:g}: the solvers certify relative gaps "
                             f"in [{low:g}, {high:g}] (below, float64 round-off can keep a "
                             f"solve from ever certifying); pass a gap in that range")
    if gap > high:
        warn(f"--gap {gap:g} certifies little: a relative gap above {high:g} leaves flows off by "
             f"up to about that share of the travel time (the solvers certify [{low:g}, "
             f"{high:g}])")
    return gap


def check_threads(threads: int) -> int:
    """``--threads`` capped at the threads numba has (``NUMBA_NUM_THREADS``), with a warning."""
    import numba

    from ._help import warn

    have = int(numba.config.NUMBA_NUM_THREADS)
    if threads > have:
        warn(f"--threads {threads} is more than the {have} threads numba has on this machine "
             f"(NUMBA_NUM_THREADS); using {have}")
        return have
    return threads


def check_solver(name: str | None) -> str | None:
    """``--solver`` upper-cased if CVXPY has it installed (``None``: the default), else
    ParameterError (:func:`lbtheory.games.check_solver`)."""
    from ..games import check_solver as check

    return check(name, "--solver")


def run(args: argparse.Namespace) -> int:
    from .._checks import check_real
    from ..errors import ParameterError
    from ..io import FIGURE_FORMATS, check_output_path

    if args.topology.lower().endswith(".tntp"):
        from .._checks import check_int
        from ._tntp import run_tntp  # raises DataFormatError (field --trips) without --trips

        for flag, value in (("--tol", args.tol), ("--plot", args.plot)):
            if value is not None:
                raise ParameterError(f"{flag} applies to cell networks only; a TNTP game "
                                     f"({args.topology}) is solved to its relative gap (--gap), "
                                     f"and has no per-cell figure: drop {flag}")
        gap = None if args.gap is None else check_gap(check_real(
            args.gap, "--gap", low=0.0, high=1.0, low_open=True, high_open=True))
        threads = None if args.threads is None else check_threads(
            check_int(args.threads, "--threads", low=1))
        return run_tntp(args.topology, args.trips, as_json=args.json,
                        solver=check_solver(args.solver), method=args.method or "auto", tol=gap,
                        threads=threads, objective=args.objective or "both")
    for flag, value in (("--method", args.method), ("--gap", args.gap),
                        ("--threads", args.threads), ("--objective", args.objective)):
        if value is not None:
            raise ParameterError(f"{flag} applies to TNTP routing games only; cell networks are "
                                 f"solved to --tol by the equilibrium engine: drop {flag}")
    if args.trips:
        raise ParameterError("--trips is only used with a TNTP network (.tntp)")
    # refuse bad options and outputs before any work (nothing printed, nothing written)
    tol = DEFAULT_TOL if args.tol is None else check_real(
        args.tol, "--tol", low=0.0, high=1.0, low_open=True, high_open=True)
    solver = check_solver(args.solver)
    if args.plot:
        check_output_path(args.plot, what="figure", flag="--plot", formats=FIGURE_FORMATS)
    from ..equilibrium import price_of_anarchy
    from ..io import dumps_json, load_topology

    net = load_topology(args.topology)
    poa = price_of_anarchy(net, solver=solver, tol=tol)
    sweep = None
    if args.plot:  # solve the sweep before printing, so a failure prints no partial result
        from ..equilibrium import demand_sweep

        util = net.total_demand / float(net.max_rates.sum())
        sweep = demand_sweep(net, np.linspace(0.05, 0.98, 40) / util, solver=solver, tol=tol)
    if args.json:
        print(dumps_json(_as_json(net, poa)))
    else:
        print(format_table(net, poa))
    if args.plot:
        from ..io import save_figure_atomic
        from ..plotting import plot_equilibria

        save_figure_atomic(plot_equilibria(net, poa, sweep), args.plot)
        if not args.json:
            print(f"figure written to {args.plot}")
    return 0


def _as_json(net, poa) -> dict:
    return {
        "cells": [{"name": c.name, "replicas": c.replicas, "arrival_rate": c.arrival_rate,
                   "max_rate": float(c.service.max_rate), "model": c.service.name}
                  for c in net.cells],
        "equilibria": {"wardrop": poa.wardrop.to_dict(),
                       "system_optimum": poa.system_optimum.to_dict(),
                       "rif": poa.rif.to_dict()},
        "price_of_anarchy": poa.price_of_anarchy,
        "rif_ratio": poa.rif_ratio,
    }


def format_table(net, poa) -> str:
    """Readable report: per cell inflow/workload/latency/utilisation, per source splits."""
    eqs = [("Wardrop (latency)", poa.wardrop), ("System optimum (gradient)", poa.system_optimum),
           ("RIF", poa.rif)]
    w = max(8, *(len(nm) for nm in net.names))
    lines = [f"{net.n} cells, {len(net.arcs)} arcs, total demand {net.total_demand:g} req/s, "
             f"capacity {float(net.max_rates.sum()):g} req/s", ""]
    lat = None
    for title, eq in eqs:
        lat = np.asarray(net.models.latency(eq.workload), dtype=float)
        util = eq.inflow / net.max_rates
        lines.append(f"== {title}: mean end-to-end latency {eq.mean_latency * 1e3:.3f} ms, "
                     f"residual {eq.residual:.1e}, status {eq.status.value}")
        lines.append(f"  {'cell':<{w}} {'inflow/s':>10} {'workload':>10} {'latency ms':>11} "
                     f"{'util':>6}")
        for j, nm in enumerate(net.names):
            lines.append(f"  {nm:<{w}} {eq.inflow[j]:>10.4f} {eq.workload[j]:>10.4f} "
                         f"{lat[j] * 1e3:>11.3f} {util[j]:>6.1%}")
        lines.append("  routing split (source -> destination share):")
        for i, nm in enumerate(net.names):
            if net.arrival_rates[i] <= 0:
                continue
            parts = [f"{net.names[j]} {eq.routing[i, j]:.1%}" for j in range(net.n)
                     if net.adjacency[i, j] and eq.routing[i, j] > 5e-5]
            lines.append(f"    {nm:<{w}} -> " + ", ".join(parts))
        lines.append("")
    lines.append(f"price of anarchy (Wardrop / optimum): {poa.price_of_anarchy:.6f}")
    lines.append(f"RIF ratio (RIF / optimum):            {poa.rif_ratio:.6f}")
    return "\n".join(lines)
