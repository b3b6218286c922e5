"""Array-namespace dispatch: one formula serves numpy arrays and JAX arrays/tracers.

Model and cost formulas call :func:`xp` on their inputs and use the returned module, so the same
definition is evaluated with numpy by routers and CVXPY post-processing, and traced by JAX in the
fluid model (THEORY §4: one definition of each cost).
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # jax is a hard dependency, but keep numpy paths importable without initialising it
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover
    jax = None
    jnp = None


def is_jax(*arrays: Any) -> bool:
    """True if any argument is a JAX array or tracer."""
    if jax is None:
        return False
    return any(isinstance(a, jax.Array) for a in arrays)


def xp(*arrays: Any):
    """The array module (``jax.numpy`` or ``numpy``) to use for these arguments."""
    return jnp if is_jax(*arrays) else np


def is_concrete(*values: Any) -> bool:
    """True if every value is a concrete number/array (not a tracer or placeholder)."""
    for v in values:
        if jax is not None and isinstance(v, jax.core.Tracer):
            return False
        try:
            np.asarray(v, dtype=float)
        except OverflowError:  # an int beyond float: concrete, and refused by the range checks
            continue
        except (TypeError, ValueError):
            return False
    return True


def softplus(u: Any) -> Any:
    """log(1 + e^u), overflow-safe, for numpy or JAX input."""
    m = xp(u)
    return m.logaddexp(0.0, u)


def sigmoid(u: Any) -> Any:
    """Logistic 1/(1 + e^{-u}), overflow-safe, for numpy or JAX input."""
    if is_jax(u):
        return jax.nn.sigmoid(u)
    from scipy.special import expit

    return expit(u)
