"""Derivatives of the time-averaged total latency rate vs central finite differences (issue 4)."""

import dataclasses

import numpy as np
import pytest

from lbtheory.errors import DynamicsStatus, ModelError, UnstableError
from lbtheory.fluid import fluid_sensitivity, simulate_fluid
from lbtheory.instances import symmetric_two_cell
from lbtheory.io import load_topology
from lbtheory.models import MM1Latency, SoftplusLatency
from lbtheory.network import CellNetwork

KW = dict(t1=20.0, N0=[8.0, 7.0, 0.0])


def _J(net, **kw):
    return simulate_fluid(net, **{**KW, "stepsize": 0.3, **kw}).mean_total_latency_rate


def _central(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


def _rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_stepsize_gradient_matches_finite_differences(mode):
    net = symmetric_two_cell()
    s = fluid_sensitivity(net, stepsize=0.3, mode=mode, **KW)
    assert s.status is DynamicsStatus.CONVERGED and s.well_posed and s.mode == mode
    fd = _central(lambda e: _J(net, stepsize=e), 0.3, 1e-5)
    assert _rel(s.gradient["stepsize"], fd) < 1e-4
    assert _rel(s.value, _J(net)) < 1e-12


def test_arrival_rate_delay_and_service_gradients():
    """Reverse mode (auto: > 8 scalars) with interpolated, off-grid delays."""
    net = symmetric_two_cell(delay=0.0503)
    kw = dict(delay_mode="interpolate")
    s = fluid_sensitivity(net, stepsize=0.3, wrt=("arrival_rates", "delays", "service"), **KW,
                          **kw)
    assert s.mode == "reverse" and s.well_posed
    f = net.index("f")
    fd_lam = _central(lambda v: _J(net.with_arrival_rates([0, 0, v]), **kw), 12.0, 1e-5)
    assert _rel(s.gradient["arrival_rates"][f], fd_lam) < 1e-4

    def with_delay(v):
        D = np.array(net.delays)
        D[f, 0] = v
        return _J(net.with_delays(D), **kw)

    assert _rel(s.gradient["delays"][f, 0], _central(with_delay, 0.0503, 1e-7)) < 1e-4

    def with_capacity(v):
        cells = [dataclasses.replace(c, service=MM1Latency(v, 5.0)) if c.name == "c1" else c
                 for c in net.cells]
        return _J(CellNetwork(cells, net.arcs), **kw)

    fd_cap = _central(with_capacity, 10.0, 1e-5)
    assert _rel(s.gradient["service"]["c1"]["capacity"], fd_cap) < 1e-4


def test_softplus_service_gradient_on_asymmetric_topology():
    """Mixed families (MM1 + softplus), residency constraint, latency cost, forward mode."""
    net = load_topology("examples/three_cells.yaml")
    kw = dict(cost="latency", stepsize=2.0, t1=10.0, N0=[12.0, 11.0, 5.0])
    s = fluid_sensitivity(net, wrt=("stepsize",), mode="forward", **kw)
    fd = _central(lambda e: simulate_fluid(net, **{**kw, "stepsize": e}).mean_total_latency_rate,
                  2.0, 1e-5)
    assert _rel(s.gradient["stepsize"], fd) < 1e-4
    s = fluid_sensitivity(net, wrt=("service",), mode="reverse", **kw)

    def with_knee(v):
        svc = SoftplusLatency(base_latency=0.5, slope=0.01, knee=v, softness=5.0)
        cells = [dataclasses.replace(c, service=svc) if c.name == "asia-se" else c
                 for c in net.cells]
        return simulate_fluid(CellNetwork(cells, net.arcs), **kw).mean_total_latency_rate

    assert _rel(s.gradient["service"]["asia-se"]["knee"], _central(with_knee, 30.0, 1e-4)) < 1e-4


def test_oscillating_regime_is_reported_not_silent():
    """Past η_crit = 0.536 the long-horizon derivative is flagged (THEORY §7.5)."""
    net = symmetric_two_cell()
    with pytest.raises(UnstableError, match="does not converge within t1 = 60 s"):
        fluid_sensitivity(net, stepsize=0.7, t1=60.0, N0=[8.0, 7.0, 0.0])
    s = fluid_sensitivity(net, stepsize=0.7, t1=60.0, N0=[8.0, 7.0, 0.0], throw=False)
    assert not s.well_posed and s.status is DynamicsStatus.OSCILLATING


def test_bad_sensitivity_arguments():
    net = symmetric_two_cell()
    with pytest.raises(ModelError, match="wrt: expected a non-empty subset"):
        fluid_sensitivity(net, stepsize=0.3, wrt=("capacity",), t1=1.0)
    with pytest.raises(ModelError, match="mode must be one of 'auto', 'forward', 'reverse', got"):
        fluid_sensitivity(net, stepsize=0.3, mode="adjoint", t1=1.0)


def test_functional_interface_grad_equals_fluid_sensitivity():
    """jax.grad of fluid_objective(params, cfg) from fluid_problem = fluid_sensitivity (reverse)."""
    import dataclasses as dc

    import jax

    from lbtheory.fluid import fluid_objective, fluid_problem

    net = symmetric_two_cell()
    params, cfg = fluid_problem(net, stepsize=0.3, t1=5.0, N0=[8.0, 7.0, 0.0])
    g = jax.grad(lambda p: fluid_objective(p, cfg))(params)
    s = fluid_sensitivity(net, stepsize=[0.3, 0.3, 0.3], t1=5.0, N0=[8.0, 7.0, 0.0],
                          wrt=("stepsize", "arrival_rates"), mode="reverse", throw=False)
    np.testing.assert_allclose(np.asarray(g.stepsize), s.gradient["stepsize"], rtol=1e-10)
    np.testing.assert_allclose(np.asarray(g.arrival_rates), s.gradient["arrival_rates"],
                               rtol=1e-10)
    assert abs(float(fluid_objective(params, cfg)) - s.value) < 1e-12
    assert dc.is_dataclass(params)
