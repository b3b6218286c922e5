"""A DLB routing policy of your own, registered with the one policy registry and simulated on
both engines of the cell simulator (reference and compiled), next to ``rand``.

The policy, "sticky least loaded": each source keeps sending to the cell it chose last while
that cell's probed load per replica stays within ``slack`` requests of the least loaded
admissible cell, then moves to the least loaded one (ties: lowest index). It is written twice,
as every compiled policy is:

* ``StickyRouter`` — plain NumPy on the router contract (``lbtheory.routers``: ``init`` /
  ``observe`` / ``route``, immutable state): the reference engine runs it, and it is the oracle;
* ``sticky_route`` — the same decision as a ``numba.njit`` kernel of the one user-kernel
  contract (``lbtheory.routers.KernelSpec``: ``route(t, source, workload, replicas, delays,
  mask, state, rng)``; ``state`` the one array it updates in place, a fresh copy per run).

``register_policy`` makes it a policy like the built-in ones (``make_router("sticky")``, plot
colours, the compiled engine's kernel lookup by exact router type). Run from the repository
root::

    python examples/custom_policy.py

It prints the latencies of ``rand`` and ``sticky`` on both engines (the same arrivals: the seed
fixes them) and asserts that the two engines route and complete every request alike.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from lbtheory.registry import make_router, register_policy
from lbtheory.routers import CellView, KernelSpec
from lbtheory.sim import load_scenario, simulate

SCENARIO = Path(__file__).resolve().parent / "sim_two_cells.yaml"


@dataclasses.dataclass(frozen=True)
class StickyRouter:
    """Sticky least loaded (module docstring); ``slack`` in requests per replica."""

    slack: float = 1.0
    name: str = "sticky"

    def init(self, seed: int = 0) -> tuple[int, ...]:
        """No cell chosen yet (a per-source tuple, grown on first use)."""
        return ()

    def observe(self, state: tuple[int, ...], view: CellView) -> tuple[int, ...]:
        """It reads the probes when routing: nothing to learn."""
        return state

    def route(self, state: tuple[int, ...], view: CellView,
              rng: np.random.Generator) -> tuple[int, tuple[int, ...]]:
        """The last cell while it is within ``slack`` of the least loaded, else that one."""
        i = view.source
        ok = view.mask[i] & (view.replicas > 0)
        load = np.where(ok, view.workload / np.where(ok, view.replicas, 1.0), np.inf)
        best = int(np.argmin(load))
        last = state[i] if i < len(state) else -1
        j = last if last >= 0 and ok[last] and load[last] <= load[best] + self.slack else best
        new = state + (-1,) * (i + 1 - len(state))
        return j, new[:i] + (j,) + new[i + 1:]


@njit
def sticky_route(t, source, workload, replicas, delays, mask, state, rng):
    """:meth:`StickyRouter.route` as a kernel: ``state[0]`` the slack, ``state[1 + i]`` the
    last cell of source i (-1: none yet)."""
    best, best_load = -1, np.inf
    for j in range(workload.shape[0]):
        if mask[source, j] and replicas[j] > 0:
            load = workload[j] / replicas[j]
            if load < best_load:
                best, best_load = j, load
    last = int(state[1 + source])
    j = best
    if last >= 0 and mask[source, last] and replicas[last] > 0 \
            and workload[last] / replicas[last] <= best_load + state[0]:
        j = last
    state[1 + source] = j
    return j


def sticky_kernel(router: StickyRouter, scenario: Any) -> KernelSpec:
    """The compiled form of ``router`` on ``scenario`` (the registry calls it)."""
    return KernelSpec(sticky_route, state=[router.slack] + [-1.0] * scenario.network.n)


def register() -> None:
    """Register ``sticky`` (once per process)."""
    register_policy("sticky", label="Sticky", colour="#e6550d", factory=StickyRouter,
                    simulators="cells", kernels={"cells": sticky_kernel},
                    summary="stays on its last cell while within a slack of the least loaded")


def compare(duration_s: float = 100.0, seed: int = 1) -> dict[tuple[str, str], Any]:
    """``rand`` and ``sticky`` on both engines; results keyed by (policy, engine)."""
    sc = load_scenario(SCENARIO)
    out = {}
    for policy in ("rand", "sticky"):
        for engine in ("reference", "compiled"):
            out[policy, engine] = simulate(sc, make_router(policy), duration_s=duration_s,
                                           seed=seed, engine=engine)
    return out


def main() -> None:
    register()
    runs = compare()
    print(f"{'policy':8} {'engine':10} {'done':>6} {'mean (s)':>9} {'p50 (s)':>8} "
          f"{'p99 (s)':>8}")
    for (policy, engine), r in runs.items():
        lat = r.summary()["latency"]  # over the completed requests (s)
        print(f"{policy:8} {engine:10} {r.completed:6d} {lat['mean']:9.3f} "
              f"{lat['p50']:8.3f} {lat['p99']:8.3f}")
    for policy in ("rand", "sticky"):
        ref, comp = runs[policy, "reference"], runs[policy, "compiled"]
        assert comp.engine == "compiled" and ref.engine == "reference", policy
        # bit for bit (NaN: the requests still in flight at the horizon)
        assert np.array_equal(ref.latency_s, comp.latency_s, equal_nan=True), policy
        assert np.array_equal(ref.routed, comp.routed), policy
    print("both engines: the same latencies, bit for bit")


if __name__ == "__main__":
    main()
