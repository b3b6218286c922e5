"""A user's compiled cell router: two numba functions (issue 21).

The compiled engine runs the registry's cell policies as built-in kernels
(:mod:`._kernels_routers`). A router of your own runs there too when you write its two
functions with ``numba.njit`` and wrap them in a :class:`KernelRouter`:

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

Signatures (all arrays float64 unless said; n cells; times in s):

* ``route_kernel(t, source, workload, replicas, delays, mask, state, rng) -> int`` — the cell of one
  request of ``source`` (int): ``workload`` (n,) the source's probed N_j(t' − τ_ij) of the last
  round at ``t`` (s), ``replicas`` (n,) probed online servers, ``delays`` (n, n) one-way τ (s),
  ``mask`` (n, n) bool residency, ``state`` the router's float64 array, ``rng`` the run's
  ``numpy.random.Generator`` (draw from it only: it is the stream both engines share). A cell
  off ``mask[source]`` is refused with a TopologyError, as on the reference engine.
* ``observe_kernel(t, W, replicas, delays, mask, sources, state) -> None`` (optional) — a
  probe round: ``W`` (n, n) with row i the workloads source i probed (rows of non-sources are 0),
  ``sources`` the int64 source cells; update ``state`` in place.

``state`` (default: empty) is copied for every run and then updated in place by the kernels (a
NumPy array is the one mutable value numba code can share; runs stay reproducible). The same
functions run on the reference engine through the router contract (``init`` / ``observe_round``
/ ``route``), so both engines give the same per-request outcomes. The compiled engine
specialises its loop to your functions on their first use in a process (numba cannot cache a
loop that calls another function given at run time): expect a compile of about the engine's own
first-call time, once per process; the registry's policies are cached on disk. That loop keeps
numba's reference counting, so your kernels may allocate arrays (the built-in loop runs without
it, ≈ 2× faster).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import ParameterError
from ..routers import CellView

__all__ = ["KernelRouter"]


@dataclasses.dataclass(frozen=True, eq=False)
class KernelRouter:
    """A cell router given as numba functions (module docstring): ``route`` (required),
    ``observe`` (optional), initial ``state`` (float64) and a ``name``."""

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
        j = self.route_kernel(float(view.time), int(view.source),
                              np.asarray(view.workload, dtype=float),
                              np.asarray(view.replicas, dtype=float),
                              np.asarray(view.delays, dtype=float),
                              np.asarray(view.mask, dtype=bool), state, rng)
        return int(j), state
