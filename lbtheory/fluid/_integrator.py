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
   ``x_{k+1} = Π_Δ(x_k − h η (ĉ₁ + ĉ₂)/2)`` (the router update (2) with the trapezoidal cost;
   → tangent-cone ODE (9) as h → 0); discrete routing ``x_{k+1} = argmin-vertex(ĉ₂)`` (1);
5. inflow₂ uses x_{k+1} itself on d = 0 arcs, so what is sent equals what arrives (exact discrete
   conservation); departures ``min(h(μ(N) + μ(Ñ))/2, N + h(inflow₁ + inflow₂)/2)`` keep N ≥ 0.

A non-finite state records the first step and cell (reported by the caller as a typed error).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..costs import arc_costs, total_latency_rate
from ..models import ModelBank
from ..simplex import project_simplex, simplex_argmin

__all__ = ["FluidParams", "StaticConfig", "integrate", "initial_observation"]


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
    mechanism: str
    cost: str
    round_delays: bool
    buffer_len: int
    dt: float
    n_chunks: int
    chunk_len: int
    save: bool = True
    checkpoint: bool = False
    unroll: int = 1


def _derived(p: FluidParams, cfg: StaticConfig) -> dict[str, Any]:
    n, L = cfg.n, cfg.buffer_len
    q = p.delays / cfg.dt
    d = jnp.round(q) if cfg.round_delays else jnp.floor(q)
    d = jax.lax.stop_gradient(d)
    di = d.astype(jnp.int32)
    cols = jnp.arange(n)[None, :]
    flat = jnp.arange(n * n).reshape(n, n)
    return {"mask": jnp.asarray(np.array(cfg.mask, dtype=bool)), "d": di, "phi": q - d,
            "zero": di == 0, "cols": cols, "flat": flat, "L": L}


def _costs(p: FluidParams, cfg: StaticConfig, Nhat: Any) -> Any:
    return arc_costs(cfg.cost, p.models, Nhat, p.replicas, p.delays)


def _delayed(dv: dict, now: Any, raw: Any, prev: Any) -> tuple[Any, Any]:
    """(value at k − d − φ, exact value at k − d): ``now`` on d = 0 arcs, else the carried read."""
    exact = jnp.where(dv["zero"], now, raw)
    return (1.0 - dv["phi"]) * exact + dv["phi"] * prev, exact


def _step(p: FluidParams, cfg: StaticConfig, dv: dict, carry: tuple) -> tuple:
    (k, N, x, bufN, bufx, AN, Ax, BNp, Bxp, dep, sumC, bad, badcell) = carry
    h, L, n = cfg.dt, dv["L"], cfg.n
    lam = p.arrival_rates
    slot = k % L
    z = jnp.zeros((), dtype=slot.dtype)
    bufN = jax.lax.dynamic_update_slice(bufN, N[None, :], (slot, z))
    bufx = jax.lax.dynamic_update_slice(bufx, x[None, :, :], (slot, z, z))
    s_next = (k + 1 - dv["d"]) % L
    AN_new = bufN.reshape(-1)[s_next * n + dv["cols"]]
    Ax_new = bufx.reshape(-1)[s_next * (n * n) + dv["flat"]]
    Nrow = jnp.broadcast_to(N[None, :], (n, n))
    Nhat1, BN = _delayed(dv, Nrow, AN, BNp)
    xhat1, Bx = _delayed(dv, x, Ax, Bxp)
    c1 = _costs(p, cfg, Nhat1)
    inflow1 = jnp.sum(lam[:, None] * xhat1, axis=0)
    mu_N = p.models.rate(N)
    Ntil = jnp.maximum(N + h * (inflow1 - mu_N), 0.0)
    Nhat2 = (1.0 - dv["phi"]) * jnp.where(dv["zero"], Ntil[None, :], AN_new) + dv["phi"] * BN
    c2 = _costs(p, cfg, Nhat2)
    if cfg.mechanism == "flow":
        v = x - h * p.stepsize[:, None] * 0.5 * (c1 + c2)
        x_new = project_simplex(v, dv["mask"], hint=x > 0)
    else:
        x_new = simplex_argmin(c2, dv["mask"])
    xhat2 = (1.0 - dv["phi"]) * jnp.where(dv["zero"], x_new, Ax_new) + dv["phi"] * Bx
    inflow2 = jnp.sum(lam[:, None] * xhat2, axis=0)
    avail = N + 0.5 * h * (inflow1 + inflow2)
    out = jnp.minimum(0.5 * h * (mu_N + p.models.rate(Ntil)), avail)
    N_new = avail - out
    C = total_latency_rate(N, x, lam, p.delays)
    finite = (jnp.isfinite(N_new) & jnp.isfinite(jnp.sum(x_new, axis=1))
              & jnp.all(jnp.isfinite(c2) | ~dv["mask"], axis=0))
    newly = (bad < 0) & ~jnp.all(finite)
    bad = jnp.where(newly, k, bad).astype(bad.dtype)
    badcell = jnp.where(newly, jnp.argmin(finite).astype(badcell.dtype), badcell)
    return (k + 1, N_new, x_new, bufN, bufx, AN_new, Ax_new, BN, Bx, dep + out, sumC + h * C,
            bad, badcell)


def _observe(p: FluidParams, cfg: StaticConfig, dv: dict, carry: tuple) -> dict[str, Any]:
    (k, N, x, _, _, AN, _, BNp, _, dep, _, _, _) = carry
    Nrow = jnp.broadcast_to(N[None, :], (cfg.n, cfg.n))
    Nhat, _ = _delayed(dv, Nrow, AN, BNp)
    return {"workload": N, "routing": x, "arc_cost": _costs(p, cfg, Nhat),
            "total_latency_rate": total_latency_rate(N, x, p.arrival_rates, p.delays),
            "departed": dep}


def _init_carry(p: FluidParams, cfg: StaticConfig) -> tuple:
    n, L = cfg.n, cfg.buffer_len
    N0 = jnp.asarray(p.workload0, dtype=float)
    x0 = jnp.asarray(p.routing0, dtype=float)
    Nrow = jnp.broadcast_to(N0[None, :], (n, n))
    zero_i = jnp.asarray(0, dtype=jnp.int32)
    return (zero_i, N0, x0, jnp.broadcast_to(N0, (L, n)), jnp.broadcast_to(x0, (L, n, n)),
            Nrow, x0, Nrow, x0, jnp.zeros(n, dtype=N0.dtype), jnp.zeros((), dtype=N0.dtype),
            jnp.asarray(-1, dtype=jnp.int32), jnp.asarray(-1, dtype=jnp.int32))


def initial_observation(p: FluidParams, cfg: StaticConfig) -> dict[str, Any]:
    """Saved quantities at t = 0 (constant history)."""
    return _observe(p, cfg, _derived(p, cfg), _init_carry(p, cfg))


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
        obs = _observe(p, cfg, dv, carry) if cfg.save else {"workload": carry[1]}
        return carry, obs

    carry0 = _init_carry(p, cfg)
    carry, saved = jax.lax.scan(outer, carry0, None, length=cfg.n_chunks)
    h = cfg.dt
    T = h * cfg.n_chunks * cfg.chunk_len
    C0 = total_latency_rate(carry0[1], carry0[2], p.arrival_rates, p.delays)
    CK = total_latency_rate(carry[1], carry[2], p.arrival_rates, p.delays)
    objective = (carry[10] + 0.5 * h * (CK - C0)) / T
    return {"objective": objective, "bad_step": carry[11], "bad_cell": carry[12],
            "workload": carry[1], "routing": carry[2], "saved": saved}
