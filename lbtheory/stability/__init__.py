"""Stepsize verification for flow routing under delayed feedback (THEORY §7).

Three answers to "with these delays, is this stepsize safe, and how far from the edge am I?":

* **Theory** (:mod:`._theory`): DLB Theorem 1's form and scaling only (constants are not public),
  the §7.1 Lyapunov quantities along a trajectory, and the closed-form symmetric two-cell
  threshold θ tan θ = aT [D].
* **Exact local stability** (:mod:`._linearise`, :mod:`._dde`, :mod:`._critical`): the fluid model
  linearised at its equilibrium is a linear DDE; its rightmost roots come from Chebyshev
  collocation of the infinitesimal generator refined by Newton, and :func:`critical_stepsize`
  bisects a common stepsize scale to where the spectral abscissa crosses zero [D].
* **Empirical rule** (:func:`empirical_rule`, THEORY §7.6): a rule that held in random tests —
  an empirical rule, never a guarantee.
* **Simulation** (:mod:`._empirical`): the nonlinear fluid model just below / above the threshold,
  with the measured decay or growth rate.

The check a user calls: :func:`check_stepsize` (net, cost, stepsize) → :class:`StepsizeReport`
(verdict, margin, decay rate, with the exact threshold of :func:`critical_stepsize`).
"""

from ..errors import BoundaryEquilibriumError, StepsizeError
from ._critical import (
    CriticalStepsize,
    ScaleCrossing,
    StepsizeReport,
    check_stepsize,
    critical_scale,
    critical_stepsize,
    spectrum,
    with_probe_period,
)
from ._dde import LinearDDE, RootSet, collocation_matrix, newton_root, rightmost_roots
from ._empirical import EmpiricalCheck, empirical_check, envelope_rate
from ._linearise import (
    Linearisation,
    OperatingPoint,
    empirical_rule,
    linearise,
    operating_point,
)
from ._theory import (
    LyapunovTrace,
    Theorem1Form,
    TwoCellThreshold,
    lyapunov_terms,
    symmetric_threshold,
    theorem1_form,
    two_cell_threshold,
)

__all__ = [
    "BoundaryEquilibriumError",
    "CriticalStepsize",
    "EmpiricalCheck",
    "LinearDDE",
    "Linearisation",
    "LyapunovTrace",
    "OperatingPoint",
    "RootSet",
    "ScaleCrossing",
    "StepsizeError",
    "StepsizeReport",
    "Theorem1Form",
    "TwoCellThreshold",
    "check_stepsize",
    "collocation_matrix",
    "critical_scale",
    "critical_stepsize",
    "empirical_check",
    "empirical_rule",
    "envelope_rate",
    "linearise",
    "lyapunov_terms",
    "newton_root",
    "operating_point",
    "rightmost_roots",
    "spectrum",
    "symmetric_threshold",
    "theorem1_form",
    "two_cell_threshold",
    "with_probe_period",
]


def __getattr__(name: str) -> object:
    if name == "assess_stepsize":  # renamed (0.2): the stability check is check_stepsize
        from ..errors import warn_deprecated

        warn_deprecated("lbtheory.stability.assess_stepsize", "lbtheory.stability.check_stepsize")
        return check_stepsize
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
