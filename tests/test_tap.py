"""Gradient-projection (lbtheory.games.tap) and bush-based (lbtheory.games._bush) traffic
assignment against independent oracles.

Oracles: closed forms (Pigou 4/3, Braess 552/498), the CVXPY/Clarabel programs (Beckmann and
total-cost minimisers, polished) on small random games, scipy.sparse.csgraph shortest paths for
the numba Dijkstra, the arc-cost families of arccosts.py for the numba cost kernels, and the
relative-gap certificate of gap_measures recomputed here.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from lbtheory.cli import main
from lbtheory.equilibrium import solve_system_optimum, solve_wardrop
from lbtheory.errors import ParameterError, SolverError, SolveStatus
from lbtheory.games import (
    MM1,
    Commodity,
    GameArc,
    RoutingGame,
    affine,
    bpr,
    braess,
    bush_assignment,
    constant,
    gap_measures,
    pigou,
)
from lbtheory.games import _gpkernels as kern  # the compiled cost kernels (see below)
from lbtheory.games import solve as solve_mod
from lbtheory.games.synthetic import synthetic_network
from lbtheory.games.tap import encode_costs, gradient_projection
from lbtheory.games.tntp import load_tntp_game

TRAPS = Path(__file__).resolve().parents[1] / "examples" / "tntp" / "traps"


def _random_game(seed, powers=(1.0, 2.0, 4.0, 2.5), n=9, extra=14, mm1=False, zones=0):
    """Strongly connected random digraph (a ring plus random chords), random BPR-like arcs,
    3 origins with 2-4 destinations each; ``zones`` low-numbered non-through nodes."""
    rng = np.random.default_rng(seed)
    pairs = [(i, (i + 1) % n) for i in range(n)] + [((i + 1) % n, i) for i in range(n)]
    for _ in range(extra):
        a, b = rng.choice(n, 2, replace=False)
        pairs.append((int(a), int(b)))
    arcs = []
    for k, (a, b) in enumerate(pairs):
        p = float(powers[k % len(powers)])
        cost = MM1(float(rng.uniform(40, 60)), float(rng.uniform(1, 3))) if mm1 and k % 3 == 0 \
            else bpr(float(rng.uniform(1, 5)), float(rng.uniform(0.1, 1.0)),
                     float(rng.uniform(5, 15)), p)
        arcs.append(GameArc(a, b, cost))
    comms = []
    for o in rng.choice(n, 3, replace=False):
        for d in rng.choice(n, int(rng.integers(2, 5)), replace=False):
            if d != o:
                comms.append(Commodity(int(o), int(d), float(rng.uniform(1, 8))))
    return RoutingGame(list(range(n)), arcs, comms, non_through=list(range(zones)))


def _cvxpy_oracle(game, objective):
    """The CVXPY program alone (Clarabel, FW-polished), without fallback or certificate."""
    return solve_mod._solve_cvxpy(game, solve_mod.Objective.parse(objective), "CLARABEL", True)


@pytest.mark.parametrize("seed", range(3))
def test_wardrop_and_optimum_match_cvxpy_on_random_games(seed):
    """Also the numba Dijkstra's arc-use rule: zones (seed 1) and blocked arcs (seed 2) must be
    honoured, else the flows leave CVXPY's (a planted bug that ignores either fails here)."""
    game = _random_game(seed, zones=2 if seed % 2 else 0)
    if seed == 2:
        game = game.without_arcs([2, 5])
    for objective in ("wardrop", "system_optimum"):
        gp = gradient_projection(game, objective=objective, tol=1e-13)
        cvx = _cvxpy_oracle(game, objective)
        assert cvx.relative_gap < 1e-9
        assert gp.status is SolveStatus.OPTIMAL and gp.relative_gap <= 1e-13
        assert gp.beckmann_objective == pytest.approx(cvx.beckmann_objective, rel=1e-9)
        assert gp.total_travel_time == pytest.approx(cvx.total_travel_time, rel=1e-9)
        # strictly increasing costs: the arc flows are unique
        np.testing.assert_allclose(gp.arc_flow, cvx.arc_flow, rtol=1e-7,
                                   atol=1e-7 * game.total_demand)


@pytest.mark.parametrize("powers", [(0.0, 1.0, 4.0), (0.5, 1.0, 0.25)])
def test_unusual_powers_and_mm1_match_cvxpy_beckmann(powers):
    # power 0 (constant: flows not unique, the objective is), powers below 1 (infinite
    # derivative at zero flow: the bisection safeguard) and M/M/1 arcs
    game = _random_game(7, powers=powers, mm1=True)
    gp = gradient_projection(game, tol=1e-12)
    cvx = _cvxpy_oracle(game, "wardrop")
    assert gp.relative_gap <= 1e-12
    assert gp.beckmann_objective == pytest.approx(cvx.beckmann_objective, rel=1e-9)
    so_gp = gradient_projection(game, objective="system_optimum", tol=1e-12)
    so_cvx = _cvxpy_oracle(game, "system_optimum")
    assert so_gp.total_travel_time == pytest.approx(so_cvx.total_travel_time, rel=1e-9)


def test_closed_forms_pigou_and_braess():
    ue = solve_wardrop(pigou(), method="gp")
    so = solve_system_optimum(pigou(), method="gp")
    assert ue.solver == so.solver == "gradient_projection"
    assert ue.total_travel_time / so.total_travel_time == pytest.approx(4 / 3, rel=1e-12)
    g = braess()
    ue, so = solve_wardrop(g, method="gp"), solve_system_optimum(g, method="gp")
    assert ue.solver == so.solver == "gradient_projection"  # not a silent CVXPY fallback
    # the TNTP Braess example (6 units): TSTT 552 at equilibrium, 498 at the optimum
    assert ue.total_travel_time == pytest.approx(552.0, rel=1e-12)
    assert so.total_travel_time == pytest.approx(498.0, rel=1e-12)
    np.testing.assert_allclose(ue.arc_flow, [4, 2, 2, 2, 4], atol=1e-9)


def test_gap_certificate_on_synthetic_sioux_falls_size():
    game, _ = synthetic_network("sioux_falls", seed=3)
    res = gradient_projection(game, tol=1e-10)
    # the solver's own stopping gap (numba Dijkstra inside the kernel) against a fresh
    # all-or-nothing assignment by scipy's Dijkstra on the returned flows
    c = game.costs.cost(res.arc_flow)
    gap, _ = gap_measures(game, res.arc_flow, c)
    assert gap <= 1e-10 and res.iterations > 0
    cvx = _cvxpy_oracle(game, "wardrop")
    assert res.beckmann_objective == pytest.approx(cvx.beckmann_objective, rel=1e-9)
    # origin flows conserve demand at every node
    bal = game.origin_balance()
    for k in range(len(game.origins)):
        net = np.bincount(game.tails, res.origin_flow[k], minlength=game.n_nodes) \
            - np.bincount(game.heads, res.origin_flow[k], minlength=game.n_nodes)
        np.testing.assert_allclose(net, bal[k], atol=1e-9 * game.total_demand)


def test_cost_kernels_match_the_arc_families():
    """White-box on purpose: the solver kernels evaluate the arc families through the game's
    kernel encoding; a wrong derivative (a planted 3× on the M/M/1 one) still converges and
    passes every public test — only comparing against closed forms catches it. The kernels and
    the numpy families share one definition (``_gpkernels.poly_formula``/``mm1_formula``), so
    they agree to the last bit; the closed forms below are independent numpy."""
    arcs = [bpr(2.0, 0.15, 10.0, 4.0), bpr(1.0, 0.5, 3.0, 0.5), bpr(1.5, 0.2, 4.0, 2.5),
            constant(3.0), affine(1.0, 2.0), MM1(5.0, 2.0)]
    game = RoutingGame([0, 1], [GameArc(0, 1, c) for c in arcs], [Commodity(0, 1, 1.0)])
    kind, A, B, S, P = encode_costs(game)
    x = np.array([7.0, 2.0, 3.0, 1.0, 0.7, 3.5])
    # closed forms: t0(1 + B(x/c)^p), its derivative, marginal and marginal's derivative
    t0 = np.array([2.0, 1.0, 1.5])
    bb = np.array([0.15, 0.5, 0.2]) * t0
    c, p, r = np.array([10.0, 3.0, 4.0]), np.array([4.0, 0.5, 2.5]), x[:3] / [10.0, 3.0, 4.0]
    cost = np.r_[t0 + bb * r**p, 3.0, 1.0 + 2.0 * 0.7, 2.0 / 1.5]
    prime = np.r_[bb * p / c * r ** (p - 1), 0.0, 2.0, 2.0 / 1.5**2]
    marg = np.r_[t0 + bb * (p + 1) * r**p, 3.0, 1.0 + 4.0 * 0.7, 2.0 * 5.0 / 1.5**2]
    mprime = np.r_[bb * p * (p + 1) / c * r ** (p - 1), 0.0, 4.0, 4.0 * 5.0 / 1.5**3]
    for so, deriv, ref, fam in [(False, False, cost, game.costs.cost),
                                (True, False, marg, game.costs.marginal),
                                (False, True, prime, game.costs.cost_prime),
                                (True, True, mprime, None)]:
        got = kern.arc_costs(kind, A, B, S, P, x, so, deriv)
        np.testing.assert_allclose(got, ref, rtol=1e-14)
        if fam is not None:
            assert got.tobytes() == fam(x).tobytes()
    h = 1e-6
    num = (game.costs.marginal(x + h) - game.costs.marginal(x - h)) / (2 * h)
    np.testing.assert_allclose(kern.arc_costs(kind, A, B, S, P, x, True, True), num, rtol=1e-6)


def test_warm_start_after_a_demand_change():
    game, _ = synthetic_network("sioux_falls", seed=1)
    state = gradient_projection(game, tol=1e-10).state
    more = game.with_demand_scale(1.1)
    cold = gradient_projection(more, tol=1e-10)
    warm = gradient_projection(more, tol=1e-10, warm=state)
    assert warm.relative_gap <= 1e-10
    assert warm.beckmann_objective == pytest.approx(cold.beckmann_objective, rel=1e-10)
    assert warm.iterations < cold.iterations


def _path_arc_flows(st, n_arcs):
    """Arc flows of a TAPState's linked paths, walked here in plain Python (the oracle of the
    numba kernel that sums them inside the solver)."""
    x = np.zeros(n_arcs)
    for h in st.head:
        p = int(h)
        while p >= 0:
            np.add.at(x, st.pool[st.off[p]:st.off[p] + st.plen[p]], st.pflow[p])
            p = int(st.nxt[p])
    return x


def test_compacting_the_path_pool_keeps_the_flows_and_the_state():
    game, _ = synthetic_network("sioux_falls", seed=1)
    res = gradient_projection(game, tol=1e-10)
    st = res.state
    np.testing.assert_allclose(_path_arc_flows(st, game.n_arcs), res.arc_flow, rtol=1e-12,
                               atol=1e-12 * game.total_demand)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(st).items()}
    small = st.compact()
    for k, v in before.items():  # pure: the state it was called on is unchanged
        np.testing.assert_array_equal(getattr(st, k), v, err_msg=k)
    assert small.n_paths < st.n_paths  # unlinked paths were dropped
    assert small.pool_used == int(small.plen.sum()) < st.pool_used
    np.testing.assert_array_equal(_path_arc_flows(small, game.n_arcs),
                                  _path_arc_flows(st, game.n_arcs))
    again = gradient_projection(game, tol=1e-10, warm=small)
    assert again.iterations == 1 and again.relative_gap <= 1e-10


def test_auto_method_threshold_and_fallback(monkeypatch):
    game, _ = synthetic_network("sioux_falls", seed=2)
    assert solve_wardrop(game).solver == "CLARABEL"  # small: the CVXPY oracle
    monkeypatch.setattr(solve_mod, "AUTO_THRESHOLD", 10)
    assert solve_wardrop(game).solver == "bush"  # large: the bush-based solver
    assert solve_wardrop(game, method="gp").solver == "gradient_projection"

    def broken(*args, **kwargs):
        raise SolverError("solver CLARABEL failed: numerical trouble", solver="CLARABEL")

    monkeypatch.setattr(solve_mod, "_solve_cvxpy", broken)
    res = solve_system_optimum(game, method="cvxpy")
    assert res.solver == "gradient_projection" and res.status is SolveStatus.OPTIMAL


def test_clarabel_failure_on_a_feasible_game_falls_back(monkeypatch):
    # found by the random-game test: Clarabel stopped with "Solver 'CLARABEL' failed" on this
    # feasible game — on some CPUs only (its floating-point paths differ), so the failure is
    # injected: the answer must come from the next route and be certified
    game = _random_game(3, zones=2)
    real = solve_mod._solve_cvxpy

    def clarabel_fails(game, objective, solver, polish):
        if solver == "CLARABEL":
            raise SolverError("Solver 'CLARABEL' failed", solver="CLARABEL")
        return real(game, objective, solver, polish)

    monkeypatch.setattr(solve_mod, "_solve_cvxpy", clarabel_fails)
    res = solve_wardrop(game, method="cvxpy")
    assert res.status is SolveStatus.OPTIMAL and res.solver != "CLARABEL"
    gp = gradient_projection(game, tol=1e-13)
    assert res.total_travel_time == pytest.approx(gp.total_travel_time, rel=1e-9)


def test_every_route_failing_names_each(monkeypatch):
    def broken(*args, **kwargs):
        raise SolverError("boom", solver="x")

    monkeypatch.setattr(solve_mod, "_solve_cvxpy", broken)
    monkeypatch.setattr(solve_mod, "gradient_projection", broken)
    monkeypatch.setattr(solve_mod, "frank_wolfe", broken)
    with pytest.raises(SolverError, match=r"tried cvxpy:CLARABEL: boom; gp: boom; cvxpy:SCS: "
                                          r"boom; fw: boom"):
        solve_wardrop(pigou())


def test_status_is_decided_by_the_certificate_not_the_solver():
    import dataclasses

    from lbtheory.games import evaluate_flow

    game = pigou()
    # a solver claims optimal with 1e-3 of the demand on the costlier constant link: the gap is
    # 1e-3 · excess 1e-3 / TSTT 0.999001 ≈ 1.001e-6 — certified at 1e-5 (the spread 1e-3 on an
    # arc carrying 1e-3 is what a gap of 1e-6 allows: f·r ≤ G·TSTT), refused at 1e-7
    f = np.array([[1e-3, 1.0 - 1e-3]])
    res = evaluate_flow(game, f, "wardrop", status=SolveStatus.OPTIMAL)
    assert res.relative_gap == pytest.approx(1e-6 / 0.999001, rel=1e-9)
    assert solve_mod.certify(game, res, 1e-5) == (True, "")
    ok, why = solve_mod.certify(game, res, 1e-7)
    assert not ok and why == "relative gap 1e-06 > 1e-07"
    # the same flows claiming a gap of 1e-8: their reduced costs contradict it (f·r = 1e-6 of
    # TSTT on the constant link, more than the claimed gap)
    claim = dataclasses.replace(res, relative_gap=1e-8)
    ok, why = solve_mod.certify(game, claim, 1e-5)
    assert not ok and "contradicted by a used arc" in why and "1e-06 of TSTT" in why
    # an "optimal_inaccurate" answer at the exact equilibrium is certified
    exact = evaluate_flow(game, np.array([[0.0, 1.0]]), "wardrop",
                          status=SolveStatus.OPTIMAL_INACCURATE)
    assert solve_mod.certify(game, exact, 1e-12) == (True, "")


def test_infeasible_mm1_start_is_a_typed_error():
    game = RoutingGame([0, 1], [GameArc(0, 1, MM1(1.0))], [Commodity(0, 1, 2.0)])
    with pytest.raises(SolverError, match="capacity"):
        gradient_projection(game)


# --- the bush-based solver (Dial's Algorithm B) --------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_bush_matches_cvxpy_on_random_games_with_zones_and_blocked_arcs(seed):
    game = _random_game(seed, zones=2 if seed % 2 else 0)
    if seed == 2:
        game = game.without_arcs([2, 5])
    for objective in ("wardrop", "system_optimum"):
        res = bush_assignment(game, objective=objective, tol=1e-13)
        cvx = _cvxpy_oracle(game, objective)
        assert res.status is SolveStatus.OPTIMAL and res.solver == "bush"
        assert res.relative_gap <= 1e-13  # the independent recomputation (evaluate_flow)
        assert res.beckmann_objective == pytest.approx(cvx.beckmann_objective, rel=1e-9)
        assert res.total_travel_time == pytest.approx(cvx.total_travel_time, rel=1e-9)
        np.testing.assert_allclose(res.arc_flow, cvx.arc_flow, rtol=1e-7,
                                   atol=1e-7 * game.total_demand)
        ok, why = solve_mod.certify(game, res, 1e-12)  # conservation, arc-use rule, spread
        assert ok, why


@pytest.mark.parametrize("powers", [(0.0, 1.0, 4.0), (0.5, 1.0, 0.25)])
def test_bush_unusual_powers_and_mm1_match_cvxpy(powers):
    game = _random_game(7, powers=powers, mm1=True)
    for objective in ("wardrop", "system_optimum"):
        res = bush_assignment(game, objective=objective, tol=1e-12)
        cvx = _cvxpy_oracle(game, objective)
        assert res.relative_gap <= 1e-12
        assert res.beckmann_objective == pytest.approx(cvx.beckmann_objective, rel=1e-9)
        assert res.total_travel_time == pytest.approx(cvx.total_travel_time, rel=1e-9)


@pytest.mark.parametrize("name, flows, cost", [
    ("ZeroFFT", [4.0, 4.0, 2.0], 6.0),  # a zero-time link (zero costs in the bush)
    ("TinyB", [5.0, 10.0], 20.0),  # constant 20 against 10 + x
    ("ThruNode", [2.0, 0.0, 3.0, 3.0], None),  # the cheap arc through zone 2 is unusable
])
def test_bush_tntp_traps_closed_forms(name, flows, cost):
    game = load_tntp_game(TRAPS / f"{name}_net.tntp", TRAPS / f"{name}_trips.tntp")
    res = solve_wardrop(game, method="bush")
    assert res.solver == "bush"
    np.testing.assert_allclose(res.arc_flow, flows, rtol=1e-9, atol=1e-9)
    if cost is not None:
        assert res.total_travel_time == pytest.approx(cost * game.total_demand, rel=1e-10)


def test_bush_closed_forms_pigou_and_braess():
    g = braess()
    ue, so = solve_wardrop(g, method="bush"), solve_system_optimum(g, method="bush")
    assert ue.solver == so.solver == "bush"
    assert ue.total_travel_time == pytest.approx(552.0, rel=1e-12)
    assert so.total_travel_time == pytest.approx(498.0, rel=1e-12)
    ue_p = bush_assignment(pigou())
    so_p = bush_assignment(pigou(), objective="system_optimum")
    assert ue_p.total_travel_time / so_p.total_travel_time == pytest.approx(4 / 3, rel=1e-12)


def test_bush_cli_method(capsys):
    code = main(["equilibrium", str(TRAPS / "Toll_net.tntp"), "--trips",
                 str(TRAPS / "Toll_trips.tntp"), "--method", "bush", "--gap", "1e-12", "--json"])
    assert code == 0
    ue = json.loads(capsys.readouterr().out)["equilibria"]["wardrop"]
    assert ue["solver"] == "bush" and ue["status"] == "optimal"
    np.testing.assert_allclose(ue["arc_flow"], [4.5, 5.5], rtol=1e-9)


def test_bush_agrees_with_gp_at_anaheim_size():
    game, _ = synthetic_network("anaheim", seed=2)
    b = bush_assignment(game, tol=1e-10)
    state = b.state
    g = gradient_projection(game, tol=1e-10)
    assert b.relative_gap <= 1e-10 and g.relative_gap <= 1e-10
    assert b.beckmann_objective == pytest.approx(g.beckmann_objective, rel=1e-9)
    # the bushes are acyclic and respect the arc-use rule (non-through zones)
    for k in range(len(game.origins)):
        assert not np.any(state.bush[k] & ~game.usable(k))
        assert not np.any(state.origin_flow[k][~state.bush[k]])


def test_bush_warm_start_and_limits():
    game, _ = synthetic_network("sioux_falls", seed=1)
    cold = bush_assignment(game, tol=1e-10)
    state = cold.state
    same = bush_assignment(game, tol=1e-10, warm=state)
    assert same.iterations == 0 and same.relative_gap <= 1e-10  # resumed, already certified
    more = game.with_demand_scale(1.1)
    cold2 = bush_assignment(more, tol=1e-10)
    warm2 = bush_assignment(more, tol=1e-10, warm=state)
    assert warm2.relative_gap <= 1e-10 and warm2.state.passes < cold2.state.passes  # the work
    assert warm2.beckmann_objective == pytest.approx(cold2.beckmann_objective, rel=1e-10)
    with pytest.raises(ParameterError, match="warm: the state is for a game with"):
        bush_assignment(_random_game(0), warm=state)
    # a limit before tol: never OPTIMAL, and a typed error when asked to throw
    res = bush_assignment(game, tol=1e-14, max_iterations=1, throw=False)
    assert res.status is SolveStatus.MAX_ITERATIONS and res.relative_gap > 1e-14
    with pytest.raises(SolverError, match="relative gap") as info:
        bush_assignment(game, tol=1e-14, max_iterations=1)
    assert (info.value.status, info.value.solver) == (SolveStatus.MAX_ITERATIONS, "bush")
    with pytest.warns(DeprecationWarning, match=r"bush_assignment\(max_iter=...\)"):
        old = bush_assignment(game, tol=1e-14, max_iter=1, throw=False)
    np.testing.assert_array_equal(old.origin_flow, res.origin_flow)
    with pytest.raises(SolverError, match="capacity") as info:
        bush_assignment(RoutingGame([0, 1], [GameArc(0, 1, MM1(1.0))], [Commodity(0, 1, 2.0)]))
    assert (info.value.status, info.value.detail) == (SolveStatus.FAILED, "infeasible_start")
