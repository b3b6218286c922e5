"""Exact simplex projection (Michelot), tangent-cone projection and the argmin rule."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbtheory.simplex import project_simplex, project_tangent_cone, simplex_argmin


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
