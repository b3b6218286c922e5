"""``simulate_fluid``: the delayed fluid model (8) with flow (2)/(9) or discrete (1) routing."""

from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np

from ..costs import CostKind
from ..errors import DynamicsStatus, ParameterError, UnstableError
from ..network import CellNetwork
from ._integrator import (
    DelayMode,
    FluidParams,
    Mechanism,
    StaticConfig,
    initial_observation,
    integrate,
)
from ._setup import build, in_float64
from ._solution import FluidSolution, diagnose_trajectory

__all__ = ["simulate_fluid", "equilibrium_workload", "run_compiled"]


@functools.partial(jax.jit, static_argnames=("cfg",))
def _run(params: FluidParams, cfg: StaticConfig) -> tuple[dict, dict]:
    return initial_observation(params, cfg), integrate(params, cfg)


def run_compiled(params: FluidParams, cfg: StaticConfig) -> tuple[dict, dict]:
    """The jitted simulation (cached per static configuration): (t = 0 observation, result)."""
    return _run(params, cfg)


def equilibrium_workload(net: CellNetwork, cost: Any, equilibrium: Any) -> np.ndarray | None:
    """N* from ``equilibrium``: None → None; "auto"/True → solve with lbtheory.equilibrium;
    an object with ``.workload`` (EquilibriumResult); or an (n,) array of workloads."""
    if equilibrium is None or equilibrium is False:
        return None
    if isinstance(equilibrium, str) or equilibrium is True:
        if equilibrium is not True and equilibrium != "auto":
            raise ParameterError(f"equilibrium: expected None, 'auto', an EquilibriumResult or "
                                 f"{net.n} workloads, got {equilibrium!r}")
        from ..equilibrium import solve_equilibrium

        return np.asarray(solve_equilibrium(net, cost).workload, dtype=float)
    W = np.asarray(getattr(equilibrium, "workload", equilibrium), dtype=float)
    if W.shape != (net.n,) or not np.all(np.isfinite(W)):
        raise ParameterError(f"equilibrium: expected {net.n} finite equilibrium workloads, got "
                             f"shape {W.shape}")
    return W


def _nonfinite_error(net: CellNetwork, step: int, cell: int, dt: float,
                     scenario: int | None = None) -> UnstableError:
    where = "" if scenario is None else f"scenario {scenario}: "
    return UnstableError(f"{where}fluid model: non-finite state at step {step} (t = "
                         f"{step * dt:g} s) in cell {net.names[cell]!r}; the dynamics diverged — "
                         f"reduce the stepsize or dt")


def assemble(net: CellNetwork, obs0: dict, res: dict, info: dict, *,
             Nstar: np.ndarray | None, throw: bool,
             scenario: int | None = None) -> FluidSolution:
    """Turn device arrays into a :class:`FluidSolution` (one scenario); raise on non-finite
    (naming ``scenario``, the index in a batch, when given)."""
    saved = {k: np.concatenate([np.asarray(obs0[k])[None], np.asarray(v)])
             for k, v in res["saved"].items()}
    bad = int(res["bad_step"])
    if bad >= 0 and throw:
        raise _nonfinite_error(net, bad, int(res["bad_cell"]), info["dt"], scenario)
    status, _, _ = diagnose_trajectory(saved["workload"])
    if bad >= 0:
        status = DynamicsStatus.DIVERGED
    cost = np.where(net.adjacency, saved["arc_cost"], np.nan)
    S = len(saved["workload"])
    t = np.arange(S) * info["save_every"] * info["dt"]
    dist = None if Nstar is None else np.linalg.norm(saved["workload"] - Nstar, axis=-1)
    return FluidSolution(
        t=t, workload=saved["workload"], routing=saved["routing"], arc_cost=cost,
        total_latency_rate=saved["total_latency_rate"], departed=saved["departed"],
        mean_total_latency_rate=float(res["objective"]), distance_to_equilibrium=dist,
        equilibrium_workload=Nstar, status=status, names=net.names, mechanism=info["mechanism"],
        cost=info["kind"].value, dt=info["dt"], stepsize=info["stepsize"],
        delay_steps=info["d"], bad_step=bad,
        bad_cell=net.names[int(res["bad_cell"])] if bad >= 0 else None)


@in_float64  # the precision policy: float64, scoped (_setup.float64)
def simulate_fluid(net: CellNetwork, *, mechanism: Mechanism | str = "flow",
                   cost: CostKind | str = "gradient",
                   stepsize: Any = None, t1: float, dt: float = 1e-3, x0: Any = None,
                   N0: Any = None, save_every: int | None = None, equilibrium: Any = None,
                   delay_mode: DelayMode | str = "snap", throw: bool = True) -> FluidSolution:
    """Simulate the delayed fluid model of THEORY §2–3 on ``net`` over [0, t1].

    Workloads follow (8), ``dN_j/dt = Σ_i λ_i x_ij(t − τ_ij) − μ_j(N_j)``; source i sees
    ĉ_ij(t) = c_ij(N_j(t − τ_ij)) (one one-way delay old, THEORY §3 [R]). Flow routing applies the
    router update (2) ``x_i ← Π_{Δ_i}(x_i − η_i·dt·ĉ_i)`` (trapezoidal cost, second order), whose
    limit as dt → 0 is the tangent-cone dynamics (9); discrete routing (1) sends everything to the
    cheapest admissible arc (ties split evenly). History is constant: N(s) = N0, x(s) = x0 for
    s ≤ 0. Residency: routing is zero off the admissible arcs. Computed in float64 whatever the
    ``jax_enable_x64`` setting (scoped; the CLI gives the same numbers).

    Args:
        net: the cell network (arrival rates λ, one-way delays τ, service models).
        mechanism: :class:`Mechanism` or its value, ``"flow"`` or ``"discrete"``.
        cost: ``"rif"``, ``"latency"`` or ``"gradient"`` (:mod:`lbtheory.costs`).
        stepsize: η (scalar or one per source), 1/(cost unit·s): s⁻² for latency/gradient costs,
            s⁻¹ for RIF. Its meaning does not change with dt. Ignored by discrete routing.
        t1: horizon (s), a whole number of steps.
        dt: step (s). Delays must be multiples of dt (``delay_mode="snap"``, error otherwise) or
            are linearly interpolated (``"interpolate"``, needed for derivatives w.r.t. τ).
        x0: initial routing (n×n); default uniform over admissible arcs (flow) or the cheapest
            arcs at N0 (discrete).
        N0: initial workloads (n,), requests; default 0.
        save_every: steps between saved points (divides t1/dt); default ≤ 1000 points.
        equilibrium: None, ``"auto"`` (solve with :mod:`lbtheory.equilibrium`), an
            ``EquilibriumResult`` or N* (n,), to report ``distance_to_equilibrium``.
        throw: raise :class:`~lbtheory.errors.UnstableError` on a non-finite state (naming step
            and cell); with ``throw=False`` return it with ``status = DIVERGED``.

    Returns:
        :class:`FluidSolution`.

    Example:
        >>> from lbtheory.instances import symmetric_two_cell
        >>> sol = simulate_fluid(symmetric_two_cell(), stepsize=0.3, t1=60.0, N0=[9.0, 6.0, 0.0])
        >>> [round(float(v), 2) for v in sol.workload[-1, :2]]  # N* = 7.5 per cell (THEORY §7.5)
        [7.5, 7.5]
    """
    params, cfg, info = build(net, mechanism=mechanism, cost=cost, stepsize=stepsize, t1=t1,
                              dt=dt, x0=x0, N0=N0, save_every=save_every, delay_mode=delay_mode)
    Nstar = equilibrium_workload(net, info["kind"], equilibrium)
    obs0, res = run_compiled(params, cfg)
    return assemble(net, obs0, res, info, Nstar=Nstar, throw=throw)

