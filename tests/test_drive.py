"""The router contract's optional methods (declared Protocols) and the one Driver the three
simulators drive a router with (issue 32, item 3)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lbtheory.errors import ParameterError
from lbtheory.registry import make_router
from lbtheory.routers import AffinityRouter, Assignment, ErrorAversion, FlowRouter
from lbtheory.routers._contract import RoundObserver, SessionRouter
from lbtheory.routers._drive import Driver, observe_all, optional_methods


@dataclasses.dataclass(frozen=True)
class _Log:
    """A router that logs what it sees: state = tuple of events; routes by a fixed script."""

    script: tuple = ()
    name: str = "log"

    def init(self, seed: int = 0) -> tuple:
        return (("init", seed),)

    def observe(self, state: tuple, view: object) -> tuple:
        return (*state, ("obs", view))

    def route(self, state: tuple, view: object, rng: np.random.Generator):
        k = sum(1 for e in state if e[0] == "route")
        return self.script[k], (*state, ("route", view, float(rng.random())))


@dataclasses.dataclass(frozen=True)
class _Sessions(_Log):
    def route_session(self, state, view, rng, session):
        return 7, (*state, ("session", session))


@dataclasses.dataclass(frozen=True)
class _Rounds(_Log):
    def observe_round(self, state, views):
        return (*state, ("round", len(views)))


def test_optional_methods_are_declared_protocols():
    assert isinstance(FlowRouter(), RoundObserver)
    assert isinstance(make_router("flow-grad"), RoundObserver)
    assert not isinstance(make_router("rand"), RoundObserver)
    assert not isinstance(_Log(), RoundObserver) and not isinstance(_Log(), SessionRouter)
    aff = AffinityRouter(_Log())
    assert isinstance(aff, SessionRouter) and isinstance(aff, RoundObserver)
    assert not isinstance(ErrorAversion(_Log()), SessionRouter)
    # the per-type cache the drivers use agrees with the Protocols
    for r in (aff, ErrorAversion(_Log()), _Log(), _Rounds(), _Sessions(), make_router("rand")):
        assert optional_methods(r) == (isinstance(r, RoundObserver), isinstance(r, SessionRouter))
    assert optional_methods(_Sessions()) == (False, True)


def test_observe_round_falls_back_to_observe_per_view_in_index_order():
    views = [None, "a", None, "b"]
    assert observe_all(_Log(), (), views) == (("obs", "a"), ("obs", "b"))
    assert observe_all(_Rounds(), (), views) == (("round", 4),)
    # the wrappers forward a round to a wrapped router without observe_round the same way
    st = AffinityRouter(_Log()).observe_round(AffinityRouter(_Log()).init(3), views)
    assert st.inner == (("init", 3), ("obs", "a"), ("obs", "b"))
    d = Driver(_Rounds(), 2)
    d.observe_round(views)
    assert d.state == (("init", 2), ("round", 4))


def test_driver_seeding_is_one_rule():
    d = Driver(_Log(script=(0,)), 11)
    assert d.state == (("init", 11),)
    assert d.rng.random() == np.random.default_rng(11).random()
    seq = np.random.SeedSequence(5)
    d = Driver(_Log(), seq)
    assert d.state == (("init", int(seq.generate_state(1)[0])),)
    assert d.rng.random() == np.random.default_rng(np.random.SeedSequence(5)).random()


def test_route_uses_route_session_only_for_a_session_router_with_a_session():
    d = Driver(_Sessions(script=(3, 4)), 0)
    assert d.route("v", session=12) == 7
    assert d.state[-1] == ("session", 12)
    assert d.route("v") == 3
    d = Driver(_Log(script=(5,)), 0)
    assert d.route("v", session=12) == 5  # not a SessionRouter: plain route


def test_ask_normalises_every_decision_form():
    d = Driver(_Log(script=(2, Assignment(np.array([3, 1]), np.array([0, 1])), None,
                            Assignment(np.zeros(0, np.int64), np.zeros(0, np.int64)))), 0)
    pos, tgt = d.ask("v", queued=5, head=4)
    assert pos.tolist() == [4] and tgt.tolist() == [2] and pos.dtype == np.int64
    pos, tgt = d.ask("v", queued=5)
    assert pos.tolist() == [3, 1] and tgt.tolist() == [0, 1]
    assert d.ask("v", queued=5) is None  # None: wait
    assert d.ask("v", queued=5) is None  # an empty assignment: wait


@pytest.mark.parametrize("decision, message", [
    (Assignment(np.array([1, 1]), np.array([0, 1])),
     r"router log returned invalid or repeated pool positions \[1, 1\] of 3"),
    (Assignment(np.array([3]), np.array([0])),
     r"router log returned invalid or repeated pool positions \[3\] of 3"),
    (Assignment(np.array([0, 1]), np.array([0])), "router log returned 2 positions and 1 replicas"),
])
def test_ask_refuses_bad_positions_naming_the_router(decision, message):
    d = Driver(_Log(script=(decision,)), 0, target="replica", queue="pool")
    with pytest.raises(ParameterError, match=message):
        d.ask("v", queued=3)


def test_resume_continues_a_state_and_stream():
    rng = np.random.default_rng(4)
    d = Driver.resume(_Log(script=(1,)), ("s",), rng)
    assert d.route("v") == 1 and d.rng is rng
    assert d.state == ("s", ("route", "v", float(np.random.default_rng(4).random())))


def test_optional_methods_are_declared_not_looked_up():
    """The contract's optional methods (observe_round, route_session, kernel_spec) are declared
    by Protocols; no module of the package finds one with getattr/hasattr (issue 32)."""
    import ast
    from pathlib import Path

    import lbtheory
    from lbtheory.routers import KernelProvider
    from lbtheory.sim import KernelRouter

    optional = {"observe_round", "route_session", "kernel_spec"}
    found = []
    for path in Path(lbtheory.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in optional):
                found.append(f"{path.name}:{node.lineno} {node.args[1].value}")
    assert found == []
    assert issubclass(KernelRouter, KernelProvider)
    assert not isinstance(make_router("flow-grad"), KernelProvider)
