"""Many fluid scenarios in one compiled program (issue 4, item 5).

Scenarios share the structure (cells, admissible arcs, service-model families, horizon, dt) and
differ in arrival rates λ, delays τ, stepsizes η, service parameters and initial data. Strategies:

* ``"vmap"`` — one ``jax.vmap`` of the whole scan (best for small n: per-step work is tiny, so
  batching amortises the loop overhead);
* ``"map"`` — ``lax.map`` over scenarios inside one program (a loop; best for large n, where a
  naive vmap of the gathers and the projection's while loop was slower per scenario — issue 4);
* ``"chunked"`` — ``lax.map`` with ``batch_size`` (vmap over chunks of scenarios);
* ``"auto"`` — by n, thresholds from ``benchmarks/bench_fluid.py`` (:data:`AUTO_BATCH`), in
  chunks small enough for :data:`MAX_BATCH_BYTES` of working memory.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_option
from ..costs import CostKind
from ..errors import ParameterError
from ..network import CellNetwork
from ._integrator import (
    DelayMode,
    FluidParams,
    Mechanism,
    StaticConfig,
    initial_observation,
    integrate,
)
from ._model import assemble, equilibrium_workload
from ._setup import build, in_float64
from ._solution import FluidSolution

__all__ = ["simulate_fluid_batch", "BatchStrategy", "STRATEGIES", "AUTO_BATCH", "MAX_BATCH_BYTES",
           "choose_batch_size", "scenario_bytes"]



class BatchStrategy(enum.StrEnum):
    """How :func:`simulate_fluid_batch` runs its scenarios (module docstring); the member or its
    value is accepted."""

    AUTO = "auto"
    VMAP = "vmap"
    MAP = "map"
    CHUNKED = "chunked"



STRATEGIES = tuple(s.value for s in BatchStrategy)
#: ``strategy="auto"``: scenarios vmapped together per chunk, by network size (n ≤ key); None =
#: all at once, 1 = a plain ``lax.map`` loop. From ``benchmarks/bench_fluid.py`` on a shared
#: 2-core CPU (BENCHMARKS.md, fluid): full vmap gave 4.6–8× single-scenario throughput at n = 4;
#: at n = 16 it gave 0.6–1.4× (run-to-run noise) while ``lax.map`` gave 1.1–1.25×; at n = 64
#: every vmapped variant was slower than a loop (0.25–0.36×) and ``lax.map`` ≈ 0.9×.
AUTO_BATCH = ((8, None), (10**9, 1))
#: ``strategy="auto"`` vmaps at most this many bytes of per-scenario working memory at once
#: (:func:`scenario_bytes` × scenarios per chunk), bytes.
MAX_BATCH_BYTES = 2**30


def scenario_bytes(cfg: StaticConfig) -> int:
    """Working memory of one scenario, bytes (float64): ring buffers L·(n + n²), the other
    carried arrays ≈ 5n² + 2n, and the saved trajectory n_chunks·(2n² + 2n + 1)."""
    n, L = cfg.n, cfg.buffer_len
    saved = cfg.n_chunks * (2 * n * n + 2 * n + 1) if cfg.save else cfg.n_chunks * n
    return 8 * (L * (n + n * n) + 5 * n * n + 2 * n + saved)


def choose_batch_size(n: int, B: int, strategy: BatchStrategy | str,
                      batch_size: int | None = None, *,
                      scenario_bytes: int | None = None) -> int | None:
    """Scenarios per vmapped chunk (None = all B at once, 1 = a loop).

    ``"auto"`` follows :data:`AUTO_BATCH` by network size n, then caps the chunk so that
    chunk × ``scenario_bytes`` ≤ :data:`MAX_BATCH_BYTES` (when ``scenario_bytes`` is given).
    """
    strategy = check_option(BatchStrategy, strategy, "strategy")
    if strategy == "vmap":
        return None
    if strategy == "map":
        return 1
    if strategy == "chunked":
        return batch_size or 8
    bs = 1
    for n_max, size in AUTO_BATCH:
        if n <= n_max:
            bs = B if size is None else size
            break
    if scenario_bytes:
        bs = max(1, min(bs, MAX_BATCH_BYTES // int(scenario_bytes)))
    return None if bs >= B else bs


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
    raise ParameterError(f"{name}: expected one value for every scenario or a leading axis of "
                         f"{B} scenarios, got shape {arr.shape}")


@in_float64  # the precision policy: float64, scoped (_setup.float64)
def simulate_fluid_batch(nets: CellNetwork | Sequence[CellNetwork], *,
                         mechanism: Mechanism | str = "flow", cost: CostKind | str = "gradient",
                         stepsize: Any = None, t1: float,
                         dt: float = 1e-3, x0: Any = None, N0: Any = None,
                         save_every: int | None = None, equilibrium: Any = None,
                         delay_mode: DelayMode | str = "snap",
                         strategy: BatchStrategy | str = "auto",
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
        ParameterError: networks of different structure, bad shapes or strategy.
        UnstableError: a non-finite state (naming scenario, step and cell) when ``throw``.
        LBTheoryError: any error of one scenario (e.g. from its equilibrium) propagates
            unchanged, with a note naming the scenario.
    """
    strategy = check_option(BatchStrategy, strategy, "strategy")
    eta = None if stepsize is None else np.asarray(stepsize, dtype=float)
    if isinstance(nets, CellNetwork):
        if eta is None or eta.ndim == 0:
            raise ParameterError("stepsize: with a single network give one stepsize per scenario, "
                                 "shape (B,) or (B, n)")
        nets = [nets] * eta.shape[0]
    nets = list(nets)
    B = len(nets)
    if B == 0:
        raise ParameterError("nets: expected at least one scenario")
    if eta is None or eta.ndim == 0:
        etas = [stepsize] * B
    elif eta.shape[0] == B and eta.ndim in (1, 2):
        etas = list(eta)
    else:
        raise ParameterError(f"stepsize: expected a scalar, ({B},) or ({B}, n), got {eta.shape}")
    for b, nt in enumerate(nets):
        if not isinstance(nt, CellNetwork) or nt.n != nets[0].n \
                or not np.array_equal(nt.adjacency, nets[0].adjacency):
            raise ParameterError(f"nets[{b}]: scenario structure (cells, arcs) differs from "
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
            raise ParameterError(f"nets[{b}]: service-model families differ from nets[0]")
    params = jax.tree_util.tree_map(lambda *ls: jnp.stack([jnp.asarray(v) for v in ls]), *trees)
    bs = choose_batch_size(cfg.n, B, strategy, batch_size, scenario_bytes=scenario_bytes(cfg))
    obs0, res = _run_batch(params, cfg, bs)
    sols = []
    for b in range(B):
        ob = jax.tree_util.tree_map(lambda a, b=b: a[b], obs0)
        rb = jax.tree_util.tree_map(lambda a, b=b: a[b], res)
        eq_b = equilibrium[b] if isinstance(equilibrium, list | tuple) else equilibrium
        try:
            Nstar = equilibrium_workload(nets[b], built[b][2]["kind"], eq_b)
            sols.append(assemble(nets[b], ob, rb, built[b][2], Nstar=Nstar, throw=throw,
                                 scenario=b))
        except Exception as exc:  # the same object (type, fields, traceback), with a note
            exc.add_note(f"simulate_fluid_batch: raised for scenario {b} of {B}")
            raise
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
