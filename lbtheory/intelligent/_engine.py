"""Instance simulator: m identical LLM instances with continuous batching behind a router queue.

Each instance runs iteration-level (continuous) batching with FCFS admission (THEORY §10):

* At the start of an iteration every running request needs one more KV-cache slot. While the
  running requests' KV plus one token each exceeds ``kv_budget_tokens``, the most recently admitted
  running request is **preempted by recomputation**: its KV is freed and it goes back to the front
  of the instance's waiting queue, keeping the tokens it already generated (vLLM's RECOMPUTE).
* If nothing was preempted, waiting requests are admitted FCFS while the batch has fewer than
  ``max_batch`` requests, the prefill tokens of this iteration stay within ``max_prefill_tokens``
  (the first admission is always allowed) and the KV after the iteration fits the budget. A
  request is prefilled over its prompt plus the tokens it had generated before a preemption.
* The iteration prefills the admitted requests and decodes one token for every running request;
  its length is :meth:`IterationTimeModel.iteration_time`. Every scheduled request emits one
  token at the iteration's end (the prefill emits the first token); a request that has emitted its
  output length finishes and frees its KV. A request's KV is prompt + generated tokens.

**Chunked prefill** (``chunked_prefill=True``, vLLM's / Sarathi-Serve's; [R] details): an
iteration processes at most ``max_prefill_tokens`` tokens, one per decoding request and the
rest as prefill chunks — first continuing the partly prefilled requests (in batch order), then
admitting waiting requests, whose prefill may be split over several iterations. A request is
admitted only if its whole prefill and first token fit the KV budget (the remainder stays
reserved, so a partial prefill never stalls); it emits its first token at the end of the
iteration that completes its prefill. A chunk of ``c`` tokens at offset ``o`` costs
``a_p c + a_q (c² + 2 c o)`` (the chunks of a prompt sum to ``a_q p²``); the decode terms count
the decoding requests and their context only. A preempted partial prefill starts over.

**The vLLM-faithful model** (:func:`vllm_cluster`; anchor: vLLM v0's scheduler and block
manager, the paper's serving engine): ``block_tokens = 16`` — a request with ``x`` tokens of KV
holds ``ceil(x / 16)`` blocks, so decode grows its KV block by block and a decode needs a new
block only when its next token starts one; an admission reserves its prompt's blocks (with the
first token) and must leave ``watermark`` (1 %) of the blocks free; ``prefill_priority``
(vLLM's default scheduler without chunked prefill): an iteration that admits waiting prompts
runs no decodes — the running requests stall — and only an iteration without prompts checks the
decodes' blocks, preempting the most recently admitted request by recomputation (its KV
discarded: ``recomputed_tokens`` in the per-request record) until every next token has its
block; ``max_batch`` is ``max_num_seqs``, ``max_prefill_tokens`` ``max_num_batched_tokens``.
Chunked prefill: the chunked schedule above, with the blocks. [R] A request's KV counts its
latest token from the iteration that samples it (vLLM one step later).

**Swap preemption** (``preemption="swap"``, vLLM v0's ``_schedule_default`` with
``preemption_mode="swap"``; :mod:`._swap` has the [R] parameters): a preempted request's
``ceil(x / block_tokens)`` blocks move to the instance's CPU swap space (``swap_blocks``) and it
joins the instance's *swapped* queue, keeping its KV (no recomputed tokens; ``swaps`` in the
per-request record); [R] one the free swap space cannot hold is preempted by recomputation (vLLM
aborts).
While the swapped queue is non-empty no prompt is admitted. An iteration that preempted nothing
swaps requests back in, oldest preemption first ([R] vLLM's FCFS policy sorts them by arrival),
while the batch has room and the blocks with the next token plus the watermark fit ([R] vLLM
asks one block more per sequence; the first that does not fit ends it); they join the end of
the batch and decode in it. Moving ``n`` blocks either way adds ``n · swap_block_s`` to the
iteration (:func:`~._swap.swap_seconds`). Swapped requests count as waiting in the view; their
KV is in neither ``kv_used`` nor the prefill tokens.
With chunked prefill (vLLM v0's ``_schedule_chunked_prefill``): the running requests first
(decodes, then chunks, preempting as above), then, if nothing was preempted, swapped requests
back in while a token of the budget is left (a decode takes one, a partial prefill a chunk),
then admissions. [R] A partial prefill preempted by swapping keeps its computed chunks and
moves all its ``ceil((p + g) / block_tokens)`` blocks (vLLM allocates a prompt's blocks at
admission and swaps the block table); back in, it goes on where it stopped (recomputed, it
starts over). [R] No prompt is admitted while a request is swapped out or after a preemption
(vLLM's chunked scheduler admits prompts after both, in the blocks left).

The router acts at decision epochs ``t_k = k · epoch_s`` (one minimum decode iteration): arrivals
up to ``t_k`` join the router queue (FCFS), and the router (the one contract of
:mod:`lbtheory.routers`) routes queued requests to instances until it decides to wait or the
queue is empty; it sees an :class:`InstanceView`. Epochs with an empty queue are skipped (nothing
to decide); instances run in continuous time in between. Deterministic: no randomness inside.

Token counts [R]: a request is served with at least one prompt and one output token
(``max(·, 1)``; the prefill iteration always emits one token), the rule the DLB and decode
simulators use too.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from .._checks import check_ticks
from ..errors import ParameterError
from ..routers import IdenticalTargets
from ..workloads import Workload
from ._admission import Admission, admission_key
from ._config import ClusterConfig
from ._swap import swap_seconds_py

__all__ = ["ClusterConfig", "ClusterSim", "InstanceView", "Admission"]

_EPS = 1e-12


@dataclass(frozen=True)
class InstanceView(IdenticalTargets):
    """What a router sees at a decision epoch (arrays over instances unless stated).

    ``load_tokens`` is Σ (prompt + predicted output) over the requests on an instance (running and
    waiting): the Σ_j (p_j^m + d_j^m) of THEORY §10. ``queue_prompt`` / ``queue_output_pred`` are
    the first ``len`` router-queue requests (head first); ``queue_wait_s`` their time waited.
    ``instance_requests[m]`` are the ids of the requests on instance m (running, then waiting in
    the order the batcher admits them, then swapped out, oldest first; ``n_waiting`` counts the
    waiting and the swapped);
    ``earliest_completion_s`` is T̂_c [R], the estimated time until the first running request
    finishes: min over instances of (fewest predicted output tokens left among its decoding
    requests) × (its current decode iteration time), ``inf`` when nothing decodes;
    ``request_prompt`` / ``request_pred`` are the prompt and predicted output of every request of
    the workload, by id (read-only).
    """

    time_s: float
    n_running: np.ndarray
    n_waiting: np.ndarray
    kv_used: np.ndarray
    kv_committed: np.ndarray
    load_tokens: np.ndarray
    waiting_prefill_tokens: np.ndarray
    queue_prompt: np.ndarray
    queue_output_pred: np.ndarray
    queue_wait_s: np.ndarray
    queue_length: int
    config: ClusterConfig
    instance_requests: tuple = ()
    earliest_completion_s: float = math.inf
    request_prompt: np.ndarray | None = None
    request_pred: np.ndarray | None = None

    # -- the TargetView every simulator's view implements (shared baselines read these) --
    @property
    def eligible(self) -> np.ndarray:
        """Every instance accepts requests (its own batcher queues them)."""
        return np.ones(self.config.n_instances, dtype=bool)

    @property
    def queue(self) -> np.ndarray:
        """Requests on each instance (running + waiting)."""
        return self.n_running + self.n_waiting

    @property
    def tokens(self) -> np.ndarray:
        """Committed prompt + predicted output tokens on each instance."""
        return self.load_tokens


class _Instance:
    __slots__ = ("running", "waiting", "kv_used", "busy_until", "admitted", "peak_kv", "n_iter",
                 "load_tokens", "wait_tokens", "n_on", "chunks", "prefill_only", "swapped",
                 "cpu_used", "moved")

    def __init__(self) -> None:
        self.running: list[int] = []
        self.waiting: deque[int] = deque()
        self.admitted: list[int] = []
        self.kv_used = 0
        self.busy_until = math.inf
        self.peak_kv = 0
        self.n_iter = 0
        self.load_tokens = 0
        self.wait_tokens = 0
        self.n_on = 0
        self.chunks: dict[int, int] = {}
        self.prefill_only = False
        self.swapped: deque[int] = deque()  # swap preemption: on the CPU, oldest first
        self.cpu_used = 0  # CPU swap blocks held
        self.moved = 0  # blocks swapped out or in for the current iteration


class ClusterSim:
    """Step-by-step simulator in Python: the reference engine (the compiled engine,
    :class:`~lbtheory.intelligent.CompiledClusterSim`, reproduces it bit for bit).

    Args:
        workload: the requests.
        config: the cluster.
        predicted_output: predicted output tokens per request, what routers see (default: the
            true lengths — oracle mode).
        queue_view: how many router-queue requests :meth:`view` exposes.
        record: keep a log of every iteration, ``(instance, start_s, end_s, request ids)`` in
            :attr:`iterations_log` (for independent checks; costs memory).
    """

    engine = "reference"

    def __init__(self, workload: Workload, config: ClusterConfig,
                 predicted_output: np.ndarray | None = None, *, queue_view: int = 32,
                 record: bool = False) -> None:
        config.check_workload(workload)
        check_ticks(float(workload.arrival_s[-1]), config.epoch_s,
                    "instance simulator: the workload's arrival span")
        n = len(workload)
        self.wl, self.cfg = workload, config
        prompt = np.maximum(workload.prompt_tokens, 1)   # [R] module docstring
        output = np.maximum(workload.output_tokens, 1)
        self.p = prompt.tolist()
        self.d = output.tolist()
        pred = output if predicted_output is None else np.asarray(predicted_output)
        if pred.shape != (n,) or not np.all(np.isfinite(pred)) or np.any(pred < 0):
            raise ParameterError(f"predicted_output must have shape ({n},) and be finite and "
                                 f">= 0")
        self.pred = pred.astype(np.int64).tolist()
        self._prompt_a = prompt
        self._pred_a = pred.astype(np.int64)
        self.arrival = workload.arrival_s.tolist()
        self.gen = [0] * n
        self.left = [0] * n  # chunked prefill: tokens of a started prefill still to compute
        nan = math.nan
        self.dispatch_s = [nan] * n
        self.admit_s = [nan] * n
        self.first_token_s = [nan] * n
        self.last_token_s = [nan] * n
        self.finish_s = [nan] * n
        self.tbt_sum = [0.0] * n
        self.tbt_max = [0.0] * n
        self.tbt_sq = [0.0] * n
        self.preempted = [0] * n
        self.recomputed = [0] * n  # KV tokens a preemption discarded (computed again later)
        self.swaps = [0] * n  # preemptions by swapping
        self.instance_of = [-1] * n
        self.inst = [_Instance() for _ in range(config.n_instances)]
        self.queue: deque[int] = deque()
        self.next_arrival = 0
        self.k = -1
        self.now = 0.0
        self.n_done = 0
        self.preemptions = 0
        self.completed_log: list[int] = []
        self.queue_view = int(queue_view)
        self.iterations_log: list[tuple[int, float, float, tuple[int, ...]]] | None = \
            [] if record else None

    # -- instances ---------------------------------------------------------------------------
    def _preempt(self, ins: _Instance) -> tuple[int, bool]:
        """Preempt (the most recently admitted first) while the running requests' KV, their
        next token and the reserved rest of their prefills (chunked prefill; ``left`` is 0
        otherwise) exceed the budget — by swapping where the option and the free CPU space
        allow, else by recomputation; then order the waiting queue (:meth:`_admission_order`).
        Returns ``(need, preempted)``."""
        cfg, p, gen, left = self.cfg, self.p, self.gen, self.left
        blk = cfg.blocks
        run = ins.running
        need = sum(blk(p[v] + gen[v] + 1) for v in run)  # blocks, next token included
        preempted = False
        while need > cfg.total_blocks and run:
            v = run.pop()
            full = p[v] + gen[v]
            ins.kv_used -= full - left[v]
            need -= blk(full + 1)
            self.preempted[v] += 1
            self.preemptions += 1
            preempted = True
            h = blk(full)
            if cfg.swap and ins.cpu_used + h <= cfg.swap_blocks:  # KV to the CPU
                ins.swapped.append(v)
                ins.cpu_used += h
                ins.moved += h
                self.swaps[v] += 1
                continue
            self.recomputed[v] += full - left[v]
            left[v] = 0
            ins.waiting.appendleft(v)
            ins.wait_tokens += full
        if cfg.admission is not Admission.FCFS and len(ins.waiting) > 1:
            ins.waiting = deque(self._admission_order(ins))
        return need, preempted

    def _swap_in(self, ins: _Instance, need: int, tok: int = 0,
                 chunks: dict[int, int] | None = None, sum_q: float = 0.0,
                 sum_q2: float = 0.0) -> tuple[int, int, float, float]:
        """Swap requests back in (oldest preemption first) while the batch has room and
        ``need`` plus their blocks with the next token fit above the watermark; chunked prefill
        (``chunks`` given): while ``tok`` is left, a decode takes one, a partial prefill a chunk
        (in ``chunks``, ``Σq``, ``Σq²``). Returns ``(need, tok, Σq, Σq²)``."""
        cfg, p, gen, left, sw = self.cfg, self.p, self.gen, self.left, ins.swapped
        while sw and len(ins.running) < cfg.max_batch and (chunks is None or tok > 0):
            v = sw[0]
            full = p[v] + gen[v]
            nb = cfg.blocks(full + 1)
            if need + nb > cfg.total_blocks - cfg.watermark_blocks:
                break
            ins.running.append(sw.popleft())
            h = cfg.blocks(full)
            ins.cpu_used -= h
            ins.moved += h
            ins.kv_used += full - left[v]
            need += nb
            if chunks is not None:
                c = min(left[v], tok) if left[v] > 0 else 1
                tok -= c
                if left[v] > 0:
                    chunks[v] = c
                    x, o = float(c), float(full - left[v])
                    sum_q += x
                    sum_q2 += x * x + 2.0 * x * o
        return need, tok, sum_q, sum_q2

    def _admit_one(self, ins: _Instance, t: float, nv: int) -> int:
        """Move the head waiting request (``nv`` tokens to prefill) into the batch."""
        v = ins.waiting.popleft()
        ins.wait_tokens -= nv
        ins.admitted.append(v)
        if math.isnan(self.admit_s[v]):
            self.admit_s[v] = t
        return v

    def _begin(self, m: int, t: float, need: int, sum_q: float, sum_q2: float, n_decode: int,
               context: int) -> None:
        """Start the iteration formed, or mark the instance idle."""
        ins = self.inst[m]
        if not ins.running and not ins.admitted:
            ins.busy_until = math.inf
            return
        ins.peak_kv = max(ins.peak_kv, need * self.cfg.block_tokens)
        ins.n_iter += 1
        dt = self.cfg.timing.seconds(sum_q, sum_q2, n_decode, context)
        if ins.moved:
            dt += swap_seconds_py(ins.moved, self.cfg.swap_block_s)
        ins.busy_until = t + dt
        if self.iterations_log is not None:
            self.iterations_log.append((m, t, ins.busy_until, (*ins.running, *ins.admitted)))

    def _admit_prefills(self, ins: _Instance, t: float, need: int) -> tuple[int, float, float]:
        """Admit waiting requests (in the queue's order) while the batch has room, the
        prefill tokens fit ``max_prefill_tokens`` (the first always does) and ``need`` (blocks)
        plus the request's prompt and first token plus the watermark fit the blocks; the first
        that does not ends the admissions (bin packing skips it). Returns ``(need, Σq, Σq²)``."""
        cfg, p, gen, wait, run = self.cfg, self.p, self.gen, ins.waiting, ins.running
        cap = cfg.total_blocks - cfg.watermark_blocks
        skipped: list[int] = []
        sum_q = sum_q2 = 0.0
        qtok = 0
        while wait and len(run) + len(ins.admitted) < cfg.max_batch:
            nv = p[wait[0]] + gen[wait[0]]
            nb = cfg.blocks(nv + 1)
            if (ins.admitted and qtok + nv > cfg.max_prefill_tokens) or need + nb > cap:
                if cfg.admission is not Admission.BIN_PACKING:
                    break
                skipped.append(wait.popleft())
                continue
            self._admit_one(ins, t, nv)
            x = float(nv)
            sum_q += x
            sum_q2 += x * x
            qtok += nv
            need += nb
        wait.extendleft(reversed(skipped))
        return need, sum_q, sum_q2

    def _start(self, m: int, t: float) -> None:
        """Form and start the next iteration of instance ``m`` at time ``t`` (s)."""
        if self.cfg.chunked_prefill:
            self._start_chunked(m, t)
            return
        ins, cfg = self.inst[m], self.cfg
        ins.admitted = []
        ins.prefill_only = False
        ins.moved = 0
        if cfg.prefill_priority:  # vLLM: prompts first; a prefill iteration runs no decodes
            if cfg.admission is not Admission.FCFS and len(ins.waiting) > 1:
                ins.waiting = deque(self._admission_order(ins))
            p, gen = self.p, self.gen
            if not ins.swapped:  # no prompt while a request is swapped out
                held = sum(cfg.blocks(p[v] + gen[v]) for v in ins.running)
                need, sum_q, sum_q2 = self._admit_prefills(ins, t, held)
                if ins.admitted:
                    ins.prefill_only = True
                    self._begin(m, t, need, sum_q, sum_q2, 0, 0)
                    return
            need, preempted = self._preempt(ins)
            if ins.swapped and not preempted:
                need = self._swap_in(ins, need)[0]
            self._begin(m, t, need, 0.0, 0.0, len(ins.running), ins.kv_used)
            return
        need, preempted = self._preempt(ins)
        sum_q = sum_q2 = 0.0
        if not preempted or not ins.running:
            need, sum_q, sum_q2 = self._admit_prefills(ins, t, need)
        self._begin(m, t, need, sum_q, sum_q2, len(ins.running), ins.kv_used)

    def _start_chunked(self, m: int, t: float) -> None:
        """:meth:`_start` with chunked prefill (module docstring)."""
        ins, cfg, p, gen, left = self.inst[m], self.cfg, self.p, self.gen, self.left
        ins.moved = 0
        need, preempted = self._preempt(ins)
        run, wait = ins.running, ins.waiting
        n_dec = 0
        partial_kv = 0
        for v in run:
            if left[v] == 0:
                n_dec += 1
            else:
                partial_kv += p[v] + gen[v] - left[v]
        tok = cfg.max_prefill_tokens - n_dec
        chunks: dict[int, int] = {}
        sum_q = sum_q2 = 0.0
        for v in run:
            if left[v] > 0 and tok > 0:
                c = min(left[v], tok)
                chunks[v] = c
                tok -= c
                x, o = float(c), float(p[v] + gen[v] - left[v])
                sum_q += x
                sum_q2 += x * x + 2.0 * x * o
        if ins.swapped and not preempted:  # swap preemption: running first, then swapped in
            k = len(run)
            need, tok, sum_q, sum_q2 = self._swap_in(ins, need, tok, chunks, sum_q, sum_q2)
            for v in run[k:]:
                if left[v] == 0:
                    n_dec += 1
                else:
                    partial_kv += p[v] + gen[v] - left[v]
        ins.admitted = []
        cap = cfg.total_blocks - cfg.watermark_blocks
        skipped: list[int] = []
        if (not preempted or not run) and not ins.swapped:
            while wait and len(run) + len(ins.admitted) < cfg.max_batch and tok > 0:
                nv = p[wait[0]] + gen[wait[0]]
                nb = cfg.blocks(nv + 1)
                if need + nb > cap:
                    if cfg.admission is not Admission.BIN_PACKING:
                        break
                    skipped.append(wait.popleft())
                    continue
                v = self._admit_one(ins, t, nv)
                left[v] = nv
                c = min(nv, tok)
                chunks[v] = c
                tok -= c
                need += nb
                x = float(c)
                sum_q += x
                sum_q2 += x * x
        wait.extendleft(reversed(skipped))
        ins.chunks = chunks
        self._begin(m, t, need, sum_q, sum_q2, n_dec, ins.kv_used - partial_kv)

    def _finish(self, m: int) -> None:
        """End the current iteration of instance ``m``: emit tokens, retire finished requests."""
        ins, p, d, gen = self.inst[m], self.p, self.d, self.gen
        t = ins.busy_until
        chunked = self.cfg.chunked_prefill
        if chunked:
            left, chunks = self.left, ins.chunks
            kv = ins.kv_used
            for v in ins.running + ins.admitted:
                c = chunks.get(v, 0)
                kv += c + (1 if left[v] == c else 0)  # a decode token, a chunk, a first token
        else:
            kv = ins.kv_used + (0 if ins.prefill_only else len(ins.running))
            for v in ins.admitted:
                kv += p[v] + gen[v] + 1
        # a prefill-only iteration (prefill_priority): the running requests stall, emit nothing
        still: list[int] = list(ins.running) if ins.prefill_only else []
        for v in ins.admitted if ins.prefill_only else ins.running + ins.admitted:
            if chunked and left[v] > 0:
                left[v] -= chunks.get(v, 0)
                if left[v] > 0:  # prefill not complete: no token yet
                    still.append(v)
                    continue
            gen[v] += 1
            if math.isnan(self.first_token_s[v]):
                self.first_token_s[v] = t
            else:
                gap = t - self.last_token_s[v]
                self.tbt_sum[v] += gap
                self.tbt_sq[v] += gap * gap
                if gap > self.tbt_max[v]:
                    self.tbt_max[v] = gap
            self.last_token_s[v] = t
            if gen[v] >= d[v]:
                kv -= p[v] + gen[v]
                self.finish_s[v] = t
                self.n_done += 1
                ins.load_tokens -= p[v] + self.pred[v]
                ins.n_on -= 1
                self.completed_log.append(v)
            else:
                still.append(v)
        ins.running = still
        ins.admitted = []
        ins.chunks = {}
        ins.kv_used = kv
        self._start(m, t)

    def _run_instances_until(self, t: float) -> None:
        for m, ins in enumerate(self.inst):
            while ins.busy_until <= t + _EPS:
                self._finish(m)

    # -- router side -------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """True when every request has finished."""
        return self.n_done == len(self.p)

    @property
    def queue_length(self) -> int:
        """Requests in the router queue."""
        return len(self.queue)

    def records(self) -> dict[str, np.ndarray]:
        """Per-request records (workload order) and per-instance counters, as arrays:
        ``arrival_s``, ``dispatch_s``, ``admit_s``, ``first_token_s``, ``finish_s``,
        ``tbt_sum_s``, ``tbt_max_s`` (s), ``tbt_sq_s2`` (s²), ``generated_tokens``,
        ``preempted``, ``recomputed_tokens`` (KV tokens preemptions discarded), ``swaps``
        (preemptions by swapping), ``instance``;
        ``peak_kv_tokens``, ``iterations`` per instance."""
        f = np.array
        return {"arrival_s": f(self.arrival, dtype=float), "dispatch_s": f(self.dispatch_s),
                "admit_s": f(self.admit_s), "first_token_s": f(self.first_token_s),
                "finish_s": f(self.finish_s), "tbt_sum_s": f(self.tbt_sum),
                "tbt_max_s": f(self.tbt_max), "tbt_sq_s2": f(self.tbt_sq),
                "generated_tokens": f(self.gen, dtype=np.int64),
                "preempted": f(self.preempted, dtype=np.int64),
                "recomputed_tokens": f(self.recomputed, dtype=np.int64),
                "swaps": f(self.swaps, dtype=np.int64),
                "instance": f(self.instance_of, dtype=np.int64),
                "peak_kv_tokens": f([i.peak_kv for i in self.inst], dtype=np.int64),
                "iterations": f([i.n_iter for i in self.inst], dtype=np.int64)}

    def advance(self) -> bool:
        """Move to the next decision epoch with a non-empty router queue (s); run the instances
        up to it. When no request is left to route, run the instances to the end and return
        False."""
        n = len(self.p)
        for m, ins in enumerate(self.inst):  # requests routed at the last epoch start together
            if ins.busy_until == math.inf and ins.waiting:
                self._start(m, self.now)
        if not self.queue:
            if self.next_arrival >= n:
                for m, ins in enumerate(self.inst):
                    while ins.busy_until < math.inf:
                        self._finish(m)
                return False
            k_arr = math.ceil(self.arrival[self.next_arrival] / self.cfg.epoch_s - 1e-9)
            self.k = max(self.k + 1, k_arr)
        else:
            self.k += 1
        self.now = t = self.k * self.cfg.epoch_s
        self._run_instances_until(t)
        while self.next_arrival < n and self.arrival[self.next_arrival] <= t + _EPS:
            self.queue.append(self.next_arrival)
            self.next_arrival += 1
        return True

    def dispatch(self, pos: int, m: int) -> int:
        """Route the request at router-queue position ``pos`` to instance ``m``; return its id.

        An idle instance starts its next iteration at the next :meth:`advance`, so requests routed
        in one epoch are batched together."""
        if not 0 <= m < self.cfg.n_instances:
            raise ParameterError(f"instance {m} out of range [0, {self.cfg.n_instances})")
        v = self.queue[pos]
        del self.queue[pos]
        ins = self.inst[m]
        self.dispatch_s[v] = self.now
        self.instance_of[v] = m
        ins.waiting.append(v)
        ins.wait_tokens += self.p[v]
        ins.load_tokens += self.p[v] + self.pred[v]
        ins.n_on += 1
        return v

    def _admission_order(self, ins: _Instance) -> list[int]:
        """The waiting requests of an instance in the order its batcher tries them: FCFS as
        queued, else preempted requests (as queued), then fresh ones by :func:`admission_key`."""
        adm = self.cfg.admission
        if adm is Admission.FCFS:
            return list(ins.waiting)
        p, pred, pre = self.p, self.pred, self.preempted
        return ([v for v in ins.waiting if pre[v] > 0]
                + sorted((v for v in ins.waiting if pre[v] == 0),
                         key=lambda v: admission_key(adm, p[v], pred[v], v)))

    def view(self) -> InstanceView:
        """The router's view at the current epoch."""
        ins = self.inst
        q = list(self.queue)[: self.queue_view]
        pred, gen = self.pred, self.gen
        return InstanceView(
            time_s=self.now,
            n_running=np.array([len(i.running) + len(i.admitted) for i in ins]),
            n_waiting=np.array([len(i.waiting) + len(i.swapped) for i in ins]),
            kv_used=np.array([i.kv_used for i in ins]),
            kv_committed=np.array([i.kv_used + i.wait_tokens for i in ins]),
            load_tokens=np.array([i.load_tokens for i in ins]),
            waiting_prefill_tokens=np.array([i.wait_tokens for i in ins]),
            queue_prompt=np.array([self.p[v] for v in q], dtype=np.int64),
            queue_output_pred=np.array([self.pred[v] for v in q], dtype=np.int64),
            queue_wait_s=np.array([self.now - self.arrival[v] for v in q]),
            queue_length=len(self.queue),
            config=self.cfg,
            instance_requests=tuple(np.array(i.running + i.admitted + self._admission_order(i)
                                             + list(i.swapped), dtype=np.int64) for i in ins),
            earliest_completion_s=min(
                (min(max(pred[v] - gen[v], 1) for v in i.running)
                 * self.cfg.timing.iteration_time((), len(i.running), i.kv_used)
                 for i in ins if i.running), default=math.inf),
            request_prompt=self._prompt_a, request_pred=self._pred_a,
        )
