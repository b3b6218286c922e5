"""Seeded synthetic TNTP-like road networks of classic sizes (for benchmarks and tests).

A ``rows × cols`` grid thinned to a target link count: a random spanning tree of the grid's
undirected edges plus random extra edges, every edge used in both directions (so the network is
strongly connected). ``zones`` random nodes become the zones 1..Z (non-through nodes, TNTP's
first-thru-node convention), the other nodes follow. Links are BPR, t0·(1 + 0.15·(x/c)^4), with
free-flow times 1–5 (minutes) and capacities 500–2,500 (vehicles/h); the demand of a random
gravity-like trip table is scaled so that the free-flow all-or-nothing loading puts the 90th
percentile of the loaded links at volume/capacity 1.5 (congested, as the real networks).

Sizes (:data:`SIZES`): ``"sioux_falls"`` (24 nodes, 76 links, 24 zones), ``"anaheim"`` (416,
914, 38), ``"barcelona"`` (1,020, 2,522, 110), ``"winnipeg"`` (1,052, 2,836, 147),
``"chicago_sketch"`` (933, 2,950, 387) — the counts of the real TNTP networks.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import minimum_spanning_tree

from .._checks import check_int
from ..errors import ParameterError
from .arccosts import bpr
from .game import Commodity, GameArc, RoutingGame
from .metrics import all_or_nothing, shortest_paths

__all__ = ["SIZES", "synthetic_network"]

#: (nodes, links, zones) of the real networks the synthetic ones mimic.
SIZES = {"sioux_falls": (24, 76, 24), "anaheim": (416, 914, 38),
         "barcelona": (1020, 2522, 110), "winnipeg": (1052, 2836, 147),
         "chicago_sketch": (933, 2950, 387)}


def _grid_edges(rows: int, cols: int, count: int) -> np.ndarray:
    """Undirected edges of the first ``count`` nodes (row-major) of a rows × cols grid (the
    last row may be partial; still connected)."""
    idx = np.arange(rows * cols).reshape(rows, cols)
    h = np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], axis=1)
    v = np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], axis=1)
    e = np.concatenate([h, v])
    return e[(e < count).all(axis=1)]


def synthetic_network(size: str | tuple[int, int, int], *, seed: int = 0,
                      target_vc: float = 1.5) -> tuple[RoutingGame, dict[str, np.ndarray]]:
    """A seeded synthetic network of a classic size.

    Args:
        size: a key of :data:`SIZES` or ``(nodes, links, zones)`` with links even and between
            2·(nodes − 1) and the full grid's link count.
        seed: random seed (same seed, same network).
        target_vc: 90th-percentile volume/capacity of the free-flow loading (demand scale).

    Returns:
        ``(game, data)``: the :class:`RoutingGame` (nodes 1..N, zones 1..Z non-through) and the
        TNTP columns ``data`` (``tail``, ``head`` 1-based, ``capacity``, ``free_flow_time``,
        ``b``, ``power``, ``trips`` Z × Z, ``first_thru_node``) for
        :func:`lbtheory.games.tntp.write_tntp`.

    Raises:
        ParameterError: unknown size name or impossible counts.
    """
    if isinstance(size, str):
        if size not in SIZES:
            raise ParameterError(f"size must be one of {', '.join(SIZES)} or (nodes, links, "
                                 f"zones), got {size!r}")
        size = SIZES[size]
    if not isinstance(size, tuple | list) or len(size) != 3:
        raise ParameterError(f"size must be one of {', '.join(SIZES)} or (nodes, links, zones), "
                             f"got {size!r}")
    n, L, Z = (check_int(v, f"size {key}", low=1)
               for key, v in zip(("nodes", "links", "zones"), size, strict=True))
    through = Z >= n  # every node a zone (Sioux Falls): a plain grid, all nodes through
    ng = n if through else n - Z
    rows = max(int(math.floor(math.sqrt(ng))), 1)
    while ng % rows:
        rows -= 1
    if rows < math.sqrt(ng) / 2:  # a lopsided factorisation (e.g. 905 = 5 × 181): near-square
        rows = max(int(math.floor(math.sqrt(ng))), 1)  # grid with a partial last row instead
    edges = _grid_edges(rows, -(-ng // rows), ng)
    attach = 0 if through else (2 if L - 4 * Z >= 2 * (ng - 1) else 1)
    want = (L - 2 * attach * Z) // 2
    if L % 2 or not (ng - 1 <= want <= len(edges)) or not (2 <= Z <= n):
        raise ParameterError(f"size (nodes, links, zones) = {size}: links must be even and "
                             f"leave between {2 * (ng - 1)} and {2 * len(edges)} grid links after "
                             f"the zone connectors, and 2 ≤ zones ≤ nodes")
    rng = np.random.default_rng(seed)
    w = rng.random(len(edges)) + 1e-3
    g = sp.csr_matrix((w, (edges[:, 0], edges[:, 1])), shape=(ng, ng))
    tree = minimum_spanning_tree(g).tocoo()
    in_tree = set(zip(tree.row.tolist(), tree.col.tolist()))
    is_tree = np.array([(int(a), int(b)) in in_tree for a, b in edges])
    extra = rng.permutation(np.flatnonzero(~is_tree))[: want - int(is_tree.sum())]
    chosen = edges[np.concatenate([np.flatnonzero(is_tree), extra])]
    if through:  # random zone labels over the whole grid
        label = rng.permutation(n) + 1
    else:  # zones 1..Z are centroids, grid nodes Z+1..N
        label = np.arange(Z + 1, n + 1)
    t_u, h_u = label[chosen[:, 0]], label[chosen[:, 1]]
    m_grid = 2 * len(chosen)
    if attach:
        cz = np.repeat(np.arange(1, Z + 1), attach)
        cg = np.concatenate([rng.choice(ng, size=attach, replace=False) for _ in range(Z)])
        t_u = np.concatenate([t_u, cz])
        h_u = np.concatenate([h_u, label[cg]])
    tails = np.concatenate([t_u, h_u])
    heads = np.concatenate([h_u, t_u])
    connector = np.zeros(tails.size, dtype=bool)
    connector[m_grid // 2: tails.size // 2] = True
    connector[tails.size // 2 + m_grid // 2:] = True
    order = np.lexsort((heads, tails))
    tails, heads, connector = tails[order], heads[order], connector[order]
    m = tails.size
    fft = np.where(connector, 0.5, np.round(rng.uniform(1.0, 5.0, m), 3))
    cap = np.where(connector, 50_000.0, np.round(rng.uniform(500.0, 2500.0, m), 1))
    pop = rng.uniform(0.5, 1.5, Z)
    trips = np.outer(pop, pop) * rng.uniform(0.5, 1.5, (Z, Z))
    np.fill_diagonal(trips, 0.0)

    def build(scale: float) -> RoutingGame:
        arcs = [GameArc(int(t), int(h), bpr(f, 0.15, c, 4.0))
                for t, h, f, c in zip(tails, heads, fft, cap)]
        oo, dd = np.nonzero(trips)
        comms = [Commodity(int(o) + 1, int(d) + 1, float(scale * trips[o, d]))
                 for o, d in zip(oo, dd)]
        return RoutingGame(list(range(1, n + 1)), arcs, comms,
                           non_through=[] if through else list(range(1, Z + 1)))

    game = build(1.0)
    _, pred = shortest_paths(game, game.costs.cost(np.zeros(m)))
    x = all_or_nothing(game, pred).sum(axis=0)
    vc = x[x > 0] / cap[x > 0]
    scale = float(np.round(target_vc / np.quantile(vc, 0.9), 6))
    trips = np.round(trips * scale, 4)
    game = build(1.0)
    return game, {"tail": tails, "head": heads, "capacity": cap, "free_flow_time": fft,
                  "b": np.full(m, 0.15), "power": np.full(m, 4.0), "trips": trips,
                  "first_thru_node": 1 if through else Z + 1}
