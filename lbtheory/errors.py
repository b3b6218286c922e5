"""Typed errors and result statuses shared by every lbtheory module.

Every error names what is wrong (the cell, arc, field, file or parameter) and what was expected.
The CLI turns any :class:`LBTheoryError` into a one-line message and exit code 2.
"""

from __future__ import annotations

import enum

__all__ = [
    "LBTheoryError",
    "TopologyError",
    "ModelError",
    "InfeasibleDemandError",
    "SolverError",
    "UnstableError",
    "DataFormatError",
    "Status",
]


class LBTheoryError(Exception):
    """Base class of every error lbtheory raises on purpose."""


class TopologyError(LBTheoryError, ValueError):
    """A cell network or routing game is malformed (unknown cell, bad delay, missing arc, ...)."""


class ModelError(LBTheoryError, ValueError):
    """A service model or cost model is invalid (e.g. violates Assumption 1 of THEORY §6)."""


class InfeasibleDemandError(LBTheoryError):
    """No routing can serve the demand (Assumption 2 of THEORY §6 fails).

    Attributes:
        shortfall: req/s by which the reachable capacity falls short of the demand (0.0 when the
            demand exactly equals the reachable capacity, which Assumption 2 also excludes).
        sources: names of the sources whose demand cannot be served.
        cells: names of the cells those sources can reach.
    """

    def __init__(self, message: str, *, shortfall: float = 0.0,
                 sources: tuple[str, ...] = (), cells: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.shortfall = float(shortfall)
        self.sources = tuple(sources)
        self.cells = tuple(cells)


class SolverError(LBTheoryError):
    """A numerical solver failed; the message names the solver and its status."""

    def __init__(self, message: str, *, solver: str = "", status: str = "") -> None:
        super().__init__(message)
        self.solver = solver
        self.status = status


class UnstableError(LBTheoryError):
    """A computation diverged or is ill-posed because the dynamics are unstable."""


class DataFormatError(LBTheoryError, ValueError):
    """A data file (topology, TNTP, trace) is malformed; the message names file, line and field."""

    def __init__(self, message: str, *, path: str = "", line: int | None = None,
                 field: str = "") -> None:
        where = path
        if line is not None:
            where = f"{where}:{line}" if where else f"line {line}"
        super().__init__(f"{where}: {message}" if where else message)
        self.path = path
        self.line = line
        self.field = field


class Status(enum.StrEnum):
    """Outcome of a solve; the value is what JSON output and messages show."""

    OPTIMAL = "optimal"
    INACCURATE = "optimal_inaccurate"
    INFEASIBLE = "infeasible"
    FAILED = "failed"
    CONVERGED = "converged"
    DIVERGED = "diverged"
    MAX_ITERATIONS = "max_iterations"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value
