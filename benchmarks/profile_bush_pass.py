"""Where one bush pass's time goes (issue 37, item 4): the parts of Algorithm B timed apart.

On a synthetic network (default ``winnipeg`` and ``chicago_sketch``), solved to a gap first
(default 1e-6, so the bushes are the late-stage bushes the passes spend their time on), each part
runs over all origins, one thread, several times (median of ``REPEATS``): the topological order
of every bush; the shortest/longest-path labels over it (from the cached order and in-arc
lists, as the equilibration pass computes them); a whole equilibration pass (cached
order, labels, segments and Newton shifts; flows changed, so it runs on a copy each time); an
update pass (a fresh order, labels twice, arcs dropped and added); and the certificate (a
Dijkstra per origin and the gap). Printed: milliseconds per pass over all origins, the share of
an equilibration pass that is labels, the divergent nodes (shifts) per pass and shifts per
second. Timings are CPU seconds (``time.process_time``), so a loaded machine skews them less.

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/profile_bush_pass.py [SIZE ...]
[--gap G]`` (SIZE: a synthetic size, or ``austin_size`` — the benchmark's, see :func:`_game`;
solve it to ``--gap 1e-4``: to 1e-6 takes minutes).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from numba import njit

from lbtheory.games import _bushkernels as bk
from lbtheory.games import bush_assignment
from lbtheory.games._bush import setup
from lbtheory.games.synthetic import synthetic_network
from lbtheory.games.tap import certificate_parts

REPEATS = 7


@njit(cache=False)
def _topo_all(origins, n, out_start, out_arcs, heads, inb):
    ws = bk._workspace(n, heads.size)
    indeg, order, pos = ws[0], ws[1], ws[2]
    total = 0
    for k in range(origins.size):
        total += bk._topo(k, origins[k], n, out_start, out_arcs, heads, inb, indeg, order, pos)
    return total


@njit(cache=False)
def _fill(origins, n, out_start, out_arcs, in_start, in_arcs, heads, tails, inb, cache):
    """The order cache of every bush as an update pass leaves it (orders, in-arc lists and the
    nodes the flow can use)."""
    orders, cnts, bstart, barcs, rel, rcnt, od_start, od_dest = cache
    ws = bk._workspace(n, heads.size)
    indeg, order, pos = ws[0], ws[1], ws[2]
    for k in range(origins.size):
        cnt = bk._topo(k, origins[k], n, out_start, out_arcs, heads, inb, indeg, order, pos)
        bk._compact(order, cnt, in_start, in_arcs, inb[k], bstart[k], barcs[k])
        orders[k, :cnt] = order[:cnt]
        cnts[k] = cnt
        rcnt[k] = bk._relevant(order, cnt, pos, bstart[k], barcs[k], tails,
                               od_dest[od_start[k]:od_start[k + 1]], indeg, rel[k])


@njit(cache=False)
def _labels_all(origins, n, heads, tails, F, cst, cache):
    """Labels of every bush from the cache (as the equilibration pass computes them: at the
    nodes the flow can use); returns the divergent nodes (where a shift would happen) and
    those nodes."""
    orders, cnts, bstart, barcs, rel, rcnt, od_start, od_dest = cache
    ws = bk._workspace(n, heads.size)
    minp, maxp, L, U = ws[3], ws[4], ws[6], ws[7]
    div = 0
    used = 0
    for k in range(origins.size):
        order = orders[k]
        bk._labels(order, rel[k], rcnt[k], bstart[k], barcs[k], tails, F[k], cst, True, L, U,
                   minp, maxp)
        used += rcnt[k]
        for r in range(1, rcnt[k]):
            j = order[rel[k, r]]
            if maxp[j] >= 0 and maxp[j] != minp[j]:
                div += 1
    return div, used


def _median(fn, repeats: int = REPEATS) -> float:
    out = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    return statistics.median(out)


def _game(size: str):
    """The synthetic network ``size``: a :func:`synthetic_network` size, or ``austin_size`` (the
    Austin-size network of ``bench_tntp_vs_tapb.py``, this script's folder: one definition)."""
    if size == "austin_size":
        from bench_tntp_vs_tapb import SYNTHETIC

        shape, kw = SYNTHETIC[size]
        return synthetic_network(shape, seed=0, **kw)[0]
    return synthetic_network(size, seed=0)[0]


def profile(size: str, gap: float) -> None:
    game = _game(size)
    res = bush_assignment(game, tol=gap)
    st = res.state
    enc, safe, net, args, tiny = setup(game)
    n, K = game.n_nodes, len(game.origins)
    from lbtheory.games import _gpkernels as kern
    x0 = st.origin_flow.sum(axis=0)
    cst = kern.arc_costs(*enc, x0, False, False)
    cache = bk.new_cache(K, n, game.n_arcs, net.od_start, net.od_dest)
    perm = np.arange(K, dtype=np.int64)

    def one_pass(update: bool) -> None:
        x, F, inb = x0.copy(), st.origin_flow.copy(), st.bush.copy()
        cache[1][:] = 0  # the order cache must be that of this bush (or empty)
        bk.bush_pass(*enc, False, safe, net.origins, n, *args, x, F, inb, True, 1, tiny,
                     cache, 1.0, 1, perm)  # fills the order cache
        t = time.process_time()
        bk.bush_pass(*enc, False, safe, net.origins, n, *args, x, F, inb, update, 1, tiny,
                     cache, 1.0, 1, perm)
        one_pass.t = time.process_time() - t

    def timed_pass(update: bool) -> float:
        out = []
        for _ in range(REPEATS):
            one_pass(update)
            out.append(one_pass.t)
        return statistics.median(out)

    _topo_all(net.origins, n, net.out_start, net.out_arcs, net.heads, st.bush)
    full = bk.new_cache(K, n, game.n_arcs, net.od_start, net.od_dest)
    _fill(net.origins, n, *args[:6], st.bush, full)
    div, used = _labels_all(net.origins, n, net.heads, net.tails, st.origin_flow, cst, full)
    topo = _median(lambda: _topo_all(net.origins, n, net.out_start, net.out_arcs, net.heads,
                                     st.bush))
    labels = _median(lambda: _labels_all(net.origins, n, net.heads, net.tails, st.origin_flow,
                                         cst, full))
    equil = timed_pass(False)
    upd = timed_pass(True) - equil
    cert = _median(lambda: certificate_parts(game, net, enc, x0, False, "x", "bush", 1))
    print(f"{size} ({n} nodes, {game.n_arcs} arcs, {K} origins) at gap {res.relative_gap:.1e}, "
          f"{res.iterations} iterations, {used / K:.0f} of {n} nodes per bush in use: ms per pass "
          f"over all origins (CPU): topological orders "
          f"{1e3 * topo:.1f}, labels {1e3 * labels:.1f}, equilibration pass {1e3 * equil:.1f} "
          f"(labels {labels / equil:.0%}, {div} divergent nodes = "
          f"{div / max(equil - labels, 1e-9) / 1e6:.2f} M shifts/s outside the labels), "
          f"bush update +{1e3 * upd:.1f}, certificate {1e3 * cert:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="*", default=["winnipeg", "chicago_sketch"])
    ap.add_argument("--gap", type=float, default=1e-6)
    a = ap.parse_args()
    warm = synthetic_network("sioux_falls")[0]
    bush_assignment(warm, tol=1e-6)
    for size in a.sizes:
        profile(size, a.gap)


if __name__ == "__main__":
    main()
