"""How stale the root routers' view is: the read time of every probed workload, and its age.

Today's idealised probe (no :class:`~._scenario.Probing`): round k at t_k (every
``probe_period_s``) gives source i the workload N_j(t_k − τ_ij) of every cell j — what a probe
sent at t_k − 2τ_ij and answered at t_k − τ_ij reports (THEORY §3). With a ``Probing`` model
(DLB §3.1; defaults [R] in :class:`~._scenario.Probing`) the instant read is

    u_ij(k) = A_j(t_k − τ_ij − S·[k mod R ≠ 0] − J·U_{k mod M, i, j})
    q_ij(k) = max(q_ij(k − 1), u_ij(k))

* R root replicas take turns: round k is made by replica k mod R; the source's router state is
  one replica's, which learns a peer's round S = ``share_delay_s`` late;
* asynchronous probes: an answer is up to J = ``jitter_s`` older than the round, U uniform on
  [0, 1) from a table of M = :data:`JITTER_ROUNDS` rounds drawn from the run's seed [R];
* leaf caches: A_j(u) = φ_j + L·⌊(u − φ_j)/L⌋, the cell's RIF as last aggregated on the grid of
  period L = ``leaf_cache_period_s`` and phase φ_j ~ U[0, L) (asynchronous across cells);
* the max: a router keeps the newest answer it holds (a late, older answer does not replace a
  newer one), which also keeps every read time non-decreasing (the engines' history cursors).

Both engines compute u and q with the same floating-point operations in the same order (the
compiled engine in :func:`~._kernels_routers.probe_workloads`, the reference in
:class:`~._probes.Probes`), from the arrays of :func:`stale_tables`.

**probe_age_s** (:func:`probe_ages`): a request of source i arriving at t is routed on the view
of the last round k before it; the age of the information it acts on is t − mean_j q_ij(k)
over source i's admissible cells j (s). Without a probing model and with Poisson arrivals that
is mean_j τ_ij + (t − t_k), whose mean is mean_j τ_ij + P/2 (the time since the last round is
uniform on [0, P)) and whose p90 is mean_j τ_ij + 0.9 P. It depends only on the scenario, the
seed and the arrival times, so it is computed after the run, off the engines' hot loops.
"""

from __future__ import annotations

import math

import numpy as np

from ..stats import percentile
from ._kernels_routers import read_time  # u_ij(k): one definition, both engines call it
from ._scenario import Scenario

__all__ = ["JITTER_ROUNDS", "stale_tables", "stale_scalars", "read_time", "probe_ages",
           "age_summary"]

#: rounds in the table of jitter draws (reused cyclically) [R]: a prime, so the cycle does not
#: line up with the replicas' turns; at 10 ms it repeats every ≈10 s.
JITTER_ROUNDS = 1009
#: most floats in the jitter table: a large network keeps fewer rounds (n² floats each).
JITTER_TABLE_FLOATS = 4_000_000
#: rounds processed at once by :func:`probe_ages` (memory: this × cells floats per source).
_CHUNK = 1 << 18


def stale_scalars(sc: Scenario) -> tuple[float, float, int]:
    """(share delay S s, leaf cache period L s, root replicas R) of the scenario's probing
    model; (0, 0, 1) without one (the idealised probe)."""
    pr = sc.probing
    if pr is None:
        return 0.0, 0.0, 1
    return float(pr.share_delay_s), float(pr.leaf_cache_period_s), int(pr.root_replicas)


def stale_tables(sc: Scenario, seq: np.random.SeedSequence) -> np.ndarray:
    """The float array both engines read: ``[0]`` the last read times q (n, n, start −inf),
    ``[1, 0]`` the leaf phases φ_j (s), ``[2:]`` the jitter table J·U (M, n, n, s); M = 1 and
    zeros without jitter; M = :data:`JITTER_ROUNDS`, fewer for a network of more than ≈60 cells
    (at most :data:`JITTER_TABLE_FLOATS` floats). Drawn from ``seq`` (the run's probing
    stream)."""
    n = sc.network.n
    pr = sc.probing
    jit = pr.jitter(sc.probe_period_s) if pr is not None else 0.0
    M = max(1, min(JITTER_ROUNDS, JITTER_TABLE_FLOATS // max(n * n, 1))) if jit > 0 else 1
    out = np.zeros((2 + M, n, n))
    out[0] = -np.inf
    if pr is None:
        return out
    rng = np.random.default_rng(seq)
    out[1, 0] = rng.uniform(0.0, 1.0, size=n) * pr.leaf_cache_period_s
    if jit > 0:
        out[2:] = jit * rng.uniform(0.0, 1.0, size=(M, n, n))
    return out


def _round_times(delta: float, T: float) -> np.ndarray:
    """t_0 = 0, t_k = t_{k−1} + δ (the engines' repeated addition) while t_k < T."""
    K = max(1, math.ceil(T / delta) + 1)
    t = np.cumsum(np.concatenate([[0.0], np.full(K, delta)]))
    return t[t < T]


#: the last call of :func:`probe_ages` (its inputs held, so compared by identity, and its
#: answer): every policy of a sweep cell runs on the same scenario, seed and arrivals.
_LAST: list = []


def probe_ages(sc: Scenario, seq: np.random.SeedSequence, arrival_s: np.ndarray,
               source: np.ndarray, T: float) -> np.ndarray:
    """The age (s) of the probed workloads each request is routed on (module docstring), per
    request in workload order; NaN for a source without admissible cells. The same inputs
    (the same objects) as the last call return its answer again (a copy)."""
    key = (sc, arrival_s, source, float(T), tuple(seq.entropy if np.ndim(seq.entropy) else
                                                 [seq.entropy]), tuple(seq.spawn_key))
    if _LAST and all(a is b if isinstance(a, np.ndarray | Scenario) else a == b
                     for a, b in zip(_LAST[0], key)):
        return _LAST[1].copy()
    ages = _probe_ages(sc, seq, arrival_s, source, T)
    _LAST[:] = [key, ages]
    return ages.copy()


def _probe_ages(sc: Scenario, seq: np.random.SeedSequence, arrival_s: np.ndarray,
                source: np.ndarray, T: float) -> np.ndarray:
    """:func:`probe_ages`, computed."""
    arrival_s = np.asarray(arrival_s, dtype=float)
    source = np.asarray(source, dtype=np.int64)
    ages = np.full(arrival_s.shape, np.nan)
    if not arrival_s.size:
        return ages
    tab = stale_tables(sc, seq)
    S, L, R = stale_scalars(sc)
    jit, phase = tab[2:], tab[1, 0]
    M = jit.shape[0]
    t_k = _round_times(float(sc.probe_period_s), float(T))
    K = t_k.size
    ks = np.arange(K)
    extra = np.where(ks % R != 0, S, 0.0)
    k_of = np.maximum(np.searchsorted(t_k, arrival_s, side="left") - 1, 0)
    tau, mask = sc.network.delays, sc.network.adjacency
    for i in np.unique(source):
        js = np.flatnonzero(mask[i])
        if not js.size:
            continue
        sel = source == i
        if sc.probing is None:  # q_ij(k) = t_k − τ_ij, increasing in k: no max to take
            ages[sel] = arrival_s[sel] - (t_k[k_of[sel]] - tau[i, js].mean())
            continue
        jit_i = jit[:, i, js]  # (M, cells): this source's rows of the table
        qbar = np.empty(K)
        carry = np.full(js.size, -np.inf)
        for a in range(0, K, _CHUNK):
            b = min(K, a + _CHUNK)
            u = t_k[a:b, None] - tau[i, js][None, :]
            u = u - extra[a:b, None]  # − 0.0 on the router's own rounds: u unchanged
            u = u - jit_i[ks[a:b] % M]
            if L > 0.0:
                ph = phase[js][None, :]
                u = ph + L * np.floor((u - ph) / L)
            q = np.maximum.accumulate(np.vstack([carry[None, :], u]), axis=0)[1:]
            carry = q[-1]
            qbar[a:b] = q.mean(axis=1)
        ages[sel] = arrival_s[sel] - qbar[k_of[sel]]
    return ages


def age_summary(ages: np.ndarray) -> dict[str, float | None]:
    """``probe_age_s`` of the JSON: mean and p90 of the per-request ages (s; None if none)."""
    a = np.asarray(ages, dtype=float)
    a = a[np.isfinite(a)]
    if not a.size:
        return {"mean": None, "p90": None}
    return {"mean": float(a.mean()), "p90": percentile(a, 90.0)}
