"""Whether numba kernels still need compiling: the CLI says so in one line before a first,
slow run, and warms them up before any solver or simulation clock starts.

numba compiles a ``@njit`` function on its first call in a process; with ``cache=True`` it
writes the machine code next to the source (``__pycache__/*.nbi``/``*.nbc``), and later
processes load it in about a second instead of compiling for 15–40 s.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["kernels_cached"]


def kernels_cached(*dispatchers: Any) -> bool:
    """True when every numba dispatcher in ``dispatchers`` is compiled in this process already
    or has numba's on-disk cache index (so no call to it compiles for long); False when one of
    them will compile on its first call. A kernel with ``inline="always"`` is compiled into its
    callers (it has no cache of its own) and is skipped."""
    for d in dispatchers:
        if getattr(d, "signatures", None) or \
                getattr(d, "targetoptions", {}).get("inline") == "always":
            continue
        cache_file = getattr(getattr(d, "_cache", None), "_cache_file", None)
        index = getattr(cache_file, "_index_path", None)
        if not index or not os.path.exists(index):
            return False
    return True
