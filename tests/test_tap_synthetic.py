"""Seeded synthetic networks of classic TNTP sizes, and their TNTP round trip."""

import numpy as np
import pytest

from lbtheory.errors import ParameterError, SolveStatus
from lbtheory.games import bush_assignment, certify, gradient_projection, shortest_paths
from lbtheory.games.synthetic import SIZES, synthetic_network
from lbtheory.games.tntp import load_tntp_game, write_tntp


# Chicago size is built by benchmarks/bench_tap.py (three builds here would take ~10 s)
@pytest.mark.parametrize("name", [s for s in SIZES if s != "chicago_sketch"])
def test_sizes_and_seeding(name):
    game, data = synthetic_network(name, seed=4)
    n, links, zones = SIZES[name]
    assert (game.n_nodes, game.n_arcs, len(game.origins)) == (n, links, zones)
    again, _ = synthetic_network(name, seed=4)
    np.testing.assert_array_equal(game.demand, again.demand)
    other, _ = synthetic_network(name, seed=5)
    assert not np.array_equal(game.demand, other.demand)
    # strongly connected over the arc-use rule: every OD pair has a finite distance
    dist, _ = shortest_paths(game, game.costs.cost(np.zeros(game.n_arcs)))
    assert np.all(np.isfinite(dist[game.demand > 0]))
    assert data["first_thru_node"] == (1 if zones == n else zones + 1)


@pytest.mark.parametrize("name", ["barcelona", "winnipeg"])
def test_bush_certifies_the_larger_sizes(name):
    """Barcelona and Winnipeg sizes (the two classic networks CVXPY failed on in issue 13): the
    bush solver reaches 1e-10 and gradient projection agrees on the Beckmann objective."""
    game, _ = synthetic_network(name, seed=0)
    a = bush_assignment(game, tol=1e-10)
    assert a.status is SolveStatus.OPTIMAL and a.relative_gap <= 1e-10
    ok, why = certify(game, a, 1e-10)
    assert ok, why
    b = gradient_projection(game, tol=1e-7)
    assert b.beckmann_objective == pytest.approx(a.beckmann_objective, rel=1e-8)


def test_tntp_round_trip(tmp_path):
    game, data = synthetic_network("anaheim", seed=1)
    net, trips = tmp_path / "A_net.tntp", tmp_path / "A_trips.tntp"
    write_tntp(net, trips, data)
    back = load_tntp_game(net, trips)
    np.testing.assert_array_equal(back.non_through, game.non_through)
    a = gradient_projection(game, tol=1e-10)
    b = gradient_projection(back, tol=1e-10)
    assert b.beckmann_objective == pytest.approx(a.beckmann_objective, rel=1e-9)
    # congested as intended: the equilibrium is far from free flow
    assert a.total_travel_time > 1.2 * float(np.dot(a.arc_flow, game.costs.cost(0 * a.arc_flow)))


def test_bad_size():
    with pytest.raises(ParameterError, match="size must be one of sioux_falls, anaheim"):
        synthetic_network("paris")
    with pytest.raises(ParameterError, match="links must be even"):
        synthetic_network((100, 7, 10))
    with pytest.raises(ParameterError, match=r"size links must be an integer >= 1, got 70.5"):
        synthetic_network((100, 70.5, 10))  # not truncated to 70
    with pytest.raises(ParameterError, match=r"or \(nodes, links, zones\), got \(100, 70\)"):
        synthetic_network((100, 70))
