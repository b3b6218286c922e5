"""Typed errors of the stability analysis (both are :class:`~lbtheory.errors.LBTheoryError`)."""

from __future__ import annotations

from ..errors import LBTheoryError

__all__ = ["StepsizeError", "BoundaryEquilibriumError"]


class StepsizeError(LBTheoryError, ValueError):
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
