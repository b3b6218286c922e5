"""Delayed fluid model in JAX (THEORY §2–3): flow and discrete routing, differentiable, batched.

Public API:

* :func:`simulate_fluid` — one scenario → :class:`FluidSolution`.
* :func:`simulate_fluid_batch` — many scenarios sharing one structure (``vmap`` or a scan,
  chosen automatically).
* :func:`fluid_sensitivity` — time-averaged total latency rate and its gradient w.r.t. stepsize,
  delays, arrival rates and service parameters (forward or reverse mode, checkpointed), with
  detection of the oscillating regime where the long-horizon derivative is not meaningful.
* :func:`fluid_problem`, :class:`FluidParams`, :func:`fluid_objective` — the differentiable
  functional interface (``jax.grad``/``jax.vmap`` of ``fluid_objective(params, cfg)``).
"""

from ._batch import simulate_fluid_batch
from ._integrator import FluidParams, StaticConfig
from ._model import simulate_fluid
from ._sensitivity import FluidSensitivity, fluid_objective, fluid_sensitivity
from ._setup import fluid_problem
from ._solution import FluidSolution, diagnose_trajectory

__all__ = [
    "simulate_fluid",
    "simulate_fluid_batch",
    "fluid_sensitivity",
    "fluid_objective",
    "fluid_problem",
    "FluidSensitivity",
    "FluidSolution",
    "FluidParams",
    "StaticConfig",
    "diagnose_trajectory",
]
