"""The latency model a cell's routers use, fitted to the simulator's own measurements (DLB §3.3:
ℓ(N) is fitted from (requests in flight, latency) samples; issue 25 item 2).

:func:`measure_latency_curve` runs one cell of a scenario alone — its servers, leaf and request
sizes, no network, Poisson arrivals at a sweep of loads ρ·μ̄_j — and returns every completed
request's (N at arrival, serving latency) sample: exactly what the online estimator
(``simulation.estimation``) would record. :func:`fit_cell_model` fits DLB's softplus to them
(:func:`lbtheory.routers.fit_latency_model`) with the slope fixed at 1/μ̄_j, the cell's
theoretical processing rate (DLB App. B.1 computes it from replicas, token speeds and mean token
counts; beyond the knee every queued request adds 1/μ̄_j of drain time), so the fluid model's
capacities stay the cells' true ones.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._checks import check_int, check_real, check_seed
from ..network import Arc, Cell, CellNetwork
from ..routers import RandomRouter, fit_latency_model
from ._scenario import Scenario, ServerKind

__all__ = ["measure_latency_curve", "fit_cell_model", "CALIBRATION_LOADS",
           "CALIBRATION_REQUESTS"]

#: loads ρ = λ/μ̄_j at which a cell is measured [R]: light to saturated, and 10 % overloaded so
#: the queue's linear part (N far beyond the knee, up to the queue limits) is in the data.
CALIBRATION_LOADS = (0.2, 0.4, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.1)
#: expected arrivals per load [R]: ≈3000 samples per load bound the mean latency of the busier
#: N values to a few per cent.
CALIBRATION_REQUESTS = 3000


def _one_cell(sc: Scenario, j: int, rate: float) -> Scenario:
    """Cell j of ``sc`` alone, its own source at ``rate`` req/s, no delay, no events."""
    c = sc.network.cells[j]
    net = CellNetwork([Cell(c.name, c.replicas, rate, c.service)], [Arc(c.name, c.name, 0.0)])
    return dataclasses.replace(sc, network=net, servers=(sc.servers[j],), bursts=(),
                               outages=(), estimation=None, affinity=None,
                               rate_variation=None, probe_period_s=1.0, probing=None,
                               name=f"{sc.name}:calibrate-{c.name}")


def measure_latency_curve(sc: Scenario, j: int, *, seed: int,
                          loads: tuple[float, ...] = CALIBRATION_LOADS,
                          requests: int = CALIBRATION_REQUESTS) -> tuple[np.ndarray, np.ndarray]:
    """(N at arrival, serving latency s) of every completed request of cell ``j`` run alone at
    each load ρ·μ̄_j of ``loads`` (one run per load, ``requests`` expected arrivals each, from
    an empty cell; seeded by ``seed`` and the load's index).

    Raises:
        ParameterError: a bad cell index, seed, load or request count; a ``rate`` cell (its
            declared model is already the truth).
    """
    from ..errors import ParameterError
    from ._simulate import simulate

    check_int(j, "cell index", low=0, high=sc.network.n - 1)
    seed = check_seed(seed)
    check_int(requests, "requests per load", low=10)
    if sc.servers[j].kind is ServerKind.RATE:
        raise ParameterError("measure_latency_curve: a 'rate' cell completes at its declared "
                             "model's rate; there is nothing to measure")
    mu = sc.capacities()[j]
    Ns, lats = [], []
    for k, rho in enumerate(loads):
        check_real(rho, "load", low=0.0, low_open=True)
        T = requests / (rho * mu)
        one = _one_cell(sc, j, rho * mu)
        s = int(np.random.SeedSequence([seed, j, k, 17]).generate_state(1)[0])
        res = simulate(one, RandomRouter(name="rand"), duration_s=T, seed=s)
        k = res.completion_order()  # the completed requests, in the order the fit saw before
        Ns.append(res.arrival_workload[k])
        lats.append(res.latency_s[k] - res.network_s[k])
    return np.concatenate(Ns), np.concatenate(lats)


def fit_cell_model(sc: Scenario, j: int, *, seed: int, **measure: object):
    """DLB's softplus ℓ_j(N) fitted to :func:`measure_latency_curve` of cell ``j`` (slope fixed
    at 1/μ̄_j; the scenario's declared model of the cell is the fit's prior and start)."""
    N, lat = measure_latency_curve(sc, j, seed=seed, **measure)
    mu = sc.capacities()[j]
    return fit_latency_model(N, lat, sc.network.cells[j].service, slope=1.0 / mu)
