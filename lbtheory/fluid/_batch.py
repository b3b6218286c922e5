"""Many fluid scenarios in one compiled program (issue 4, item 5).

Scenarios share the structure (cells, admissible arcs, service-model families, horizon, dt) and
differ in arrival rates λ, delays τ, stepsizes η, service parameters and initial data. Strategies:

* ``"vmap"`` — one ``jax.vmap`` of the whole scan (best for small n: per-step work is tiny, so
  batching amortises the loop overhead);
* ``"map"`` — ``lax.map`` over scenarios inside one program (a loop; best for large n, where a
  naive vmap of the gathers and the projection's while loop was slower per scenario — issue 4);
* ``"chunked"`` — ``lax.map`` with ``batch_size`` (vmap over chunks of scenarios);
* ``"auto"`` — by n, thresholds from ``benchmarks/bench_fluid.py`` (:data:`AUTO_BATCH`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError, TopologyError
from ..network import CellNetwork
from ._integrator import FluidParams, StaticConfig, initial_observation, integrate
from ._model import assemble, equilibrium_workload
from ._setup import build
from ._solution import FluidSolution

__all__ = ["simulate_fluid_batch", "STRATEGIES", "AUTO_BATCH", "choose_batch_size"]

STRATEGIES = ("auto", "vmap", "map", "chunked")
#: ``strategy="auto"``: scenarios vmapped together per chunk, by network size (n ≤ key); None =
#: all at once, 1 = a plain ``lax.map`` loop. From ``benchmarks/bench_fluid.py`` on a shared
#: 2-core CPU (BENCHMARKS.md, fluid): full vmap gave 4.6–8× single-scenario throughput at n = 4;
#: at n = 16 it gave 0.6–1.4× (run-to-run noise) while ``lax.map`` gave 1.1–1.25×; at n = 64
#: every vmapped variant was slower than a loop (0.25–0.36×) and ``lax.map`` ≈ 0.9×.
AUTO_BATCH = ((8, None), (10**9, 1))


def choose_batch_size(n: int, B: int, strategy: str, batch_size: int | None = None) -> int | None:
    """Scenarios per vmapped chunk (None = all of them at once)."""
    if strategy == "vmap":
        return None
    if strategy == "map":
        return 1
    if strategy == "chunked":
        return batch_size or 8
    for n_max, bs in AUTO_BATCH:
        if n <= n_max:
            return None if bs is None or bs >= B else bs
    return 1  # pragma: no cover


@functools.partial(jax.jit, static_argnames=("cfg", "batch_size"))
def _run_batch(params: FluidParams, cfg: StaticConfig, batch_size: int | None):
    def one(p):
        return initial_observation(p, cfg), integrate(p, cfg)

    if batch_size is None:
        return jax.vmap(one)(params)
    if batch_size == 1:
        return jax.lax.map(one, params)
    return jax.lax.map(one, params, batch_size=batch_size)


def _per_scenario(value: Any, B: int, ndim_one: int, name: str) -> list[Any]:
    if value is None:
        return [None] * B
    arr = np.asarray(value, dtype=float)
    if arr.ndim == ndim_one:
        return [arr] * B
    if arr.ndim == ndim_one + 1 and arr.shape[0] == B:
        return list(arr)
    raise ModelError(f"{name}: expected one value for every scenario or a leading axis of "
                     f"{B} scenarios, got shape {arr.shape}")


def simulate_fluid_batch(nets: CellNetwork | Sequence[CellNetwork], *, mechanism: str = "flow",
                         cost: str = "gradient", stepsize: Any = None, t1: float,
                         dt: float = 1e-3, x0: Any = None, N0: Any = None,
                         save_every: int | None = None, equilibrium: Any = None,
                         delay_mode: str = "snap", strategy: str = "auto",
                         batch_size: int | None = None, throw: bool = True) -> FluidSolution:
    """Simulate B scenarios at once; arguments as :func:`~lbtheory.fluid.simulate_fluid`.

    Args:
        nets: one network (scenarios then differ by ``stepsize``/``x0``/``N0``) or B networks
            with the same cells, arcs and model families (e.g. ``net.with_arrival_rates(λ_b)``,
            ``net.with_delays(τ_b)``, other service parameters).
        stepsize: scalar (all), (B,) (one η per scenario) or (B, n) (per scenario and source).
        x0, N0: shared ((n, n), (n,)) or per scenario ((B, n, n), (B, n)).
        equilibrium: None, ``"auto"`` (solve each scenario's equilibrium) or a list of B
            equilibria (``EquilibriumResult`` or N*).
        strategy: ``"auto"``, ``"vmap"``, ``"map"`` or ``"chunked"`` (with ``batch_size``).

    Returns:
        :class:`FluidSolution` whose arrays have a leading scenario axis (``status`` is a tuple).

    Raises:
        TopologyError: networks of different structure. ModelError: bad shapes or strategy.
        UnstableError: a non-finite state (naming scenario, step and cell) when ``throw``.
    """
    if strategy not in STRATEGIES:
        raise ModelError(f"strategy: expected one of {STRATEGIES}, got {strategy!r}")
    eta = None if stepsize is None else np.asarray(stepsize, dtype=float)
    if isinstance(nets, CellNetwork):
        if eta is None or eta.ndim == 0:
            raise ModelError("stepsize: with a single network give one stepsize per scenario, "
                             "shape (B,) or (B, n)")
        nets = [nets] * eta.shape[0]
    nets = list(nets)
    B = len(nets)
    if B == 0:
        raise ModelError("nets: expected at least one scenario")
    if eta is None or eta.ndim == 0:
        etas = [stepsize] * B
    elif eta.shape[0] == B and eta.ndim in (1, 2):
        etas = list(eta)
    else:
        raise ModelError(f"stepsize: expected a scalar, ({B},) or ({B}, n), got {eta.shape}")
    for b, nt in enumerate(nets):
        if not isinstance(nt, CellNetwork) or nt.n != nets[0].n \
                or not np.array_equal(nt.adjacency, nets[0].adjacency):
            raise TopologyError(f"nets[{b}]: scenario structure (cells, arcs) differs from "
                                f"nets[0]")
    x0s = _per_scenario(x0, B, 2, "x0")
    N0s = _per_scenario(N0, B, 1, "N0")
    bd = np.max(np.stack([np.asarray(nt.delays) for nt in nets]), axis=0)
    built = [build(nt, mechanism=mechanism, cost=cost, stepsize=e, t1=t1, dt=dt, x0=xx,
                   N0=nn, save_every=save_every, delay_mode=delay_mode, buffer_delays=bd)
             for nt, e, xx, nn in zip(nets, etas, x0s, N0s)]
    cfg = built[0][1]
    trees = [p for p, _, _ in built]
    struct = jax.tree_util.tree_structure(trees[0])
    for b, p in enumerate(trees):
        if jax.tree_util.tree_structure(p) != struct:
            raise TopologyError(f"nets[{b}]: service-model families differ from nets[0]")
    params = jax.tree_util.tree_map(lambda *ls: jnp.stack([jnp.asarray(v) for v in ls]), *trees)
    bs = choose_batch_size(cfg.n, B, strategy, batch_size)
    obs0, res = _run_batch(params, cfg, bs)
    sols = []
    for b in range(B):
        ob = jax.tree_util.tree_map(lambda a, b=b: a[b], obs0)
        rb = jax.tree_util.tree_map(lambda a, b=b: a[b], res)
        eq_b = equilibrium[b] if isinstance(equilibrium, list | tuple) else equilibrium
        Nstar = equilibrium_workload(nets[b], built[b][2]["kind"], eq_b)
        try:
            sols.append(assemble(nets[b], ob, rb, built[b][2], mechanism=mechanism,
                                 Nstar=Nstar, throw=throw))
        except Exception as exc:
            raise type(exc)(f"scenario {b}: {exc}") from None
    return _stack(sols)


def _stack(sols: list[FluidSolution]) -> FluidSolution:
    first = sols[0]
    out = {}
    for f in dataclasses.fields(FluidSolution):
        vals = [getattr(s, f.name) for s in sols]
        if f.name in ("names", "mechanism", "cost", "dt", "t"):
            out[f.name] = getattr(first, f.name)
        elif f.name in ("status", "bad_cell"):
            out[f.name] = tuple(vals)
        elif f.name in ("distance_to_equilibrium", "equilibrium_workload") and vals[0] is None:
            out[f.name] = None
        else:
            out[f.name] = np.stack([np.asarray(v) for v in vals])
    return FluidSolution(**out)
