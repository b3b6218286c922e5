"""Topology files and CellNetwork validation: every bad input gets a typed, named error."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from lbtheory.errors import DataFormatError, FeasibilityStatus, ModelError, TopologyError
from lbtheory.io import load_topology, topology_from_dict, topology_to_dict, write_json_atomic
from lbtheory.models import MM1Latency
from lbtheory.network import Arc, Cell, CellNetwork

BASE = {
    "cells": [
        {"name": "a", "replicas": 4, "arrival_rate": 30.0,
         "service": {"model": "mm1", "capacity": 40.0, "K": 4.0}},
        {"name": "b", "replicas": 8, "arrival_rate": 10.0,
         "service": {"model": "softplus", "base_latency": 0.5, "slope": 0.01, "knee": 30.0,
                     "softness": 5.0}},
    ],
    "arcs": [{"from": "a", "to": "a", "delay": 0.0}, {"from": "a", "to": "b", "delay": 0.03},
             {"from": "b", "to": "b", "delay": 0.0}],
}


def variant(edit):
    data = json.loads(json.dumps(BASE))
    edit(data)
    return data


def test_issue_schema_loads_and_round_trips(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(BASE))
    net = load_topology(path)
    assert net.names == ("a", "b")
    np.testing.assert_allclose(net.arrival_rates, [30.0, 10.0])
    np.testing.assert_allclose(net.max_rates, [40.0, 100.0])
    assert net.adjacency.tolist() == [[True, True], [False, True]]
    assert net.delays[0, 1] == 0.03
    again = topology_from_dict(topology_to_dict(net))
    assert topology_to_dict(again) == topology_to_dict(net)
    write_json_atomic(tmp_path / "t.json", topology_to_dict(net))
    assert load_topology(tmp_path / "t.json").names == ("a", "b")


@pytest.mark.parametrize("edit,err,match", [
    (lambda d: d["arcs"].append({"from": "a", "to": "zz", "delay": 0.1}), TopologyError,
     r"arcs\[3\] \(a -> zz\): unknown cell 'zz' in 'target'"),
    (lambda d: d["cells"][1].update(name="a"), TopologyError, "duplicate cell name 'a'"),
    (lambda d: d["cells"][0].update(arrival_rate=-1.0), TopologyError,
     r"cell 'a': arrival_rate must be non-negative, got -1.0 \(cell 'a': arrival_rate: "
     r"expected a non-negative finite number of req/s\)"),
    (lambda d: d["cells"][0].update(arrival_rate=float("nan")), TopologyError,
     "arrival_rate must be finite and non-negative, got nan"),
    (lambda d: d["arcs"][1].update(delay=-0.5), TopologyError,
     r"arc a -> b: delay must be non-negative, got -0.5 \(.*finite number of s\)"),
    (lambda d: d["arcs"][1].update(delay=float("inf")), TopologyError, "arc a -> b: delay"),
    (lambda d: d["cells"][0]["service"].update(capacity=-40.0), ModelError,
     r"cells\[0\] \(a\).service: MM1Latency.capacity must be positive, got -40.0"),
    (lambda d: d["cells"][1].update(replicas=0), TopologyError,
     r"cell 'b': replicas must be an integer in \[1, 1000000\] \(servers\), got 0"),
    (lambda d: d["cells"][1].update(replicas=2.5), TopologyError, "replicas must be an integer"),
    (lambda d: d["arcs"].pop(2), TopologyError,
     "cell 'b' has arrivals .* but no outgoing arc"),
    (lambda d: d["cells"][1]["service"].update(base_latency=0.2), ModelError,
     r"cells\[1\] \(b\).service: SoftplusLatency needs base_latency > slope\*knee"),
    (lambda d: d["cells"][0].pop("replicas"), TopologyError,
     r"cells\[0\]: missing field 'replicas'"),
    (lambda d: d["cells"][0].update(arrival_rate="lots"), TopologyError,
     r"cell 'a': arrival_rate must be a real number \(non-negative\), got 'lots'"),
    (lambda d: d["arcs"][1].update(delay="soon"), TopologyError,
     r"arc a -> b: delay must be a real number \(non-negative\), got 'soon'"),
    (lambda d: d["cells"][0].update(replicas=10**400), TopologyError,
     r"cell 'a': replicas must be an integer in \[1, 1000000\] \(servers\), got 1000"),
    (lambda d: d["cells"][0].update(arrival_rate=10**400), TopologyError,
     r"cell 'a': arrival_rate must be finite and non-negative, got 1000"),
    (lambda d: d["arcs"].append({"from": "a", "to": "b", "delay": 0.1}), TopologyError,
     "duplicate arc a -> b"),
    (lambda d: d.pop("arcs"), TopologyError, "missing top-level key 'arcs'"),
    (lambda d: d.update(links=[]), TopologyError, r"unknown key\(s\) \['links'\]"),
    (lambda d: d["arcs"][0].update(weight=1), TopologyError, r"arcs\[0\]: unknown field"),
])
def test_bad_topologies_raise_named_errors(tmp_path, edit, err, match):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(variant(edit)))
    with pytest.raises(err, match=match) as info:
        load_topology(path)
    assert str(path) in str(info.value)


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("cells:\n  - {name: a, replicas: 4\narcs: []\n")
    with pytest.raises(DataFormatError, match=r"broken.yaml:\d+: not valid YAML"):
        load_topology(path)


def test_network_api_errors_and_views():
    svc = MM1Latency(10.0, 1.0)
    with pytest.raises(TopologyError, match="at least one cell"):
        CellNetwork([], [])
    with pytest.raises(TopologyError, match="expected a non-empty string"):
        CellNetwork([Cell("", 1, 0.0, svc)], [])
    with pytest.raises(TopologyError, match="service must be a ServiceModel"):
        CellNetwork([Cell("a", 1, 0.0, "mm1")], [])  # type: ignore[arg-type]
    net = CellNetwork([Cell("a", 1, 2.0, svc), Cell("b", 2, 0.0, svc)],
                      [Arc("a", "a"), Arc("a", "b", 0.02)])
    assert net.index("b") == 1
    with pytest.raises(TopologyError, match="unknown cell 'c'"):
        net.index("c")
    with pytest.raises(TopologyError, match="expected 2 values"):
        net.with_arrival_rates([1.0])
    np.testing.assert_allclose(net.uniform_routing(), [[0.5, 0.5], [0.0, 0.0]])
    assert net.max_delay == 0.02 and net.total_demand == 2.0


def test_min_cost_routing_column_generation_matches_direct_lp():
    import scipy.sparse as sp
    from scipy.optimize import linprog

    from lbtheory.instances import full_mesh
    from lbtheory.network import min_cost_routing

    net = full_mesh(75, seed=3)  # 5,625 arcs: priced column generation
    src, dst = net.arc_pairs
    cost = 2.0 * net.delays[src, dst]
    z = net.total_demand * net.max_rates / net.max_rates.sum()
    f = min_cost_routing(net, cost, z)
    # the oracle: the whole transportation LP, written here, solved by HiGHS in one go
    m, cols = len(src), np.arange(len(src))
    A = sp.csr_matrix((np.ones(2 * m), (np.concatenate([src, net.n + dst]),
                                         np.concatenate([cols, cols]))), shape=(2 * net.n, m))
    direct = linprog(cost, A_eq=A, b_eq=np.concatenate([net.arrival_rates, z]),
                     bounds=(0, None), method="highs")
    assert direct.status == 0
    assert cost @ f == pytest.approx(direct.fun, rel=1e-10)
    np.testing.assert_allclose(np.bincount(dst, f, net.n), z, atol=1e-9)
    np.testing.assert_allclose(np.bincount(src, f, net.n), net.arrival_rates, atol=1e-9)


def test_atomic_write_leaves_no_temporary_and_normal_permissions(tmp_path):
    import os
    import stat

    path = write_json_atomic(tmp_path / "sub" / "r.json", {"a": np.float64(1.5), "b": [np.nan]})
    assert json.loads(path.read_text()) == {"a": 1.5, "b": [None]}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]
    mode = stat.S_IMODE(os.stat(path).st_mode)
    assert mode & stat.S_IRGRP  # readable by the group (not mkstemp's 0600)


def test_feasibility_report_slack_hand_case():
    # a: λ = 30, μ̄ = 40; b: λ = 10, μ̄ = 100; arcs a→a, a→b, b→b. Slack on a is 40 − f_aa and on
    # b is 90 − f_ab with f_aa + f_ab = 30: both ≥ 40 at f_aa = 0, so s* = 40 req/s.
    rep = topology_from_dict(BASE).check_feasibility()
    assert rep.slack == pytest.approx(40.0) and rep.feasible is True
    assert rep.status is FeasibilityStatus.FEASIBLE
    # λ_a = 150: the two slacks sum to 130 − 150 = −20 at best, split evenly: s* = −10 req/s
    net = topology_from_dict(variant(lambda d: d["cells"][0].update(arrival_rate=150.0)))
    rep = net.check_feasibility(raise_error=False)
    assert rep.slack == pytest.approx(-10.0) and rep.feasible is False
    assert rep.status is FeasibilityStatus.INFEASIBLE


@pytest.mark.parametrize("code, status", [(1, "max_iterations"), (4, "failed")])
def test_feasibility_lp_failure_carries_the_status_enum(monkeypatch, code, status):
    """HiGHS stopping (scipy status 1: iteration limit; 4: numerical trouble) is a SolverError
    whose status is the SolveStatus member and whose detail is HiGHS's own code."""
    import types

    import scipy.optimize

    from lbtheory.errors import SolverError, SolveStatus

    def stopped(*args, **kwargs):
        return types.SimpleNamespace(status=code, message="stopped", x=None)

    monkeypatch.setattr(scipy.optimize, "linprog", stopped)
    with pytest.raises(SolverError, match=rf"Assumption-2 LP failed: HiGHS status {code}") as info:
        topology_from_dict(BASE).check_feasibility()
    assert info.value.status is SolveStatus(status) and info.value.solver == "HIGHS"
    assert info.value.detail == f"HiGHS status {code}"
