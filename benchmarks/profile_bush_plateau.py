"""Why the bush solver's gap dithers at tight gaps (issue 37, items 3 and 5): a diagnosis.

On a synthetic network (default Chicago-Sketch size, seed 1, whose system optimum at 1e-8 took
70 iterations where 1e-10 took 51), three measurements, one thread:

1. **Where the remaining gap lies.** Cold solves to each ``--tols`` value; the certified gap of
   the result split into its *bush-internal* part (each origin's TSTT minus its demand times
   the cheapest path *within its bush*) and the *external* part (the bush's cheapest paths
   minus the network's): an external part means the bush updates lag, an internal one that the
   equilibration passes do.
2. **Frozen bushes.** From the solve to ``--start`` (default 1e-6), ``--passes`` equilibration
   passes without bush updates (a random origin order each pass, seeded), the gap before each
   and after the last, and the internal / external split at both ends: with the step factor
   ω = 1 (the solver's), 0.8 and 0.5, and with 3 equilibrations per origin per pass. (ω < 1 is
   passed to the kernel directly; the public ``relax=`` allows [1, 2). ω acts only where every
   cost is BPR-safe for the Newton shift — the synthetic networks are; checked.)
3. **The gap's jumps.** In the ω = 1 run, every pass after which the gap rose above 1.5× its
   value: how many origins' TSTT − SPTT rose, and the share of the rise the largest five carry.

``--shifts``: instead, the segment shifts of one equilibration pass on the bushes of the solve to
``--start``, replayed in Python as a *static snapshot*: every origin's labels and every shift at
the pass's starting costs and flows (the kernel relabels each origin at the costs the earlier
origins left and updates costs and flows after each shift, so later shifts on a max path see
less flow: the snapshot under-counts drains), the kernel's snap of tiny leftovers ignored. How
many shifts are limited by the max segment's flow (a drain) and how many are whole Newton
steps, with their first-order gains (cost difference × flow moved, as shares), and the drained
flows as shares of their origin's demand (quantiles).

``--landing``: instead, where the certified gap lands — tol / gap, iterations and CPU seconds of
cold solves (defaults of :func:`bush_assignment`) on the synthetic sizes of ``--sizes``, seeds
0–2, both objectives, tol 1e-4 / 1e-6 / 1e-8 / 1e-10 (the issue asks for ≤ 2).

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/profile_bush_plateau.py [--size S]
[--seed N] [--objective wardrop|system_optimum ...] [--tols T ...] [--start G] [--passes P]
[--shifts | --landing [--sizes S ...]]`` (a minute or two).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from profile_bush_pass import _fill
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from lbtheory.games import _bushkernels as bk
from lbtheory.games import _gpkernels as kern
from lbtheory.games import bush_assignment
from lbtheory.games._bush import _excess, setup
from lbtheory.games.synthetic import synthetic_network
from lbtheory.games.tap import certificate_parts


def split(game, F, inb, cost, dist) -> tuple[float, float]:
    """(internal, external) parts of the relative gap at origin flows ``F`` and bushes ``inb``
    (see the module docstring); the two add up to the certified gap."""
    n = game.n_nodes
    tstt = float(F.sum(axis=0) @ cost)
    internal = external = 0.0
    for k, o in enumerate(game.origins):
        use = inb[k]
        # a zero-cost arc must stay an arc of the sparse matrix: 1e-300 is below every sum here;
        # csr_matrix would add up parallel arcs (same tail and head): the synthetic networks
        # have none, a real network with them needs the minimum instead
        A = csr_matrix((cost[use] + 1e-300, (game.tails[use], game.heads[use])), shape=(n, n))
        inside = dijkstra(A, indices=int(o))
        dem = game.demand[k]
        sel = dem > 0
        internal += float(F[k] @ cost) - float(dem[sel] @ inside[sel])
        external += float(dem[sel] @ inside[sel]) - float(dem[sel] @ dist[k][sel])
    return internal / tstt, external / tstt


def frozen(game, so: bool, state, passes: int, relax: float, repeat: int,
           jumps: bool = False) -> list[float]:
    """Gap before each of ``passes`` equilibration passes on the frozen bushes of ``state``,
    and after the last."""
    enc, safe, net, args, tiny = setup(game)
    if not safe:
        raise SystemExit("frozen(): the step factor acts only on BPR-safe costs (see above)")
    n, K = game.n_nodes, len(game.origins)
    F, inb = state.origin_flow.copy(), state.bush.copy()
    x = F.sum(axis=0)
    cache = bk.new_cache(K, n, game.n_arcs, net.od_start, net.od_dest)
    _fill(net.origins, n, *args[:6], inb, cache)
    rng = np.random.default_rng(0)
    ends = []
    gaps: list[float] = []
    prev = None
    for p in range(passes + 1):  # the gap before each pass and after the last
        gap, cost, dist = certificate_parts(game, net, enc, x, so, "profile", "bush", 1)
        e = _excess(game, F, cost, dist)
        if p in (0, passes):
            ends.append(split(game, F, inb, cost, dist))
        if jumps and prev is not None and gap > 1.5 * gaps[-1]:
            rise = e - prev
            top = np.sort(rise)[::-1][:5]
            print(f"    pass {p - 1}: gap {gaps[-1]:.2e} -> {gap:.2e}: {int((rise > 0).sum())} of "
                  f"{K} origins rose, the largest 5 carry {top.sum() / rise[rise > 0].sum():.2f} "
                  "of the rise")
        gaps.append(gap)
        prev = e
        if p == passes:
            break
        bk.bush_pass(*enc, so, safe, net.origins, n, *args, x, F, inb, False, repeat, tiny,
                     cache, relax, 1, rng.permutation(K))
        x = F.sum(axis=0)
    print("    internal + external: " + " -> ".join(f"{i:.2e} + {e:.2e}" for i, e in ends))
    return gaps


def shifts(game, so: bool, state) -> None:
    """Replay one pass's segment shifts per origin (see the docstring) and print the counts."""
    enc, safe, net, args, _ = setup(game)
    if not safe:
        raise SystemExit("shifts(): the replay follows the BPR-safe Newton shift only")
    n, K = game.n_nodes, len(game.origins)
    F, inb = state.origin_flow, state.bush
    x = F.sum(axis=0)
    cost = kern.arc_costs(*enc, x, so, False)
    der = kern.arc_costs(*enc, x, so, True)
    cache = bk.new_cache(K, n, game.n_arcs, net.od_start, net.od_dest)
    _fill(net.origins, n, *args[:6], inb, cache)
    orders, _, bstart, barcs, rel, rcnt = cache[:6]
    tails = game.tails
    count = {"drain": 0, "newton": 0}
    gain = {"drain": 0.0, "newton": 0.0}
    drained = []  # a drain's flow / its origin's demand
    for k in range(K):
        Fk, order, at, bs, ba = F[k], orders[k], rel[k][: rcnt[k]], bstart[k], barcs[k]
        o = order[0]
        L, U, minp, maxp = {o: 0.0}, {o: 0.0}, {o: -1}, {o: -1}
        pos = {order[i]: i for i in at}
        for idx in at[1:]:  # the labels of _bushkernels._labels (used_only), in Python
            lv, uv, mp, xp = np.inf, -np.inf, -1, -1
            for a in ba[bs[idx]: bs[idx + 1]]:
                t = tails[a]
                if L[t] + cost[a] < lv:
                    lv, mp = L[t] + cost[a], a
                if Fk[a] > 0 and U[t] > -np.inf and U[t] + cost[a] > uv:
                    uv, xp = U[t] + cost[a], a
            v = order[idx]
            L[v], U[v], minp[v], maxp[v] = lv, uv, mp, xp
        for idx in at[1:]:
            j = order[idx]
            if maxp[j] < 0 or maxp[j] == minp[j]:
                continue
            smin, smax = [minp[j]], [maxp[j]]
            u, w = tails[minp[j]], tails[maxp[j]]
            while u != w:  # back to the last common node, as _equilibrate does
                if pos[u] > pos[w]:
                    smin.append(minp[u])
                    u = tails[minp[u]]
                else:
                    smax.append(maxp[w])
                    w = tails[maxp[w]]
            g0 = cost[smax].sum() - cost[smin].sum()
            dg = der[smax].sum() + der[smin].sum()
            fmin = Fk[smax].min()
            if not (g0 > 0 and fmin > 0):
                continue
            step = g0 / dg if dg > 0 else np.inf
            kind = "drain" if fmin <= step else "newton"
            count[kind] += 1
            gain[kind] += g0 * min(fmin, step)
            if kind == "drain":
                drained.append(fmin / game.demand[k].sum())
    total = gain["drain"] + gain["newton"]
    q = np.quantile(drained, [0.1, 0.5, 0.9]) if drained else [np.nan] * 3
    print(f"  one pass's shifts (static snapshot): {count['drain']} drain-limited "
          f"({gain['drain'] / total:.0%} of the first-order gain), {count['newton']} Newton steps "
          f"({gain['newton'] / total:.0%}); drained flow / origin demand, 10/50/90 %: "
          + " / ".join(f"{v:.1e}" for v in q))


def landing(sizes: list[str]) -> None:
    """Print tol / certified gap, iterations and CPU s of each cold solve (see the docstring)."""
    for size in sizes:
        for seed in (0, 1, 2):
            game = synthetic_network(size, seed=seed)[0]
            bush_assignment(game, tol=1e-2)  # kernels loaded before the timings
            row = []
            for obj in ("wardrop", "system_optimum"):
                for tol in (1e-4, 1e-6, 1e-8, 1e-10):
                    t = time.process_time()
                    r = bush_assignment(game, tol=tol, objective=obj, throw=False)
                    land = (f"{tol / r.relative_gap:.2f}x" if r.relative_gap > 0 else "gap 0")
                    if r.relative_gap > tol:
                        land += " (NOT REACHED)"
                    row.append(f"{obj[0].upper()} {tol:.0e}: {land} "
                               f"{r.iterations} it {time.process_time() - t:.3f} s")
            print(f"{size} seed {seed}: " + "; ".join(row), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="chicago_sketch")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--objective", nargs="+", default=["wardrop", "system_optimum"])
    ap.add_argument("--tols", type=float, nargs="+", default=[1e-4, 1e-6, 1e-8])
    ap.add_argument("--start", type=float, default=1e-6)
    ap.add_argument("--passes", type=int, default=30)
    ap.add_argument("--landing", action="store_true")
    ap.add_argument("--shifts", action="store_true")
    ap.add_argument("--sizes", nargs="+",
                    default=["sioux_falls", "anaheim", "barcelona", "winnipeg", "chicago_sketch"])
    a = ap.parse_args()
    if a.landing:
        landing(a.sizes)
        return
    game = synthetic_network(a.size, seed=a.seed)[0]
    for obj in a.objective:
        so = obj == "system_optimum"
        print(f"{a.size} seed {a.seed}, {obj}")
        if a.shifts:
            shifts(game, so, bush_assignment(game, tol=a.start, objective=obj, throw=False).state)
            continue
        enc, _, net, _, _ = setup(game)
        for tol in a.tols:
            r = bush_assignment(game, tol=tol, objective=obj, throw=False)
            st = r.state
            gap, cost, dist = certificate_parts(game, net, enc, st.origin_flow.sum(axis=0), so,
                                                "profile", "bush", 1)
            i, e = split(game, st.origin_flow, st.bush, cost, dist)
            print(f"  solved to {tol:g}: {r.iterations} iterations, gap {gap:.2e} = internal "
                  f"{i:.2e} + external {e:.2e}")
        st = bush_assignment(game, tol=a.start, objective=obj, throw=False).state
        for relax, repeat in ((1.0, 1), (0.8, 1), (0.5, 1), (1.0, 3)):
            print(f"  frozen bushes from {a.start:g}, omega {relax}, {repeat} equilibration(s) "
                  "per origin per pass:")
            gaps = frozen(game, so, st, a.passes, relax, repeat, jumps=relax == 1.0 and repeat == 1)
            print("    gap before each pass and after the last: "
                  + " ".join(f"{g:.1e}" for g in gaps))


if __name__ == "__main__":
    main()
