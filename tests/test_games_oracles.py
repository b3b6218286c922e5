"""Routing-game equilibria against closed forms and classic PoA bounds (float64)."""

from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import sympy as sy
from scipy.optimize import brentq

from lbtheory.equilibrium import price_of_anarchy, solve_system_optimum, solve_wardrop
from lbtheory.errors import ModelError, SolverError, SolveStatus
from lbtheory.games import (
    GamePoAResult,
    braess,
    grid_game,
    mm1_two_link,
    mm1_two_link_poa,
    pigou,
    pigou_poa,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tntp" / "Braess-Example"


def roughgarden(d):
    """PoA of Pigou with ℓ = x^d, derived in sympy: Wardrop puts all flow on x^d (cost 1); the
    system optimum minimises x^{d+1} + (1 − x)."""
    x = sy.symbols("x", positive=True)
    d = sy.nsimplify(d)
    xs = [s for s in sy.solve(sy.diff(x ** (d + 1) + 1 - x, x), x) if s.is_real]
    assert len(xs) == 1
    return float(1 / (xs[0] ** (d + 1) + 1 - xs[0]))


def mm1_two_link_oracle(u, R):
    """PoA of the M/M/1 two-link game in sympy: Wardrop loads only the M/M/1 link (its cost at
    x = R equals the constant link's); the SO minimises x/(u − x) + (R − x)/(u − R)."""
    x = sy.symbols("x", real=True)
    u, R = sy.nsimplify(u), sy.nsimplify(R)
    total = x / (u - x) + (R - x) / (u - R)
    xs = [s for s in sy.solve(sy.diff(total, x), x) if 0 <= s <= R]
    assert len(xs) == 1
    return float((R / (u - R)) / total.subs(x, xs[0]))


def test_pigou_linear_poa_is_four_thirds():
    ue, so = solve_wardrop(pigou(1)), solve_system_optimum(pigou(1))
    assert ue.total_travel_time == pytest.approx(1.0, abs=1e-9)
    assert so.total_travel_time == pytest.approx(0.75, abs=1e-9)
    np.testing.assert_allclose(so.arc_flow, [0.5, 0.5], atol=1e-9)
    assert ue.total_travel_time / so.total_travel_time == pytest.approx(4 / 3, abs=1e-6)


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_pigou_degree_d_attains_roughgarden_bound(d):
    # sympy oracle; SO puts (d+1)^{-1/d} on the x^d link
    poa = price_of_anarchy(pigou(d))
    assert isinstance(poa, GamePoAResult) and poa.status is SolveStatus.OPTIMAL
    assert poa.ratio == pytest.approx(roughgarden(d), abs=1e-6)
    assert pigou_poa(d) == pytest.approx(roughgarden(d), rel=1e-12)  # the library closed form
    assert poa.wardrop.total_travel_time == pytest.approx(1.0, abs=1e-9)
    assert poa.optimum.arc_flow[1] == pytest.approx((d + 1.0) ** (-1.0 / d), abs=1e-7)
    assert poa.ratio == poa.wardrop.total_travel_time / poa.optimum.total_travel_time


def test_pigou_non_integer_degree():
    d = 2.5
    assert price_of_anarchy(pigou(d)).ratio == pytest.approx(roughgarden(d), abs=1e-6)
    assert pigou_poa(d) == pytest.approx(roughgarden(d), rel=1e-12)


@pytest.mark.parametrize("u, R", [(1.0, 0.5), (2.0, 1.9), (5.0, 1.0)])
def test_mm1_two_link_poa(u, R):
    ref = mm1_two_link_oracle(u, R)
    assert price_of_anarchy(mm1_two_link(u, R)).ratio == pytest.approx(ref, abs=1e-6)
    assert mm1_two_link_poa(u, R) == pytest.approx(ref, rel=1e-12)


def test_mm1_poa_closed_form_rejects_bad_demand():
    with pytest.raises(ModelError, match="expected 0 <= r < u"):
        mm1_two_link_poa(1.0, 1.0)


def test_braess_published_values():
    ue, so = solve_wardrop(braess()), solve_system_optimum(braess())
    nb = solve_wardrop(braess(bridge=False))
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
    ue = solve_wardrop(game)
    assert _wardrop_violation(game, ue, ue.arc_cost) < 1e-6
    so = solve_system_optimum(game)
    assert _wardrop_violation(game, so, game.costs.marginal(so.arc_flow)) < 1e-6
    assert ue.relative_gap < 1e-8 and so.relative_gap < 1e-8
    assert so.total_travel_time <= ue.total_travel_time * (1 + 1e-9)


def _random_parallel(seed, family):
    """Random parallel-link game s → t; half the links have no constant term (Pigou-like).

    Returns the game and its PoA by an independent oracle: on parallel links ℓ_i = a_i + b_i x^p
    the Wardrop flows equalise the cost at a level L with Σ_i ((L − a_i)/b_i)_+^{1/p} = d (the
    SO the same with marginal costs a_i + (p+1) b_i x^p), solved by brentq.
    """
    from lbtheory.games import Commodity, GameArc, Polynomial, RoutingGame

    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 5))
    power = 1.0 if family == "affine" else 4.0
    a = np.where(np.arange(k) % 2 == 0, 0.0, rng.uniform(0.0, 2.0, k))
    b = rng.uniform(0.1, 2.0, k)
    d = rng.uniform(0.1, 3.0)
    arcs = [GameArc("s", "t", Polynomial(a[i], b[i], 1.0, power)) for i in range(k)]

    def flows(mult):
        def x_at(L):
            return np.maximum((L - a) / (mult * b), 0.0) ** (1.0 / power)

        L = brentq(lambda L: x_at(L).sum() - d, a.min(), a.max() + mult * b.max() * d ** power
                   + 1.0, xtol=1e-15, rtol=1e-15)
        return x_at(L)

    tstt = [float(np.sum(x * (a + b * x ** power))) for x in (flows(1.0), flows(power + 1.0))]
    game = RoutingGame(["s", "t"], arcs, [Commodity("s", "t", d)])
    return game, tstt[0] / tstt[1]


def _check_poa(poa, bound):
    # both solutions pass the shortest-path optimality check (independent of the CVXPY program)
    assert poa.status is SolveStatus.OPTIMAL
    assert poa.wardrop.relative_gap < 1e-8 and poa.optimum.relative_gap < 1e-8
    assert 1.0 - 1e-9 <= poa.ratio <= bound + 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_random_affine_games_poa_at_most_four_thirds(seed):
    game = grid_game(3, 4, seed=seed, n_origins=4, family="affine",
                     congestion=(0.1, 0.3)[seed % 2])
    _check_poa(price_of_anarchy(game), 4.0 / 3.0)
    game, ref = _random_parallel(seed, "affine")
    poa = price_of_anarchy(game)
    _check_poa(poa, 4.0 / 3.0)
    assert poa.ratio == pytest.approx(ref, rel=1e-7)


@pytest.mark.parametrize("seed", range(6))
def test_random_bpr4_games_poa_below_degree4_bound(seed):
    _check_poa(price_of_anarchy(grid_game(3, 4, seed=seed, n_origins=4)), roughgarden(4))
    game, ref = _random_parallel(seed, "bpr")
    poa = price_of_anarchy(game)
    _check_poa(poa, roughgarden(4))
    assert poa.ratio == pytest.approx(ref, rel=1e-7)


def test_random_parallel_oracle_is_not_trivial():
    # the seeded games above are not all at PoA 1 (where any solver pair would pass the bound)
    refs = [_random_parallel(seed, fam)[1] for seed in range(6) for fam in ("affine", "bpr")]
    assert max(refs) > 1.01


def test_relative_gap_and_aec_of_a_non_equilibrium():
    # all flow on the constant link of Pigou: TSTT = 1, SPTT = 0 (the x link costs 0) → gap 1
    from lbtheory.games import Objective, evaluate_flow

    res = evaluate_flow(pigou(1), np.array([[1.0, 0.0]]), "wardrop")
    assert res.objective is Objective.WARDROP
    assert res.relative_gap == pytest.approx(1.0)
    assert res.average_excess_cost == pytest.approx(1.0)


def test_unknown_objective():
    from lbtheory.games import evaluate_flow

    with pytest.raises(ModelError, match=r"objective must be 'wardrop' or 'system_optimum', "
                                         r"got 'nash'"):
        evaluate_flow(pigou(1), np.array([[1.0, 0.0]]), "nash")


def test_cvxpy_refuses_non_dcp_arcs():
    from lbtheory.games import ServiceArc
    from lbtheory.games.game import Commodity, GameArc, RoutingGame
    from lbtheory.models import SoftplusLatency

    arc = ServiceArc("latency", SoftplusLatency(0.5, 0.05, 5.0, 1.0))
    game = RoutingGame(["s", "t"], [GameArc("s", "t", arc)], [Commodity("s", "t", 1.0)])
    with pytest.raises(ModelError, match="no exact convex CVXPY form"):
        solve_wardrop(game, method="cvxpy")
    # method "auto" falls back to Frank–Wolfe: one arc carries the whole demand
    res = solve_wardrop(game)
    assert res.solver.startswith("frank_wolfe") and res.arc_flow[0] == pytest.approx(1.0)


def test_solver_failure_is_typed():
    from lbtheory.errors import SolverError, SolveStatus

    # demand above the M/M/1 capacity: infeasible program
    game = mm1_two_link(1.0, 0.5).with_demand_scale(10.0)
    game = game.without_arcs([1])
    with pytest.raises(SolverError, match="returned status 'infeasible'") as info:
        solve_wardrop(game)
    assert info.value.status is SolveStatus.FAILED  # every route failed
    res = solve_wardrop(game, throw=False)
    assert res.status is SolveStatus.FAILED and np.isnan(res.total_travel_time)


def test_unavailable_solver_is_a_parameter_error():
    from lbtheory.errors import ParameterError

    with pytest.raises(ParameterError, match=r"solver must be one of the installed CVXPY "
                                             r"solvers .*CLARABEL.*, got 'NOT_A_SOLVER'"):
        solve_wardrop(pigou(1), solver="NOT_A_SOLVER")


def test_only_the_inaccurate_warning_is_silenced(monkeypatch):
    import warnings

    import cvxpy as cp

    real = cp.Problem.solve

    def noisy(self, *args, **kwargs):
        warnings.warn("Solution may be inaccurate. Try another solver, ...", UserWarning,
                      stacklevel=2)
        warnings.warn("some other cvxpy warning", UserWarning, stacklevel=2)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cp.Problem, "solve", noisy)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        res = solve_wardrop(pigou(1))
    msgs = [str(w.message) for w in seen]
    assert "some other cvxpy warning" in msgs
    assert not any(m.startswith("Solution may be inaccurate") for m in msgs)
    assert res.total_travel_time == pytest.approx(1.0, abs=1e-9)


# --- one verb style: the equilibrium verbs take a routing game; the games names are aliases ---
def _same(a, b):
    """Two GameResults of the same deterministic solve: equal in every number but the time."""
    assert (a.objective, a.status, a.solver, a.iterations) == \
        (b.objective, b.status, b.solver, b.iterations)
    for f in ("arc_flow", "origin_flow", "arc_cost"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    for f in ("beckmann_objective", "total_travel_time", "relative_gap", "average_excess_cost"):
        assert getattr(a, f) == getattr(b, f), f


@pytest.mark.parametrize("method", ["cvxpy", "gp"])
def test_deprecated_games_verbs_warn_and_give_identical_results(method):
    """lbtheory.games.wardrop_equilibrium / system_optimum / price_of_anarchy warn, name their
    replacement, and return what the equilibrium verbs return on the same game (Braess: the
    closed forms 552 / 498 of THEORY §5 tie both to an oracle, not only to each other)."""
    import lbtheory
    import lbtheory.games as games

    g = braess()
    new_ue = solve_wardrop(g, method=method, tol=1e-10)
    new_so = solve_system_optimum(g, method=method, tol=1e-10)
    new_poa = price_of_anarchy(g, method=method, tol=1e-10)
    assert new_ue.total_travel_time == pytest.approx(552.0, rel=1e-9)
    assert new_so.total_travel_time == pytest.approx(498.0, rel=1e-9)
    assert isinstance(new_poa, GamePoAResult) and new_poa.ratio == pytest.approx(552 / 498)
    for old, new in (("wardrop_equilibrium", "solve_wardrop"),
                     ("system_optimum", "solve_system_optimum"),
                     ("price_of_anarchy", "price_of_anarchy")):
        with pytest.warns(DeprecationWarning, match=rf"^lbtheory\.games\.{old} is deprecated, use "
                                                    rf"lbtheory\.equilibrium\.{new} \(removed "
                                                    rf"in 0\.3\)$"):
            got = getattr(games, old)(g, method=method, tol=1e-10)
        if old == "price_of_anarchy":
            assert got.ratio == new_poa.ratio and got.status is new_poa.status
            _same(got.wardrop, new_poa.wardrop)
            _same(got.optimum, new_poa.optimum)
        else:
            _same(got, new_ue if old == "wardrop_equilibrium" else new_so)
    # the facade's old spellings are deprecated aliases of the verbs themselves (which take a
    # cell network too: tests/test_public_api.py), the facade's price_of_anarchy is the verb
    for old, new in (("wardrop_equilibrium", solve_wardrop),
                     ("system_optimum", solve_system_optimum)):
        with pytest.warns(DeprecationWarning, match=rf"^lbtheory\.{old} is deprecated"):
            assert getattr(lbtheory, old) is new
    assert lbtheory.price_of_anarchy is price_of_anarchy
    assert len(lbtheory.__all__) == len(set(lbtheory.__all__))


def test_one_verb_dispatches_on_the_problem_type():
    """price_of_anarchy / solve_wardrop on a cell network run the cell programs, on the routing
    game of the same network the game solver; the ratios agree (the game's TSTT is the cells'
    total latency rate) and equal THEORY §5's M/M/1 Pigou value ½(1 + √2) at u = 1, r = ½."""
    from lbtheory.equilibrium import EquilibriumResult, PoAResult
    from lbtheory.games import GameResult, to_routing_game
    from lbtheory.instances import mm1_pigou, spill_example

    net = mm1_pigou(u=1.0, r=0.5)
    game = to_routing_game(net)
    cell, routed = price_of_anarchy(net), price_of_anarchy(game)
    assert isinstance(cell, PoAResult) and isinstance(routed, GamePoAResult)
    assert cell.ratio == pytest.approx(0.5 * (1 + np.sqrt(2.0)), rel=1e-7)
    assert routed.ratio == pytest.approx(cell.ratio, rel=1e-7)
    assert isinstance(solve_wardrop(net), EquilibriumResult)
    assert isinstance(solve_wardrop(game), GameResult)
    spill = spill_example()  # residual ~1e-16: above a target of 1e-300
    with pytest.raises(SolverError, match="did not reach residual 1e-300"):
        solve_wardrop(spill, tol=1e-300)  # tol and throw reach the cell program
    assert solve_wardrop(spill, tol=1e-300, throw=False).status is \
        SolveStatus.OPTIMAL_INACCURATE
    with pytest.raises(TypeError, match="eps"):  # a CVXPY option is not a game option
        solve_wardrop(game, eps=1.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_bush_system_optimum_is_wardrop_of_the_marginal_bpr_network(seed):
    """For BPR costs ℓ = t0 (1 + b (x/c)^p) the marginal cost ℓ + x ℓ' = t0 (1 + (p+1) b (x/c)^p)
    is itself a BPR cost: the system optimum is the Wardrop equilibrium of the network with b
    × (p+1), and that network's Beckmann potential at any flow is the original TSTT. Checked on
    a 416-node network with the bush solver, the two solves sharing no objective switch — the
    reason the system optimum costs more passes than Wardrop is this more congested network."""
    from lbtheory.games import Commodity, GameArc, RoutingGame, bpr
    from lbtheory.games._bush import bush_assignment
    from lbtheory.games.synthetic import synthetic_network

    game, data = synthetic_network("anaheim", seed=seed)
    Z = int(data["first_thru_node"]) - 1
    arcs = [GameArc(int(t), int(h), bpr(f, 0.15 * 5.0, c, 4.0)) for t, h, f, c in
            zip(data["tail"], data["head"], data["free_flow_time"], data["capacity"])]
    oo, dd = np.nonzero(data["trips"])
    steep = RoutingGame(list(range(1, game.n_nodes + 1)), arcs,
                        [Commodity(int(o) + 1, int(d) + 1, float(data["trips"][o, d]))
                         for o, d in zip(oo, dd)], non_through=list(range(1, Z + 1)))
    so = bush_assignment(game, objective="system_optimum", tol=1e-11)
    ue = bush_assignment(steep, objective="wardrop", tol=1e-11)
    assert so.relative_gap <= 1e-11 and ue.relative_gap <= 1e-11
    scale = so.arc_flow.max()
    assert np.max(np.abs(so.arc_flow - ue.arc_flow)) < 1e-5 * scale
    # Beckmann potential of the steep network = Σ t0 (x + b x^5 / c^4) = the original TSTT
    t0, c, x = data["free_flow_time"], data["capacity"], ue.arc_flow
    beckmann = float(np.sum(t0 * (x + 0.15 * x ** 5 / c ** 4)))
    assert beckmann == pytest.approx(so.total_travel_time, rel=1e-9)
    # and the SO beats the original network's Wardrop equilibrium
    assert so.total_travel_time < bush_assignment(game, tol=1e-11).total_travel_time


def test_bush_inner_passes_rule_on_regional_networks(monkeypatch):
    """``inner=None`` runs 2 equilibration passes per bush update for a Wardrop equilibrium on
    a regional network (many nodes, bush flows reaching under 40 % of them) and 8 elsewhere or
    for the system optimum: the same solve, bit for
    bit, as asking for that count (one thread is deterministic). The node floor is lowered so
    that a 300-node network of share 0.35 counts as regional; Anaheim size (share 0.46) does
    not."""
    import lbtheory.games._bush as bush
    from lbtheory.games.synthetic import synthetic_network

    small = synthetic_network((300, 800, 20), seed=0)[0]
    other = synthetic_network("anaheim", seed=0)[0]
    monkeypatch.setattr(bush, "REGIONAL_NODES", 300)
    for game, count, wrong in ((small, bush.REGIONAL_INNER, bush.INNER),
                               (other, bush.INNER, bush.REGIONAL_INNER)):
        auto = bush.bush_assignment(game, tol=1e-9)
        same = bush.bush_assignment(game, tol=1e-9, inner=count)
        assert auto.state.passes == same.state.passes
        assert auto.iterations == same.iterations
        np.testing.assert_array_equal(auto.arc_flow, same.arc_flow)
        assert bush.bush_assignment(game, tol=1e-9, inner=wrong).state.passes != auto.state.passes
    # the system optimum keeps 8 passes on a regional network (its marginal costs need them)
    so = bush.bush_assignment(small, objective="system_optimum", tol=1e-9)
    so_passes = {k: bush.bush_assignment(small, objective="system_optimum", tol=1e-9,
                                         inner=k).state.passes for k in (2, 8)}
    assert so.state.passes == so_passes[bush.INNER] != so_passes[bush.REGIONAL_INNER]
    monkeypatch.setattr(bush, "REGIONAL_NODES", 301)  # below the floor: 8 passes
    floor = bush.bush_assignment(small, tol=1e-9)
    assert floor.state.passes == bush.bush_assignment(small, tol=1e-9, inner=8).state.passes
    from lbtheory.errors import ParameterError

    with pytest.raises(ParameterError, match="inner"):
        bush.bush_assignment(small, inner=-1)
