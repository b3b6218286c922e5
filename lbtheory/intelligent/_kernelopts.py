"""The numba options of the compiled instance simulator's kernels (:mod:`._core` and the
modules that call into it)."""

from __future__ import annotations

__all__ = ["_KERNEL"]


def _no_refcounts() -> dict[str, bool]:
    """numba options of the engine's kernels: reference counting off (numba's ``_nrt``
    target option) where this numba has it. The kernels allocate nothing and only index
    arrays their callers own, and numba's atomic increments and decrements of every array at
    each call boundary took over half of the engine's time (BENCHMARKS.md, issue 35)."""
    from numba.core.cpu import CPUTargetOptions

    return {"_nrt": False} if isinstance(getattr(CPUTargetOptions, "_nrt", None),
                                         CPUTargetOptions.Mapping) else {}


_KERNEL = {"cache": True, **_no_refcounts()}
