"""Execute every notebook in notebooks/ top to bottom (they are stored without outputs)."""

from __future__ import annotations

import re
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


#: a code cell draws a figure when its source makes one (lbtheory.plotting.figure, pyplot, the
#: equilibria plot) or when an output is a figure's text form (``<Figure size 748x396 with 1
#: Axes>``: the figure was made but not rendered, what a switched backend did)
DRAWS = re.compile(r"(?<![\w.])(figure|plot_equilibria)\(|\bplt\.|\.(subplots|subplot_mosaic)\(")


def _figure_text(cell) -> bool:
    return any("<Figure size" in str(o.get("data", {}).get("text/plain", ""))
               for o in cell.get("outputs", []))


def test_draws_rule():
    """The rule that decides which cells must carry an image (hand-made cells)."""
    cell = nbformat.v4.new_code_cell
    assert DRAWS.search('fig, ax = figure(width=7)') and DRAWS.search("plt.show()")
    assert DRAWS.search("fig = plot_equilibria(net, poa, sweep)")
    assert not DRAWS.search("summary_figure(x)") and not DRAWS.search("obj.figure(x)")
    out = cell("fig", outputs=[nbformat.v4.new_output(
        "execute_result", data={"text/plain": "<Figure size 748x396 with 1 Axes>"},
        execution_count=1)])
    assert _figure_text(out) and not _figure_text(cell("print(1)"))


@pytest.mark.parametrize("path", sorted(RENDERED.glob("*.ipynb")), ids=lambda p: p.name)
def test_rendered_notebook_shows_its_figures(path):
    """Every cell of a rendered notebook that draws a figure holds an ``image/png`` output, and
    no cell holds an error (docs/notebooks/ 01, 02, 04, 05 and 08 once held no image at all)."""
    nb = nbformat.read(path, as_version=4)
    code = [(k, c) for k, c in enumerate(nb.cells) if c.cell_type == "code"]
    errors = [k for k, c in code if any(o.output_type == "error" for o in c.outputs)]
    assert not errors, f"{path.name}: cells {errors} hold an error"
    drawing = [k for k, c in code if DRAWS.search(c.source) or _figure_text(c)]
    blank = [k for k, c in code if k in drawing
             and not any("image/png" in o.get("data", {}) for o in c.outputs)]
    assert not blank, f"{path.name}: cells {blank} draw a figure but hold no image"
    twice = [k for k, c in code if len({str(o.data["image/png"]) for o in c.outputs
                                         if "image/png" in o.get("data", {})})
             < sum("image/png" in o.get("data", {}) for o in c.outputs)]
    assert not twice, f"{path.name}: cells {twice} show the same image twice (a trailing `fig`)"
