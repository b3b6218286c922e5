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
``"chicago_sketch"`` (933, 2,950, 387) — the counts of the real TNTP networks — and the regional
sizes ``"austin"`` (7,466, 18,710, 1,117: the Austin network TAP-B is timed on in issue 24)
and ``"chicago_regional"`` (12,982, 39,018, 1,790). Regional trip tables are like the real
ones in two ways the classic sizes' tables are not: sparse (each OD pair has demand with
probability :data:`OD_DENSITY`, at least one destination per origin, which also keeps the game's
commodity list to ~10⁵ entries) and decaying with distance (trips ∝ exp(−t/τ), τ =
:data:`OD_DECAY` × the mean free-flow OD time: most trips are local, as in a region; a uniform
table on an 80 × 80 grid sends every origin across the whole region).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import minimum_spanning_tree

from .._checks import Seed, as_generator, check_int, check_real
from ..errors import ParameterError
from .arccosts import bpr
from .game import Commodity, GameArc, RoutingGame
from .metrics import all_or_nothing, shortest_paths

__all__ = ["SIZES", "OD_DENSITY", "OD_DECAY", "synthetic_network"]

#: (nodes, links, zones) of the real networks the synthetic ones mimic.
SIZES = {"sioux_falls": (24, 76, 24), "anaheim": (416, 914, 38),
         "barcelona": (1020, 2522, 110), "winnipeg": (1052, 2836, 147),
         "chicago_sketch": (933, 2950, 387), "austin": (7466, 18710, 1117),
         "chicago_regional": (12982, 39018, 1790)}

#: Share of the OD pairs with demand, per size (1 when not listed: a full trip table).
OD_DENSITY = {"austin": 0.25, "chicago_regional": 0.15}

#: Distance decay of the trip table, per size: trips ∝ exp(−t/τ) with τ this share of the mean
#: free-flow zone-to-zone time (none when not listed: the classic sizes' tables, unchanged).
OD_DECAY = {"austin": 0.3, "chicago_regional": 0.3}


def _grid_edges(rows: int, cols: int, count: int) -> np.ndarray:
    """Undirected edges of the first ``count`` nodes (row-major) of a rows × cols grid (the
    last row may be partial; still connected)."""
    idx = np.arange(rows * cols).reshape(rows, cols)
    h = np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], axis=1)
    v = np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], axis=1)
    e = np.concatenate([h, v])
    return e[(e < count).all(axis=1)]


def _trip_table(rng: np.random.Generator, Z: int, density: float, decay: float | None,
                time: np.ndarray) -> np.ndarray:
    """Z × Z demand (before scaling): gravity-like pop_i·pop_j·U[0.5, 1.5], times
    exp(−t_ij/τ) with τ = ``decay`` × the mean free-flow zone-to-zone time ``time`` (when
    given), each pair kept with probability ``density`` and at least one (the nearest zone when
    decaying, else a random one) per origin."""
    pop = rng.uniform(0.5, 1.5, Z)
    trips = np.outer(pop, pop) * rng.uniform(0.5, 1.5, (Z, Z))
    off = ~np.eye(Z, dtype=bool)
    if decay is not None:
        trips *= np.exp(-time / (decay * float(np.mean(time[off]))))
    if density < 1.0:  # sparse: each pair kept with probability density, one per origin
        keep = rng.random((Z, Z)) < density
        if decay is not None:
            other = np.where(off, time, np.inf).argmin(axis=1)
        else:
            other = (np.arange(Z) + 1 + rng.integers(0, Z - 1, Z)) % Z
        keep[np.arange(Z), other] = True
        trips *= keep
    np.fill_diagonal(trips, 0.0)
    return trips


def synthetic_network(size: str | tuple[int, int, int], *, seed: Seed = 0,
                      target_vc: float = 1.5, density: float | None = None,
                      decay: float | None = None) -> tuple[RoutingGame, dict[str, np.ndarray]]:
    """A seeded synthetic network of a classic size.

    Args:
        size: a key of :data:`SIZES` or ``(nodes, links, zones)`` with links even and between
            2·(nodes − 1) and the full grid's link count.
        seed: an int (same seed, same network) or a ``numpy.random.Generator``.
        target_vc: 90th-percentile volume/capacity of the free-flow loading (demand scale).
        density: share of the OD pairs with demand, in (0, 1] (default :data:`OD_DENSITY` of
            a named size, else 1).
        decay: distance decay τ of the trip table as a share of the mean free-flow OD time,
            > 0 (default :data:`OD_DECAY` of a named size, else none).

    Returns:
        ``(game, data)``: the :class:`RoutingGame` (nodes 1..N, zones 1..Z non-through) and the
        TNTP columns ``data`` (``tail``, ``head`` 1-based, ``capacity``, ``free_flow_time``,
        ``b``, ``power``, ``trips`` Z × Z, ``first_thru_node``) for
        :func:`lbtheory.games.tntp.write_tntp`.

    Raises:
        ParameterError: unknown size name, impossible counts, a density outside (0, 1] or a
            decay ≤ 0.
    """
    if density is None:
        density = OD_DENSITY.get(size, 1.0) if isinstance(size, str) else 1.0
    check_real(density, "density", low=0.0, high=1.0, low_open=True)
    if decay is None and isinstance(size, str):
        decay = OD_DECAY.get(size)
    if decay is not None:
        check_real(decay, "decay", low=0.0, low_open=True)
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
    rng = as_generator(seed)
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
    arcs = [GameArc(int(t), int(h), bpr(f, 0.15, c, 4.0)) for t, h, f, c in zip(tails, heads, fft,
                                                                                 cap)]
    nodes, zones = list(range(1, n + 1)), [] if through else list(range(1, Z + 1))
    # free-flow trees from every zone (zone i is node index i), on the arcs alone
    probe = RoutingGame(nodes, arcs, [Commodity(z, z % Z + 1, 1.0) for z in range(1, Z + 1)],
                        non_through=zones)
    dist, pred = shortest_paths(probe, probe.costs.cost(np.zeros(m)))
    trips = _trip_table(rng, Z, density, decay, dist[:, :Z])
    demand = np.zeros((Z, n))
    demand[:, :Z] = trips
    x = all_or_nothing(probe, pred, by_origin=False, demand=demand)
    vc = x[x > 0] / cap[x > 0]
    scale = float(np.round(target_vc / np.quantile(vc, 0.9), 6))
    trips = np.round(trips * scale, 4)
    oo, dd = np.nonzero(trips)
    game = RoutingGame(nodes, arcs, [Commodity(int(o) + 1, int(d) + 1, float(trips[o, d]))
                                     for o, d in zip(oo, dd)], non_through=zones)
    return game, {"tail": tails, "head": heads, "capacity": cap, "free_flow_time": fft,
                  "b": np.full(m, 0.15), "power": np.full(m, 4.0), "trips": trips,
                  "first_thru_node": 1 if through else Z + 1}
