"""Array-namespace dispatch: one formula serves numpy arrays and JAX arrays/tracers.

Model and cost formulas call :func:`xp` on their inputs and use the returned module, so the same
definition is evaluated with numpy by routers and CVXPY post-processing, and traced by JAX in the
fluid model (THEORY §4: one definition of each cost).

JAX is never imported here: an argument can only be a JAX array or tracer once JAX has been
imported, so the tests look JAX up in ``sys.modules`` (numpy-only paths — routers, traffic
assignment — start without JAX's 1–2 s import). Work that needs JAX once it is loaded (the
service models' pytree registration) is queued by :func:`when_jax_loaded`.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["is_jax", "xp", "is_concrete", "softplus", "sigmoid", "when_jax_loaded"]

_PENDING: list[Callable[[], None]] = []


def _jax() -> Any:
    """The JAX module if it is imported (fully initialised), else None."""
    jax = sys.modules.get("jax")
    return jax if jax is not None and hasattr(jax, "Array") else None


def _run_pending() -> None:
    while _PENDING:
        _PENDING.pop(0)()


class _AfterJax(importlib.abc.MetaPathFinder):
    """Meta-path finder that runs the :func:`when_jax_loaded` queue right after JAX's first
    import (whoever imports it); it removes itself on that import."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "jax":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            _run_pending()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_HOOK = _AfterJax()


def when_jax_loaded(fn: Callable[[], None]) -> None:
    """Call ``fn()`` now if JAX is imported, else right after JAX's first import."""
    if _jax() is not None:
        fn()
        return
    _PENDING.append(fn)
    if _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)


def is_jax(*arrays: Any) -> bool:
    """True if any argument is a JAX array or tracer."""
    jax = _jax()
    if jax is None:
        return False
    return any(isinstance(a, jax.Array) for a in arrays)


def xp(*arrays: Any):
    """The array module (``jax.numpy`` or ``numpy``) to use for these arguments."""
    if is_jax(*arrays):
        import jax.numpy as jnp

        return jnp
    return np


def is_concrete(*values: Any) -> bool:
    """True if every value is a concrete number/array (not a tracer or placeholder)."""
    jax = _jax()
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
        return _jax().nn.sigmoid(u)
    from scipy.special import expit

    return expit(u)
