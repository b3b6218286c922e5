"""Command-line support for TNTP routing games: ``lbtheory equilibrium NET.tntp --trips T.tntp``.

The ``equilibrium`` subcommand (:mod:`lbtheory.commands.equilibrium`, owned by the CLI) dispatches
here when the topology path ends in ``.tntp``.
"""

from __future__ import annotations

import os

from ..errors import DataFormatError
from ..games.tntp import load_tntp_game
from ..io import dumps_json

__all__ = ["run_tntp", "tntp_report"]


#: ``--objective`` choices: the equilibria each one solves.
OBJECTIVES = {"wardrop": ("wardrop",), "system-optimum": ("system_optimum",),
              "both": ("wardrop", "system_optimum")}


def tntp_report(net_path: str | os.PathLike, trips_path: str | os.PathLike, *,
                solver: str | None = None, method: str = "auto",
                tol: float | None = None, threads: int | None = None,
                objective: str = "both") -> dict:
    """Solve Wardrop and/or system optimum (``objective``: a key of :data:`OBJECTIVES`;
    ``method``: auto/cvxpy/gp/bush/fw; CVXPY ``solver``, default Clarabel; ``tol``: target
    relative gap, default :data:`lbtheory.games.solve.DEFAULT_TOL`; ``threads``: of the bush
    solver, default every core numba sees); the CLI's JSON object.

    Returns:
        ``{"equilibria": {"wardrop": G, "system_optimum": G}, "price_of_anarchy": p,
        "requested_gap": t, "relative_gaps": {"wardrop": g, "system_optimum": g}}`` with G as
        :meth:`lbtheory.games.GameResult.to_dict` (arc order as in the file, Beckmann objective
        in the file's units, plus ``solver``, ``seconds``, ``iterations`` and
        ``gap_history``, the ``[iteration, seconds, gap]`` of each certificate), p the ratio of
        :func:`lbtheory.equilibrium.price_of_anarchy` (a number), t the target relative gap
        and g the gap each equilibrium reached (each ≤ t when its status is optimal). With one
        objective, only its equilibrium and gap, and p is ``None``.
    """
    import numba

    from ..games._result import GamePoAResult, Objective
    from ..games.solve import DEFAULT_TOL, kernels_cached, solve_game, solve_pair, warm_up
    from ._help import compiling_notice

    tol = DEFAULT_TOL if tol is None else tol
    threads = numba.config.NUMBA_NUM_THREADS if threads is None else threads
    game = load_tntp_game(net_path, trips_path)
    # compile (or load) the solver's kernels before its clock starts: "seconds" is solving only
    compiling_notice(kernels_cached(game, method=method, solver=solver, tol=tol))
    warm_up(game, method=method, solver=solver, tol=tol, threads=threads)
    kw = {"solver": solver, "method": method, "tol": tol, "threads": threads}
    # the pair is lbtheory.equilibrium.price_of_anarchy's (without importing that package:
    # it loads CVXPY and JAX, which a bush or GP solve never uses)
    if objective == "both":
        ue, so = solve_pair(game, **kw)
        found = {"wardrop": ue, "system_optimum": so}
        ratio: float | None = float(GamePoAResult.from_results(ue, so).ratio)
    else:
        key = OBJECTIVES[objective][0]
        found = {key: solve_game(game, Objective.parse(key), **kw)}
        ratio = None
    eqs = {key: {**res.to_dict(), "solver": res.solver, "seconds": res.seconds,
                 "iterations": res.iterations, "gap_history": _history(res)}
           for key, res in found.items()}
    return {"equilibria": eqs, "price_of_anarchy": ratio, "requested_gap": tol,
            "relative_gaps": {key: float(res.relative_gap) for key, res in found.items()}}


def _history(res) -> list[list[float]]:
    """``[[iteration, seconds, relative gap], ...]`` of the solver's certificates (empty when
    the solver keeps none, e.g. CVXPY)."""
    from ..games._result import SolveTrace

    tr = res.stats
    if not isinstance(tr, SolveTrace) or not len(tr.iteration):
        return []
    return [[int(i), float(t), float(g)] for i, t, g in
            zip(tr.iteration, tr.seconds, tr.relative_gap)]


def run_tntp(net_path: str | os.PathLike, trips_path: str | os.PathLike | None, *,
             as_json: bool, solver: str | None = None, method: str = "auto",
             tol: float | None = None, threads: int | None = None,
             objective: str = "both") -> int:
    """Print the equilibria of a TNTP game (a table, or the JSON object); returns exit code 0.

    ``solver``: the CVXPY solver (``None``: Clarabel); ``method``/``tol``/``threads``/
    ``objective``: as :func:`tntp_report`.

    Raises:
        DataFormatError: ``trips_path`` missing (the one error for a missing ``--trips``, field
            ``--trips``), or malformed files (the CLI prints it and exits with code 2).
    """
    if trips_path is None:
        raise DataFormatError("a TNTP network needs its trip table: add --trips TRIPS.tntp",
                              path=str(net_path), field="--trips")
    rep = tntp_report(net_path, trips_path, solver=solver, method=method, tol=tol,
                      threads=threads, objective=objective)
    if as_json:
        print(dumps_json(rep))
        return 0
    eqs = rep["equilibria"]
    heads = {"wardrop": "wardrop flow", "system_optimum": "system-opt flow"}
    print(f"{'arc':>5}" + "".join(f" {heads[k]:>{len(heads[k]) + 1}}" for k in eqs))
    for a, flows in enumerate(zip(*(g["arc_flow"] for g in eqs.values())), start=1):
        print(f"{a:>5}" + "".join(f" {f:>{len(heads[k]) + 1}.6g}" for k, f in zip(eqs, flows)))
    for name, g in eqs.items():
        print(f"{name}: total travel time {g['total_travel_time']:.10g}, Beckmann "
              f"{g['beckmann_objective']:.10g}, relative gap {g['relative_gap']:.3g}, "
              f"AEC {g['average_excess_cost']:.3g}, status {g['status']} ({g['solver']}, "
              f"{g['seconds']:.3g} s, {g['iterations']} iterations)")
    if rep["price_of_anarchy"] is not None:
        print(f"price of anarchy: {rep['price_of_anarchy']:.10g} (relative gaps reached: "
              f"wardrop {rep['relative_gaps']['wardrop']:.3g}, system optimum "
              f"{rep['relative_gaps']['system_optimum']:.3g}; requested "
              f"{rep['requested_gap']:g})")
    return 0
