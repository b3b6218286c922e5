"""The engine's probes: what the root routers see, and the latency models behind it.

* :class:`Probes` — every ``probe_period_s`` (one synchronised round for all sources [R]) the root
  router of each source reads N_j(t − τ_ij) for every cell j — exactly what a probe sent at
  t − 2τ_ij and answered at t − τ_ij reports (stale by one one-way delay, THEORY §3) — as one
  :class:`~lbtheory.routers.CellView` per source; with a scenario's ``probing`` model (root
  replicas, leaf caches, jitter) it reads N_j at the later-stale instant of :mod:`._staleness`;
* :class:`SeenModels` — the service models routers see: with ``estimation`` each cell refits ℓ(N)
  on a sliding window of its own (N at arrival, serving latency) samples (DLB §3.3) with the
  declared model as its fixed prior (the previous fit is only the starting point), perturbed
  by the robustness noise (1 + εξ_j); otherwise the declared models rescaled to the online
  servers [R].
"""

from __future__ import annotations

import bisect
from collections import deque

import numpy as np

from ..errors import ModelError
from ..models import ModelBank, SoftplusLatency
from ..routers import CellView, CostTables, fit_latency_model, perturb_model, scale_to_replicas
from ._records import Records
from ._scenario import Scenario, ServerKind
from ._servers import Cluster
from ._staleness import read_time, stale_scalars, stale_tables

__all__ = ["Probes", "SeenModels"]


class SeenModels:
    """The model bank routers see, and its :class:`~lbtheory.routers.CostTables`.

    Args:
        sc: the scenario; cluster: its servers (online counts); noise_seq: seed of ξ_j;
        model_seq: seed of the scenario's ``model_noise`` draws (:meth:`redraw`).
    """

    def __init__(self, sc: Scenario, cluster: Cluster, noise_seq: np.random.SeedSequence,
                 model_seq: np.random.SeedSequence | None = None) -> None:
        net = sc.network
        self.cl = cluster
        self.true_models = net.services
        self.est = sc.estimation
        self.fitted = list(net.services)     # unperturbed fits (the start of the next fit)
        self.samples = [deque(maxlen=self.est.window) for _ in range(net.n)] if self.est else []
        self.noise = [1.0] * net.n
        self.bank = net.models
        self.tables = CostTables(self.bank)
        self.rate_cell = [s.kind is ServerKind.RATE for s in sc.servers]
        self.model_noise = sc.model_noise
        self.factors: list | None = None
        self.seen = tuple(net.services)  # the models routers see (after update)
        if self.model_noise is not None:
            self._noise_rng = np.random.default_rng(model_seq)
            self._draw()
            if self.est is None:
                self.update()
        if self.est is not None:
            xi = np.random.default_rng(noise_seq).uniform(-1.0, 1.0, size=net.n)
            self.noise = (1.0 + self.est.noise_eps * xi).tolist()
            self.update()

    def _draw(self) -> None:
        """New factors 1 + εξ of ``model_noise``: one per (cell, parameter), or per cell."""
        mn, n = self.model_noise, len(self.true_models)
        xi = self._noise_rng.uniform(-1.0, 1.0, size=(n, 4))
        self.factors = []
        for j, m in enumerate(self.true_models):
            k = 4 if isinstance(m, SoftplusLatency) else 2
            f = 1.0 + mn.eps * xi[j]
            self.factors.append(float(f[0]) if mn.joint else f[:k].tolist())

    def redraw(self) -> None:
        """The model noise is redrawn (``model_noise.period_s``): routers see new models."""
        self._draw()
        self.update()

    def sample(self, records: Records, r: int, j: int, t: float) -> None:
        """A request of cell j completed at t: its (N at arrival, serving latency) sample."""
        self.samples[j].append((records.n_arr[r], t - records.t_cell[r]))

    def refit(self) -> None:
        """Each cell refits ℓ(N) on its window (DLB §3.3); routers see the (perturbed) fits."""
        est = self.est
        for j in range(len(self.samples)):
            if len(self.samples[j]) < est.min_samples:
                continue
            data = np.array(self.samples[j])
            try:
                self.fitted[j] = fit_latency_model(data[:, 0], data[:, 1],
                                                   self.true_models[j], start=self.fitted[j],
                                                   family=est.family)
            except ModelError:
                continue  # keep the previous model
        self.update()

    def outage(self, j: int) -> None:
        """Cell j's online servers changed: rescale what routers see (without estimation)."""
        if self.est is None and not self.rate_cell[j]:
            self.update()

    def update(self) -> None:
        """The models routers see: the fits (which learn outages from data) × noise; without
        estimation, the declared models rescaled to the online servers [R]."""
        if self.est is None:
            models = [scale_to_replicas(m, k, o) for m, k, o in
                      zip(self.true_models, self.cl.k, self.cl.online)]
        else:
            models = [perturb_model(m, f) for m, f in zip(self.fitted, self.noise)]
        if self.factors is not None:
            models = [perturb_model(m, f) for m, f in zip(models, self.factors)]
        self.seen = tuple(models)
        self.bank = ModelBank(models)
        self.tables = CostTables(self.bank)

    def final(self, sc: Scenario) -> tuple:
        """The models to report in the result (the fits with estimation)."""
        return tuple(self.fitted) if self.est is not None else sc.network.services


class Probes:
    """Probe rounds: the per-source views of the cells' stale workloads.

    Args:
        sc: the scenario; cluster: the servers (their workload history); models: what routers
        see; sources: the cells with arrivals (others get no view).
    """

    def __init__(self, sc: Scenario, cluster: Cluster, models: SeenModels,
                 sources: list[int], stale_seq: np.random.SeedSequence | None = None) -> None:
        net = sc.network
        self.cl, self.models, self.sources = cluster, models, sources
        self.n = net.n
        self.mask = net.adjacency
        self.delays = net.delays
        self.delay_l = net.delays.tolist()
        self.lam = net.arrival_rates
        self.cap_server = np.asarray(sc.server_rates(), dtype=float)
        self.tau_max = float(net.delays.max()) if net.n else 0.0
        self.probe_period = float(sc.probe_period_s)
        self._online_key: list[int] | None = None
        self._online = self._cap = np.zeros(net.n)
        self.stale = sc.probing is not None
        self.rounds = 0
        if self.stale:
            tab = stale_tables(sc, stale_seq)
            self.S, self.L, self.R = stale_scalars(sc)
            self.q = tab[0].tolist()
            self.phase = tab[1, 0].tolist()
            self.jit = tab[2:].tolist()
            self.tau_max += sc.probing.max_extra_age(self.probe_period)

    def probed_matrix(self, t: float) -> np.ndarray:
        """W[i, j] = N_j(t − τ_ij) for the sources i (other rows 0): what source i's probe of
        cell j reports at time t."""
        n, bis = self.n, bisect.bisect_right
        hist_t, hist_n = self.cl.hist_t, self.cl.hist_n
        W = [[0] * n for _ in range(n)]
        if self.stale:
            return self._stale_matrix(t, W)
        for i in self.sources:
            d, row = self.delay_l[i], W[i]
            for j in range(n):
                k = bis(hist_t[j], t - d[j]) - 1
                if k >= 0:
                    row[j] = hist_n[j][k]
        return np.array(W, dtype=float)

    def _stale_matrix(self, t: float, W: list) -> np.ndarray:
        """:meth:`probed_matrix` with the probing model: N_j at q_ij (:mod:`._staleness`)."""
        k, n, bis = self.rounds, self.n, bisect.bisect_right
        hist_t, hist_n = self.cl.hist_t, self.cl.hist_n
        jit = self.jit[k % len(self.jit)]
        L, phase = self.L, self.phase
        share = self.S if k % self.R != 0 else 0.0
        for i in self.sources:
            d, row, q, jr = self.delay_l[i], W[i], self.q[i], jit[i]
            for j in range(n):
                u = read_time(t, d[j], share, jr[j], phase[j], L)
                if u > q[j]:
                    q[j] = u
                kk = bis(hist_t[j], q[j]) - 1
                if kk >= 0:
                    row[j] = hist_n[j][kk]
        return np.array(W, dtype=float)

    def prune(self, t: float) -> None:
        """Forget history no probe can read any more (older than t − max τ)."""
        cutoff = t - self.tau_max - 1e-9
        for j in range(self.n):
            ht = self.cl.hist_t[j]
            idx = bisect.bisect_right(ht, cutoff) - 1
            if idx > 0:
                del ht[:idx]
                del self.cl.hist_n[j][:idx]

    def views(self, t: float) -> list[CellView | None]:
        """One :class:`~lbtheory.routers.CellView` per source at time t (None elsewhere)."""
        online = self.cl.online
        if self._online_key != online:  # outages change it; keep the arrays otherwise
            self._online_key = list(online)
            self._online = np.array(online, dtype=float)
            self._cap = self._online * self.cap_server
        views: list[CellView | None] = [None] * self.n
        if not self.sources:  # no cell has arrivals: nothing to route, nothing to observe
            return views
        W = self.probed_matrix(t)
        self.rounds += 1
        m = self.models
        proto = CellView(time=t, workload=W[self.sources[0]], replicas=self._online,
                         delays=self.delays, mask=self.mask, models=m.bank,
                         capacity=self._cap, arrival_rates=self.lam,
                         error_rate=np.array(self.cl.err_ema), tables=m.tables,
                         probe_period_s=self.probe_period)
        fields = proto.__dict__
        for i in self.sources:
            # the same view with source i's row: a frozen dataclass's fields live in __dict__,
            # so this is CellView(**fields, workload=W[i], source=i) without __init__'s cost
            v = object.__new__(CellView)
            v.__dict__.update(fields)
            v.__dict__["workload"] = W[i]
            v.__dict__["source"] = i
            views[i] = v
        return views
