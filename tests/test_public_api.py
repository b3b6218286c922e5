"""The public API is a page a user can learn (issue 32): the exact top-level set, no leaked helper
in any namespace, explicit ``__all__`` everywhere, one ``Engine``, distinct simulator names, and
deprecated spellings that work (with a warning) instead of crashing."""

from __future__ import annotations

import importlib
import math
import subprocess
import sys
import types

import numpy as np
import pytest

import lbtheory as lb
from lbtheory.errors import ParameterError, StepsizeError
from lbtheory.instances import mm1_pigou, mm1_pigou_poa, symmetric_two_cell

#: the curated top level (sorted); a change here is an API change, made on purpose.
TOP_LEVEL = [
    "Arc", "Cell", "CellNetwork", "ClusterConfig", "DecodeConfig", "DynamicsStatus", "Engine",
    "EquilibriumResult", "FluidSolution", "InstanceResult", "LBTheoryError", "MM1Latency",
    "Mechanism", "PoAResult", "RoutingGame", "RunStatus", "Scenario", "SimResult",
    "SoftplusLatency", "SolveStatus", "StepsizeReport", "StepsizeStatus", "Workload",
    "check_stepsize", "critical_stepsize", "fluid_sensitivity", "generate_arrivals",
    "load_scenario", "load_tntp_game", "load_topology", "make_router", "policy_names",
    "price_of_anarchy", "read_trace", "register_policy", "simulate_cells", "simulate_decode",
    "simulate_fluid",
    "simulate_fluid_batch", "simulate_instances", "solve_rif", "solve_system_optimum",
    "solve_wardrop", "step_imbalance",
]

SUBPACKAGES = ["barrier", "commands", "equilibrium", "fluid", "games", "intelligent", "routers",
               "sim", "stability", "sweep", "workloads"]

#: names that must never show in a namespace: typing / import machinery / the facade's tables.
NOT_API = {"Any", "annotations", "importlib", "import_module", "enum", "TypeVar", "_EXPORTS",
           "_MOVED", "_LAZY", "_INTERNAL", "_HIDDEN", "_DEPRECATED", "_mod", "_name", "_names"}


def test_top_level_is_the_curated_set() -> None:
    assert sorted(lb.__all__) == TOP_LEVEL
    assert len(lb.__all__) == len(set(lb.__all__)) == 44
    assert len(lb.__all__) <= 45  # the bound on the curated page


def test_dir_shows_only_the_api() -> None:
    assert dir(lb) == sorted([*TOP_LEVEL, "__version__"])
    assert not NOT_API & set(dir(lb))
    assert isinstance(lb.__version__, str)


def test_every_top_level_name_resolves_to_its_subpackage_definition() -> None:
    # pyproject turns lbtheory's DeprecationWarnings into errors: none of these may warn
    for name in lb.__all__:
        value = getattr(lb, name)
        home = importlib.import_module(f"lbtheory.{lb._EXPORTS[name]}")
        assert value is getattr(home, name), name


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        lb.nope  # noqa: B018


@pytest.mark.parametrize("sub", SUBPACKAGES)
def test_every_subpackage_has_an_explicit_all_that_resolves(sub: str) -> None:
    mod = importlib.import_module(f"lbtheory.{sub}")
    names = mod.__all__
    assert isinstance(names, list) and len(names) == len(set(names))
    for name in names:
        assert not name.startswith("_"), (sub, name)
        assert getattr(mod, name) is not None, (sub, name)
    leaked = {n for n in NOT_API if not n.startswith("_")} & set(dir(mod))  # _private: allowed
    assert not leaked, (sub, leaked)
    # whatever dir() shows beyond __all__ is a public submodule, not a leaked helper
    extra = {n for n in dir(mod) if not n.startswith("_")} - set(names)
    assert all(isinstance(getattr(mod, n), types.ModuleType) for n in extra), (sub, extra)


def test_internal_kernels_are_importable_but_not_public() -> None:
    import lbtheory.routers as routers
    from lbtheory.routers import integers_below

    assert "integers_below" not in routers.__all__ and "integers_below" not in dir(routers)
    assert integers_below is importlib.import_module("lbtheory.routers._baselines").integers_below
    import lbtheory.games as games

    assert "check_solver" not in games.__all__ and "wardrop_equilibrium" not in games.__all__
    assert games.check_solver(None) is None


def test_one_engine_enum() -> None:
    import lbtheory.errors
    import lbtheory.intelligent
    import lbtheory.sim

    assert lb.Engine is lbtheory.sim.Engine is lbtheory.intelligent.Engine
    assert lb.Engine is lbtheory.errors.Engine
    assert [e.value for e in lb.Engine] == ["auto", "compiled", "reference"]


def test_the_simulators_have_distinct_names() -> None:
    import lbtheory.barrier
    import lbtheory.intelligent
    import lbtheory.sim

    assert lb.simulate_cells is lbtheory.sim.simulate_cells is lbtheory.sim.simulate
    assert (lb.simulate_instances is lbtheory.intelligent.simulate_instances
            is lbtheory.intelligent.simulate)
    assert lb.simulate_decode is lbtheory.barrier.simulate_decode
    assert len({lb.simulate_cells, lb.simulate_instances, lb.simulate_decode}) == 3
    with pytest.warns(DeprecationWarning, match=r"^lbtheory\.simulate is deprecated, use "
                                                r"lbtheory\.simulate_cells \(removed in 0\.3\)$"):
        assert lb.simulate is lb.simulate_cells


# ------------------------------------------------------------------------------- stability
def test_check_stepsize_is_the_stability_check() -> None:
    """The reference numbers of THEORY §7.5: η_crit = 0.536158 on the symmetric two-cell net."""
    net = symmetric_two_cell()
    below = lb.check_stepsize(net, "gradient", 0.5)
    above = lb.check_stepsize(net, "gradient", 0.6)
    assert isinstance(below, lb.StepsizeReport)
    assert below.verdict == "stable" and above.verdict == "unstable"
    assert below.critical.critical_stepsize == pytest.approx(0.536158128, rel=1e-6)
    assert below.margin == pytest.approx(0.536158128 / 0.5, rel=1e-6)
    assert lb.critical_stepsize(net, "gradient").critical_stepsize == pytest.approx(
        0.536158128, rel=1e-6)


def test_check_stepsize_names_a_bad_argument() -> None:
    with pytest.raises(ParameterError, match="net must be a CellNetwork.*got str"):
        lb.check_stepsize("examples/three_cells.yaml")
    # 0.1's check_stepsize(value, name) was the float validator: it still validates, and warns
    with pytest.warns(DeprecationWarning, match=r"float validator is deprecated"):
        assert lb.check_stepsize(0.5) == 0.5
    with pytest.warns(DeprecationWarning), pytest.raises(StepsizeError, match="^eta must be"):
        lb.check_stepsize(-1.0, "eta")
    with pytest.raises(StepsizeError, match="stepsize"):
        lb.check_stepsize(symmetric_two_cell(), "gradient", -1.0)


def test_the_old_stepsize_names() -> None:
    import lbtheory.stability as stability
    from lbtheory._checks import validate_stepsize

    with pytest.warns(DeprecationWarning, match=r"stability\.assess_stepsize is deprecated, use "
                                                r"lbtheory\.stability\.check_stepsize"):
        assert stability.assess_stepsize is stability.check_stepsize is lb.check_stepsize
    with pytest.warns(DeprecationWarning, match=r"^lbtheory\.assess_stepsize is deprecated, use "
                                                r"lbtheory\.check_stepsize"):
        assert lb.assess_stepsize is lb.check_stepsize
    # the float validator the old top-level check_stepsize was is internal now
    assert validate_stepsize(np.float64(0.25)) == 0.25 and type(validate_stepsize(1)) is float
    for bad in (0.0, math.nan, math.inf, "fast"):
        with pytest.raises(StepsizeError, match="eta: expected a positive"):
            validate_stepsize(bad, "eta")


# ----------------------------------------------------------------------- deprecated aliases
def test_deprecated_equilibrium_aliases_work_on_a_cell_network() -> None:
    """``lb.wardrop_equilibrium(net)`` / ``lb.system_optimum(net)`` crashed on a CellNetwork; now
    they are the verbs (with a warning): the M/M/1 Pigou ratio is ½(1 + √2) (THEORY §5)."""
    net = mm1_pigou(u=1.0, r=0.5)
    with pytest.warns(DeprecationWarning, match=r"^lbtheory\.wardrop_equilibrium is deprecated, "
                                                r"use lbtheory\.solve_wardrop \(removed in "
                                                r"0\.3\)$"):
        ue = lb.wardrop_equilibrium(net)
    with pytest.warns(DeprecationWarning, match=r"^lbtheory\.system_optimum is deprecated, use "
                                                r"lbtheory\.solve_system_optimum"):
        so = lb.system_optimum(net)
    assert isinstance(ue, lb.EquilibriumResult) and isinstance(so, lb.EquilibriumResult)
    np.testing.assert_array_equal(ue.routing, lb.solve_wardrop(net).routing)
    np.testing.assert_array_equal(so.routing, lb.solve_system_optimum(net).routing)
    assert ue.total_latency_rate / so.total_latency_rate == pytest.approx(mm1_pigou_poa(1.0, 0.5),
                                                                          rel=1e-6)
    assert mm1_pigou_poa(1.0, 0.5) == pytest.approx(0.5 * (1 + math.sqrt(2.0)))


@pytest.mark.parametrize("old, verb", [("wardrop_equilibrium", "solve_wardrop"),
                                       ("system_optimum", "solve_system_optimum"),
                                       ("price_of_anarchy", "price_of_anarchy")])
def test_deprecated_games_aliases_name_the_verb_on_a_cell_network(old: str, verb: str) -> None:
    import lbtheory.games as games

    with pytest.warns(DeprecationWarning, match=rf"lbtheory\.games\.{old} is deprecated"):
        with pytest.raises(ParameterError, match=rf"game must be a RoutingGame, got CellNetwork; "
                                                 rf"lbtheory\.{verb} takes a CellNetwork"):
            getattr(games, old)(mm1_pigou())


def test_every_moved_top_level_name_still_works_and_points_home() -> None:
    assert not set(lb._MOVED) & set(lb.__all__)
    for old, (mod, new) in lb._MOVED.items():
        where = new if new in lb.__all__ else f"{mod}.{new}"
        with pytest.warns(DeprecationWarning, match=rf"^lbtheory\.{old} is deprecated, use "
                                                    rf"lbtheory\.{where} "):
            value = getattr(lb, old)
        assert value is getattr(importlib.import_module(f"lbtheory.{mod}"), new), old
    # the 0.1 facade had 148 names: 39 stayed, 109 moved (plus the older Trace, RouterView)
    assert len(lb._MOVED) == 111


def test_the_facade_stays_lazy() -> None:
    """``import lbtheory`` (and its dir) loads no JAX, CVXPY or numba (``lbtheory --help``)."""
    code = ("import sys, lbtheory; dir(lbtheory); lbtheory.Engine; "
            "print(sorted(m for m in ('jax', 'cvxpy', 'numba') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_dcp_form_registry_has_one_home() -> None:
    import lbtheory.equilibrium as equilibrium
    import lbtheory.games as games

    assert "DCP_FORMS" in games.__all__ and "DCP_FORMS" not in equilibrium.__all__
    with pytest.warns(DeprecationWarning, match=r"^lbtheory\.equilibrium\.DCP_FORMS is deprecated, "
                                                r"use lbtheory\.games\.DCP_FORMS"):
        assert equilibrium.DCP_FORMS is games.DCP_FORMS


# ------------------------------------------------------------------ randomness convention
def test_seed_is_an_int_or_a_generator() -> None:
    from lbtheory._checks import MAX_SEED, as_generator, as_seed

    np.testing.assert_array_equal(as_generator(7).random(4), np.random.default_rng(7).random(4))
    gen = np.random.default_rng(3)
    assert as_generator(gen) is gen
    assert as_seed(12) == 12
    want = int(np.random.default_rng(5).integers(0, MAX_SEED, endpoint=True))
    assert as_seed(np.random.default_rng(5)) == want and 0 <= want <= MAX_SEED
    for bad in (-1, 1.5, "1", True, None):
        with pytest.raises(ParameterError, match=r"^seed must be an integer in \[0, "):
            as_generator(bad)
        with pytest.raises(ParameterError, match=r"^seed must be an integer in \[0, "):
            as_seed(bad)


def test_random_network_takes_seed() -> None:
    from lbtheory.instances import random_network
    from lbtheory.io import topology_to_dict

    want = topology_to_dict(random_network(4, seed=11, arc_prob=1.0))
    assert topology_to_dict(random_network(4, seed=np.random.default_rng(11),
                                           arc_prob=1.0)) == want
    with pytest.warns(DeprecationWarning, match=r"random_network\(rng=\.\.\.\) is deprecated, "
                                                r"use seed="):
        assert topology_to_dict(random_network(4, rng=np.random.default_rng(11),
                                               arc_prob=1.0)) == want
    with pytest.warns(DeprecationWarning, match=r"random_network\(rng, n\) is deprecated, use "
                                                r"random_network\(n, seed=rng\)"):
        assert topology_to_dict(random_network(np.random.default_rng(11), 4,
                                               arc_prob=1.0)) == want
    # the draws: 4 cells, a full mesh (arc_prob 1), arrival rates within the capacity share
    net = random_network(4, seed=11, arc_prob=1.0)
    assert net.n == 4 and len(want["arcs"]) == 16
    assert 0 < net.total_demand <= 0.7 * sum(c.service.max_rate for c in net.cells) + 1e-9
    with pytest.raises(ParameterError, match="one positional argument"):
        random_network(4, 5)
    with pytest.raises(ParameterError, match="n must be an integer >= 1"):
        random_network(0)


def test_simulate_cells_takes_a_generator_as_seed() -> None:
    """A Generator seed is one int drawn from it: the run equals the run with that int."""
    import dataclasses

    from lbtheory._checks import MAX_SEED

    sc = dataclasses.replace(lb.load_scenario("examples/sim_two_cells.yaml"), bursts=(),
                             outages=())  # a short horizon: no burst or outage in it
    drawn = int(np.random.default_rng(5).integers(0, MAX_SEED, endpoint=True))
    a = lb.simulate_cells(sc, lb.make_router("rand"), duration_s=3.0,
                          seed=np.random.default_rng(5), engine="reference")
    b = lb.simulate_cells(sc, lb.make_router("rand"), duration_s=3.0, seed=drawn,
                          engine="reference")
    assert a.seed == b.seed == drawn
    assert len(a.latency_s) > 50  # ~40 req/s for 3 s
    np.testing.assert_array_equal(a.latency_s, b.latency_s)


def test_seeded_generators_take_an_int_or_a_generator() -> None:
    """Same int ⇒ same draws as a Generator seeded with it; a bad seed is a named error."""
    from lbtheory.games import grid_game, synthetic_network
    from lbtheory.workloads import five_task_workload

    a = five_task_workload(40, seed=3)
    b = five_task_workload(40, seed=np.random.default_rng(3))
    for f in ("arrival_s", "prompt_tokens", "output_tokens", "task"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert a.arrival_s[0] == 0.0 and len(a) == 40  # the first arrival at 0 (module docstring)
    g1, g2 = grid_game(3, 3, seed=4), grid_game(3, 3, seed=np.random.default_rng(4))
    np.testing.assert_array_equal(g1.demand, g2.demand)
    assert g1.total_demand > 0
    s1, _ = synthetic_network("sioux_falls", seed=9)
    s2, _ = synthetic_network("sioux_falls", seed=np.random.default_rng(9))
    assert len(s1.arcs) == 76
    np.testing.assert_array_equal(s1.demand, s2.demand)
    np.testing.assert_array_equal(s1.heads, s2.heads)
    for bad in (-1, "x"):
        with pytest.raises(ParameterError, match="seed must be an integer"):
            five_task_workload(5, seed=bad)
        with pytest.raises(ParameterError, match="seed must be an integer"):
            grid_game(3, 3, seed=bad)


def test_arrivals_and_decode_take_a_generator_as_seed() -> None:
    """generate_arrivals and simulate_decode: a Generator seed is one int drawn from it."""
    from lbtheory._checks import MAX_SEED
    from lbtheory.workloads import five_task_workload

    drawn = int(np.random.default_rng(7).integers(0, MAX_SEED, endpoint=True))
    sc = lb.load_scenario("examples/sim_two_cells.yaml")
    a = lb.generate_arrivals(sc, 5.0, np.random.default_rng(7))
    b = lb.generate_arrivals(sc, 5.0, drawn)
    assert len(a) > 100  # ~40 req/s for 5 s
    np.testing.assert_array_equal(a.arrival_s, b.arrival_s)
    np.testing.assert_array_equal(a.source, b.source)
    wl = five_task_workload(60, seed=1)
    r1 = lb.simulate_decode(wl, lb.make_router("random", "replicas"), replicas=3, slots=4,
                            seed=np.random.default_rng(7))
    r2 = lb.simulate_decode(wl, lb.make_router("random", "replicas"), replicas=3, slots=4,
                            seed=drawn)
    assert r1.completed == 60
    np.testing.assert_array_equal(r1.replica, r2.replica)
