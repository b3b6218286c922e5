"""The `lbtheory equilibrium` command: table, JSON contract, exit code 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lbtheory.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "three_cells.yaml"


def test_json_contract(capsys):
    assert main(["equilibrium", str(EXAMPLE), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"cells", "equilibria", "price_of_anarchy", "rif_ratio"}
    assert set(out["equilibria"]) == {"wardrop", "system_optimum", "rif"}
    for eq in out["equilibria"].values():
        assert set(eq) >= {"routing", "inflow", "workload", "mean_latency",
                           "total_latency_rate", "residual", "status"}
        assert eq["status"] == "optimal" and eq["residual"] <= 1e-6
        assert len(eq["routing"]) == 3 and all(len(r) == 3 for r in eq["routing"])
        # Little's law: mean latency = total latency rate / Λ
        assert eq["mean_latency"] == pytest.approx(eq["total_latency_rate"] / 64.0, rel=1e-12)
    so = out["equilibria"]["system_optimum"]["total_latency_rate"]
    assert out["price_of_anarchy"] == pytest.approx(
        out["equilibria"]["wardrop"]["total_latency_rate"] / so, rel=1e-12)
    assert out["price_of_anarchy"] >= 1.0 and out["rif_ratio"] >= 1.0
    # residency: eu-west (row 1) never sends to asia-se (column 2)
    assert out["equilibria"]["system_optimum"]["routing"][1][2] == 0.0


def test_table_output(capsys):
    assert main(["equilibrium", str(EXAMPLE)]) == 0
    text = capsys.readouterr().out
    assert "price of anarchy" in text and "System optimum" in text and "us-east" in text


def test_infeasible_demand_exit_2(tmp_path, capsys):
    data = yaml.safe_load(EXAMPLE.read_text())
    for c in data["cells"]:
        c["arrival_rate"] *= 3
    path = tmp_path / "hot.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["equilibrium", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: infeasible demand (Assumption 2)")
    assert "short by 22 req/s" in err


def test_solver_failure_exit_2(capsys):
    assert main(["equilibrium", str(EXAMPLE), "--solver", "NOPE"]) == 2
    assert "NOPE" in capsys.readouterr().err


def test_missing_file_exit_2(capsys):
    assert main(["equilibrium", "does_not_exist.yaml"]) == 2
    assert "does_not_exist.yaml" in capsys.readouterr().err


def test_console_script_runs_without_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cells: []\narcs: []\n")
    proc = subprocess.run([sys.executable, "-m", "lbtheory.cli", "equilibrium", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "at least one cell" in proc.stderr
