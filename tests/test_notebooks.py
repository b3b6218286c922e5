"""Execute every notebook in notebooks/ top to bottom (they are stored without outputs)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        f"{path.name} must be stored without outputs"
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()


RENDERED = Path(__file__).resolve().parents[1] / "docs" / "notebooks"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_rendered_copy_matches_its_source(path):
    """docs/notebooks/ holds each notebook executed, with outputs (for readers who do not run
    it): same code cells as the source, and every code cell has run (``make notebooks``)."""
    copy = RENDERED / path.name
    assert copy.is_file(), f"run `make notebooks`: {copy} is missing"
    src = [c.source for c in nbformat.read(path, as_version=4).cells]
    out = nbformat.read(copy, as_version=4)
    assert [c.source for c in out.cells] == src, f"{copy.name} is stale: run `make notebooks`"
    assert all(c.execution_count for c in out.cells if c.cell_type == "code"), copy.name
