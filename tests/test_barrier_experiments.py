"""The BalanceRoute sweep experiments (quick profiles): cells, aggregation and summary files.

Oracles: direct simulator runs made here, the 95 % Student-t quantile for one degree of freedom
(12.7062, from tables), gains recomputed from the stored whole-trace numbers.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from lbtheory.barrier import DecodeConfig, simulate_decode
from lbtheory.registry import make_router
from lbtheory.sweep import run_sweep
from lbtheory.workloads import read_trace

ROOT = Path(__file__).resolve().parents[1]
EXP = ROOT / "experiments"


def _module(name: str):
    if str(EXP) not in sys.path:
        sys.path.insert(0, str(EXP))
    spec = importlib.util.spec_from_file_location(f"_t_{name}", EXP / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_t_interval_matches_the_table_quantile():
    common = _module("_balanceroute_common")
    ci = common.t_interval([10.0, 14.0])  # mean 12, s = 2√2, n = 2: 12.7062 · 2√2 / √2 = 25.41
    assert ci["mean"] == 12.0 and ci["half_width"] == pytest.approx(12.7062 * 2.0, rel=1e-4)
    assert np.isnan(common.t_interval([3.0])["half_width"])


def test_tables_quick_profile(tmp_path):
    mod = _module("balanceroute_tables")
    exp = next(e for e in mod.EXPERIMENTS if e.name == "balanceroute-tables")
    run_sweep(exp, profile="quick", backend="serial", out_dir=tmp_path, progress=False)
    out = json.loads((tmp_path / "balanceroute-tables" / "tables.json").read_text())
    table = out["table"]["conv"]["8"]
    # the whole-trace cell is the simulator on the first 400 requests (run here directly)
    tr = read_trace(ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_conv.csv").head(400)
    want = simulate_decode(tr, make_router("br0", "replicas"),
                           config=DecodeConfig(replicas=8)).summary()["mean_imbalance"]
    assert table["br0"]["whole"]["mean_imbalance"] == pytest.approx(want)
    # windows: the two halves; mean ± t(0.975, 1)·s/√2
    w = [r["mean_imbalance"] for r in table["br0"]["windows"]]
    half = simulate_decode(tr.head(200), make_router("br0", "replicas"),
                           config=DecodeConfig(replicas=8)).summary()["mean_imbalance"]
    assert w[0] == pytest.approx(half)
    ci = table["br0"]["mean_imbalance_windows"]
    assert ci["half_width"] == pytest.approx(12.7062 * np.std(w, ddof=1) / np.sqrt(2), rel=1e-4)
    gain = 100 * (table["br0"]["whole"]["throughput"] / table["jsq"]["whole"]["throughput"] - 1)
    assert table["br0"]["throughput_gain_vs_jsq_pct"] == pytest.approx(gain)
    md = (tmp_path / "balanceroute-tables" / "tables.md").read_text()
    assert "## conv, G = 8" in md and "104,737 / 785" in md  # the seed's Azure-2024 JSQ row


def test_ablation_quick_profile(tmp_path):
    mod = _module("balanceroute_ablation")
    run_sweep(mod.EXPERIMENT, profile="quick", backend="serial", out_dir=tmp_path,
              progress=False)
    cells = json.loads((tmp_path / "balanceroute-ablation" / "ablation.json").read_text())["cells"]
    by = {c["label"]: c for c in cells}
    # H = 0 is BR-0 (THEORY §9.4), so its ratio to BR-0 is exactly 1
    assert by["brh H=0"]["over_br0"] == 1.0
    assert by["br0"]["result"]["mean_imbalance"] == by["brh H=0"]["result"]["mean_imbalance"]
