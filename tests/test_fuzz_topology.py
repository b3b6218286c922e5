"""Fuzz of the topology loader through the CLI: random YAML values of every type in every field.

Each example starts from a small valid network and replaces (or deletes) a few fields at random with
YAML values of every kind (null, bools, ints up to 400 digits, floats incl. nan/inf/1e308/1e-320,
strings, lists, mappings). ``lbtheory equilibrium FILE --json`` must then either exit 2 with exactly
one ``error:`` line and nothing on stdout, or exit 0 with a valid result — never raise (no
traceback).
Derandomized and bounded, so it is fast and reproducible.
"""

from __future__ import annotations

import copy
import json
import math
import warnings

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbtheory.cli import main

BASE = {
    "name": "fuzz",
    "cells": [
        {"name": "a", "replicas": 2, "arrival_rate": 6.0,
         "service": {"model": "mm1", "capacity": 10.0, "K": 2.0}},
        {"name": "b", "replicas": 1, "arrival_rate": 3.0,
         "service": {"model": "softplus", "base_latency": 0.2, "slope": 0.05, "knee": 2.0,
                     "softness": 1.0}},
    ],
    "arcs": [{"from": "a", "to": "a", "delay": 0.0}, {"from": "a", "to": "b", "delay": 0.02},
             {"from": "b", "to": "b", "delay": 0.0}, {"from": "b", "to": "a", "delay": 0.02}],
}

#: every place a value can be replaced: paths into BASE
FIELDS: list[tuple] = [("cells",), ("arcs",), ("name",)]
for _j, _c in enumerate(BASE["cells"]):
    FIELDS += [("cells", _j), *[("cells", _j, k) for k in _c if k != "service"]]
    FIELDS += [("cells", _j, "service"), *[("cells", _j, "service", k) for k in _c["service"]]]
for _a, _arc in enumerate(BASE["arcs"]):
    FIELDS += [("arcs", _a), *[("arcs", _a, k) for k in _arc]]

SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(10 ** 6), max_value=10 ** 6),
    st.sampled_from([0, 1, -1, 10 ** 9, 10 ** 20, 10 ** 400, -(10 ** 400)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e308, -1e308, 1e-320, 5e-324, 1e-9, 1e9, 3600.0, 0.5]),
    st.text(max_size=8), st.sampled_from(["mm1", "softplus", "a", "b", "", "1e308", "nan"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)
#: plausible numbers too, so that some examples are valid networks and get solved
PLAUSIBLE = st.one_of(st.floats(min_value=0.001, max_value=50.0), st.integers(1, 20))
DELETE = object()
EDITS = st.lists(st.tuples(st.sampled_from(FIELDS),
                           st.one_of(PLAUSIBLE, VALUES, PLAUSIBLE, st.just(DELETE))),
                 min_size=1, max_size=3)


def _apply(doc: dict, path: tuple, value) -> None:
    node = doc
    for key in path[:-1]:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return  # an earlier edit replaced a parent
    try:
        if value is DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    except (KeyError, IndexError, TypeError):
        pass


@settings(max_examples=60, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=EDITS)
def test_random_topology_values_are_an_error_line_or_a_result(edits, tmp_path, capsys):
    doc = copy.deepcopy(BASE)
    for path, value in edits:
        _apply(doc, path, value)
    topo = tmp_path / "fuzz.yaml"
    topo.write_text(yaml.safe_dump(doc, allow_unicode=True))
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["equilibrium", str(topo), "--json"])
    out, err = capsys.readouterr()
    assert not [str(w.message) for w in caught], f"warnings leaked for {doc}"
    if code == 2:
        lines = err.splitlines()
        assert out == "" and len(lines) == 1 and lines[0].startswith("error: "), (doc, err)
        assert "fuzz.yaml" in lines[0] or "arrival_rate" in lines[0] or "program" in lines[0], \
            lines[0]
        return
    assert code == 0 and err == "", (doc, code, err)
    res = json.loads(out)
    assert math.isfinite(res["price_of_anarchy"]) and res["price_of_anarchy"] >= 1 - 1e-6
    for eq in res["equilibria"].values():
        assert eq["status"] in ("optimal", "optimal_inaccurate")
