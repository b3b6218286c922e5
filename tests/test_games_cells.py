"""CellNetwork → RoutingGame: both equilibrium engines give the same equilibria (THEORY §5)."""

import numpy as np
import pytest

from lbtheory.costs import total_latency_rate
from lbtheory.equilibrium import solve_system_optimum, solve_wardrop
from lbtheory.errors import ModelError
from lbtheory.games import (
    ServiceArc,
    cell_inflows,
    frank_wolfe,
    routing_from_game,
    to_routing_game,
)
from lbtheory.instances import mm1_pigou, random_network, spill_example, symmetric_two_cell

NETWORKS = {
    "two_cell": symmetric_two_cell,
    "spill": spill_example,
    "mm1_pigou": mm1_pigou,
    "random5": lambda: random_network(5, seed=1),
    "random7": lambda: random_network(7, seed=7, arc_prob=0.4),
}


@pytest.mark.parametrize("name", NETWORKS)
def test_same_equilibria_both_paths(name):
    net = NETWORKS[name]()
    game = to_routing_game(net)
    for ours, theirs in ((solve_wardrop(game), solve_wardrop(net)),
                         (solve_system_optimum(game), solve_system_optimum(net))):
        z = cell_inflows(net, ours.arc_flow)
        np.testing.assert_allclose(z, theirs.inflow, rtol=1e-8, atol=1e-8 * net.total_demand)
        # TSTT of the game = total latency rate C of the cell network (Little's law)
        assert ours.total_travel_time == pytest.approx(theirs.total_latency_rate, rel=1e-8)
        x = routing_from_game(net, ours.arc_flow)
        C = total_latency_rate(theirs.workload, x, net.arrival_rates, net.delays)
        assert C == pytest.approx(theirs.total_latency_rate, rel=1e-8)


def test_mm1_cells_become_dcp_arcs():
    from lbtheory.games import MM1, check_convex_form

    game = to_routing_game(spill_example())
    check_convex_form(game.costs)  # raises ModelError for a family without a DCP form
    assert [type(a.cost) for a in game.arcs[-2:]] == [MM1, MM1]
    assert game.n_arcs == len(spill_example().arcs) + 2


def test_other_service_models_use_service_arcs_and_frank_wolfe():
    net = random_network(4, seed=3, softplus_share=1.0, utilisation=0.3)
    game = to_routing_game(net)
    assert any(isinstance(a.cost, ServiceArc) for a in game.arcs)
    with pytest.raises(ModelError, match="no exact convex CVXPY form"):
        solve_wardrop(game, method="cvxpy")
    res = frank_wolfe(game, method="bfw", tol=1e-7, time_limit=30)
    ref = solve_wardrop(net)
    np.testing.assert_allclose(cell_inflows(net, res.arc_flow), ref.inflow, rtol=1e-3,
                               atol=1e-4 * net.total_demand)
    # method="auto" falls back past CVXPY (no exact form) to a first-order solver on ServiceArcs
    auto = solve_wardrop(game)
    np.testing.assert_allclose(cell_inflows(net, auto.arc_flow), ref.inflow, rtol=1e-3,
                               atol=1e-4 * net.total_demand)
