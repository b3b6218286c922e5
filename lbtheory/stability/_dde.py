"""Rightmost characteristic roots of a linear delay-differential equation (THEORY §7.6).

The equation is ``y'(t) = A_0 y(t) + Σ_m A_m y(t − τ_m)`` with fixed delays ``τ_m > 0`` (s). Its
characteristic function is ``Δ(s) = sI − A_0 − Σ_m A_m e^{−sτ_m}``; the equation is asymptotically
stable iff every root of ``det Δ(s) = 0`` has negative real part.

Roots are located by pseudospectral (Chebyshev) collocation of the infinitesimal generator on
``[−τ_max, 0]`` (Breda, Maset & Vermiglio, SIAM J. Sci. Comput. 27 (2005) 482–495) and refined by
Newton's method on ``det Δ`` (step ``1 / tr(Δ(s)⁻¹ Δ'(s))``), which recovers full double precision
from a coarse discretisation.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._checks import check_int, check_memory
from ..errors import SolverError, SolveStatus, renamed_keywords

__all__ = ["LinearDDE", "RootSet", "chebyshev_nodes", "collocation_matrix", "rightmost_roots",
           "newton_root"]

#: Delays closer than this (relative) are merged into one delay.
DELAY_MERGE_RTOL = 1e-12


@dataclasses.dataclass(frozen=True)
class LinearDDE:
    """``y' = A_0 y + Σ_m A_m y(t − τ_m)``.

    Attributes:
        a0: d×d matrix of the undelayed terms (1/s).
        delays: (M,) strictly positive, distinct delays τ_m (s).
        mats: (M, d, d) matrices A_m (1/s).
    """

    a0: np.ndarray
    delays: np.ndarray
    mats: np.ndarray

    @classmethod
    def from_terms(cls, dim: int, terms: list[tuple[float, np.ndarray]]) -> LinearDDE:
        """Build from ``(τ, A)`` terms; equal delays are summed, τ = 0 goes into ``a0``."""
        a0 = np.zeros((dim, dim))
        groups: list[list] = []
        for tau, mat in terms:
            if tau <= 0.0:
                a0 = a0 + mat
                continue
            for g in groups:
                if abs(g[0] - tau) <= DELAY_MERGE_RTOL * max(g[0], tau):
                    g[1] = g[1] + mat
                    break
            else:
                groups.append([float(tau), np.array(mat, dtype=float)])
        groups.sort(key=lambda g: g[0])
        delays = np.array([g[0] for g in groups], dtype=float)
        mats = np.array([g[1] for g in groups], dtype=float).reshape(len(groups), dim, dim)
        return cls(a0=a0, delays=delays, mats=mats)

    @property
    def dim(self) -> int:
        """Dimension d of the state."""
        return self.a0.shape[0]

    @property
    def max_delay(self) -> float:
        """τ_max (s), 0 for an ODE."""
        return float(self.delays.max()) if self.delays.size else 0.0

    def characteristic_matrix(self, s: complex) -> np.ndarray:
        """Δ(s) = sI − A_0 − Σ_m A_m e^{−sτ_m}."""
        e = np.exp(-s * self.delays)
        return s * np.eye(self.dim) - self.a0 - np.tensordot(e, self.mats, axes=1)

    def characteristic_derivative(self, s: complex) -> np.ndarray:
        """Δ'(s) = I + Σ_m τ_m A_m e^{−sτ_m}."""
        e = self.delays * np.exp(-s * self.delays)
        return np.eye(self.dim) + np.tensordot(e, self.mats, axes=1)


@dataclasses.dataclass(frozen=True)
class RootSet:
    """Rightmost roots of a linear DDE, sorted by decreasing real part.

    Attributes:
        roots: refined roots (1/s), complex; conjugate pairs both listed.
        residuals: smallest singular value of Δ(s) at each root, relative to
            |s| + ‖A_0‖ + Σ‖A_m‖e^{−Re s τ_m}.
        n_nodes: collocation nodes used.
        structural_zeros: number of exact zero roots removed (see :func:`rightmost_roots`).
    """

    roots: np.ndarray
    residuals: np.ndarray
    n_nodes: int
    structural_zeros: int

    @property
    def abscissa(self) -> float:
        """Spectral abscissa max Re s (1/s); −inf if there are no roots."""
        return float(self.roots.real.max()) if self.roots.size else -math.inf

    @property
    def rightmost(self) -> complex:
        """The rightmost root (of a conjugate pair, the one with Im ≥ 0)."""
        if not self.roots.size:
            return complex(-math.inf, 0.0)
        r = self.roots[0]
        return complex(r.real, abs(r.imag))


def chebyshev_nodes(n: int, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """Chebyshev extremal nodes θ_k on [−τ, 0] (θ_0 = 0) and their differentiation matrix.

    Args:
        n: polynomial degree (n + 1 nodes).
        tau: interval length τ_max (s).

    Returns:
        (theta, D) with D the (n+1)×(n+1) matrix mapping node values to derivative values (1/s).
    """
    k = np.arange(n + 1)
    t = np.cos(np.pi * k / n)
    c = np.where((k == 0) | (k == n), 2.0, 1.0) * (-1.0) ** k
    dt = t[:, None] - t[None, :]
    D = (c[:, None] / c[None, :]) / (dt + np.eye(n + 1))
    D = D - np.diag(D.sum(axis=1))
    return 0.5 * tau * (t - 1.0), D * (2.0 / tau)


def _lagrange_row(theta: np.ndarray, x: float) -> np.ndarray:
    """Values at ``x`` of the Lagrange basis on Chebyshev extremal nodes (barycentric form)."""
    n = theta.size - 1
    w = (-1.0) ** np.arange(n + 1)
    w[0] *= 0.5
    w[-1] *= 0.5
    diff = x - theta
    hit = np.flatnonzero(np.abs(diff) <= 1e-14 * max(1.0, abs(x)))
    if hit.size:
        row = np.zeros(n + 1)
        row[hit[0]] = 1.0
        return row
    q = w / diff
    return q / q.sum()


def collocation_matrix(dde: LinearDDE, n_nodes: int) -> np.ndarray:
    """Pseudospectral discretisation of the DDE's infinitesimal generator.

    Block row 0 is the DDE evaluated on the interpolant; block rows 1..n are the derivative of the
    interpolant at the other nodes. Size d(n+1) × d(n+1).
    """
    d, tau = dde.dim, dde.max_delay
    theta, D = chebyshev_nodes(n_nodes, tau)
    big = np.kron(D, np.eye(d))
    row0 = np.zeros((d, d * (n_nodes + 1)))
    row0[:, :d] += dde.a0
    for tau_m, A in zip(dde.delays, dde.mats):
        ell = _lagrange_row(theta, -tau_m)
        row0 += np.kron(ell[None, :], A)
    big[:d] = row0
    return big


@renamed_keywords(max_iter="max_iterations")
def newton_root(dde: LinearDDE, s0: complex, *, tol: float = 1e-13,
                max_iterations: int = 60) -> tuple[complex, bool]:
    """Refine a root of det Δ(s) by Newton's method, ``s ← s − 1/tr(Δ⁻¹Δ')``.

    Returns:
        (root, converged). If Δ(s) is exactly singular (LU breaks down) the iterate is a root
        to working precision and is returned with ``converged=True``. ``converged`` is False
        when tr(Δ⁻¹Δ') is zero or not finite (no Newton step exists; the last iterate is
        returned) or the step did not fall below ``tol``·max(1, |s|) within ``max_iterations``
        steps (``max_iter=`` is its deprecated name).
    """
    s = complex(s0)
    for _ in range(max_iterations):
        M = dde.characteristic_matrix(s)
        try:
            trace = np.trace(np.linalg.solve(M, dde.characteristic_derivative(s)))
        except np.linalg.LinAlgError:
            return s, True
        if trace == 0 or not np.isfinite(trace):
            return s, False
        step = 1.0 / trace
        s -= step
        if abs(step) <= tol * max(1.0, abs(s)):
            return s, True
    return s, False


def _relative_residual(dde: LinearDDE, s: complex) -> float:
    M = dde.characteristic_matrix(s)
    sv = np.linalg.svd(M, compute_uv=False)
    scale = abs(s) + np.linalg.norm(dde.a0, 2) + sum(
        np.linalg.norm(A, 2) * math.exp(-s.real * t) for t, A in zip(dde.delays, dde.mats))
    return float(sv[-1] / max(scale, 1e-300))


def structural_zero_count(dde: LinearDDE, *, rtol: float = 1e-10) -> int:
    """Nullity of Δ(0) = −(A_0 + Σ A_m): the number of constant (equilibrium-family) modes."""
    M = dde.characteristic_matrix(0.0).real
    if M.size == 0:
        return 0
    sv = np.linalg.svd(M, compute_uv=False)
    return int(np.sum(sv <= rtol * max(sv[0], 1e-300)))


def rightmost_roots(dde: LinearDDE, *, n_nodes: int = 16, count: int = 6, refine: bool = True,
                    structural_zeros: int | None = None) -> RootSet:
    """Rightmost roots of the characteristic equation.

    Args:
        dde: the linear DDE.
        n_nodes: Chebyshev polynomial degree of the collocation (n + 1 nodes).
        count: number of rightmost roots returned (after removing structural zeros).
        refine: refine each root by Newton's method on det Δ.
        structural_zeros: number of exact zero roots to remove (the nullity of Δ(0) when None).
            These come from families of equilibria; the collocation reproduces them exactly
            (constants are interpolated exactly), so the ``k`` eigenvalues of smallest modulus are
            removed — callers should eliminate known zero modes by reduced coordinates first.

    Raises:
        ParameterError: ``n_nodes`` is not an integer ≥ 2.
        SolverError: the eigenvalue computation failed (names LAPACK's message).
    """
    n_nodes = check_int(n_nodes, "n_nodes", low=2, unit="Chebyshev degree", integral_float=True)
    if dde.dim == 0:
        return RootSet(np.zeros(0, complex), np.zeros(0), n_nodes, 0)
    size = dde.dim * (n_nodes + 1)  # the collocation matrix is size × size (and LAPACK's copy)
    check_memory(2.0 * 8.0 * size * size, f"a collocation of degree {n_nodes} ({size} × {size} "
                                          f"matrix)")
    k0 = structural_zero_count(dde) if structural_zeros is None else int(structural_zeros)
    mat = dde.a0 if dde.max_delay == 0.0 else collocation_matrix(dde, n_nodes)
    try:
        ev = np.linalg.eigvals(mat)
    except np.linalg.LinAlgError as exc:  # pragma: no cover - LAPACK failure
        raise SolverError(f"collocation eigenvalues failed: {exc}", solver="LAPACK",
                          status=SolveStatus.FAILED, detail=str(exc)) from exc
    if k0:
        ev = np.delete(ev, np.argsort(np.abs(ev))[:k0])
    ev = ev[np.argsort(-ev.real)]
    keep = ev[: max(count * 2, count + 4)]
    if refine and dde.max_delay > 0.0:
        refined = []
        for s0 in keep:
            s, ok = newton_root(dde, s0)
            # accept the Newton root unless it wandered off to another root far away
            refined.append(s if ok and abs(s - s0) <= 0.1 * max(1.0, abs(s0)) else s0)
        keep = np.array(refined, dtype=complex)
    keep = keep[np.argsort(-keep.real, kind="stable")]
    keep = _dedupe(keep)[:count]
    res = np.array([_relative_residual(dde, s) for s in keep])
    return RootSet(roots=keep, residuals=res, n_nodes=n_nodes, structural_zeros=k0)


def _dedupe(roots: np.ndarray) -> np.ndarray:
    out: list[complex] = []
    for r in roots:
        if all(abs(r - o) > 1e-9 * max(1.0, abs(r)) for o in out):
            out.append(complex(r))
    return np.array(out, dtype=complex)
