"""The documentation site builds in strict mode (issue 33): a broken link, a missing
cross-reference or a docstring griffe cannot parse fails this test, as it fails `make docs`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import lbtheory as lb

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mkdocs")


def test_api_index_lists_every_top_level_name_once():
    text = (ROOT / "docs" / "api" / "index.md").read_text(encoding="utf-8")
    linked = re.findall(r"\| \[`(\w+)`\]\[lbtheory\.[\w.]+\] \|", text)
    assert sorted(linked) == sorted(lb.__all__)


def test_docs_build_strict(tmp_path):
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d",
                        str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    site = tmp_path / "site"
    page = (site / "api" / "equilibrium" / "index.html").read_text(encoding="utf-8")
    assert "solve_wardrop" in page and "Wardrop" in page
    for nb in sorted((ROOT / "docs" / "notebooks").glob("*.ipynb")):
        assert (site / "notebooks" / nb.stem / "index.html").is_file(), nb.name
