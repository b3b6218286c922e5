"""The one user-kernel contract: a router compiled for a simulator's compiled engine.

A router of the contract (:mod:`._contract`, plain Python / NumPy) runs on every reference
engine and is the oracle. To run it inside a compiled engine too, give it a
:class:`KernelSpec`: its decision written as ``numba.njit`` functions of the same shape in
every simulator,

* ``route(*view, state, rng) -> decision`` — one routing decision;
* ``observe(*view, state) -> None`` (optional) — new information reached the router;

where ``*view`` is what the simulator's compiled engine shows (arrays; below), ``state`` the
router's one mutable value and ``rng`` the run's ``numpy.random.Generator`` (draw from it exactly
as the Python router does: the engines share the stream, so both route every request alike).

**Mutability rule** (the same in both simulators): ``state`` is a 1-D NumPy array (float64 by
default; an int64 array stays int64) that the kernels update *in place*; it is the only thing
they change. Every run starts from a fresh copy of ``KernelSpec.state`` (so runs stay
reproducible and the spec itself never changes); options the kernels only read go into it too
(or are closed over as constants). On a reference engine the router's state obeys the router
contract (immutable: a new value per step).

The views:

* cells (the DLB simulator, :mod:`lbtheory.sim`): ``route(t, source, workload, replicas,
  delays, mask, state, rng) -> int`` the cell of one request of ``source`` (int): ``workload``
  (n,) the source's probed N_j of the last round at ``t`` (s), ``replicas`` (n,) probed online
  servers, ``delays`` (n, n) one-way τ (s), ``mask`` (n, n) bool residency; and ``observe(t, W,
  replicas, delays, mask, sources, state)`` a probe round: ``W`` (n, n), row i the workloads
  source i probed; ``sources`` the int64 source cells.
* instances (the Intelligent Router's simulator, :mod:`lbtheory.intelligent`): ``route(s,
  state, rng) -> (pos, instance)`` reads the compiled state ``s``
  (:class:`~lbtheory.intelligent._core.CoreState`, e.g. ``s.mi[LOAD, m]`` the committed tokens
  of instance ``m``) and answers a router-queue position and an instance, or ``pos = -1`` to wait
  for the next epoch; that simulator has no ``observe`` hook.

A compiled form is found, by exact router type (a subclass may change ``route``, which a kernel
would not see), through the policy's registry entry (``lbtheory.registry.register_policy(...,
kernels={"cells": fn})`` with ``fn(router, setting) -> KernelSpec``) or the router's own
``kernel_spec(setting)`` method. Engines compile their loop with your functions once per process
(numba cannot cache a loop that takes functions); the registry's own policies run as built-in
kernels cached on disk. :class:`lbtheory.sim.KernelRouter` is a cell router made of kernels only.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import njit

from ..errors import ParameterError, warn_deprecated

__all__ = ["KernelSpec"]


class KernelSpec:
    """A router's compiled form (module docstring): ``route`` (required), ``observe``
    (optional) numba functions and the initial ``state`` (1-D float64 or int64 array).

    ``KernelSpec(kernel, code, params, state)`` — the instance simulator's former form, a
    kernel ``kernel(s, code, params, rstate, rng)`` — still works (deprecated).

    Raises:
        ParameterError: a kernel that is not a ``numba.njit`` function, or a bad state.
    """

    __slots__ = ("route", "observe", "state")

    route: Any
    observe: Any
    state: np.ndarray

    def __init__(self, route: Any, observe: Any = None, state: Any = (), *legacy: Any) -> None:
        if isinstance(observe, (int, np.integer)) and not isinstance(observe, bool):
            if len(legacy) != 1:
                raise ParameterError("KernelSpec(kernel, code, params, state): the former "
                                     "instance form takes four arguments")
            warn_deprecated("KernelSpec(kernel, code, params, state)",
                            "KernelSpec(route, state=...) with route(s, state, rng)")
            _check_njit(route, "route")
            params = tuple(np.asarray(state, dtype=float).reshape(-1).tolist())
            route, observe = _legacy_route(route, int(observe), params), None
            state = np.asarray(legacy[0], dtype=np.int64).reshape(-1)  # the old int64 rstate
        elif legacy:
            raise ParameterError(f"KernelSpec: expected (route, observe=None, state=()), got "
                                 f"{3 + len(legacy)} arguments")
        _check_njit(route, "route")
        if observe is not None:
            _check_njit(observe, "observe")
        arr = np.array(state)
        if arr.size == 0:
            arr = np.zeros(0)
        if arr.ndim != 1 or arr.dtype not in (np.float64, np.int64):
            arr = np.asarray(arr, dtype=float).reshape(-1) if arr.dtype.kind in "biuf" else None
        if arr is None or (arr.dtype == np.float64 and not np.all(np.isfinite(arr))):
            raise ParameterError("KernelSpec.state: expected a finite 1-D array of numbers")
        object.__setattr__(self, "route", route)
        object.__setattr__(self, "observe", observe)
        object.__setattr__(self, "state", arr)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"KernelSpec is immutable (cannot set {name!r})")

    def fresh_state(self) -> np.ndarray:
        """A copy of the initial state: what one run starts from."""
        return self.state.copy()

    def __repr__(self) -> str:
        name = getattr(self.route, "__name__", "route")
        obs = getattr(self.observe, "__name__", None)
        return f"KernelSpec(route={name}, observe={obs}, state={self.state.tolist()})"


def _check_njit(fn: Any, field: str) -> None:
    if fn is None:
        raise ParameterError(f"KernelSpec.{field}: required")
    if not hasattr(fn, "py_func"):
        raise ParameterError(f"KernelSpec.{field}: expected a numba.njit function, got "
                             f"{type(fn).__name__}")


@functools.cache
def _legacy_route(kernel: Any, code: int, params_key: tuple[float, ...]) -> Any:
    """``route(s, state, rng)`` calling a former instance kernel ``kernel(s, code, params,
    state, rng)`` (params closed over as constants)."""
    params = np.asarray(params_key, dtype=float)

    @njit
    def route(s, state, rng):  # pragma: no cover - compiled
        return kernel(s, code, params, state, rng)

    return route
