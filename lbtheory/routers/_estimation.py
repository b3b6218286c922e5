"""Latency estimation (DLB §3.3): fit a cell's service model ℓ(N) to observed (requests in flight,
serving latency) samples with scipy least squares (Levenberg–Marquardt); and the robustness mode
of THEORY §11.1 item 10, which scales a fitted model's latency by (1 + εξ) [R].

The fit evaluates ℓ through the model classes of :mod:`lbtheory.models` (no formula re-coded).
Softplus parameters are searched in a form that always satisfies θ0 > θ1·θ2 (Assumption 1 and
slow variation (4), THEORY §4): θ1 = e^a, θ2 = e^b, θ3 = e^c, θ0 = (1 + ``MARGIN``)·θ1θ2 + e^d.
A weak ridge pulls the parameters towards the prior model (the previous fit or the declared
model), so a window with no information about the knee (a lightly loaded cell) keeps the prior
there [R: DLB does not describe its fitter, THEORY §13.7].
"""

from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np

from .._checks import check_int, check_option, check_real
from ..errors import ModelError
from ..models import MM1Latency, ServiceModel, SoftplusLatency

__all__ = ["FitFamily", "fit_latency_model", "perturb_model", "scale_to_replicas", "MARGIN",
           "RIDGE", "FIT_TOL"]

#: θ0 ≥ (1 + MARGIN)·θ1θ2, as THEORY §4 advises a fitter to enforce.
MARGIN = 0.02
#: weight of the ridge towards the prior (in units of the latency residual scale).
RIDGE = 0.01
#: relative tolerances (ftol, xtol, gtol) of the Levenberg–Marquardt fit: the fitted latency is
#: within ~1e-5 of the least-squares optimum, far below the sampling noise of a window, at a
#: quarter of the evaluations of scipy's 1e-8 defaults (the simulator refits every few seconds).
FIT_TOL = 1e-6


def _unchecked(values: tuple[float, ...]) -> tuple[Any, ...]:
    """Parameters as one-element arrays: the model classes validate scalar parameters only, and
    the parametrisations here are valid by construction — the least-squares residual skips the
    per-evaluation validation this way (same arithmetic, same values)."""
    return tuple(np.array([v]) for v in values)


def _softplus_from(p: np.ndarray, checked: bool = True) -> SoftplusLatency:
    t1, t2, t3 = math.exp(p[0]), math.exp(p[1]), math.exp(p[2])
    vals = ((1 + MARGIN) * t1 * t2 + math.exp(p[3]), t1, t2, t3)
    return SoftplusLatency(*(vals if checked else _unchecked(vals)))


def _softplus_params(m: SoftplusLatency) -> np.ndarray:
    t0, t1, t2, t3 = (float(m.base_latency), float(m.slope), max(float(m.knee), 1e-6),
                      float(m.softness))
    excess = max(t0 - (1 + MARGIN) * t1 * t2, 1e-3 * t0)
    return np.log([t1, t2, t3, excess])


def _mm1_from(p: np.ndarray, checked: bool = True) -> MM1Latency:
    vals = (math.exp(p[0]), math.exp(p[1]))
    return MM1Latency(*(vals if checked else _unchecked(vals)))


def _mm1_params(m: MM1Latency) -> np.ndarray:
    return np.log([float(m.capacity), float(m.K)])


class FitFamily(enum.StrEnum):
    """The model family an online latency fit uses."""

    SOFTPLUS = "softplus"
    MM1 = "mm1"


def fit_latency_model(N: np.ndarray, latency: np.ndarray, prior: ServiceModel, *,
                      family: FitFamily | str = FitFamily.SOFTPLUS) -> ServiceModel:
    """Least-squares fit of ℓ(N) to samples (N requests in flight, latency s).

    Args:
        N: requests at the cell when each sample's request arrived (including itself).
        latency: that request's serving latency at the cell (queueing + service, s).
        prior: the model the ridge pulls towards and the starting point (same family, or any
            model whose latency is used to build a starting point).
        family: :class:`FitFamily` or its value, "softplus" (default) or "mm1".

    Returns:
        The fitted model (a valid :class:`~lbtheory.models.ServiceModel`).

    Raises:
        ModelError: unknown family or unusable samples.
    """
    from scipy.optimize import least_squares

    family = check_option(FitFamily, family, "latency fit: family", error=ModelError)
    N = np.asarray(N, dtype=float)
    y = np.asarray(latency, dtype=float)
    ok = np.isfinite(N) & np.isfinite(y) & (y > 0)
    N, y = N[ok], y[ok]
    if N.size < 3:
        raise ModelError(f"latency fit: need at least 3 finite samples, got {N.size}")
    if family is FitFamily.SOFTPLUS:
        build, params = _softplus_from, _softplus_params
        if not isinstance(prior, SoftplusLatency):
            mu = float(prior.max_rate)
            l0 = float(prior.latency(0.0))
            prior = SoftplusLatency(l0, 1.0 / mu, 0.5 * l0 * mu, max(0.05 * l0 * mu, 0.5))
    else:
        build, params = _mm1_from, _mm1_params
        if not isinstance(prior, MM1Latency):
            l0 = float(prior.latency(0.0))
            mu = float(prior.max_rate)
            prior = MM1Latency(mu, max(l0 * mu, 1e-3))
    p0 = params(prior)
    scale = float(np.median(y))
    w = RIDGE * math.sqrt(N.size)

    def resid(p: np.ndarray) -> np.ndarray:
        try:
            model = build(p, checked=False)
        except (ModelError, OverflowError):
            return np.full(N.size + p.size, 1e6)
        r = (np.asarray(model.latency(N), dtype=float) - y) / scale
        return np.concatenate([r, w * (p - p0)])

    sol = least_squares(resid, p0, method="lm", ftol=FIT_TOL, xtol=FIT_TOL, gtol=FIT_TOL,
                        max_nfev=200)
    try:
        return build(sol.x)
    except (OverflowError, ValueError):
        raise ModelError("latency fit: the least-squares solver diverged") from None


def perturb_model(model: ServiceModel, factor: float) -> ServiceModel:
    """The model whose latency is ``factor`` × the given one's (THEORY §11.1 item 10 [R]):
    softplus θ0, θ1 × factor; M/M/1 μ̄ ÷ factor. ``factor`` = 1 + εξ > 0."""
    check_real(factor, "perturb_model: factor", low=0.0, low_open=True)
    if isinstance(model, SoftplusLatency):
        return SoftplusLatency(float(model.base_latency) * factor, float(model.slope) * factor,
                               float(model.knee), float(model.softness))
    if isinstance(model, MM1Latency):
        return MM1Latency(float(model.capacity) / factor, float(model.K))
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
