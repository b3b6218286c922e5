"""``lbtheory equilibrium NET.tntp --objective wardrop|system-optimum|both`` (issue 37): one
equilibrium solves one game, with the same answer as in the default pair; the price of anarchy
only with both (the default, unchanged); the flag is refused on cell networks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lbtheory.cli import main

ROOT = Path(__file__).resolve().parents[1]
NET = ROOT / "examples" / "tntp" / "Braess-Example" / "Braess_net.tntp"
TRIPS = ROOT / "examples" / "tntp" / "Braess-Example" / "Braess_trips.tntp"


def _json(capsys, *extra: str) -> dict:
    assert main(["equilibrium", str(NET), "--trips", str(TRIPS), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("flag, key, flow, tstt", [
    ("wardrop", "wardrop", [4, 2, 2, 2, 4], 552.0),  # Braess (1968): path cost 92, 6 × 92
    ("system-optimum", "system_optimum", [3, 3, 3, 0, 3], 498.0),  # 6 × 83, bridge unused
])
def test_one_objective_solves_one_equilibrium(capsys, flag, key, flow, tstt):
    one = _json(capsys, "--objective", flag)
    assert list(one["equilibria"]) == [key] and list(one["relative_gaps"]) == [key]
    assert one["price_of_anarchy"] is None
    eq = one["equilibria"][key]
    np.testing.assert_allclose(eq["arc_flow"], flow, atol=1e-6)
    assert eq["total_travel_time"] == pytest.approx(tstt, rel=1e-8)
    both = _json(capsys)  # the default: both and the price of anarchy
    assert set(both["equilibria"]) == {"wardrop", "system_optimum"}
    assert both["price_of_anarchy"] == pytest.approx(552 / 498, abs=1e-8)
    np.testing.assert_allclose(both["equilibria"][key]["arc_flow"], eq["arc_flow"], atol=1e-9)


def test_one_objective_table_and_cell_networks_refuse_it(capsys):
    assert main(["equilibrium", str(NET), "--trips", str(TRIPS), "--objective", "wardrop"]) == 0
    text = capsys.readouterr().out
    assert "wardrop: total travel time 552" in text
    assert "system_optimum" not in text and "price of anarchy" not in text
    assert main(["equilibrium", str(ROOT / "examples" / "three_cells.yaml"), "--objective",
                 "both"]) == 2
    assert "--objective applies to TNTP routing games only" in capsys.readouterr().err
