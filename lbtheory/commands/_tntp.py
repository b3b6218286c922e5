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


def tntp_report(net_path: str | os.PathLike, trips_path: str | os.PathLike, *,
                solver: str | None = None, method: str = "auto",
                tol: float | None = None, threads: int | None = None) -> dict:
    """Solve Wardrop and system optimum (``method``: auto/cvxpy/gp/bush/fw; CVXPY ``solver``,
    default Clarabel; ``tol``: target relative gap, default
    :data:`lbtheory.games.solve.DEFAULT_TOL`; ``threads``: of the bush solver, default every
    core numba sees); the CLI's JSON object.

    Returns:
        ``{"equilibria": {"wardrop": G, "system_optimum": G}, "price_of_anarchy": p,
        "requested_gap": t, "relative_gaps": {"wardrop": g, "system_optimum": g}}`` with G as
        :meth:`lbtheory.games.GameResult.to_dict` (arc order as in the file, Beckmann objective
        in the file's units, plus ``solver``, ``seconds`` and ``iterations``), p the ratio of
        :func:`lbtheory.equilibrium.price_of_anarchy` (a number), t the target relative gap
        and g the gap each equilibrium reached (each ≤ t when its status is optimal).
    """
    import numba

    from ..equilibrium import price_of_anarchy  # (imports CVXPY: only when a game is solved)
    from ..games.solve import DEFAULT_TOL, kernels_cached, warm_up
    from ._help import compiling_notice

    tol = DEFAULT_TOL if tol is None else tol
    threads = numba.config.NUMBA_NUM_THREADS if threads is None else threads
    game = load_tntp_game(net_path, trips_path)
    # compile (or load) the solver's kernels before its clock starts: "seconds" is solving only
    compiling_notice(kernels_cached(game, method=method, solver=solver, tol=tol))
    warm_up(game, method=method, solver=solver, tol=tol, threads=threads)
    poa = price_of_anarchy(game, solver=solver, method=method, tol=tol, threads=threads)
    eqs = {}
    for key, res in (("wardrop", poa.wardrop), ("system_optimum", poa.optimum)):
        eqs[key] = {**res.to_dict(), "solver": res.solver, "seconds": res.seconds,
                    "iterations": res.iterations}
    return {"equilibria": eqs, "price_of_anarchy": float(poa.ratio), "requested_gap": tol,
            "relative_gaps": {"wardrop": poa.wardrop_gap, "system_optimum": poa.optimum_gap}}


def run_tntp(net_path: str | os.PathLike, trips_path: str | os.PathLike | None, *,
             as_json: bool, solver: str | None = None, method: str = "auto",
             tol: float | None = None, threads: int | None = None) -> int:
    """Print the equilibria of a TNTP game (a table, or the JSON object); returns exit code 0.

    ``solver``: the CVXPY solver (``None``: Clarabel); ``method``/``tol``/``threads``: as
    :func:`tntp_report`.

    Raises:
        DataFormatError: ``trips_path`` missing (the one error for a missing ``--trips``, field
            ``--trips``), or malformed files (the CLI prints it and exits with code 2).
    """
    if trips_path is None:
        raise DataFormatError("a TNTP network needs its trip table: add --trips TRIPS.tntp",
                              path=str(net_path), field="--trips")
    rep = tntp_report(net_path, trips_path, solver=solver, method=method, tol=tol,
                      threads=threads)
    if as_json:
        print(dumps_json(rep))
        return 0
    ue, so = rep["equilibria"]["wardrop"], rep["equilibria"]["system_optimum"]
    print(f"{'arc':>5} {'wardrop flow':>14} {'system-opt flow':>16}")
    for a, (fu, fs) in enumerate(zip(ue["arc_flow"], so["arc_flow"]), start=1):
        print(f"{a:>5} {fu:>14.6g} {fs:>16.6g}")
    for name, g in (("wardrop", ue), ("system_optimum", so)):
        print(f"{name}: total travel time {g['total_travel_time']:.10g}, Beckmann "
              f"{g['beckmann_objective']:.10g}, relative gap {g['relative_gap']:.3g}, "
              f"AEC {g['average_excess_cost']:.3g}, status {g['status']} ({g['solver']}, "
              f"{g['seconds']:.3g} s)")
    print(f"price of anarchy: {rep['price_of_anarchy']:.10g} (relative gaps reached: wardrop "
          f"{rep['relative_gaps']['wardrop']:.3g}, system optimum "
          f"{rep['relative_gaps']['system_optimum']:.3g}; requested {rep['requested_gap']:g})")
    return 0
