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

__all__ = ["shortest_paths", "shortest_distances", "all_or_nothing", "gap_measures",
           "shortest_path_cost", "used_arc_spread", "reduced_cost_bounds"]


def _graph(tails: np.ndarray, heads: np.ndarray, cost: np.ndarray, mask: np.ndarray, n: int):
    """CSR graph (n nodes) of the cheapest unmasked arc per node pair, and the arc id of each
    pair (sorted by the key tail·n + head)."""
    ok = mask & np.isfinite(cost)
    arcs = np.flatnonzero(ok)
    keys = tails[arcs] * n + heads[arcs]
    order = np.lexsort((cost[arcs], keys))
    arcs, keys = arcs[order], keys[order]
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    arcs, keys = arcs[first], keys[first]
    g = sp.csr_matrix((np.maximum(cost[arcs], 0.0), (tails[arcs], heads[arcs])), shape=(n, n))
    return g, keys, arcs


def _split_graph(game: RoutingGame, cost: np.ndarray):
    """The one graph of :func:`shortest_paths`: ``(g, keys, arcs, src, split, N)`` — the CSR
    graph over N nodes (the n nodes and a source copy of each non-through origin), its pair
    keys and arc ids (:func:`_graph`), each origin's source node and the non-through origins'
    numbers."""
    n, nt, orig = game.n_nodes, game.non_through, game.origins
    split = np.flatnonzero(nt[orig])  # the non-through origins (TNTP zones)
    copy = np.full(n, -1, dtype=np.int64)
    copy[orig[split]] = n + np.arange(split.size)
    N = n + split.size
    own = ~game.blocked & (copy[game.tails] >= 0)
    tails = np.where(own, copy[game.tails], game.tails)
    mask = usable_arcs(game.tails, game.heads, game.blocked, nt) | own
    g, keys, arcs = _graph(tails, game.heads, cost, mask, N)
    src = orig.copy()
    src[split] = copy[orig[split]]
    return g, keys, arcs, src, split, N


def shortest_paths(game: RoutingGame, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shortest-path distances and predecessor arcs from every origin.

    Args:
        cost: per-arc costs (m,), ≥ 0; non-finite costs and blocked arcs are unusable.

    Returns:
        ``(dist, pred_arc)``, each (K × n): distance from origin k to every node (+inf when
        unreachable) and the arc entering each node on a shortest-path tree (−1 at the root and
        at unreachable nodes). Non-through nodes are never passed through.

    One graph serves every origin: a non-through origin o is split into a source copy (its
    out-arcs, which only o's own flow may use) and o itself (its in-arcs: a sink); other
    non-through nodes keep only their in-arcs. The arcs into an origin, which the rule also
    excludes, never lie on a shortest path from it. Only the distances:
    :func:`shortest_distances` (a third of the time on regional networks).
    """
    n, orig = game.n_nodes, game.origins
    g, keys, arcs, src, split, N = _split_graph(game, cost)
    d, pred = dijkstra(g, directed=True, indices=src, return_predecessors=True)
    d, pred = np.atleast_2d(d), np.atleast_2d(pred)[:, :n]
    dist = np.ascontiguousarray(d[:, :n])
    has = pred >= 0
    pk = np.where(has, pred, 0) * N + np.arange(n)[None, :]
    pos = np.clip(np.searchsorted(keys, pk), 0, max(len(keys) - 1, 0))
    pred_arc = np.where(has, arcs[pos] if len(arcs) else -1, -1)
    dist[split, orig[split]] = 0.0  # a zone's sink may be reached back: it is the root
    pred_arc[split, orig[split]] = -1
    return dist, pred_arc


def shortest_distances(game: RoutingGame, cost: np.ndarray) -> np.ndarray:
    """The distances of :func:`shortest_paths` (K × n, the same numbers) without the
    predecessor arcs, whose lookup costs twice the search itself on a regional network."""
    n, orig = game.n_nodes, game.origins
    g, _, _, src, split, _ = _split_graph(game, cost)
    d = np.atleast_2d(dijkstra(g, directed=True, indices=src, return_predecessors=False))
    dist = np.ascontiguousarray(d[:, :n])
    dist[split, orig[split]] = 0.0  # a zone's sink may be reached back: it is the root
    return dist


def all_or_nothing(game: RoutingGame, pred_arc: np.ndarray, *, by_origin: bool = True,
                   demand: np.ndarray | None = None) -> np.ndarray:
    """Load every origin's demand on its shortest-path tree; returns origin flows (K × m), or
    with ``by_origin=False`` only their sum, the arc flows (m,) (memory O(arcs), not
    O(origins × arcs): regional networks). ``demand``: another demand matrix (K × n, the
    game's origins and nodes) to load instead of the game's."""
    K, m = len(game.origins), game.n_arcs
    size = K * m if by_origin else m
    flat = np.zeros(size)
    demand = game.demand if demand is None else demand
    kk, vv = np.nonzero(demand > 0)
    w = demand[kk, vv]
    cur = vv
    for _ in range(game.n_nodes + 1):
        if cur.size == 0:
            break
        a = pred_arc[kk, cur]
        flat += np.bincount(kk * m + a if by_origin else a, weights=w, minlength=size)
        cur = game.tails[a]
        keep = cur != game.origins[kk]
        kk, cur, w = kk[keep], cur[keep], w[keep]
    return flat.reshape(K, m) if by_origin else flat


def shortest_path_cost(game: RoutingGame, dist: np.ndarray, *,
                       od: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> float:
    """SPTT = Σ_od d_od · dist(o, d) over positive demands (dist: :func:`shortest_paths`).
    ``od``: those OD pairs as ``(origin numbers, destination nodes, demands)`` in row-major
    order (``np.nonzero(game.demand > 0)`` and the demands there; the same sum, bit for bit,
    without scanning the origins × nodes demand matrix)."""
    if od is not None:
        kk, dd, w = od
        return float(np.dot(w, dist[kk, dd]))
    mask = game.demand > 0
    return float(np.dot(game.demand[mask], dist[mask]))


def gap_measures(game: RoutingGame, x: np.ndarray, cost: np.ndarray, *,
                 dist: np.ndarray | None = None,
                 od: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                 ) -> tuple[float, float]:
    """``(relative_gap, average_excess_cost)`` of arc flows ``x`` under arc costs ``cost``.

    ``cost`` is ℓ(x) for a Wardrop check, the marginal cost for a system-optimum check. The
    relative gap is dimensionless, the AEC in cost units. ``dist``: the shortest-path distances
    under ``cost`` (:func:`shortest_paths`) when already known; ``od``: the OD pairs with
    demand, as :func:`shortest_path_cost` takes them.
    """
    if dist is None:
        dist = shortest_distances(game, cost)
    used = x > 0
    tstt = float(np.dot(x[used], cost[used]))
    sptt = shortest_path_cost(game, dist, od=od)
    excess = tstt - sptt
    rel = excess / tstt if tstt > 0 else 0.0
    return rel, excess / game.total_demand if game.total_demand > 0 else 0.0


def _largest_od_cost(game: RoutingGame, dist: np.ndarray) -> float:
    """R: the largest shortest-path cost of an OD pair with demand (1 when there is none)."""
    fin = np.isfinite(dist) & (game.demand > 0)
    return float(np.max(dist[fin])) if np.any(fin) else 1.0


def reduced_cost_bounds(game: RoutingGame, origin_flow: np.ndarray, cost: np.ndarray, *,
                        dist: np.ndarray | None = None, slack: float = 0.0,
                        dust: float = 1e-12) -> tuple[float, float]:
    """The two sides of the gap–spread relation: ``(lowest, heaviest)``.

    With r_ka = c_a + dist_k(u) − dist_k(v) the reduced cost of arc a = (u, v) for origin k and
    R the largest OD shortest-path cost: ``lowest`` = min r_ka / R over the arcs origin k may use
    from a node it reaches (≥ 0 when ``dist`` are shortest-path distances, up to rounding), and
    ``heaviest`` = max f_ka·(r_ka − slack·R) / TSTT over the arcs with f_ka above ``dust`` ×
    origin k's demand (TSTT = Σ x·c; below it, an interior-point solver's rounding dust may sit
    on arcs the origin does not even reach).
    Flow conservation makes Σ_k Σ_a f_ka·r_ka = TSTT − SPTT exactly, so when every r_ka ≥ 0 each
    term is at most the sum: ``heaviest`` ≤ the relative gap. Computed origin by origin (memory
    O(arcs)); ``cost``/``dist`` as in :func:`gap_measures`.
    """
    if dist is None:
        dist = shortest_distances(game, cost)
    F = np.asarray(origin_flow, dtype=float)
    ref = _largest_od_cost(game, dist)
    x = F.sum(axis=0)
    used = x > 0
    tstt = float(np.dot(x[used], cost[used]))
    dem = game.demand.sum(axis=1)
    lowest, heaviest = 0.0, 0.0
    for k in range(len(game.origins)):
        dt, dh = dist[k, game.tails], dist[k, game.heads]
        ok = game.usable(k) & np.isfinite(dt) & np.isfinite(cost)
        with np.errstate(invalid="ignore"):
            red = cost + dt - dh
        if np.any(ok):
            lowest = min(lowest, float(red[ok].min()))
        f = F[k]
        pos = f > dust * dem[k]
        if np.any(pos):
            heaviest = max(heaviest, float(np.max(f[pos] * (red[pos] - slack * ref))))
    return (lowest / ref if ref > 0 else lowest), (heaviest / tstt if tstt > 0 else heaviest)


def used_arc_spread(game: RoutingGame, origin_flow: np.ndarray, cost: np.ndarray, *,
                    dist: np.ndarray | None = None, used: float = 1e-9) -> float:
    """Largest reduced cost on a used arc, relative to the largest OD shortest-path cost.

    For origin k and arc a = (u, v) carrying f_ka > ``used``·(origin k's demand), the reduced
    cost c_a + dist_k(u) − dist_k(v) is 0 at equilibrium (every used arc lies on a shortest
    path). This is the cost spread the relative gap weighs by flow: an arc carrying f_ka has
    spread at most G·TSTT/(f_ka·R) for relative gap G (:func:`reduced_cost_bounds`), which
    bounds nothing on vanishing flows. Dimensionless; ``cost``/``dist`` as in
    :func:`gap_measures`.
    """
    if dist is None:
        dist = shortest_distances(game, cost)
    F = np.asarray(origin_flow, dtype=float)
    dem = game.demand.sum(axis=1)
    k, a = np.nonzero(F > used * dem[:, None])
    if k.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):
        red = cost[a] + dist[k, game.tails[a]] - dist[k, game.heads[a]]
    ref = _largest_od_cost(game, dist)
    if not np.all(np.isfinite(red)):
        return np.inf
    return float(np.max(red)) / ref if ref > 0 else float(np.max(red))
