"""Whether numba kernels still need compiling: the CLI says so in one line before a first,
slow run, and warms them up before any solver or simulation clock starts.

numba compiles a ``@njit`` function on its first call in a process; with ``cache=True`` it
writes the machine code next to the source (``__pycache__/*.nbi``/``*.nbc``), and later
processes load it in about a second instead of compiling for 15–40 s.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["kernels_cached", "source_fingerprint", "use_fingerprinted_cache"]


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


#: Fingerprinted cache folders kept side by side (older ones are removed).
KEEP_CACHES = 3


def source_fingerprint(root: str | None = None) -> str:
    """A short hash of every ``.py`` file of the package (relative path, size, mtime): it
    changes whenever any module changes."""
    import hashlib

    root = root or os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for d, dirs, files in sorted(os.walk(root)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                st = os.stat(os.path.join(d, f))
                h.update(f"{os.path.relpath(os.path.join(d, f), root)}:{st.st_size}:"
                         f"{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def use_fingerprinted_cache() -> str | None:
    """Point numba's on-disk cache at a folder named after :func:`source_fingerprint`; returns
    it (None when no folder could be made; numba then keeps its default).

    numba keys a cached kernel on its own source file only: after an update that changes a
    function it *calls* in another module (``git pull``, a reinstall), the old machine code
    would load and silently compute with the old callee. A folder per package fingerprint makes
    any change recompile (once), never reuse. The folder is ``$NUMBA_CACHE_DIR/lbtheory-<fp>``
    when the user set ``NUMBA_CACHE_DIR``, else ``$XDG_CACHE_HOME/lbtheory/numba-<fp>``
    (``~/.cache``); the :data:`KEEP_CACHES` newest siblings are kept.
    """
    import sys

    user = os.environ.get("NUMBA_CACHE_DIR", "")
    if os.environ.get("LBTHEORY_NUMBA_CACHE") == "default":  # opt out: numba's own locator
        return None
    fp = source_fingerprint()
    if user.rstrip(os.sep).endswith(fp):
        return user  # already ours (set by this function in a parent process)
    if user:
        base, name = user, f"lbtheory-{fp}"
    else:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME")
                            or os.path.join(os.path.expanduser("~"), ".cache"),
                            "lbtheory")
        name = f"numba-{fp}"
    path = os.path.join(base, name)
    try:
        os.makedirs(path, exist_ok=True)
        if not os.access(path, os.W_OK):
            return None
    except OSError:
        return None
    os.environ["NUMBA_CACHE_DIR"] = path
    if "numba" in sys.modules:  # imported before lbtheory: its config read the old value
        sys.modules["numba"].core.config.CACHE_DIR = path
    prefix = name.split("-")[0] + "-"
    try:  # keep the newest few fingerprints
        olds = sorted((e for e in os.scandir(base) if e.is_dir() and e.name.startswith(prefix)
                       and e.name != name), key=lambda e: e.stat().st_mtime, reverse=True)
        for e in olds[KEEP_CACHES - 1:]:
            import shutil

            shutil.rmtree(e.path, ignore_errors=True)
    except OSError:
        pass
    return path
