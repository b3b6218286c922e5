"""Result object of a fluid simulation and the convergence diagnosis of a trajectory."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import DynamicsStatus
from ._integrator import Mechanism

__all__ = ["FluidSolution", "diagnose_trajectory", "DECAY_RATIO", "SETTLED_RTOL"]

#: The tail amplitude counts as settled below SETTLED_RTOL·(1 + mean workload) requests.
SETTLED_RTOL = 1e-6
#: A trajectory is still converging if its last-quarter amplitude is below DECAY_RATIO × the
#: amplitude of the quarter before.
DECAY_RATIO = 0.9


def _amplitude(W: np.ndarray) -> float:
    """Peak-to-peak of the workloads about their linear trend (max over cells), requests.

    Detrending separates an oscillation from a slow monotone drift towards equilibrium (whose
    detrended residual is only its curvature, which decays)."""
    if len(W) < 3:
        return float(np.max(W.max(axis=0) - W.min(axis=0))) if len(W) else 0.0
    s = np.linspace(-1.0, 1.0, len(W))[:, None]
    slope = (s * (W - W.mean(axis=0))).sum(axis=0) / (s * s).sum()
    R = W - W.mean(axis=0) - s * slope
    return float(np.max(R.max(axis=0) - R.min(axis=0)))


def _monotone(W: np.ndarray, tol: float) -> bool:
    """Every cell's workload moves one way only (steps smaller than ``tol`` ignored)."""
    dW = np.diff(W, axis=0)
    return bool(np.all(np.all(dW >= -tol, axis=0) | np.all(dW <= tol, axis=0)))


def diagnose_trajectory(workload: np.ndarray) -> tuple[DynamicsStatus, float, float]:
    """Classify saved workloads (S, n) from their last two quarters.

    Returns:
        (status, amplitude of the 3rd quarter, amplitude of the last quarter), amplitudes in
        requests: for a monotone last quarter the peak-to-peak movement of the workloads, else
        the peak-to-peak about the linear trend of the quarter (max over cells). Status:

        * ``DynamicsStatus.DIVERGED`` — a non-finite state;
        * ``DynamicsStatus.CONVERGED`` — the last quarter is settled (amplitude ≤
            SETTLED_RTOL·(1 + mean N)) or still decaying (≤ DECAY_RATIO × the 3rd quarter's);
        * ``DynamicsStatus.MAX_STEPS`` — every workload still moves monotonically at the horizon
            and the movement is not decaying (a slow approach: run longer);
        * ``DynamicsStatus.OSCILLATING`` — a sustained or growing oscillation.
    """
    W = np.asarray(workload, dtype=float)
    if not np.all(np.isfinite(W)):
        return DynamicsStatus.DIVERGED, float("nan"), float("nan")
    S = len(W)
    q3, q4 = W[S // 2: (3 * S) // 4 + 1], W[(3 * S) // 4:]
    tol = SETTLED_RTOL * (1.0 + float(np.mean(np.abs(W[-1]))))
    if len(q4) >= 2 and _monotone(q4, tol / len(q4)):
        a3, a4 = (float(np.max(q.max(axis=0) - q.min(axis=0))) for q in (q3, q4))
        if a4 <= tol or a4 <= DECAY_RATIO * a3:
            return DynamicsStatus.CONVERGED, a3, a4
        return DynamicsStatus.MAX_STEPS, a3, a4
    a3, a4 = _amplitude(q3), _amplitude(q4)
    if a4 <= tol or a4 <= DECAY_RATIO * a3:
        return DynamicsStatus.CONVERGED, a3, a4
    return DynamicsStatus.OSCILLATING, a3, a4


@dataclasses.dataclass(frozen=True)
class FluidSolution:
    """Trajectory of the delayed fluid model at the saved times (numpy arrays).

    With :func:`~lbtheory.fluid.simulate_fluid_batch` every array gains a leading scenario axis.

    Attributes:
        t: saved times (S,), s, from 0 to t1.
        workload: N(t) (S, n), requests.
        routing: x(t) (S, n, n); row i = source i, column j = destination.
        arc_cost: delayed arc costs ĉ_ij(t) = c_ij(N_j(t − τ_ij)) (S, n, n); NaN off-arc.
        total_latency_rate: C(t) = Σ_j N_j + Σ_ij λ_i x_ij 2τ_ij (S,), request·s/s (Little's law:
            mean end-to-end latency = C/Λ seconds).
        departed: cumulative departures per cell since t = 0 (S, n), requests.
        mean_total_latency_rate: time average of C over [0, t1] (trapezoid over every step).
        distance_to_equilibrium: ‖N(t) − N*‖₂ (S,), requests, or None when no equilibrium was
            given or computed. Workloads N* are unique (Lemma 1); routing need not be.
        equilibrium_workload: N* (n,) or None.
        status: CONVERGED / OSCILLATING / MAX_STEPS (still moving monotonically at t1) /
            DIVERGED (non-finite), from :func:`diagnose_trajectory`; a tuple of them (one per
            scenario) from :func:`~lbtheory.fluid.simulate_fluid_batch`.
        names: cell names; mechanism, cost, dt (s), delay_steps (d_ij = τ_ij/dt on arcs).
        bad_step, bad_cell: first step and cell with a non-finite state (−1 / None if none).
    """

    t: np.ndarray
    workload: np.ndarray
    routing: np.ndarray
    arc_cost: np.ndarray
    total_latency_rate: np.ndarray
    departed: np.ndarray
    mean_total_latency_rate: Any
    distance_to_equilibrium: np.ndarray | None
    equilibrium_workload: np.ndarray | None
    status: DynamicsStatus | tuple[DynamicsStatus, ...]
    names: tuple[str, ...]
    mechanism: Mechanism
    cost: str
    dt: float
    stepsize: np.ndarray
    delay_steps: np.ndarray
    bad_step: Any = -1
    bad_cell: Any = None

    @property
    def final_distance_to_equilibrium(self) -> Any:
        """‖N(t1) − N*‖₂ (requests), or None without an equilibrium."""
        d = self.distance_to_equilibrium
        return None if d is None else d[..., -1]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict. Contract keys (never renamed): ``t``, ``workload``, ``routing``,
        ``total_latency_rate``, ``final_distance_to_equilibrium``."""
        fd = self.final_distance_to_equilibrium
        return {
            "t": self.t, "workload": self.workload, "routing": self.routing,
            "total_latency_rate": self.total_latency_rate,
            "final_distance_to_equilibrium": None if fd is None else np.asarray(fd).tolist(),
            "mean_total_latency_rate": np.asarray(self.mean_total_latency_rate).tolist(),
            "distance_to_equilibrium": self.distance_to_equilibrium,
            "equilibrium_workload": self.equilibrium_workload,
            "status": self.status.value if isinstance(self.status, DynamicsStatus) else
            [st.value for st in self.status],
            "cells": list(self.names), "mechanism": str(self.mechanism), "cost": self.cost,
            "dt": self.dt, "stepsize": self.stepsize,
        }
