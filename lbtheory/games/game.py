"""Nonatomic routing games on general directed networks (multi-commodity).

DESIGN.md places ``RoutingGame`` in ``network.py``; we deviate and keep it in the
``lbtheory.games`` subpackage (small modules, no edit conflicts with the cell-network code).

A game is a directed (multi)graph whose arcs carry cost families (:mod:`.arccosts`) and a list of
commodities (origin, destination, demand). Solvers aggregate commodities by origin (one flow
vector per origin), so a Sioux-Falls-sized game has 24 flow vectors, not 528.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from ..errors import TopologyError
from .arccosts import ArcCost, ArcCostBank

__all__ = ["GameArc", "Commodity", "RoutingGame", "usable_arcs", "reachable_nodes"]


def usable_arcs(tails: np.ndarray, heads: np.ndarray, blocked: np.ndarray,
                non_through: np.ndarray, origin: int | None = None) -> np.ndarray:
    """The arc-use rule of a routing game (its one definition), as a boolean mask over arcs.

    Flow from node ``origin`` may use an arc when it is unblocked, its tail is a through node or
    ``origin`` itself (non-through nodes are never passed through), and it does not re-enter
    ``origin``. With ``origin=None``: the arcs every through origin may use (unblocked, through
    tail). ``tails``/``heads`` are node indices (m,), ``non_through`` a node mask (n,).
    """
    ok = ~blocked & ~non_through[tails]
    if origin is None:
        return ok
    return (ok | (~blocked & (tails == origin))) & (heads != origin)


def reachable_nodes(n: int, tails: np.ndarray, heads: np.ndarray, mask: np.ndarray,
                    origin: int) -> np.ndarray:
    """Boolean mask of the n nodes reachable from ``origin`` over the arcs in ``mask`` (BFS)."""
    g = sp.csr_matrix((np.ones(int(mask.sum())), (tails[mask], heads[mask])), shape=(n, n))
    reach = np.zeros(n, dtype=bool)
    reach[breadth_first_order(g, int(origin), directed=True, return_predecessors=False)] = True
    return reach


def reaches(n: int, tails: np.ndarray, heads: np.ndarray, blocked: np.ndarray,
            non_through: np.ndarray, origins: np.ndarray, dests: np.ndarray) -> np.ndarray:
    """Whether each node ``dests[i]`` can be reached from node ``origins[i]`` under the arc-use
    rule (:func:`usable_arcs`), for all pairs at once: :func:`reachable_nodes` per origin, but
    one strong-component condensation of the arcs every origin may use (unblocked, through
    tail) and one search per component an origin's own arcs lead into (through origins: their
    own component) — milliseconds for 7,000 origins where a search per origin takes seconds.
    (Arcs back into an origin, which the rule drops, reach nothing new.)"""
    from scipy.sparse.csgraph import connected_components

    origins, dests = np.asarray(origins, dtype=int), np.asarray(dests, dtype=int)
    ok0 = usable_arcs(tails, heads, blocked, non_through)
    t0, h0 = tails[ok0], heads[ok0]
    g = sp.csr_matrix((np.ones(t0.size), (t0, h0)), shape=(n, n))
    c, lab = connected_components(g, directed=True, connection="strong")
    cu, cv = lab[t0], lab[h0]
    cross = cu != cv
    dag = sp.csr_matrix((np.ones(int(cross.sum())), (cu[cross], cv[cross])), shape=(c, c))
    # the components each pair starts from: a through origin's own; a non-through origin's
    # out-arcs' heads' (its arcs are usable by it alone)
    own = (~blocked) & (heads != tails)
    starts_o = np.concatenate([np.flatnonzero(~non_through), tails[own & non_through[tails]]])
    starts_c = np.concatenate([lab[~non_through], lab[heads[own & non_through[tails]]]])
    order = np.argsort(starts_o, kind="stable")
    starts_o, starts_c = starts_o[order], starts_c[order]
    lo, hi = np.searchsorted(starts_o, origins), np.searchsorted(starts_o, origins, "right")
    out = origins == dests
    width = hi - lo
    rows = np.repeat(np.arange(origins.size), width)  # pair of every (pair, start) row
    comp = starts_c[np.repeat(lo, width) + (np.arange(rows.size) - np.repeat(
        np.cumsum(width) - width, width))]
    by = np.argsort(comp, kind="stable")
    rows, comp, target = rows[by], comp[by], lab[dests[rows[by]]]
    first = np.flatnonzero(np.diff(comp, prepend=-1))  # each start component's rows
    for a, b in zip(first, [*first[1:], comp.size]):
        reach = np.zeros(c, dtype=bool)
        reach[breadth_first_order(dag, int(comp[a]), directed=True,
                                  return_predecessors=False)] = True
        out[rows[a:b]] |= reach[target[a:b]]
    return out


@dataclasses.dataclass(frozen=True)
class GameArc:
    """Directed arc ``tail → head`` with cost family ``cost``; ``blocked`` arcs carry no flow."""

    tail: Hashable
    head: Hashable
    cost: ArcCost
    blocked: bool = False


@dataclasses.dataclass(frozen=True)
class Commodity:
    """Demand ``demand`` (flow units, ≥ 0) from ``origin`` to ``destination``."""

    origin: Hashable
    destination: Hashable
    demand: float


class RoutingGame:
    """A validated multi-commodity nonatomic routing game.

    Args:
        nodes: node labels (any hashable), in array order.
        arcs: the arcs (parallel arcs allowed).
        commodities: OD demands; several with the same (origin, destination) are summed.
        non_through: nodes that flow may enter or leave only as its own origin or destination
            (TNTP zones numbered below the first thru node).

    Raises:
        TopologyError: empty node list, duplicate node, arc or commodity with an unknown node,
            negative or non-finite demand, an origin equal to its destination with positive
            demand, no positive demand at all, or a destination not reachable from its origin
            over unblocked arcs.
    """

    def __init__(self, nodes: Sequence[Hashable], arcs: Sequence[GameArc],
                 commodities: Sequence[Commodity], *,
                 non_through: Sequence[Hashable] = ()) -> None:
        nodes = tuple(nodes)
        if not nodes:
            raise TopologyError("nodes: a routing game needs at least one node")
        index: dict[Hashable, int] = {}
        for k, v in enumerate(nodes):
            if v in index:
                raise TopologyError(f"nodes[{k}]: duplicate node {v!r}")
            index[v] = k
        self.nodes = nodes
        self._index = index
        self._arcs: tuple[GameArc, ...] | None = tuple(arcs)
        if not self._arcs:
            raise TopologyError("arcs: a routing game needs at least one arc")
        self.tails = np.array([self._node(a.tail, f"arcs[{i}].tail") for i, a in
                               enumerate(self._arcs)], dtype=int)
        self.heads = np.array([self._node(a.head, f"arcs[{i}].head") for i, a in
                               enumerate(self._arcs)], dtype=int)
        self.blocked = np.array([bool(a.blocked) for a in self._arcs])
        self.costs = ArcCostBank([a.cost for a in self._arcs])
        self.non_through = np.zeros(len(nodes), dtype=bool)
        for v in non_through:
            self.non_through[self._node(v, "non_through")] = True
        self._build_demand(commodities)
        self._check_reachability()

    @classmethod
    def from_arrays(cls, n_nodes: int, tails: np.ndarray, heads: np.ndarray,
                    costs: ArcCostBank, blocked: np.ndarray, origins: np.ndarray,
                    destinations: np.ndarray, demand: np.ndarray,
                    non_through: np.ndarray) -> RoutingGame:
        """The game on nodes 1..``n_nodes`` built from arrays, vectorised (a TNTP file's
        200,000 OD pairs in milliseconds, where :class:`Commodity` objects take seconds):
        ``tails``/``heads`` node indices (0-based) per arc, ``costs`` their bank, ``blocked``
        arc mask; OD pairs ``origins``/``destinations`` (node indices) with ``demand`` (summed
        over repeats; zero entries dropped); ``non_through`` node mask. The same game (and
        the same checks) as the constructor with labels 1..n; ``arcs`` is built on first
        use.

        Raises:
            TopologyError: as the constructor.
        """
        game = cls.__new__(cls)
        game.nodes = tuple(range(1, n_nodes + 1))
        game._index = {v: v - 1 for v in game.nodes}
        game._arcs = None
        game.tails, game.heads = np.asarray(tails, dtype=int), np.asarray(heads, dtype=int)
        if not game.tails.size:
            raise TopologyError("arcs: a routing game needs at least one arc")
        for what, idx in (("tail", game.tails), ("head", game.heads)):
            bad = np.flatnonzero((idx < 0) | (idx >= n_nodes))
            if bad.size:
                raise TopologyError(f"arcs[{bad[0]}].{what}: unknown node {idx[bad[0]] + 1!r}")
        game.blocked = np.asarray(blocked, dtype=bool)
        game.costs = costs
        game.non_through = np.asarray(non_through, dtype=bool).copy()
        o, d = np.asarray(origins, dtype=int), np.asarray(destinations, dtype=int)
        q = np.asarray(demand, dtype=float)
        bad = np.flatnonzero(~np.isfinite(q) | (q < 0))
        if bad.size:
            k = bad[0]
            raise TopologyError(f"commodities[{k}] ({o[k] + 1!r} -> {d[k] + 1!r}): demand must "
                                f"be non-negative and finite, got {q[k]!r}")
        pos = q > 0
        same = np.flatnonzero(pos & (o == d))
        if same.size:
            raise TopologyError(f"commodities[{same[0]}]: origin and destination are both "
                                f"{o[same[0]] + 1!r}; give such demand as 0 or omit it")
        if not pos.any():
            raise TopologyError("commodities: a routing game needs at least one commodity with "
                                "positive demand between two different nodes")
        game.origins = np.unique(o[pos])
        game.demand = np.zeros((game.origins.size, n_nodes))
        k = np.searchsorted(game.origins, o[pos])
        flat, at, q = game.demand.reshape(-1), k * n_nodes + d[pos], q[pos]
        _, inv, counts = np.unique(at, return_inverse=True, return_counts=True)
        once = counts[inv] == 1
        flat[at[once]] = q[once]
        for i in np.flatnonzero(~once):  # repeated pairs: summed in order, as the constructor
            flat[at[i]] += q[i]
        game._check_reachability(k, d[pos])
        return game

    @property
    def arcs(self) -> tuple[GameArc, ...]:
        """The arcs (of a game built by :meth:`from_arrays`: made on first use)."""
        if self._arcs is None:
            self._arcs = tuple(GameArc(self.nodes[t], self.nodes[h], c, bool(b)) for t, h, c, b
                               in zip(self.tails, self.heads, self.costs.costs, self.blocked))
        return self._arcs

    # ------------------------------------------------------------------ construction
    def _node(self, v: Hashable, what: str) -> int:
        try:
            return self._index[v]
        except (KeyError, TypeError):
            raise TopologyError(f"{what}: unknown node {v!r}") from None

    def _build_demand(self, commodities: Sequence[Commodity]) -> None:
        orig: dict[int, int] = {}
        rows: list[np.ndarray] = []
        for k, c in enumerate(commodities):
            o = self._node(c.origin, f"commodities[{k}].origin")
            d = self._node(c.destination, f"commodities[{k}].destination")
            dem = float(c.demand)
            if not np.isfinite(dem) or dem < 0:
                raise TopologyError(f"commodities[{k}] ({c.origin!r} -> {c.destination!r}): "
                                    f"demand must be non-negative and finite, got {c.demand!r}")
            if dem == 0:
                continue
            if o == d:
                raise TopologyError(f"commodities[{k}]: origin and destination are both "
                                    f"{c.origin!r}; give such demand as 0 or omit it")
            if o not in orig:
                orig[o] = len(rows)
                rows.append(np.zeros(len(self.nodes)))
            rows[orig[o]][d] += dem
        if not orig:
            raise TopologyError("commodities: a routing game needs at least one commodity with "
                                "positive demand between two different nodes")
        self.origins = np.array(sorted(orig), dtype=int)
        self.demand = np.array([rows[orig[o]] for o in self.origins]).reshape(
            len(self.origins), len(self.nodes))

    def usable(self, k: int) -> np.ndarray:
        """Boolean mask of the arcs origin number ``k`` may use (unblocked, through rule)."""
        return usable_arcs(self.tails, self.heads, self.blocked, self.non_through,
                           int(self.origins[k]))

    def _check_reachability(self, kk: np.ndarray | None = None,
                            dd: np.ndarray | None = None) -> None:
        """Every OD pair with demand (origin number ``kk``, destination ``dd``; default: the
        demand matrix's) reachable, else TopologyError naming the first in row-major order."""
        if kk is None or dd is None:
            kk, dd = np.nonzero(self.demand > 0)
        bad = np.flatnonzero(~reaches(len(self.nodes), self.tails, self.heads, self.blocked,
                                      self.non_through, self.origins[kk], dd))
        if bad.size:
            first = bad[np.lexsort((dd[bad], kk[bad]))[0]]
            k, d = kk[first], dd[first]
            raise TopologyError(
                f"demand from node {self.nodes[self.origins[k]]!r} to node {self.nodes[d]!r} "
                f"({self.demand[k, d]:g}) cannot be routed: no path over unblocked arcs"
                f"{' avoiding non-through zones' if self.non_through.any() else ''}")

    # ------------------------------------------------------------------ views
    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return len(self.nodes)

    @property
    def n_arcs(self) -> int:
        """Number of arcs."""
        return len(self.tails)

    @property
    def total_demand(self) -> float:
        """Total demand Σ d_od (flow units)."""
        return float(self.demand.sum())

    def index(self, node: Hashable) -> int:
        """Array index of ``node``."""
        return self._node(node, "node")

    def arc_index(self, tail: Hashable, head: Hashable) -> int:
        """Index of the (first) arc ``tail → head``."""
        t, h = self.index(tail), self.index(head)
        hit = np.flatnonzero((self.tails == t) & (self.heads == h))
        if hit.size == 0:
            raise TopologyError(f"no arc {tail!r} -> {head!r}")
        return int(hit[0])

    def with_demand_scale(self, factor: float) -> RoutingGame:
        """A copy with every demand multiplied by ``factor`` (> 0)."""
        comms = [Commodity(self.nodes[o], self.nodes[d], float(factor) * self.demand[k, d])
                 for k, o in enumerate(self.origins) for d in np.flatnonzero(self.demand[k])]
        return RoutingGame(self.nodes, self.arcs, comms,
                           non_through=[self.nodes[v] for v in np.flatnonzero(self.non_through)])

    def without_arcs(self, which: Sequence[int]) -> RoutingGame:
        """A copy with the arcs at indices ``which`` blocked (e.g. Braess without the bridge)."""
        arcs = [dataclasses.replace(a, blocked=True) if i in set(which) else a
                for i, a in enumerate(self.arcs)]
        comms = [Commodity(self.nodes[o], self.nodes[d], self.demand[k, d])
                 for k, o in enumerate(self.origins) for d in np.flatnonzero(self.demand[k])]
        return RoutingGame(self.nodes, arcs, comms,
                           non_through=[self.nodes[v] for v in np.flatnonzero(self.non_through)])

    def origin_balance(self) -> np.ndarray:
        """Node supply per origin (K × n): +total demand at the origin, −d_od at destinations."""
        b = -self.demand.copy()
        b[np.arange(len(self.origins)), self.origins] += self.demand.sum(axis=1)
        return b

    def describe(self) -> dict[str, Any]:
        """Sizes, for messages and benchmarks."""
        return {"nodes": self.n_nodes, "arcs": self.n_arcs, "origins": int(len(self.origins)),
                "total_demand": self.total_demand}
