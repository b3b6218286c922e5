"""``lbtheory fluid`` command."""

import json

import numpy as np

from lbtheory.cli import main

TOPO = "examples/three_cells.yaml"


def test_json_output_contract(capsys):
    rc = main(["fluid", TOPO, "--mechanism", "flow", "--cost", "gradient", "--stepsize", "0.5",
               "--t1", "30", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("t", "workload", "routing", "total_latency_rate",
                "final_distance_to_equilibrium"):
        assert key in out
    assert out["t"][-1] == 30.0
    W = np.array(out["workload"])
    assert W.shape == (len(out["t"]), 3)
    np.testing.assert_allclose(W[-1], out["equilibrium_workload"], rtol=1e-3)
    assert out["final_distance_to_equilibrium"] < 1e-2


def test_text_output_and_plot(tmp_path, capsys):
    png = tmp_path / "f.png"
    rc = main(["fluid", TOPO, "--mechanism", "discrete", "--cost", "latency", "--t1", "2",
               "--no-equilibrium", "--plot", str(png)])
    assert rc == 0 and png.stat().st_size > 1000
    assert "final distance to equilibrium: n/a" in capsys.readouterr().out


def test_missing_stepsize_is_an_error(capsys):
    assert main(["fluid", TOPO, "--t1", "1"]) == 2
    assert "error: stepsize: flow routing needs a stepsize" in capsys.readouterr().err
