"""Keeps numba's on-disk cache of the compiled engine consistent with its sources.

numba keys a cached function on its own source file only: after an edit of, say,
``_kernels_state.py``, the cached ``run_events`` of ``_kernels_loop.py`` (which inlines the old
heap code) would still load — wrong records or a crash. :func:`drop_stale_kernel_caches` hashes
every kernel source and, when the hash differs from the one stamped next to the caches,
deletes those modules' cache files before anything loads them (a fresh clone or an upgraded
install has no stale caches; an edited development tree would).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ..io import write_text_atomic

__all__ = ["drop_stale_kernel_caches"]

_STAMP = "lbtheory-kernels.stamp"


def _cache_dirs(modules: tuple[ModuleType, ...]) -> set[Path]:
    from numba.core.registry import CPUDispatcher

    dirs = set()
    for m in modules:
        for d in vars(m).values():
            cache = getattr(d, "_cache", None) if isinstance(d, CPUDispatcher) else None
            path = getattr(cache, "_cache_path", None)
            if path:
                dirs.add(Path(path))
    return dirs


def drop_stale_kernel_caches(kernels: tuple[Any, ...]) -> None:
    """Delete the numba cache files of the modules defining ``kernels`` (numba dispatchers)
    unless they were written for exactly the current sources of all of them (best effort: an
    unwritable cache is left alone)."""
    modules = tuple(dict.fromkeys(sys.modules[k.py_func.__module__] for k in kernels))
    digest = hashlib.sha256(b"".join(Path(m.__file__).read_bytes() for m in modules)).hexdigest()
    names = tuple(Path(m.__file__).stem + "." for m in modules)
    for folder in _cache_dirs(modules):
        stamp = folder / _STAMP
        try:
            if stamp.read_text() == digest:
                continue
        except OSError:
            pass
        try:
            for f in folder.glob("*.nb[ic]"):
                if f.name.startswith(names):
                    f.unlink(missing_ok=True)
            write_text_atomic(stamp, digest, fsync=False)
        except OSError:
            continue
