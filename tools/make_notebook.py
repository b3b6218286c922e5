"""Write a notebook (without outputs) from a list of (kind, source) cells: used to author
notebooks/ reproducibly. Usage: python tools/make_notebook.py SPEC.py OUT.ipynb, where SPEC.py
defines CELLS = [("md", "..."), ("code", "..."), ...]."""

from __future__ import annotations

import runpy
import sys

import nbformat


def build(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    for kind, src in cells:
        src = src.strip("\n")
        nb.cells.append(nbformat.v4.new_markdown_cell(src) if kind == "md"
                        else nbformat.v4.new_code_cell(src))
    return nb


if __name__ == "__main__":
    spec, out = sys.argv[1], sys.argv[2]
    nbformat.write(build(runpy.run_path(spec)["CELLS"]), out)
