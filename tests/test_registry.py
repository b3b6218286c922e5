"""The one policy registry owns a policy whole (issue 32): label, colour, constructor, per
simulator a compiled kernel or the Python-only mark; policies registered from outside the
package run on both engines alike; the README's table and the plot colours come from it."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from lbtheory import plotting, registry
from lbtheory.errors import ParameterError
from lbtheory.intelligent import ClusterConfig
from lbtheory.intelligent import simulate as simulate_instances
from lbtheory.intelligent._compiled import BuiltinSpec, kernel_spec
from lbtheory.intelligent._core import KV_USED, WAIT_TOK
from lbtheory.registry import (
    POLICIES,
    PYTHON_ONLY,
    Simulator,
    compiled_kernel,
    make_router,
    register_policy,
)
from lbtheory.routers import KernelSpec, RandomRouter, RoundRobinRouter, Stateless
from lbtheory.sim import generate_arrivals, load_scenario
from lbtheory.sim._kernel_plan import KernelPlan, plan_kernel
from lbtheory.sim._kernels_routers import K_KERNEL, K_USER
from lbtheory.workloads import workload_from_arrays

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def own_registry(monkeypatch):
    """Registrations in a test stay in that test."""
    monkeypatch.setattr(registry, "POLICIES", dict(registry.POLICIES))
    for n in ("POLICY_NAMES", "BARRIER_POLICIES", "INSTANCE_POLICIES"):
        monkeypatch.setattr(registry, n, getattr(registry, n))
    return registry


# -- every entry is whole -----------------------------------------------------------------------
def test_every_entry_has_a_label_a_colour_and_per_simulator_a_kernel_or_the_python_mark():
    colours = {}
    for name, e in POLICIES.items():
        registry._check_entry(e)  # the checks of register_policy
        assert e.label.strip() and re.fullmatch(r"#[0-9a-f]{6}", e.colour), name
        assert set(e.kernels) == {s.value for s in e.simulators}, name
        for sim in e.simulators:
            k = e.kernels[sim.value]
            assert k == PYTHON_ONLY or callable(e.kernel(sim)), (name, sim)
        colours.setdefault(e.colour, []).append(name)
        assert plotting.policy_color(name) == e.colour == plotting.POLICY_COLORS[name]
    assert all(len(v) == 1 for v in colours.values()), colours  # no two share a colour
    assert not set(colours) & set(plotting.EQUILIBRIUM_COLORS.values())
    assert plotting.policy_color("flow-grad@0.5") == POLICIES["flow-grad"].colour
    assert plotting.policy_color("wardrop") == "#d62728"
    assert plotting.policy_color("nobody") == "#4d4d4d"


def test_small_large_is_an_entry_with_its_kernel():
    e = POLICIES["small-large"]
    assert e.simulators == {Simulator.INSTANCES} and e.compiled("instances")
    r = make_router("small-large", "instances", threshold_tokens=600)
    spec = kernel_spec(r, ClusterConfig(n_instances=4))
    assert isinstance(spec, BuiltinSpec) and spec.params.tolist() == [600.0, 0.0]  # + size
    assert spec.state.tolist() == [0, 0]
    out = make_router("small-large", "instances", threshold_tokens=250, size="output")
    assert kernel_spec(out, ClusterConfig(n_instances=4)).params.tolist() == [250.0, 1.0]


@pytest.mark.parametrize("sim", [Simulator.CELLS, Simulator.INSTANCES])
def test_the_engines_find_exactly_the_kernels_the_registry_declares(sim):
    sc = load_scenario(ROOT / "examples" / "sim_two_cells.yaml")
    arrivals = generate_arrivals(sc, 5.0, 0)
    for name in registry.policy_names(sim):
        e = POLICIES[name]
        if e.needs:  # a checkpoint or a workload: Python only, checked above
            assert not e.compiled(sim)
            continue
        router = make_router(name, sim)
        assert (compiled_kernel(router, sim) is not None) == e.compiled(sim), name
        if sim is Simulator.CELLS:
            assert isinstance(plan_kernel(sc, router, arrivals), KernelPlan), name
        else:
            assert isinstance(kernel_spec(router, ClusterConfig()), BuiltinSpec), name

    class Tweaked(RandomRouter):  # a subclass may change route: it runs in Python
        pass

    assert compiled_kernel(Tweaked(), sim) is None
    if sim is Simulator.CELLS:
        assert plan_kernel(sc, Tweaked(), arrivals) == ("random: Tweaked has no compiled "
                                                        "kernel (a Python router; see "
                                                        "lbtheory.routers.KernelSpec)")
    else:
        assert kernel_spec(Tweaked(), ClusterConfig()) is None


# -- registering from outside -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class LeastKV(Stateless):
    """Least committed KV tokens, ties broken at random (one uniform draw per decision)."""

    name: str = "least-kv"

    def route(self, state, view, rng):
        c = view.kv_committed
        ties = np.flatnonzero(c == c.min())
        return int(ties[int(rng.random() * len(ties))]), state


@njit
def _least_kv(s, state, rng):
    n = s.mi.shape[1]
    best, count = np.inf, 0
    for m in range(n):
        c = s.mi[KV_USED, m] + s.mi[WAIT_TOK, m]
        if c < best:
            best, count = c, 1
        elif c == best:
            count += 1
    k = int(rng.random() * count)
    state[0] += 1  # decisions: the kernel's own copy of the state
    for m in range(n):
        if s.mi[KV_USED, m] + s.mi[WAIT_TOK, m] == best:
            if k == 0:
                return 0, m
            k -= 1
    return -1, 0


def test_a_policy_registered_in_a_test_runs_on_both_engines_alike(own_registry):
    e = register_policy("least-kv", label="LeastKV", colour="#123456", factory=LeastKV,
                        simulators=["instances"], summary="least committed KV",
                        kernels={"instances": lambda router, config: KernelSpec(
                            _least_kv, state=[0.0])})
    assert "least-kv" in registry.INSTANCE_POLICIES and registry.label("least-kv") == "LeastKV"
    assert plotting.policy_color("least-kv") == "#123456" and e.compiled("instances")
    rng = np.random.default_rng(3)
    wl = workload_from_arrays(np.sort(rng.uniform(0, 6.0, 300)), rng.integers(0, 700, 300),
                              rng.integers(0, 260, 300))
    cfg = ClusterConfig(n_instances=3, kv_budget_tokens=1500, max_batch=16)
    ref, out = (simulate_instances(wl, make_router("least-kv", "instances"), cfg, seed=5,
                                   engine=eng) for eng in ("reference", "compiled"))
    assert (ref.engine, out.engine) == ("reference", "compiled")
    for f in ("instance", "finish_s", "first_token_s", "preempted"):
        assert np.array_equal(getattr(ref, f), getattr(out, f), equal_nan=True), f
    assert len(set(out.instance.tolist())) == 3
    registry.unregister_policy("least-kv")
    assert "least-kv" not in registry.INSTANCE_POLICIES


def test_the_custom_policy_example_runs_on_both_engines(own_registry, capsys):
    example = _load(ROOT / "examples" / "custom_policy.py", "custom_policy_example")
    example.main()  # asserts the same latencies on both engines, bit for bit
    lines = capsys.readouterr().out.splitlines()
    rows = {tuple(ln.split()[:2]): ln.split()[2:] for ln in lines[1:5]}
    assert set(rows) == {(p, e) for p in ("rand", "sticky") for e in ("reference", "compiled")}
    for p in ("rand", "sticky"):
        assert rows[p, "reference"] == rows[p, "compiled"]
        assert int(rows[p, "compiled"][0]) > 3000
    assert rows["sticky", "compiled"] != rows["rand", "compiled"]
    assert "sticky" in registry.POLICY_NAMES and lines[-1].startswith("both engines")
    sc = load_scenario(ROOT / "examples" / "sim_two_cells.yaml")
    arrivals = generate_arrivals(sc, 5.0, 0)
    plan = plan_kernel(sc, make_router("sticky"), arrivals)
    assert plan.ip[K_KERNEL] == K_USER and plan.user_state.tolist() == [1.0, -1.0, -1.0]


def test_bad_registrations_are_refused_by_name(own_registry):
    class Plain(RoundRobinRouter):
        pass

    ok = dict(label="X", colour="#010203", factory=Plain, simulators="cells",
              kernels={"cells": PYTHON_ONLY}, summary="x")
    register_policy("mine", **ok)
    cases = [
        ("mine", {}, "a policy named 'mine' exists already; pass replace=True"),
        ("rr", {"replace": True}, "a policy named 'rr' exists already .built in."),
        ("Bad Name", {}, "policy name must be lower-case letters, digits and '-'"),
        ("x1", {"colour": "red"}, "policy 'x1': colour must be '#rrggbb', got 'red'"),
        ("x2", {"label": ""}, "policy 'x2': label must be a non-empty string"),
        ("x3", {"kernels": {}}, "policy 'x3': kernels must give every simulator .* 'cells': "
                                "missing"),
        ("x4", {"kernels": {"cells": PYTHON_ONLY, "replicas": PYTHON_ONLY}},
         "'replicas': not a simulator of it"),
        ("x5", {"simulators": "gpus"}, "simulators must be one of 'cells', 'instances', "
                                       "'replicas', got 'gpus'"),
        ("x6", {"factory": lambda: None, "kernels": {"cells": lambda r, s: None}},
         "policy 'x6': factory must be the router class when a kernel is given"),
        ("x7", {"needs": ("gpu",)}, "policy 'x7': needs must be among"),
        ("x8", {"kernels": {"cells": 3}}, r"policy 'x8': kernels\['cells'\] must be a function"),
        ("x9", {"factory": RoundRobinRouter}, "policy 'x9': RoundRobinRouter runs with another "
                                              "kernel in the cells simulator .policy 'rr'."),
    ]
    for name, change, msg in cases:
        with pytest.raises(ParameterError, match=msg):
            register_policy(name, **{**ok, **change})
    register_policy("mine", **{**ok, "label": "Y"}, replace=True)
    assert registry.label("mine") == "Y" and registry.POLICY_NAMES[-1] == "mine"
    with pytest.raises(ParameterError, match="unregister_policy: 'rr' is built in"):
        registry.unregister_policy("rr")


# -- make_router: option errors named, a constructor's own errors propagate ---------------------
@dataclasses.dataclass(frozen=True)
class _Buggy:
    size: int
    name: str = "buggy"

    def __post_init__(self):
        len(self.size)  # a bug: TypeError inside the constructor


def test_make_router_names_bad_options_and_does_not_mask_a_constructors_type_error(
        own_registry):
    with pytest.raises(ParameterError, match=r"policy 'p2c': bad option\(s\) \['dd'\]: "
                                             r"PowerOfDRouter takes \['d', 'load', "
                                             r"'per_replica'\]"):
        make_router("p2c", dd=3)
    with pytest.raises(ParameterError, match=r"policy 'rand': bad option\(s\) \['d'\]: "
                                             r"RandomRouter takes no options"):
        make_router("rand", d=3)
    register_policy("buggy", label="Buggy", colour="#020304", factory=_Buggy,
                    simulators="cells", kernels={"cells": PYTHON_ONLY}, summary="bug")
    with pytest.raises(ParameterError, match=r"policy 'buggy': missing option\(s\) \['size'\]"):
        make_router("buggy")
    with pytest.raises(TypeError, match="object of type 'int' has no len"):
        make_router("buggy", size=3)


def test_the_policy_table_is_the_registrys():
    tool = _load(ROOT / "tools" / "policy_table.py", "policy_table_tool")
    block = tool.readme_block((ROOT / "docs" / "policies.md").read_text())
    assert block == tool.render()
    for name, e in POLICIES.items():
        assert f"| `{name}` | {e.label} |" in block
    assert "| `small-large` | Small-Large | instances (kernel) |" in block
    assert "| `br0` | BR-0 | replicas (Python) |" in block
