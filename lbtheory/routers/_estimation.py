"""Latency estimation (DLB §3.3): fit a cell's service model ℓ(N) to observed (requests in flight,
serving latency) samples with scipy least squares (Levenberg–Marquardt); and the robustness mode
of THEORY §11.1 item 10, which scales every fitted parameter by (1 + εξ) (DLB App. B).

The fit evaluates ℓ through the model classes of :mod:`lbtheory.models` (no formula re-coded).
Softplus parameters are searched in a form that always satisfies θ0 > θ1·θ2 (Assumption 1 and
slow variation (4), THEORY §4) and keeps the knee at least :data:`SOFTNESS_FLOOR` requests wide:
θ1 = e^a (or a given slope), θ2 = e^b, θ3 = ``SOFTNESS_FLOOR`` + e^c,
θ0 = (1 + ``MARGIN``)·θ1θ2 + e^d.

The fit is a maximum a posteriori estimate [R: DLB does not describe its fitter, THEORY §13.7;
its §6 names "Bayesian shrinkage" towards a fleet-wide prior]: Gaussian latency noise whose sd
is the samples' pooled sd within equal N (:func:`latency_noise`; N is a request count, so a
window holds many samples per value) and, on the log-parameters (a, b, c, d), independent
Gaussian priors centred on the ``prior`` model with sds :data:`PRIOR_LOG_SD`. A window that
says nothing about the knee (every sample below it) leaves the knee and softness at the prior's;
a rich window (many loads) overrules the prior. The prior is fixed (the declared model), not the
previous fit, so knees do not random-walk from refit to refit; the previous fit is only the
starting point.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._checks import check_int, check_option, check_real
from ..errors import ModelError, ParameterError
from ..models import MM1Latency, ServiceModel, SoftplusLatency

__all__ = ["FitFamily", "fit_latency_model", "perturb_model", "scale_to_replicas", "MARGIN",
           "SOFTNESS_FLOOR", "PRIOR_LOG_SD", "FIT_TOL", "latency_noise"]

#: θ0 ≥ (1 + MARGIN)·θ1θ2, as THEORY §4 advises a fitter to enforce.
MARGIN = 0.02
#: narrowest knee a softplus fit may have (requests) [R]: ℓ'' peaks at θ1/(4θ3), so the floor
#: bounds the gradient cost's curvature at the knee (a softness collapsed to 0.1 request made
#: it explode, issue 25 item 3) while still fitting the sharp hinge of an M/M/c cell
#: (E[latency | N] = s + max(0, N − c)·s/c) at whole requests.
SOFTNESS_FLOOR = 0.25
#: prior sds of the fitted log-parameters (softplus: log θ1, log θ2, log(θ3 − floor),
#: log(θ0 − (1 + MARGIN)θ1θ2); mm1: log μ̄, log K) [R]: a factor e ≈ 2.7 for the slope, the
#: knee and the softness, e² for the excess base latency (which may be ≈ 0).
PRIOR_LOG_SD = {"softplus": (0.5, 1.0, 1.0, 2.0), "mm1": (0.5, 1.0)}
#: a prior model of another family (e.g. a declared M/M/1 model for a softplus fit) only gives
#: the scales (unloaded latency, saturation rate): its prior sds are this many times wider [R].
FOREIGN_PRIOR_WIDTH = 4.0
#: relative tolerances (ftol, xtol, gtol) of the Levenberg–Marquardt fit: the fitted latency is
#: within ~1e-5 of the least-squares optimum, far below the sampling noise of a window, at a
#: quarter of the evaluations of scipy's 1e-8 defaults (the simulator refits every few seconds).
FIT_TOL = 1e-6


def _unchecked(values: tuple[float, ...]) -> tuple[Any, ...]:
    """Parameters as one-element arrays: the model classes validate scalar parameters only, and
    the parametrisations here are valid by construction — the least-squares residual skips the
    per-evaluation validation this way (same arithmetic, same values)."""
    return tuple(np.array([v]) for v in values)


class _Softplus:
    """The softplus family's search coordinates (module docstring), with an optional fixed
    slope θ1 (then a is not searched)."""

    def __init__(self, slope: float | None) -> None:
        self.slope = slope

    def build(self, p: np.ndarray, checked: bool = True) -> SoftplusLatency:
        k = 0 if self.slope is None else 1
        t1 = math.exp(p[0]) if self.slope is None else self.slope
        t2, t3 = math.exp(p[1 - k]), SOFTNESS_FLOOR + math.exp(p[2 - k])
        vals = ((1 + MARGIN) * t1 * t2 + math.exp(p[3 - k]), t1, t2, t3)
        return SoftplusLatency(*(vals if checked else _unchecked(vals)))

    def params(self, m: SoftplusLatency) -> np.ndarray:
        t1 = float(m.slope) if self.slope is None else self.slope
        t0, t2 = float(m.base_latency), max(float(m.knee), 1e-6)
        soft = max(float(m.softness) - SOFTNESS_FLOOR, 1e-3 * SOFTNESS_FLOOR)
        excess = max(t0 - (1 + MARGIN) * t1 * t2, 1e-3 * t0)
        p = np.log([t1, t2, soft, excess])
        return p if self.slope is None else p[1:]

    def prior_sd(self) -> np.ndarray:
        sd = np.array(PRIOR_LOG_SD["softplus"])
        return sd if self.slope is None else sd[1:]


class _MM1:
    def build(self, p: np.ndarray, checked: bool = True) -> MM1Latency:
        vals = (math.exp(p[0]), math.exp(p[1]))
        return MM1Latency(*(vals if checked else _unchecked(vals)))

    def params(self, m: MM1Latency) -> np.ndarray:
        return np.log([float(m.capacity), float(m.K)])

    def prior_sd(self) -> np.ndarray:
        return np.array(PRIOR_LOG_SD["mm1"])


class FitFamily(enum.StrEnum):
    """The model family an online latency fit uses."""

    SOFTPLUS = "softplus"
    MM1 = "mm1"


def _as_family(model: ServiceModel, family: FitFamily) -> ServiceModel:
    """``model`` itself when it is of ``family``, else a model of ``family`` with the same
    unloaded latency and saturation rate."""
    mu, l0 = float(model.max_rate), float(model.latency(0.0))
    if family is FitFamily.SOFTPLUS:
        if isinstance(model, SoftplusLatency):
            return model
        knee = 0.5 * l0 * mu
        return SoftplusLatency(l0, 1.0 / mu, knee, SOFTNESS_FLOOR + max(0.05 * knee, 0.5))
    return model if isinstance(model, MM1Latency) else MM1Latency(mu, max(l0 * mu, 1e-3))


def latency_noise(N: np.ndarray, latency: np.ndarray) -> float:
    """The latency noise sd (s): the pooled sd of the samples around their mean at each value
    of N (values seen once do not count); the overall sd when no value repeats."""
    N, y = np.asarray(N, dtype=float), np.asarray(latency, dtype=float)
    _, inv, cnt = np.unique(N, return_inverse=True, return_counts=True)
    dof = int((cnt - 1).sum())
    if dof < 2:
        return float(np.std(y))
    means = np.bincount(inv, weights=y) / cnt
    return math.sqrt(float(((y - means[inv]) ** 2).sum()) / dof)


def fit_latency_model(N: np.ndarray, latency: np.ndarray, prior: ServiceModel, *,
                      family: FitFamily | str = FitFamily.SOFTPLUS,
                      start: ServiceModel | None = None,
                      slope: float | None = None) -> ServiceModel:
    """Maximum a posteriori fit of ℓ(N) to samples (N requests in flight, latency s).

    Args:
        N: requests at the cell when each sample's request arrived (including itself).
        latency: that request's serving latency at the cell (queueing + service, s).
        prior: the model the prior is centred on (module docstring); a model of another family
            is converted (same unloaded latency and saturation rate) and, being only a guess at
            the scales, its prior sds are :data:`FOREIGN_PRIOR_WIDTH` times wider.
        family: :class:`FitFamily` or its value, "softplus" (default) or "mm1".
        start: starting point of the search (default: ``prior``), e.g. the previous fit.
        slope: softplus only: θ1 fixed to this value (s/request, = 1/μ̄ when the cell's
            saturation rate is known); None searches it.

    Returns:
        The fitted model (a valid :class:`~lbtheory.models.ServiceModel`).

    Raises:
        ModelError: unknown family, a fixed slope with the mm1 family, or unusable samples.
    """
    from scipy.optimize import least_squares

    family = check_option(FitFamily, family, "latency fit: family", error=ModelError)
    if slope is not None:
        if family is not FitFamily.SOFTPLUS:
            raise ModelError("latency fit: a fixed slope needs the softplus family")
        check_real(slope, "latency fit: slope", unit="s/request", low=0.0, low_open=True,
                   error=ModelError)
    N = np.asarray(N, dtype=float)
    y = np.asarray(latency, dtype=float)
    ok = np.isfinite(N) & np.isfinite(y) & (y > 0)
    N, y = N[ok], y[ok]
    if N.size < 3:
        raise ModelError(f"latency fit: need at least 3 finite samples, got {N.size}")
    space = _Softplus(slope) if family is FitFamily.SOFTPLUS else _MM1()
    own = _as_family(prior, family)
    p0 = space.params(own)
    x0 = p0 if start is None else space.params(_as_family(start, family))
    noise = max(latency_noise(N, y), 1e-3 * float(np.mean(y)))
    inv_sd = 1.0 / (space.prior_sd() * (1.0 if own is prior else FOREIGN_PRIOR_WIDTH))

    def resid(p: np.ndarray) -> np.ndarray:
        try:
            model = space.build(p, checked=False)
        except (ModelError, OverflowError):
            return np.full(N.size + p.size, 1e6)
        r = (np.asarray(model.latency(N), dtype=float) - y) / noise
        return np.concatenate([r, inv_sd * (p - p0)])

    sol = least_squares(resid, x0, method="lm", ftol=FIT_TOL, xtol=FIT_TOL, gtol=FIT_TOL,
                        max_nfev=200 * (x0.size + 1))
    try:
        return space.build(sol.x)
    except (OverflowError, ValueError):
        raise ModelError("latency fit: the least-squares solver diverged") from None


def perturb_model(model: ServiceModel, factor: float | Sequence[float]) -> ServiceModel:
    """Every fitted parameter × ``factor`` (DLB App. B: the perturbed parameters of cell i are
    (1 + εξ_i)·θ̂_i; THEORY §11.1 item 10): softplus θ0, θ1, θ2, θ3; M/M/1 μ̄ and K. ``factor``
    = 1 + εξ > 0, one number for every parameter (one ξ per cell), or one per parameter in that
    order (4 for a softplus, 2 for an M/M/1: independent ξ per parameter, issue 36 item 3).

    A softplus whose factors break θ0 > θ1θ2 has its knee lowered to θ0'/((1 + MARGIN)·θ1'),
    the largest a fitter would return [R], so the perturbed model stays one the estimator could
    have produced (Assumption 1)."""
    if isinstance(model, SoftplusLatency | MM1Latency):
        k = 4 if isinstance(model, SoftplusLatency) else 2
        if np.ndim(factor) == 0:
            fs = [check_real(factor, "perturb_model: factor", low=0.0, low_open=True)] * k
        else:
            if len(factor) != k:
                raise ParameterError(f"perturb_model: {k} factors for a "
                                     f"{type(model).__name__}, got {len(factor)}")
            fs = [check_real(f, "perturb_model: factor", low=0.0, low_open=True)
                  for f in factor]
    if isinstance(model, SoftplusLatency):
        t0, t1 = float(model.base_latency) * fs[0], float(model.slope) * fs[1]
        knee = min(float(model.knee) * fs[2], t0 / ((1 + MARGIN) * t1))
        return SoftplusLatency(t0, t1, knee, float(model.softness) * fs[3])
    if isinstance(model, MM1Latency):
        return MM1Latency(float(model.capacity) * fs[0], float(model.K) * fs[1])
    raise ModelError(f"perturb_model: supports softplus and mm1 models, got {type(model).__name__}")


def scale_to_replicas(model: ServiceModel, replicas: int, online: int) -> ServiceModel:
    """The cell's model with ``online`` of its ``replicas`` servers up [R]: if k identical servers
    share the load evenly, ℓ_k'(N) = ℓ_k(N·k/k'). Softplus: θ1 × f, θ2 ÷ f, θ3 ÷ f (θ0 and
    θ1θ2 unchanged, so θ0 > θ1θ2 still holds); M/M/1: μ̄ ÷ f, K ÷ f; f = k/k'."""
    if online == replicas:
        return model
    check_int(online, "scale_to_replicas: online servers", low=1)
    f = replicas / online
    if isinstance(model, SoftplusLatency):
        return SoftplusLatency(float(model.base_latency), float(model.slope) * f,
                               float(model.knee) / f, float(model.softness) / f)
    if isinstance(model, MM1Latency):
        return MM1Latency(float(model.capacity) / f, float(model.K) / f)
    raise ModelError(f"scale_to_replicas: supports softplus and mm1 models, got "
                     f"{type(model).__name__}")
