"""The discrete-event core: a plain ``heapq`` loop over cells, servers, probes and routers.

Model (THEORY §1, §3, §11.1):

* Requests arrive at their source cell's root router (pre-generated, :mod:`._arrivals`); the
  router picks a cell j (residency checked on every request) and the request reaches j after the
  one-way delay τ_ij; its response returns after another τ_ij. End-to-end latency = 2τ_ij +
  queueing + serving.
* A leaf router sends it to one of the cell's online servers: power of two choices on outstanding
  tokens (or requests on ``mmc`` servers), or round robin.
* Servers: ``mmc`` — c slots, exponential service of mean ``mean_service_s``; ``appendix_b`` —
  one prefill engine (P·t_p s) then a decode slot (D·t_d s) out of 2 × 4; ``rate`` — the cell
  completes requests at rate μ_j(N_j) of its service model (fluid-limit validation). A server
  with ``queue_limit`` requests waiting rejects the next one: an overflow error.
* Leaves keep an error EMA that probes carry (error aversion, DLB §3.4); with ``estimation`` the
  cells refit ℓ(N) on a sliding window (DLB §3.3), otherwise routers see the declared models
  rescaled to the online servers; with ``affinity`` a request served in the cell of its
  session's previous request has its prefill cut by ``prefill_saving`` (DLB §3.5).
* Probes: every ``probe_period_s`` (one synchronised round for all sources [R]) the root router of
  each source reads N_j(t − τ_ij) for every cell j — exactly what a probe sent at t − 2τ_ij and
  answered at t − τ_ij reports (stale by one one-way delay, THEORY §3) — and the router observes
  the round (``observe_round`` if it has one, else ``observe`` per source).
* Outages take servers offline for new requests; they finish the work they hold [R].
"""

from __future__ import annotations

import bisect
import heapq
import math
import time as _time
from collections import deque
from typing import Any

import numpy as np

from ..errors import ModelError, SolverError, TopologyError
from ..models import ModelBank
from ..routers import RouterView
from ..routers._estimation import fit_latency_model, perturb_model, scale_to_replicas
from ._arrivals import Arrivals, generate_arrivals, seed_streams
from ._result import SimResult
from ._scenario import Scenario

__all__ = ["simulate", "DEFAULT_SERIES_POINTS"]

#: number of points of the sampled workload series when no period is given.
DEFAULT_SERIES_POINTS = 400
#: weight of the newest outcome in each leaf's error EMA (DLB §3.4) [R].
ERROR_EMA_ALPHA = 0.02

_ARR, _MMC_DONE, _PRE_DONE, _DEC_DONE, _TICK, _OUTAGE, _RECORD, _FIT, _RATE_DONE = range(9)


class _Uniforms:
    """Buffered uniform draws from a seeded Generator (one numpy call per 4096 draws)."""

    def __init__(self, seq: np.random.SeedSequence) -> None:
        self._rng = np.random.default_rng(seq)
        self._buf: list[float] = []

    def __call__(self) -> float:
        if not self._buf:
            self._buf = self._rng.random(4096).tolist()[::-1]
        return self._buf.pop()


def simulate(scenario: Scenario, router: Any, *, duration_s: float, seed: int,
             arrivals: Arrivals | None = None, policy: str | None = None,
             record_period_s: float | None = None) -> SimResult:
    """Simulate ``router`` on ``scenario`` for ``duration_s`` seconds.

    Args:
        scenario: cells, servers, delays, request sizes, bursts and outages.
        router: a router config from :mod:`lbtheory.routers` (``init``/``observe``/``route``).
        duration_s: horizon (s); arrivals in [0, duration).
        seed: seeds arrivals (shared by every policy), the router's and the leaf's draws.
        arrivals: pre-generated arrivals (default: ``generate_arrivals(scenario, duration, seed)``).
        policy: name recorded in the result (default ``router.name``).
        record_period_s: sampling period of the workload series (default duration/400).

    Returns:
        A :class:`SimResult`; same inputs ⇒ bit-identical result (except ``wall_seconds``).

    Raises:
        DataFormatError: a burst or outage outside the horizon; TopologyError: a router that
        breaks residency; SolverError: a broken conservation invariant (a simulator bug).
    """
    if not (np.isfinite(duration_s) and duration_s > 0):
        raise TopologyError(f"duration_s: expected a positive number of seconds, "
                            f"got {duration_s!r}")
    scenario.check_horizon(duration_s)
    wall0 = _time.perf_counter()
    if arrivals is None:
        arrivals = generate_arrivals(scenario, duration_s, seed)
    streams = seed_streams(seed)
    core = _Core(scenario, router, duration_s, streams, arrivals,
                 record_period_s or duration_s / DEFAULT_SERIES_POINTS)
    core.run()
    return core.result(policy or getattr(router, "name", type(router).__name__), seed,
                       _time.perf_counter() - wall0)


class _Core:
    """State of one run (kept in plain Python lists for speed)."""

    def __init__(self, sc: Scenario, router: Any, T: float, streams: list, arr: Arrivals,
                 record_period: float) -> None:
        net = sc.network
        self.sc, self.router, self.T, self.arr = sc, router, float(T), arr
        self.n = n = net.n
        self.rng_router = np.random.default_rng(streams[1])
        self.leaf_u = _Uniforms(streams[2])
        self.router_state = router.init(int(streams[1].generate_state(1)[0]))
        self.mask = net.adjacency
        self.mask_l = net.adjacency.tolist()
        self.delay_l = net.delays.tolist()
        self.k = [c.replicas for c in net.cells]
        self.online = list(self.k)
        self.base = np.concatenate([[0], np.cumsum(self.k)]).astype(int).tolist()
        self.cell_of = [j for j in range(n) for _ in range(self.k[j])]
        S = self.base[-1]
        spec = sc.servers
        self.kind_mmc = [s.kind == "mmc" for s in spec]
        self.kind_rate = [s.kind == "rate" for s in spec]
        self.rate_q: list[deque] = [deque() for _ in range(n)]
        self.rate_ver = [0] * n
        self.true_models = net.services
        self.slots = [s.slots if s.kind == "mmc" else s.decode_slots for s in spec]
        self.limit = [s.queue_limit for s in spec]
        self.mean_s = [s.mean_service_s for s in spec]
        self.tp = [s.prefill_s_per_token for s in spec]
        self.td = [s.decode_s_per_token for s in spec]
        self.busy = [0] * S          # busy slots (mmc) / busy decode slots (appendix_b)
        self.pre_busy = [False] * S  # prefill engine busy (appendix_b)
        self.q: list[deque] = [deque() for _ in range(S)]   # waiting: mmc / prefill queue
        self.dq: list[deque] = [deque() for _ in range(S)]  # waiting for a decode slot
        self.load = [0.0] * S        # outstanding tokens (appendix_b) / requests (mmc)
        self.rr_next = [0] * n
        self.N = [0] * n
        self.hist_t: list[list[float]] = [[0.0] for _ in range(n)]
        self.hist_n: list[list[int]] = [[0] for _ in range(n)]
        R = len(arr)
        # per-request records as Python lists (numpy scalar indexing costs ~10× a list's in the
        # event loop); result() turns them into arrays
        self.P = arr.prompt_tokens.tolist()
        self.D = arr.output_tokens.tolist()
        self.U = arr.unit_work.tolist()
        self.dest = [-1] * R
        self.t_cell = [math.nan] * R
        self.t_done = [math.nan] * R
        self.wait = [0.0] * R
        self.t_mark = [0.0] * R       # prefill end (appendix_b)
        self.status = [0] * R         # 0 pending, 1 done, 2 error
        self.busy_pre = [0.0] * n    # prefill busy seconds (within the horizon)
        self.busy_slot = [0.0] * n   # slot busy seconds
        self.routed = [[0] * n for _ in range(n)]
        self.cell_errors = [0] * n
        self.err_ema = [0.0] * n
        self.completed = self.errors = self.on_wire = self.events = 0
        self.heap: list = []
        self.seq = 0
        self.models = net.models
        self.est = sc.estimation
        self.fitted = list(net.services)     # unperturbed fits (the priors of the next fit)
        self.n_arr = [0.0] * R
        self.samples = [deque(maxlen=self.est.window) for _ in range(n)] if self.est else []
        self.noise = [1.0] * n
        if self.est is not None:
            xi = np.random.default_rng(streams[3]).uniform(-1.0, 1.0, size=n)
            self.noise = (1.0 + self.est.noise_eps * xi).tolist()
            self._update_models()
        cap_server = sc.server_rates()
        self.cap_server_a = np.asarray(cap_server, dtype=float)
        self.delays = net.delays
        self.lam = net.arrival_rates
        self.views: list[RouterView | None] = [None] * n
        self._online_key: list[int] | None = None
        self._online_a = self._cap_a = np.zeros(n)
        self.session = arr.session.tolist() if arr.session is not None else None
        self.last_cell: dict[int, int] = {}
        self.cached = [False] * R
        self.saving = sc.affinity.prefill_saving if sc.affinity is not None else 0.0
        self.cache_hits = 0
        self.sources = sorted({int(s) for s in np.unique(arr.source)}
                              | {i for i in range(n) if self.lam[i] > 0})
        self.tau_max = float(net.delays.max()) if n else 0.0
        self.record_period = float(record_period)
        self.series_t: list[float] = []
        self.series_N: list[list[int]] = []

    # ------------------------------------------------------------------ helpers
    def push(self, t: float, kind: int, a: int, b: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, a, b))

    def _set_N(self, j: int, t: float, delta: int) -> None:
        self.N[j] += delta
        ht = self.hist_t[j]
        if ht[-1] == t:
            self.hist_n[j][-1] = self.N[j]
        else:
            ht.append(t)
            self.hist_n[j].append(self.N[j])

    def _probed_matrix(self, t: float) -> np.ndarray:
        """W[i, j] = N_j(t − τ_ij) for the sources i (other rows 0): what source i's probe of
        cell j reports at time t."""
        n, bis = self.n, bisect.bisect_right
        hist_t, hist_n = self.hist_t, self.hist_n
        W = [[0] * n for _ in range(n)]
        for i in self.sources:
            d, row = self.delay_l[i], W[i]
            for j in range(n):
                k = bis(hist_t[j], t - d[j]) - 1
                if k >= 0:
                    row[j] = hist_n[j][k]
        return np.array(W, dtype=float)

    def _prune(self, t: float) -> None:
        cutoff = t - self.tau_max - 1e-9
        for j in range(self.n):
            ht = self.hist_t[j]
            idx = bisect.bisect_right(ht, cutoff) - 1
            if idx > 0:
                del ht[:idx]
                del self.hist_n[j][:idx]

    def _probe_round(self, t: float) -> None:
        """Every source reads N_j(t − τ_ij) (its probes) and the router observes the round."""
        if self._online_key != self.online:  # outages change it; keep the arrays otherwise
            self._online_key = list(self.online)
            self._online_a = np.array(self.online, dtype=float)
            self._cap_a = self._online_a * self.cap_server_a
        views: list[RouterView | None] = [None] * self.n
        if not self.sources:  # no cell has arrivals: nothing to route, nothing to observe
            self.views = views
            return
        W = self._probed_matrix(t)
        proto = RouterView(time=t, workload=W[self.sources[0]], replicas=self._online_a,
                           delays=self.delays, mask=self.mask, models=self.models,
                           capacity=self._cap_a, arrival_rates=self.lam,
                           error_rate=np.array(self.err_ema))
        fields = proto.__dict__
        for i in self.sources:
            # the same view with source i's workload row: a frozen dataclass's fields live in
            # __dict__, so this is RouterView(**fields, workload=W[i]) without __init__'s cost
            v = object.__new__(RouterView)
            v.__dict__.update(fields)
            v.__dict__["workload"] = W[i]
            views[i] = v
        self.views = views
        observe_round = getattr(self.router, "observe_round", None)
        if observe_round is not None:
            self.router_state = observe_round(self.router_state, views)
        else:
            for i in self.sources:
                self.router_state = self.router.observe(self.router_state, views[i], i)

    # ------------------------------------------------------------------ servers
    def _leaf(self, j: int) -> int:
        m = self.online[j]
        b = self.base[j]
        if m == 1:
            return b
        if self.sc.leaf_policy == "rr":
            s = self.rr_next[j] % m
            self.rr_next[j] = s + 1
            return b + s
        u = self.leaf_u
        x = int(u() * m)
        y = int(u() * (m - 1))
        if y >= x:
            y += 1
        sx, sy = b + x, b + y
        return sy if self.load[sy] < self.load[sx] else sx

    def _arrive_cell(self, r: int, j: int, t: float) -> None:
        self.on_wire -= 1
        self.t_cell[r] = t
        if self.kind_rate[j]:
            self.rate_q[j].append(r)
            self._set_N(j, t, +1)
            self.n_arr[r] = self.N[j]
            self._rate_schedule(j, t)
            return
        s = self._leaf(j)
        lim = self.limit[j]
        if self.kind_mmc[j]:
            if self.busy[s] < self.slots[j]:
                self._start_mmc(r, s, j, t)
            elif lim is not None and len(self.q[s]) >= lim:
                self._error(r, j)
                return
            else:
                self.q[s].append(r)
            self.load[s] += 1.0
        else:
            if lim is not None and len(self.q[s]) + len(self.dq[s]) >= lim and \
                    (self.pre_busy[s]):
                self._error(r, j)
                return
            if not self.pre_busy[s]:
                self._start_prefill(r, s, j, t)
            else:
                self.q[s].append(r)
            self.load[s] += self.P[r] + self.D[r]
        self._set_N(j, t, +1)
        self.n_arr[r] = self.N[j]

    def _error(self, r: int, j: int) -> None:
        self.status[r] = 2
        self.errors += 1
        self.cell_errors[j] += 1
        self.err_ema[j] += ERROR_EMA_ALPHA * (1.0 - self.err_ema[j])

    def _start_prefill(self, r: int, s: int, j: int, t: float) -> None:
        self.pre_busy[s] = True
        self.wait[r] += t - self.t_cell[r]
        dur = self.P[r] * self.tp[j]
        if self.cached[r]:
            dur *= 1.0 - self.saving  # prefix cache: the session's last request ran here
        self.busy_pre[j] += max(0.0, min(t + dur, self.T) - t)
        self.push(t + dur, _PRE_DONE, r, s)

    def _start_decode(self, r: int, s: int, j: int, t: float) -> None:
        self.busy[s] += 1
        self.wait[r] += t - self.t_mark[r]
        dur = self.D[r] * self.td[j]
        self.busy_slot[j] += max(0.0, min(t + dur, self.T) - t)
        self.push(t + dur, _DEC_DONE, r, s)

    def _finish(self, r: int, s: int, j: int, t: float) -> None:
        self.status[r] = 1
        self.t_done[r] = t
        self.completed += 1
        self._set_N(j, t, -1)
        self.err_ema[j] -= ERROR_EMA_ALPHA * self.err_ema[j]
        if self.est is not None:
            self.samples[j].append((self.n_arr[r], t - self.t_cell[r]))

    def _refit(self) -> None:
        """Each cell refits ℓ(N) on its window (DLB §3.3); routers see the (perturbed) fits."""
        est = self.est
        for j in range(self.n):
            if len(self.samples[j]) < est.min_samples:
                continue
            data = np.array(self.samples[j])
            try:
                self.fitted[j] = fit_latency_model(data[:, 0], data[:, 1], self.fitted[j],
                                                   family=est.family)
            except ModelError:
                continue  # keep the previous model
        self._update_models()

    def _update_models(self) -> None:
        """The models routers see: the fits (which learn outages from data) × noise; without
        estimation, the declared models rescaled to the online servers [R]."""
        if self.est is None:
            models = [scale_to_replicas(m, k, o) for m, k, o in
                      zip(self.true_models, self.k, self.online)]
        else:
            models = [perturb_model(m, f) for m, f in zip(self.fitted, self.noise)]
        self.models = ModelBank(models)

    def _start_mmc(self, r: int, s: int, j: int, t: float) -> None:
        self.busy[s] += 1
        self.wait[r] = t - self.t_cell[r]
        dur = self.U[r] * self.mean_s[j]
        self.busy_slot[j] += max(0.0, min(t + dur, self.T) - t)
        self.push(t + dur, _MMC_DONE, r, s)

    def _mmc_done(self, r: int, s: int, t: float) -> None:
        j = self.cell_of[s]
        self.busy[s] -= 1
        self.load[s] -= 1.0
        self._finish(r, s, j, t)
        if self.q[s]:
            self._start_mmc(self.q[s].popleft(), s, j, t)

    def _rate_schedule(self, j: int, t: float) -> None:
        """Next completion of a "rate" cell: Exp(μ_j(N_j)) (memoryless, so resampling at every
        change of N_j is exact; superseded events are skipped by their version)."""
        self.rate_ver[j] += 1
        if self.N[j] > 0:
            mu = float(self.true_models[j].rate(float(self.N[j])))
            self.push(t - np.log1p(-self.leaf_u()) / mu, _RATE_DONE, j, self.rate_ver[j])

    def _rate_done(self, j: int, ver: int, t: float) -> None:
        if ver != self.rate_ver[j]:
            return
        r = self.rate_q[j].popleft()
        self.busy_slot[j] += 1.0  # completions (utilisation = completions / (μ̄ T))
        self._finish(r, -1, j, t)
        self._rate_schedule(j, t)

    def _prefill_done(self, r: int, s: int, t: float) -> None:
        j = self.cell_of[s]
        self.pre_busy[s] = False
        self.t_mark[r] = t
        if self.busy[s] < self.slots[j]:
            self._start_decode(r, s, j, t)
        else:
            self.dq[s].append(r)
        if self.q[s]:
            self._start_prefill(self.q[s].popleft(), s, j, t)

    def _decode_done(self, r: int, s: int, t: float) -> None:
        j = self.cell_of[s]
        self.busy[s] -= 1
        self.load[s] -= self.P[r] + self.D[r]
        self._finish(r, s, j, t)
        if self.dq[s]:
            self._start_decode(self.dq[s].popleft(), s, j, t)

    # ------------------------------------------------------------------ loop
    def run(self) -> None:
        T, sc = self.T, self.sc
        delta = sc.probe_period_s
        self._probe_round(0.0)
        self.push(delta, _TICK, 0, 0)
        for o in sc.outages:
            self.push(o.start_s, _OUTAGE, o.cell, o.replicas)
            self.push(o.end_s, _OUTAGE, o.cell, self.k[o.cell])
        self.push(0.0, _RECORD, 0, 0)
        if self.est is not None:
            self.push(self.est.period_s, _FIT, 0, 0)
        at = self.arr.time_s.tolist()
        asrc = self.arr.source.tolist()
        R, nxt = len(at), 0
        heap = self.heap
        route, rng = self.router.route, self.rng_router
        route_session = getattr(self.router, "route_session", None)
        sessions = self.session
        handlers = {_MMC_DONE: self._mmc_done, _PRE_DONE: self._prefill_done,
                    _RATE_DONE: self._rate_done,
                    _DEC_DONE: self._decode_done}
        ticks = 0
        while True:
            t_arr = at[nxt] if nxt < R else np.inf
            t_ev = heap[0][0] if heap else np.inf
            if t_arr <= t_ev:
                if t_arr >= T:
                    break
                r, i = nxt, asrc[nxt]
                nxt += 1
                self.events += 1
                if sessions is None:
                    j, self.router_state = route(self.router_state, self.views[i], i, rng)
                else:
                    sess = sessions[r]
                    if route_session is not None:
                        j, self.router_state = route_session(self.router_state, self.views[i],
                                                             i, rng, sess)
                    else:
                        j, self.router_state = route(self.router_state, self.views[i], i, rng)
                    if self.last_cell.get(sess) == j:
                        self.cached[r] = True
                        self.cache_hits += 1
                    self.last_cell[sess] = j
                if not self.mask_l[i][j]:
                    raise TopologyError(f"router {getattr(self.router, 'name', '?')} sent a "
                                        f"request from cell {i} to cell {j}, which is not an "
                                        f"admissible arc (residency)")
                self.dest[r] = j
                self.routed[i][j] += 1
                self.on_wire += 1
                self.push(t_arr + self.delay_l[i][j], _ARR, r, j)
                continue
            if t_ev >= T:
                break
            t, _, kind, a, b = heapq.heappop(heap)
            self.events += 1
            if kind == _ARR:
                self._arrive_cell(a, b, t)
            elif kind == _TICK:
                self._probe_round(t)
                self.push(t + delta, _TICK, 0, 0)
                ticks += 1
                if ticks % 16 == 0:
                    self._prune(t)
            elif kind == _FIT:
                self._refit()
                self.push(t + self.est.period_s, _FIT, 0, 0)
            elif kind == _OUTAGE:
                self.online[a] = b
                if self.est is None and not self.kind_rate[a]:
                    self._update_models()
            elif kind == _RECORD:
                self.series_t.append(t)
                self.series_N.append(list(self.N))
                self.push(t + self.record_period, _RECORD, 0, 0)
            else:
                handlers[kind](a, b, t)
        self.requests = nxt
        in_flight = self.requests - self.completed - self.errors
        if in_flight != self.on_wire + sum(self.N):
            raise SolverError(f"simulator: conservation broken: {self.requests} arrivals, "
                              f"{self.completed} completed, {self.errors} errors, "
                              f"{self.on_wire} on the wire, {sum(self.N)} at cells",
                              solver="sim", status="conservation")

    def result(self, policy: str, seed: int, wall: float) -> SimResult:
        n, T, R = self.n, self.T, self.requests
        status = np.array(self.status[:R], dtype=np.int8)
        done = status == 1
        dest = np.array(self.dest[:R], dtype=np.int64)
        t_done = np.array(self.t_done[:R], dtype=float)
        t_cell = np.array(self.t_cell[:R], dtype=float)
        tau = self.sc.network.delays[self.arr.source[:R], np.maximum(dest, 0)]
        order = np.argsort(t_done[done], kind="stable")
        lat = (t_done - self.arr.time_s[:R] + tau)[done][order]
        # time-average workload: Σ over requests of time spent at the cell within [0, T)
        at_cell = (status != 2) & np.isfinite(t_cell)
        stay = np.minimum(np.where(done, t_done, T), T) - t_cell
        wl = np.bincount(dest[at_cell], weights=stay[at_cell], minlength=n) / T
        util = np.zeros(n)
        for j in range(n):
            k, spec = self.k[j], self.sc.servers[j]
            if self.kind_rate[j]:
                util[j] = self.busy_slot[j] / (float(self.true_models[j].max_rate) * T)
            elif self.kind_mmc[j]:
                util[j] = self.busy_slot[j] / (k * spec.slots * T)
            else:
                util[j] = max(self.busy_pre[j] / (k * T),
                              self.busy_slot[j] / (k * spec.decode_slots * T))
        return SimResult(
            policy=policy, seed=int(seed), duration_s=T, names=self.sc.network.names,
            requests=int(R), completed=int(self.completed), errors=int(self.errors),
            in_flight=int(R - self.completed - self.errors), latency_s=lat,
            wait_s=np.array(self.wait[:R], dtype=float)[done][order],
            network_s=(2.0 * tau)[done][order],
            routed=np.array(self.routed, dtype=np.int64),
            cell_errors=np.array(self.cell_errors, dtype=np.int64), utilisation=util,
            mean_workload=wl, series_t=np.array(self.series_t),
            series_workload=np.array(self.series_N, dtype=float).reshape(-1, n),
            events=int(self.events), wall_seconds=float(wall),
            models=tuple(self.fitted) if self.est is not None else self.sc.network.services,
            cache_hits=int(self.cache_hits), completion_s=t_done[done][order],
            error_s=np.sort(t_cell[status == 2]))
