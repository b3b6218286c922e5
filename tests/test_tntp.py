"""TNTP reader: the Braess example, the format's quirks, typed errors, and the CLI."""

import json
from pathlib import Path

import numpy as np
import pytest

from lbtheory.cli import main
from lbtheory.commands._tntp import run_tntp
from lbtheory.equilibrium import solve_system_optimum, solve_wardrop
from lbtheory.errors import DataFormatError
from lbtheory.games.tntp import load_tntp_game, read_tntp_flow, read_tntp_network, read_tntp_trips

EX = Path(__file__).resolve().parents[1] / "examples" / "tntp" / "Braess-Example"
NET, TRIPS = EX / "Braess_net.tntp", EX / "Braess_trips.tntp"

HEADER = """<NUMBER OF ZONES> {zones}
<NUMBER OF NODES> {nodes}
<FIRST THRU NODE> {first}
<NUMBER OF LINKS> {links}
<END OF METADATA>
~ init term cap len fft b power speed toll type ;
"""


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def _net(tmp_path, rows, *, zones=3, nodes=4, first=1, links=None, header=None,
         name="t_net.tntp"):
    head = header if header is not None else HEADER.format(
        zones=zones, nodes=nodes, first=first, links=len(rows) if links is None else links)
    return _write(tmp_path, name, head + "\n".join(rows) + "\n")


def _trips(tmp_path, body, zones=3):
    return _write(tmp_path, "t_trips.tntp",
                  f"<NUMBER OF ZONES> {zones}\n<TOTAL OD FLOW> 0\n<END OF METADATA>\n{body}\n")


def test_braess_file_published_values():
    game = load_tntp_game(NET, TRIPS)
    ue, so = solve_wardrop(game), solve_system_optimum(game)
    # BPR costs of the file: 1e-8(1 + 1e9 x) = 1e-8 + 10x, 50(1 + 0.02x) = 50 + x, 10(1 + 0.1x)
    assert ue.total_travel_time == pytest.approx(552.0, rel=1e-8)
    assert ue.arc_cost[0] + ue.arc_cost[2] == pytest.approx(92.0, rel=1e-8)
    assert so.total_travel_time == pytest.approx(498.0, rel=1e-8)
    assert ue.total_travel_time / so.total_travel_time == pytest.approx(1.1084337, abs=1e-6)
    # Beckmann objective in the file's own units: 2·(10·4²/2) + 2·(50·2 + 2²/2) + (10·2 + 2²/2)
    assert ue.beckmann_objective == pytest.approx(386.0, rel=1e-8)
    no_bridge = game.without_arcs([game.arc_index(3, 4)])
    assert solve_wardrop(no_bridge).total_travel_time == pytest.approx(498.0, rel=1e-8)


def test_quirks(tmp_path):
    rows = [
        "~ a comment line in the body",
        "\t1\t3\t10\t1\t2\t0.15\t4\t0\t0\t1\t;",
        "1 4 10 1 0 0.15 4 0 0 1;",                # zero free-flow time, glued ';'
        "3 2 10 1 3 0.15 0 0 0 1 ; ~ power 0",      # trailing comment, power 0
        "4 2 10 1 1 1e-14 2.5 0 0 1 ;",             # tiny B, non-integer power
        "3 4 0 1 1 0.15 4 0 0 1 ;",                 # blocked (capacity 0)
        "2 1 10 1 1 0.15 4 0 0 1 ;",                # out of zone 2 (non-through)
    ]
    net = read_tntp_network(_net(tmp_path, rows, zones=2, nodes=4, first=3, links=6))
    assert net.links.shape == (6, 10) and net.lines.tolist() == [8, 9, 10, 11, 12, 13]
    assert net.blocked.tolist() == [False, False, False, False, True, False]
    trips = _trips(tmp_path, "Origin 1\n  2 : 5.0;   1 : 0.0;\nOrigin 2\n 1 : 1.5;", zones=2)
    game = load_tntp_game(net.path, trips)
    assert game.non_through.tolist() == [True, True, False, False]  # zones below node 3
    np.testing.assert_allclose(game.costs.cost(np.zeros(6))[:5], [2.0, 0.0, 3.45, 1.0, 1.0])
    ue = solve_wardrop(game)
    assert ue.arc_flow[4] == 0.0                    # blocked link unused
    assert ue.arc_flow[1] == pytest.approx(5.0)     # zero-cost route 1 → 4 → 2 (≈ 1 + tiny)
    assert ue.arc_flow[5] == pytest.approx(1.5)


def test_flow_file(tmp_path):
    p = _write(tmp_path, "t_flow.tntp", "From \tTo \tVolume \tCost\n1\t3\t4.0\t40 ;\n3 2 2.5 52\n")
    t, h, v = read_tntp_flow(p)
    assert t.tolist() == [1, 3] and h.tolist() == [3, 2] and v.tolist() == [4.0, 2.5]
    with pytest.raises(DataFormatError, match=r"t_flow2.tntp:2: a flow line needs"):
        read_tntp_flow(_write(tmp_path, "t_flow2.tntp", "From To Volume\n1 3\n"))


ROW = "1 2 10 1 1 0.15 4 0 0 1 ;"


@pytest.mark.parametrize("rows, kw, match, field", [
    ([ROW], {"header": "<NUMBER OF NODES> 4\n<FIRST THRU NODE> 1\n<NUMBER OF LINKS> 1\n"
                       "<END OF METADATA>\n"}, "missing metadata <NUMBER OF ZONES>",
     "NUMBER OF ZONES"),
    ([ROW], {"header": "<NUMBER OF ZONES> 3\n"}, "expected a metadata tag", "metadata"),
    ([], {"header": "<NUMBER OF ZONES> 3\n"}, "missing <END OF METADATA>", "END OF METADATA"),
    ([ROW], {"header": "<NUMBER OF ZONES> x\n<NUMBER OF NODES> 4\n<FIRST THRU NODE> 1\n"
                       "<NUMBER OF LINKS> 1\n<END OF METADATA>\n"},
     "<NUMBER OF ZONES> must be a number", "NUMBER OF ZONES"),
    ([ROW], {"header": "<NUMBER OF ZONES> 3.5\n<NUMBER OF NODES> 4\n<FIRST THRU NODE> 1\n"
                       "<NUMBER OF LINKS> 1\n<END OF METADATA>\n"},
     r":1: <NUMBER OF ZONES> must be a non-negative integer, got 3.5", "NUMBER OF ZONES"),
    (["1 2 10 1 1 0.15 4 0 0 ;"], {}, r":7: a link line needs 10 columns .* got 9", "columns"),
    (["1 9 10 1 1 0.15 4 0 0 1 ;"], {}, r":7: unknown node 9 \(nodes are 1..4\)",
     "term_node"),
    (["1 2 -5 1 1 0.15 4 0 0 1 ;"], {}, ":7: capacity must be non-negative, got -5",
     "capacity"),
    (["1 2 10 1 1 0.15 -1 0 0 1 ;"], {}, ":7: power must be non-negative", "power"),
    (["1 2 ten 1 1 0.15 4 0 0 1 ;"], {}, ":7: capacity must be a number", "capacity"),
    (["1 2 inf 1 1 0.15 4 0 0 1 ;"], {}, ":7: capacity must be finite", "capacity"),
    ([ROW], {"links": 2}, "<NUMBER OF LINKS> says 2 but the file has 1", "NUMBER OF LINKS"),
])
def test_network_errors(tmp_path, rows, kw, match, field):
    p = _net(tmp_path, rows, **kw)
    with pytest.raises(DataFormatError, match=match) as info:
        read_tntp_network(p)
    assert info.value.field == field and str(p) in str(info.value)


@pytest.mark.parametrize("body, match, field", [
    ("  2 : 5.0;", ":4: demand entry before any 'Origin' line", "origin"),
    ("Origin\n 2 : 5.0;", ":4: expected 'Origin <zone>'", "origin"),
    ("Origin 7\n 2 : 5.0;", ":4: unknown zone 7", "origin"),
    ("Origin 1\n 2 : 5.0; 9 : 1.0;", ":5: unknown zone 9", "destination"),
    ("Origin 1\n 2 : -5.0;", ":5: demand must be non-negative", "demand"),
    ("Origin 1\n 2 = 5.0;", ":5: expected 'destination : demand'", "entry"),
])
def test_trips_errors(tmp_path, body, match, field):
    p = _trips(tmp_path, body)
    with pytest.raises(DataFormatError, match=match) as info:
        read_tntp_trips(p)
    assert info.value.field == field and info.value.path == str(p)


def test_trips_missing_metadata(tmp_path):
    p = _write(tmp_path, "t_trips.tntp", "<TOTAL OD FLOW> 1\n<END OF METADATA>\nOrigin 1\n")
    with pytest.raises(DataFormatError, match="missing metadata <NUMBER OF ZONES>"):
        read_tntp_trips(p)


def test_unreachable_demand_names_file_line_and_field(tmp_path):
    net = _net(tmp_path, [ROW, "2 3 10 1 1 0.15 4 0 0 1 ;"], zones=4, nodes=4)
    trips = _trips(tmp_path, "Origin 1\n 2 : 1.0;\n 3 : 2.0; 4 : 3.0;", zones=4)
    with pytest.raises(DataFormatError, match=r"t_trips.tntp:6: demand 3 from zone 1 to zone 4"
                       r", which cannot be reached") as info:
        load_tntp_game(net, trips)
    assert info.value.line == 6 and info.value.field == "destination"


def test_first_thru_node_makes_demand_unreachable(tmp_path):
    # 1 → 2 → 3 exists, but zone 2 (< first thru node 3) may not be passed through
    net = _net(tmp_path, [ROW, "2 3 10 1 1 0.15 4 0 0 1 ;"], zones=3, nodes=3, first=3)
    trips = _trips(tmp_path, "Origin 1\n 3 : 1.0;", zones=3)
    with pytest.raises(DataFormatError, match="exceeds the network's"):
        load_tntp_game(_net(tmp_path, [ROW], zones=2, nodes=2, name="small_net.tntp"), trips)
    with pytest.raises(DataFormatError, match="first thru node 3"):
        load_tntp_game(net, trips)


def test_missing_file():
    with pytest.raises(DataFormatError, match="nope_net.tntp: file not found"):
        read_tntp_network("nope_net.tntp")


def test_cli_json(capsys):
    assert main(["equilibrium", str(NET), "--trips", str(TRIPS), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ue, so = out["equilibria"]["wardrop"], out["equilibria"]["system_optimum"]
    assert set(ue) == {"arc_flow", "beckmann_objective", "total_travel_time", "relative_gap",
                       "average_excess_cost", "status", "solver", "seconds"}
    assert ue["solver"] == "CLARABEL" and ue["seconds"] > 0  # small game: the CVXPY oracle
    np.testing.assert_allclose(ue["arc_flow"], [4, 2, 2, 2, 4], atol=1e-6)
    np.testing.assert_allclose(so["arc_flow"], [3, 3, 3, 0, 3], atol=1e-6)
    assert ue["status"] == so["status"] == "optimal"
    assert out["price_of_anarchy"] == pytest.approx(552 / 498, abs=1e-8)


def test_cli_table_and_errors(capsys, tmp_path):
    assert run_tntp(NET, TRIPS, as_json=False) == 0
    text = capsys.readouterr().out
    assert "price of anarchy: 1.10843" in text and "total travel time 552" in text
    with pytest.raises(DataFormatError, match="needs its trip table") as info:
        run_tntp(NET, None, as_json=True)
    assert info.value.field == "--trips"
    # the CLI reports a missing --trips with that same one error (exit code 2)
    assert main(["equilibrium", str(NET)]) == 2
    err = capsys.readouterr().err
    assert "needs its trip table: add --trips TRIPS.tntp" in err and "Braess_net.tntp" in err
    bad = _net(tmp_path, ["1 2 -5 1 1 0.15 4 0 0 1 ;"])
    assert main(["equilibrium", str(bad), "--trips", str(TRIPS)]) == 2
    assert "capacity must be non-negative" in capsys.readouterr().err
