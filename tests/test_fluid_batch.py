"""Batched fluid runs equal the single runs, whatever the strategy."""

import dataclasses
import traceback

import numpy as np
import pytest

from lbtheory.errors import (
    InfeasibleDemandError,
    ModelError,
    SolverError,
    SolveStatus,
    TopologyError,
    UnstableError,
)
from lbtheory.fluid import (
    MAX_BATCH_BYTES,
    choose_batch_size,
    fluid_problem,
    scenario_bytes,
    simulate_fluid,
    simulate_fluid_batch,
)
from lbtheory.fluid import _batch as fluid_batch  # only to inject faults and spy (below)
from lbtheory.instances import spill_example, symmetric_two_cell
from lbtheory.io import load_topology
from lbtheory.models import MM1Latency
from lbtheory.network import CellNetwork

KW = dict(t1=5.0, N0=[8.0, 7.0, 0.0])


@pytest.mark.parametrize("strategy", ["vmap", "map", "chunked", "auto"])
def test_batch_over_stepsizes_equals_single_runs(strategy):
    net = symmetric_two_cell()
    etas = np.array([0.1, 0.3, 0.7])
    b = simulate_fluid_batch(net, stepsize=etas, strategy=strategy, batch_size=2, **KW)
    assert b.workload.shape[0] == 3 and len(b.status) == 3
    for k, eta in enumerate(etas):
        s = simulate_fluid(net, stepsize=eta, **KW)
        np.testing.assert_allclose(b.workload[k], s.workload, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b.routing[k], s.routing, rtol=1e-12, atol=1e-12)


def test_batch_over_networks_with_different_rates_delays_and_equilibria():
    base = load_topology("examples/three_cells.yaml")
    nets = [base, base.with_demand_scale(0.8), base.with_delays(base.delays * 2)]
    b = simulate_fluid_batch(nets, cost="latency", stepsize=2.0, t1=3.0, equilibrium="auto")
    for k, net in enumerate(nets):
        s = simulate_fluid(net, cost="latency", stepsize=2.0, t1=3.0, equilibrium="auto")
        np.testing.assert_allclose(b.workload[k], s.workload, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b.distance_to_equilibrium[k], s.distance_to_equilibrium,
                                   rtol=1e-9)


@pytest.mark.parametrize("n", [1, 4, 8, 9, 16, 64])
def test_chosen_batch_size_is_a_valid_chunk(n):
    """Whatever the tuning table says: None (all at once) or a chunk 1 ≤ bs < B, never more
    per-scenario memory at once than MAX_BATCH_BYTES; explicit strategies are obeyed."""
    for B in (1, 3, 256):
        for mem in (None, 1, 10**6, 10**12):
            bs = choose_batch_size(n, B, "auto", scenario_bytes=mem)
            assert bs is None or (isinstance(bs, int) and 1 <= bs < B)
            if mem is not None:
                assert (B if bs is None else bs) * mem <= max(MAX_BATCH_BYTES, mem)
    assert choose_batch_size(n, 256, "vmap") is None
    assert choose_batch_size(n, 256, "map") == 1
    assert choose_batch_size(n, 256, "chunked", 16) == 16


def test_auto_respects_the_memory_bound_and_gives_the_same_numbers(monkeypatch):
    """A bound of 2.5 scenarios forces chunks of 2 (vmap inside, loop outside): the result is
    bit-for-bit the full vmap's and the loop's."""
    net = symmetric_two_cell()
    etas = np.array([0.1, 0.2, 0.3, 0.5, 0.7])
    per = scenario_bytes(fluid_problem(net, stepsize=0.1, **KW)[1])
    monkeypatch.setattr(fluid_batch, "MAX_BATCH_BYTES", int(2.5 * per))
    assert choose_batch_size(3, 5, "auto", scenario_bytes=per) == 2
    seen = []
    real = fluid_batch._run_batch
    monkeypatch.setattr(fluid_batch, "_run_batch",
                        lambda p, c, bs: seen.append(bs) or real(p, c, bs))
    auto = simulate_fluid_batch(net, stepsize=etas, strategy="auto", **KW)
    assert seen == [2]
    for strategy in ("vmap", "map"):
        other = simulate_fluid_batch(net, stepsize=etas, strategy=strategy, **KW)
        assert np.array_equal(auto.workload, other.workload)
        assert np.array_equal(auto.routing, other.routing)


def test_scenario_error_propagates_with_its_fields_and_a_note(monkeypatch):
    """Scenario 1's own error object comes out: type, fields, traceback, plus a note."""
    base = load_topology("examples/three_cells.yaml")
    nets = [base, base.with_demand_scale(5.0)]  # 320 req/s offered to 170 req/s of capacity
    with pytest.raises(InfeasibleDemandError) as info:
        simulate_fluid_batch(nets, cost="latency", stepsize=2.0, t1=0.1, equilibrium="auto")
    err = info.value
    assert err.shortfall == pytest.approx(150.0) and len(err.sources) == 3
    assert "simulate_fluid_batch: raised for scenario 1 of 2" in err.__notes__
    frames = [f.name for f in traceback.extract_tb(err.__traceback__)]
    assert "solve_equilibrium" in frames  # the original traceback, not a re-raise

    def failing(net, kind, eq):
        if net is nets[1]:
            raise SolverError("CLARABEL failed", solver="CLARABEL", status=SolveStatus.FAILED,
                              detail="numerical_error")
        return None

    monkeypatch.setattr(fluid_batch, "equilibrium_workload", failing)
    with pytest.raises(SolverError) as info:
        simulate_fluid_batch(nets, cost="latency", stepsize=2.0, t1=0.1, equilibrium="auto")
    assert (info.value.solver, info.value.status, info.value.detail) == (
        "CLARABEL", SolveStatus.FAILED, "numerical_error")
    assert str(info.value) == "CLARABEL failed"


def test_batch_errors():
    net = symmetric_two_cell()
    with pytest.raises(ModelError, match="strategy must be one of 'auto', 'vmap', 'map', "
                                         "'chunked', got 'pmap'"):
        simulate_fluid_batch(net, stepsize=[0.1], strategy="pmap", **KW)
    with pytest.raises(ModelError, match="one stepsize per scenario"):
        simulate_fluid_batch(net, stepsize=0.1, **KW)
    with pytest.raises(ModelError, match="stepsize: expected a scalar, \\(2,\\)"):
        simulate_fluid_batch([net, net], stepsize=[0.1, 0.2, 0.3], **KW)
    with pytest.raises(ModelError, match="N0: expected one value for every scenario"):
        simulate_fluid_batch([net, net], stepsize=0.1, t1=1.0, N0=np.ones((3, 3)))
    with pytest.raises(ModelError, match="nets: expected at least one scenario"):
        simulate_fluid_batch([], stepsize=0.1, t1=1.0)
    with pytest.raises(TopologyError, match=r"nets\[1\]: scenario structure"):
        simulate_fluid_batch([net, spill_example()], stepsize=0.1, t1=1.0)
    three = load_topology("examples/three_cells.yaml")
    cells = [dataclasses.replace(c, service=MM1Latency(100.0, 10.0)) for c in three.cells]
    with pytest.raises(TopologyError, match=r"nets\[1\]: service-model families differ"):
        simulate_fluid_batch([three, CellNetwork(cells, three.arcs)], stepsize=1.0, t1=0.1)
    with pytest.raises(UnstableError, match="scenario 1: fluid model: non-finite state"):
        simulate_fluid_batch([net, net], stepsize=0.1, t1=0.1,
                             N0=[[8.0, 7.0, 0.0], [1.0, 1e200, 0.0]])
