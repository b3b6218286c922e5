"""RoutingGame construction, validation, shortest paths and all-or-nothing loading."""

import networkx as nx
import numpy as np
import pytest

from lbtheory.equilibrium import solve_wardrop
from lbtheory.errors import ParameterError, TopologyError
from lbtheory.games import (
    Commodity,
    GameArc,
    RoutingGame,
    affine,
    all_or_nothing,
    braess,
    constant,
    grid_game,
    shortest_paths,
)


def _game(**kw):
    nodes = kw.pop("nodes", ["a", "b", "c"])
    arcs = kw.pop("arcs", [GameArc("a", "b", affine(1, 1)), GameArc("b", "c", affine(1, 1))])
    comms = kw.pop("comms", [Commodity("a", "c", 1.0)])
    return RoutingGame(nodes, arcs, comms, **kw)


@pytest.mark.parametrize("kw, match", [
    ({"nodes": []}, "at least one node"),
    ({"nodes": ["a", "a", "b", "c"]}, "duplicate node 'a'"),
    ({"arcs": []}, "at least one arc"),
    ({"arcs": [GameArc("a", "z", affine(1, 1))]}, r"arcs\[0\].head: unknown node 'z'"),
    ({"comms": [Commodity("q", "c", 1.0)]}, r"commodities\[0\].origin: unknown node 'q'"),
    ({"comms": [Commodity("a", "c", -1.0)]}, "demand must be non-negative"),
    ({"comms": [Commodity("a", "c", float("inf"))]}, "demand must be non-negative and finite"),
    ({"comms": [Commodity("a", "a", 1.0)]}, "origin and destination are both 'a'"),
    ({"comms": [Commodity("c", "a", 1.0)]}, "from node 'c' to node 'a'.*no path"),
    ({"non_through": ["b"]}, "avoiding non-through zones"),
    ({"non_through": ["x"]}, "non_through: unknown node 'x'"),
])
def test_validation(kw, match):
    with pytest.raises(TopologyError, match=match):
        _game(**kw)


def test_lookups():
    g = braess()
    assert g.arc_index(3, 4) == 3 and g.index(4) == 3
    with pytest.raises(TopologyError, match="no arc 2 -> 1"):
        g.arc_index(2, 1)
    with pytest.raises(TopologyError, match="unknown node 9"):
        g.index(9)
    assert g.describe() == {"nodes": 4, "arcs": 5, "origins": 1, "total_demand": 6.0}
    assert g.with_demand_scale(0.5).total_demand == 3.0
    np.testing.assert_array_equal(g.origin_balance(), [[6.0, -6.0, 0.0, 0.0]])


def test_shortest_paths_match_networkx_and_parallel_arcs():
    g = grid_game(4, 5, seed=2, n_origins=5)
    cost = np.random.default_rng(0).uniform(0.1, 3.0, g.n_arcs)
    dist, pred = shortest_paths(g, cost)
    G = nx.DiGraph()
    for a in range(g.n_arcs):
        G.add_edge(int(g.tails[a]), int(g.heads[a]), w=cost[a])
    for k, o in enumerate(g.origins):
        ref = nx.single_source_dijkstra_path_length(G, int(o), weight="w")
        np.testing.assert_allclose([dist[k, v] for v in ref], list(ref.values()), rtol=1e-12)
    # the all-or-nothing load conserves flow and costs exactly SPTT
    F = all_or_nothing(g, pred)
    assert float((F * cost).sum()) == pytest.approx(float((g.demand * dist).sum()), rel=1e-12)
    # parallel arcs: the cheaper one is used
    two = [GameArc("s", "t", constant(2.0)), GameArc("s", "t", constant(1.0))]
    p = RoutingGame(["s", "t"], two, [Commodity("s", "t", 3.0)])
    _, pp = shortest_paths(p, np.array([2.0, 1.0]))
    np.testing.assert_array_equal(all_or_nothing(p, pp), [[0.0, 3.0]])


def test_non_through_zone_is_not_crossed():
    # 1 → 2 → 3 is cheap but zone 2 is not a through node: 1 → 3 direct must be used
    arcs = [GameArc(1, 2, constant(1.0)), GameArc(2, 3, constant(1.0)),
            GameArc(1, 3, constant(5.0)), GameArc(2, 1, constant(1.0))]
    g = RoutingGame([1, 2, 3], arcs, [Commodity(1, 3, 1.0), Commodity(2, 3, 2.0)],
                    non_through=[2])
    ue = solve_wardrop(g)
    np.testing.assert_allclose(ue.arc_flow, [0.0, 2.0, 1.0, 0.0], atol=1e-9)


def test_without_arcs_blocks_the_bridge():
    g = braess().without_arcs([3])
    assert g.blocked.tolist() == [False, False, False, True, False]
    assert solve_wardrop(g).arc_flow[3] == 0.0


def test_shortest_paths_respect_non_through_nodes_like_networkx():
    # oracle: networkx on the graph without the arcs leaving non-through nodes (except the
    # origin's own); origins both through and non-through
    base = grid_game(3, 4, seed=4, n_origins=6)
    nt = [1, 6]  # the grid stays connected without passing through them
    g = RoutingGame(base.nodes, base.arcs,
                    [Commodity(base.nodes[o], base.nodes[d], base.demand[k, d])
                     for k, o in enumerate(base.origins) for d in np.flatnonzero(base.demand[k])],
                    non_through=nt)
    assert set(g.origins) & set(nt) and set(g.origins) - set(nt)
    cost = np.random.default_rng(1).uniform(0.1, 3.0, g.n_arcs)
    dist, _ = shortest_paths(g, cost)
    free, _ = shortest_paths(base, cost)
    assert np.any(dist > free * (1 + 1e-9))  # the rule lengthens some shortest paths
    for k, o in enumerate(g.origins):
        G = nx.DiGraph()
        G.add_nodes_from(range(g.n_nodes))
        for a in range(g.n_arcs):
            t = int(g.tails[a])
            if t not in nt or t == o:
                G.add_edge(t, int(g.heads[a]), w=cost[a])
        ref = nx.single_source_dijkstra_path_length(G, int(o), weight="w")
        want = np.array([ref.get(v, np.inf) for v in range(g.n_nodes)])
        np.testing.assert_allclose(dist[k], want, rtol=1e-12)
        # the solver's per-origin arc mask is the same rule
        usable = g.usable(k)
        assert not usable[np.isin(g.tails, nt) & (g.tails != o)].any()


@pytest.mark.parametrize("kw, err, match", [
    ({"rows": 0, "cols": 3}, ParameterError, "rows must be an integer >= 1, got 0"),
    ({"rows": 2.5, "cols": 3}, ParameterError, "rows must be an integer >= 1, got 2.5"),
    ({"rows": 2, "cols": True}, ParameterError, "cols must be an integer >= 1, got True"),
    ({"rows": 1, "cols": 1}, ParameterError, "at least 2 nodes, got 1x1"),
    ({"rows": 2, "cols": 2, "n_origins": 5}, ParameterError,
     r"n_origins must be an integer in \[1, 4\] \(at most rows·cols\), got 5"),
    ({"rows": 2, "cols": 2, "n_origins": 0}, ParameterError, "n_origins .*got 0"),
    ({"rows": 2, "cols": 2, "family": "cubic"}, ParameterError,
     r"family must be 'bpr' or 'affine', got 'cubic'"),
])
def test_grid_game_validation(kw, err, match):
    rows, cols = kw.pop("rows"), kw.pop("cols")
    with pytest.raises(err, match=match):
        grid_game(rows, cols, seed=0, **kw)
