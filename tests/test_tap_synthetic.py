"""Seeded synthetic networks of classic TNTP sizes, and their TNTP round trip."""

import numpy as np
import pytest

from lbtheory.errors import ModelError
from lbtheory.games import gradient_projection, shortest_paths
from lbtheory.games.synthetic import SIZES, synthetic_network
from lbtheory.games.tntp import load_tntp_game, write_tntp


@pytest.mark.parametrize("name", ["sioux_falls", "anaheim"])
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


def test_tntp_round_trip(tmp_path):
    game, data = synthetic_network("anaheim", seed=1)
    net, trips = tmp_path / "A_net.tntp", tmp_path / "A_trips.tntp"
    write_tntp(net, trips, data)
    back = load_tntp_game(net, trips)
    np.testing.assert_array_equal(back.non_through, game.non_through)
    a, _ = gradient_projection(game, tol=1e-10)
    b, _ = gradient_projection(back, tol=1e-10)
    assert b.beckmann_objective == pytest.approx(a.beckmann_objective, rel=1e-9)
    # congested as intended: the equilibrium is far from free flow
    assert a.total_travel_time > 1.2 * float(np.dot(a.arc_flow, game.costs.cost(0 * a.arc_flow)))


def test_bad_size():
    with pytest.raises(ModelError, match="size must be one of sioux_falls, anaheim"):
        synthetic_network("paris")
    with pytest.raises(ModelError, match="links must be even"):
        synthetic_network((100, 7, 10))
