"""numba's on-disk cache is keyed by the whole package's fingerprint (lbtheory/_jit.py): numba
checks only a kernel's own file, so after an update that changed a function it calls in another
module the old machine code would load and compute with the old callee (seen while merging: a
rollout kernel lost to its own base policy until the stale cache was deleted)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from lbtheory._jit import source_fingerprint

ROOT = Path(__file__).resolve().parents[1]


def test_the_fingerprint_changes_with_any_module(tmp_path):
    pkg = tmp_path / "lbtheory"
    shutil.copytree(ROOT / "lbtheory", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    before = source_fingerprint(str(pkg))
    assert before == source_fingerprint(str(pkg))
    f = pkg / "routers" / "_baselines.py"
    f.write_text(f.read_text() + "\n# changed\n")
    changed = source_fingerprint(str(pkg))
    assert changed != before
    (pkg / "__pycache__").mkdir(exist_ok=True)
    (pkg / "__pycache__" / "x.nbi").write_text("")  # caches and non-Python files do not count
    (pkg / "notes.txt").write_text("x")
    assert source_fingerprint(str(pkg)) == changed


def _cache_dir(env: dict) -> str:
    code = "import os, lbtheory; print(os.environ['NUMBA_CACHE_DIR'])"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True, cwd=ROOT).stdout.strip()


def test_import_points_numba_at_a_fingerprinted_folder(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR",
                                                            "LBTHEORY_NUMBA_CACHE")}
    fp = source_fingerprint()
    got = _cache_dir(env | {"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert got == str(tmp_path / "xdg" / "lbtheory" / f"numba-{fp}") and Path(got).is_dir()
    # a user's NUMBA_CACHE_DIR gets a subfolder; a child process keeps its parent's folder
    got = _cache_dir(env | {"NUMBA_CACHE_DIR": str(tmp_path / "mine")})
    assert got == str(tmp_path / "mine" / f"lbtheory-{fp}")
    assert _cache_dir(env | {"NUMBA_CACHE_DIR": got}) == got
    # old fingerprints are pruned to the newest few
    for k in range(5):
        (tmp_path / "mine" / f"lbtheory-old{k}").mkdir()
    _cache_dir(env | {"NUMBA_CACHE_DIR": str(tmp_path / "mine")})
    assert len(list((tmp_path / "mine").iterdir())) == 3
    # opting out leaves numba's default
    out = subprocess.run([sys.executable, "-c", "import os, lbtheory; "
                          "print(os.environ.get('NUMBA_CACHE_DIR', '-'))"],
                         env=env | {"LBTHEORY_NUMBA_CACHE": "default"}, capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout.strip()
    assert out == "-"
