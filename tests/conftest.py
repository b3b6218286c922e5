"""Shared test setup: float64 JAX, one numba cache per pytest-xdist worker, tolerance helpers."""

import os
from pathlib import Path

# `make test` runs the suite on every core (pytest-xdist). numba's on-disk cache (cache=True) is
# not written under a lock, so two workers compiling the same kernel into the one __pycache__
# could race: each worker keeps its own cache under .pytest_cache/ (persistent between runs).
# Set before anything imports numba.
if "PYTEST_XDIST_WORKER" in os.environ and "NUMBA_CACHE_DIR" not in os.environ:
    os.environ["NUMBA_CACHE_DIR"] = str(Path(__file__).resolve().parents[1] / ".pytest_cache"
                                        / f"numba-{os.environ['PYTEST_XDIST_WORKER']}")

import jax  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)


def rel_err(a, b, floor: float = 1e-12) -> float:
    """max |a − b| / max(|b|, floor), elementwise over arrays."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), floor)))
