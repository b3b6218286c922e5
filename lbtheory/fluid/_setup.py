"""Validation of fluid-model inputs; construction of :class:`FluidParams` and :class:`StaticConfig`.

Every bad input raises a typed error naming the parameter (and cell or arc) and what was expected.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_int, check_option, check_real
from ..costs import CostKind
from ..errors import ParameterError
from ..network import CellNetwork
from ..simplex import simplex_argmin
from ._integrator import DelayMode, FluidParams, Mechanism, StaticConfig

__all__ = ["float64", "in_float64", "MECHANISMS", "DELAY_MODES", "DELAY_TOL", "build",
           "fluid_problem", "default_save_every", "delay_steps", "check_delays", "as_stepsize"]

MECHANISMS = tuple(m.value for m in Mechanism)
DELAY_MODES = tuple(m.value for m in DelayMode)
#: Largest |τ/dt − round(τ/dt)| accepted by ``delay_mode="snap"`` (in units of dt).
DELAY_TOL = 1e-6
#: Round-off tolerated in a given x0 (e.g. a CVXPY routing): entries ≥ −X0_TOL, off-arc mass ≤
#: X0_TOL, row sums within 1e3·X0_TOL of 1; x0 is then clipped and renormalised.
X0_TOL = 1e-9
#: Default number of saved points is at most this.
MAX_DEFAULT_SAVES = 1000


def float64() -> Any:
    """The precision policy of the fluid entry points: a scope computing in float64.

    ``simulate_fluid``, ``simulate_fluid_batch`` and ``fluid_sensitivity`` run (input
    validation, compilation, integration, conversion to numpy) inside ``jax.enable_x64(True)``:
    float64 whatever the caller's ``jax_enable_x64`` setting, without changing it, so the API and
    the CLI give the same numbers bit for bit. (float32 drifts by ~1e-5 relative over a few
    thousand steps — too coarse for the closed-form oracles and for derivatives.) The functional
    interface (``fluid_problem`` → ``fluid_objective``) follows the caller's setting.
    """
    return jax.enable_x64(True)


_F = TypeVar("_F", bound=Callable[..., Any])


def in_float64(fn: _F) -> _F:
    """Decorator: run an entry point under :func:`float64` (the precision policy)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with float64():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


#: Most integration steps one run may take (t1/dt); far beyond any sensible horizon (≈ hours of
#: wall time at 1e9), it keeps absurd horizons (t1 = 1e308 s) a clear error instead of an overflow.
MAX_STEPS = 10**9


def n_steps(t1: Any, dt: Any) -> tuple[float, float, int]:
    """(t1, dt, K) with K = t1/dt steps; t1 must be a whole number of steps (to 1e-9)."""
    t1 = check_real(t1, "t1", unit="seconds", low=0.0, low_open=True)
    dt = check_real(dt, "dt", unit="seconds", low=0.0, low_open=True)
    if not t1 / dt <= MAX_STEPS:
        raise ParameterError(f"t1: the horizon t1 = {t1:g} s needs t1/dt = {t1 / dt:.3g} steps of "
                             f"dt = {dt:g} s; at most {MAX_STEPS:.0e} steps are allowed "
                             f"(shorten t1 or enlarge dt)")
    K = round(t1 / dt)
    if K < 1 or abs(t1 / dt - K) > 1e-9 * max(1.0, t1 / dt):
        raise ParameterError(f"t1: the horizon t1 = {t1:g} s must be a whole number of steps "
                             f"dt = {dt:g} s (t1/dt = {t1 / dt:.9g})")
    return t1, dt, int(K)


def default_save_every(K: int) -> int:
    """Smallest divisor of K that leaves at most MAX_DEFAULT_SAVES saved intervals."""
    for s in range(max(1, math.ceil(K / MAX_DEFAULT_SAVES)), K + 1):
        if K % s == 0:
            return s
    return K


def check_save_every(save_every: Any, K: int) -> int:
    """Validate ``save_every`` (steps between saved points; must divide the step count K)."""
    if save_every is None:
        return default_save_every(K)
    save_every = check_int(save_every, "save_every", low=1, unit="steps")
    if K % save_every:
        raise ParameterError(f"save_every: {save_every} must divide the number of steps "
                             f"t1/dt = {K}")
    return save_every


def check_delays(net: CellNetwork, delays: np.ndarray, dt: float,
                 mode: DelayMode | str) -> DelayMode:
    """Parse ``mode``; in ``snap`` mode every arc delay must be a multiple of dt to DELAY_TOL
    (else ParameterError). Returns the mode as a :class:`DelayMode`."""
    mode = check_option(DelayMode, mode, "delay_mode")
    if mode is not DelayMode.SNAP:
        return mode
        return
    q = np.asarray(delays, dtype=float) / dt
    off = np.abs(q - np.round(q)) * net.adjacency
    if np.any(off > DELAY_TOL):
        i, j = np.unravel_index(int(np.argmax(off)), off.shape)
        raise ParameterError(
            f"delay of arc {net.names[i]} -> {net.names[j]}: τ = {delays[i, j]:g} s is not a "
            f"multiple of dt = {dt:g} s (τ/dt = {q[i, j]:.9g}); choose dt dividing every delay "
            f"or pass delay_mode='interpolate' (linear history interpolation)")
    return mode


def delay_steps(delays: np.ndarray, dt: float, mode: str) -> np.ndarray:
    """d_ij = τ_ij/dt rounded (snap) or floored (interpolate), as integers."""
    q = np.asarray(delays, dtype=float) / dt
    return (np.round(q) if mode == "snap" else np.floor(q)).astype(int)


def as_stepsize(stepsize: Any, n: int, mechanism: str) -> np.ndarray:
    """η as an (n,) array (scalar → every source); positive finite for flow routing."""
    if mechanism == "discrete" and stepsize is None:
        return np.zeros(n)
    if stepsize is None:
        raise ParameterError("stepsize: flow routing needs a stepsize η > 0 (1/(cost unit·s)), "
                             "a scalar or one value per source cell")
    try:
        kind = np.asarray(stepsize).dtype.kind
        eta = np.asarray(stepsize, dtype=float) if kind in "iuf" else None
    except (TypeError, ValueError, OverflowError):
        eta = None
    if eta is None:  # text, a bool, a dict, an int beyond float: not a stepsize
        raise ParameterError(f"stepsize: expected a real number or one per source cell "
                             f"(1/(cost unit·s)), got {stepsize!r}")
    if eta.ndim == 0:
        eta = np.full(n, float(eta))
    if eta.shape != (n,):
        raise ParameterError(f"stepsize: expected a scalar or {n} values (one per source), got "
                             f"shape {eta.shape}")
    if mechanism == "flow" and not np.all(np.isfinite(eta) & (eta > 0)):
        raise ParameterError(f"stepsize: expected positive finite values, got {eta.tolist()}")
    return eta


def _initial_workload(net: CellNetwork, N0: Any) -> np.ndarray:
    if N0 is None:
        return np.zeros(net.n)
    N0 = np.asarray(N0, dtype=float)
    if N0.shape != (net.n,):
        raise ParameterError(f"N0: expected {net.n} workloads (one per cell), got shape {N0.shape}")
    bad = ~(np.isfinite(N0) & (N0 >= 0))
    if bad.any():
        j = int(np.argmax(bad))
        raise ParameterError(f"N0: workload of cell {net.names[j]!r} must be finite and ≥ 0, "
                             f"got {N0[j]!r}")
    return N0


def _initial_routing(net: CellNetwork, x0: Any, mechanism: str, kind: CostKind,
                     N0: np.ndarray) -> np.ndarray:
    adj = net.adjacency
    if x0 is None:
        if mechanism == "discrete":
            from ..costs import arc_costs

            c = arc_costs(kind, net.models, N0, net.replicas, net.delays)
            return simplex_argmin(c, adj)
        return net.uniform_routing()
    x0 = np.asarray(x0, dtype=float)
    if x0.shape != (net.n, net.n):
        raise ParameterError(f"x0: expected an {net.n}×{net.n} routing matrix, got shape "
                             f"{x0.shape}")
    if not np.all(np.isfinite(x0) & (x0 >= -X0_TOL)):
        raise ParameterError("x0: routing entries must be finite and ≥ 0")
    off = np.abs(x0) * ~adj
    if np.any(off > X0_TOL):
        i, j = np.unravel_index(int(np.argmax(off)), off.shape)
        raise ParameterError(f"x0: source {net.names[i]!r} routes {x0[i, j]:g} to "
                             f"{net.names[j]!r} but there is no arc {net.names[i]} -> "
                             f"{net.names[j]} (residency)")
    rows = x0.sum(axis=1)
    has = adj.any(axis=1)
    bad = has & (np.abs(rows - 1.0) > 1e3 * X0_TOL)
    if bad.any():
        i = int(np.argmax(bad))
        raise ParameterError(f"x0: routing row of source {net.names[i]!r} sums to {rows[i]:.12g}, "
                             f"expected 1")
    x0 = np.where(adj, np.maximum(x0, 0.0), 0.0)  # solver round-off: clip and renormalise
    rows = x0.sum(axis=1, keepdims=True)
    return np.divide(x0, rows, out=np.zeros_like(x0), where=rows > 0)


def build(net: CellNetwork, *, mechanism: Mechanism | str, cost: CostKind | str, stepsize: Any,
          t1: Any, dt: Any, x0: Any, N0: Any, save_every: Any, delay_mode: DelayMode | str,
          buffer_delays: np.ndarray | None = None) -> tuple[FluidParams, StaticConfig, dict]:
    """Validate inputs; return (params, static config, info dict with K, save_every, d)."""
    if not isinstance(net, CellNetwork):
        raise ParameterError(f"net: expected a CellNetwork, got {type(net).__name__}")
    mechanism = check_option(Mechanism, mechanism, "mechanism")
    kind = CostKind.parse(cost)
    t1, dt, K = n_steps(t1, dt)
    se = check_save_every(save_every, K)
    delay_mode = check_delays(net, net.delays, dt, delay_mode)
    eta = as_stepsize(stepsize, net.n, mechanism)
    N0a = _initial_workload(net, N0)
    x0a = _initial_routing(net, x0, mechanism, kind, N0a)
    bd = net.delays if buffer_delays is None else buffer_delays
    d = delay_steps(net.delays, dt, delay_mode)
    L = max(1, int(np.max(np.ceil(np.asarray(bd) / dt - 1e-9))) + 1)
    cfg = StaticConfig(n=net.n, mask=tuple(tuple(bool(v) for v in r) for r in net.adjacency),
                       mechanism=mechanism, cost=kind.value,
                       round_delays=delay_mode is DelayMode.SNAP,
                       buffer_len=L, dt=dt, n_chunks=K // se, chunk_len=se)
    params = FluidParams(arrival_rates=jnp.asarray(net.arrival_rates),
                         delays=jnp.asarray(np.asarray(net.delays, dtype=float)),
                         stepsize=jnp.asarray(eta), models=net.models,
                         replicas=jnp.asarray(net.replicas), workload0=jnp.asarray(N0a),
                         routing0=jnp.asarray(x0a))
    return params, cfg, {"K": K, "save_every": se, "d": d * net.adjacency, "t1": t1, "dt": dt,
                         "kind": kind, "stepsize": eta, "mechanism": mechanism}


def fluid_problem(net: CellNetwork, *, mechanism: Mechanism | str = "flow",
                  cost: CostKind | str = "gradient",
                  stepsize: Any = None, t1: float, dt: float = 1e-3, x0: Any = None,
                  N0: Any = None, save_every: int | None = None,
                  delay_mode: DelayMode | str = "snap") -> tuple[FluidParams, StaticConfig]:
    """Validated ``(params, cfg)`` for the functional interface (arguments as ``simulate_fluid``).

    ``params`` is a pytree of the differentiable inputs; ``cfg`` is static. Then
    ``fluid_objective(params, cfg)`` is a jittable, differentiable scalar. Its precision follows
    the caller's ``jax_enable_x64`` (build and evaluate inside :func:`float64` to match the
    float64 entry points).
    """
    params, cfg, _ = build(net, mechanism=mechanism, cost=cost, stepsize=stepsize, t1=t1, dt=dt,
                           x0=x0, N0=N0, save_every=save_every, delay_mode=delay_mode)
    return params, cfg
