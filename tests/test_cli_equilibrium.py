"""The `lbtheory equilibrium` command: table, JSON contract, exit code 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sympy as sp
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
        assert sum(eq["inflow"]) == pytest.approx(64.0, rel=1e-9)  # Λ = 30 + 24 + 10 req/s
    assert out["price_of_anarchy"] >= 1.0 and out["rif_ratio"] >= 1.0
    # residency: eu-west (row 1) never sends to asia-se (column 2)
    assert out["equilibria"]["system_optimum"]["routing"][1][2] == 0.0


#: one frontend f (λ = 12 req/s, no self-arc) and two M/M/1 cells a (μ̄ = 15, K = 4) and
#: b (μ̄ = 12, K = 2) at one-way delays 0.01 s and 0.05 s (all three equilibria split)
TWO_CELL = """
name: two_cell
cells:
  - {name: a, replicas: 1, arrival_rate: 0.0, service: {model: mm1, capacity: 15.0, K: 4.0}}
  - {name: b, replicas: 1, arrival_rate: 0.0, service: {model: mm1, capacity: 12.0, K: 2.0}}
  - {name: f, replicas: 1, arrival_rate: 12.0, service: {model: mm1, capacity: 1.0, K: 1.0}}
arcs:
  - {from: f, to: a, delay: 0.01}
  - {from: f, to: b, delay: 0.05}
"""


def _two_cell_closed_forms():
    """Sympy: inflow z to cell a at each equilibrium and the mean end-to-end latency
    (Σ_j N_j + Σ 2τ f)/Λ with N = Kz/(μ̄ − z) (M/M/1 workload)."""
    z = sp.symbols("z", real=True)
    L, (m1, k1), (m2, k2) = 12, (15, 4), (12, 2)
    g1, g2 = sp.Rational(2, 100), sp.Rational(10, 100)  # 2τ (s)
    work = lambda m, k, x: k * x / (m - x)  # noqa: E731
    equal = {"wardrop": sp.Eq(k1 / (m1 - z) + g1, k2 / (m2 - (L - z)) + g2),
             "system_optimum": sp.Eq(k1 * m1 / (m1 - z) ** 2 + g1,
                                     k2 * m2 / (m2 - (L - z)) ** 2 + g2),
             "rif": sp.Eq(work(m1, k1, z), work(m2, k2, L - z))}
    mean = {}
    for kind, eqn in equal.items():
        num = sp.numer(sp.together(eqn.lhs - eqn.rhs))
        (za,) = [r for r in sp.Poly(num, z).real_roots() if 0 < r < L and r < m1 and L - r < m2]
        cost = work(m1, k1, za) + work(m2, k2, L - za) + g1 * za + g2 * (L - za)
        mean[kind] = (float(za), float(cost / L))
    return mean


def test_json_numbers_match_sympy_closed_forms(tmp_path, capsys):
    path = tmp_path / "two_cell.yaml"
    path.write_text(TWO_CELL)
    assert main(["equilibrium", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = _two_cell_closed_forms()
    for kind, (za, mean) in ref.items():
        eq = out["equilibria"][kind]
        assert eq["status"] == "optimal"
        assert eq["inflow"][0] == pytest.approx(za, rel=1e-8)
        assert eq["mean_latency"] == pytest.approx(mean, rel=1e-9)
        assert eq["total_latency_rate"] == pytest.approx(12.0 * mean, rel=1e-9)
    assert out["price_of_anarchy"] == pytest.approx(
        ref["wardrop"][1] / ref["system_optimum"][1], rel=1e-9)
    assert out["rif_ratio"] == pytest.approx(ref["rif"][1] / ref["system_optimum"][1], rel=1e-9)
    assert out["price_of_anarchy"] > 1.0 + 1e-4  # a real gap, not 1 by symmetry


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
