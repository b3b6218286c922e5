"""Trace-driven decode simulation under a step barrier (THEORY §9).

Model (per tick ``k``):

1. **Pool.** Requests enter the prompt pool after prefill (prefill itself is not simulated).
   By default the trace is replayed *at saturation*, as the paper evaluates it: the pool
   always holds the next ``window`` requests in arrival order (refilled every tick), so every
   free slot can be filled. With ``time_scale = X`` the timestamps are replayed compressed by
   ``X`` instead: a request enters the pool when the simulated clock reaches ``arrival / X``
   (the clock jumps over idle gaps).
2. **Schedule.** If the pool is non-empty and a slot is free, the router (the one contract of
   :mod:`lbtheory.routers`; see :mod:`.protocol`) assigns pool requests to replicas with free
   slots (``slots`` per replica): a per-request router places the head of the pool (FIFO) and
   is asked again; a batch router answers the tick's :class:`~lbtheory.routers.Assignment`.
   Assignment is sticky.
   **KV-cache budget** (``kv_budget``, tokens per replica; off by default, see below): a replica
   holds the KV of its requests, prompt + generated tokens, which is exactly its load ``L_g(k)``.
   A request of prompt ``s_i`` may be admitted to ``g`` only if ``L_g(k)`` plus the prompts
   already admitted to ``g`` in this tick plus ``s_i`` is ``≤ kv_budget``; the router sees
   ``kv_free[g] = kv_budget − L_g(k)`` (:class:`~lbtheory.barrier.protocol.ClusterView`). A request
   that fits nowhere waits in the pool. [R] The check is at admission only: requests already
   running keep growing by one token per step and are never preempted (the seed's proxy binds a
   request to its replica for life), so ``L_g`` can pass the budget later; ``kv_peak_ratio`` in
   the summary reports ``max_k M(k) / kv_budget``. Default off: the seed (BalanceRoute summary,
   "两阶段在线调度") states its scheduler's capacity only as free slots ``cap[g]`` and gives no KV
   token budget for its DeepSeek-V3 / Atlas 910C setting, so a number here would be invented.
3. **Barrier step.** Every replica runs one decode step; the step takes ``t = a·M(k) + b``
   seconds (:class:`~lbtheory.barrier.imbalance.StepTimeModel`), with ``M(k)`` the largest
   load. Each request in flight generates one token; [R] load ``L_g(k) = Σ (s_i + a_i(k))``.
4. **Completion.** A request with ``n_i = max(output_tokens, 1)`` decode steps leaves after
   its ``n_i``-th step, freeing its slot.

The run ends when the last request finishes (``status`` ``completed``) or, with
``DecodeConfig.max_steps``, after that many decode steps (``status`` ``truncated`` if some
requests had not finished: their latency is NaN, ``outcome`` says so). Metrics (see
:class:`DecodeResult`): the measurement window is every step up to the tick at which the last
request was scheduled (the final drain, when the pool is empty and the cluster empties, is
excluded; ``*_all`` keys include it). Throughput is tokens per second of decode
steps (idle gaps of a time-scaled replay are not counted). Deterministic under the router's seed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._checks import Seed, as_seed, check_int, check_memory, check_real
from ..errors import ParameterError, RunStatus
from ..routers._drive import Driver
from ..stats import QueuedRunOutcomes, mean, run_summary
from ..workloads import Workload
from .imbalance import (
    StepTimeModel,
    decode_latency,
    imbalance_from_totals,
    run_idle_fraction,
    tpot_percentiles,
)
from .protocol import ReplicaView

__all__ = ["DecodeConfig", "DecodeResult", "simulate_decode", "decode_steps", "decide_tick",
           "place_tick"]


@dataclass(frozen=True)
class DecodeConfig:
    """Cluster and replay settings.

    Attributes:
        replicas: ``G`` data-parallel decode replicas (≥ 1).
        slots: decode slots per replica (concurrent requests, ≥ 1).
        window: saturation replay: pool size in requests (≥ 1).
        time_scale: ``None`` for saturation replay, else the timestamp compression factor ``X > 0``.
        kv_budget: KV-cache tokens per replica that admission respects (``None``: no budget, the
            default; see the module doc).
        step_model: step time ``a·M + b`` (s).
        record_loads: keep the ``(K, G)`` load matrix (for plots).
        max_steps: stop after this many decode steps (``None``: run until every request
            finishes, the default); a run stopped with requests unfinished is ``truncated``.
    """

    replicas: int = 8
    slots: int = 32
    window: int = 128
    time_scale: float | None = None
    kv_budget: int | None = None
    step_model: StepTimeModel = field(default_factory=StepTimeModel)
    record_loads: bool = False
    max_steps: int | None = None

    def __post_init__(self) -> None:
        check_int(self.replicas, "number of replicas G (DecodeConfig.replicas)", low=1)
        check_int(self.slots, "slot capacity per replica (DecodeConfig.slots)", low=1)
        check_int(self.window, "pool window (DecodeConfig.window)", low=1, unit="requests")
        if self.time_scale is not None:
            check_real(self.time_scale, "time_scale", low=0.0, low_open=True)
        if self.kv_budget is not None:
            check_int(self.kv_budget, "kv_budget (DecodeConfig.kv_budget)", low=1,
                      unit="KV tokens per replica; or None")
        if self.max_steps is not None:
            check_int(self.max_steps, "max_steps (DecodeConfig.max_steps)", low=1,
                      unit="decode steps; or None")
        # the slot tables (3 int64 arrays of G × S) and, per tick, the views built from them
        check_memory(8.0 * 6 * self.replicas * self.slots + 8.0 * 4 * self.window,
                     f"a decode cluster of {self.replicas} replicas × {self.slots} slots")

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (for manifests; ``max_steps`` only when set, so the manifests of
        complete runs are unchanged)."""
        out = {"replicas": self.replicas, "slots": self.slots, "window": self.window,
               "time_scale": self.time_scale, "kv_budget": self.kv_budget,
               "step_a_s_per_token": self.step_model.a_s_per_token,
               "step_b_s": self.step_model.b_s}
        return out if self.max_steps is None else out | {"max_steps": self.max_steps}


@dataclass(frozen=True)
class DecodeResult(QueuedRunOutcomes):
    """Per-step and per-request records of one simulation (:class:`~lbtheory.stats.RunResult`).

    Per-request arrays (``start_step``, ``replica``, ``n_steps``, ``outcome``, ``latency_s``)
    are in **workload order**: index ``k`` is the ``k``-th request of the trace.

    Attributes:
        policy: router name.
        config: the :class:`DecodeConfig`.
        max_load: ``M(k)`` per step (tokens).
        sum_load: ``Σ_g L_g(k)`` per step (tokens).
        tokens: tokens generated in each step (= requests in flight).
        step_time_s: ``t(k)`` (s).
        start_step: first decode step of each request (−1: never scheduled).
        replica: replica each request ran on (−1: never scheduled).
        n_steps: decode steps of each request.
        measure_steps: number of leading steps in the measurement window.
        loads: ``(K, G)`` loads if recorded, else ``None``.
        sim_wall_s: wall-clock seconds the simulation took.
        status: :class:`~lbtheory.errors.RunStatus` — ``completed`` (every request was
            scheduled and finished; a router that strands requests raises instead) or
            ``truncated`` (the run hit ``DecodeConfig.max_steps`` with requests unfinished).
    """

    policy: str
    config: DecodeConfig
    max_load: np.ndarray
    sum_load: np.ndarray
    tokens: np.ndarray
    step_time_s: np.ndarray
    start_step: np.ndarray
    replica: np.ndarray
    n_steps: np.ndarray
    measure_steps: int
    loads: np.ndarray | None = None
    sim_wall_s: float = 0.0
    status: RunStatus = RunStatus.COMPLETED

    @property
    def done(self) -> np.ndarray:
        """Mask of the requests that finished within the run's steps (workload order)."""
        return (self.start_step >= 0) & (self.start_step + self.n_steps <= self.max_load.size)

    @property
    def latency_s(self) -> np.ndarray:
        """Decode latency of each request: from its first decode step to its last token (s;
        NaN unless it finished). Prefill and the wait in the pool are not included (a
        saturation replay has no arrival times)."""
        cum = np.concatenate([[0.0], np.cumsum(self.step_time_s)])
        done = self.done
        out = np.full(self.n_steps.size, np.nan)
        out[done] = decode_latency(cum, self.start_step[done], self.n_steps[done])
        return out

    @property
    def imbalance(self) -> np.ndarray:
        """``I(k) = G·M(k) − Σ_g L_g(k)`` per step (tokens; :func:`.imbalance_from_totals`)."""
        return imbalance_from_totals(self.max_load, self.sum_load, self.config.replicas)

    def tpot_s(self) -> np.ndarray:
        """Time per output token of each request (s; NaN unless it finished): its decode
        latency over its decode steps (as :func:`.tpot_per_request`)."""
        return self.latency_s / self.n_steps

    def summary(self) -> dict[str, Any]:
        """The common keys of :data:`~lbtheory.stats.SUMMARY_KEYS` (requests, completed,
        errors, status; latency: :attr:`latency_s` of the finished requests, s), then the
        headline numbers: mean imbalance (tokens), idle fraction, throughput (tokens/s), TPOT
        p50/p95 (ms) of the finished requests, over the measurement window (``*_all``: every
        step)."""
        w = slice(0, max(self.measure_steps, 1))
        G = self.config.replicas
        done = self.done
        out: dict[str, Any] = run_summary(
            requests=self.n_steps.size, completed=done.sum(), errors=self.errors,
            status=self.status, latency_s=self.latency_s[done])
        out |= {
            "mean_imbalance": mean(self.imbalance[w]),
            "idle_fraction": run_idle_fraction(self.max_load[w], self.sum_load[w], G),
            "throughput": float(self.tokens[w].sum() / self.step_time_s[w].sum()),
            "mean_max_load": mean(self.max_load[w]),
            "mean_imbalance_all": mean(self.imbalance),
            "idle_fraction_all": run_idle_fraction(self.max_load, self.sum_load, G),
            "throughput_all": float(self.tokens.sum() / self.step_time_s.sum()),
            "steps": float(self.max_load.size),
            "measure_steps": float(self.measure_steps),
            "sim_time_s": float(self.step_time_s.sum()),
        }
        out.update(tpot_percentiles(self.tpot_s()[done], (50.0, 95.0)))
        if self.config.kv_budget is not None:
            out["kv_peak_ratio"] = float(self.max_load.max() / self.config.kv_budget)
        return out


def decode_steps(workload: Workload) -> np.ndarray:
    """Decode steps of each request: ``max(output_tokens, 1)`` (a prefill always emits one)."""
    return np.maximum(workload.output_tokens, 1).astype(np.int64)


class _Cluster:
    """Mutable slot bookkeeping of the simulator (private)."""

    def __init__(self, G: int, S: int) -> None:
        self.loads = np.zeros(G, dtype=np.int64)
        self.inflight = np.zeros(G, dtype=np.int64)
        self.free = np.full(G, S, dtype=np.int64)
        self.slot_ids = np.full((G, S), -1, dtype=np.int64)
        self.slot_prompt = np.zeros((G, S), dtype=np.int64)
        self.slot_start = np.zeros((G, S), dtype=np.int64)
        self.free_slots = [list(range(S - 1, -1, -1)) for _ in range(G)]
        self.finish_at: dict[int, list[tuple[int, int, int]]] = {}

    def admit(self, g: int, i: int, s: int, n: int, tick: int) -> None:
        slot = self.free_slots[g].pop()
        self.slot_ids[g, slot] = i
        self.slot_prompt[g, slot] = s
        self.slot_start[g, slot] = tick
        self.loads[g] += s
        self.inflight[g] += 1
        self.free[g] -= 1
        self.finish_at.setdefault(tick + n - 1, []).append((g, slot, i))

    def finish(self, tick: int, prompt: np.ndarray, steps: np.ndarray,
               done_ids: list[int], done_steps: list[int]) -> int:
        ended = self.finish_at.pop(tick, ())
        for g, slot, i in ended:
            self.loads[g] -= int(prompt[i]) + int(steps[i])
            self.inflight[g] -= 1
            self.free[g] += 1
            self.slot_ids[g, slot] = -1
            self.free_slots[g].append(slot)
            done_ids.append(i)
            done_steps.append(int(steps[i]))
        return len(ended)


def _check(view: ReplicaView, pos: np.ndarray, reps: np.ndarray, name: str) -> None:
    """Check a router's replicas against the view (free slots, KV room); the positions were
    checked by :meth:`~lbtheory.routers._drive.Driver.ask`."""
    G = view.free.size
    if reps.min() < 0 or reps.max() >= G:
        raise ParameterError(f"router {name} returned a replica outside 0..{G - 1}")
    if np.any(np.bincount(reps, minlength=G) > view.free):
        raise ParameterError(f"router {name} over-filled a replica's free slots")
    if view.kv_free is not None:
        kv = np.bincount(reps, weights=view.pool_prompt[pos], minlength=G)
        if np.any((kv > 0) & (kv > view.kv_free)):  # kv_free < 0 after growth: admit nothing
            raise ParameterError(f"router {name} admitted more prompt tokens than a replica's "
                                 f"KV budget has room for (kv_free)")


def decide_tick(router: Any, state: Any, view: ReplicaView, rng: np.random.Generator
                ) -> tuple[list[int], list[int], Any]:
    """Ask ``router`` until it has nothing more to place this tick; pool positions (in the
    tick's first view), replicas and the router's new state (:func:`place_tick` on a
    :class:`~lbtheory.routers._drive.Driver` resuming from ``state`` and ``rng``)."""
    driver = Driver.resume(router, state, rng, target="replica", queue="pool")
    pos, reps = place_tick(driver, view)
    return pos, reps, driver.state


def place_tick(driver: Driver, view: ReplicaView) -> tuple[list[int], list[int]]:
    """Ask the driven router until it has nothing more to place this tick; pool positions (in
    the tick's first view) and replicas.

    A per-request answer (an int) places the head of the pool (FIFO); a batch answer (an
    :class:`~lbtheory.routers.Assignment`) places its positions. Either way the router is asked
    again with the view updated (slots, loads, KV room, the rest of the pool), until it answers
    ``None`` or an empty assignment, or the pool or the slots run out.
    """
    order = np.arange(view.pool_ids.size)
    out_pos: list[int] = []
    out_g: list[int] = []
    while view.pool_ids.size and view.free.any():
        got = driver.ask(view, view.pool_ids.size, view.head)
        if got is None:
            break
        pos, reps = got
        _check(view, pos, reps, driver.name)
        out_pos.extend(order[pos].tolist())
        out_g.extend(reps.tolist())
        keep = np.ones(order.size, dtype=bool)
        keep[pos] = False
        order = order[keep]
        view = _after(view, pos, reps, keep)
    return out_pos, out_g


def _after(view: ReplicaView, pos: np.ndarray, reps: np.ndarray,
           keep: np.ndarray) -> ReplicaView:
    """The view once pool positions ``pos`` went to replicas ``reps`` (``keep``: the rest)."""
    G = view.free.size
    n_g = np.bincount(reps, minlength=G)
    s_g = np.bincount(reps, weights=view.pool_prompt[pos], minlength=G).astype(np.int64)
    return dataclasses.replace(view,
        free=view.free - n_g, inflight=view.inflight + n_g, loads=view.loads + s_g,
        kv_free=None if view.kv_free is None else view.kv_free - s_g,
        pool_ids=view.pool_ids[keep], pool_prompt=view.pool_prompt[keep],
        pool_wait=view.pool_wait[keep], finished_ids=[], finished_steps=[], head=0)


def simulate_decode(workload: Workload, router: Any, *, config: DecodeConfig | None = None,
                    seed: Seed = 0, **options: Any) -> DecodeResult:
    """Replay ``workload`` through ``router`` on ``G`` barrier-synchronised decode replicas.

    Args:
        workload: the requests (:func:`lbtheory.workloads.read_trace`).
        router: a router (the contract of :mod:`lbtheory.routers`), e.g.
            ``lbtheory.registry.make_router("br0", "replicas")``.
        config: cluster settings; alternatively pass :class:`DecodeConfig` fields as keywords
            (not both).
        seed: seed of the router's random draws (the ``rng`` of ``route``): an int or a
            ``numpy.random.Generator`` (one draw).

    Returns:
        :class:`DecodeResult`; every request is scheduled exactly once and finishes, unless
        ``max_steps`` stops the run first (``status`` ``truncated``).

    Raises:
        ParameterError: ``config`` and keywords together, an unknown keyword, bad settings
            (G < 1, slots < 1, a ``kv_budget`` below the longest prompt, ...), a negative seed,
            or a router that breaks the contract.
    """
    import time

    if config is not None and options:
        raise ParameterError(f"simulate_decode: give config= or DecodeConfig fields as keywords, "
                             f"not both (got config and {sorted(options)})")
    if config is None:
        unknown = sorted(set(options) - {f.name for f in dataclasses.fields(DecodeConfig)})
        if unknown:
            raise ParameterError(f"simulate_decode: unknown option(s) {unknown}; expected "
                                 f"DecodeConfig fields")
    cfg = config if config is not None else DecodeConfig(**options)
    G, S = int(cfg.replicas), int(cfg.slots)
    n = len(workload)
    prompt = workload.prompt_tokens
    steps = decode_steps(workload)
    if cfg.kv_budget is not None and n and int(prompt.max()) > cfg.kv_budget:
        raise ParameterError(f"kv_budget {cfg.kv_budget} tokens is smaller than the longest "
                             f"prompt ({int(prompt.max())} tokens): that request could never be "
                             f"admitted")
    arrive = workload.arrival_s / cfg.time_scale if cfg.time_scale is not None else None
    step_time = cfg.step_model  # t = a·M + b (s): the one definition, StepTimeModel.__call__
    cl = _Cluster(G, S)
    driver = Driver(router, as_seed(seed), target="replica", queue="pool")
    name = driver.name
    enter = np.zeros(n, dtype=np.int64)
    start = np.full(n, -1, dtype=np.int64)
    replica = np.full(n, -1, dtype=np.int64)
    pool: list[int] = []
    rec_max: list[int] = []
    rec_sum: list[int] = []
    rec_tok: list[int] = []
    rec_loads: list[np.ndarray] = []
    done_ids: list[int] = []
    done_steps: list[int] = []
    nxt, done, tick, clock, measure = 0, 0, 0, 0.0, 0
    wall0 = time.perf_counter()
    limit = cfg.max_steps if cfg.max_steps is not None else np.inf
    while done < n and tick < limit:
        if arrive is None:
            while len(pool) < cfg.window and nxt < n:
                pool.append(nxt)
                enter[nxt] = tick
                nxt += 1
        else:
            while nxt < n and arrive[nxt] <= clock:
                pool.append(nxt)
                enter[nxt] = tick
                nxt += 1
        if pool and cl.free.any():
            ids = np.asarray(pool, dtype=np.int64)
            view = ReplicaView(tick, cl.loads.copy(), cl.free.copy(), cl.inflight.copy(), ids,
                               prompt[ids], tick - enter[ids], cl.slot_ids, cl.slot_prompt,
                               cl.slot_start, done_ids, done_steps,
                               None if cfg.kv_budget is None else cfg.kv_budget - cl.loads)
            if done_ids:
                driver.observe(view)
            pos, reps = place_tick(driver, view)
            for p, g in zip(pos, reps):
                i = pool[p]
                start[i] = tick
                replica[i] = g
                cl.admit(g, i, int(prompt[i]), int(steps[i]), tick)
            if pos:
                taken = set(pos)
                pool = [i for j, i in enumerate(pool) if j not in taken]
            done_ids, done_steps = [], []
            if nxt == n and not pool and measure == 0:
                measure = tick + 1
        total_inflight = int(cl.inflight.sum())
        if total_inflight == 0:
            if arrive is not None and not pool and nxt < n:
                clock = max(clock, float(arrive[nxt]))
                continue
            raise ParameterError(f"router {name} left every slot idle with "
                                 f"{len(pool)} requests waiting at step {tick}")
        m = int(cl.loads.max())
        rec_max.append(m)
        rec_sum.append(int(cl.loads.sum()))
        rec_tok.append(total_inflight)
        if cfg.record_loads:
            rec_loads.append(cl.loads.copy())
        clock += step_time(m)
        cl.loads += cl.inflight
        done += cl.finish(tick, prompt, steps, done_ids, done_steps)
        tick += 1
    max_load = np.asarray(rec_max, dtype=float)
    return DecodeResult(
        policy=name, config=cfg, max_load=max_load,
        sum_load=np.asarray(rec_sum, dtype=float), tokens=np.asarray(rec_tok, dtype=float),
        step_time_s=np.asarray(step_time(max_load), dtype=float), start_step=start, replica=replica,
        n_steps=steps,
        measure_steps=measure or tick,
        loads=np.asarray(rec_loads) if cfg.record_loads else None,
        sim_wall_s=time.perf_counter() - wall0,
        status=RunStatus.COMPLETED if done == n else RunStatus.TRUNCATED)
