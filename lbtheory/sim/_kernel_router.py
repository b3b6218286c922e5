"""A cell router made of numba kernels only: :class:`KernelRouter` (issue 21).

The kernels obey the one user-kernel contract of :class:`lbtheory.routers.KernelSpec` (its
docstring: the cells view, the mutability rule). A router of your own written in NumPy runs
compiled when its registry entry gives its kernels (``register_policy(..., kernels={"cells":
lambda router, scenario: KernelSpec(...)})``, ``examples/custom_policy.py``); when you have only
the kernels, wrap them in a :class:`KernelRouter` — on the reference engine it runs the same
functions through the router contract, so both engines give the same per-request outcomes:

.. code-block:: python

    @numba.njit
    def least_probed(t, source, workload, replicas, delays, mask, state, rng):
        best, best_w = -1, np.inf          # workload: N̂_ij (requests) of this source's probe
        for j in range(workload.shape[0]):
            if mask[source, j] and workload[j] / replicas[j] < best_w:
                best, best_w = j, workload[j] / replicas[j]
        return best

    router = KernelRouter(route_kernel=least_probed, name="least-probed")
    simulate(scenario, router, duration_s=600, seed=0)          # compiled engine

A cell off ``mask[source]`` is refused with a TopologyError, as on the reference engine. The
compiled engine specialises its loop to your functions on their first use in a process: expect
a compile of about the engine's own first-call time, once per process. That loop keeps numba's
reference counting, so your kernels may allocate arrays (the built-in loop runs without it,
≈ 2× faster).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import ParameterError
from ..routers import CellView, KernelSpec

__all__ = ["KernelRouter"]


@dataclasses.dataclass(frozen=True, eq=False)
class KernelRouter:
    """A cell router given as numba functions (module docstring): ``route_kernel`` (required),
    ``observe_kernel`` (optional), initial ``state`` (float64) and a ``name``; its state is
    immutable on the reference engine (each step works on a copy), updated in place inside
    the compiled engine (:class:`~lbtheory.routers.KernelSpec`)."""

    route_kernel: Any
    observe_kernel: Any = None
    state: Any = dataclasses.field(default_factory=lambda: np.zeros(0))
    name: str = "kernel"

    def __post_init__(self) -> None:
        for field in ("route_kernel", "observe_kernel"):
            fn = getattr(self, field)
            if fn is not None and not hasattr(fn, "py_func"):
                raise ParameterError(f"KernelRouter.{field}: expected a numba.njit function, "
                                     f"got {type(fn).__name__}")
        if self.route_kernel is None:
            raise ParameterError("KernelRouter.route_kernel: required")
        state = np.array(self.state, dtype=float).reshape(-1)
        object.__setattr__(self, "state", state)

    def kernel_spec(self, setting: Any = None) -> KernelSpec:
        """Its compiled form: the kernels and the initial state."""
        return KernelSpec(self.route_kernel, self.observe_kernel, self.state)

    def init(self, seed: int = 0) -> np.ndarray:
        """A fresh copy of the initial state."""
        return self.state.copy()

    def observe(self, state: np.ndarray, view: CellView) -> np.ndarray:
        """One source's view: a round with that source only."""
        views: list[CellView | None] = [None] * view.n
        views[view.source] = view
        return self.observe_round(state, views)

    def observe_round(self, state: np.ndarray, views: list[CellView | None]) -> np.ndarray:
        """A probe round: ``observe_kernel`` on the matrix of probed workloads."""
        if self.observe_kernel is None:
            return state
        state = state.copy()
        live = [i for i, v in enumerate(views) if v is not None]
        v0 = views[live[0]]
        W = np.zeros((v0.n, v0.n))
        for i in live:
            W[i] = views[i].workload
        self.observe_kernel(float(v0.time), W, np.asarray(v0.replicas, dtype=float),
                            np.asarray(v0.delays, dtype=float), np.asarray(v0.mask, dtype=bool),
                            np.array(live, dtype=np.int64), state)
        return state

    def route(self, state: np.ndarray, view: CellView,
              rng: np.random.Generator) -> tuple[int, np.ndarray]:
        """``route_kernel`` on the view of the request's source."""
        state = state.copy()
        j = self.route_kernel(float(view.time), int(view.source),
                              np.asarray(view.workload, dtype=float),
                              np.asarray(view.replicas, dtype=float),
                              np.asarray(view.delays, dtype=float),
                              np.asarray(view.mask, dtype=bool), state, rng)
        return int(j), state
