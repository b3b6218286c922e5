"""The three DLB cost signals and their flow view — one definition each (THEORY §4).

On arc (i, j) with one-way delay τ_ij (seconds) and destination workload N_j (requests):

=========  =====================  =================  ==========
name       c_ij(N_j)              f_j(N)             g_ij
=========  =====================  =================  ==========
rif        N_j / k_j              N / k_j            0
latency    ℓ_j(N_j) + 2τ_ij        ℓ_j(N)             2τ_ij
gradient   1/μ'_j(N_j) + 2τ_ij     1/μ'_j(N)          2τ_ij
=========  =====================  =================  ==========

Costs are seconds (latency, gradient) or requests per replica (RIF). The *flow view* evaluates
f_j at N = μ_j⁻¹(z); its integral p_j(z) = ∫_0^z f_j(μ_j⁻¹(s)) ds is the potential of program (12)
(THEORY §5). All functions accept numpy arrays; those without μ⁻¹ are also traceable by JAX.
The network term 2τ (round trip, one-way τ) follows DLB; DGD-LB's summary writes τ (THEORY §13.2).
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from ._array import xp
from ._checks import check_option
from .models import ModelBank, ServiceModel

__all__ = [
    "CostKind",
    "cell_cost",
    "cell_cost_prime",
    "static_cost",
    "arc_costs",
    "flow_cost",
    "flow_potential",
    "total_latency_rate",
]


class CostKind(enum.StrEnum):
    """The cost signal a router uses (THEORY §4)."""

    RIF = "rif"
    LATENCY = "latency"
    GRADIENT = "gradient"

    @property
    def short(self) -> str:
        """The short label in policy names: ``rif``, ``lat``, ``grad`` (``flow-grad``)."""
        return {"rif": "rif", "latency": "lat", "gradient": "grad"}[self.value]

    @classmethod
    def parse(cls, value: str | CostKind, name: str = "cost") -> CostKind:
        """Coerce a ``cost`` argument (:func:`~lbtheory._checks.check_option`); raises
        ParameterError naming ``name`` and the allowed values."""
        return check_option(cls, value, name)


Model = ServiceModel | ModelBank


def cell_cost(kind: CostKind | str, model: Model, N: Any, replicas: Any = 1.0) -> Any:
    """f_j(N): the congestion part of the cost (s for latency/gradient, requests for RIF)."""
    kind = CostKind.parse(kind)
    if kind is CostKind.RIF:
        return N / replicas
    if kind is CostKind.LATENCY:
        return model.latency(N)
    return model.gradient_cost(N)


def cell_cost_prime(kind: CostKind | str, model: Model, N: Any, replicas: Any = 1.0) -> Any:
    """f'_j(N), derivative of :func:`cell_cost` in N: 1/k (RIF), ℓ' (latency), −μ''/μ'²
    (gradient). Closed forms where the model has them; numpy or JAX."""
    kind = CostKind.parse(kind)
    if kind is CostKind.RIF:
        return xp(N).ones_like(N * 1.0) / replicas
    if kind is CostKind.LATENCY:
        return model.latency_prime(N)
    return model.gradient_cost_prime(N)


def static_cost(kind: CostKind | str, delays: Any) -> Any:
    """g_ij: the fixed part of the cost, 2τ_ij for latency/gradient, 0 for RIF (s)."""
    kind = CostKind.parse(kind)
    if kind is CostKind.RIF:
        return 0.0 * delays
    return 2.0 * delays


def arc_costs(kind: CostKind | str, models: ModelBank, N: Any, replicas: Any,
              delays: Any) -> Any:
    """c_ij(N_j) = f_j(N_j) + g_ij for every (i, j) (n×n; mask non-arcs yourself).

    Args:
        N: workloads seen by the sources — either a vector (n,) (same for every source) or an
            n×n matrix whose row i holds the delayed workloads N_j(t − τ_ij) that source i sees.
    """
    f = cell_cost(kind, models, N, replicas)
    return f + static_cost(kind, delays)


def flow_cost(kind: CostKind | str, model: Model, z: Any, replicas: Any = 1.0) -> np.ndarray:
    """f_j(μ_j⁻¹(z)): the cost of a cell receiving inflow z req/s in steady state (numpy)."""
    N = model.inverse_rate(z)
    return cell_cost(kind, model, N, replicas)


_GL_X, _GL_W = np.polynomial.legendre.leggauss(48)


def _breakpoints(model: ServiceModel) -> list[float]:
    knee = getattr(model, "knee", None)
    soft = getattr(model, "softness", None)
    if knee is not None and soft is not None:
        k, s = float(knee), float(soft)
        return [max(0.0, k + d * s) for d in (-30, -10, -3, 0, 3, 10, 30)]
    K = getattr(model, "K", None)
    return [float(K) * c for c in (0.5, 2, 8, 32)] if K is not None else []


def flow_potential(kind: CostKind | str, model: ServiceModel, z: Any,
                   replicas: float = 1.0) -> np.ndarray:
    """p_j(z) = ∫_0^z f_j(μ_j⁻¹(s)) ds, the Beckmann-type potential of program (12).

    Computed in workload space, p(z) = ∫_0^{μ⁻¹(z)} f(n) μ'(n) dn, by composite Gauss–Legendre
    quadrature split at the model's breakpoints (exactly N for the gradient cost). Units:
    request·s/s for latency and gradient costs (the same units as the total latency rate).
    Returns +inf for z ≥ μ̄.
    """
    kind = CostKind.parse(kind)
    z = np.asarray(z, dtype=float)
    Nz = np.asarray(model.inverse_rate(z), dtype=float)
    if kind is CostKind.GRADIENT:
        return Nz
    out = np.empty(Nz.shape)
    flat_N, flat_out = Nz.reshape(-1), out.reshape(-1)
    bps = _breakpoints(model)
    for idx, N in enumerate(flat_N):
        if not np.isfinite(N):
            flat_out[idx] = np.inf
            continue
        edges = np.unique([0.0, *[b for b in bps if 0 < b < N], *np.linspace(0, N, 9)[1:]])
        total = 0.0
        for a, b in zip(edges[:-1], edges[1:]):
            n = 0.5 * (b - a) * _GL_X + 0.5 * (a + b)
            integrand = cell_cost(kind, model, n, replicas) * model.rate_prime(n)
            total += 0.5 * (b - a) * float(np.dot(_GL_W, integrand))
        flat_out[idx] = total
    return out


def total_latency_rate(workload: Any, routing: Any, arrival_rates: Any, delays: Any) -> Any:
    """C = Σ_j N_j + Σ_ij λ_i x_ij 2τ_ij: requests in service plus on the wire (request-s per s).

    By Little's law the mean end-to-end latency is C / Σ_i λ_i seconds (THEORY §5).
    """
    m = xp(workload, routing)
    lam = arrival_rates
    return m.sum(workload) + m.sum(lam[:, None] * routing * 2.0 * delays)
