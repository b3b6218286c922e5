"""The compiled instance simulator: :class:`CompiledClusterSim` (numba kernels of
:mod:`._core`, routers of :mod:`._rkernels`) behind the interface of the reference
:class:`~lbtheory.intelligent.ClusterSim`.

Both engines offer ``advance()``, ``dispatch(pos, m)``, ``view()``, ``queue_length``, ``now``,
``n_done``, ``done``, ``preemptions`` and ``records()``, so :func:`~lbtheory.intelligent.run_router`
drives either with any router of the contract. A router with a compiled kernel
(:func:`kernel_spec`) runs entirely inside the compiled loop (:meth:`CompiledClusterSim.run`):
the registry's instance policies as built-in kernels (the ``spec_*`` functions here, named by
their registry entries), a router of your own through the one user-kernel contract,
:class:`~lbtheory.routers.KernelSpec` (``route(s, state, rng) -> (pos, instance)``), from its
registry entry (``register_policy(..., kernels={"instances": fn})``) or its own
``kernel_spec(config)`` method. Example, "the less loaded of instances 0 and 1"::

    from lbtheory.intelligent._core import LOAD

    @njit
    def first_two(s, state, rng):
        return 0, 0 if s.mi[LOAD, 0] <= s.mi[LOAD, 1] else 1

    class FirstTwo:  # ... init / observe / route as the contract asks, plus:
        def kernel_spec(self, config):
            return KernelSpec(first_two)

Check it as ``tests/test_intelligent_engines.py`` checks the registry's: the same outcomes on
both engines. The loop is compiled with the kernel once per process (numba cannot cache a
function that takes another); the registry's policies are compiled once and cached on disk.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from .._checks import check_memory, check_ticks
from ..errors import ParameterError
from ..registry import Simulator, compiled_kernel
from ..routers import KernelProvider, KernelSpec, Load, Ties
from ..workloads import Workload
from . import _core, _coreview
from ._admission import ADMISSION_CODES
from ._core import QH, QT, CoreState
from ._engine import ClusterConfig, InstanceView
from ._impact import calibrate_impact
from ._rkernels import CODES, routing_loop, run_builtin

__all__ = ["CompiledClusterSim", "KernelSpec", "BuiltinSpec", "kernel_spec"]

#: bytes per request of the compiled state (21 int64/float64 columns) plus the result arrays.
_BYTES_PER_REQUEST = 8 * (21 + 13)


class BuiltinSpec(NamedTuple):
    """One of the registry's kernels (:func:`~._rkernels.route_builtin`): its ``code``
    (:data:`~._rkernels.CODES`), options ``params`` (float64) and initial ``state`` (int64)."""

    code: int
    params: np.ndarray
    state: np.ndarray


def kernel_spec(router: Any, config: ClusterConfig) -> KernelSpec | BuiltinSpec | None:
    """The compiled form of ``router`` on ``config``: its registry entry's kernel (matched by
    exact type, so a subclass that changes ``route`` is not taken for its parent), else the
    router's own ``kernel_spec(config)``, or ``None`` (the router runs in Python)."""
    planner = compiled_kernel(router, Simulator.INSTANCES)
    if planner is not None:
        return planner(router, config)
    return router.kernel_spec(config) if isinstance(router, KernelProvider) else None


def _builtin(name: str, params: list[float], state: list[int] | None = None) -> BuiltinSpec:
    return BuiltinSpec(CODES[name], np.array(params, float), np.array(state or [0], np.int64))


def spec_rr(router: Any, config: ClusterConfig) -> BuiltinSpec:
    """Round robin."""
    return _builtin("rr", [])


def spec_jsq(router: Any, config: ClusterConfig) -> BuiltinSpec:
    """JSQ by requests or tokens."""
    return _builtin("jsq", [router.load is Load.TOKENS, router.ties is Ties.RANDOM])


def spec_random(router: Any, config: ClusterConfig) -> BuiltinSpec:
    """Uniformly random instance."""
    return _builtin("random", [])


def spec_p2c(router: Any, config: ClusterConfig) -> BuiltinSpec:
    """Power of d (the Python router draws with the same kernel,
    :func:`~lbtheory.routers.choice_without_replacement`, at every size)."""
    return _builtin("p2c", [router.d, router.load is Load.TOKENS])


def spec_minmin(router: Any, config: ClusterConfig) -> BuiltinSpec:
    """Min-Min."""
    return _builtin("minmin", [])


def spec_maxcap(router: Any, config: ClusterConfig) -> BuiltinSpec:
    """Maximum capacity usage."""
    return _builtin("maxcap", [])


def spec_mixing(router: Any, config: ClusterConfig) -> BuiltinSpec:
    """The greedy mixing heuristic (calibrated from the timing model unless given)."""
    prm = router.params or calibrate_impact(config.timing)
    return BuiltinSpec(CODES["heuristic"], prm.kernel_params(), np.zeros(1, np.int64))


def spec_small_large(router: Any, config: ClusterConfig) -> BuiltinSpec:
    """Dedicated small/large partition: the threshold and the size (0: prompt + predicted
    output, 1: predicted output); the two round-robin positions."""
    return _builtin("small-large", [router.threshold_tokens, router.size == "output"], [0, 0])


@functools.cache
def _user_loop(route: Any) -> Any:
    """The routing loop compiled with a user's ``route(s, state, rng)`` (once per process)."""

    @njit
    def kernel(s, code, params, rstate, rng):  # pragma: no cover - compiled
        return route(s, rstate, rng)

    return routing_loop(kernel)


def _log_size(wl: Workload, cfg: ClusterConfig, output: np.ndarray) -> int:
    """Iterations (and batch entries) the iteration log holds: one per emitted token without
    chunked prefill or prompts first; with either, partial-prefill iterations emit none and
    prefill-only ones log the stalled batch, so four times the tokens emitted and prefilled
    (more only under heavy preemption: the log then stops and says so)."""
    tokens = int(output.sum())
    if not cfg.chunked_prefill and not cfg.prefill_priority:
        return tokens
    return 4 * (tokens + int(np.maximum(wl.prompt_tokens, 1).sum())) + 64


def _check_size(wl: Workload, cfg: ClusterConfig, n_labels: int, n_bins: int,
                record: bool, out_tokens: np.ndarray) -> None:
    """Refuse up front a run beyond the house limits (:func:`~lbtheory._checks.check_memory`,
    :func:`~lbtheory._checks.check_ticks`, the reference engine's clock limit)."""
    n, m = len(wl), cfg.n_instances
    check_ticks(float(wl.arrival_s[-1]), cfg.epoch_s,
                "instance simulator: the workload's arrival span")
    cap = max(min(cfg.max_batch, n), 1)
    need = n * (_BYTES_PER_REQUEST + 8 * n_labels) + 8 * m * (cap + n_bins + 16)
    if record:
        need += 8 * 5 * _log_size(wl, cfg, out_tokens)  # ids and times per logged iteration
    check_memory(need, f"the compiled instance simulator ({n:,} requests on {m:,} instances"
                       f"{', iteration log' if record else ''})")


class CompiledClusterSim:
    """The compiled engine (module docstring); arguments as
    :class:`~lbtheory.intelligent.ClusterSim`, plus:

    Args:
        labels: optional (L × requests) int64 histogram bins per request, counted per instance
            over the requests on it (``hist``, see :mod:`._core`).
        n_bins: number of histogram bins.

    Raises:
        ParameterError: a request larger than the KV budget, bad predictions, or a run over
            the memory limit (``LBTHEORY_MAX_MEMORY_GB``) or the clock's tick limit (named).
    """

    engine = "compiled"

    def __init__(self, workload: Workload, config: ClusterConfig,
                 predicted_output: np.ndarray | None = None, *, queue_view: int = 32,
                 record: bool = False, labels: np.ndarray | None = None,
                 n_bins: int = 0) -> None:
        config.check_workload(workload)
        n = len(workload)
        output = np.maximum(workload.output_tokens, 1).astype(np.int64)
        pred = output if predicted_output is None else np.asarray(predicted_output)
        if pred.shape != (n,) or not np.all(np.isfinite(pred)) or np.any(pred < 0):
            raise ParameterError(f"predicted_output must have shape ({n},) and be finite and "
                                 f">= 0")
        labels = np.zeros((0, n), np.int64) if labels is None else np.asarray(labels, np.int64)
        _check_size(workload, config, labels.shape[0], n_bins, record, output)
        self.cfg, self.wl, self.queue_view = config, workload, int(queue_view)
        self.state = _new_state(workload, config, output, pred.astype(np.int64), labels,
                                int(n_bins), self.queue_view, record)
        st = self.state
        self._ri, self._rf, self._mi, self._gi, self._gf = st.ri, st.rf, st.mi, st.gi, st.gf
        self._busy = st.gf[_core.BUSY0:]
        self._hist = st.mi[st.gi[_core.HIST0]:]

    # -- the engine interface ---------------------------------------------------------------
    @property
    def queue_length(self) -> int:
        """Requests in the router queue."""
        g = self._gi
        return int(g[QT] - g[QH])

    @property
    def now(self) -> float:
        """The current decision epoch (s)."""
        return float(self._gf[_core.NOW])

    @property
    def n_done(self) -> int:
        """Requests finished."""
        return int(self._gi[_core.N_DONE])

    @property
    def done(self) -> bool:
        """True when every request has finished."""
        return self.n_done == self._ri.shape[1]

    @property
    def preemptions(self) -> int:
        """Preemptions so far (all instances)."""
        return int(self._gi[_core.PREEMPTIONS])

    def advance(self) -> bool:
        """As :meth:`ClusterSim.advance <lbtheory.intelligent.ClusterSim.advance>`."""
        return bool(_core.advance(self.state))

    def dispatch(self, pos: int, m: int) -> int:
        """As :meth:`ClusterSim.dispatch <lbtheory.intelligent.ClusterSim.dispatch>`."""
        if not 0 <= m < self.cfg.n_instances:
            raise ParameterError(f"instance {m} out of range [0, {self.cfg.n_instances})")
        if not 0 <= pos < self.queue_length:
            raise ParameterError(f"queue position {pos} out of range [0, {self.queue_length})")
        return int(_core.dispatch(self.state, int(pos), int(m)))

    def run(self, spec: KernelSpec | BuiltinSpec, *, seed: int = 0,
            name: str = "router") -> None:
        """Run to the end with a compiled router (``rng = default_rng(seed)``).

        Raises:
            ParameterError: a kernel with an ``observe`` (this loop has no observe hook), or a
                decision out of range.
        """
        rng = np.random.default_rng(seed)
        if isinstance(spec, KernelSpec):
            if spec.observe is not None:
                raise ParameterError(f"router {name}: KernelSpec.observe is not used by the "
                                     f"instance simulator (no observe hook); give route only")
            out = _user_loop(spec.route)(self.state, -1, np.zeros(0), spec.fresh_state(), rng)
        else:
            out = run_builtin(self.state, spec.code, np.asarray(spec.params, float),
                              np.array(spec.state, np.int64), rng)
        if out < 0:
            raise ParameterError(f"router {name} chose a queue position or instance out of "
                                 f"range")

    def queue_ids(self, k: int | None = None) -> np.ndarray:
        """Ids of the first ``k`` (default all) requests of the router queue, head first."""
        qh, qt = int(self._gi[QH]), int(self._gi[QT])
        return self._ri[_core.RQ, qh:qt if k is None else min(qt, qh + k)]

    def view(self) -> InstanceView:
        """The router's view at the current epoch (the fields of the reference's view)."""
        ri, mi, m = self._ri, self._mi, self.cfg.n_instances
        q = self.queue_ids(self.queue_view)
        now = self.now
        n_sched = mi[_core.N_RUN] + mi[_core.N_ADM]
        fewest = np.zeros(m, np.int64)
        _coreview.fewest_left(self.state, fewest)
        buf = np.empty(ri.shape[1], np.int64)
        on = []
        for i in range(m):  # the batch, the waiting queue, the swapped queue
            k = _coreview.chain_ids(self.state, mi[_core.WHEAD, i], buf)
            k += _coreview.chain_ids(self.state, mi[_core.SHEAD, i], buf[k:])
            on.append(np.concatenate([mi[_core.BATCH0:_core.BATCH0 + n_sched[i], i], buf[:k]]))
        prompt, pred = ri[_core.P], ri[_core.PRED]
        kv, wait = mi[_core.KV_USED], mi[_core.WAIT_TOK]
        return InstanceView(
            time_s=now, n_running=n_sched, n_waiting=mi[_core.N_WAIT].copy(),
            kv_used=kv.copy(), kv_committed=kv + wait, load_tokens=mi[_core.LOAD].copy(),
            waiting_prefill_tokens=wait.copy(), queue_prompt=prompt[q],
            queue_output_pred=pred[q], queue_wait_s=now - self._rf[_core.ARRIVAL][q],
            queue_length=self.queue_length, config=self.cfg, instance_requests=tuple(on),
            earliest_completion_s=float(_coreview.earliest_completion_s(
                self._gf, mi[_core.N_RUN], kv, fewest)),
            request_prompt=prompt, request_pred=pred)

    def records(self) -> dict[str, np.ndarray]:
        """Per-request records and per-instance counters (copies), as the reference's."""
        ri, rf, mi = self._ri, self._rf, self._mi
        c = _core
        return {"arrival_s": rf[c.ARRIVAL].copy(), "dispatch_s": rf[c.DISPATCH].copy(),
                "admit_s": rf[c.ADMIT].copy(), "first_token_s": rf[c.FIRST].copy(),
                "finish_s": rf[c.FINISH].copy(), "tbt_sum_s": rf[c.TBT_SUM].copy(),
                "tbt_max_s": rf[c.TBT_MAX].copy(), "tbt_sq_s2": rf[c.TBT_SQ].copy(),
                "generated_tokens": ri[c.GEN].copy(),
                "preempted": ri[c.PREEMPTED].copy(),
                "recomputed_tokens": ri[c.RECOMP].copy(), "swaps": ri[c.SWAPS].copy(),
                "instance": ri[c.INSTANCE].copy(),
                "peak_kv_tokens": mi[c.PEAK_KV].copy(), "iterations": mi[c.N_ITER].copy()}

    @property
    def iterations_log(self) -> list[tuple[int, float, float, tuple[int, ...]]] | None:
        """With ``record=True``, every iteration ``(instance, start_s, end_s, request ids)``."""
        g = self._gi
        if not g[_core.RECORD]:
            return None
        if g[_core.RECORD] == 2:
            raise ParameterError("the compiled simulator's iteration log overflowed (chunked "
                                 "prefill with many partial iterations); use the reference "
                                 "engine to record this run")
        k, ids0 = int(g[_core.N_LOG_ITER]), int(g[_core.LOG_IDS0])
        li, lf = self.state.log_i, self.state.log_f
        ends = li[ids0 // 2:ids0 // 2 + k].tolist()
        ids = li[ids0:].tolist()
        starts = [0, *ends[:-1]]
        return [(int(li[i]), float(lf[2 * i]), float(lf[2 * i + 1]),
                 tuple(ids[starts[i]:ends[i]])) for i in range(k)]


def _new_state(wl: Workload, cfg: ClusterConfig, output: np.ndarray, pred: np.ndarray,
               labels: np.ndarray, n_bins: int, queue_view: int, record: bool) -> CoreState:
    """The initial :class:`CoreState` (nothing dispatched; clock before epoch 0)."""
    c = _core
    n, m = len(wl), cfg.n_instances
    n_lab = labels.shape[0]
    ri = np.zeros((c.LABEL0 + n_lab, n), np.int64)
    ri[c.P] = np.maximum(wl.prompt_tokens, 1)
    ri[c.D] = output
    ri[c.PRED] = pred
    ri[[c.INSTANCE, c.NXT, c.PRV]] = -1
    ri[c.LABEL0:] = labels
    rf = np.zeros((c.N_RF, n))
    rf[c.ARRIVAL] = wl.arrival_s
    rf[[c.DISPATCH, c.ADMIT, c.FIRST, c.LAST, c.FINISH]] = np.nan
    cap = max(min(cfg.max_batch, n), 1)
    mi = np.zeros((c.BATCH0 + cap + n_bins, m), np.int64)
    mi[[c.WHEAD, c.WTAIL, c.SHEAD, c.STAIL]] = -1
    gi = np.zeros(c.N_GI, np.int64)
    gi[c.EPOCH_K] = -1
    n_log = _log_size(wl, cfg, output) if record else 0
    gi[[c.BUDGET, c.MAX_BATCH, c.MAX_PREFILL, c.ADMISSION, c.QUEUE_VIEW, c.RECORD, c.HIST0,
        c.N_LABELS, c.LOG_IDS0, c.CHUNKED, c.BLOCK, c.TOTAL_BLK, c.CAP_BLK, c.PRIO, c.SWAP,
        c.CPU_BLK]] = [
        cfg.kv_budget_tokens, cfg.max_batch, cfg.max_prefill_tokens,
        ADMISSION_CODES[cfg.admission], queue_view, int(record), c.BATCH0 + cap, n_lab,
        2 * n_log, int(cfg.chunked_prefill), cfg.block_tokens, cfg.total_blocks,
        cfg.total_blocks - cfg.watermark_blocks, int(cfg.prefill_priority), int(cfg.swap),
        cfg.swap_blocks]
    gf = np.concatenate([cfg.timing.coefficients(), [0.0, cfg.epoch_s, cfg.swap_block_s],
                         np.full(m, np.inf)])
    return CoreState(ri, rf, mi, gi, gf, np.zeros(3 * n_log, np.int64),
                     np.zeros(2 * n_log))
