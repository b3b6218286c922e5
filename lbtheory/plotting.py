"""Shared plot style and small helpers (no global rcParams changes on import).

Figures use :func:`figure` (a style context + a new figure) and are written with
:func:`lbtheory.io.save_figure_atomic`, the one save path: it applies :data:`STYLE` while saving
(150 dpi, tight bounding box), so no label is cut off however the figure was built.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from . import registry

__all__ = ["STYLE", "style", "figure", "POLICY_COLORS", "EQUILIBRIUM_COLORS", "policy_color",
           "plot_equilibria"]

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

#: The three equilibria's colours (the cost signals of DLB's routers take them: latency =
#: Wardrop red, gradient = optimum green, RIF blue).
EQUILIBRIUM_COLORS: dict[str, str] = {"wardrop": "#d62728", "system_optimum": "#2ca02c",
                                      "rif": "#1f77b4"}
#: One colour per policy / equilibrium name, the same in every figure, and no two names share
#: one (tests/test_figures.py checks): the equilibria's and every policy's of the one registry
#: (:class:`lbtheory.registry.PolicyEntry` ``colour``), as at import; :func:`policy_color`
#: also knows policies registered later.
POLICY_COLORS: dict[str, str] = {**EQUILIBRIUM_COLORS,
                                 **{n: e.colour for n, e in registry.POLICIES.items()}}


def policy_color(name: str) -> str:
    """The colour of ``name`` (a label such as ``flow-grad@0.5`` takes its policy's colour;
    unknown names a neutral grey)."""
    return EQUILIBRIUM_COLORS.get(name) or registry.colour(name) or "#4d4d4d"


@contextlib.contextmanager
def style() -> Iterator[None]:
    """Context manager applying lbtheory's plot style (restores rcParams afterwards).

    Matplotlib's interactive mode is the one exception: a backend that starts inside the block
    (Jupyter's inline backend starts with the first figure and turns interactive mode on) keeps
    it, or no later figure of the session would show."""
    import matplotlib

    interactive = None
    try:
        with matplotlib.rc_context(STYLE):
            try:
                yield
            finally:
                interactive = matplotlib.is_interactive()
    finally:
        if interactive is not None:
            matplotlib.interactive(interactive)


def figure(*, nrows: int = 1, ncols: int = 1, width: float = 6.0, height: float = 3.6,
           mosaic: list[list[str]] | None = None, **kwargs: Any):
    """A new (figure, axes) pair in lbtheory's style (sizes in inches); with ``mosaic`` (rows
    of panel names, ``"."`` for an empty slot, as :func:`matplotlib.pyplot.subplot_mosaic`)
    the axes are a dict by name.

    The figure is made on whatever backend the caller's matplotlib uses (inline in Jupyter, a
    window in an interactive session): library code never switches the backend; the ``lbtheory``
    command chooses a non-interactive one itself (:func:`lbtheory.cli.main`)."""
    import matplotlib.pyplot as plt

    with style():
        if mosaic is not None:
            return plt.subplot_mosaic(mosaic, figsize=(width, height), **kwargs)
        fig, ax = plt.subplots(nrows, ncols, figsize=(width, height), **kwargs)
    return fig, ax


_EQ_LABELS = {"wardrop": "Wardrop (latency)", "system_optimum": "system optimum (gradient)",
              "rif": "RIF"}


def plot_equilibria(net: Any, poa: Any, sweep: dict[str, Any]):
    """Two panels: per-cell utilisation at the three equilibria, and PoA / RIF ratio vs demand.

    Args:
        net: the CellNetwork; poa: a :class:`~lbtheory.equilibrium.PoAResult`;
        sweep: the output of :func:`lbtheory.equilibrium.demand_sweep`.
    """
    import numpy as np

    fig, (ax0, ax1) = figure(ncols=2, width=10.0, height=3.8)
    with style():
        width = 0.8 / 3
        x = np.arange(net.n)
        for k, key in enumerate(("wardrop", "system_optimum", "rif")):
            eq = getattr(poa, key)
            ax0.bar(x + (k - 1) * width, eq.inflow / net.max_rates, width,
                    color=POLICY_COLORS[key],
                    label=f"{_EQ_LABELS[key]}: {eq.mean_latency * 1e3:.0f} ms")
        ax0.set_xticks(x, net.names)
        ax0.set_xlabel("cell")
        ax0.set_ylabel(r"utilisation $z_j/\bar\mu_j$" + "\n(inflow / capacity)")
        ax0.set_title("equilibrium load per cell")
        ax0.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1,
                   title="equilibrium: mean end-to-end latency", title_fontsize=8)
        ax1.plot(sweep["utilisation"], sweep["price_of_anarchy"], color=POLICY_COLORS["wardrop"],
                 marker=".", ms=3, label="PoA = C(Wardrop)/C(opt)")
        ax1.plot(sweep["utilisation"], sweep["rif_ratio"], color=POLICY_COLORS["rif"],
                 marker=".", ms=3, label="C(RIF)/C(opt)")
        ax1.axhline(1.0, color="k", lw=0.8)
        now = float(np.sum(net.arrival_rates) / np.sum(net.max_rates))
        ax1.axvline(now, color="0.4", ls=":", lw=1.0)
        ax1.plot([now], [poa.price_of_anarchy], marker="o", color=POLICY_COLORS["wardrop"],
                 ms=6, zorder=5, label=f"this topology's demand: PoA {poa.price_of_anarchy:.4f} "
                                       f"at Λ/Σμ̄ = {now:.2f}")
        ax1.set_xlabel(r"total demand / total capacity ($\Lambda\,/\,\Sigma\bar\mu$)")
        ax1.set_ylabel("ratio of mean latencies (dimensionless)")
        ax1.set_title("price of anarchy as demand grows")
        ax1.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1,
                   title="kinks: an arc enters or leaves use in one of the equilibria",
                   title_fontsize=8)
        fig.tight_layout()
    return fig
