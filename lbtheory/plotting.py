"""Shared plot style and small helpers (no global rcParams changes on import).

Figures use :func:`figure` (a style context + a new figure) and are written with
:func:`lbtheory.io.save_figure_atomic`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["STYLE", "style", "figure", "POLICY_COLORS"]

STYLE: dict[str, Any] = {
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 10,
    "legend.frameon": False,
}

#: Stable colours per policy/equilibrium name so every figure agrees.
POLICY_COLORS: dict[str, str] = {
    "wardrop": "#d62728", "system_optimum": "#2ca02c", "rif": "#1f77b4",
    "random": "#7f7f7f", "rr": "#8c564b", "p2c": "#e377c2", "jsq": "#ff7f0e",
    "jsq-tokens": "#bcbd22", "br0": "#1f77b4", "brh-oracle": "#2ca02c",
    "brh-survival": "#9467bd", "brh-exactmatch": "#17becf",
}


@contextlib.contextmanager
def style() -> Iterator[None]:
    """Context manager applying lbtheory's plot style (restores rcParams afterwards)."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        yield


def figure(*, nrows: int = 1, ncols: int = 1, width: float = 6.0, height: float = 3.6,
           **kwargs: Any):
    """A new (figure, axes) pair in lbtheory's style, using the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(STYLE):
        fig, ax = plt.subplots(nrows, ncols, figsize=(width, height), **kwargs)
    return fig, ax
