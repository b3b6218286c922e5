"""The topology and scenario file formats (issue 33.2): the shipped JSON Schemas validate every
example, agree with the loader on bad files (both reject, both name the field), match the
code's fields, and are documented field by field in docs/topology.md."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from lbtheory.cli import main
from lbtheory.errors import LBTheoryError
from lbtheory.io import SCHEMA_KINDS, load_schema, read_config_file, topology_from_dict
from lbtheory.models import MODEL_REGISTRY
from lbtheory.network import LIMITS
from lbtheory.sim import Affinity, Estimation, RateVariation, ServerSpec, scenario_from_dict

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
DOC = ROOT / "docs" / "topology.md"


def _validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = load_schema(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _schema_errors(kind: str, data) -> str:
    """Every schema error (nested ones included) as one string: paths and messages."""
    out = []
    stack = list(_validator(kind).iter_errors(data))
    while stack:
        e = stack.pop()
        out.append("/".join(str(p) for p in e.absolute_path) + ": " + e.message)
        stack.extend(e.context or [])
    return "\n".join(out)


def test_examples_exist_and_validate_against_both_schemas():
    names = [p.name for p in EXAMPLES]
    assert {"three_cells.yaml", "four_cells.yaml", "sim_two_cells.yaml"} <= set(names)
    for p in EXAMPLES:
        data = read_config_file(p, "scenario")
        for kind in SCHEMA_KINDS:  # a scenario file is a topology file too
            assert _schema_errors(kind, data) == "", (p.name, kind)


def test_schema_command_prints_the_shipped_file(capsys):
    for kind in SCHEMA_KINDS:
        assert main(["schema", kind]) == 0
        assert json.loads(capsys.readouterr().out) == load_schema(kind)
        assert (ROOT / "lbtheory" / "schemas" / f"{kind}.schema.json").is_file()


def test_the_schemas_have_the_code_s_fields():
    topo, scen = load_schema("topology"), load_schema("scenario")
    # the scenario schema is the topology schema plus the simulation section
    assert {k: v for k, v in scen["$defs"].items() if k in topo["$defs"]} == topo["$defs"]
    assert set(scen["$defs"]) - set(topo["$defs"]) == {"simulation", "server"}
    assert {k: v for k, v in scen["properties"].items() if k != "simulation"} == \
        {k: v for k, v in topo["properties"].items() if k != "simulation"}
    d = topo["$defs"]
    builtin = {n for n, c in MODEL_REGISTRY.items() if c.__module__ == "lbtheory.models"}
    assert set(d["service"]["properties"]["model"]["enum"]) == builtin
    for name in builtin:
        fields = {f.name for f in dataclasses.fields(MODEL_REGISTRY[name])}
        assert set(d[f"model_{name}"]["properties"]) == fields | {"model"}, name
        assert set(d[f"model_{name}"]["required"]) == fields | {"model"}, name
    cell = d["cell"]["properties"]
    assert cell["replicas"]["maximum"] == LIMITS["replicas"][1]
    assert cell["arrival_rate"]["maximum"] == LIMITS["arrival_rate"][1]
    assert d["arc"]["properties"]["delay"]["maximum"] == LIMITS["delay"][1]
    sim = scen["$defs"]["simulation"]["properties"]
    assert set(scen["$defs"]["server"]["properties"]) == \
        {f.name for f in dataclasses.fields(ServerSpec)}
    for key, cls in (("estimation", Estimation), ("affinity", Affinity),
                     ("rate_variation", RateVariation)):
        assert set(sim[key]["properties"]) == {f.name for f in dataclasses.fields(cls)}, key


def test_every_field_is_documented():
    text = DOC.read_text()
    for kind in SCHEMA_KINDS:
        stack = [load_schema(kind)]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                for key in node.get("properties", {}):
                    assert f"`{key}`" in text, f"docs/topology.md does not describe `{key}`"
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)


def _json(capsys, argv, rc=0):
    assert main(argv) == rc
    return json.loads(capsys.readouterr().out)


def test_the_worked_example_runs_under_all_four_commands(capsys):
    """docs/topology.md's example: equilibrium, stepsize, fluid, simulate on one file, and the
    numbers agree across commands."""
    import numpy as np

    from lbtheory.io import load_topology

    f = str(ROOT / "examples" / "four_cells.yaml")
    net = load_topology(f)
    eq = _json(capsys, ["equilibrium", f, "--json"])["equilibria"]
    ward = eq["wardrop"]
    lat = np.asarray(net.models.latency(np.array(ward["workload"])))
    # Wardrop: the arcs each source uses have its least ℓ_j + 2τ_ij (oracle: the definition)
    cost = lat[None, :] + 2.0 * net.delays
    x = np.array(ward["routing"])
    for i in np.flatnonzero(net.arrival_rates > 0):
        assert np.allclose(cost[i, x[i] > 1e-6], cost[i, net.adjacency[i]].min(), atol=1e-6)
    assert np.allclose(np.array(ward["inflow"]).sum(), 950.0)
    assert np.isclose(np.asarray(ward["routing"])[3, 3], 1.0)  # madrid may only serve itself…
    # stepsize: continuous updates, and with simulate's 10-ms probe period
    st0 = _json(capsys, ["stepsize", f, "--json"])
    st1 = _json(capsys, ["stepsize", f, "--probe-period", "0.01", "--json"])
    assert st0["verdict"] == "stable" and st0["probe_period_s"] == 0.0
    assert st0["max_delay_s"] == 0.018
    assert st1["critical_stepsize"] < st0["critical_stepsize"]  # longer feedback loops
    # beyond η_crit the verdict is unstable, exit code 1
    _json(capsys, ["stepsize", f, "--stepsize", str(1.5 * st0["critical_stepsize"]), "--json"],
          rc=1)
    # fluid below η_crit converges to the system optimum (gradient cost)
    fl = _json(capsys, ["fluid", f, "--stepsize", "20", "--duration", "20", "--json"])
    assert fl["status"] == "converged"
    assert np.allclose(fl["equilibrium_workload"], eq["system_optimum"]["workload"], rtol=1e-6)
    assert fl["final_distance_to_equilibrium"] < 1e-3
    # simulate (short): rate servers, and the same η_crit as stepsize --probe-period 0.01
    sim = _json(capsys, ["simulate", f, "--policy", "rand,flow-grad", "--duration", "10",
                         "--json"])
    assert sim["servers"]["service_models"] is True
    crit = sim["policies"]["flow-grad"]["stepsize"]
    assert crit["eta_crit"] == pytest.approx(st1["critical_stepsize"], rel=1e-9)
    assert crit["eta_crit_continuous"] == pytest.approx(st0["critical_stepsize"], rel=1e-9)
    assert crit["eta_rule"].startswith("default 0.00593/(mean one-way delay")
    for pol in sim["policies"].values():
        assert pol["errors"] == 0 and pol["requests"] > 8000  # 950 req/s × 10 s
        served = [c["mean_serving_latency"] for c in pol["per_cell"]]
        # rate servers: every cell's serving latency is of the order of the file's ℓ_j (the
        # appendix_b servers this file got before issue 33 gave 5× Wardrop's)
        assert np.all((np.asarray(served) > 0.5 * lat) & (np.asarray(served) < 2 * lat))


# -- bad files: (what, edit, the field both must name) ---------------------------------------
TOPOLOGY_CASES = [
    ("mm1 without K", lambda d: d["cells"][0]["service"].pop("K"), "K"),
    ("unknown model", lambda d: d["cells"][0]["service"].update(model="exp_saturation"),
     "model"),
    ("softplus parameter of mm1", lambda d: d["cells"][0]["service"].update(knee=3.0), "knee"),
    ("replicas 0", lambda d: d["cells"][0].update(replicas=0), "replicas"),
    ("replicas 2.5", lambda d: d["cells"][0].update(replicas=2.5), "replicas"),
    ("negative arrival rate", lambda d: d["cells"][1].update(arrival_rate=-1.0),
     "arrival_rate"),
    ("negative delay", lambda d: d["arcs"][1].update(delay=-0.01), "delay"),
    ("delay of 2 h", lambda d: d["arcs"][1].update(delay=7200.0), "delay"),
    ("capacity on the cell", lambda d: d["cells"][0].update(capacity=50.0), "capacity"),
    ("arc without 'to'", lambda d: d["arcs"][0].pop("to"), "to"),
    ("unknown top-level key", lambda d: d.update(links=[]), "links"),
    ("no arcs", lambda d: d.pop("arcs"), "arcs"),
    ("no cells", lambda d: d.update(cells=[]), "cells"),
    ("empty name", lambda d: d["cells"][0].update(name=""), "name"),
    ("softness 0", lambda d: d["cells"][2]["service"].update(softness=0.0), "softness"),
    ("negative K", lambda d: d["cells"][3]["service"].update(K=-5.0), "K"),
]

SCENARIO_CASES = [
    ("unknown server kind", lambda s: s["server"].update(kind="gpu"), "kind"),
    ("unknown server field", lambda s: s["server"].update(gpus=4), "gpus"),
    ("zero probe period", lambda s: s.update(probe_period_s=0.0), "probe_period_s"),
    ("unknown leaf policy", lambda s: s.update(leaf_policy="random"), "leaf_policy"),
    ("burst without factor", lambda s: s["bursts"][0].pop("factor"), "factor"),
    ("outage of 0 replicas", lambda s: s["outages"][0].update(replicas=0), "replicas"),
    ("noise_eps 1", lambda s: s.update(estimation={"noise_eps": 1.0}), "noise_eps"),
    ("sigma 4", lambda s: s.update(rate_variation={"sigma": 4.0}), "sigma"),
    ("followup_fraction 1.5", lambda s: s.update(affinity={"followup_fraction": 1.5}),
     "followup_fraction"),
    ("negative queue_limit", lambda s: s["server"].update(queue_limit=-1), "queue_limit"),
    ("unknown simulation key", lambda s: s.update(servers={}), "servers"),
    ("negative prefill time", lambda s: s["server"].update(prefill_s_per_token=-1e-4),
     "prefill_s_per_token"),
    ("zero decode engines", lambda s: s["cells"]["far"].update(decode_engines=0),
     "decode_engines"),
]


@pytest.mark.parametrize("what,edit,field", TOPOLOGY_CASES, ids=[c[0] for c in TOPOLOGY_CASES])
def test_a_bad_topology_is_rejected_by_schema_and_loader_naming_the_field(what, edit, field):
    data = copy.deepcopy(read_config_file(ROOT / "examples" / "four_cells.yaml", "topology"))
    assert _schema_errors("topology", data) == ""
    topology_from_dict(copy.deepcopy(data))  # the unedited file loads
    edit(data)
    errors = _schema_errors("topology", data)
    assert errors and field in errors, (what, errors)
    with pytest.raises(LBTheoryError) as exc:
        topology_from_dict(data, path="four_cells.yaml")
    assert field in str(exc.value), (what, str(exc.value))


@pytest.mark.parametrize("what,edit,field", SCENARIO_CASES, ids=[c[0] for c in SCENARIO_CASES])
def test_a_bad_scenario_is_rejected_by_schema_and_loader_naming_the_field(what, edit, field):
    data = yaml.safe_load((ROOT / "examples" / "sim_two_cells.yaml").read_text())
    scenario_from_dict(copy.deepcopy(data))
    edit(data["simulation"])
    errors = _schema_errors("scenario", data)
    assert errors and field in errors, (what, errors)
    with pytest.raises(LBTheoryError) as exc:
        scenario_from_dict(data, path="sim_two_cells.yaml")
    assert field in str(exc.value), (what, str(exc.value))
