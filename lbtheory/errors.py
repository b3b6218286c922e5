"""Typed errors and result statuses shared by every lbtheory module, and the one deprecation
warning (:func:`warn_deprecated`, :func:`renamed_keywords`).

Every error names what is wrong (the cell, arc, field, file or parameter) and what was expected.
The CLI turns any :class:`LBTheoryError` into a one-line message and exit code 2.
"""

from __future__ import annotations

import enum
import functools
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "LBTheoryError",
    "TopologyError",
    "ModelError",
    "InfeasibleDemandError",
    "SolverError",
    "UnstableError",
    "DataFormatError",
    "StepsizeError",
    "BoundaryEquilibriumError",
    "SweepError",
    "ParameterError",
    "SuspiciousInputWarning",
    "SolveStatus",
    "RunStatus",
    "RequestOutcome",
    "DynamicsStatus",
    "StepsizeStatus",
    "Engine",
    "StabilityStatus",
    "FeasibilityStatus",
    "FitStatus",
    "warn_deprecated",
    "renamed_keywords",
    "REMOVED_IN",
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


class ParameterError(ModelError, TopologyError):
    """A function argument or configuration option is outside its domain (a negative seed, zero
    replicas, an unknown policy name, a duration that cannot be simulated); the message names
    the parameter, what was expected and what was given.

    One cause, one type: a malformed *network* is a :class:`TopologyError`, a malformed *service
    or cost model* a :class:`ModelError`, a malformed *file* a :class:`DataFormatError`; every
    other bad argument — in any subpackage — is a ``ParameterError``.

    Deprecated bases: until 0.3 it also derives from :class:`ModelError` and
    :class:`TopologyError`, which bad arguments raised before 0.2, so ``except ModelError`` in
    user code keeps catching them; catch ``ParameterError`` (or :class:`LBTheoryError`).
    """


class SolverError(LBTheoryError):
    """A numerical solver failed; the message names the solver and its status.

    Attributes:
        solver: the solver's name (``"CLARABEL"``, ``"bush"``, ``"HiGHS"``, ...).
        status: what happened, as a :class:`SolveStatus` (``failed``, ``max_iterations``,
            ``infeasible``, ``optimal_inaccurate``).
        detail: the solver's own status text, verbatim (``"infeasible_inaccurate"``,
            ``"HiGHS status 2"``), or ``""``.
    """

    def __init__(self, message: str, *, solver: str = "",
                 status: SolveStatus | str = "failed", detail: str = "") -> None:
        super().__init__(message)
        self.solver = solver
        try:
            self.status = SolveStatus(status)
        except ValueError:  # a solver's own word: keep it verbatim, classify as failed
            self.status, detail = SolveStatus.FAILED, detail or str(status)
        self.detail = detail


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


class StepsizeError(ParameterError):
    """A stepsize (or stepsize weight) is not a positive finite number; names the parameter."""


class BoundaryEquilibriumError(LBTheoryError):
    """The equilibrium violates strict complementarity, so the linearisation is not defined.

    An arc with x*_ij = 0 whose cost equals the source's minimum c*_i makes the projected dynamics
    cone-constrained rather than linear (THEORY §7.6).

    Attributes:
        arcs: ``(source, target)`` names of the degenerate arcs.
    """

    def __init__(self, message: str, *, arcs: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.arcs = tuple(arcs)


class SweepError(LBTheoryError, ValueError):
    """An experiment sweep is malformed or cannot run (empty grid, duplicate or non-JSON config,
    unknown profile or experiment, unreachable scheduler, a failed cell); names the experiment and
    the field, profile or address."""


class SuspiciousInputWarning(UserWarning):
    """An input lbtheory accepts but that is probably a mistake of units (an arc delay of 15 s:
    milliseconds written where seconds are read). Issued with :func:`warnings.warn`; the CLI
    prints each as one ``warning:`` line."""


class SolveStatus(enum.StrEnum):
    """Outcome of an optimisation (equilibria, routing games, iterative solvers).

    The value is what JSON output and messages show.
    """

    #: solved to the requested tolerance (residual / relative gap at or below ``tol``).
    OPTIMAL = "optimal"
    #: a solution was returned but its residual or gap is above the requested tolerance.
    OPTIMAL_INACCURATE = "optimal_inaccurate"
    #: the problem has no feasible point (e.g. Assumption 2 fails).
    INFEASIBLE = "infeasible"
    #: an iterative method stopped at its iteration/time budget before reaching ``tol``.
    MAX_ITERATIONS = "max_iterations"
    #: the solver failed (its own word is :attr:`SolverError.detail` and in the message).
    FAILED = "failed"

    @property
    def solved(self) -> bool:
        """True when a solution was returned (optimal or optimal-inaccurate)."""
        return self in (SolveStatus.OPTIMAL, SolveStatus.OPTIMAL_INACCURATE)


class DynamicsStatus(enum.StrEnum):
    """Outcome of a trajectory (fluid model, simulations): how it ended on its horizon."""

    #: settled (or still decaying geometrically) at the end of the horizon.
    CONVERGED = "converged"
    #: a sustained or growing oscillation (limit cycle or unstable equilibrium).
    OSCILLATING = "oscillating"
    #: a non-finite state (the first step and cell are reported).
    DIVERGED = "diverged"
    #: the horizon ended while the state was still moving, neither settled nor oscillating.
    MAX_STEPS = "max_steps"


class RunStatus(enum.StrEnum):
    """How a simulation, a sweep or a training run ended (every such result carries one).

    Each result type documents which members it can take.
    """

    #: every request finished (or was rejected) / every cell ran / every episode trained.
    COMPLETED = "completed"
    #: the horizon ended with requests still in flight (their latency is unknown; counted in
    #: ``in_flight``) — an overloaded or too-short run.
    TRUNCATED = "truncated"
    #: training produced a non-finite loss or parameters (the checkpoint is not usable).
    DIVERGED = "diverged"
    #: some cells of a sweep failed (with ``throw=False``; their errors are listed).
    FAILED = "failed"


class RequestOutcome(enum.IntEnum):
    """What happened to one request of a simulated run (the ``outcome`` array of the three
    simulators' results, one code per request in workload order)."""

    #: it finished; its latency is known.
    COMPLETED = 0
    #: it was rejected (a DLB cell's queue overflowed); it has no latency.
    ERROR = 1
    #: the run ended before it finished (still queued, in service or on the wire, or never
    #: scheduled); its latency is unknown (NaN).
    UNFINISHED = 2


class StabilityStatus(enum.StrEnum):
    """Local stability of an equilibrium under the linearised dynamics at one stepsize
    (:class:`~lbtheory.stability.StepsizeReport`); the value is the JSON ``verdict``."""

    #: every non-structural root of the characteristic equation has Re s < 0: small
    #: perturbations decay.
    STABLE = "stable"
    #: a root has Re s ≥ 0: small perturbations do not decay (they grow or oscillate).
    UNSTABLE = "unstable"


class FeasibilityStatus(enum.StrEnum):
    """Whether a network can serve its demand (Assumption 2 of THEORY §6:
    :class:`~lbtheory.network.FeasibilityReport`)."""

    #: every source's demand fits in the capacity it can reach, with room to spare.
    FEASIBLE = "feasible"
    #: some sources' demand meets or exceeds the capacity they can reach (no routing serves it).
    INFEASIBLE = "infeasible"


class FitStatus(enum.StrEnum):
    """Outcome of fitting or calibrating to data (:class:`~lbtheory.intelligent.Calibration`,
    :class:`~lbtheory.intelligent.PredictorReport`; each documents its test)."""

    #: fitted / measured, and the result passes its documented test (a predictor beats the
    #: majority-class baseline; a calibration measured every scale).
    GOOD = "good"
    #: fitted, but it fails its test (a predictor no better than the baseline): use with care.
    POOR = "poor"
    #: too little data (no held-out requests; a scale that could not be measured fell back to
    #: its default).
    INSUFFICIENT_DATA = "insufficient_data"


class StepsizeStatus(enum.StrEnum):
    """Outcome of a critical-stepsize computation."""

    #: the crossing was bracketed and the full spectrum at c* has nothing to its right.
    VERIFIED = "verified"
    #: a crossing was found but another root lies to its right (or the check could not run).
    UNVERIFIED = "unverified"


class Engine(enum.StrEnum):
    """Which engine a simulator runs (the DLB cell and the LLM instance simulators; both engines
    give the same per-request outcomes, bit for bit, and the result records which ran)."""

    #: the compiled engine when it supports the router, else the reference (the default).
    AUTO = "auto"
    #: the numba engine (an error when it cannot run the router).
    COMPILED = "compiled"
    #: the plain-Python reference twin.
    REFERENCE = "reference"


# ----------------------------------------------------------------------------- deprecations
#: The release that drops the deprecated names and keywords (they warn until then).
REMOVED_IN = "0.3"

F = TypeVar("F", bound=Callable[..., Any])


def warn_deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """The one deprecation warning: ``{old} is deprecated, use {new} (removed in 0.3)``.

    ``stacklevel`` 3 points at the caller of the function that calls this.
    """
    warnings.warn(f"{old} is deprecated, use {new} (removed in {REMOVED_IN})",
                  DeprecationWarning, stacklevel=stacklevel)


def renamed_keywords(**renames: str) -> Callable[[F], F]:
    """Accept a keyword's old name for one release, e.g.
    ``@renamed_keywords(max_iter="max_iterations")``.

    A call with the old name warns (:func:`warn_deprecated`) and is passed on under the new one;
    both names at once raise :class:`ParameterError`.

    Example:
        >>> @renamed_keywords(max_iter="max_iterations")
        ... def solve(*, max_iterations: int = 10) -> int:
        ...     return max_iterations
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     solve(max_iter=3)
        3
    """
    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise ParameterError(f"{fn.__name__}: give {new}= only ({old}= is its "
                                             f"deprecated name), got both")
                    warn_deprecated(f"{fn.__name__}({old}=...)", f"{new}=")
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
