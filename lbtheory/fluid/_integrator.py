"""Method-of-steps integrator for the delayed fluid model (THEORY §2 (8), §3 (1), (2), (9)).

Pure JAX: :func:`integrate` is a ``lax.scan`` over chunks of ``lax.scan`` steps, carrying its own
ring-buffer history (diffrax has no delay support, its issues #406/#721).

Scheme (Heun / explicit trapezoid, second order), step h = dt, state (N_k, x_k):

1. write (N_k, x_k) into ring slot k mod L (write *before* any read: reading first made XLA copy
   the buffer every step — issue 4's probe);
2. one gather per quantity, ``A_k = H[k + 1 − d_ij]`` (d_ij = ⌊τ_ij/h⌋); the values at k − d_ij
   and k − 1 − d_ij were gathered on the previous two steps and are carried, so the stage values
   at t − τ_ij are linear interpolations ``(1 − φ)·V[k − d] + φ·V[k − d − 1]``, φ = τ/h − d
   (exact when τ is a multiple of h; differentiable in τ otherwise);
3. stage 1: ĉ_ij = c_ij(N_j(t_k − τ_ij)), inflow₁_j = Σ_i λ_i x_ij(t_k − τ_ij); predictor
   Ñ = max(0, N + h(inflow₁ − μ(N)));
4. stage 2 at t_{k+1}: arcs with d = 0 read the predictor; flow routing
   ``x_{k+1} = Π_Δ(x_k − h η (ĉ₁ + ĉ₂)/2)`` (the router update (2),
   :func:`lbtheory.simplex.flow_update`, with the trapezoidal cost; → tangent-cone ODE (9) as
   h → 0); discrete routing ``x_{k+1} = argmin-vertex(ĉ₂)`` (1,
   :func:`~lbtheory.simplex.simplex_argmin`);
5. inflow₂ uses x_{k+1} itself on d = 0 arcs, so what is sent equals what arrives (exact discrete
   conservation); departures ``min(h(μ(N) + μ(Ñ))/2, N + h(inflow₁ + inflow₂)/2)`` keep N ≥ 0.

A non-finite state records the first step and cell (reported by the caller as a typed error).

The history handling of steps 1–2 (ring layout, write, gather, interpolation, carried reads) is
written once, in :func:`_history_init`, :func:`_ring_write`, :func:`_ring_read` and
:func:`_delayed`; :func:`solve_dde` drives the same functions with the same Heun stages on a
scalar delay equation ``y' = F(y(t), y(t − τ))``, so the closed-form oracles of THEORY §7.4/§12
(π/2 limit, sin-history solution, order 2) test the integrator's history code.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_int, check_real
from ..costs import arc_costs, total_latency_rate
from ..errors import ParameterError
from ..models import ModelBank
from ..simplex import flow_update, simplex_argmin

__all__ = ["Mechanism", "DelayMode", "FluidParams", "StaticConfig", "Carry", "integrate",
           "initial_observation", "solve_dde"]


class Mechanism(enum.StrEnum):
    """Routing rule of the sources (THEORY §3); functions accept the member or its value."""

    #: the router update (2) x ← Π_Δ(x − η·dt·ĉ) (→ tangent-cone dynamics (9)).
    FLOW = "flow"
    #: everything to the cheapest admissible arcs (1), ties split evenly.
    DISCRETE = "discrete"



class DelayMode(enum.StrEnum):
    """How delays that are not multiples of dt are handled."""

    #: every delay must be a multiple of dt (to DELAY_TOL), else ParameterError.
    SNAP = "snap"
    #: linear interpolation of the history (differentiable in τ).
    INTERPOLATE = "interpolate"



@dataclasses.dataclass(frozen=True)
class FluidParams:
    """Differentiable inputs of the fluid model (a JAX pytree; all leaves may be traced).

    Attributes:
        arrival_rates: λ_i (n,), req/s.
        delays: τ_ij (n, n), one-way, s (0 off-arc).
        stepsize: η_i (n,), 1/(cost unit · s); ignored by discrete routing.
        models: the cells' service models (stacked parameters are leaves).
        replicas: k_j (n,) for the RIF cost.
        workload0: N(s) = N0 for s ≤ 0 (n,), requests (constant history).
        routing0: x(s) = x0 for s ≤ 0 (n, n) (constant history).
    """

    arrival_rates: Any
    delays: Any
    stepsize: Any
    models: ModelBank
    replicas: Any
    workload0: Any
    routing0: Any


jax.tree_util.register_dataclass(
    FluidParams,
    data_fields=[f.name for f in dataclasses.fields(FluidParams)],
    meta_fields=[])


@dataclasses.dataclass(frozen=True)
class StaticConfig:
    """Hashable structure of a run (a ``jit`` static argument)."""

    n: int
    mask: tuple[tuple[bool, ...], ...]
    mechanism: Mechanism
    cost: str
    round_delays: bool
    buffer_len: int
    dt: float
    n_chunks: int
    chunk_len: int
    save: bool = True
    checkpoint: bool = False
    unroll: int = 1


class Carry(NamedTuple):
    """State carried from step k to step k + 1 (a pytree).

    Attributes:
        k: step index (int32).
        workload: N_k (n,), requests.
        routing: x_k (n, n).
        buf_workload, buf_routing: ring buffers (L, n), (L, n, n); slot m holds step m mod L.
        read_workload, read_routing: H[k − d] per arc (gathered on the previous step), (n, n).
        prev_workload, prev_routing: exact values at k − 1 − d per arc (for the interpolation).
        departed: cumulative departures (n,), requests.
        latency_integral: Σ h·C over the steps so far, request·s.
        bad_step, bad_cell: first non-finite step and cell (−1 while every state is finite).
    """

    k: Any
    workload: Any
    routing: Any
    buf_workload: Any
    buf_routing: Any
    read_workload: Any
    read_routing: Any
    prev_workload: Any
    prev_routing: Any
    departed: Any
    latency_integral: Any
    bad_step: Any
    bad_cell: Any


# ---- history handling, shared by the fluid step and solve_dde ---------------------------------

def _delay_split(delays: Any, dt: float, round_delays: bool) -> tuple[Any, Any]:
    """(d, φ): d = ⌊τ/h⌋ (or round(τ/h) when snapping) as int32, φ = τ/h − d (differentiable)."""
    q = delays / dt
    d = jax.lax.stop_gradient(jnp.round(q) if round_delays else jnp.floor(q))
    return d.astype(jnp.int32), q - d


def _history_init(hist: Any, d: Any, offset: Any) -> tuple[Any, Any, Any]:
    """Ring buffer and carried reads before step 0 from history values.

    Args:
        hist: y at steps 0, −1, …, −(L + 1) (L + 2, *shape); L = buffer length ≥ max d.
        d: whole delay steps (broadcast with ``offset``); offset: flat indices within one slot.

    Returns:
        (buffer (L, *shape) with slot m holding step −((L − m) mod L), the read at −d, the read
        at −d − 1).
    """
    L = hist.shape[0] - 2
    stride = math.prod(hist.shape[1:])
    buf = hist[(L - np.arange(L)) % L]
    flat = hist.reshape(-1)
    return buf, flat[d * stride + offset], flat[(d + 1) * stride + offset]


def _ring_write(buf: Any, k: Any, value: Any) -> Any:
    """Store the state of step k in slot k mod L (done before the step's read)."""
    slot = k % buf.shape[0]
    z = jnp.zeros((), dtype=slot.dtype)
    return jax.lax.dynamic_update_slice(buf, value[None], (slot,) + (z,) * value.ndim)


def _ring_read(buf: Any, k: Any, d: Any, offset: Any) -> Any:
    """One gather of the history at step k + 1 − d: ``H[(k + 1 − d) mod L]`` at ``offset``."""
    stride = math.prod(buf.shape[1:])
    return buf.reshape(-1)[((k + 1 - d) % buf.shape[0]) * stride + offset]


def _delayed(zero: Any, phi: Any, now: Any, raw: Any, prev: Any) -> tuple[Any, Any]:
    """(value at step k − d − φ, exact value at k − d): ``now`` where d = 0, else the read ``raw``;
    ``(1 − φ)·V[k − d] + φ·V[k − d − 1]`` with ``prev`` = V[k − d − 1]."""
    exact = jnp.where(zero, now, raw)
    return (1.0 - phi) * exact + phi * prev, exact


# ---- the fluid step -----------------------------------------------------------------------------

def _derived(p: FluidParams, cfg: StaticConfig) -> dict[str, Any]:
    n = cfg.n
    di, phi = _delay_split(p.delays, cfg.dt, cfg.round_delays)
    return {"mask": jnp.asarray(np.array(cfg.mask, dtype=bool)), "d": di, "phi": phi,
            "zero": di == 0, "cols": jnp.arange(n)[None, :],
            "flat": jnp.arange(n * n).reshape(n, n)}


def _costs(p: FluidParams, cfg: StaticConfig, Nhat: Any) -> Any:
    return arc_costs(cfg.cost, p.models, Nhat, p.replicas, p.delays)


def _step(p: FluidParams, cfg: StaticConfig, dv: dict, c: Carry) -> Carry:
    h, n = cfg.dt, cfg.n
    lam, d, phi, zero = p.arrival_rates, dv["d"], dv["phi"], dv["zero"]
    N, x = c.workload, c.routing
    bufN = _ring_write(c.buf_workload, c.k, N)
    bufx = _ring_write(c.buf_routing, c.k, x)
    AN_new = _ring_read(bufN, c.k, d, dv["cols"])
    Ax_new = _ring_read(bufx, c.k, d, dv["flat"])
    Nrow = jnp.broadcast_to(N[None, :], (n, n))
    Nhat1, BN = _delayed(zero, phi, Nrow, c.read_workload, c.prev_workload)
    xhat1, Bx = _delayed(zero, phi, x, c.read_routing, c.prev_routing)
    c1 = _costs(p, cfg, Nhat1)
    inflow1 = jnp.sum(lam[:, None] * xhat1, axis=0)
    mu_N = p.models.rate(N)
    Ntil = jnp.maximum(N + h * (inflow1 - mu_N), 0.0)
    Nhat2, _ = _delayed(zero, phi, jnp.broadcast_to(Ntil[None, :], (n, n)), AN_new, BN)
    c2 = _costs(p, cfg, Nhat2)
    if cfg.mechanism is Mechanism.FLOW:
        x_new = flow_update(x, 0.5 * (c1 + c2), h * p.stepsize, dv["mask"])
    else:
        x_new = simplex_argmin(c2, dv["mask"])
    xhat2, _ = _delayed(zero, phi, x_new, Ax_new, Bx)
    inflow2 = jnp.sum(lam[:, None] * xhat2, axis=0)
    avail = N + 0.5 * h * (inflow1 + inflow2)
    out = jnp.minimum(0.5 * h * (mu_N + p.models.rate(Ntil)), avail)
    N_new = avail - out
    C = total_latency_rate(N, x, lam, p.delays)
    finite = (jnp.isfinite(N_new) & jnp.isfinite(jnp.sum(x_new, axis=1))
              & jnp.all(jnp.isfinite(c2) | ~dv["mask"], axis=0))
    newly = (c.bad_step < 0) & ~jnp.all(finite)
    bad = jnp.where(newly, c.k, c.bad_step).astype(c.bad_step.dtype)
    badcell = jnp.where(newly, jnp.argmin(finite).astype(c.bad_cell.dtype), c.bad_cell)
    return Carry(c.k + 1, N_new, x_new, bufN, bufx, AN_new, Ax_new, BN, Bx, c.departed + out,
                 c.latency_integral + h * C, bad, badcell)


def _observe(p: FluidParams, cfg: StaticConfig, dv: dict, c: Carry) -> dict[str, Any]:
    Nrow = jnp.broadcast_to(c.workload[None, :], (cfg.n, cfg.n))
    Nhat, _ = _delayed(dv["zero"], dv["phi"], Nrow, c.read_workload, c.prev_workload)
    return {"workload": c.workload, "routing": c.routing, "arc_cost": _costs(p, cfg, Nhat),
            "total_latency_rate": total_latency_rate(c.workload, c.routing, p.arrival_rates,
                                                     p.delays),
            "departed": c.departed}


def _init_carry(p: FluidParams, cfg: StaticConfig, dv: dict) -> Carry:
    n, L = cfg.n, cfg.buffer_len
    N0 = jnp.asarray(p.workload0, dtype=float)
    x0 = jnp.asarray(p.routing0, dtype=float)
    bufN, AN, BN = _history_init(jnp.broadcast_to(N0, (L + 2, n)), dv["d"], dv["cols"])
    bufx, Ax, Bx = _history_init(jnp.broadcast_to(x0, (L + 2, n, n)), dv["d"], dv["flat"])
    minus1 = jnp.asarray(-1, dtype=jnp.int32)
    return Carry(jnp.asarray(0, dtype=jnp.int32), N0, x0, bufN, bufx, AN, Ax, BN, Bx,
                 jnp.zeros(n, dtype=N0.dtype), jnp.zeros((), dtype=N0.dtype), minus1, minus1)


def initial_observation(p: FluidParams, cfg: StaticConfig) -> dict[str, Any]:
    """Saved quantities at t = 0 (constant history)."""
    dv = _derived(p, cfg)
    return _observe(p, cfg, dv, _init_carry(p, cfg, dv))


def integrate(p: FluidParams, cfg: StaticConfig) -> dict[str, Any]:
    """Run ``cfg.n_chunks × cfg.chunk_len`` steps of size ``cfg.dt``.

    Returns:
        dict with ``objective`` (time average of the total latency rate over [0, t1], trapezoid,
        request·s/s), ``bad_step``/``bad_cell`` (−1 if every state was finite), the final
        ``workload`` and ``routing``, and — with ``cfg.save`` — the saved arrays at the end of
        every chunk (``saved``: dict of stacked observations); without ``cfg.save`` only the saved
        workloads (for the convergence diagnosis of sensitivities).
    """
    dv = _derived(p, cfg)

    def inner(carry, _):
        return _step(p, cfg, dv, carry), None

    def chunk(carry):
        return jax.lax.scan(inner, carry, None, length=cfg.chunk_len, unroll=cfg.unroll)[0]

    if cfg.checkpoint:
        chunk = jax.checkpoint(chunk)

    def outer(carry, _):
        carry = chunk(carry)
        obs = _observe(p, cfg, dv, carry) if cfg.save else {"workload": carry.workload}
        return carry, obs

    carry0 = _init_carry(p, cfg, dv)
    carry, saved = jax.lax.scan(outer, carry0, None, length=cfg.n_chunks)
    h = cfg.dt
    T = h * cfg.n_chunks * cfg.chunk_len
    C0 = total_latency_rate(carry0.workload, carry0.routing, p.arrival_rates, p.delays)
    CK = total_latency_rate(carry.workload, carry.routing, p.arrival_rates, p.delays)
    objective = (carry.latency_integral + 0.5 * h * (CK - C0)) / T
    return {"objective": objective, "bad_step": carry.bad_step, "bad_cell": carry.bad_cell,
            "workload": carry.workload, "routing": carry.routing, "saved": saved}


def solve_dde(rhs: Callable[[Any, Any], Any], history: Callable[[Any], Any], *, delay: float,
              t1: float, dt: float, save_every: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Integrate ``y' = rhs(y(t), y(t − delay))`` on [0, t1] with the fluid integrator's scheme.

    Same history code as the fluid step (:func:`_history_init`, :func:`_ring_write`,
    :func:`_ring_read`, :func:`_delayed`, d = ⌊τ/h⌋ with linear interpolation) and the same Heun
    stages (the d = 0 stage-2 read takes the predictor). For verification against closed forms.

    Args:
        rhs: ``(y_now, y_delayed) -> dy/dt``, JAX-traceable, arrays of shape (m,).
        history: ``s -> y(s)`` for s ≤ 0 (called on the grid 0, −h, −2h, …).
        delay: τ ≥ 0 (s); need not be a multiple of dt.
        t1, dt: horizon and step (s); t1/dt a whole number of steps divisible by save_every.

    Returns:
        (t (S,), y (S, m)) every ``save_every`` steps, including t = 0.

    Raises:
        ParameterError: negative delay, non-positive t1/dt or save_every, or t1/dt not a whole
            multiple of save_every steps.
    """
    delay = check_real(delay, "solve_dde: delay", unit="s", low=0.0)
    t1 = check_real(t1, "solve_dde: t1", unit="s", low=0.0, low_open=True)
    dt = check_real(dt, "solve_dde: dt", unit="s", low=0.0, low_open=True)
    save_every = check_int(save_every, "solve_dde: save_every", low=1, unit="steps")
    K = round(t1 / dt)
    if K < 1 or abs(t1 / dt - K) > 1e-9 * K or K % save_every:
        raise ParameterError(f"solve_dde: t1/dt = {t1 / dt:.9g} must be a whole number of "
                             f"steps divisible by save_every = {save_every}")
    d, phi = _delay_split(jnp.asarray(float(delay)), dt, False)
    L = max(int(d), 1)
    hist = jnp.asarray(np.stack([np.atleast_1d(np.asarray(history(-j * dt), dtype=float))
                                 for j in range(L + 2)]))
    offset = jnp.arange(hist.shape[1])
    zero = d == 0
    buf, A, B = _history_init(hist, d, offset)

    def step(c, _):
        k, y, buf, A, Bp = c
        buf = _ring_write(buf, k, y)
        A_new = _ring_read(buf, k, d, offset)
        yd1, B = _delayed(zero, phi, y, A, Bp)
        f1 = rhs(y, yd1)
        ytil = y + dt * f1
        yd2, _ = _delayed(zero, phi, ytil, A_new, B)
        return (k + 1, y + 0.5 * dt * (f1 + rhs(ytil, yd2)), buf, A_new, B), None

    def chunk(c, _):
        c = jax.lax.scan(step, c, None, length=save_every)[0]
        return c, c[1]

    carry0 = (jnp.asarray(0, dtype=jnp.int32), hist[0], buf, A, B)
    _, ys = jax.jit(lambda c: jax.lax.scan(chunk, c, None, length=K // save_every))(carry0)
    ys = np.concatenate([np.asarray(hist[0])[None], np.asarray(ys)])
    return np.arange(len(ys)) * save_every * dt, ys
