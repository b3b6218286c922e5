"""Typed errors from the public API: every scalar parameter of the top-level functions and
configs (and the Intelligent Router's training configs), given a value of the wrong type or out
of its range, raises an :class:`~lbtheory.errors.LBTheoryError` naming the parameter — never a
raw ``TypeError``/``ValueError``/``ZeroDivisionError``/``OverflowError``, never a result.

Hypothesis draws the bad values (text such as ``'1.25'``, bytes, ``None``, booleans, dicts,
NaN/±inf, integers beyond 64 bits, and per parameter kind: non-positive numbers, negative
numbers, fractions for counts, unknown option names); each case starts from a valid call."""

from __future__ import annotations

import functools
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lbtheory as lb
from lbtheory.errors import LBTheoryError

ROOT = Path(__file__).resolve().parents[1]
TRACE = str(ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_code.csv")


@functools.cache
def _net():
    return lb.load_topology(ROOT / "examples" / "three_cells.yaml")


@functools.cache
def _scenario():
    return lb.load_scenario(ROOT / "examples" / "sim_two_cells.yaml")


@functools.cache
def _workload():
    from lbtheory.workloads import mix_traces

    return mix_traces([lb.read_trace(TRACE)], n_requests=10, seed=0, rate_rps=5.0)


@functools.cache
def _game():
    braess = ROOT / "examples" / "tntp" / "Braess-Example"
    return lb.load_tntp_game(braess / "Braess_net.tntp", braess / "Braess_trips.tntp")


def _intelligent(name):
    import lbtheory.intelligent as intelligent

    return getattr(intelligent, name)


def _solve_game(**kw):
    from lbtheory.games import solve_game

    return solve_game(_game(), **kw)


def _network_of_cell(**kw):
    """A CellNetwork of one cell built with ``kw`` (Cell and Arc are checked by the network)."""
    fields = {"name": "a", "replicas": 2, "arrival_rate": 1.0,
              "service": lb.MM1Latency(2.0, 1.0), **kw}
    return lb.CellNetwork([lb.Cell(**fields)], [lb.Arc("a", "a", 0.0)])


def _network_of_arc(delay):
    return lb.CellNetwork([lb.Cell("a", 2, 1.0, lb.MM1Latency(2.0, 1.0))],
                          [lb.Arc("a", "a", delay)])


# name -> (call(**kw), the valid keywords, {parameter: kind})
CASES = {
    "MM1Latency": (lb.MM1Latency, {"capacity": 2.0, "K": 1.0},
                   {"capacity": "positive", "K": "positive"}),
    "SoftplusLatency": (lb.SoftplusLatency,
                        {"base_latency": 1.0, "slope": 0.1, "knee": 1.0, "softness": 0.1},
                        {"base_latency": "positive", "slope": "positive",
                         "softness": "positive"}),
    "Cell (in a CellNetwork)": (_network_of_cell, {},
                                {"replicas": "count", "arrival_rate": "non-negative"}),
    "Arc (in a CellNetwork)": (_network_of_arc, {"delay": 0.0}, {"delay": "non-negative"}),
    "solve_wardrop": (lambda **kw: lb.solve_wardrop(_net(), **kw), {"tol": 1e-6},
                      {"tol": "unit", "solver": "option"}),
    "price_of_anarchy": (lambda **kw: lb.price_of_anarchy(_net(), **kw), {"tol": 1e-6},
                         {"tol": "unit"}),
    "check_stepsize": (lambda **kw: lb.check_stepsize(_net(), **kw),
                       {"cost": "gradient", "stepsize": 0.5, "n_nodes": 8},
                       {"cost": "option", "stepsize": "positive", "n_nodes": "count"}),
    "critical_stepsize": (lambda **kw: lb.critical_stepsize(_net(), **kw),
                          {"rtol": 1e-6, "max_doublings": 20, "n_nodes": 8},
                          {"rtol": "unit", "max_doublings": "count", "n_nodes": "count"}),
    "simulate_fluid": (lambda **kw: lb.simulate_fluid(_net(), **kw),
                       {"mechanism": "flow", "stepsize": 0.5, "t1": 0.1, "dt": 0.01},
                       {"mechanism": "option", "stepsize": "positive", "t1": "positive",
                        "dt": "positive"}),
    "simulate_cells": (lambda **kw: lb.simulate_cells(_scenario(), lb.make_router("rand"), **kw),
                       {"duration_s": 100.0, "seed": 0, "record_period_s": 1.0,
                        "engine": "auto"},
                       {"duration_s": "positive", "seed": "seed",
                        "record_period_s": "positive or None", "engine": "option"}),
    "generate_arrivals": (lambda **kw: lb.generate_arrivals(_scenario(), **kw),
                          {"duration_s": 100.0, "seed": 0},
                          {"duration_s": "positive", "seed": "seed"}),
    "make_router": (lb.make_router, {"name": "rand", "simulator": "cells"},
                    {"name": "option", "simulator": "option"}),
    "policy_names": (lb.policy_names, {"simulator": "cells"}, {"simulator": "option"}),
    "read_trace": (lb.read_trace, {"path": TRACE, "on_unsorted": "sort"},
                   {"path": "path", "on_unsorted": "option"}),
    "load_topology": (lb.load_topology, {"path": str(ROOT / "examples" / "three_cells.yaml")},
                      {"path": "path"}),
    "load_scenario": (lb.load_scenario, {"path": str(ROOT / "examples" / "sim_two_cells.yaml")},
                      {"path": "path"}),
    "step_imbalance": (lb.step_imbalance, {"loads": [1.0, 2.0]}, {"loads": "non-negative"}),
    "simulate_decode": (lambda **kw: lb.simulate_decode(
        _workload(), lb.make_router("br0", "replicas"), **kw), {"seed": 0, "replicas": 2},
        {"seed": "seed", "replicas": "count"}),
    "DecodeConfig": (lb.DecodeConfig, {"replicas": 2, "slots": 4, "window": 8,
                                       "time_scale": 1.0},
                     {"replicas": "count", "slots": "count", "window": "count",
                      "time_scale": "positive or None"}),
    "simulate_instances": (lambda **kw: lb.simulate_instances(
        _workload(), lb.make_router("rr", "instances"), **kw), {"seed": 0, "engine": "auto"},
        {"seed": "seed", "engine": "option"}),
    "ClusterConfig": (lb.ClusterConfig, {"n_instances": 2, "epoch_s": 0.02},
                      {"n_instances": "count", "kv_budget_tokens": "count",
                       "max_batch": "count", "max_prefill_tokens": "count",
                       "epoch_s": "positive", "admission": "option", "chunked_prefill": "bool"}),
    "EnvConfig": (lambda **kw: _intelligent("EnvConfig")(**kw), {"balance_factor": 1.25},
                  {"balance_factor": "at least 1", "max_wait_s": "non-negative"}),
    "DQNConfig": (lambda **kw: _intelligent("DQNConfig")(**kw), {"episodes": 2, "lr": 3e-4},
                  {"episodes": "count", "lr": "positive", "batch_size": "count",
                   "router": "option"}),
    "solve_game": (_solve_game, {"time_limit": 10.0, "tol": 1e-4, "threads": 1},
                   {"time_limit": "positive", "tol": "unit", "threads": "count",
                    "throw": "bool", "method": "option"}),
}

#: never a value of any parameter here
GARBAGE = st.one_of(
    st.text(alphabet="0123456789.e-+ abc", min_size=0, max_size=6),  # '1.25' is text
    st.binary(max_size=3), st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    st.just(float("nan")), st.just(float("inf")), st.just(-float("inf")),
    st.integers(min_value=10**309, max_value=10**320),  # beyond float
    st.integers(max_value=-10**309, min_value=-10**320))
BEYOND_INT64 = st.integers(min_value=2**63, max_value=2**70)
BAD = {
    "positive": st.one_of(GARBAGE, st.booleans(), st.none(),
                          st.floats(max_value=0.0, allow_nan=False, allow_infinity=False)),
    "positive or None": st.one_of(GARBAGE, st.booleans(),
                                  st.floats(max_value=0.0, allow_nan=False,
                                            allow_infinity=False)),
    "non-negative": st.one_of(GARBAGE, st.booleans(), st.none(),
                              st.floats(max_value=-1e-9, allow_nan=False,
                                        allow_infinity=False)),
    "at least 1": st.one_of(GARBAGE, st.booleans(),
                            st.floats(max_value=0.999, allow_nan=False, allow_infinity=False)),
    "unit": st.one_of(GARBAGE, st.booleans(), st.floats(max_value=0.0, allow_nan=False,
                                                        allow_infinity=False),
                      st.floats(min_value=1.0, allow_nan=False, allow_infinity=False)),
    "count": st.one_of(GARBAGE, BEYOND_INT64, st.booleans(), st.none(), st.integers(max_value=0),
                       st.floats(min_value=0.01, max_value=1e3).filter(
                           lambda x: not float(x).is_integer())),
    "seed": st.one_of(GARBAGE, BEYOND_INT64, st.booleans(), st.none(), st.integers(max_value=-1),
                      st.floats(min_value=0.01, max_value=1e3)),
    "option": st.one_of(st.text(alphabet="xyz_", min_size=1, max_size=5),
                        st.integers(), st.floats(allow_nan=False), st.binary(min_size=1,
                                                                             max_size=3),
                        st.dictionaries(st.text(max_size=2), st.integers(), max_size=1)),
    "path": st.one_of(st.integers(), st.floats(), st.none(), st.booleans(),
                      st.binary(min_size=1, max_size=3),
                      st.lists(st.integers(), max_size=2)),
    "bool": st.one_of(st.integers(), st.text(max_size=3), st.none(), st.floats()),
}

PARAMS = [(case, param) for case, (_, _, kinds) in CASES.items() for param in kinds]


@pytest.mark.parametrize("case, param", PARAMS, ids=[f"{c}-{p}" for c, p in PARAMS])
@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_bad_argument_is_a_typed_error_naming_it(case, param, data):
    call, valid, kinds = CASES[case]
    value = data.draw(BAD[kinds[param]], label=param)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = call(**{**valid, param: value})
        except LBTheoryError as exc:
            words = {param, param.replace("_", " "), "path", "name", "policy"} \
                if kinds[param] in ("path", "option") else {param}
            assert any(w in str(exc) for w in words), f"{case}({param}={value!r}): {exc}"
            return
        except Exception as exc:  # noqa: BLE001 - the point: no other exception escapes
            pytest.fail(f"{case}({param}={value!r}) raised {type(exc).__name__}: {exc}")
    pytest.fail(f"{case}({param}={value!r}) was accepted: {out!r:.200}")


@pytest.mark.parametrize("case", list(CASES))
def test_each_valid_call_works(case):
    """The cases start from calls that work (so a failure above is the bad value's)."""
    call, valid, _ = CASES[case]
    out = call(**valid)
    assert out is not None
    for v in (getattr(out, "routing", None), getattr(out, "critical_stepsize", None)):
        if v is not None:
            assert np.all(np.isfinite(np.asarray(v, dtype=float))) or math.isinf(float(v))
