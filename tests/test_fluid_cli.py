"""``lbtheory fluid`` command."""

import json
import os
import subprocess
import sys

import numpy as np

from lbtheory.cli import main

TOPO = "examples/three_cells.yaml"


def test_json_output_contract(capsys):
    rc = main(["fluid", TOPO, "--mechanism", "flow", "--cost", "gradient", "--stepsize", "0.5",
               "--duration", "30", "--json"])
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
    rc = main(["fluid", TOPO, "--mechanism", "discrete", "--cost", "latency", "--duration", "2",
               "--no-equilibrium", "--plot", str(png)])
    assert rc == 0 and png.stat().st_size > 1000
    assert "final distance to equilibrium: n/a" in capsys.readouterr().out


def test_missing_stepsize_is_an_error(capsys):
    assert main(["fluid", TOPO, "--duration", "1"]) == 2
    assert "error: stepsize: flow routing needs a stepsize" in capsys.readouterr().err


_PRECISION_PROBE = r"""
import contextlib, io, json, sys
import jax
import numpy as np
assert not jax.config.jax_enable_x64  # a fresh interpreter: the global switch is off
from lbtheory.cli import main
from lbtheory.fluid import fluid_sensitivity, simulate_fluid, simulate_fluid_batch
from lbtheory.io import load_topology
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    rc = main(["fluid", sys.argv[1], "--stepsize", "0.5", "--duration", "5", "--no-equilibrium",
               "--json"])
cli = np.array(json.loads(buf.getvalue())["workload"])
net = load_topology(sys.argv[1])
sol = simulate_fluid(net, stepsize=0.5, t1=5.0)
bat = simulate_fluid_batch(net, stepsize=[0.5], t1=5.0)
sens = fluid_sensitivity(net, wrt=["arrival_rates"], stepsize=0.5, t1=1.0, throw=False)
print(json.dumps({"rc": rc, "dtype": str(sol.workload.dtype),
                  "batch_dtype": str(bat.workload.dtype),
                  "grad_dtype": str(sens.gradient["arrival_rates"].dtype),
                  "api_equals_cli": bool(np.array_equal(sol.workload, cli)),
                  "batch_equals_api": bool(np.array_equal(bat.workload[0], sol.workload)),
                  "x64_after": bool(jax.config.jax_enable_x64)}))
"""


def test_api_equals_cli_in_float64_without_the_global_switch():
    """One precision policy: without jax_enable_x64 (fresh interpreter, not this conftest's
    global switch) the API, the batch API and the CLI give the same float64 numbers bit for bit,
    and the caller's setting is left unchanged."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env["OPENBLAS_NUM_THREADS"] = "1"
    r = subprocess.run([sys.executable, "-c", _PRECISION_PROBE, TOPO], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {"rc": 0, "dtype": "float64", "batch_dtype": "float64",
                   "grad_dtype": "float64", "api_equals_cli": True, "batch_equals_api": True,
                   "x64_after": False}
