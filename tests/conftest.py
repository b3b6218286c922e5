"""Shared test setup: float64 JAX and tolerance helpers."""

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)


def rel_err(a, b, floor: float = 1e-12) -> float:
    """max |a − b| / max(|b|, floor), elementwise over arrays."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), floor)))
