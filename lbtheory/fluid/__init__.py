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
* :class:`Mechanism`, :class:`DelayMode`, :class:`BatchStrategy`, :class:`SensitivityMode` —
  the options (a member or its string value).

Precision: the entry points compute in float64 whatever the ``jax_enable_x64`` setting (scoped,
the setting is left unchanged), so the API and ``lbtheory fluid`` agree bit for bit.
"""

from ._batch import (
    MAX_BATCH_BYTES,
    BatchStrategy,
    choose_batch_size,
    scenario_bytes,
    simulate_fluid_batch,
)
from ._integrator import DelayMode, FluidParams, Mechanism, StaticConfig, solve_dde
from ._model import simulate_fluid
from ._sensitivity import (
    FluidSensitivity,
    SensitivityMode,
    fluid_objective,
    fluid_sensitivity,
)
from ._setup import fluid_problem
from ._solution import DECAY_RATIO, SETTLED_RTOL, FluidSolution, diagnose_trajectory

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
    "Mechanism",
    "DelayMode",
    "BatchStrategy",
    "SensitivityMode",
    "diagnose_trajectory",
    "DECAY_RATIO",
    "SETTLED_RTOL",
    "solve_dde",
    "choose_batch_size",
    "scenario_bytes",
    "MAX_BATCH_BYTES",
]
