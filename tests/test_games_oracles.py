"""Routing-game equilibria against closed forms and classic PoA bounds (float64)."""

from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from lbtheory.errors import ModelError
from lbtheory.games import (
    braess,
    grid_game,
    mm1_two_link,
    pigou,
    price_of_anarchy,
    system_optimum,
    wardrop_equilibrium,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tntp" / "Braess-Example"


def roughgarden(d):
    return 1.0 / (1.0 - d * (d + 1.0) ** (-(d + 1.0) / d))


def test_pigou_linear_poa_is_four_thirds():
    ue, so = wardrop_equilibrium(pigou(1)), system_optimum(pigou(1))
    assert ue.total_travel_time == pytest.approx(1.0, abs=1e-9)
    assert so.total_travel_time == pytest.approx(0.75, abs=1e-9)
    np.testing.assert_allclose(so.arc_flow, [0.5, 0.5], atol=1e-9)
    assert ue.total_travel_time / so.total_travel_time == pytest.approx(4 / 3, abs=1e-6)


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_pigou_degree_d_attains_roughgarden_bound(d):
    # closed form of the bound, independent of the code: SO puts (d+1)^{-1/d} on the x^d link
    assert price_of_anarchy(pigou(d)) == pytest.approx(roughgarden(d), abs=1e-6)
    so = system_optimum(pigou(d))
    assert so.arc_flow[1] == pytest.approx((d + 1.0) ** (-1.0 / d), abs=1e-7)


def test_pigou_non_integer_degree():
    d = 2.5
    assert price_of_anarchy(pigou(d)) == pytest.approx(roughgarden(d), abs=1e-6)


@pytest.mark.parametrize("u, R", [(1.0, 0.5), (2.0, 1.9), (5.0, 1.0)])
def test_mm1_two_link_poa(u, R):
    assert price_of_anarchy(mm1_two_link(u, R)) == pytest.approx(
        0.5 * (1 + np.sqrt(u / (u - R))), abs=1e-6)


def test_braess_published_values():
    ue, so = wardrop_equilibrium(braess()), system_optimum(braess())
    nb = wardrop_equilibrium(braess(bridge=False))
    np.testing.assert_allclose(ue.arc_flow, [4, 2, 2, 2, 4], atol=1e-7)
    # path 1-3-2 cost 10·4 + 50 + 2 = 92 and 1-3-4-2 = 40 + 12 + 40 = 92
    c = ue.arc_cost
    assert c[0] + c[2] == pytest.approx(92.0, abs=1e-6)
    assert c[0] + c[3] + c[4] == pytest.approx(92.0, abs=1e-6)
    assert ue.total_travel_time == pytest.approx(552.0, abs=1e-6)
    assert nb.total_travel_time == pytest.approx(498.0, abs=1e-6)
    assert nb.arc_cost[0] + nb.arc_cost[2] == pytest.approx(83.0, abs=1e-6)
    assert so.total_travel_time == pytest.approx(498.0, abs=1e-6)
    assert ue.total_travel_time / so.total_travel_time == pytest.approx(552 / 498, abs=1e-8)


def _wardrop_violation(game, res, cost):
    """max over used paths of (path cost − cheapest path cost), by path enumeration."""
    G = nx.MultiDiGraph()
    for a in range(game.n_arcs):
        if not game.blocked[a]:
            G.add_edge(int(game.tails[a]), int(game.heads[a]), key=a)
    worst = 0.0
    for k, o in enumerate(game.origins):
        flow = res.origin_flow[k]
        for d in np.flatnonzero(game.demand[k] > 0):
            paths = list(nx.all_simple_edge_paths(G, int(o), int(d)))
            costs = [sum(cost[a] for _, _, a in p) for p in paths]
            best = min(costs)
            for p, cp_ in zip(paths, costs):
                if min(flow[a] for _, _, a in p) > 1e-6 * game.total_demand:
                    worst = max(worst, (cp_ - best) / best)
    return worst


@pytest.mark.parametrize("seed", [0, 1])
def test_wardrop_condition_on_every_used_path(seed):
    game = grid_game(3, 3, seed=seed, n_origins=3, family="affine")
    ue = wardrop_equilibrium(game)
    assert _wardrop_violation(game, ue, ue.arc_cost) < 1e-6
    so = system_optimum(game)
    assert _wardrop_violation(game, so, game.costs.marginal(so.arc_flow)) < 1e-6
    assert ue.relative_gap < 1e-8 and so.relative_gap < 1e-8
    assert so.total_travel_time <= ue.total_travel_time * (1 + 1e-9)


def _random_parallel(seed, family):
    """Random parallel-link game s → t; half the links have no constant term (Pigou-like)."""
    from lbtheory.games import Commodity, GameArc, Polynomial, RoutingGame

    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 5))
    arcs = []
    for i in range(k):
        a = 0.0 if i % 2 == 0 else rng.uniform(0.0, 2.0)
        b = rng.uniform(0.1, 2.0)
        power = 1.0 if family == "affine" else 4.0
        arcs.append(GameArc("s", "t", Polynomial(a, b, 1.0, power)))
    return RoutingGame(["s", "t"], arcs, [Commodity("s", "t", rng.uniform(0.1, 3.0))])


@pytest.mark.parametrize("seed", range(6))
def test_random_affine_games_poa_at_most_four_thirds(seed):
    for game in (grid_game(3, 4, seed=seed, n_origins=4, family="affine",
                           congestion=(0.1, 0.3)[seed % 2]), _random_parallel(seed, "affine")):
        poa = price_of_anarchy(game)
        assert 1.0 - 1e-9 <= poa <= 4.0 / 3.0 + 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_random_bpr4_games_poa_below_degree4_bound(seed):
    for game in (grid_game(3, 4, seed=seed, n_origins=4), _random_parallel(seed, "bpr")):
        poa = price_of_anarchy(game)
        assert 1.0 - 1e-9 <= poa <= roughgarden(4) + 1e-9


def test_relative_gap_and_aec_of_a_non_equilibrium():
    # all flow on the constant link of Pigou: TSTT = 1, SPTT = 0 (the x link costs 0) → gap 1
    from lbtheory.games import evaluate_flow

    res = evaluate_flow(pigou(1), np.array([[1.0, 0.0]]), "wardrop")
    assert res.relative_gap == pytest.approx(1.0)
    assert res.average_excess_cost == pytest.approx(1.0)


def test_unknown_objective():
    from lbtheory.games import evaluate_flow

    with pytest.raises(ModelError, match="objective: expected one of"):
        evaluate_flow(pigou(1), np.array([[1.0, 0.0]]), "nash")


def test_cvxpy_refuses_non_dcp_arcs():
    from lbtheory.games import ServiceArc
    from lbtheory.games.game import Commodity, GameArc, RoutingGame
    from lbtheory.models import SoftplusLatency

    arc = ServiceArc("latency", SoftplusLatency(0.5, 0.05, 5.0, 1.0))
    game = RoutingGame(["s", "t"], [GameArc("s", "t", arc)], [Commodity("s", "t", 1.0)])
    with pytest.raises(ModelError, match="no exact convex CVXPY form"):
        wardrop_equilibrium(game)


def test_solver_failure_is_typed():
    from lbtheory.errors import SolverError, SolveStatus

    # demand above the M/M/1 capacity: infeasible program
    game = mm1_two_link(1.0, 0.5).with_demand_scale(10.0)
    game = game.without_arcs([1])
    with pytest.raises(SolverError, match="returned status"):
        wardrop_equilibrium(game)
    res = wardrop_equilibrium(game, throw=False)
    assert res.status is SolveStatus.FAILED and np.isnan(res.total_travel_time)


def test_unavailable_solver_is_typed():
    from lbtheory.errors import SolverError

    with pytest.raises(SolverError, match="solver NOT_A_SOLVER failed"):
        wardrop_equilibrium(pigou(1), solver="NOT_A_SOLVER")
