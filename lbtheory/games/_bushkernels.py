"""numba kernels of the bush-based traffic-assignment solver (:mod:`._bush`, Dial's Algorithm B).

Per origin ``k`` a *bush* — an acyclic set of arcs the origin's flow may use — is the boolean row
``inb[k]``; the origin's arc flows are ``F[k]`` (flow units). Arc costs and derivatives come from
the kernels of :mod:`._gpkernels` (the one encoding; ℓ or, with ``so``, the marginal cost), cached
in ``cst``/``der`` at the total arc flows ``x`` and updated on every shift.

Equilibrating a bush (Dial, Transp. Res. B 40, 2006): in topological order, the cheapest path
(over all bush arcs) and the costliest *used* path (arcs with flow) to every node; for each node
in reverse topological order whose two paths differ, the segments from their last common node
are found and flow moves from the costly segment to the cheap one by a Newton step on the cost
difference (bisection-safeguarded where a derivative is infinite). Updating a bush: unused arcs
off the cheapest-path tree are dropped, then arcs that shorten the longest-path label of their
head are added — all added arcs ascend the longest-path labels, so the bush stays acyclic.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._gpkernels import _cost, _deriv, _shift_amount, dijkstra

_INF = np.inf


@njit(cache=True)
def _topo(k, o, n, out_start, out_arcs, heads, inb, indeg, order, pos):
    """Topological order of the nodes the bush of origin k reaches (Kahn); returns their count."""
    ib = inb[k]
    for v in range(n):
        indeg[v] = 0
    for a in range(heads.size):
        indeg[heads[a]] += ib[a]  # (branch-free: a bush arc is as likely as not)
    return _kahn(o, n, out_start, out_arcs, heads, ib, indeg, order, pos)


@njit(cache=True)
def _kahn(o, n, out_start, out_arcs, heads, ib, indeg, order, pos):
    """:func:`_topo` given each node's number of bush in-arcs ``indeg`` (consumed). Branch-free
    steps (whether an arc is in the bush and its head now ready is unpredictable): every head
    is written past the queue's end, the queue grows when it is ready, so ``order`` has n + 1
    entries; the positions are set afterwards."""
    order[0] = o
    cnt = 1
    i = 0
    while i < cnt:
        u = order[i]
        i += 1
        for e in range(out_start[u], out_start[u + 1]):
            a = out_arcs[e]
            h = heads[a]
            b = ib[a]
            d = indeg[h] - b
            indeg[h] = d
            order[cnt] = h
            cnt += b & (d == 0)
    for v in range(n):
        pos[v] = -1
    for i in range(cnt):
        pos[order[i]] = i
    return cnt


@njit(cache=True)
def _compact(order, cnt, in_start, in_arcs, ib, bs, ba):
    """A bush (``ib``: its arcs) as its in-arcs node by node in its topological order ``order``
    (``cnt`` nodes): the arcs into ``order[i]`` are ``ba[bs[i]:bs[i + 1]]``, in their in-star
    order (``in_arcs``), so a sweep over them meets the bush arcs in the order a sweep over the
    in-stars that skips the other arcs meets them (the same labels, ties broken alike) without
    touching the arcs outside the bush. Position 0: the arcs into the origin."""
    nb = 0
    for idx in range(cnt):
        bs[idx] = nb
        v = order[idx]
        for e in range(in_start[v], in_start[v + 1]):
            a = in_arcs[e]
            ba[nb] = a  # kept when a bush arc (branch-free)
            nb += ib[a]
    bs[cnt] = nb


@njit(cache=True)
def _labels(order, at, na, bs, ba, tails, Fk, cst, used_only, L, U, minp, maxp):
    """Cheapest-path labels L/minp over all bush arcs and costliest-path labels U/maxp over the
    bush arcs with flow (``used_only``) or over all bush arcs, in topological order (the bush as
    :func:`_compact` lists it in ``bs``/``ba``; ``Fk``: its origin's flows), at the nodes of
    ``order`` at the positions ``at[:na]`` (increasing, the origin's 0 first; every tail of a
    bush arc into one of them among them: all positions, or :func:`_relevant`'s). Only those
    nodes get labels (every tail of a bush arc precedes its head in the order); the others keep
    stale values."""
    o = order[0]
    L[o] = 0.0
    U[o] = 0.0
    minp[o] = -1
    maxp[o] = -1
    for r in range(1, na):
        idx = at[r]
        lv = _INF
        uv = -_INF
        mp = -1
        xp = -1
        for e in range(bs[idx], bs[idx + 1]):
            a = ba[e]
            t = tails[a]
            c = cst[a]
            if L[t] + c < lv:
                lv = L[t] + c
                mp = a
            if (not used_only or Fk[a] > 0.0) and U[t] > -_INF and U[t] + c > uv:
                uv = U[t] + c
                xp = a
        v = order[idx]
        L[v] = lv
        U[v] = uv
        minp[v] = mp
        maxp[v] = xp


@njit(cache=True)
def _equilibrate(k, n, kind, A, B, S, P, so, safe, x, cst, der, F, tails, ws, tiny, cache,
                 relax):
    """One Algorithm-B pass over the bush of origin k; returns the largest segment cost
    difference seen (cost units). Origin flows below ``tiny`` (flow units, far below the
    rounding of the origin's demand) left on a drained arc are zeroed. The bush's topological
    order and in-arc lists are the cached ones (``cache``, see :func:`new_cache`; kept current
    by :func:`_update`), and so are the nodes its flow can use (:func:`_relevant`): labels,
    segments and shifts there only — the same as over all nodes, since a node off them has no
    flow into it and no label they read."""
    Fk = F[k]
    indeg, order0, pos, minp, maxp, seg, L, U, dummy = ws
    orders, cnts, bstart, barcs, rel, rcnt, od_start, od_dest = cache
    order = orders[k]
    at = rel[k]
    na = rcnt[k]
    for r in range(na):
        pos[order[at[r]]] = at[r]
    _labels(order, at, na, bstart[k], barcs[k], tails, Fk, cst, True, L, U, minp, maxp)
    worst = 0.0
    for r in range(na - 1, 0, -1):
        j = order[at[r]]
        if maxp[j] < 0 or maxp[j] == minp[j]:
            continue
        # segments back to the last common node of the two paths (min arcs at seg[0:],
        # max arcs at seg[n:]): step back on the path whose node is later in the order
        a = minp[j]
        seg[0] = a
        nmin = 1
        u = tails[a]
        a = maxp[j]
        seg[n] = a
        nmax = 1
        w = tails[a]
        while u != w:
            if pos[u] > pos[w]:
                a = minp[u]
                seg[nmin] = a
                nmin += 1
                u = tails[a]
            else:
                a = maxp[w]
                seg[n + nmax] = a
                nmax += 1
                w = tails[a]
        g0 = 0.0
        dg0 = 0.0
        fmin = _INF
        for i in range(nmax):
            a = seg[n + i]
            g0 += cst[a]
            dg0 += der[a]
            if Fk[a] < fmin:
                fmin = Fk[a]
        for i in range(nmin):
            a = seg[i]
            g0 -= cst[a]
            dg0 += der[a]
        if not fmin > 0.0 or not g0 > 0.0:
            continue
        if g0 > worst:
            worst = g0
        if safe:
            d = fmin if dg0 <= 0.0 else min(relax * g0 / dg0, fmin)
        else:  # the max segment as "path p", the min segment as "path s" of the GP kernel
            for i in range(nmin):
                seg[n + nmax + i] = seg[i]
            d = _shift_amount(kind, A, B, S, P, so, x, seg, n, nmax, n + nmax, nmin, dummy,
                              dummy, -7, fmin, g0, dg0)
        if not d > 0.0:
            continue
        if fmin - d <= 1e-13 * fmin or fmin - d <= tiny:
            d = fmin
        for i in range(nmax):
            a = seg[n + i]
            f = Fk[a] - d
            Fk[a] = f if f > tiny else 0.0  # rounding residue of a drained segment
            xa = max(x[a] - d, 0.0)
            x[a] = xa  # costs set in place: see _gpkernels (a helper call costs 30×)
            cst[a] = _cost(kind, A, B, S, P, a, xa, so)
            der[a] = _deriv(kind, A, B, S, P, a, xa, so)
        for i in range(nmin):
            a = seg[i]
            Fk[a] += d
            xa = x[a] + d
            x[a] = xa
            cst[a] = _cost(kind, A, B, S, P, a, xa, so)
            der[a] = _deriv(kind, A, B, S, P, a, xa, so)
    return worst


@njit(cache=True)
def _labels_drop(order, cnt, bs, ba, tails, ib, Fk, cst, L, U, tiny):
    """The labels L and U of :func:`_labels` over all bush arcs of origin k (``used_only``
    False; not their arcs) with the unused arcs (flow ≤ ``tiny``, zeroed) off the cheapest-path
    tree dropped on the way, in one sweep over each node's in-arcs in topological order: its
    cheapest-path label over all of them (the tree arc, the first cheapest, kept, so L is the
    label of the bush before and after the drop), the unused ones dropped and the longest-path
    label U taken over the used ones, then the tree arc, if unused, restored and taken into U
    — the labels :func:`_labels` gives on the bush after the drop (a maximum of the same sums).
    Unused arcs into the origin are dropped too; every other bush arc enters a node the order
    reaches (trees and added arcs only join reached nodes). The bush ``ib`` as :func:`_compact`
    lists it in ``bs``/``ba`` (stale after a drop); ``Fk``: its origin's flows. Returns the
    number of arcs dropped."""
    dropped = 0
    o = order[0]
    L[o] = 0.0
    U[o] = 0.0
    for e in range(bs[0], bs[1]):  # an arc into the origin is never needed
        a = ba[e]
        if Fk[a] <= tiny:
            Fk[a] = 0.0
            ib[a] = False
            dropped += 1
    for idx in range(1, cnt):
        lv = _INF
        mp = -1
        uv = -_INF
        for e in range(bs[idx], bs[idx + 1]):
            a = ba[e]
            t = tails[a]
            c = cst[a]
            if L[t] + c < lv:
                lv = L[t] + c
                mp = a
            if Fk[a] <= tiny:
                Fk[a] = 0.0  # a rounding residue (see _equilibrate) counts as unused
                ib[a] = False  # dropped (the tree arc restored below)
                dropped += 1
            elif U[t] > -_INF and U[t] + c > uv:
                uv = U[t] + c
        if mp >= 0 and not ib[mp]:  # the tree arc, unused: kept
            ib[mp] = True
            dropped -= 1
            t = tails[mp]
            if U[t] > -_INF and U[t] + cst[mp] > uv:
                uv = U[t] + cst[mp]
        v = order[idx]
        L[v] = lv
        U[v] = uv
    return dropped


@njit(cache=True)
def _update(k, n, cst, F, inb, out_start, out_arcs, in_start, in_arcs, heads, tails, usable,
            nonthru, o, ws, tiny, cache):
    """Drop the unused arcs off the cheapest-path tree from the bush of origin k, then add the
    usable arcs that shorten the longest-path (or, ascending it, the cheapest-path) label of
    their head. Returns the number of arcs added.

    The bush's topological order and in-arc lists come from ``cache`` (:func:`new_cache`;
    ``cnts[k]`` = 0: none cached, computed here) and are recomputed (Kahn, :func:`_compact`)
    only when arcs were dropped or added, then left in the cache (the order also in the
    workspace) for the equilibration: the same order as a fresh one each time, so the same
    flows as computing it afresh, bit for bit. (Dropping arcs keeps
    the old order topological, and so does adding arcs whose tail precedes their head in it;
    keeping it then saves more, but changes the shift sequence: one Winnipeg-size solve to
    1e-10 needed 182 passes instead of 141.)"""
    ib = inb[k]
    Fk = F[k]
    indeg, order, pos, minp, maxp, seg, L, U, dummy = ws
    orders, cnts, bstart, barcs, rel, rcnt, od_start, od_dest = cache
    m = heads.size
    cnt = cnts[k]
    cached = cnt > 0
    if cached:
        for v in range(n):
            pos[v] = -1
        for i in range(cnt):
            order[i] = orders[k, i]
            pos[order[i]] = i
    else:
        cnt = _topo(k, o, n, out_start, out_arcs, heads, inb, indeg, order, pos)
        _compact(order, cnt, in_start, in_arcs, ib, bstart[k], barcs[k])
    changed = _labels_drop(order, cnt, bstart[k], barcs[k], tails, ib, Fk, cst, L, U, tiny)
    added = 0
    for v in range(n):
        indeg[v] = 0
    for a in range(m):
        h = heads[a]
        if ib[a]:
            if pos[h] < 0 and Fk[a] <= tiny:  # unreached: no label, so off the tree
                Fk[a] = 0.0
                ib[a] = False
                changed += 1
        elif usable[a]:
            t = tails[a]
            if not (h == o or (nonthru[t] and t != o) or pos[t] < 0 or pos[h] < 0):
                c = cst[a]
                if U[t] + c < U[h] - 1e-14 * U[h] or (L[t] + c < L[h] - 1e-14 * L[h]
                                                      and U[t] < U[h]):
                    ib[a] = True
                    added += 1
        indeg[h] += ib[a]  # the new bush's in-degrees, for Kahn
    changed += added
    if changed > 0:
        cnt = _kahn(o, n, out_start, out_arcs, heads, ib, indeg, order, pos)
        _compact(order, cnt, in_start, in_arcs, ib, bstart[k], barcs[k])
    if changed > 0 or not cached:
        orders[k, :cnt] = order[:cnt]
        cnts[k] = cnt
        rcnt[k] = _relevant(order, cnt, pos, bstart[k], barcs[k], tails,
                            od_dest[od_start[k]:od_start[k + 1]], indeg, rel[k])
    return added


@njit(cache=True)
def _relevant(order, cnt, pos, bs, ba, tails, dests, flag, at):
    """The positions in a bush's topological order ``order`` (``cnt`` nodes, ``pos`` their
    positions, the bush's in-arc lists ``bs``/``ba``) of the nodes its origin's flow can use:
    the destinations ``dests`` and every node a bush path to one passes (the origin first), into
    ``at``; returns their count. Flow only ever enters such a node (the first loading goes to
    destinations, and a shift moves flow onto a path into a node with flow), so the
    equilibration skips the others; on a regional network an origin of few destinations has
    far fewer. ``flag``: a work array (n)."""
    for i in range(cnt):
        flag[i] = 0
    flag[0] = 1
    for v in dests:
        if pos[v] >= 0:
            flag[pos[v]] = 1
    for idx in range(cnt - 1, 0, -1):
        if flag[idx]:
            for e in range(bs[idx], bs[idx + 1]):
                flag[pos[tails[ba[e]]]] = 1
    na = 0
    for idx in range(cnt):
        if flag[idx]:
            at[na] = idx
            na += 1
    return na


def new_cache(K: int, n: int, m: int, od_start: np.ndarray, od_dest: np.ndarray) -> tuple:
    """An empty cache of the bushes' topological orders and in-arc lists for ``K`` origins,
    ``n`` nodes and ``m`` arcs, the origins' destinations ``od_dest[od_start[k]:od_start[k + 1]]``
    (``_Net``'s OD list): ``(orders, cnts, bstart, barcs, rel, rcnt, od_start, od_dest)`` —
    origin k's order is ``orders[k, :cnts[k]]`` (``cnts[k]`` = 0: none cached yet), its bush arcs
    into ``orders[k, i]`` are ``barcs[k, bstart[k, i]:bstart[k, i + 1]]`` (:func:`_compact`), the
    positions of the nodes its flow can use ``rel[k, :rcnt[k]]`` (:func:`_relevant`)."""
    return (np.zeros((K, n), dtype=np.int32), np.zeros(K, dtype=np.int64),
            np.zeros((K, n + 1), dtype=np.int32), np.zeros((K, m), dtype=np.int32),
            np.zeros((K, n), dtype=np.int32), np.zeros(K, dtype=np.int64),
            np.asarray(od_start, dtype=np.int64), np.asarray(od_dest, dtype=np.int64))


@njit(cache=True)
def _workspace(n, m):
    """``(indeg, order, pos, minp, maxp, seg, L, U, dummy)``: node arrays (int32: node and arc
    ids, a smaller cache footprint; ``order`` n + 1, see :func:`_kahn`), the segment buffer and
    an unused stamp array."""
    return (np.empty(n, dtype=np.int32), np.empty(n + 1, dtype=np.int32),
            np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32),
            np.empty(n, dtype=np.int32), np.empty(3 * n, dtype=np.int64), np.empty(n),
            np.empty(n), np.full(m, -1, dtype=np.int64))


@njit(cache=True)
def _load_path(kind, A, B, S, P, so, o, v, dem, pred, tails, Fk, x, cst):
    """Add ``dem`` to origin o's flow Fk and the totals x on the path o → v that ``pred`` (the
    arc into each node) traces back, updating the costs of the arcs loaded."""
    w = v
    while w != o:
        a = pred[w]
        Fk[a] += dem
        x[a] += dem
        cst[a] = _cost(kind, A, B, S, P, a, x[a], so)
        w = tails[a]


@njit(cache=True)
def load_trees(kind, A, B, S, P, so, origins, demand, n, out_start, out_arcs, heads, tails,
               usable, nonthru, x, F, inb):
    """Initial bushes: per origin in turn, the shortest-path tree at the current costs (arcs it
    reaches destinations through) with the origin's demand loaded all-or-nothing on it."""
    m = heads.size
    cst = np.empty(m)
    for a in range(m):
        cst[a] = _cost(kind, A, B, S, P, a, x[a], so)
    dist = np.empty(n)
    pred = np.empty(n, dtype=np.int64)
    for k in range(origins.size):
        o = origins[k]
        ib = inb[k]
        Fk = F[k]
        dijkstra(o, n, out_start, out_arcs, heads, tails, usable, nonthru, cst, dist, pred)
        for v in range(n):
            if pred[v] >= 0:
                ib[pred[v]] = True
            dem = demand[k, v]
            if dem > 0.0 and v != o:
                _load_path(kind, A, B, S, P, so, o, v, dem, pred, tails, Fk, x, cst)


@njit(cache=True)
def _origin(k, kind, A, B, S, P, so, safe, origins, n, out_start, out_arcs, in_start, in_arcs,
            heads, tails, usable, nonthru, x, cst, der, F, inb, update, repeat, tiny, cache, relax,
            ws):
    """(``update``) update the bush of origin k, then ``repeat`` equilibrations of it; returns
    the largest segment cost difference seen. The bush's topological order and in-arc lists
    are the cached ones (``cache``, kept current by :func:`_update`)."""
    if update:
        _update(k, n, cst, F, inb, out_start, out_arcs, in_start, in_arcs, heads, tails, usable,
                nonthru, origins[k], ws, tiny[k], cache)
    worst = 0.0
    for _ in range(repeat):
        w = _equilibrate(k, n, kind, A, B, S, P, so, safe, x, cst, der, F, tails, ws, tiny[k],
                         cache, relax)
        if w > worst:
            worst = w
    return worst


@njit(cache=True, parallel=True)
def bush_pass(kind, A, B, S, P, so, safe, origins, n, out_start, out_arcs, in_start, in_arcs,
              heads, tails, usable, nonthru, x, F, inb, update, repeat, tiny, cache, relax, threads,
              perm):
    """One pass over the origins ``perm`` (a permutation of the origin indices, or of a subset of
    them: a partial pass), in that order: (``update``) update the bush, then ``repeat`` Algorithm-B
    equilibrations of it (``tiny``, ``cache``: see :func:`_equilibrate` and :func:`_update`; a
    :func:`new_cache` after a cold or warm start, and that first pass must update).
    Returns the largest segment cost difference seen (cost
    units).

    ``threads`` = 1: Gauss–Seidel, every origin sees every earlier shift (deterministic).
    ``threads`` > 1: the origins are shared among that many numba threads (lane l takes
    ``perm[l::threads]``), which shift flow at once on the shared arc flows ``x``
    and cost caches without locks — an asynchronous Gauss–Seidel pass (Chazan & Miranker's
    chaotic relaxation). Each origin's flows ``F[k]``, bush and order rows belong to one lane,
    so every origin's flow stays feasible; only the shared totals can miss a concurrent update,
    and the caller re-sums ``x`` from ``F`` after the pass. Results then vary in the last bits
    from run to run (not the certificate: that is computed afterwards from the re-summed flows).
    """
    m = heads.size
    K = perm.size
    cst = np.empty(m)
    der = np.empty(m)
    for a in range(m):
        cst[a] = _cost(kind, A, B, S, P, a, x[a], so)
        der[a] = _deriv(kind, A, B, S, P, a, x[a], so)
    if threads <= 1:
        ws = _workspace(n, m)
        worst = 0.0
        for i in range(K):
            k = perm[i]
            w = _origin(k, kind, A, B, S, P, so, safe, origins, n, out_start, out_arcs, in_start,
                        in_arcs, heads, tails, usable, nonthru, x, cst, der, F, inb, update,
                        repeat, tiny, cache, relax, ws)
            if w > worst:
                worst = w
        return worst
    W = np.zeros(threads)
    for lane in prange(threads):
        ws = _workspace(n, m)
        for i in range(lane, K, threads):
            k = perm[i]
            w = _origin(k, kind, A, B, S, P, so, safe, origins, n, out_start, out_arcs, in_start,
                        in_arcs, heads, tails, usable, nonthru, x, cst, der, F, inb, update,
                        repeat, tiny, cache, relax, ws)
            if w > W[lane]:
                W[lane] = w
    return W.max()


@njit(cache=True)
def load_in_bushes(kind, A, B, S, P, so, origins, demand, n, out_start, out_arcs, in_start,
                   in_arcs, heads, tails, x, F, inb, todo):
    """Warm start: per origin with ``todo`` in turn, its demand loaded all-or-nothing on the
    cheapest paths within its (given) bush at the current costs (``x``: the other origins'
    flows). Returns False when a destination with demand is not reached by its bush."""
    m = heads.size
    cst = np.empty(m)
    for a in range(m):
        cst[a] = _cost(kind, A, B, S, P, a, x[a], so)
    ws = _workspace(n, m)
    indeg, order, pos, minp, maxp, seg, L, U, dummy = ws
    bs = np.empty(n + 1, dtype=np.int32)
    ba = np.empty(m, dtype=np.int32)
    every = np.arange(n).astype(np.int32)  # labels at all positions
    for k in range(origins.size):
        if not todo[k]:
            continue
        o = origins[k]
        Fk = F[k]
        cnt = _topo(k, o, n, out_start, out_arcs, heads, inb, indeg, order, pos)
        _compact(order, cnt, in_start, in_arcs, inb[k], bs, ba)
        _labels(order, every, cnt, bs, ba, tails, Fk, cst, False, L, U, minp, maxp)
        for v in range(n):
            dem = demand[k, v]
            if dem > 0.0 and v != o:
                if pos[v] < 0:
                    return False
                _load_path(kind, A, B, S, P, so, o, v, dem, minp, tails, Fk, x, cst)
    return True
