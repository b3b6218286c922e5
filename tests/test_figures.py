"""Every figure script and ``--plot`` renders on tiny data, and no text is clipped.

Each ``paper_figures/*.py`` script is run on small synthetic results (written to ``tmp_path`` in
the format its experiment writes), and the ``equilibrium`` / ``fluid`` ``--plot`` figures on a tiny
problem. For every saved PNG the test checks, from matplotlib's bounding boxes, that the file is
the figure's tight bounding box at the style's dpi (the one save path applied the style) and that
every axes' tight bounding box (tick labels, axis labels, title, legend) and every figure-level
text lies inside the saved canvas; and that every axes with data has axis labels.
"""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.image  # noqa: E402

from lbtheory import io as lbio  # noqa: E402
from lbtheory.plotting import STYLE  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "paper_figures").glob("*.py"))


def assert_not_clipped(fig, png: Path) -> None:
    """The saved PNG is the tight box of ``fig`` and holds every axes box and figure text."""
    with matplotlib.rc_context(STYLE):
        assert matplotlib.rcParams["savefig.bbox"] == "tight"
        dpi = matplotlib.rcParams["savefig.dpi"]
        fig.set_dpi(dpi)  # measure text at the dpi it was saved at
        renderer = fig.canvas.get_renderer()
        fig.draw(renderer)
        region = fig.get_tightbbox(renderer).padded(matplotlib.rcParams["savefig.pad_inches"])
    h, w = matplotlib.image.imread(str(png)).shape[:2]
    # text extents at the saving dpi differ from the screen dpi's by a pixel or two
    assert abs(w - region.width * dpi) <= 5 and abs(h - region.height * dpi) <= 5, \
        f"{png.name}: saved {w}x{h} px, not the tight box at {dpi} dpi (style not applied)"
    to_in = fig.dpi_scale_trans.inverted()
    boxes = [(f"axes {ax.get_title() or ax.get_ylabel()!r}", ax.get_tightbbox(renderer))
             for ax in fig.axes if ax.get_visible()]
    texts = [fig._suptitle, fig._supxlabel, fig._supylabel, *fig.texts]
    boxes += [(f"text {t.get_text()!r}", t.get_window_extent(renderer)) for t in texts
              if t is not None and t.get_visible() and t.get_text().strip()]
    boxes += [("figure legend", leg.get_window_extent(renderer)) for leg in fig.legends]
    tol = 1.0 / dpi
    for what, bb in boxes:
        bb = bb.transformed(to_in)
        assert (bb.x0 >= region.x0 - tol and bb.y0 >= region.y0 - tol
                and bb.x1 <= region.x1 + tol and bb.y1 <= region.y1 + tol), \
            f"{png.name}: {what} is clipped ({bb} outside {region})"
    for ax in fig.axes:
        if ax.get_visible() and (ax.lines or ax.patches or ax.collections):
            shared_y = [a for a in ax.get_shared_y_axes().get_siblings(ax) if a.get_ylabel()]
            assert ax.get_xlabel() or any(
                a.get_xlabel() for a in ax.get_shared_x_axes().get_siblings(ax)), \
                f"{png.name}: an axes has no x label"
            assert ax.get_ylabel() or shared_y, f"{png.name}: an axes has no y label"


# ----------------------------------------------------------------------------- tiny results
def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def _poa_braess(res: Path) -> None:
    d = np.linspace(0.25, 30.25, 13)
    rows = [{"demand": x, "price_of_anarchy": 1 + 0.1 * np.sin(x / 5) ** 2,
             "wardrop_tstt": 60 * x, "no_bridge_tstt": 65 * x, "system_optimum_tstt": 55 * x}
            for x in d]
    _write(res / "poa-braess" / "poa_vs_demand.json", {"results": rows})


def _balanceroute(res: Path) -> None:
    pols = ["random", "rr", "p2c", "jsq", "jsq-tokens", "br0", "brh-oracle", "brh-survival"]
    _write(res / "balanceroute" / "scaling.json", {"results": {
        str(g): {p: {"mean_imbalance": 1e4 * g * (1 + k)} for k, p in enumerate(pols)}
        for g in (4, 8, 16)}})
    rng = np.random.default_rng(0)
    _write(res / "balanceroute" / "load_traces.json", {"results": {
        p: {"loads": (4e4 + 1e3 * rng.standard_normal((60, 8))).tolist(), "first_step": 100,
            "mean_imbalance": 5e3} for p in ("jsq", "br0")}})
    _write(res / "balanceroute" / "horizon.json", {"results": {
        str(h): {"brh-oracle": 3e3 + 10 * h, "brh-survival": 3.5e3 + 5 * h}
        for h in (0, 5, 10, 20, 40, 80)}})


def _stability_chart(res: Path) -> None:
    taus = [0.01, 0.05, 0.2]
    sym = [{"mean_delay": t, "lower_bound": 0.1 / t, "upper_bound": 0.16 / t,
            "critical": 0.13 / t, "closed_form": 0.13 / t, "rule": 0.1 / t,
            "simulated": [{"stepsize": 0.1 / t, "verdict": "converges"},
                          {"stepsize": 0.2 / t, "verdict": "oscillates"}]} for t in taus]
    _write(res / "stability-chart" / "stability_chart.json", {
        "symmetric": sym, "scaled": [{"mean_delay": t, "critical": 0.1 / t, "rule": 0.08 / t}
                                     for t in taus],
        "practice": {"symmetric": {"kappa": 0.01}, "scaled": {"kappa": 0.01}},
        "survey": {"gradient": {"ratios": [1.2, 1.5, 2.0], "rule_below_critical": 3,
                                "instances": 3},
                   "rif": {"ratios": [0.8, 1.1], "rule_below_critical": 1, "instances": 2}}})


def _fluid_six_policies(res: Path) -> None:
    t = np.linspace(0, 40, 81)
    runs = [{"cost": c, "mechanism": m, "delay": d, "t": t.tolist(),
             "workload": np.stack([5 + np.sin(t) * d * 10, 5 - np.sin(t)], 1).tolist(),
             "equilibrium_workload": [5.0, 5.0], "tail_amplitude": d * 10}
            for c in ("rif", "latency", "gradient") for m in ("flow", "discrete")
            for d in (0.01, 0.05)]
    _write(res / "fluid-six-policies" / "results.json", {"runs": runs})


def _appendix_b(res: Path) -> None:
    from test_appendix_b import tiny_results  # the Appendix-B collect steps on synthetic cells

    tiny_results(res)


def _appendix_b_linear(res: Path) -> None:
    """Experiment 7's linear-theory summary from its collect step on synthetic runs."""
    import sys

    sys.path.insert(0, str(ROOT / "experiments"))
    sys.path.insert(0, str(ROOT / "tests"))
    import appendix_b_linear as E
    from test_appendix_b_linear import _run

    rows = [({"factor": f, "seed": s}, {**_run(s, 0.1 - 0.1 * f, 1.2 + f, 0.01), "factor": f})
            for f in (0.5, 1.5) for s in range(3)]
    out = res / "appendix-b-linear"
    out.mkdir(parents=True, exist_ok=True)
    E.collect(rows, out, "quick")
    tiny_eta = res / "appendix-b-eta"
    from test_appendix_b import tiny_results  # the issue-25 experiment-7 summary (panel d)

    tiny_results(res)
    assert (tiny_eta / "summary.json").is_file()


DATA = {"appendix_b": _appendix_b, "poa_braess": _poa_braess, "balanceroute": _balanceroute,
        "stability_chart": _stability_chart, "fluid_six_policies": _fluid_six_policies,
        "appendix_b_linear": _appendix_b_linear}


def _load_script(path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"_fig_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _record_saves(monkeypatch, module) -> list:
    saved = []

    def save(fig, path, **kw):
        out = lbio.save_figure_atomic(fig, path, **kw)
        saved.append((fig, Path(path)))
        return out

    monkeypatch.setattr(module, "save_figure_atomic", save)
    return saved


def test_every_script_has_tiny_data():
    assert {p.stem for p in SCRIPTS} == set(DATA), "add tiny results for the new figure script"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_figure_script_renders_unclipped(script, tmp_path, monkeypatch):
    res, out = tmp_path / "results", tmp_path / "out"
    DATA[script.stem](res)
    mod = _load_script(script)
    rel = {"RES": None}
    for name in ("RES",):
        old = getattr(mod, name)
        parts = old.relative_to(ROOT / "experiments" / "results").parts
        rel[name] = res.joinpath(*parts)
        monkeypatch.setattr(mod, name, rel[name])
    monkeypatch.setattr(mod, "OUT", out)
    saved = _record_saves(monkeypatch, mod)
    entry = [getattr(mod, n) for n in ("main", "scaling", "load_traces", "horizon")
             if hasattr(mod, n)]
    for fn in entry:
        fn()
    assert saved, f"{script.name} saved no figure"
    for fig, png in saved:
        assert png.parent == out and png.exists()
        assert_not_clipped(fig, png)


def test_equilibrium_plot_unclipped(tmp_path, monkeypatch):
    """``lbtheory equilibrium --plot`` on the two-cell M/M/1 Pigou network (a short sweep)."""
    from lbtheory.equilibrium import demand_sweep, price_of_anarchy
    from lbtheory.instances import mm1_pigou
    from lbtheory.plotting import plot_equilibria

    net = mm1_pigou(u=1.0, r=0.5)
    util = net.total_demand / float(net.max_rates.sum())
    sweep = demand_sweep(net, np.linspace(0.1, 0.9, 4) / util)
    fig = plot_equilibria(net, price_of_anarchy(net), sweep)
    png = lbio.save_figure_atomic(fig, tmp_path / "eq.png")
    assert_not_clipped(fig, png)


@pytest.mark.parametrize("mechanism", ["flow", "discrete"])
def test_fluid_plot_unclipped(tmp_path, mechanism):
    """``lbtheory fluid --plot`` on a fake three-cell solution (the plotting code only)."""
    from lbtheory.commands import fluid

    t = np.linspace(0, 10, 50)
    n = 3
    routing = np.tile(np.eye(n) * 0.5 + 0.5 / n, (len(t), 1, 1))
    sol = types.SimpleNamespace(t=t, names=("us-east", "eu-west", "asia-se"),
                                workload=np.stack([np.sin(t) + 3] * n, 1),
                                equilibrium_workload=np.array([3.0, 3.0, 3.0]), routing=routing,
                                mechanism=mechanism)
    png = tmp_path / "fluid.png"
    saved = []
    orig = fluid.save_figure_atomic
    try:
        fluid.save_figure_atomic = lambda fig, path: saved.append(fig) or orig(fig, path)
        fluid._plot(sol, str(png))
    finally:
        fluid.save_figure_atomic = orig
    assert_not_clipped(saved[0], png)
