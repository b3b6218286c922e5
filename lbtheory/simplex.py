"""Euclidean projection onto each source's simplex Δ_i (THEORY §1, §3), exact and sort-free.

``Δ_i = {z ≥ 0 : Σ_j z_j = 1, z_j = 0 for j ∉ C⁺(i)}``: the admissible arcs of source i are given by
a boolean ``mask`` row (a missing arc is a data-residency constraint). One algorithm — Michelot's
(1986) finite active-set iteration — serves numpy callers (routers, event simulator), the compiled
cell simulator and JAX callers (the fluid model). It is written twice, once per engine: the numba
kernel :func:`_michelot_kernel` (one row; the numpy functions run it row by row through
:func:`project_rows_kernel` / :func:`tangent_rows_kernel`, the compiled simulator through
:func:`flow_update_row_kernel`), and the threshold step :func:`_michelot_step` written against the
array namespace and driven by ``lax.while_loop`` (JAX, which cannot call numba). A test pins the
kernel bit for bit to the step iteration (same operations, sums in numpy's pairwise order).

Michelot: start with S = admissible arcs; repeat ``ν = (Σ_{j∈S} v_j − 1)/|S|``,
``S ← {j ∈ S : v_j > ν}`` until S stops shrinking; then ``Π(v)_j = (v_j − ν)_+`` on S. ν is
nondecreasing, S shrinks monotonically (at most |S| rounds, usually 2–4), and the result is exact —
no sort (XLA's CPU sort made a sort-based projection ≈7× slower than numpy, issue 4's probe).

The JAX projection has a custom JVP (on the final support S: ``dx = dv − mean_S(dv)`` on S, 0
elsewhere), so it is forward- and reverse-differentiable although its primal uses a while loop.

:func:`project_tangent_cone` gives Π_{T_Δ(x)}(v), the direction of the continuous-time flow dynamics
(9) [R]: with P = {x_j > 0}, Z = admissible arcs with x_j = 0, the same active-set iteration finds ν
with Σ_P (v_j − ν) + Σ_Z (v_j − ν)_+ = 0.

The two routing rules of THEORY §3 are defined here once, for the fluid integrator and the DLB
routers alike: :func:`flow_update` (the router update (2), ``x ← Π_Δ(x − step·ĉ)``) and
:func:`simplex_argmin` (the discrete choice (1)). Their compiled forms for one row
(:func:`flow_update_row_kernel`, :func:`project_row_kernel`, :func:`argmin_row_kernel`: numba,
called by the compiled cell simulator) sit at the end of this module; a test pins them bit for
bit to the numpy rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from ._array import is_concrete, is_jax, xp
from .errors import StepsizeError

__all__ = ["project_simplex", "project_tangent_cone", "simplex_argmin", "flow_update",
           "project_row_kernel", "flow_update_row_kernel", "argmin_row_kernel",
           "masked_sum_kernel"]

#: Relative tolerance under which two costs count as tied in :func:`simplex_argmin`.
TIE_RTOL = 1e-12


def _full_mask(m: Any, v: Any, mask: Any) -> Any:
    if mask is None:
        return m.ones(v.shape, dtype=bool)
    if m is np and isinstance(mask, np.ndarray) and mask.dtype == bool and mask.shape == v.shape:
        return mask  # already full (the routers' case): skip broadcast_to's overhead
    return m.broadcast_to(m.asarray(mask, dtype=bool), v.shape)


def _michelot_step(m: Any, v: Any, S: Any, target: Any) -> tuple[Any, Any]:
    """One active-set round: ν = (Σ_S v − target)/|S| per row; keep S ∩ {v > ν}."""
    cnt = m.maximum(S.sum(axis=-1, keepdims=True), 1)
    nu = (m.where(S, v, 0.0).sum(axis=-1, keepdims=True) - target) / cnt
    return nu, S & (v > nu)


def _rows(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` as a C-contiguous, writeable matrix of rows of length n (a view when it already is
    one; :func:`masked_sum_kernel`'s signature takes writeable rows)."""
    if not (a.flags.c_contiguous and a.flags.writeable):
        a = a.copy()
    return a.reshape(-1, n)


def _project_numpy(v: np.ndarray, mask: np.ndarray, hint: Any) -> np.ndarray:
    """The numpy projection (``mask`` boolean like ``v``; ``hint``: None or a support guess
    broadcastable to ``v``) by the compiled row kernel, without the dispatch layers: the hot
    path of the routers' probe rounds (small rows, thousands of calls per simulated minute)."""
    if v.size == 0:
        return np.zeros(v.shape)
    n = v.shape[-1]
    V, M = _rows(v, n), _rows(mask, n)
    H = M if hint is None else _rows(np.broadcast_to(np.asarray(hint, dtype=bool), v.shape), n)
    out = np.empty(V.shape)
    project_rows_kernel(V, M, H, hint is not None, out)
    return out.reshape(v.shape)


def _michelot_jax(v: Any, S: Any, keep: Any, target: float) -> tuple:
    """Drive :func:`_michelot_step` to its fixed point with ``lax.while_loop`` (JAX)."""
    import jax
    import jax.numpy as jnp

    def body(state):
        S, _ = state
        _, S_new = _michelot_step(jnp, v, S, target)
        S_new = S_new | keep
        return S_new, jnp.any(S_new != S)

    S, _ = jax.lax.while_loop(lambda s: s[1], body, (S, jnp.asarray(True)))
    nu, _ = _michelot_step(jnp, v, S, target)
    return nu, S


def _warm_start(m: Any, v: Any, mask: Any, hint: Any) -> Any:
    """Initial active set from a guessed support P (e.g. the previous routing's support).

    ν_P = (Σ_P v − 1)/|P| satisfies Σ_j (v_j − ν_P)_+ ≥ Σ_P (v_j − ν_P) = 1, so ν_P ≤ ν* and
    {v > ν_P} contains the final support: Michelot (= Newton on Σ(v − ν)_+ = 1 from the left)
    may start there. Rows with an empty guess start from the whole mask.
    """
    if hint is None:
        return mask
    P = mask & m.asarray(hint, dtype=bool)
    nu, _ = _michelot_step(m, v, P, 1.0)
    empty = ~P.any(axis=-1, keepdims=True)
    return mask & ((v > nu) | empty)


def _project_jax_impl(v: Any, mask: Any, hint: Any) -> Any:
    import jax.numpy as jnp

    S0 = _warm_start(jnp, v, mask, hint)
    nu, S = _michelot_jax(v, S0, jnp.zeros_like(mask), 1.0)
    return jnp.where(S, v - nu, 0.0)


def _make_project_jax():
    import jax
    import jax.numpy as jnp

    @jax.custom_jvp
    def project(v, mask, hint):
        return _project_jax_impl(v, mask, hint)

    @project.defjvp
    def _jvp(primals, tangents):
        v, mask, hint = primals
        dv = tangents[0]
        x = project(v, mask, hint)
        S = x > 0
        cnt = jnp.maximum(S.sum(axis=-1, keepdims=True), 1)
        mean = jnp.where(S, dv, 0.0).sum(axis=-1, keepdims=True) / cnt
        return x, jnp.where(S, dv - mean, 0.0)

    return project


_PROJECT_JAX = None


def project_simplex(v: Any, mask: Any = None, *, hint: Any = None) -> Any:
    """Euclidean projection of each row of ``v`` onto its (masked) probability simplex.

    Args:
        v: array (..., n); the last axis is projected (e.g. one routing row per source).
        mask: boolean (..., n), True on admissible arcs (default: all). A row with no admissible
            entry projects to all zeros (a source with no outgoing arc).
        hint: optional guess of the support (boolean, e.g. ``x_prev > 0``); any guess gives the
            exact result (see :func:`_warm_start`), a good one saves Michelot rounds.

    Returns:
        Array like ``v``: non-negative, zero off the mask, rows with an admissible entry sum to 1.
        numpy in → numpy out; JAX in → JAX out (differentiable, ``vmap``-able).

    Example:
        >>> project_simplex(np.array([0.6, 0.6, -1.0])).tolist()
        [0.5, 0.5, 0.0]
    """
    global _PROJECT_JAX
    if is_jax(v, mask, hint):
        import jax.numpy as jnp

        if _PROJECT_JAX is None:
            _PROJECT_JAX = _make_project_jax()
        v = jnp.asarray(v)
        M = _full_mask(jnp, v, mask)
        H = M if hint is None else jnp.broadcast_to(jnp.asarray(hint, dtype=bool), v.shape)
        return _PROJECT_JAX(v, M, H)
    v = np.asarray(v, dtype=float)
    return _project_numpy(v, _full_mask(np, v, mask), hint)


def project_tangent_cone(x: Any, v: Any, mask: Any = None, *, atol: float = 0.0) -> Any:
    """Π_{T_Δ(x)}(v): projection of ``v`` onto the tangent cone of the simplex at ``x`` (THEORY 9).

    ``T_Δ(x) = {d : Σ_j d_j = 0, d_j ≥ 0 where x_j = 0, d_j = 0 off the mask}``. The flow-routing
    ODE (9) is ``dx_i/dt = Π_{T(x_i)}(−η_i ĉ_i)``, the limit of the router update (2) as the
    tick → 0 [R]. Entries with ``x_j ≤ atol`` count as on the boundary.

    Args:
        x: points of the simplex (..., n).
        v: directions (..., n).
        mask: admissible arcs (default: all).
    """
    m = xp(x, v, mask)
    v = m.asarray(v, dtype=float)
    M = _full_mask(m, v, mask)
    P = M & (m.asarray(x) > atol)
    if m is np:
        if v.size == 0:
            return np.zeros(v.shape)
        n = v.shape[-1]
        out = np.empty(v.shape)
        tangent_rows_kernel(_rows(v, n), _rows(M, n), _rows(P, n), out.reshape(-1, n))
        return out
    nu, S = _michelot_jax(v, M, P, 0.0)
    return m.where(S, v - nu, 0.0)


def simplex_argmin(c: Any, mask: Any = None, *, rtol: float = TIE_RTOL) -> Any:
    """The discrete-routing rule (1): all mass on the cheapest admissible arcs, ties split evenly.

    Costs within ``rtol·max(1, |min|)`` of the row minimum count as tied (THEORY §3 (1); DLB does
    not say how ties are broken — §13.6 — so an even split is our choice [R]).

    Args:
        c: costs (..., n).
        mask: admissible arcs (default: all); rows with none give zeros.
    """
    m = xp(c, mask)
    c = m.asarray(c, dtype=float)
    M = _full_mask(m, c, mask)
    cmin = m.where(M, c, m.inf).min(axis=-1, keepdims=True)
    tie = M & (c <= cmin + rtol * m.maximum(1.0, m.abs(cmin)))
    cnt = m.maximum(tie.sum(axis=-1, keepdims=True), 1)
    return m.where(tie, 1.0, 0.0) / cnt


def flow_update(x: Any, cost: Any, step: Any, mask: Any = None, *, hint: Any = None) -> Any:
    """The flow-routing update (2) of THEORY §3: ``x_i ← Π_{Δ_i}(x_i − step_i · ĉ_i)``.

    The one definition of the DLB router step, used by the fluid integrator (with
    ``step = η·dt`` and the trapezoidal cost) and by the routers (``step = η·δ``, tick δ).

    Args:
        x: current routing (..., n), rows on their simplices (e.g. one row per source).
        cost: observed costs ĉ (..., n), cost units (s for latency/gradient, 1 for RIF).
        step: η·δ, 1/(cost unit): a scalar, one value per row (shape ``x.shape[:-1]``) or an
            array broadcastable to ``x``; must be finite and ≥ 0.
        mask: admissible arcs (default: all); the result is zero off the mask.
        hint: support guess for the projection (default: ``x > 0``, exact for any guess).

    Returns:
        The updated routing, like ``x`` (numpy in → numpy out; JAX in → JAX out, differentiable).

    Raises:
        StepsizeError: a concrete ``step`` that is negative, non-finite or of a wrong shape.

    Example:
        >>> flow_update(np.array([0.5, 0.5]), np.array([1.0, 0.0]), 0.25).tolist()
        [0.375, 0.625]
    """
    args = (x, cost, step, mask, hint)
    # plain numpy arguments (the routers' hot path) skip the namespace dispatch's isinstance
    # checks against JAX types
    m = np if all(type(a) is np.ndarray or a is None for a in args) else xp(*args)
    x = m.asarray(x, dtype=float)
    step = m.asarray(step, dtype=x.dtype)
    if m is np or is_concrete(step):
        if not (np.isfinite(step).all() and (step >= 0).all()):
            raise StepsizeError(f"step: expected finite values ≥ 0 (η·δ, 1/cost unit), got "
                                f"{np.asarray(step).tolist()}")
    if step.ndim and step.shape == x.shape[:-1]:
        step = step[..., None]
    try:
        v = x - step * m.asarray(cost, dtype=x.dtype)
    except (TypeError, ValueError):
        raise StepsizeError(f"step: expected a scalar, one value per row {x.shape[:-1]} or an "
                            f"array broadcastable to {x.shape}, got shape {step.shape}") from None
    if v.shape != x.shape:
        raise StepsizeError(f"step/cost: expected shapes broadcastable to x {x.shape}, got step "
                            f"{step.shape} and cost {m.asarray(cost).shape}")
    hint = x > 0 if hint is None else hint
    if m is np:  # the routers' hot path: skip project_simplex's dispatch
        return _project_numpy(v, _full_mask(np, v, mask), hint)
    return project_simplex(v, mask, hint=hint)


# -- compiled kernels (numba): the projection of the numpy functions above and of the compiled
# cell simulator, and the simulator's flow step and argmin. One row at a time, no allocation in
# the row kernels; a test pins each bit for bit to the numpy/JAX rule (same operations in the
# same order, sums in numpy's pairwise order).

@njit(cache=True, inline="always", error_model="numpy")
def _masked(v: np.ndarray, S: np.ndarray, i: int) -> float:
    return v[i] if S[i] else 0.0


@njit(cache=True, error_model="numpy")
def _masked_block(v: np.ndarray, S: np.ndarray, lo: int, n: int) -> float:
    """numpy's pairwise sum of a block of n ≤ 128 entries: sequential below 8, else 8-way
    unrolled partial sums combined as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), then the tail."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += _masked(v, S, i)
        return res
    r0, r1, r2, r3 = _masked(v, S, lo), _masked(v, S, lo + 1), _masked(v, S, lo + 2), \
        _masked(v, S, lo + 3)
    r4, r5, r6, r7 = _masked(v, S, lo + 4), _masked(v, S, lo + 5), _masked(v, S, lo + 6), \
        _masked(v, S, lo + 7)
    i = lo + 8
    stop = lo + n - n % 8
    while i < stop:
        r0 += _masked(v, S, i)
        r1 += _masked(v, S, i + 1)
        r2 += _masked(v, S, i + 2)
        r3 += _masked(v, S, i + 3)
        r4 += _masked(v, S, i + 4)
        r5 += _masked(v, S, i + 5)
        r6 += _masked(v, S, i + 6)
        r7 += _masked(v, S, i + 7)
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < lo + n:
        res += _masked(v, S, i)
        i += 1
    return res


@njit("float64(float64[::1], boolean[::1], int64, int64)", cache=True, error_model="numpy")
def masked_sum_kernel(v: np.ndarray, S: np.ndarray, lo: int, n: int) -> float:
    """Σ_{j∈[lo, lo+n)} (v_j if S_j else 0) in numpy's order (``np.where(S, v, 0).sum()``):
    blocks of ≤ 128 (:func:`_masked_block`); a larger range is split at n/2 rounded down to a
    multiple of 8 and the halves added — numpy's recursion (numba recurses only with a declared
    signature, so this one compiles when the module is imported: C-contiguous rows)."""
    if n <= 128:
        return _masked_block(v, S, lo, n)
    n2 = n // 2
    n2 -= n2 % 8
    return masked_sum_kernel(v, S, lo, n2) + masked_sum_kernel(v, S, lo + n2, n - n2)


@njit(cache=True, error_model="numpy")
def _michelot_kernel(v: np.ndarray, S: np.ndarray, keep: np.ndarray, use_keep: bool,
                     target: float) -> float:
    """Michelot's iteration on one row from the active set ``S`` (boolean, updated in place)
    to its fixed point: ν = (Σ_S v − target)/max(|S|, 1), S ← S ∩ {v > ν} (entries with
    ``keep``, when ``use_keep``, never leave S). Returns the final ν. The one definition of the
    iteration for numpy and compiled callers (JAX runs :func:`_michelot_step`; a test pins the
    two to the same bits)."""
    n = v.shape[0]
    while True:
        cnt = 0
        for j in range(n):
            cnt += S[j]
        nu = (masked_sum_kernel(v, S, 0, n) - target) / max(cnt, 1)
        changed = False
        for j in range(n):
            if S[j] and not v[j] > nu and not (use_keep and keep[j]):
                S[j] = False
                changed = True
        if not changed:
            return nu


@njit(cache=True, error_model="numpy")
def _project_row(v: np.ndarray, mask: np.ndarray, hint: np.ndarray, use_hint: bool,
                 out: np.ndarray, S: np.ndarray) -> None:
    """Projection of one row: the warm start of :func:`_warm_start` from ``hint`` (when
    ``use_hint``; else the mask), then :func:`_michelot_kernel`; ``S``: boolean scratch."""
    n = v.shape[0]
    cnt = 0
    if use_hint:
        for j in range(n):
            S[j] = mask[j] and hint[j]
            cnt += S[j]
    if cnt > 0:
        nu = (masked_sum_kernel(v, S, 0, n) - 1.0) / cnt
        for j in range(n):
            S[j] = mask[j] and v[j] > nu
    else:
        for j in range(n):
            S[j] = mask[j]
    nu = _michelot_kernel(v, S, S, False, 1.0)
    for j in range(n):
        out[j] = v[j] - nu if S[j] else 0.0


@njit(cache=True, error_model="numpy")
def project_row_kernel(v: np.ndarray, mask: np.ndarray, hint: np.ndarray, out: np.ndarray,
                       S: np.ndarray) -> None:
    """:func:`project_simplex` of one row with support guess ``hint`` (the warm start of
    :func:`_warm_start`, then Michelot), written into ``out``; ``S`` is boolean scratch (n,)."""
    _project_row(v, mask, hint, True, out, S)


@njit(cache=True, error_model="numpy")
def project_rows_kernel(V: np.ndarray, M: np.ndarray, H: np.ndarray, use_hint: bool,
                        out: np.ndarray) -> None:
    """:func:`project_simplex` of every row of the C-contiguous matrix ``V`` (masks ``M``,
    support guesses ``H`` when ``use_hint``) into ``out``."""
    S = np.empty(V.shape[1], dtype=np.bool_)
    for i in range(V.shape[0]):
        _project_row(V[i], M[i], H[i], use_hint, out[i], S)


@njit(cache=True, error_model="numpy")
def tangent_rows_kernel(V: np.ndarray, M: np.ndarray, P: np.ndarray, out: np.ndarray) -> None:
    """:func:`project_tangent_cone` of every row of ``V`` (masks ``M``, positive parts ``P``,
    C-contiguous) into ``out``: Michelot from the mask with target 0, ``P`` kept."""
    S = np.empty(V.shape[1], dtype=np.bool_)
    for i in range(V.shape[0]):
        S[:] = M[i]
        nu = _michelot_kernel(V[i], S, P[i], True, 0.0)
        for j in range(V.shape[1]):
            out[i, j] = V[i, j] - nu if S[j] else 0.0


@njit(cache=True, error_model="numpy")
def flow_update_row_kernel(x: np.ndarray, cost: np.ndarray, step: float, mask: np.ndarray,
                           out: np.ndarray, v: np.ndarray, hint: np.ndarray,
                           S: np.ndarray) -> None:
    """:func:`flow_update` of one row (cost taken as 0 off the mask, hint ``x > 0``) into
    ``out``; ``v`` (float), ``hint`` and ``S`` (boolean) are scratch rows."""
    for j in range(x.shape[0]):
        v[j] = x[j] - step * (cost[j] if mask[j] else 0.0)
        hint[j] = x[j] > 0
    project_row_kernel(v, mask, hint, out, S)


@njit(cache=True, error_model="numpy")
def argmin_row_kernel(c: np.ndarray, mask: np.ndarray, rtol: float, out: np.ndarray) -> None:
    """:func:`simplex_argmin` of one row into ``out`` (ties within ``rtol`` split evenly)."""
    n = c.shape[0]
    cmin = np.inf
    for j in range(n):
        if mask[j] and c[j] < cmin:
            cmin = c[j]
    bound = cmin + rtol * max(1.0, abs(cmin))
    cnt = 0
    for j in range(n):
        cnt += mask[j] and c[j] <= bound
    cnt = max(cnt, 1)
    for j in range(n):
        out[j] = (1.0 if mask[j] and c[j] <= bound else 0.0) / cnt
