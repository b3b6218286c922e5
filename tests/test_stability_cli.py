"""``lbtheory stepsize`` command: JSON contract, verdicts, typed errors → exit 2."""

import json
import math

import numpy as np
import pytest
import yaml

from lbtheory.cli import main
from lbtheory.instances import spill_example, symmetric_two_cell
from lbtheory.io import topology_to_dict
from lbtheory.models import MM1Latency
from lbtheory.network import Arc, Cell, CellNetwork


def write(tmp_path, net, name="net.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(topology_to_dict(net)))
    return str(path)


def run_json(capsys, argv, code=0):
    assert main(argv) == code
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def sym_path(tmp_path_factory):
    return write(tmp_path_factory.mktemp("stepsize"), symmetric_two_cell())


@pytest.mark.parametrize("eta,verdict", [(0.5, "stable"), (0.6, "unstable")])
def test_json_contract_and_verdict(capsys, sym_path, eta, verdict):
    # exit code 1 when the verdict is unstable (the check failed), 0 when stable
    out = run_json(capsys, ["stepsize", sym_path, "--stepsize", str(eta), "--json"],
                   code=0 if verdict == "stable" else 1)
    assert abs(out["critical_stepsize"] - 0.536158) < 1e-6
    # THEORY §7.6 rule = μ'/(Λ f' 2τ) = 0.32/(12·0.5·0.1)
    assert abs(out["empirical_rule"] - 0.32 / 0.6) < 1e-9
    assert out["verdict"] == verdict
    re, im = out["rightmost_root"]
    assert (re < 0) == (verdict == "stable") and im > 0
    assert abs(out["margin"] - 0.536158128 / eta) < 1e-6
    assert abs(out["closed_form_two_cell"] - out["critical_stepsize"]) < 1e-9
    assert out["status"] == "verified" and out["critical_verified"] is True


def test_text_report(capsys, tmp_path):
    # exit code 1: the verdict is UNSTABLE
    assert main(["stepsize", write(tmp_path, spill_example()), "--stepsize", "0.02"]) == 1
    text = capsys.readouterr().out
    assert "exact critical stepsize: 0.0143024" in text
    assert "NOT a guarantee" in text
    assert "UNSTABLE" in text and "period" in text


def test_latency_cost_and_default_stepsize(capsys, sym_path):
    out = run_json(capsys, ["stepsize", sym_path, "--cost", "latency", "--json"])
    assert abs(out["critical_stepsize"] - 2.68079) < 1e-5
    assert out["stepsize"] == pytest.approx(out["empirical_rule"])
    assert out["verdict"] == "stable"


@pytest.mark.parametrize("bad", ["0", "-0.1", "nan"])
def test_bad_stepsize_exit_2(capsys, sym_path, bad):
    assert main(["stepsize", sym_path, f"--stepsize={bad}"]) == 2
    assert "--stepsize: expected a positive" in capsys.readouterr().err


def test_boundary_equilibrium_exit_2(capsys, tmp_path):
    svc = MM1Latency(10.0, 5.0)
    lam1 = 10.0 - math.sqrt(50.0 / (50.0 / 36.0 + 0.1))  # c1 exactly at its spill threshold
    net = CellNetwork([Cell("c1", 1, lam1, svc), Cell("c2", 1, 4.0, svc)],
                      [Arc("c1", "c1", 0.0), Arc("c1", "c2", 0.05), Arc("c2", "c2", 0.0)])
    assert main(["stepsize", write(tmp_path, net), "--json"]) == 2
    err = capsys.readouterr().err
    assert "equilibrium on the boundary" in err and "c1 -> c2" in err


def test_infeasible_exit_2(capsys, tmp_path):
    net = CellNetwork([Cell("a", 1, 12.0, MM1Latency(10.0, 5.0))], [Arc("a", "a", 0.0)])
    assert main(["stepsize", write(tmp_path, net)]) == 2
    assert "infeasible demand" in capsys.readouterr().err


def test_stable_for_every_stepsize_reports_null(capsys, tmp_path):
    svc = MM1Latency(10.0, 5.0)
    net = CellNetwork([Cell("a", 1, 3.0, svc), Cell("b", 1, 6.0, svc)],
                      [Arc("a", "a", 0.0), Arc("a", "b", 0.05), Arc("b", "b", 0.0)])
    out = run_json(capsys, ["stepsize", write(tmp_path, net), "--stepsize", "50", "--json"])
    assert out["critical_stepsize"] is None  # +inf: no routing degree of freedom
    assert out["verdict"] == "stable"
    assert np.isclose(out["decay_rate"], float(svc.rate_prime(svc.inverse_rate(6.0))))


def test_bad_nodes_exit_2(capsys, sym_path):
    assert main(["stepsize", sym_path, "--nodes", "1"]) == 2
    assert "n_nodes must be an integer >= 2 (Chebyshev degree), got 1" in capsys.readouterr().err
