"""TNTP inputs that used to end in a traceback or an unbounded allocation (issue 34): metadata
checked against what the file holds before anything is sized by it, a file without newlines or
with binary content refused line by line, CVXPY's "NaN or Inf" refusal reported as a solver
error with its status."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lbtheory.cli import main
from lbtheory.errors import DataFormatError, SolverError
from lbtheory.games.tntp import MAX_LINE_CHARS, load_tntp_game, read_tntp_network

EX = Path(__file__).resolve().parents[1] / "examples" / "tntp" / "Braess-Example"


@pytest.fixture
def braess(tmp_path) -> tuple[Path, Path]:
    for kind in ("net", "trips"):
        shutil.copy(EX / f"Braess_{kind}.tntp", tmp_path / f"Braess_{kind}.tntp")
    return tmp_path / "Braess_net.tntp", tmp_path / "Braess_trips.tntp"


@pytest.mark.parametrize("tag, value, match", [
    ("NUMBER OF NODES", "1e12", r"<NUMBER OF NODES> 1000000000000 cannot be right: 5 links and "
                                r"2 zones touch at most 12 nodes"),
    ("NUMBER OF NODES", "13", "touch at most 12 nodes"),
    ("NUMBER OF ZONES", "5", r"<NUMBER OF ZONES> 5 exceeds <NUMBER OF NODES> 4"),
])
def test_node_and_zone_counts_are_checked_before_any_allocation(braess, tag, value, match):
    net, trips = braess
    text = net.read_text()
    old = next(line for line in text.splitlines() if line.startswith(f"<{tag}>"))
    net.write_text(text.replace(old, f"<{tag}> {value}"))
    with pytest.raises(DataFormatError, match=match) as err:
        read_tntp_network(net)
    assert err.value.field == tag


def test_cli_node_count_1e12_is_one_line_exit_2(braess, capsys):
    net, trips = braess
    net.write_text(net.read_text().replace("<NUMBER OF NODES> 4", "<NUMBER OF NODES> 1e12"))
    assert main(["equilibrium", str(net), "--trips", str(trips)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "<NUMBER OF NODES> 1000000000000 cannot be right" in err


def test_the_largest_counts_that_fit_still_read(braess):
    net, trips = braess
    net.write_text(net.read_text().replace("<NUMBER OF NODES> 4", "<NUMBER OF NODES> 12"))
    assert read_tntp_network(net).nodes == 12  # zones + 2·links: isolated nodes allowed


@pytest.mark.parametrize("content, match", [
    (b"1 " * (MAX_LINE_CHARS // 2 + 10), f"line longer than {MAX_LINE_CHARS} characters"),
    (b"<NUMBER OF ZONES> 2\n\x00\x00\x00\n", "NUL bytes: a binary file"),
])
def test_a_file_without_newlines_or_with_binary_content_is_refused(braess, content, match):
    net, trips = braess
    trips.write_bytes(content)
    with pytest.raises(DataFormatError, match=match) as err:
        load_tntp_game(net, trips)
    assert err.value.line in (1, 2)


def test_cvxpy_refusing_nan_or_inf_data_is_a_solver_error(monkeypatch):
    """CVXPY raises ValueError("Problem data contains NaN or Inf") on extreme data the reader's
    finiteness check lets through; the games' CVXPY path reports it as a SolverError with a
    status, and the public route falls back to the next solver."""
    import cvxpy as cp

    from lbtheory.games import Objective
    from lbtheory.games import braess as braess_game
    from lbtheory.games.solve import _solve_cvxpy, solve_game

    def refuse(self, *a, **k):
        raise ValueError("Problem data contains NaN or Inf.")

    monkeypatch.setattr(cp.Problem, "solve", refuse)
    with pytest.raises(SolverError, match="refused the program: Problem data contains NaN or "
                                          "Inf.*rescale") as err:
        _solve_cvxpy(braess_game(6.0), Objective.WARDROP, None, False)
    assert err.value.status is not None
    # the public route falls back to the next solver and says which one answered
    res = solve_game(braess_game(6.0), method="cvxpy")
    assert res.solver != "CLARABEL" and res.total_travel_time == pytest.approx(552, rel=1e-6)
