"""Exact critical stepsize of flow routing and the stability verdict for a given stepsize [D].

``critical_stepsize`` bisects a common scale ``c`` of the stepsizes (η_i = c·w_i) on the spectral
abscissa of the linearised DDE (THEORY §7.6): coarse bracketing and bisection use the collocation
spectrum (Newton-refined), the last digits come from tracking the crossing root with Newton's
method on det Δ(s; c) and regula falsi on Re s(c) = 0. The crossing root ``iω`` gives the period
``2π/ω`` of the oscillation that appears just above the threshold.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._checks import check_int, check_real, validate_stepsize
from ..costs import CostKind
from ..errors import (
    ParameterError,
    StabilityStatus,
    StepsizeStatus,
    TopologyError,
    warn_deprecated,
)
from ..network import CellNetwork
from ._dde import LinearDDE, RootSet, newton_root, rightmost_roots
from ._linearise import Linearisation, empirical_rule, linearise

__all__ = ["CriticalStepsize", "ScaleCrossing", "StepsizeReport", "spectrum", "critical_scale",
           "critical_stepsize", "check_stepsize", "with_probe_period"]

#: Default Chebyshev degree of the collocation. THEORY §7.6 reports 30–40 nodes for 8 digits
#: without refinement; here the collocation only seeds Newton's method, and the rightmost roots of
#: the reference problems converge to 1e-11 already at degree 6–8 (BENCHMARKS.md).
DEFAULT_NODES = 16


@dataclasses.dataclass(frozen=True)
class CriticalStepsize:
    """Result of :func:`critical_stepsize`.

    Attributes:
        critical_stepsize: the common scale c* (for unit weights: the stepsize η, units
            1/(cost-unit·s)) at which the spectral abscissa crosses zero; +inf if the equilibrium is
            locally stable for every stepsize (no routing degree of freedom, or no delay).
        crossing_root: the root on the imaginary axis at c* (1/s), Im ≥ 0.
        frequency: ω = Im of the crossing root (rad/s).
        period: 2π/ω (s): period of the oscillation born at the threshold.
        empirical_rule: the §7.6 empirical rule on the same scale — NOT a guarantee.
        rule_per_source: η_i^rule per cell (+inf where unconstrained).
        linearisation: the linear DDE used.
        n_nodes: Chebyshev degree used.
        evaluations: number of collocation spectra computed.
        status: ``StepsizeStatus.VERIFIED`` when the full collocation spectrum at c* has no root
            to the right of the crossing root (always so for c* = +inf), else ``UNVERIFIED``
            (c* is then the bisection bracket's upper end, about 1 % accurate).
    """

    critical_stepsize: float
    crossing_root: complex
    frequency: float
    period: float
    empirical_rule: float
    rule_per_source: np.ndarray
    linearisation: Linearisation
    n_nodes: int
    evaluations: int
    status: StepsizeStatus

    @property
    def verified(self) -> bool:
        """``status is StepsizeStatus.VERIFIED`` (kept for the JSON key ``critical_verified``)."""
        return self.status is StepsizeStatus.VERIFIED

    @property
    def rule_ratio(self) -> float:
        """critical_stepsize / empirical_rule (> 1: the rule was safe in this instance)."""
        return self.critical_stepsize / self.empirical_rule


def spectrum(lin: Linearisation, scale: float, *, n_nodes: int = DEFAULT_NODES,
             count: int = 6) -> RootSet:
    """Rightmost roots of the linearised dynamics at stepsizes η_i = scale·w_i."""
    return rightmost_roots(lin.dde(scale), n_nodes=n_nodes, count=count,
                           structural_zeros=lin.structural_zeros)


@dataclasses.dataclass(frozen=True)
class ScaleCrossing:
    """Result of :func:`critical_scale`.

    Attributes:
        scale: the parameter value c* where the spectral abscissa crosses zero (+inf if stable
            over the whole search range, 0 if unstable at its lower end).
        root: the crossing root (Im ≥ 0), ≈ iω.
        evaluations: collocation spectra computed.
        verified: the collocation spectrum at c* has nothing to the right of ``root``.
    """

    scale: float
    root: complex
    evaluations: int
    verified: bool


def critical_scale(make_dde: Callable[[float], LinearDDE], start: float = 1.0, *,
                   structural_zeros: int = 0, n_nodes: int = DEFAULT_NODES, rtol: float = 1e-12,
                   max_doublings: int = 60) -> ScaleCrossing:
    """First zero crossing of the spectral abscissa of a one-parameter family of DDEs.

    1. Bracket [lo, hi] (hi ≤ 2·lo) by doubling/halving from ``start`` on the collocation
       spectrum (Newton-refined).
    2. Continue every root with Re s ≥ 0 at ``hi`` down to ``lo`` by Newton's method on
       det Δ(s; c) and solve Re s_k(c) = 0 for each by Illinois regula falsi to ``rtol``;
       c* = the smallest such crossing.
    3. Verify with the collocation spectrum at c* that no root lies to the right of the crossing
       root; otherwise fall back to bisection on collocation spectra (then ``verified`` is False
       only if even that leaves another branch at c*).

    The family must be stable for small c and unstable for large c (a gain or a delay); if the
    abscissa is non-monotone, the crossing found lies in the first bracket met.

    Args:
        make_dde: c ↦ the DDE at parameter c.
        start: initial guess for c* (> 0).
        structural_zeros: exact zero roots to ignore (see :func:`rightmost_roots`).
    """
    evals = 0

    def spec(c: float) -> RootSet:
        nonlocal evals
        evals += 1
        return rightmost_roots(make_dde(c), n_nodes=n_nodes, count=16,
                               structural_zeros=structural_zeros)

    def verified(c: float, root: complex) -> bool:
        check = spec(c)
        tol = max(1.0, abs(root))
        return check.abscissa <= 1e-7 * tol and abs(check.rightmost - root) <= 1e-5 * tol

    c = float(start)
    rs = spec(c)
    lo, hi, rs_hi = (c, None, None) if rs.abscissa < 0 else (None, c, rs)
    for _ in range(max_doublings):
        if lo is not None and hi is not None:
            break
        c = c * 2.0 if hi is None else c / 2.0
        rs = spec(c)
        if rs.abscissa < 0:
            lo = c
        else:
            hi, rs_hi = c, rs
    if hi is None:
        return ScaleCrossing(math.inf, complex(math.nan, math.nan), evals, True)
    if lo is None:
        return ScaleCrossing(0.0, rs_hi.rightmost, evals, False)
    best = None
    for r in rs_hi.roots:
        if r.real < 0 or r.imag < -1e-12:
            continue
        crossing = _continue_crossing(make_dde, lo, hi, complex(r.real, abs(r.imag)), rtol)
        if crossing is None:
            best = None
            break
        if best is None or crossing[0] < best[0]:
            best = crossing
    if best is not None and verified(best[0], best[1]):
        return ScaleCrossing(best[0], best[1], evals, True)
    while hi - lo > 1e-2 * hi:  # robust fallback: bisection on full spectra
        mid = 0.5 * (lo + hi)
        rs = spec(mid)
        if rs.abscissa < 0:
            lo = mid
        else:
            hi, rs_hi = mid, rs
    c_star, root = _refine(make_dde, lo, hi, rs_hi.rightmost, rtol)
    if verified(c_star, root):
        return ScaleCrossing(c_star, root, evals, True)
    return ScaleCrossing(hi, rs_hi.rightmost, evals, False)


def _continue_crossing(make_dde: Callable[[float], LinearDDE], lo: float, hi: float,
                       s_hi: complex, rtol: float) -> tuple[float, complex] | None:
    """Continue a root from ``hi`` to ``lo`` (geometric substeps) and locate Re s(c) = 0.

    Returns None when Newton continuation loses the root or it does not cross in [lo, hi].
    """
    steps = max(2, math.ceil(16 * math.log2(hi / lo)))
    s, cs = s_hi, hi
    for k in range(1, steps + 1):
        c = hi * (lo / hi) ** (k / steps)
        new, ok = newton_root(make_dde(c), s)
        new = complex(new.real, abs(new.imag))
        if not ok or abs(new - s) > 0.25 * max(1.0, abs(s)):
            return None
        if new.real < 0:
            return _refine(make_dde, c, cs, s, rtol)
        s, cs = new, c
    return None


def _track(make_dde: Callable[[float], LinearDDE], c: float, s0: complex) -> complex:
    s, _ = newton_root(make_dde(c), s0)
    return complex(s.real, abs(s.imag))


def _refine(make_dde: Callable[[float], LinearDDE], lo: float, hi: float, s_hi: complex,
            rtol: float) -> tuple[float, complex]:
    """Illinois regula falsi on Re s(c) = 0, s(c) tracked by Newton from the bracket's root."""
    s_b = _track(make_dde, hi, s_hi)
    s_a = _track(make_dde, lo, s_b)
    fa, fb = s_a.real, s_b.real
    if not (fa < 0 <= fb):  # tracking failed: return the bracket
        return hi, s_b
    a, b, side = lo, hi, 0
    c, s = hi, s_b
    for _ in range(100):
        c = (a * fb - b * fa) / (fb - fa)
        s = _track(make_dde, c, s)
        fc = s.real
        if fc < 0:
            a, fa = c, fc
            if side == -1:
                fb *= 0.5
            side = -1
        else:
            b, fb = c, fc
            if side == 1:
                fa *= 0.5
            side = 1
        if b - a <= rtol * b or fc == 0.0:
            break
    return c, s


def with_probe_period(net: CellNetwork, probe_period_s: float) -> CellNetwork:
    """The network whose fluid model has the feedback delays of routers that probe every
    ``probe_period_s`` (THEORY §3: τ^fb_ij = τ_ij + δ/2) [R: a model of the sampled update,
    conservative — it ignores that the update steps a whole period at once].

    Every arc's one-way delay grows by δ/4: each loop of the linearised dynamics alternates
    routing → workload (delay τ_ij) and workload → routing (τ_ij) legs equally often, so its
    total delay grows by δ/2 per round trip exactly as if only the feedback leg grew by δ/2; the
    static cost 2τ_ij grows by the same δ/2 on every arc of a source, which leaves every
    equilibrium unchanged (only cost differences within a source matter).
    """
    from ..network import Arc

    d = check_real(probe_period_s, "probe_period_s", unit="s", low=0.0)
    if d == 0.0:
        return net
    return CellNetwork(net.cells, [Arc(a.source, a.target, a.delay + d / 4.0) for a in net.arcs])


def critical_stepsize(net: CellNetwork, cost: CostKind | str = "gradient", *,
                      weights: Any = None, equilibrium: Any = None,
                      linearisation: Linearisation | None = None, n_nodes: int = DEFAULT_NODES,
                      rtol: float = 1e-12, max_doublings: int = 60,
                      probe_period_s: float = 0.0) -> CriticalStepsize:
    """Exact local critical stepsize of flow routing (THEORY §7.6) [D].

    Args:
        net: the cell network.
        cost: cost signal routed on (its equilibrium is the linearisation point).
        weights: per-source stepsize weights; the result is the common scale c* with
            η_i = c*·weights[i] (default: all ones, so c* is the critical uniform stepsize).
        equilibrium: an equilibrium to use instead of ``solve_equilibrium(net, cost)``.
        linearisation: a precomputed :func:`linearise` result (then ``cost``, ``weights`` and
            ``equilibrium`` are ignored).
        n_nodes: Chebyshev degree of the collocation.
        rtol: relative accuracy of c*.
        max_doublings: bracket search range (factors of 2 around the empirical rule).
        probe_period_s: routers update every this many seconds: the fluid model gets their
            extra feedback delay (:func:`with_probe_period`); 0 = continuous updates.

    Raises:
        BoundaryEquilibriumError, InfeasibleDemandError, StepsizeError: see :func:`linearise`.
    """
    check_real(rtol, "rtol", low=0.0, high=1.0, low_open=True, high_open=True)
    check_int(max_doublings, "max_doublings", low=1, high=1000)
    net = with_probe_period(net, probe_period_s)
    lin = linearisation or linearise(net, cost, weights=weights, equilibrium=equilibrium)
    rule, per = empirical_rule(net, lin.point, lin.weights)
    if not lin.free_sources or lin.fixed.max_delay == 0.0:
        cross = ScaleCrossing(math.inf, complex(math.nan, math.nan), 0, True)
    else:
        cross = critical_scale(lin.dde, rule if math.isfinite(rule) else 1.0,
                               structural_zeros=lin.structural_zeros, n_nodes=n_nodes,
                               rtol=rtol, max_doublings=max_doublings)
    w = abs(cross.root.imag)
    return CriticalStepsize(critical_stepsize=cross.scale,
                            crossing_root=complex(cross.root.real, w), frequency=w,
                            period=2 * math.pi / w if w > 0 else math.inf,
                            empirical_rule=rule, rule_per_source=per, linearisation=lin,
                            n_nodes=n_nodes, evaluations=cross.evaluations,
                            status=StepsizeStatus.VERIFIED if cross.verified
                            else StepsizeStatus.UNVERIFIED)


@dataclasses.dataclass(frozen=True)
class StepsizeReport:
    """Local stability of flow routing at a given stepsize (exact linear analysis).

    Attributes:
        stepsize: the common stepsize scale assessed.
        critical: the :class:`CriticalStepsize` of the same linearisation.
        roots: rightmost roots at ``stepsize``.
        status: :class:`~lbtheory.errors.StabilityStatus` — ``stable`` (all non-structural
            roots in Re s < 0) or ``unstable``; ``verdict`` is its value (the JSON key).
        rightmost_root: the rightmost root (1/s), Im ≥ 0.
        decay_rate: −Re of the rightmost root (1/s): perturbations decay like e^{−decay_rate·t}
            (negative when they grow).
        period: 2π/Im of the rightmost root (s); +inf for a real root.
        margin: critical_stepsize / stepsize (> 1 means below the threshold).
    """

    stepsize: float
    critical: CriticalStepsize
    roots: RootSet
    status: StabilityStatus
    rightmost_root: complex
    decay_rate: float
    period: float
    margin: float

    @property
    def verdict(self) -> str:
        """``"stable"`` or ``"unstable"``: the value of :attr:`status`."""
        return self.status.value

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (keys ``critical_stepsize``, ``empirical_rule``,
        ``rightmost_root`` [re, im], ``verdict`` are a stable contract; ``verdict`` is the
        report's :class:`~lbtheory.errors.StabilityStatus`, while the JSON ``status`` is the
        :class:`~lbtheory.errors.StepsizeStatus` of the *critical stepsize*, ``"verified"`` or
        ``"unverified"``, and ``critical_verified`` the same as a bool)."""
        cr = self.critical
        lin = cr.linearisation
        return {
            "stepsize": self.stepsize,
            "critical_stepsize": cr.critical_stepsize,
            "empirical_rule": cr.empirical_rule,
            "empirical_rule_is_guarantee": False,
            "rightmost_root": [self.rightmost_root.real, self.rightmost_root.imag],
            "verdict": self.verdict,
            "decay_rate": self.decay_rate,
            "period": self.period,
            "margin": self.margin,
            "crossing_frequency": cr.frequency,
            "crossing_period": cr.period,
            "critical_verified": cr.verified,
            "status": cr.status.value,
            "cost": lin.point.cost.value,
            "structural_zero_modes": {"conserved": lin.conserved_removed,
                                      "inflow_neutral": lin.neutral_removed,
                                      "removed_by_count": lin.structural_zeros},
            "n_nodes": cr.n_nodes,
        }


def check_stepsize(net: CellNetwork, cost: CostKind | str = "gradient",
                   stepsize: float | None = None, *, weights: Any = None,
                   equilibrium: Any = None, n_nodes: int = DEFAULT_NODES) -> StepsizeReport:
    """Is flow routing on ``net`` locally stable at ``stepsize`` (default: the empirical rule)?
    The verdict, margin and decay rate (1/s), with the exact threshold of
    :func:`critical_stepsize`.

    Raises:
        ParameterError: ``net`` is not a :class:`~lbtheory.network.CellNetwork`.
        StepsizeError: ``stepsize`` ≤ 0 or not finite.
        BoundaryEquilibriumError, InfeasibleDemandError: see :func:`linearise`.
        TopologyError: every arrival rate is 0 (no flow to route: the question is vacuous).
    """
    if isinstance(net, (int, float, np.integer, np.floating)) and not isinstance(net, bool):
        # 0.1's check_stepsize(value, name) was the float validator: it works for one release
        warn_deprecated("check_stepsize(value, name) as a float validator",
                        "lbtheory._checks.validate_stepsize (check_stepsize is now the "
                        "stability check)")
        named = isinstance(cost, str) and cost not in {k.value for k in CostKind}
        return validate_stepsize(net, cost if named else "stepsize")
    if not isinstance(net, CellNetwork):
        raise ParameterError(f"net must be a CellNetwork (e.g. lbtheory.load_topology(path)), got "
                             f"{type(net).__name__}; check_stepsize is the stability check "
                             f"(net, cost, stepsize)")
    if stepsize is not None:
        stepsize = validate_stepsize(stepsize)
    if not net.total_demand > 0:
        raise TopologyError("every arrival_rate is 0: there is no flow to route, so no stepsize "
                            "is stable or unstable; give at least one cell a positive "
                            "arrival_rate (req/s)")
    crit = critical_stepsize(net, cost, weights=weights, equilibrium=equilibrium,
                             n_nodes=n_nodes)
    if stepsize is None:
        stepsize = crit.empirical_rule if math.isfinite(crit.empirical_rule) else 1.0
    rs = spectrum(crit.linearisation, stepsize, n_nodes=n_nodes)
    r = rs.rightmost
    return StepsizeReport(stepsize=stepsize, critical=crit, roots=rs,
                          status=StabilityStatus.STABLE if rs.abscissa < 0
                          else StabilityStatus.UNSTABLE, rightmost_root=r,
                          decay_rate=-r.real,
                          period=2 * math.pi / abs(r.imag) if r.imag != 0 else math.inf,
                          margin=crit.critical_stepsize / stepsize)
