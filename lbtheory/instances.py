"""Named problems with known answers, and random topology generators (seeded).

Closed-form references are in THEORY §5 (equilibria), §7.5 (symmetric two-cell, spill example) and
§12 (oracle checklist).
"""

from __future__ import annotations

import numpy as np

from ._checks import Seed, as_generator, check_int
from .errors import ParameterError, renamed_keywords, warn_deprecated
from .models import MM1Latency, ServiceModel, SoftplusLatency
from .network import Arc, Cell, CellNetwork

__all__ = [
    "symmetric_two_cell",
    "spill_example",
    "mm1_pigou",
    "mm1_pigou_poa",
    "random_network",
    "full_mesh",
]


def symmetric_two_cell(*, capacity: float = 10.0, K: float = 5.0, total_rate: float = 12.0,
                       delay: float = 0.05, frontends: int = 1, replicas: int = 1) -> CellNetwork:
    """THEORY §7.5: two identical hyperbolic cells at equal one-way delay ``delay`` (s).

    With ``frontends=1`` a pure frontend cell ``f`` (no service of its own is used: it has no
    self-arc) sends ``total_rate`` req/s to cells ``c1`` and ``c2``; with ``frontends=2`` two
    frontends of ``total_rate/2`` each are equidistant from both cells. Reference numbers
    (μ̄ = 10, K = 5, Λ = 12, τ = 0.05): N* = 7.5 per cell, η_crit = 0.536158 (gradient cost).
    """
    svc = MM1Latency(capacity=capacity, K=K)
    cells = [Cell("c1", replicas, 0.0, svc), Cell("c2", replicas, 0.0, svc)]
    arcs = []
    fronts = ["f"] if frontends == 1 else [f"f{i + 1}" for i in range(frontends)]
    for f in fronts:
        cells.append(Cell(f, 1, total_rate / len(fronts), svc))
        arcs += [Arc(f, "c1", delay), Arc(f, "c2", delay)]
    return CellNetwork(cells, arcs)


def spill_example(*, rates: tuple[float, float] = (14.0, 4.0), capacity: float = 10.0,
                  K: float = 5.0, delay: float = 0.05) -> CellNetwork:
    """THEORY §7.5 "spill": two identical hyperbolic cells, local delay 0, cross delay τ.

    Frontend 1 (λ₁ > λ₂) splits, frontend 2 stays local. Reference (gradient cost):
    x*_11 = 0.642893, N* = (45.0250, 44.9750), η_crit = 0.0143024.
    """
    svc = MM1Latency(capacity=capacity, K=K)
    cells = [Cell("c1", 1, rates[0], svc), Cell("c2", 1, rates[1], svc)]
    arcs = [Arc("c1", "c1", 0.0), Arc("c1", "c2", delay), Arc("c2", "c2", 0.0),
            Arc("c2", "c1", delay)]
    return CellNetwork(cells, arcs)


def mm1_pigou(*, u: float = 1.0, r: float = 0.5, remote_capacity: float = 1e5,
              remote_K: float = 1e-5) -> CellNetwork:
    """Pigou with an M/M/1 cell and a far idle cell (THEORY §5, satisfies Assumption 1).

    The local cell (K = 1, μ̄ = u) has latency 1/(u − z); the remote cell is reached over an arc
    with round trip 1/(u − r) and has negligible serving latency ((N + remote_K)/remote_capacity).
    Demand r. PoA → ½(1 + √(u/(u − r))) as the remote serving latency → 0.
    """
    local = MM1Latency(capacity=u, K=1.0)
    remote = MM1Latency(capacity=remote_capacity, K=remote_K)
    cells = [Cell("local", 1, r, local), Cell("remote", 1, 0.0, remote)]
    arcs = [Arc("local", "local", 0.0), Arc("local", "remote", 0.5 / (u - r)),
            Arc("remote", "remote", 0.0)]
    return CellNetwork(cells, arcs)


def mm1_pigou_poa(u: float = 1.0, r: float = 0.5) -> float:
    """Closed-form PoA ½(1 + √(u/(u − r))) of :func:`mm1_pigou` (in the limit; dimensionless).

    The one definition of this closed form (also :func:`lbtheory.games.mm1_two_link_poa`, the
    same M/M/1-beside-a-constant-link game). Raises ModelError unless 0 ≤ r < u.
    """
    if not (np.isfinite(u) and np.isfinite(r) and 0.0 <= r < u):
        raise ParameterError(f"mm1_pigou_poa: expected 0 <= r < u, got u={u!r}, r={r!r}")
    return float(0.5 * (1.0 + np.sqrt(u / (u - r))))


@renamed_keywords(rng="seed")
def random_network(n: int, *legacy: int, seed: Seed = 0, utilisation: float = 0.7,
                   arc_prob: float = 0.6, max_delay: float = 0.1, softplus_share: float = 0.0,
                   ) -> CellNetwork:
    """A random feasible cell network of ``n`` cells, drawn from ``seed`` (an int or a
    ``numpy.random.Generator``; ``rng=`` and the 0.1 call ``random_network(rng, n)`` still work
    and warn).

    Each cell has a self-arc; other arcs appear with probability ``arc_prob`` and one-way delays
    U[0, max_delay] s. Capacities are hyperbolic μ̄ ~ U[5, 50], K ~ U[0.5, 10] (or softplus with
    probability ``softplus_share``); arrival rates are Dirichlet shares of
    ``utilisation · Σ μ̄`` capped so each source fits its reachable capacity.
    """
    if isinstance(n, np.random.Generator):  # the 0.1 signature: random_network(rng, n, ...)
        if len(legacy) != 1:
            raise ParameterError("random_network(rng, n): give the cell count n after the "
                                 "generator, or call random_network(n, seed=rng)")
        warn_deprecated("random_network(rng, n)", "random_network(n, seed=rng)")
        n, seed = legacy[0], n
    elif legacy:
        raise ParameterError(f"random_network takes one positional argument, the cell count n; "
                             f"got {1 + len(legacy)} (give seed=, utilisation=, ... by keyword)")
    n = check_int(n, "n", low=1)
    rng = as_generator(seed)
    cells = []
    caps = []
    for j in range(n):
        k = int(rng.integers(1, 9))
        if rng.random() < softplus_share:
            slope = 1.0 / rng.uniform(5, 50)
            knee = rng.uniform(1, 20)
            svc: ServiceModel = SoftplusLatency(base_latency=slope * knee * rng.uniform(1.2, 3.0),
                                                slope=slope, knee=knee,
                                                softness=rng.uniform(0.5, 5.0))
        else:
            svc = MM1Latency(capacity=rng.uniform(5, 50), K=rng.uniform(0.5, 10))
        caps.append(float(svc.max_rate))
        cells.append((f"c{j}", k, svc))
    adj = rng.random((n, n)) < arc_prob
    np.fill_diagonal(adj, True)
    share = rng.dirichlet(np.ones(n))
    lam = utilisation * sum(caps) * share
    reach = np.array([sum(caps[j] for j in np.flatnonzero(adj[i])) for i in range(n)])
    lam = np.minimum(lam, utilisation * reach * 0.5)
    full = [Cell(name, k, float(lam[j]), svc) for j, (name, k, svc) in enumerate(cells)]
    arcs = [Arc(f"c{i}", f"c{j}", 0.0 if i == j else float(rng.uniform(0, max_delay)))
            for i in range(n) for j in range(n) if adj[i, j]]
    return CellNetwork(full, arcs)


def full_mesh(n: int, *, seed: Seed = 0, family: str = "mm1", utilisation: float = 0.7,
              max_delay: float = 0.1) -> CellNetwork:
    """A full-mesh network of ``n`` cells (all n² arcs), for benchmarks (``seed``: an int or a
    Generator)."""
    return random_network(n, seed=seed, utilisation=utilisation, arc_prob=1.1, max_delay=max_delay,
                          softplus_share=1.0 if family == "softplus" else 0.0)
