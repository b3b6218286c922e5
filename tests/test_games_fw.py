"""Frank–Wolfe (plain, conjugate, bi-conjugate) against the CVXPY programs and closed forms."""

import numpy as np
import pytest

from lbtheory.equilibrium import solve_system_optimum, solve_wardrop
from lbtheory.errors import ParameterError, SolverError, SolveStatus
from lbtheory.games import (
    braess,
    frank_wolfe,
    grid_game,
    mm1_two_link,
    pigou,
)


@pytest.mark.parametrize("method", ["fw", "cfw", "bfw"])
@pytest.mark.parametrize("objective, total", [("wardrop", 552.0), ("system_optimum", 498.0)])
def test_braess_closed_form(method, objective, total):
    # plain FW is sublinear: the SO leaves the bridge empty, and FW drains it by (1 − τ) a step
    tol = (1e-3 if objective == "system_optimum" else 1e-6) if method == "fw" else 1e-9
    res = frank_wolfe(braess(), objective=objective, method=method, tol=tol, time_limit=20)
    trace = res.stats
    assert res.status is SolveStatus.OPTIMAL
    assert res.total_travel_time == pytest.approx(total, rel=max(10 * tol, 1e-7))
    assert trace.relative_gap[-1] <= tol
    assert len(trace.seconds) == len(trace.relative_gap) == res.iterations


@pytest.mark.parametrize("objective", ["wardrop", "system_optimum"])
def test_fw_and_cvxpy_agree_on_a_bpr_grid(objective):
    game = grid_game(4, 6, seed=3)  # Sioux-Falls-sized: 24 nodes, 76 arcs, 24 origins
    solve = solve_wardrop if objective == "wardrop" else solve_system_optimum
    cvx = solve(game, polish=False)  # independent of the FW code
    fw = frank_wolfe(game, objective=objective, method="bfw", tol=1e-6, time_limit=300,
                     max_iterations=5000)  # ~1,000 iterations: a generous limit for loaded CI
    assert fw.status is SolveStatus.OPTIMAL and cvx.relative_gap < 1e-8
    # convexity: objective − optimum ≤ FW gap = relative gap · Σ x·(gradient)
    key = "beckmann_objective" if objective == "wardrop" else "total_travel_time"
    grad = game.costs.cost if objective == "wardrop" else game.costs.marginal
    bound = fw.relative_gap * float(fw.arc_flow @ grad(fw.arc_flow))
    assert -1e-9 * getattr(cvx, key) <= getattr(fw, key) - getattr(cvx, key) <= bound * 1.001
    np.testing.assert_allclose(fw.arc_flow, cvx.arc_flow, rtol=2e-2,
                               atol=1e-3 * game.total_demand / game.n_arcs)


def test_conjugate_methods_need_fewer_iterations():
    game = grid_game(4, 6, seed=1)
    its = {m: frank_wolfe(game, method=m, tol=1e-5, time_limit=30, throw=False).iterations
           for m in ("fw", "bfw")}
    assert its["bfw"] < its["fw"]


def test_pigou_fw_matches_closed_form():
    res = frank_wolfe(pigou(2), objective="system_optimum", method="cfw", tol=1e-12)
    assert res.arc_flow[1] == pytest.approx(3 ** -0.5, rel=1e-6)


def test_unknown_method():
    with pytest.raises(ParameterError, match=r"method must be one of 'fw', 'cfw', 'bfw', "
                                         r"got 'newton'"):
        frank_wolfe(braess(), method="newton")
    with pytest.raises(ParameterError, match=r"objective must be 'wardrop' or 'system_optimum', "
                                         r"got 'nash'"):
        frank_wolfe(braess(), objective="nash")


def test_options_accept_the_enums():
    from lbtheory.games import FWMethod, Objective

    res = frank_wolfe(pigou(2), objective=Objective.SYSTEM_OPTIMUM, method=FWMethod.CFW,
                      tol=1e-12)
    assert res.objective is Objective.SYSTEM_OPTIMUM and res.solver == "frank_wolfe:cfw"
    assert res.arc_flow[1] == pytest.approx(3 ** -0.5, rel=1e-6)


def test_infeasible_start_is_reported():
    # all-or-nothing at free flow puts R = 0.5 on the M/M/1 link of capacity 0.4
    with pytest.raises(SolverError, match="beyond its capacity") as info:
        frank_wolfe(mm1_two_link(0.4, 0.3).with_demand_scale(0.5 / 0.3))
    assert (info.value.status, info.value.detail) == (SolveStatus.FAILED, "infeasible_start")


def test_iteration_limit_raises_by_default_and_is_a_status_with_throw_false():
    game = grid_game(4, 6, seed=0)
    res = frank_wolfe(game, method="fw", tol=1e-12, max_iterations=3, throw=False)
    assert res.status is SolveStatus.MAX_ITERATIONS and res.iterations == 3
    with pytest.raises(SolverError, match="relative gap .* > tol") as info:
        frank_wolfe(game, method="fw", tol=1e-12, max_iterations=3)  # throw=True by default
    assert info.value.status is SolveStatus.MAX_ITERATIONS and info.value.solver == "frank_wolfe"
    assert info.value.detail == ""


def test_max_iter_is_a_deprecated_name_of_max_iterations():
    game = grid_game(4, 6, seed=0)
    new = frank_wolfe(game, method="fw", tol=1e-12, max_iterations=3, throw=False)
    with pytest.warns(DeprecationWarning, match=r"frank_wolfe\(max_iter=...\) is deprecated, "
                                                r"use max_iterations= \(removed in 0\.3\)"):
        old = frank_wolfe(game, method="fw", tol=1e-12, max_iter=3, throw=False)
    assert old.iterations == new.iterations == 3
    np.testing.assert_array_equal(old.origin_flow, new.origin_flow)
    with pytest.raises(ParameterError, match="give max_iterations= only"):
        frank_wolfe(game, max_iter=3, max_iterations=3)
