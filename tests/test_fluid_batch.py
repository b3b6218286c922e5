"""Batched fluid runs equal the single runs, whatever the strategy."""

import dataclasses

import numpy as np
import pytest

from lbtheory.errors import ModelError, TopologyError, UnstableError
from lbtheory.fluid import simulate_fluid, simulate_fluid_batch
from lbtheory.fluid._batch import choose_batch_size
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


def test_auto_strategy_thresholds():
    assert choose_batch_size(4, 256, "auto") is None
    assert choose_batch_size(16, 256, "auto") == 1
    assert choose_batch_size(64, 256, "auto") == 1
    assert choose_batch_size(64, 256, "chunked", 16) == 16
    assert choose_batch_size(64, 256, "map") == 1


def test_batch_errors():
    net = symmetric_two_cell()
    with pytest.raises(ModelError, match="strategy: expected one of"):
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
