"""Exact simplex projection (Michelot), tangent-cone projection and the argmin rule."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from lbtheory.errors import StepsizeError
from lbtheory.simplex import flow_update, project_simplex, project_tangent_cone, simplex_argmin


def _sort_projection(v: np.ndarray) -> np.ndarray:
    """Independent oracle: the sort-based projection (Held–Wolfe–Crowder / Duchi et al.)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    rho = np.nonzero(u - css / np.arange(1, len(v) + 1) > 0)[0][-1]
    return np.maximum(v - css[rho] / (rho + 1), 0.0)


rows = st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=9)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(rows, st.data())
def test_matches_sort_oracle_with_mask(v, data):
    v = np.array(v)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=len(v), max_size=len(v))))
    mask[data.draw(st.integers(0, len(v) - 1))] = True
    expected = np.zeros_like(v)
    expected[mask] = _sort_projection(v[mask])
    np.testing.assert_allclose(project_simplex(v, mask), expected, atol=1e-12)


def test_jax_equals_numpy_on_random_batch():
    """The JAX driver runs the same algorithm: identical results on a (200, 7) masked batch."""
    rng = np.random.default_rng(3)
    v = rng.normal(size=(200, 7)) * 2
    mask = rng.random((200, 7)) < 0.7
    mask[:, 3] = True
    expected = np.zeros_like(v)
    for r in range(200):
        expected[r, mask[r]] = _sort_projection(v[r, mask[r]])
    got = jax.jit(project_simplex)(jnp.asarray(v), jnp.asarray(mask))
    np.testing.assert_allclose(np.asarray(got), expected, atol=1e-12)


def test_batched_rows_and_empty_row():
    v = np.array([[0.6, 0.6, -1.0], [3.0, 1.0, 0.0], [1.0, 2.0, 3.0]])
    mask = np.array([[1, 1, 1], [1, 1, 0], [0, 0, 0]], dtype=bool)
    out = project_simplex(v, mask)
    np.testing.assert_allclose(out, [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])


def test_jvp_matches_finite_differences():
    """Custom JVP (support-restricted centring) vs central differences of the primal."""
    rng = np.random.default_rng(0)
    v = jnp.asarray(rng.normal(size=(4, 6)) * 0.4)
    mask = jnp.asarray(rng.random((4, 6)) < 0.8).at[:, 0].set(True)
    w = jnp.asarray(rng.normal(size=(4, 6)))
    f = lambda a: jnp.sum(w * project_simplex(a, mask) ** 2)  # noqa: E731
    d = jnp.asarray(rng.normal(size=(4, 6)))
    eps = 1e-6
    fd = (f(v + eps * d) - f(v - eps * d)) / (2 * eps)
    assert abs(float(jnp.vdot(jax.grad(f)(v), d)) - float(fd)) < 1e-7
    assert abs(float(jax.jvp(f, (v,), (d,))[1]) - float(fd)) < 1e-7


def test_tangent_cone_is_limit_of_projected_step():
    """Π_T(x)(v) = lim (Π(x + δv) − x)/δ (THEORY §3, (2) → (9))."""
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = rng.integers(2, 7)
        x = project_simplex(rng.normal(size=n))
        v = rng.normal(size=n)
        delta = 1e-7
        limit = (project_simplex(x + delta * v) - x) / delta
        np.testing.assert_allclose(project_tangent_cone(x, v), limit, atol=1e-6)
        if n == 4:
            got = jax.jit(project_tangent_cone)(jnp.asarray(x), jnp.asarray(v))
            np.testing.assert_allclose(np.asarray(got), limit, atol=1e-6)


def test_tangent_cone_contraction_property():
    """(x − x')ᵀΠ_T(v) ≤ (x − x')ᵀv and ‖Π_T(v)‖∞ ≤ 2‖v‖∞ (THEORY §3)."""
    rng = np.random.default_rng(2)
    for _ in range(100):
        n = rng.integers(2, 7)
        x = project_simplex(rng.normal(size=n) * 2)
        xp = project_simplex(rng.normal(size=n) * 2)
        v = rng.normal(size=n)
        d = project_tangent_cone(x, v)
        assert (x - xp) @ d <= (x - xp) @ v + 1e-12
        assert np.max(np.abs(d)) <= 2 * np.max(np.abs(v)) + 1e-12


@pytest.mark.parametrize("mod", [np, jnp])
def test_argmin_ties_split_evenly(mod):
    c = mod.asarray([[1.0, 0.5, 0.5], [2.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    mask = mod.asarray([[1, 1, 1], [1, 1, 0], [0, 0, 0]], dtype=bool)
    np.testing.assert_allclose(np.asarray(simplex_argmin(c, mask)),
                               [[0, 0.5, 0.5], [0, 1, 0], [0, 0, 0]])


@pytest.mark.parametrize("mod", [np, jnp])
def test_any_support_hint_gives_the_exact_projection(mod):
    """Warm start from an arbitrary guessed support (incl. empty rows) changes nothing."""
    rng = np.random.default_rng(5)
    v = rng.normal(size=(300, 6))
    mask = rng.random((300, 6)) < 0.8
    mask[:, 0] = True
    hint = rng.random((300, 6)) < 0.4
    ref = project_simplex(v, mask)
    got = project_simplex(mod.asarray(v), mod.asarray(mask), hint=mod.asarray(hint))
    np.testing.assert_allclose(np.asarray(got), ref, atol=1e-13)


def _prox_step_oracle(x: np.ndarray, c: np.ndarray, s: float, mask: np.ndarray) -> np.ndarray:
    """Independent oracle for (2): argmin_{z ∈ Δ} s·cᵀz + ½‖z − x‖² by scipy's SLSQP."""
    idx = np.flatnonzero(mask)
    xi, ci = x[idx], c[idx]
    z0 = np.full(len(idx), 1 / len(idx))
    res = minimize(lambda z: s * ci @ z + 0.5 * np.sum((z - xi) ** 2), z0,
                   jac=lambda z: s * ci + (z - xi), method="SLSQP", bounds=[(0, None)] * len(idx),
                   constraints=[{"type": "eq", "fun": lambda z: z.sum() - 1,
                                 "jac": lambda z: np.ones_like(z)}],
                   options={"ftol": 1e-14, "maxiter": 500})
    out = np.zeros_like(x)
    out[idx] = res.x
    return out


@pytest.mark.parametrize("mod", [np, jnp])
def test_flow_update_is_the_proximal_step_of_scipy(mod):
    """x ← Π_Δ(x − step·ĉ) (THEORY §3 (2)) equals scipy's constrained minimiser, per source row."""
    rng = np.random.default_rng(11)
    n_rows, n = 12, 5
    mask = rng.random((n_rows, n)) < 0.75
    mask[:, 2] = True
    x = project_simplex(rng.normal(size=(n_rows, n)), mask)
    c = rng.gamma(2.0, 1.0, size=(n_rows, n))
    step = rng.uniform(0.05, 2.0, size=n_rows)  # one η·δ per source row
    got = flow_update(mod.asarray(x), mod.asarray(c), mod.asarray(step), mod.asarray(mask))
    want = np.stack([_prox_step_oracle(x[r], c[r], step[r], mask[r]) for r in range(n_rows)])
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-7)
    assert np.any((want > 0) & (want < 1) & (np.abs(want - x) > 1e-3))  # a real move happened


def test_flow_update_closed_form_two_arcs():
    """Two arcs in the interior: x₁ moves by −step·(c₁ − c₂)/2 (mean-free step); clipped at 0."""
    x = np.array([[0.5, 0.5], [0.1, 0.9]])
    c = np.array([[1.0, 0.0], [3.0, 0.0]])
    np.testing.assert_allclose(flow_update(x, c, 0.25), [[0.375, 0.625], [0.0, 1.0]])
    np.testing.assert_allclose(flow_update(x, c, np.array([0.0, 0.05])),
                               [[0.5, 0.5], [0.025, 0.975]])


@pytest.mark.parametrize("step, match", [
    (-0.1, "step: expected finite values ≥ 0"), (np.nan, "step: expected finite values ≥ 0"),
    (np.ones(3), "step: expected a scalar, one value per row")])
def test_flow_update_bad_step_raises(step, match):
    with pytest.raises(StepsizeError, match=match):
        flow_update(np.full((2, 2), 0.5), np.ones((2, 2)), step)


def _michelot_by_steps(v, S, keep, target):
    """Michelot driven by the array-namespace step the JAX path runs (numpy here), rows in
    lock step: the independent driver the compiled kernel must reproduce bit for bit."""
    from lbtheory.simplex import _michelot_step

    while True:
        nu, S_new = _michelot_step(np, v, S, target)
        if keep is not None:
            S_new |= keep
        if (S_new == S).all():
            return np.where(S, v - nu, 0.0)
        S = S_new


def test_numpy_path_equals_the_stepwise_iteration_bit_for_bit_and_is_exact():
    """The numpy projections run the compiled Michelot kernel row by row; the result must equal
    the vectorised step iteration (the JAX path's :func:`_michelot_step`, same summation order)
    bit for bit — projection with any support hint and tangent cone — and the sort oracle, for
    short rows (router probe rounds) and long ones, with ties, masked entries and strided or
    read-only input."""
    from lbtheory.simplex import _warm_start

    rng = np.random.default_rng(11)
    for trial in range(3000):
        n = int(rng.integers(1, 8)) if trial % 5 else int(rng.integers(8, 300))
        m = int(rng.integers(1, 5))
        v = rng.normal(size=(m, n)) * rng.choice([0.01, 1.0, 100.0])
        if trial % 3 == 0:
            v = np.round(v, 1)  # ties
        mask = rng.random((m, n)) < 0.8
        hint = None if trial % 4 == 0 else rng.random((m, n)) < 0.5
        vin = v
        if trial % 7 == 0:
            vin = np.repeat(v, 2, axis=1)[:, ::2]  # strided
        elif trial % 7 == 1:
            vin = v.copy()
            vin.flags.writeable = False
        got = project_simplex(vin, mask, hint=hint)
        assert got.tobytes() == _michelot_by_steps(v, _warm_start(np, v, mask, hint), None,
                                                   1.0).tobytes()
        x = np.where(mask & (rng.random((m, n)) < 0.6), 1.0, 0.0)
        tan = project_tangent_cone(x, vin, mask)
        assert tan.tobytes() == _michelot_by_steps(v, mask, mask & (x > 0), 0.0).tobytes()
        for r in range(m):
            expected = np.zeros(n)
            if mask[r].any():
                expected[mask[r]] = _sort_projection(v[r, mask[r]])
            np.testing.assert_allclose(got[r], expected, atol=1e-9 * max(1.0, np.abs(v).max()))
            assert abs(tan[r].sum()) <= 1e-9 * max(1.0, np.abs(v).max()) * n
            assert (tan[r][mask[r] & (x[r] == 0)] >= 0).all() and (tan[r][~mask[r]] == 0).all()


# ---------------------------------------------------------------- compiled twins (issue 21)
@pytest.mark.parametrize("n", [1, 2, 5, 7, 8, 9, 16, 17, 127, 128, 129, 300, 1000, 1400, 4100])
def test_compiled_row_kernels_equal_the_numpy_rules_bit_for_bit(n):
    """The compiled cell simulator's flow step, projection, argmin and masked sum are the numpy
    rules above to the last bit (numpy's pairwise summation order included), on random rows
    with masks, ties, zero and non-zero supports."""
    from lbtheory.simplex import argmin_row_kernel, flow_update_row_kernel, masked_sum_kernel

    rng = np.random.default_rng(n)
    out, v, hint, S = np.empty(n), np.empty(n), np.empty(n, bool), np.empty(n, bool)
    for trial in range(40):
        mask = rng.random(n) > 0.2
        mask[rng.integers(n)] = True
        x = np.where(mask & (rng.random(n) > 0.3), rng.random(n), 0.0)
        x[np.flatnonzero(mask)[0]] += 0.1
        x /= x.sum()
        c = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3)
        if trial % 4 == 0:
            c = np.round(c)  # ties
        step = float(rng.random() * 10.0 ** rng.integers(-3, 2))
        X = np.broadcast_to(x, (2, n))                # the routers' matrix path
        ref = flow_update(X, np.where(mask, c, 0.0)[None].repeat(2, 0), np.full(2, step),
                          np.broadcast_to(mask, (2, n)).copy())[1]
        flow_update_row_kernel(x, c, step, mask, out, v, hint, S)
        assert out.tobytes() == ref.tobytes()
        argmin_row_kernel(np.where(mask, c, 7.0), mask, 1e-12, out)
        assert out.tobytes() == simplex_argmin(np.where(mask, c, 7.0), mask).tobytes()
        assert masked_sum_kernel(c, mask, 0, n) == np.where(mask, c, 0.0).sum()
