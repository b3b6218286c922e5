"""A generic constant-delay DDE solver with the fluid integrator's scheme (for verification).

``y'(t) = F(y(t), y(t − τ))`` for t ≥ 0 with history ``y(s) = h(s)``, s ≤ 0. It uses exactly the
scheme of :mod:`lbtheory.fluid._integrator` — a ring buffer written before it is read, one gather
per step of ``H[k + 1 − d]`` with the values at k − d and k − 1 − d carried, linear interpolation
``(1 − φ)V[k − d] + φV[k − d − 1]`` (d = ⌊τ/h⌋, φ = τ/h − d), Heun with the predictor used on the
d = 0 stage-2 read — so the scalar oracles of THEORY §7.4/§12 (π/2 stability limit, y' = y(t − 3π/2)
on sin t, second-order convergence) test the integrator's history handling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError

__all__ = ["solve_dde"]


def solve_dde(rhs: Callable[[Any, Any], Any], history: Callable[[Any], Any], *, delay: float,
              t1: float, dt: float, save_every: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Integrate y' = rhs(y(t), y(t − delay)) on [0, t1] (Heun, step dt).

    Args:
        rhs: ``(y_now, y_delayed) -> dy/dt``, JAX-traceable, arrays of shape (m,).
        history: ``s -> y(s)`` for s ≤ 0 (numpy/JAX-traceable; called on a grid).
        delay: τ ≥ 0 (s); need not be a multiple of dt.
        t1, dt: horizon and step (s); t1/dt must be a whole number; save_every divides it.

    Returns:
        (t (S,), y (S, m)) at every ``save_every`` steps including t = 0.
    """
    if not (delay >= 0 and dt > 0 and t1 > 0):
        raise ModelError(f"solve_dde: need delay ≥ 0, dt > 0, t1 > 0; got delay={delay}, "
                         f"dt={dt}, t1={t1}")
    K = round(t1 / dt)
    if abs(t1 / dt - K) > 1e-9 * K or K % save_every:
        raise ModelError(f"solve_dde: t1/dt = {t1 / dt:.9g} must be a whole number of steps "
                         f"divisible by save_every = {save_every}")
    d = int(np.floor(delay / dt))
    phi = delay / dt - d
    L = max(d, 1)
    grid = -np.arange(L + 2) * dt
    hv = np.stack([np.atleast_1d(np.asarray(history(s), dtype=float)) for s in grid])
    y0 = jnp.asarray(hv[0])
    buf = jnp.asarray(hv[(L - np.arange(L)) % L])  # slot m holds time −((L − m) mod L)·dt
    hv = jnp.asarray(hv)
    carry0 = (jnp.asarray(0), y0, buf, hv[d], hv[d + 1])

    def step(carry, _):
        k, y, buf, A, Bp = carry
        buf = jax.lax.dynamic_update_slice(buf, y[None], (k % L, jnp.zeros((), k.dtype)))
        A_new = buf[(k + 1 - d) % L]
        B = y if d == 0 else A
        f1 = rhs(y, (1 - phi) * B + phi * Bp)
        ytil = y + dt * f1
        A2 = ytil if d == 0 else A_new
        f2 = rhs(ytil, (1 - phi) * A2 + phi * B)
        return (k + 1, y + 0.5 * dt * (f1 + f2), buf, A_new, B), None

    def chunk(carry, _):
        carry = jax.lax.scan(step, carry, None, length=save_every)[0]
        return carry, carry[1]

    run = jax.jit(lambda c: jax.lax.scan(chunk, c, None, length=K // save_every))
    _, ys = run(carry0)
    ys = np.concatenate([np.asarray(y0)[None], np.asarray(ys)])
    return np.arange(len(ys)) * save_every * dt, ys
