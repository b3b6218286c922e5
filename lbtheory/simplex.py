"""Euclidean projection onto each source's simplex Δ_i (THEORY §1, §3), exact and sort-free.

``Δ_i = {z ≥ 0 : Σ_j z_j = 1, z_j = 0 for j ∉ C⁺(i)}``: the admissible arcs of source i are given by
a boolean ``mask`` row (a missing arc is a data-residency constraint). One algorithm — Michelot's
(1986) finite active-set iteration — serves numpy callers (routers, event simulator) and JAX callers
(the fluid model): the threshold step :func:`_michelot_step` is written once against the array
namespace and driven by a Python loop (numpy) or ``lax.while_loop`` (JAX). Rows of at most
:data:`SMALL_ROW` entries (a router's probe round on a few cells) run the same iteration on
Python floats (:func:`_michelot_row`), where numpy's per-call cost would dominate; a test pins
it bit for bit to the numpy driver.

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
:func:`simplex_argmin` (the discrete choice (1)).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._array import is_concrete, is_jax, xp
from .errors import StepsizeError

__all__ = ["project_simplex", "project_tangent_cone", "simplex_argmin", "flow_update"]

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


def _michelot_numpy(v: np.ndarray, S: np.ndarray, keep: np.ndarray | None,
                    target: float) -> tuple:
    """Drive :func:`_michelot_step` to its fixed point (numpy). ``keep`` entries never leave S
    (None: no such entries)."""
    while True:
        nu, S_new = _michelot_step(np, v, S, target)
        if keep is not None:
            S_new |= keep
        if (S_new == S).all():
            return nu, S
        S = S_new


def _project_numpy(v: np.ndarray, mask: np.ndarray, hint: Any) -> np.ndarray:
    """The numpy projection (warm start, then Michelot) without the dispatch layers: the hot
    path of the routers' probe rounds (small rows, thousands of calls per simulated minute).
    Rows of at most :data:`SMALL_ROW` entries go through :func:`_project_rows`."""
    if v.ndim in (1, 2) and 0 < v.shape[-1] <= SMALL_ROW:
        v2 = v.reshape(-1, v.shape[-1])
        h2 = None if hint is None else \
            np.broadcast_to(np.asarray(hint, dtype=bool), v.shape).reshape(v2.shape)
        return _project_rows(v2, mask.reshape(v2.shape), h2).reshape(v.shape)
    nu, S = _michelot_numpy(v, _warm_start(np, v, mask, hint), None, 1.0)
    return np.where(S, v - nu, 0.0)


#: rows with at most this many entries are projected by :func:`_project_rows` (plain Python):
#: numpy's fixed cost per call dominates tiny rows (a router's probe round on a few cells), and
#: below 8 entries numpy sums in index order, so the result is bit-identical to the numpy path.
SMALL_ROW = 7


def _michelot_row(v: list[float], S: list[bool], target: float) -> tuple[float, list[bool]]:
    """:func:`_michelot_step` iterated to its fixed point on one row, in plain Python (the same
    ν = (Σ_S v − target)/max(|S|, 1) and S ← S ∩ {v > ν}, summed in index order)."""
    while True:
        total, cnt = 0.0, 0
        for vj, sj in zip(v, S):
            if sj:
                total += vj
                cnt += 1
        nu = (total - target) / max(cnt, 1)
        S_new = [sj and vj > nu for vj, sj in zip(v, S)]
        if S_new == S:
            return nu, S
        S = S_new


def _project_rows(v: np.ndarray, mask: np.ndarray, hint: np.ndarray | None) -> np.ndarray:
    """:func:`_project_numpy` for a matrix of short rows (``mask``, ``hint``: boolean, same
    shape), row by row in plain Python: warm start from the hinted support P (ν_P from one step
    on P; an empty P starts from the mask, see :func:`_warm_start`), then Michelot."""
    out = []
    H = None if hint is None else hint.tolist()
    for i, (row, m) in enumerate(zip(v.tolist(), mask.tolist())):
        S = m
        if H is not None:
            P = [a and b for a, b in zip(m, H[i])]
            if any(P):
                total, cnt = 0.0, 0
                for vj, pj in zip(row, P):
                    if pj:
                        total += vj
                        cnt += 1
                nu_p = (total - 1.0) / cnt
                S = [a and vj > nu_p for a, vj in zip(m, row)]
        nu, S = _michelot_row(row, S, 1.0)
        out.append([vj - nu if sj else 0.0 for vj, sj in zip(row, S)])
    return np.array(out, dtype=float).reshape(v.shape)


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
        nu, S = _michelot_numpy(v, M, P, 0.0)
    else:
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
