"""The one registry of exact convex (DCP) CVXPY forms of congestion costs, keyed by class.

Cost objects and service models never import cvxpy: as cvxpy does with its atoms, the consumer
looks the form up by the object's class. Two tables:

* :data:`ARC_FORMS`: arc-cost family class (:class:`~.arccosts.Polynomial` — which covers
  :func:`~.arccosts.affine`, :func:`~.arccosts.bpr`, :func:`~.arccosts.constant` — and
  :class:`~.arccosts.MM1`) → builder of the CVXPY sum of the Beckmann potentials ∫_0^x ℓ
  (objective ``wardrop``) or of the totals x·ℓ(x) (``system_optimum``) of a vectorised family;
* :data:`DCP_FORMS`: (service-model class, cost kind) → :class:`DCPForm`, the flow-view potential
  p(z) = ∫_0^z f(μ⁻¹(s)) ds of a cell (THEORY §5 "DCP status"), used by
  :mod:`lbtheory.equilibrium`.

Both M/M/1 tables share one expression, :func:`form_terms`: coef·φ(cap − z) + lin·z with
φ = ``inv_pos`` (1/r) or ``neg_log`` (−log r). Families with no entry (e.g.
:class:`~.arccosts.ServiceArc`) raise :class:`~lbtheory.errors.ModelError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from ..costs import CostKind
from ..errors import ModelError, SolveStatus
from ..models import ExpSaturation, MM1Latency, ServiceModel
from ._result import Objective
from .arccosts import MM1, ArcCost, ArcCostBank, Polynomial, ServiceArc

__all__ = ["DCPForm", "DCP_FORMS", "ARC_FORMS", "form_terms", "dcp_potential_value",
           "arc_objective", "bank_objective", "check_convex_form", "cvxpy_status"]

#: CVXPY's status words (``cvxpy.settings``) → :class:`~lbtheory.errors.SolveStatus`; any other
#: word (``solver_error``, ``unbounded``, ...) is FAILED.
_CVXPY_STATUS = {"optimal": SolveStatus.OPTIMAL,
                 "optimal_inaccurate": SolveStatus.OPTIMAL_INACCURATE,
                 "infeasible": SolveStatus.INFEASIBLE,
                 "infeasible_inaccurate": SolveStatus.INFEASIBLE,
                 "user_limit": SolveStatus.MAX_ITERATIONS}

#: Largest integer exponent of a polynomial cost's potential written with second-order cones.
MAX_SOC_POWER = 16


def cvxpy_status(word: str | None) -> SolveStatus:
    """A CVXPY problem status (``prob.status``; ``"solver_error"`` when the solver raised) as a
    :class:`~lbtheory.errors.SolveStatus` — the one translation, for the cell programs and the
    routing games alike."""
    return _CVXPY_STATUS.get(str(word), SolveStatus.FAILED)

_PHIS = ("inv_pos", "neg_log")


def form_terms(phi: str, room: Any, z: Any, coef: Any, lin: Any) -> Any:
    """Elementwise CVXPY expression coef·φ(room) + lin·z, with room = cap − z ≥ 0.

    ``phi`` is ``"inv_pos"`` (φ(r) = 1/r) or ``"neg_log"`` (φ(r) = −log r); ``coef`` and ``lin``
    are arrays or ``cp.Parameter``s (coef ≥ 0 keeps the expression convex).
    """
    import cvxpy as cp

    if phi not in _PHIS:
        raise ModelError(f"phi: expected one of {_PHIS}, got {phi!r}")
    term = cp.inv_pos(room) if phi == "inv_pos" else -cp.log(room)
    return cp.multiply(coef, term) + cp.multiply(lin, z)


# ----------------------------------------------------------------------------- service models
@dataclasses.dataclass(frozen=True)
class DCPForm:
    """Exact convex flow-view potential p(z) = coef·φ(cap − z) + lin·z + const of a cell.

    ``phi`` is ``"inv_pos"`` or ``"neg_log"`` (see :func:`form_terms`); ``params(models, k)``
    returns the (cap, coef, lin, const) arrays for the models of a group and their replicas k.
    ``const`` makes the value equal p(z) exactly (p(0) = 0); programs may drop it.
    """

    phi: str
    params: Callable[[list[ServiceModel], np.ndarray],
                     tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def _arr(models: list[ServiceModel], field: str) -> np.ndarray:
    return np.array([float(getattr(m, field)) for m in models])


def _mm1_gradient(ms: list[ServiceModel], k: np.ndarray):
    # p = Kz/(μ̄ − z) = Kμ̄·inv_pos(μ̄ − z) − K
    cap, K = _arr(ms, "capacity"), _arr(ms, "K")
    return cap, K * cap, np.zeros(len(ms)), -K


def _neg_log_workload(ms: list[ServiceModel], k: np.ndarray):
    # p = −K log(1 − z/μ̄) = −K log(μ̄ − z) + K log μ̄ (MM1 latency; ExpSaturation gradient = μ⁻¹)
    cap, K = _arr(ms, "capacity"), _arr(ms, "K")
    return cap, K, np.zeros(len(ms)), K * np.log(cap)


def _mm1_rif(ms: list[ServiceModel], k: np.ndarray):
    # p = (K/k)[−μ̄ log(1 − z/μ̄) − z] = (Kμ̄/k)(−log(μ̄ − z)) − (K/k) z + (Kμ̄/k) log μ̄
    cap, K = _arr(ms, "capacity"), _arr(ms, "K")
    k = np.asarray(k, dtype=float)
    return cap, K * cap / k, -K / k, K * cap / k * np.log(cap)


#: (model class, cost kind) → exact DCP form of the flow-view potential (THEORY §5 "DCP status").
DCP_FORMS: dict[tuple[type, CostKind], DCPForm] = {
    (MM1Latency, CostKind.GRADIENT): DCPForm("inv_pos", _mm1_gradient),
    (MM1Latency, CostKind.LATENCY): DCPForm("neg_log", _neg_log_workload),
    (MM1Latency, CostKind.RIF): DCPForm("neg_log", _mm1_rif),
    (ExpSaturation, CostKind.GRADIENT): DCPForm("neg_log", _neg_log_workload),
}


def dcp_potential_value(form: DCPForm, models: list[ServiceModel], replicas: np.ndarray,
                        z: np.ndarray) -> np.ndarray:
    """p(z) per cell (request·s/s for latency/gradient), evaluated through the CVXPY form.

    The same :func:`form_terms` expression the programs use, on constants, plus the form's
    constant; +inf where z ≥ cap.
    """
    cap, coef, lin, const = form.params(models, np.asarray(replicas, dtype=float))
    z = np.broadcast_to(np.asarray(z, dtype=float), cap.shape)
    ok = z < cap
    room = np.where(ok, cap - z, 1.0)
    val = np.asarray(form_terms(form.phi, room, z, coef, lin).value, dtype=float) + const
    return np.where(ok, val, np.inf)


# ----------------------------------------------------------------------------- arc costs
def _polynomial(fam: Polynomial, x: Any, objective: Objective, ref: np.ndarray | None) -> Any:
    """Σ a·x + c·(x/s)^q with q = p + 1; c = b·s/q (potential) or b·s (total). Power cone for
    non-integer q; each term is rescaled by R = max(s, ref) so the cone's epigraph stays O(1)."""
    import cvxpy as cp

    p = float(fam.power)
    a = np.broadcast_to(np.asarray(fam.a, dtype=float), x.shape)
    b = np.broadcast_to(np.asarray(fam.b, dtype=float), x.shape)
    s = np.broadcast_to(np.asarray(fam.scale, dtype=float), x.shape)
    expr = cp.sum(cp.multiply(a, x))
    if p == 0:  # b·s/(p+1)·(x/s)^{p+1} = b·x for both objectives
        return expr + cp.sum(cp.multiply(b, x))
    idx = np.flatnonzero(b > 0)
    if idx.size == 0:
        return expr
    q = p + 1.0
    factor = 1.0 / q if objective is Objective.WARDROP else 1.0
    R = s[idx] if ref is None else np.maximum(s[idx], np.asarray(ref, dtype=float)[idx])
    coef = b[idx] * s[idx] * factor * (R / s[idx]) ** q  # c·(x/s)^q = c·(R/s)^q·(x/R)^q
    r = cp.multiply(1.0 / R, x[idx])
    # integer q ≤ 16: cvxpy's exact rational SOC form (≤ 4 second-order cones); above, or a
    # fractional q, a power cone (the SOC form would need more cones and cvxpy warns)
    exact_soc = float(q).is_integer() and q <= MAX_SOC_POWER
    powr = cp.power(r, q) if exact_soc else cp.power(r, q, approx=False)
    return expr + cp.sum(cp.multiply(coef, powr))


def _mm1(fam: MM1, x: Any, objective: Objective, ref: np.ndarray | None) -> Any:
    """Potential k·log(u/(u − x)) = k·(−log(u − x)) + k log u; total k·x/(u − x) =
    k·u·inv_pos(u − x) − k (the same forms as an M/M/1 cell, :data:`DCP_FORMS`)."""
    import cvxpy as cp

    u = np.broadcast_to(np.asarray(fam.capacity, dtype=float), x.shape)
    k = np.broadcast_to(np.asarray(fam.scale, dtype=float), x.shape)
    zero = np.zeros(x.shape)
    if objective is Objective.WARDROP:
        return cp.sum(form_terms("neg_log", u - x, x, k, zero)) + float(np.sum(k * np.log(u)))
    return cp.sum(form_terms("inv_pos", u - x, x, k * u, zero)) - float(np.sum(k))


#: arc-cost family class → builder(family, x, objective, ref) of the CVXPY objective sum.
ARC_FORMS: dict[type, Callable[[Any, Any, Objective, np.ndarray | None], Any]] = {
    Polynomial: _polynomial,
    MM1: _mm1,
}


def _no_form(fam: ArcCost) -> ModelError:
    if isinstance(fam, ServiceArc):
        return ModelError(f"ServiceArc({type(fam.model).__name__}, cost {fam.kind.value!r}) has "
                          "no exact convex CVXPY form; solve this game with "
                          "lbtheory.games.frank_wolfe, or use MM1Latency cells with the latency "
                          "cost (exactly DCP, THEORY §5)")
    return ModelError(f"{type(fam).__name__} has no exact convex CVXPY form (known: "
                      f"{sorted(c.__name__ for c in ARC_FORMS)}); use lbtheory.games.frank_wolfe")


def check_convex_form(bank: ArcCostBank) -> None:
    """Raise :class:`~lbtheory.errors.ModelError` naming the first family without a form."""
    for fam, _ in bank.groups:
        if type(fam) not in ARC_FORMS:
            raise _no_form(fam)


def arc_objective(fam: ArcCost, x: Any, objective: Objective | str,
                  ref: np.ndarray | None = None) -> Any:
    """CVXPY Σ ∫_0^x ℓ (``wardrop``) or Σ x·ℓ(x) (``system_optimum``) of one (vectorised) family.

    ``x`` is a CVXPY vector of arc flows (flow units); ``ref`` (optional, per arc) a typical flow,
    used only to scale conic forms.
    """
    builder = ARC_FORMS.get(type(fam))
    if builder is None:
        raise _no_form(fam)
    return builder(fam, x, Objective.parse(objective), ref)


def bank_objective(bank: ArcCostBank, x: Any, objective: Objective | str,
                   ref: np.ndarray | None = None) -> Any:
    """:func:`arc_objective` summed over every family of a game's cost bank (x: m arc flows)."""
    objective = Objective.parse(objective)
    check_convex_form(bank)
    terms = [arc_objective(fam, x[idx], objective, None if ref is None else ref[idx])
             for fam, idx in bank.groups]
    return sum(terms[1:], terms[0])
