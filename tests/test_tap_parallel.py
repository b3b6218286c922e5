"""Issue 24, item 3: the bush solver on two threads, its robustness fixes, and the regional
synthetic networks.

Oracles: the one-thread run (bit-for-bit where the parallel code is deterministic — the
certificate's shortest paths —, and to the solver's tolerance where it is not: the origins'
concurrent shifts make the flows differ in the last bits, so two certified answers are compared
by the convexity bound B(x) − B* ≤ G·TSTT on the Beckmann objective), scipy's Dijkstra, and the
counts of the networks the synthetic ones stand for.
"""

import json

import numpy as np
import pytest

from lbtheory.cli import main
from lbtheory.errors import ParameterError, SolveStatus
from lbtheory.games import _bush, bush_assignment, shortest_paths
from lbtheory.games import _bushkernels as bk  # white-box: the bush update (see below)
from lbtheory.games import _gpkernels as kern
from lbtheory.games.synthetic import SIZES, synthetic_network
from lbtheory.games.tap import _Net
from lbtheory.games.tntp import write_tntp


@pytest.fixture(scope="module")
def barcelona():
    return synthetic_network("barcelona", seed=0)[0]  # 110 × 2,522 = 277k ≥ PARALLEL_MIN


def test_two_threads_reach_the_same_certified_optimum(barcelona):
    with _bush.numba_threads(2) as got:
        if got < 2:  # numba caps the count at NUMBA_NUM_THREADS: "two" would be one
            pytest.skip("numba has a single thread here (NUMBA_NUM_THREADS = 1)")
    game = barcelona
    assert len(game.origins) * game.n_arcs >= _bush.PARALLEL_MIN
    for objective in ("wardrop", "system_optimum"):
        one = bush_assignment(game, objective=objective, tol=1e-10, threads=1)
        two = bush_assignment(game, objective=objective, tol=1e-10, threads=2)
        assert one.status is two.status is SolveStatus.OPTIMAL
        assert one.relative_gap <= 1e-10 and two.relative_gap <= 1e-10
        # B(x) − B* ≤ G·TSTT for each (convexity), so the two differ by at most the sum
        value = "beckmann_objective" if objective == "wardrop" else "total_travel_time"
        bound = 1e-10 * (one.total_travel_time + two.total_travel_time)
        if objective == "system_optimum":  # Z(x) − Z* ≤ G·Σ x·(marginal cost)
            bound = 1e-10 * sum(float(r.arc_flow @ game.costs.marginal(r.arc_flow))
                                for r in (one, two))
        assert abs(getattr(one, value) - getattr(two, value)) <= bound
        # strictly increasing costs: one arc-flow vector (agreement seen: ≤ 1e-6 relative)
        np.testing.assert_allclose(two.arc_flow, one.arc_flow, rtol=1e-5,
                                   atol=1e-6 * game.total_demand / game.n_arcs)


def test_the_parallel_certificate_is_bit_for_bit_the_serial_one(barcelona):
    game = barcelona
    net = _Net(game)
    cost = game.costs.cost(np.full(game.n_arcs, 100.0))
    args = (net.origins, game.n_nodes, net.out_start, net.out_arcs, net.heads, net.tails,
            net.usable, net.nonthru, cost)
    one = kern.all_dists(*args, 1)
    with _bush.numba_threads(2):
        two = kern.all_dists(*args, 2)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(one, shortest_paths(game, cost)[0], rtol=1e-12)  # scipy


def test_small_games_stay_on_one_thread_and_threads_are_checked():
    game, _ = synthetic_network("sioux_falls", seed=0)
    a = bush_assignment(game, tol=1e-10, threads=1)
    b = bush_assignment(game, tol=1e-10, threads=2)  # below PARALLEL_MIN: one thread
    sa = a.state
    # the convergence history is the result's stats too (iteration, seconds, gap per row)
    np.testing.assert_array_equal(a.stats.iteration, [h[0] for h in sa.history])
    np.testing.assert_array_equal(a.stats.relative_gap, [h[2] for h in sa.history])
    np.testing.assert_array_equal(a.origin_flow, b.origin_flow)
    with pytest.raises(ParameterError, match="threads must be an integer >= 1, got 0"):
        bush_assignment(game, threads=0)
    with pytest.raises(ParameterError, match="relax"):
        bush_assignment(game, relax=2.0)
    # the history: one certificate per iteration, from iteration 0, ending at the answer's gap
    its = [h[0] for h in sa.history]
    assert its == list(range(a.iterations + 1))
    assert sa.history[-1][2] <= 1e-10 < sa.history[-2][2]
    assert all(t1 <= t2 for (_, t1, _), (_, t2, _) in zip(sa.history, sa.history[1:]))


def test_over_relaxation_reaches_the_same_optimum():
    game, _ = synthetic_network("anaheim", seed=0)
    base = bush_assignment(game, tol=1e-10)
    over = bush_assignment(game, tol=1e-10, relax=1.3)
    assert over.status is SolveStatus.OPTIMAL
    assert abs(over.beckmann_objective - base.beckmann_objective) \
        <= 1e-10 * (over.total_travel_time + base.total_travel_time)


def test_a_rounding_residue_does_not_keep_an_arc_in_the_bush():
    """White-box on purpose: a residue of 1e-14 vehicles left on an arc off the cheapest-path
    tree (what a drained segment's rounding leaves, 1e-13 of the demand or less) used to count
    as flow, so the update never dropped the arc, whose longest-path label then blocked the
    arcs that would shorten the bush (a Winnipeg-size optimum stalled at 6e-6 on one). The
    update must zero such residues and drop the arc."""
    game, _ = synthetic_network("sioux_falls", seed=0)
    res = bush_assignment(game, tol=1e-12)
    state = res.state
    F, inb = state.origin_flow.copy(), state.bush.copy()
    k = 0
    spare = np.flatnonzero(inb[k] & (F[k] == 0))  # bush arcs without flow: tree arcs
    off_tree = np.flatnonzero(~inb[k] & game.usable(k))
    a = int(off_tree[0])
    inb[k, a] = True
    F[k, a] = 1e-14
    net = _Net(game)
    n = game.n_nodes
    by_head = np.argsort(game.heads, kind="stable").astype(np.int64)
    in_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(game.heads, minlength=n), out=in_start[1:])
    ws = bk._workspace(n, game.n_arcs)
    cst = game.costs.cost(F.sum(axis=0))
    tiny = 1e-13 * game.demand.sum(axis=1)
    bk._update(k, n, cst, F, inb, net.out_start, net.out_arcs, in_start, by_head, net.heads,
               net.tails, net.usable, net.nonthru, int(game.origins[k]), ws, tiny[k],
               bk.new_cache(len(game.origins), n, game.n_arcs, net.od_start,
                            net.od_dest))  # no cached order
    assert F[k, a] == 0.0 and not inb[k, a]
    assert np.all(inb[k, spare])  # the tree arcs stay


def test_regional_sizes_austin():
    """Austin size (the network of issue 24's TAP-B timing): its counts, a sparse trip table
    decaying with distance, every zone an origin, every OD pair reachable (scipy's Dijkstra)."""
    assert SIZES["austin"] == (7466, 18710, 1117)
    assert SIZES["chicago_regional"] == (12982, 39018, 1790)  # built by bench_tap.py
    game, data = synthetic_network("austin", seed=0)
    assert (game.n_nodes, game.n_arcs, len(game.origins)) == SIZES["austin"]
    od = game.demand > 0
    assert 0.2 < od[:, :1117].mean() < 0.3  # OD_DENSITY 0.25 (+ one kept pair per origin)
    dist, _ = shortest_paths(game, game.costs.cost(np.zeros(game.n_arcs)))
    assert np.all(np.isfinite(dist[od]))
    # distance decay: the mean trip is far shorter than the mean OD free-flow time
    mean_trip = float(np.sum(game.demand[od] * dist[od]) / game.demand[od].sum())
    assert mean_trip < 0.6 * float(dist[:, :1117][~np.eye(1117, dtype=bool)].mean())
    again, _ = synthetic_network("austin", seed=0)
    np.testing.assert_array_equal(game.demand, again.demand)
    assert data["first_thru_node"] == 1118


def test_small_sizes_with_density_and_decay():
    game, _ = synthetic_network((400, 1000, 60), seed=1, density=0.3, decay=0.3)
    assert (game.n_nodes, game.n_arcs, len(game.origins)) == (400, 1000, 60)
    full, _ = synthetic_network((400, 1000, 60), seed=1)
    assert (game.demand > 0).sum() < 0.4 * (full.demand > 0).sum()
    with pytest.raises(ParameterError, match="density"):
        synthetic_network("anaheim", density=0.0)
    with pytest.raises(ParameterError, match="decay"):
        synthetic_network("anaheim", decay=-1.0)


def test_cli_threads(tmp_path, capsys):
    _, data = synthetic_network("sioux_falls", seed=0)
    net, trips = tmp_path / "s_net.tntp", tmp_path / "s_trips.tntp"
    write_tntp(net, trips, data)
    base = ["equilibrium", str(net), "--trips", str(trips), "--method", "bush", "--json"]
    assert main([*base, "--threads", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["equilibria"]["wardrop"]["status"] == "optimal"
    assert main([*base, "--threads", "0"]) == 2
    assert "--threads must be an integer >= 1, got 0" in capsys.readouterr().err
    assert main(["equilibrium", "examples/three_cells.yaml", "--threads", "2"]) == 2
    assert "--threads applies to TNTP routing games only" in capsys.readouterr().err


@pytest.mark.parametrize("objective", ["wardrop", "system_optimum"])
def test_equilibrating_the_nodes_in_use_is_equilibrating_every_node(objective):
    """White-box: an equilibration pass labels and shifts only at the nodes its origin's flow can
    use (destinations and their bush ancestors, ``_relevant``). Oracle: the same passes with
    every reached node listed instead — the same flows, bit for bit, on a network whose origins
    have few destinations (so the listed nodes are a real subset)."""
    game, _ = synthetic_network((400, 1000, 60), seed=1, density=0.05, decay=0.3)
    so = objective == "system_optimum"
    state = bush_assignment(game, objective=objective, tol=1e-3).state
    enc, safe, net, args, tiny = _bush.setup(game)
    n, K = game.n_nodes, len(game.origins)
    perm = np.arange(K, dtype=np.int64)
    x, F, inb = state.origin_flow.sum(axis=0), state.origin_flow.copy(), state.bush.copy()
    cache = bk.new_cache(K, n, game.n_arcs, net.od_start, net.od_dest)
    bk.bush_pass(*enc, so, safe, net.origins, n, *args, x, F, inb, True, 1, tiny, cache, 1.0, 1,
                 perm)  # an update pass: fills the cache
    orders, cnts, bstart, barcs, rel, rcnt = cache[:6]
    assert rcnt.sum() < 0.8 * cnts.sum()  # a subset of the nodes
    every = (orders, cnts, bstart, barcs, np.tile(np.arange(n, dtype=np.int32), (K, 1)),
             cnts.copy(), *cache[6:])
    runs = []
    for c in (cache, every):
        xc, Fc = x.copy(), F.copy()
        worst = [bk.bush_pass(*enc, so, safe, net.origins, n, *args, xc, Fc, inb, False, 1, tiny,
                              c, 1.0, 1, perm) for _ in range(3)]
        runs.append((xc, Fc, worst))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    assert runs[0][2] == runs[1][2] and runs[0][2][0] > 0.0  # shifts happened
    assert not np.array_equal(runs[0][1], F)
