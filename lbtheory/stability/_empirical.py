"""Empirical check: the nonlinear fluid model near the critical stepsize (THEORY §7.5–7.6).

Start the fluid model (:func:`lbtheory.fluid.simulate_fluid`) at the equilibrium with a small
workload perturbation, measure the exponential rate of the envelope of ‖N(t) − N*‖ and compare it
with the real part of the rightmost root of the linearisation. Below the threshold the envelope
decays, above it grows until nonlinearity saturates it into a sustained oscillation.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import numpy as np

from .._checks import Seed, as_generator, validate_stepsize
from ..costs import CostKind
from ..errors import DynamicsStatus
from ..network import CellNetwork
from ._critical import DEFAULT_NODES, spectrum
from ._linearise import Linearisation, linearise

__all__ = ["EmpiricalCheck", "envelope_rate", "empirical_check", "dynamics_status"]


@dataclasses.dataclass(frozen=True)
class EmpiricalCheck:
    """Simulated vs predicted local behaviour at one stepsize.

    Attributes:
        stepsize: common stepsize scale simulated.
        predicted_root: rightmost root of the linearisation (1/s), Im ≥ 0.
        measured_rate: fitted exponential rate of the envelope of ‖N − N*‖ (1/s).
        t: saved times (s).
        deviation: ‖N(t) − N*‖₂ (requests).
        workload: (T, n) simulated workloads.
        status: :class:`~lbtheory.errors.DynamicsStatus` of the simulated perturbation —
            ``converged`` (the envelope of ‖N − N*‖ decays: measured rate < 0, or no deviation
            at all), ``oscillating`` (it is sustained or grows: rate ≥ 0), ``diverged`` (a
            non-finite workload) or ``max_steps`` (the horizon after ``fit_after`` holds too
            few points to fit a rate: lengthen ``t1``).
    """

    stepsize: float
    predicted_root: complex
    measured_rate: float
    t: np.ndarray
    deviation: np.ndarray
    workload: np.ndarray
    status: DynamicsStatus = DynamicsStatus.MAX_STEPS

    @property
    def predicted_rate(self) -> float:
        """Re of the rightmost root (1/s)."""
        return self.predicted_root.real

    @property
    def verdict(self) -> str:
        """``"converges"`` if the measured envelope decays, else ``"oscillates"`` (the word the
        stored charts use; :attr:`status` tells the undecided cases apart)."""
        return "converges" if self.status is DynamicsStatus.CONVERGED else "oscillates"


def dynamics_status(workload: np.ndarray, deviation: np.ndarray, rate: float) -> DynamicsStatus:
    """:attr:`EmpiricalCheck.status` of a perturbed run: its workloads, its deviation from the
    equilibrium ‖N − N*‖ (requests) and the envelope's fitted rate (1/s)."""
    if not np.all(np.isfinite(workload)):
        return DynamicsStatus.DIVERGED
    if not np.any(deviation > 0):
        return DynamicsStatus.CONVERGED  # no perturbation to decay: at the equilibrium
    if math.isnan(rate):
        return DynamicsStatus.MAX_STEPS
    return DynamicsStatus.CONVERGED if rate < 0 else DynamicsStatus.OSCILLATING


def envelope_rate(t: Any, deviation: Any, *, t_min: float = 0.0) -> float:
    """Exponential rate (1/s) of the envelope of an oscillating, decaying or growing signal.

    Least-squares slope of log(local maxima) against time, for maxima after ``t_min``; falls back
    to all points when fewer than three maxima exist (monotone decay).
    """
    t = np.asarray(t, dtype=float)
    d = np.asarray(deviation, dtype=float)
    idx = np.flatnonzero((d[1:-1] > d[:-2]) & (d[1:-1] >= d[2:])) + 1
    idx = idx[t[idx] >= t_min]
    if idx.size < 3:
        idx = np.flatnonzero((t >= t_min) & (d > 0))
    if idx.size < 2:
        return math.nan
    return float(np.polyfit(t[idx], np.log(d[idx]), 1)[0])


def empirical_check(net: CellNetwork, cost: CostKind | str = "gradient",
                    stepsize: float = 1.0, *, t1: float = 150.0, dt: float = 1e-3,
                    perturbation: float = 0.01, seed: Seed = 0,
                    linearisation: Linearisation | None = None, fit_after: float | None = None,
                    n_nodes: int = DEFAULT_NODES) -> EmpiricalCheck:
    """Simulate the fluid model from a perturbed equilibrium and measure the growth rate.

    Args:
        stepsize: common stepsize scale (η_i = stepsize · weights[i] of the linearisation).
        t1, dt: horizon and step of the fluid model (s); delays must be multiples of dt.
        perturbation: relative workload perturbation (of N*_j, used cells only).
        seed: seed of the perturbation direction (an int or a ``numpy.random.Generator``).
        fit_after: start of the fitting window (s); default t1/5.

    Near the threshold the rates are small (~1e-3/s) and float32 cannot resolve them: enable
    ``jax_enable_x64`` first (a warning is issued otherwise).

    Raises:
        StepsizeError: ``stepsize`` ≤ 0.
    """
    import jax

    from ..fluid import simulate_fluid

    if not jax.config.jax_enable_x64:
        warnings.warn("empirical_check: jax_enable_x64 is off; float32 fluid runs cannot "
                      "resolve near-critical growth rates", RuntimeWarning, stacklevel=2)

    eta = validate_stepsize(stepsize)
    lin = linearisation or linearise(net, cost)
    pt = lin.point
    rng = as_generator(seed)
    used = pt.support.any(axis=0)
    direction = np.where(used, rng.uniform(-1.0, 1.0, size=net.n), 0.0)
    N0 = pt.workload * (1.0 + perturbation * direction)
    sol = simulate_fluid(net, mechanism="flow", cost=pt.cost.value, stepsize=eta * lin.weights,
                         t1=t1, dt=dt, x0=pt.routing, N0=N0)
    t = np.asarray(sol.t, dtype=float)
    W = np.asarray(sol.workload, dtype=float)
    dev = np.linalg.norm(W - pt.workload[None], axis=1)
    finite = bool(np.all(np.isfinite(dev)))
    rate = envelope_rate(t, dev, t_min=t1 / 5 if fit_after is None else fit_after) \
        if finite else math.nan
    root = spectrum(lin, eta, n_nodes=n_nodes).rightmost
    return EmpiricalCheck(stepsize=eta, predicted_root=root, measured_rate=rate, t=t,
                          deviation=dev, workload=W, status=dynamics_status(W, dev, rate))
