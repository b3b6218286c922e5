"""Fast numpy evaluation of the cell terms the equilibrium solvers need (private).

The solvers evaluate, per Newton step, the cell cost f_j(N), its derivative f'_j(N), the
processing rate μ_j(N) and μ'_j(N) (THEORY §4; units: f in s, or requests/replica for RIF;
μ in req/s). :class:`CellBank` computes the four in one pass per model family — closed forms for
the built-in models (:class:`~lbtheory.models.MM1Latency`, :class:`~lbtheory.models.ExpSaturation`,
:class:`~lbtheory.models.SoftplusLatency`), the same formulas as the models' own methods — and
falls back to the models' methods for any other class (or JAX parameters). It also inverts the
cell cost, N = f_j⁻¹(y), in closed form where one exists. On networks of a few cells the generic
:class:`~lbtheory.models.ModelBank` dispatch (array-namespace checks per call) costs more than
the arithmetic; this is the solvers' hot path.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .._array import is_jax
from ..costs import CostKind, cell_cost, cell_cost_prime
from ..models import ExpSaturation, MM1Latency, SoftplusLatency, jax_leaves
from ..network import CellNetwork

__all__ = ["CellBank"]


class CellBank:
    """The cells of ``net`` for one cost signal, evaluated on workload vectors N (requests)."""

    def __init__(self, net: CellNetwork, cost: CostKind) -> None:
        self.net = net
        self.cost = cost
        self.n = net.n
        self.k = net.replicas
        self.caps = net.max_rates
        self.groups = net.models.groups
        self.generic = any(is_jax(*jax_leaves(m)) for m, _ in self.groups)

    # ------------------------------------------------------------------ evaluation
    def values(self, N: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(f(N), f'(N), μ(N), μ'(N)) per cell."""
        N = np.asarray(N, dtype=float)
        if self.generic:
            m, kind, k = self.net.models, self.cost, self.k
            return (np.asarray(cell_cost(kind, m, N, k), dtype=float),
                    np.asarray(cell_cost_prime(kind, m, N, k), dtype=float),
                    np.asarray(m.rate(N), dtype=float), np.asarray(m.rate_prime(N), dtype=float))
        f, fp, mu, mp = (np.empty(self.n) for _ in range(4))
        with np.errstate(all="ignore"):
            for model, idx in self.groups:
                f[idx], fp[idx], mu[idx], mp[idx] = self._group(model, N[idx], self.k[idx])
        return f, fp, mu, mp

    def _group(self, model, N, k):
        kind = self.cost
        if isinstance(model, MM1Latency):
            cap, K = model.capacity, model.K
            NK = N + K
            mu, mp = cap * N / NK, cap * K / NK**2
            if kind is CostKind.LATENCY:
                f, fp = NK / cap, np.zeros_like(N) + 1.0 / cap
            elif kind is CostKind.GRADIENT:
                f, fp = NK**2 / (cap * K), 2.0 * NK / (cap * K)
            else:
                f, fp = N / k, np.ones_like(N) / k
            return f, fp, mu, mp
        if isinstance(model, ExpSaturation):
            cap, K = model.capacity, model.K
            mu, mp = -cap * np.expm1(-N / K), (cap / K) * np.exp(-N / K)
            if kind is CostKind.LATENCY:  # ℓ = N/μ, ℓ' = (μ − Nμ')/μ² (limits K/μ̄, 1/(2μ̄))
                small = np.abs(N) < 1e-6 * K
                Ns = np.where(small, K, N)
                mus = -cap * np.expm1(-Ns / K)
                f = np.where(N > 0, np.where(N > 0, N, 1.0) / np.where(N > 0, mu, 1.0),
                             K / cap + 0.0 * N)
                fp = np.where(small, 1.0 / (2.0 * cap) + 0.0 * N,
                              (mus - Ns * (cap / K) * np.exp(-Ns / K)) / mus**2)
            elif kind is CostKind.GRADIENT:
                e = np.exp(N / K)
                f, fp = (K / cap) * e, e / cap
            else:
                f, fp = N / k, np.ones_like(N) / k
            return f, fp, mu, mp
        if isinstance(model, SoftplusLatency):
            t0, t1, t2, t3 = model.base_latency, model.slope, model.knee, model.softness
            u = (N - t2) / t3
            lat = t0 + t1 * t3 * np.logaddexp(0.0, u)
            sig = expit(u)
            d1 = t1 * sig
            d2 = t1 * sig * (1.0 - sig) / t3
            mu = N / lat
            mp = (lat - N * d1) / lat**2
            if kind is CostKind.LATENCY:
                f, fp = lat, d1
            elif kind is CostKind.GRADIENT:
                m2 = -N * d2 / lat**2 - 2.0 * (lat - N * d1) * d1 / lat**3
                f, fp = 1.0 / mp, -m2 / mp**2
            else:
                f, fp = N / k, np.ones_like(N) / k
            return f, fp, mu, mp
        return (np.asarray(cell_cost(kind, model, N, k), dtype=float),
                np.asarray(cell_cost_prime(kind, model, N, k), dtype=float),
                np.asarray(model.rate(N), dtype=float),
                np.asarray(model.rate_prime(N), dtype=float))

    def cost_rate(self, N: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(f(N), μ(N)) per cell."""
        f, _, mu, _ = self.values(N)
        return f, mu

    # ------------------------------------------------------------------ inverse cost
    def inverse_cost(self, y: np.ndarray) -> np.ndarray:
        """N = f⁻¹(y) (requests) per cell where a closed form exists, NaN elsewhere (the caller
        inverts those numerically); y above f(0) is assumed (else the root is N = 0)."""
        y = np.asarray(y, dtype=float)
        out = np.full(self.n, np.nan)
        if self.generic:
            return out
        kind = self.cost
        with np.errstate(all="ignore"):
            if kind is CostKind.RIF:
                return y * self.k
            for model, idx in self.groups:
                yy = y[idx]
                if isinstance(model, MM1Latency):
                    cap, K = model.capacity, model.K
                    out[idx] = yy * cap - K if kind is CostKind.LATENCY else \
                        np.sqrt(yy * cap * K) - K
                elif isinstance(model, ExpSaturation) and kind is CostKind.GRADIENT:
                    out[idx] = model.K * np.log(yy * model.capacity / model.K)
                elif isinstance(model, SoftplusLatency) and kind is CostKind.LATENCY:
                    v = (yy - model.base_latency) / (model.slope * model.softness)
                    # softplus⁻¹(v) = log(expm1(v)) = v + log(−expm1(−v)), stable for all v > 0
                    out[idx] = model.knee + model.softness * (v + np.log(-np.expm1(-v)))
        return out
