"""The engine's servers: the cells' leaves (in-cell routing, error EMA), the three server kinds,
and the workload N_j(t) each cell reports to probes.

A cell's servers are all of one :class:`~lbtheory.sim.ServerKind`, implemented by one class each
(no branching on kind in the event loop: the engine calls the kind object of the cell):

* :class:`MMCServers` — c slots, exponential service of mean ``mean_service_s`` (validation);
* :class:`AppendixBServers` — one prefill engine (P·t_p s), then a decode slot (D·t_d s) out of
  ``decode_engines × slots_per_engine`` (DLB App. B);
* :class:`RateServers` — the cell is one FIFO queue completing at rate μ_j(N_j) of its service
  model (fluid-limit validation).

A server with ``queue_limit`` requests waiting rejects the next one (an overflow error).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from ..routers._baselines import round_robin_pick, two_choices
from ._records import DONE, ERROR, Event, EventQueue, Records
from ._scenario import LeafPolicy, Scenario, ServerKind

__all__ = ["Cluster", "ERROR_EMA_ALPHA", "cell_utilisation"]

#: weight of the newest outcome in each leaf's error EMA (DLB §3.4) [R].
ERROR_EMA_ALPHA = 0.02


class Uniforms:
    """Buffered uniform draws from a seeded Generator (one numpy call per 4096 draws)."""

    def __init__(self, seq: np.random.SeedSequence) -> None:
        self._rng = np.random.default_rng(seq)
        self._buf: list[float] = []

    def __call__(self) -> float:
        if not self._buf:
            self._buf = self._rng.random(4096).tolist()[::-1]
        return self._buf.pop()


class Cluster:
    """Every cell's servers and leaf: per-server state, per-cell workload history, and the
    per-kind event handlers (``arrive[j]`` and :attr:`handlers`).

    Args:
        sc: the scenario; T: horizon (s); records: the run's records; events: the clock;
        prompt, output, work: per-request token counts and service work; uniforms: the leaf's
        seeded uniform stream (shared by the p2c leaf and the rate servers, in draw order);
        on_finish: called as ``on_finish(r, j, t)`` when a request completes (estimation).
    """

    def __init__(self, sc: Scenario, T: float, records: Records, events: EventQueue,
                 prompt: list, output: list, work: list, uniforms: Uniforms,
                 on_finish: Any = None) -> None:
        net = sc.network
        self.sc, self.T, self.rec, self.ev = sc, T, records, events
        self.n = n = net.n
        self.P, self.D, self.U = prompt, output, work
        self.uniform = uniforms
        self.on_finish = on_finish
        self.k = [c.replicas for c in net.cells]
        self.online = list(self.k)
        self.base = np.concatenate([[0], np.cumsum(self.k)]).astype(int).tolist()
        self.cell_of = [j for j in range(n) for _ in range(self.k[j])]
        S = self.base[-1]
        spec = sc.servers
        self.slots = [s.slots if s.kind is ServerKind.MMC else s.decode_slots for s in spec]
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
        self.leaf_rr = sc.leaf_policy is LeafPolicy.RR
        self.err_ema = [0.0] * n
        self.saving = sc.affinity.prefill_saving if sc.affinity is not None else 0.0
        # N_j(t): current value and its history since the last prune (what probes read)
        self.N = [0] * n
        self.hist_t: list[list[float]] = [[0.0] for _ in range(n)]
        self.hist_n: list[list[int]] = [[0] for _ in range(n)]
        kinds = {ServerKind.MMC: MMCServers(self), ServerKind.APPENDIX_B: AppendixBServers(self),
                 ServerKind.RATE: RateServers(self)}
        self.kind = [kinds[s.kind] for s in spec]
        self.arrive = [k.arrive for k in self.kind]
        self.handlers = {Event.MMC_DONE: kinds[ServerKind.MMC].done,
                         Event.PREFILL_DONE: kinds[ServerKind.APPENDIX_B].prefill_done,
                         Event.DECODE_DONE: kinds[ServerKind.APPENDIX_B].decode_done,
                         Event.RATE_DONE: kinds[ServerKind.RATE].done}

    # -- the workload each cell reports ------------------------------------------------------
    def set_N(self, j: int, t: float, delta: int) -> None:
        """N_j += delta at time t (s), kept in the history probes read."""
        self.N[j] += delta
        ht = self.hist_t[j]
        if ht[-1] == t:
            self.hist_n[j][-1] = self.N[j]
        else:
            ht.append(t)
            self.hist_n[j].append(self.N[j])

    # -- the leaf of each cell ---------------------------------------------------------------
    def leaf(self, j: int) -> int:
        """The server of cell j a request goes to: round robin over its online servers, or power
        of two choices on outstanding load (ties to the first drawn) — the compiled leaf's
        decisions (:func:`~lbtheory.routers.round_robin_pick`,
        :func:`~lbtheory.routers._baselines.two_choices`)."""
        m = self.online[j]
        b = self.base[j]
        if m == 1:
            return b
        if self.leaf_rr:
            s, self.rr_next[j] = round_robin_pick(m, self.rr_next[j])
            return b + s
        u = self.uniform
        x, y = two_choices(u(), u(), m)
        sx, sy = b + x, b + y
        return sy if self.load[sy] < self.load[sx] else sx

    def reject(self, r: int, j: int) -> None:
        """Request r overflows a queue of cell j: an error, counted in the leaf's EMA."""
        rec = self.rec
        rec.status[r] = ERROR
        rec.errors += 1
        rec.cell_errors[j] += 1
        self.err_ema[j] += ERROR_EMA_ALPHA * (1.0 - self.err_ema[j])

    def finish(self, r: int, j: int, t: float) -> None:
        """Request r completes at cell j at time t (s)."""
        rec = self.rec
        rec.status[r] = DONE
        rec.t_done[r] = t
        rec.completed += 1
        self.set_N(j, t, -1)
        self.err_ema[j] -= ERROR_EMA_ALPHA * self.err_ema[j]
        if self.on_finish is not None:
            self.on_finish(r, j, t)

    def start_slot(self, r: int, s: int, j: int, t: float, since: float, dur: float,
                   done: int) -> None:
        """Request r takes a slot of server s (cell j) at t for ``dur`` s, having waited since
        ``since``; event ``done`` fires when it ends."""
        self.busy[s] += 1
        self.rec.wait[r] += t - since
        self.rec.busy_slot[j] += self.busy_until(t, dur)
        self.ev.push(t + dur, done, r, s)

    def busy_until(self, t: float, dur: float) -> float:
        """Busy seconds of a service of ``dur`` s started at t, within the horizon."""
        return max(0.0, min(t + dur, self.T) - t)

    def utilisation(self) -> np.ndarray:
        """Time-average busy fraction of each cell's bottleneck stage (nominal servers)."""
        return cell_utilisation(self.sc, self.rec.busy_pre, self.rec.busy_slot, self.T)


def cell_utilisation(sc: Scenario, busy_pre: Any, busy_slot: Any, T: float) -> np.ndarray:
    """Time-average busy fraction of each cell's bottleneck stage, nominal servers (both
    engines): mmc busy slot-seconds / (k c T); appendix_b the larger of the prefill engines'
    and the decode slots' busy fractions; rate completions / (μ̄ T)."""
    out = []
    for j, (cell, spec) in enumerate(zip(sc.network.cells, sc.servers)):
        k = cell.replicas
        if spec.kind is ServerKind.MMC:
            out.append(busy_slot[j] / (k * spec.slots * T))
        elif spec.kind is ServerKind.RATE:
            out.append(busy_slot[j] / (float(cell.service.max_rate) * T))
        else:
            out.append(max(busy_pre[j] / (k * T), busy_slot[j] / (k * spec.decode_slots * T)))
    return np.array(out, dtype=float)


class MMCServers:
    """``mmc`` cells: c slots per server, exponential service (work × mean_service_s)."""

    def __init__(self, cl: Cluster) -> None:
        self.cl = cl

    def arrive(self, r: int, j: int, t: float) -> None:
        """Request r reaches cell j at time t."""
        cl = self.cl
        s = cl.leaf(j)
        lim = cl.limit[j]
        if cl.busy[s] < cl.slots[j]:
            self._start(r, s, j, t)
        elif lim is not None and len(cl.q[s]) >= lim:
            cl.reject(r, j)
            return
        else:
            cl.q[s].append(r)
        cl.load[s] += 1.0
        cl.set_N(j, t, +1)
        cl.rec.n_arr[r] = cl.N[j]

    def _start(self, r: int, s: int, j: int, t: float) -> None:
        cl = self.cl
        cl.start_slot(r, s, j, t, cl.rec.t_cell[r], cl.U[r] * cl.mean_s[j], Event.MMC_DONE)

    def done(self, r: int, s: int, t: float) -> None:
        """A service of request r on server s ends."""
        cl = self.cl
        j = cl.cell_of[s]
        cl.busy[s] -= 1
        cl.load[s] -= 1.0
        cl.finish(r, j, t)
        if cl.q[s]:
            self._start(cl.q[s].popleft(), s, j, t)



class AppendixBServers:
    """``appendix_b`` cells: a prefill engine, then a decode slot (DLB App. B)."""

    def __init__(self, cl: Cluster) -> None:
        self.cl = cl

    def arrive(self, r: int, j: int, t: float) -> None:
        """Request r reaches cell j at time t."""
        cl = self.cl
        s = cl.leaf(j)
        lim = cl.limit[j]
        if lim is not None and len(cl.q[s]) + len(cl.dq[s]) >= lim and cl.pre_busy[s]:
            cl.reject(r, j)
            return
        if not cl.pre_busy[s]:
            self._start_prefill(r, s, j, t)
        else:
            cl.q[s].append(r)
        cl.load[s] += cl.P[r] + cl.D[r]
        cl.set_N(j, t, +1)
        cl.rec.n_arr[r] = cl.N[j]

    def _start_prefill(self, r: int, s: int, j: int, t: float) -> None:
        cl, rec = self.cl, self.cl.rec
        cl.pre_busy[s] = True
        rec.wait[r] += t - rec.t_cell[r]
        dur = cl.P[r] * cl.tp[j]
        if rec.cached[r]:
            dur *= 1.0 - cl.saving  # prefix cache: the session's last request ran here
        rec.busy_pre[j] += cl.busy_until(t, dur)
        cl.ev.push(t + dur, Event.PREFILL_DONE, r, s)

    def _start_decode(self, r: int, s: int, j: int, t: float) -> None:
        cl = self.cl
        cl.start_slot(r, s, j, t, cl.rec.t_mark[r], cl.D[r] * cl.td[j], Event.DECODE_DONE)

    def prefill_done(self, r: int, s: int, t: float) -> None:
        """The prefill of request r on server s ends: decode now or wait for a slot."""
        cl = self.cl
        j = cl.cell_of[s]
        cl.pre_busy[s] = False
        cl.rec.t_mark[r] = t
        if cl.busy[s] < cl.slots[j]:
            self._start_decode(r, s, j, t)
        else:
            cl.dq[s].append(r)
        if cl.q[s]:
            self._start_prefill(cl.q[s].popleft(), s, j, t)

    def decode_done(self, r: int, s: int, t: float) -> None:
        """The decode of request r on server s ends: it completes."""
        cl = self.cl
        j = cl.cell_of[s]
        cl.busy[s] -= 1
        cl.load[s] -= cl.P[r] + cl.D[r]
        cl.finish(r, j, t)
        if cl.dq[s]:
            self._start_decode(cl.dq[s].popleft(), s, j, t)



class RateServers:
    """``rate`` cells: one FIFO queue; the next completion is Exp(μ_j(N_j)) — memoryless, so
    resampling at every change of N_j is exact (superseded events are skipped by version)."""

    def __init__(self, cl: Cluster) -> None:
        self.cl = cl
        self.queue: list[deque] = [deque() for _ in range(cl.n)]
        self.version = [0] * cl.n
        self.models = cl.sc.network.services

    def arrive(self, r: int, j: int, t: float) -> None:
        """Request r joins cell j's queue at time t."""
        cl = self.cl
        self.queue[j].append(r)
        cl.set_N(j, t, +1)
        cl.rec.n_arr[r] = cl.N[j]
        self._schedule(j, t)

    def _schedule(self, j: int, t: float) -> None:
        cl = self.cl
        self.version[j] += 1
        if cl.N[j] > 0:
            mu = float(self.models[j].rate(float(cl.N[j])))
            cl.ev.push(t - np.log1p(-cl.uniform()) / mu, Event.RATE_DONE, j, self.version[j])

    def done(self, j: int, ver: int, t: float) -> None:
        """A completion of cell j (skipped if superseded)."""
        if ver != self.version[j]:
            return
        cl = self.cl
        r = self.queue[j].popleft()
        cl.rec.busy_slot[j] += 1.0  # completions (utilisation = completions / (μ̄ T))
        cl.finish(r, j, t)
        self._schedule(j, t)

