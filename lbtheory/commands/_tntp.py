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
                tol: float | None = None) -> dict:
    """Solve Wardrop and system optimum (``method``: auto/cvxpy/gp/fw; CVXPY ``solver``, default
    Clarabel; ``tol``: target relative gap, default :data:`lbtheory.games.solve.DEFAULT_TOL`);
    the CLI's JSON object.

    Returns:
        ``{"equilibria": {"wardrop": G, "system_optimum": G}, "price_of_anarchy": p}`` with G as
        :meth:`lbtheory.games.GameResult.to_dict` (arc order as in the file, Beckmann objective
        in the file's units, plus ``solver`` and ``seconds``) and p the ratio of
        :func:`lbtheory.equilibrium.price_of_anarchy` (a number).
    """
    from ..equilibrium import price_of_anarchy  # (imports CVXPY: only when a game is solved)

    poa = price_of_anarchy(load_tntp_game(net_path, trips_path), solver=solver, method=method,
                           tol=tol)
    eqs = {}
    for key, res in (("wardrop", poa.wardrop), ("system_optimum", poa.optimum)):
        eqs[key] = {**res.to_dict(), "solver": res.solver, "seconds": res.seconds}
    return {"equilibria": eqs, "price_of_anarchy": float(poa.ratio)}


def run_tntp(net_path: str | os.PathLike, trips_path: str | os.PathLike | None, *,
             as_json: bool, solver: str | None = None, method: str = "auto",
             tol: float | None = None) -> int:
    """Print the equilibria of a TNTP game (a table, or the JSON object); returns exit code 0.

    ``solver``: the CVXPY solver (``None``: Clarabel); ``method``/``tol``: as
    :func:`tntp_report`.

    Raises:
        DataFormatError: ``trips_path`` missing (the one error for a missing ``--trips``, field
            ``--trips``), or malformed files (the CLI prints it and exits with code 2).
    """
    if trips_path is None:
        raise DataFormatError("a TNTP network needs its trip table: add --trips TRIPS.tntp",
                              path=str(net_path), field="--trips")
    rep = tntp_report(net_path, trips_path, solver=solver, method=method, tol=tol)
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
    print(f"price of anarchy: {rep['price_of_anarchy']:.10g}")
    return 0
