"""Path-free optimality measures of routing-game flows, via shortest paths (scipy.sparse.csgraph).

For arc costs c (travel costs ℓ(x) for Wardrop, marginal costs x·ℓ'(x) + ℓ(x) for the system
optimum), with TSTT = Σ_a x_a c_a and SPTT = Σ_od d_od · dist_c(o, d):

* relative gap = (TSTT − SPTT)/TSTT (0 exactly at equilibrium; the field's standard measure);
* average excess cost (AEC) = (TSTT − SPTT)/Σ d_od, in cost units.

The shortest-path trees also give the all-or-nothing assignment used by Frank–Wolfe.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from .game import RoutingGame, usable_arcs

__all__ = ["shortest_paths", "all_or_nothing", "gap_measures", "shortest_path_cost",
           "used_arc_spread"]


def _graph(game: RoutingGame, cost: np.ndarray, mask: np.ndarray):
    """CSR graph of the cheapest unmasked arc per node pair, and the arc id of each pair."""
    n = game.n_nodes
    ok = mask & np.isfinite(cost)
    arcs = np.flatnonzero(ok)
    keys = game.tails[arcs] * n + game.heads[arcs]
    order = np.lexsort((cost[arcs], keys))
    arcs, keys = arcs[order], keys[order]
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    arcs, keys = arcs[first], keys[first]
    g = sp.csr_matrix((np.maximum(cost[arcs], 0.0), (game.tails[arcs], game.heads[arcs])),
                      shape=(n, n))
    return g, keys, arcs


def shortest_paths(game: RoutingGame, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shortest-path distances and predecessor arcs from every origin.

    Args:
        cost: per-arc costs (m,), ≥ 0; non-finite costs and blocked arcs are unusable.

    Returns:
        ``(dist, pred_arc)``, each (K × n): distance from origin k to every node (+inf when
        unreachable) and the arc entering each node on a shortest-path tree (−1 at the root and
        at unreachable nodes). Non-through nodes are never passed through.
    """
    n, K = game.n_nodes, len(game.origins)
    dist = np.full((K, n), np.inf)
    pred_arc = np.full((K, n), -1, dtype=int)
    # through origins share one tree computation (the arcs into an origin, which the rule also
    # excludes, never lie on a shortest path from it); each non-through origin gets its own
    rule = (game.tails, game.heads, game.blocked, game.non_through)
    groups: list[tuple[np.ndarray, np.ndarray]] = []
    thru = np.flatnonzero(~game.non_through[game.origins])
    if thru.size:
        groups.append((thru, usable_arcs(*rule)))
    for k in np.flatnonzero(game.non_through[game.origins]):
        groups.append((np.array([k]), usable_arcs(*rule, int(game.origins[k]))))
    for ks, mask in groups:
        g, keys, arcs = _graph(game, cost, mask)
        d, pred = dijkstra(g, directed=True, indices=game.origins[ks], return_predecessors=True)
        d = np.atleast_2d(d)
        pred = np.atleast_2d(pred)
        dist[ks] = d
        has = pred >= 0
        pk = np.where(has, pred, 0) * n + np.arange(n)[None, :]
        pos = np.clip(np.searchsorted(keys, pk), 0, max(len(keys) - 1, 0))
        pred_arc[ks] = np.where(has, arcs[pos] if len(arcs) else -1, -1)
    return dist, pred_arc


def all_or_nothing(game: RoutingGame, pred_arc: np.ndarray) -> np.ndarray:
    """Load every origin's demand on its shortest-path tree; returns origin flows (K × m)."""
    K, m = len(game.origins), game.n_arcs
    flat = np.zeros(K * m)
    kk, vv = np.nonzero(game.demand > 0)
    w = game.demand[kk, vv]
    cur = vv
    for _ in range(game.n_nodes + 1):
        if cur.size == 0:
            break
        a = pred_arc[kk, cur]
        flat += np.bincount(kk * m + a, weights=w, minlength=K * m)
        cur = game.tails[a]
        keep = cur != game.origins[kk]
        kk, cur, w = kk[keep], cur[keep], w[keep]
    return flat.reshape(K, m)


def shortest_path_cost(game: RoutingGame, dist: np.ndarray) -> float:
    """SPTT = Σ_od d_od · dist(o, d) over positive demands (dist: :func:`shortest_paths`)."""
    mask = game.demand > 0
    return float(np.dot(game.demand[mask], dist[mask]))


def gap_measures(game: RoutingGame, x: np.ndarray, cost: np.ndarray, *,
                 dist: np.ndarray | None = None) -> tuple[float, float]:
    """``(relative_gap, average_excess_cost)`` of arc flows ``x`` under arc costs ``cost``.

    ``cost`` is ℓ(x) for a Wardrop check, the marginal cost for a system-optimum check. The
    relative gap is dimensionless, the AEC in cost units. ``dist``: the shortest-path distances
    under ``cost`` (:func:`shortest_paths`) when already known.
    """
    if dist is None:
        dist, _ = shortest_paths(game, cost)
    used = x > 0
    tstt = float(np.dot(x[used], cost[used]))
    sptt = shortest_path_cost(game, dist)
    excess = tstt - sptt
    rel = excess / tstt if tstt > 0 else 0.0
    return rel, excess / game.total_demand if game.total_demand > 0 else 0.0


def used_arc_spread(game: RoutingGame, origin_flow: np.ndarray, cost: np.ndarray, *,
                    dist: np.ndarray | None = None, used: float = 1e-9) -> float:
    """Largest reduced cost on a used arc, relative to the largest OD shortest-path cost.

    For origin k and arc a = (u, v) carrying f_ka > ``used``·(origin k's demand), the reduced
    cost c_a + dist_k(u) − dist_k(v) is 0 at equilibrium (every used arc lies on a shortest
    path). This is the cost spread the relative gap weighs by flow (and so can hide on small
    flows). Dimensionless; ``cost``/``dist`` as in :func:`gap_measures`.
    """
    if dist is None:
        dist, _ = shortest_paths(game, cost)
    F = np.asarray(origin_flow, dtype=float)
    dem = game.demand.sum(axis=1)
    k, a = np.nonzero(F > used * dem[:, None])
    if k.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):
        red = cost[a] + dist[k, game.tails[a]] - dist[k, game.heads[a]]
    fin = np.isfinite(dist) & (game.demand > 0)
    ref = float(np.max(dist[fin])) if np.any(fin) else 1.0
    if not np.all(np.isfinite(red)):
        return np.inf
    return float(np.max(red)) / ref if ref > 0 else float(np.max(red))
