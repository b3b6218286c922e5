"""TNTP conventions, one tiny synthetic file pair per trap (examples/tntp/traps/), each solved by
the CVXPY oracle and by gradient projection and checked against its closed form."""

import json
from pathlib import Path

import numpy as np
import pytest

from lbtheory.cli import main
from lbtheory.equilibrium import solve_wardrop
from lbtheory.errors import DataFormatError
from lbtheory.games import certify, evaluate_flow
from lbtheory.games.tntp import load_tntp_game, read_tntp_network

TRAPS = Path(__file__).resolve().parents[1] / "examples" / "tntp" / "traps"
#: the solver that must have answered (no silent fallback from a broken gradient projection)
SOLVER = {"cvxpy": "CLARABEL", "gp": "gradient_projection"}


def _game(name):
    return load_tntp_game(TRAPS / f"{name}_net.tntp", TRAPS / f"{name}_trips.tntp")


@pytest.mark.parametrize("method", ["cvxpy", "gp"])
@pytest.mark.parametrize("name, flows, cost", [
    # 15 + x = 14 + x' (toll factor 1 × toll 5; distance factor 0.5 × length 4), x + x' = 10
    ("Toll", [4.5, 5.5], 19.5),
    # 0 + (2 + x) = 4 + x', x + x' = 6: the zero-time link carries 4 at cost 0
    ("ZeroFFT", [4.0, 4.0, 2.0], 6.0),
    # constant 20 (B = 1e-71) against 10 + x: the BPR link fills to cost 20
    ("TinyB", [5.0, 10.0], 20.0),
])
def test_trap_closed_forms(name, flows, cost, method):
    game = _game(name)
    res = solve_wardrop(game, method=method)
    assert res.solver == SOLVER[method]
    np.testing.assert_allclose(res.arc_flow, flows, rtol=1e-9, atol=1e-9)
    assert res.total_travel_time == pytest.approx(cost * game.total_demand, rel=1e-10)
    assert res.relative_gap <= 1e-10


def test_toll_and_distance_factors_are_read_and_default_to_zero(tmp_path):
    net = read_tntp_network(TRAPS / "Toll_net.tntp")
    assert (net.toll_factor, net.distance_factor) == (1.0, 0.5)
    plain = tmp_path / "p_net.tntp"
    text = (TRAPS / "Toll_net.tntp").read_text()
    plain.write_text(text.replace("<TOLL FACTOR> 1.0\n", "").replace("<DISTANCE FACTOR> 0.5\n",
                                                                       ""))
    game = load_tntp_game(plain, TRAPS / "Toll_trips.tntp")
    # plain BPR travel times 10 + x and 12 + x: split 6 / 4
    np.testing.assert_allclose(solve_wardrop(game, method="gp").arc_flow, [6.0, 4.0],
                               rtol=1e-9)
    bad = tmp_path / "b_net.tntp"
    bad.write_text(text.replace("<TOLL FACTOR> 1.0", "<TOLL FACTOR> -2"))
    with pytest.raises(DataFormatError, match=r"b_net.tntp:\d+: <TOLL FACTOR> must be "
                                              r"non-negative, got -2"):
        read_tntp_network(bad)


@pytest.mark.parametrize("method", ["cvxpy", "gp"])
def test_first_thru_node_blocks_the_shortcut_through_a_zone(method):
    game = _game("ThruNode")
    res = solve_wardrop(game, method=method)
    assert res.solver == SOLVER[method]
    # arcs: 1->2, 2->3 (cheap, through zone 2: unusable for 1 -> 3), 1->4, 4->3
    np.testing.assert_allclose(res.arc_flow, [2.0, 0.0, 3.0, 3.0], atol=1e-9)
    assert res.total_travel_time == pytest.approx(2 * 1 + 3 * 13, rel=1e-10)


def test_certify_refuses_flow_through_a_non_through_zone():
    # the 1 -> 3 demand (3) sent 1 -> 2 -> 3 through zone 2: conserving and "cheaper" (its gap
    # against the usable shortest path is negative), but it breaks the arc-use rule
    game = _game("ThruNode")
    bad = evaluate_flow(game, np.array([[5.0, 3.0, 0.0, 0.0]]), "wardrop")
    ok, why = certify(game, bad, 1e-10)
    assert not ok and "may not use" in why
    good = solve_wardrop(game, method="cvxpy")
    assert certify(game, good, 1e-10) == (True, "")


def test_cli_method_gp_json(capsys):
    code = main(["equilibrium", str(TRAPS / "Toll_net.tntp"), "--trips",
                 str(TRAPS / "Toll_trips.tntp"), "--method", "gp", "--gap", "1e-12", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    ue = out["equilibria"]["wardrop"]
    assert ue["solver"] == "gradient_projection" and ue["status"] == "optimal"
    assert ue["relative_gap"] <= 1e-12
    np.testing.assert_allclose(ue["arc_flow"], [4.5, 5.5], rtol=1e-9)
    # Beckmann: 15·4.5 + 4.5²/2 + 14·5.5 + 5.5²/2
    assert ue["beckmann_objective"] == pytest.approx(67.5 + 10.125 + 77 + 15.125, rel=1e-10)
