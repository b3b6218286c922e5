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
import os
import subprocess
import sys
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
#: the figure scripts (``_figcli.py`` is their shared command line, not a figure)
SCRIPTS = sorted(p for p in (ROOT / "paper_figures").glob("*.py") if not p.name.startswith("_"))
COMMITTED = ROOT / "experiments" / "results"


def assert_not_clipped(fig, png: Path) -> None:
    """The saved PNG is the tight box of ``fig`` and holds every axes box and figure text."""
    with matplotlib.rc_context(STYLE):
        assert matplotlib.rcParams["savefig.bbox"] == "tight"
        dpi = matplotlib.rcParams["savefig.dpi"]
        fig.set_dpi(dpi)  # measure text at the dpi it was saved at
        if not hasattr(fig.canvas, "get_renderer"):  # closed after saving: an Agg canvas again
            from matplotlib.backends.backend_agg import FigureCanvasAgg

            FigureCanvasAgg(fig)
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


def _record_saves(monkeypatch) -> list:
    """Every (figure, path) the scripts save (they all save through :mod:`lbtheory.io`)."""
    saved = []
    orig = lbio.save_figure_atomic

    def save(fig, path, **kw):
        out = orig(fig, path, **kw)
        saved.append((fig, Path(path)))
        return out

    monkeypatch.setattr(lbio, "save_figure_atomic", save)
    return saved


def test_every_script_has_tiny_data():
    assert {p.stem for p in SCRIPTS} == set(DATA), "add tiny results for the new figure script"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_figure_script_renders_unclipped(script, tmp_path, monkeypatch):
    res, out = tmp_path / "results", tmp_path / "out"
    DATA[script.stem](res)
    saved = _record_saves(monkeypatch)
    _load_script(script).main(res, out)
    assert saved, f"{script.name} saved no figure"
    for fig, png in saved:
        assert png.parent == out and png.exists()
        assert_not_clipped(fig, png)


#: the PNGs each script draws from the committed results (every figure of ``make figures``)
FIGURES = {"appendix_b": 7, "appendix_b_linear": 1, "balanceroute": 5, "fluid_six_policies": 1,
           "poa_braess": 1,
           "stability_chart": 1}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_figure_script_draws_every_figure_from_committed_results(script, tmp_path, monkeypatch):
    """``make figures`` on a fresh clone: every figure from the committed results, no sweep."""
    saved = _record_saves(monkeypatch)
    paths = _load_script(script).main(COMMITTED, tmp_path)
    paths = paths if isinstance(paths, list) else [paths]
    assert len(paths) == len(saved) == FIGURES[script.stem]
    for fig, png in saved:
        assert png.parent == tmp_path and png.stat().st_size > 10_000
        assert_not_clipped(fig, png)


def test_missing_results_exit_2_with_one_line(tmp_path):
    """A figure script whose results are missing: exit 2, one line naming the sweep that
    writes them (the quick one for a folder other than the committed results), no traceback;
    nothing written."""
    none = tmp_path / "none"
    for script in SCRIPTS:
        r = subprocess.run([sys.executable, str(script), "--results", str(none),
                            "--out", str(tmp_path / "out")], capture_output=True, text=True,
                           cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)}, timeout=120)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2, (script.name, r.stderr)
        assert len(lines) == 1 and lines[0].startswith(f"error: {none}/") and \
            f"--quick --out {none}`" in lines[0], (script.name, r.stderr)
        assert "Traceback" not in r.stderr and r.stdout == ""
        assert not (tmp_path / "out").exists()


def test_missing_committed_results_name_the_committed_profile_and_its_time():
    """For the committed results the line names the profile that made them and its wall time."""
    figcli = _load_script(ROOT / "paper_figures" / "_figcli.py")
    with pytest.raises(figcli.MissingResults) as err:
        figcli.require(figcli.RESULTS, "appendix-b-baseline/summary.json", "no/such.json",
                       sweep="appendix-b", profile="full", minutes=57)
    assert str(err.value) == (f"{COMMITTED / 'no/such.json'} not found: run `lbtheory sweep "
                              f"appendix-b --profile full` (~57 min on 2 cores) to write it, "
                              f"or pass --results DIR")
    with pytest.raises(figcli.MissingResults, match=r"`lbtheory sweep poa-braess` \(~18 s on"):
        figcli.require(COMMITTED, "no.json", sweep="poa-braess", minutes=0.3)
    with pytest.raises(figcli.MissingResults, match=r"`lbtheory sweep x --quick` \(a smoke"):
        figcli.require(figcli.QUICK, "no.json", sweep="x", minutes=1)


# ----------------------------------------------------------------------------- backends
def _backend_after(code: str, env: dict[str, str]) -> str:
    base = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env=base | {"PYTHONPATH": str(ROOT)} | env, timeout=120, check=True)
    return r.stdout.strip().lower()


def test_figure_keeps_the_callers_backend():
    """``lbtheory.plotting`` never switches the backend (it broke inline plots in Jupyter):
    after ``figure()`` and a save, the backend a session chose is still its own."""
    code = ("import matplotlib; matplotlib.use('svg'); import lbtheory.plotting as p; "
            "from lbtheory.io import save_figure_atomic; import tempfile, pathlib; "
            "fig, ax = p.figure(); ax.plot([0, 1]); "
            "save_figure_atomic(fig, pathlib.Path(tempfile.mkdtemp()) / 'f.png'); "
            "print(matplotlib.get_backend())")
    assert _backend_after(code, {}) == "svg"


@pytest.mark.parametrize(("env", "expected"), [({}, "agg"), ({"MPLBACKEND": "svg"}, "svg")])
def test_cli_chooses_a_non_interactive_backend_unless_told(env, expected):
    """The ``lbtheory`` command (not the library) picks Agg; ``MPLBACKEND`` wins."""
    code = ("from lbtheory import cli; cli._non_interactive_backend(); import matplotlib; "
            "print(matplotlib.get_backend())")
    assert _backend_after(code, env) == expected


def test_simulate_plot_keeps_every_legend_with_many_policies(tmp_path):
    """``simulate --plot`` with 4 policies × 5 cells (it used to drop the workload legend above
    12 lines and draw 20 lines in one panel): one workload panel per policy, one legend entry
    per policy in the CDF panel, one per cell and event below, nothing clipped."""
    from lbtheory.commands import simulate

    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 60.0, 121)
    pols, cells = ["rand", "jsq", "flow-grad", "disc-lat"], [f"c{j}" for j in range(5)]
    results = [types.SimpleNamespace(
        policy=p, latency_s=rng.exponential(1.0 + 0.1 * k, 400), done=np.ones(400, bool),
        names=cells, series_t=t, series_workload=rng.uniform(0, 50, (t.size, len(cells))))
        for k, p in enumerate(pols)]
    ev = types.SimpleNamespace(start_s=20.0, end_s=40.0, cell=1)
    sc = types.SimpleNamespace(bursts=[ev], outages=[], network=types.SimpleNamespace(names=cells))
    saved = []
    orig = simulate.save_figure_atomic
    try:
        simulate.save_figure_atomic = lambda fig, path: saved.append(fig) or orig(fig, path)
        simulate._plot(results, str(tmp_path / "sim.png"), sc)
    finally:
        simulate.save_figure_atomic = orig
    fig = saved[0]
    titles = [ax.get_title() for ax in fig.axes]
    assert [p for p in pols if any(tt.startswith(f"{p}:") for tt in titles)] == pols
    cdf = next(ax for ax in fig.axes if ax.get_title() == "latency distribution")
    assert [x.get_text() for x in cdf.get_legend().get_texts()] == pols
    (below,) = fig.legends
    assert [x.get_text() for x in below.get_texts()] == [f"cell {c}" for c in cells] + \
        ["burst at c1"]
    assert_not_clipped(fig, tmp_path / "sim.png")


def test_style_keeps_an_interactive_mode_turned_on_inside():
    """Jupyter's inline backend starts with the first figure, inside :func:`style`, and turns
    interactive mode on; restoring every rcParam afterwards turned it off again, so no later
    figure of the notebook showed. Every other rcParam is restored."""
    from lbtheory.plotting import style

    was, dpi = matplotlib.is_interactive(), matplotlib.rcParams["savefig.dpi"]
    try:
        matplotlib.interactive(False)
        with style():
            assert matplotlib.rcParams["savefig.dpi"] == STYLE["savefig.dpi"]
            matplotlib.interactive(True)  # what the inline backend's activation does
        assert matplotlib.is_interactive()
        assert matplotlib.rcParams["savefig.dpi"] == dpi
        with style():
            matplotlib.interactive(False)
        assert not matplotlib.is_interactive()
    finally:
        matplotlib.interactive(was)
