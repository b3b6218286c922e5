"""Sensitivities of the time-averaged total latency rate (issue 4, item 4).

The objective is J = (1/t1) ∫_0^{t1} C(t) dt with C = Σ_j N_j + Σ_ij λ_i x_ij 2τ_ij (request·s/s;
J/Λ is the mean end-to-end latency in s by Little's law). Its derivative is taken through the
integrator itself (discretise-then-differentiate), w.r.t. any of ``stepsize``, ``arrival_rates``,
``delays`` (needs ``delay_mode="interpolate"`` for the feedback part: snapped delays are piecewise
constant, so only the static cost 2τ and the wire term of C contribute) and ``service`` (every
service-model parameter of every cell).

Modes: ``forward`` (one JVP per input scalar, memory O(history)) wins for a handful of
parameters; ``reverse`` uses ``jax.checkpoint`` on ≈√K-step chunks so memory is O(√K) carries and
the cost ≈ two forward passes plus the backward sweep. ``auto`` picks forward for ≤ 8 scalars.

Well-posedness: past the stability limit the trajectory settles on (or grows towards) a limit
cycle, and the derivative of a long-horizon average grows with the horizon (phase sensitivity)
— it does not describe a local sensitivity of the long-run cost. The saved workloads are
diagnosed with :func:`~lbtheory.fluid.diagnose_trajectory`; a non-converging trajectory or a
non-finite derivative raises :class:`~lbtheory.errors.UnstableError` (``throw=True``) or is
returned flagged ``well_posed=False`` — never a silent huge number.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from .._checks import check_option
from ..costs import CostKind
from ..errors import DynamicsStatus, ParameterError, UnstableError
from ..network import CellNetwork
from ._integrator import DelayMode, FluidParams, Mechanism, StaticConfig, integrate
from ._setup import build, in_float64
from ._solution import diagnose_trajectory

__all__ = ["SensitivityMode", "FluidSensitivity", "fluid_sensitivity", "fluid_objective", "WRT",
           "FORWARD_MAX"]



class SensitivityMode(enum.StrEnum):
    """Differentiation mode of :func:`fluid_sensitivity`; the member or its value is accepted."""

    #: forward for at most FORWARD_MAX input scalars, else reverse.
    AUTO = "auto"
    #: one JVP per input scalar (memory O(history)).
    FORWARD = "forward"
    #: reverse mode with √K-step checkpoints (memory O(√K) carries).
    REVERSE = "reverse"



WRT = ("stepsize", "arrival_rates", "delays", "service")
#: ``mode="auto"`` uses forward mode up to this many input scalars.
FORWARD_MAX = 8


def fluid_objective(params: FluidParams, cfg: StaticConfig) -> Any:
    """J(params): time-averaged total latency rate (request·s/s); jax.grad/jvp-able and jittable
    (``cfg`` static). Build ``params``/``cfg`` with :func:`lbtheory.fluid._setup.build`."""
    return integrate(params, dataclasses.replace(cfg, save=False))["objective"]


@dataclasses.dataclass(frozen=True)
class FluidSensitivity:
    """Value and gradient of J = time-averaged total latency rate.

    Attributes:
        value: J (request·s/s); ``value / Λ`` is the mean latency (s).
        gradient: ``{"stepsize": (n,) or scalar, "arrival_rates": (n,), "delays": (n, n) (0
            off-arc), "service": {cell: {parameter: dJ/dθ}}}`` for the requested names.
        mode: ``SensitivityMode.FORWARD`` or ``SensitivityMode.REVERSE`` (the mode used).
        status: diagnosis of the trajectory (CONVERGED = derivative well posed; OSCILLATING,
            MAX_STEPS (still moving monotonically at t1) or DIVERGED = not).
        well_posed: status is CONVERGED and every derivative is finite.
        amplitudes: (3rd-quarter, last-quarter) workload oscillation amplitude, requests.
    """

    value: float
    gradient: dict[str, Any]
    mode: SensitivityMode
    status: DynamicsStatus
    well_posed: bool
    amplitudes: tuple[float, float]


def _chunking(K: int) -> tuple[int, int]:
    """(n_chunks, chunk_len) with chunk_len the divisor of K nearest √K."""
    r = math.isqrt(K)
    best = min((d for d in range(1, K + 1) if K % d == 0 and d <= 4 * r + 1),
               key=lambda d: abs(d - math.sqrt(K)))
    return K // best, best


def _substitute(base: FluidParams, sub: dict[str, Any], n: int) -> FluidParams:
    repl = {}
    if "stepsize" in sub:
        repl["stepsize"] = jnp.broadcast_to(sub["stepsize"], (n,))
    if "arrival_rates" in sub:
        repl["arrival_rates"] = sub["arrival_rates"]
    if "delays" in sub:
        repl["delays"] = sub["delays"]
    if "service" in sub:
        repl["models"] = sub["service"]
    return dataclasses.replace(base, **repl)


@functools.partial(jax.jit, static_argnames=("cfg", "mode"))
def _value_and_grad(sub: dict, base: FluidParams, cfg: StaticConfig, mode: str):
    def f(s):
        out = integrate(_substitute(base, s, cfg.n), cfg)
        return out["objective"], out["saved"]["workload"]

    if mode == "forward":
        flat, unravel = ravel_pytree(sub)

        def one(t):
            return jax.jvp(lambda fl: f(unravel(fl)), (flat,), (t,), has_aux=True)

        v, dv, W = jax.vmap(one, out_axes=(None, 0, None))(jnp.eye(flat.size, dtype=flat.dtype))
        return v, unravel(dv), W
    (v, W), g = jax.value_and_grad(f, has_aux=True)(sub)
    return v, g, W


def _service_dict(net: CellNetwork, gbank: Any) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {name: {} for name in net.names}
    for model, idx in gbank.groups:
        for f in dataclasses.fields(model):
            vals = np.atleast_1d(np.asarray(getattr(model, f.name), dtype=float))
            for j, v in zip(idx, vals):
                out[net.names[int(j)]][f.name] = float(v)
    return out


def _n_scalars(sub: dict) -> int:
    return sum(int(np.size(leaf)) for leaf in jax.tree_util.tree_leaves(sub))


@in_float64  # the precision policy: float64, scoped (_setup.float64)
def fluid_sensitivity(net: CellNetwork, *, wrt: Sequence[str] = ("stepsize",),
                      mechanism: Mechanism | str = "flow", cost: CostKind | str = "gradient",
                      stepsize: Any = None,
                      t1: float, dt: float = 1e-3, x0: Any = None, N0: Any = None,
                      delay_mode: DelayMode | str = "snap",
                      mode: SensitivityMode | str = "auto",
                      throw: bool = True) -> FluidSensitivity:
    """J = (1/t1)∫C dt and dJ/dθ for θ in ``wrt`` (see module docstring).

    Args:
        wrt: subset of ``("stepsize", "arrival_rates", "delays", "service")``.
        mode: ``"auto"``, ``"forward"`` or ``"reverse"``.
        Other arguments as :func:`~lbtheory.fluid.simulate_fluid`.

    Raises:
        UnstableError: the trajectory does not converge within t1 (oscillating regime: the
            long-horizon derivative is not a meaningful sensitivity) or a derivative is not
            finite — when ``throw``.
        ParameterError: unknown ``wrt`` name or ``mode``.
    """
    wrt = tuple(wrt)
    unknown = [w for w in wrt if w not in WRT]
    if unknown or not wrt:
        raise ParameterError(f"wrt: expected a non-empty subset of {WRT}, got {list(wrt)}")
    mode = check_option(SensitivityMode, mode, "mode")
    params, cfg, info = build(net, mechanism=mechanism, cost=cost, stepsize=stepsize, t1=t1,
                              dt=dt, x0=x0, N0=N0, save_every=None, delay_mode=delay_mode)
    nc, cl = _chunking(info["K"])
    scalar_eta = np.ndim(stepsize) == 0 and stepsize is not None
    sub: dict[str, Any] = {}
    for w in wrt:
        if w == "stepsize":
            sub[w] = params.stepsize[0] if scalar_eta else params.stepsize
        elif w == "service":
            sub[w] = jax.tree_util.tree_map(jnp.asarray, params.models)
        else:
            sub[w] = getattr(params, w)
    if mode == "auto":
        mode = (SensitivityMode.FORWARD if _n_scalars(sub) <= FORWARD_MAX
                else SensitivityMode.REVERSE)
    cfg = dataclasses.replace(cfg, n_chunks=nc, chunk_len=cl, save=False,
                              checkpoint=mode == "reverse")
    v, g, W = _value_and_grad(sub, params, cfg, mode)
    W = np.concatenate([np.asarray(params.workload0)[None], np.asarray(W)])
    status, a3, a4 = diagnose_trajectory(W)
    grad: dict[str, Any] = {}
    for w in wrt:
        if w == "service":
            grad[w] = _service_dict(net, g[w])
        elif w == "delays":
            grad[w] = np.where(net.adjacency, np.asarray(g[w]), 0.0)
        else:
            grad[w] = np.asarray(g[w]) if np.ndim(g[w]) else float(g[w])
    finite = all(np.all(np.isfinite(np.asarray(leaf, dtype=float)))
                 for leaf in jax.tree_util.tree_leaves(g)) and np.isfinite(float(v))
    well = finite and status is DynamicsStatus.CONVERGED
    if not well and throw:
        why = ("a derivative is not finite" if not finite else
               f"the trajectory does not converge within t1 = {info['t1']:g} s (status "
               f"{status.value}; workload amplitude {a3:.3g} → {a4:.3g} requests over the last "
               f"two quarters)")
        raise UnstableError(
            f"fluid sensitivity is not well posed: {why}; past the stability limit the "
            f"derivative of a long-horizon average grows with the horizon. Reduce the stepsize "
            f"(see lbtheory.stability) or the horizon, or pass throw=False to get the flagged "
            f"raw values")
    return FluidSensitivity(value=float(v), gradient=grad, mode=mode, status=status,
                            well_posed=bool(well), amplitudes=(a3, a4))
