"""numba kernels of the path-based gradient-projection traffic-assignment solver (:mod:`.tap`),
and the arc-cost formulas of the kernel families — their one definition.

Arc-cost formulas: :func:`poly_formula` (ℓ = a + b·(x/s)^p) and :func:`mm1_formula`
(ℓ = k/(u − x)) evaluate, at one arc flow x (clipped at 0), what :data:`COST` …
:data:`MARGINAL_PRIME` says: ℓ, ℓ', the Beckmann integral, x·ℓ, the marginal cost x·ℓ' + ℓ and its
derivative. The numpy methods of :class:`~.arccosts.Polynomial` / :class:`~.arccosts.MM1` call
them through :func:`formula_array`, and the solver kernels (here and in :mod:`._bushkernels`) call
them per arc, so the reference and the compiled solvers compute the same bits. (They live here,
not in :mod:`.arccosts`, because numba's cache of a kernel goes stale when a function it calls
changes in *another* file.)

In the solver kernels arc costs are encoded per arc as ``kind`` (0: polynomial; 1: M/M/1) with
parameters ``(A, B, S, P)`` (polynomial: a, b, s, p; M/M/1: −, k, u, −), and evaluated either as
travel costs ℓ (Wardrop) or as marginal costs x·ℓ' + ℓ (system optimum, ``so=True``).

Paths live in a growable pool of arc ids: path ``p`` is ``pool[off[p]:off[p] + plen[p]]`` with
flow ``pflow[p]``; the paths of OD pair ``q`` form a linked list ``head[q] → nxt[p] → … → −1``.
All flows are in the game's flow units, costs in its cost units.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._codes import COST, MARGINAL, MARGINAL_PRIME, POLYNOMIAL, POTENTIAL, PRIME, TOTAL

_INF = np.inf

# The formulas and the per-arc dispatch (_arc, _cost, _deriv) are inlined into every kernel
# (numba inline="always"): as calls, the solver kernels ran them 5–10 % slower and arc_costs
# ≈ 50× slower; the price is ≈ 10 s more on a cold numba cache. A kernel that moves flow on an
# arc sets x[a], cst[a] = _cost(…) and der[a] = _deriv(…) itself: a helper doing the three (a
# call, or inlined — numba then nests the two inlined formulas badly) cost ≈ 120 ns per arc
# against ≈ 4 ns, a third of a bush equilibration pass.


@njit(cache=True)
def _pow(r, p):
    if p == 4.0:
        r2 = r * r
        return r2 * r2
    if p == 1.0:
        return r
    if p == 0.0:
        return 1.0
    return r ** p


@njit(cache=True, inline="always")
def poly_formula(what, a, b, s, p, x):
    """``what`` of the polynomial arc ℓ(x) = a + b·(x/s)^p (p ≥ 0; 0^0 = 1) at flow x ≥ 0
    (negative x counts as 0): ℓ, ℓ' (+inf at x = 0 when p < 1), a·x + b·s/(p+1)·(x/s)^{p+1},
    x·ℓ, a + b(p+1)(x/s)^p or (p+1)·ℓ'."""
    if x < 0.0:
        x = 0.0
    r = x / s
    if what == COST:
        return a + b * _pow(r, p)
    if what == MARGINAL:
        return a + b * (p + 1.0) * _pow(r, p)
    if what == POTENTIAL:
        return a * r * s + b * s / (p + 1.0) * _pow(r, p + 1.0)
    if what == TOTAL:
        return s * r * (a + b * _pow(r, p))
    if p == 0.0 or b == 0.0:
        return 0.0
    if r == 0.0 and p < 1.0:
        return _INF
    d = b * p / s * (r * r * r if p == 4.0 else r ** (p - 1.0))
    if what == MARGINAL_PRIME:
        d *= p + 1.0
    return d


@njit(cache=True, inline="always")
def mm1_formula(what, k, u, x):
    """``what`` of the M/M/1 arc ℓ(x) = k/(u − x) at flow x ≥ 0 (negative x counts as 0), +inf
    at x ≥ u: ℓ, k/(u − x)², k·log(u/(u − x)), k·x/(u − x), k·u/(u − x)² or 2k·u/(u − x)³."""
    if x < 0.0:
        x = 0.0
    g = u - x
    if not g > 0.0:
        return _INF
    if what == COST:
        return k / g
    if what == MARGINAL:
        return k * u / (g * g)
    if what == PRIME:
        return k / (g * g)
    if what == MARGINAL_PRIME:
        return 2.0 * k * u / (g * g * g)
    if what == POTENTIAL:
        return k * np.log(u / g)
    return k * x / g


@njit(cache=True, inline="always")
def _at(v, i):
    return v[0] if v.size == 1 else v[i]


@njit(cache=True)
def formula_array(family, what, p1, p2, p3, p4, x, out):
    """``out[i]`` = ``what`` of arc i of ``family`` at flow ``x[i]`` (1-D arrays of the length
    of ``out``, or of length 1: repeated): :func:`poly_formula` with (a, b, s, p) =
    (p1, p2, p3, p4) or :func:`mm1_formula` with (k, u) = (p1, p2) (p3, p4 unused)."""
    for i in range(out.size):
        if family == POLYNOMIAL:
            out[i] = poly_formula(what, _at(p1, i), _at(p2, i), _at(p3, i), _at(p4, i), _at(x, i))
        else:
            out[i] = mm1_formula(what, _at(p1, i), _at(p2, i), _at(x, i))


@njit(cache=True, inline="always")
def _arc(kind, A, B, S, P, a, x, what):
    """``what`` of encoded arc a at flow x."""
    if kind[a] == POLYNOMIAL:
        return poly_formula(what, A[a], B[a], S[a], P[a], x)
    return mm1_formula(what, B[a], S[a], x)


@njit(cache=True, inline="always")
def _cost(kind, A, B, S, P, a, x, so):
    return _arc(kind, A, B, S, P, a, x, MARGINAL if so else COST)


@njit(cache=True, inline="always")
def _deriv(kind, A, B, S, P, a, x, so):
    return _arc(kind, A, B, S, P, a, x, MARGINAL_PRIME if so else PRIME)


@njit(cache=True)
def arc_costs(kind, A, B, S, P, x, so, deriv):
    """Costs (ℓ or marginal) of every arc at flows x, or (``deriv``) their derivatives."""
    out = np.empty(x.size)
    for a in range(x.size):
        out[a] = _deriv(kind, A, B, S, P, a, x[a], so) if deriv else \
            _cost(kind, A, B, S, P, a, x[a], so)
    return out


@njit(cache=True, inline="always")
def _sift_down(hk, hv, size):
    """Heap pop's second half: the last of the binary heap's ``size`` + 1 entries (keys ``hk``,
    nodes ``hv``) sifted down from the root into a heap of ``size`` entries. :func:`dijkstra`'s
    (lazy deletion; its predecessors depend on the heap's order of ties, so it keeps this
    heap); :func:`_dists` has a 4-ary one with decrease-key (:func:`_sift_down4`)."""
    k, v = hk[size], hv[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and hk[c + 1] < hk[c]:
            c += 1
        if hk[c] >= k:
            break
        hk[i] = hk[c]
        hv[i] = hv[c]
        i = c
    hk[i] = k
    hv[i] = v


@njit(cache=True, inline="always")
def _sift_down4(hk, hv, size, where):
    """:func:`_sift_down` in a 4-ary heap (children of slot i: 4i + 1 … 4i + 4), the moved
    nodes' slots kept in ``where``: half the levels of a binary heap, each a run of adjacent
    keys (an Austin-size certificate ≈ 0.65× the time; the distances do not depend on the
    heap's shape, see :func:`_dists`)."""
    k, v = hk[size], hv[size]
    i = 0
    while True:
        c = 4 * i + 1
        if c >= size:
            break
        b = c
        kb = hk[c]
        for j in range(c + 1, min(c + 4, size)):
            if hk[j] < kb:
                kb = hk[j]
                b = j
        if kb >= k:
            break
        hk[i] = kb
        hv[i] = hv[b]
        where[hv[i]] = i
        i = b
    hk[i] = k
    hv[i] = v
    where[v] = i


@njit(cache=True)
def dijkstra(origin, n, out_start, out_arcs, heads, tails, usable, nonthru, cost, dist, pred):
    """Shortest paths from ``origin`` (binary heap, lazy deletion) under the game's arc-use rule.

    An arc is used when ``usable`` (unblocked), its head is not the origin, and its tail is a
    through node or the origin itself. Fills ``dist`` (+inf when unreachable) and ``pred`` (the
    arc entering each node, −1 at the root and unreachable nodes).
    """
    for v in range(n):
        dist[v] = _INF
        pred[v] = -1
    hk = np.empty(out_arcs.size + 1)
    hv = np.empty(out_arcs.size + 1, dtype=np.int64)
    size = 0
    dist[origin] = 0.0
    hk[0] = 0.0
    hv[0] = origin
    size = 1
    done = np.zeros(n, dtype=np.bool_)
    while size > 0:
        du = hk[0]
        u = hv[0]
        size -= 1
        if size > 0:
            _sift_down(hk, hv, size)
        if done[u]:
            continue
        done[u] = True
        if nonthru[u] and u != origin:
            continue
        for e in range(out_start[u], out_start[u + 1]):
            a = out_arcs[e]
            h = heads[a]
            if not usable[a] or h == origin or done[h]:
                continue
            nd = du + cost[a]
            if nd < dist[h]:
                dist[h] = nd
                pred[h] = a
                i = size  # sift up
                size += 1
                while i > 0:
                    par = (i - 1) // 2
                    if hk[par] <= nd:
                        break
                    hk[i] = hk[par]
                    hv[i] = hv[par]
                    i = par
                hk[i] = nd
                hv[i] = h
    return dist


@njit(cache=True)
def _dists(origin, n, start, head, cost, nonthru, dist, hk, hv, where):
    """Shortest-path distances from ``origin`` on a compact forward star (``start``: each node's
    first entry; ``head``/``cost`` per entry, the usable arcs only) by a 4-ary heap of nodes
    with decrease-key (:func:`_sift_down4`; ``where``: a node's heap slot, −1 unreached, −2
    settled; at most n entries). The same arc-use rule as :func:`dijkstra` and the
    same distances (each the least of its settled predecessors' dist + cost, whatever the
    heap's order or shape). Fills ``dist``."""
    for v in range(n):
        dist[v] = _INF
        where[v] = -1
    dist[origin] = 0.0
    hk[0] = 0.0
    hv[0] = origin
    where[origin] = 0
    size = 1
    while size > 0:
        du = hk[0]
        u = hv[0]
        where[u] = -2
        size -= 1
        if size > 0:
            _sift_down4(hk, hv, size, where)
        if nonthru[u] and u != origin:
            continue
        for e in range(start[u], start[u + 1]):
            h = head[e]
            i = where[h]
            if i == -2:  # settled (the origin among them)
                continue
            nd = du + cost[e]
            if nd < dist[h]:
                dist[h] = nd
                if i < 0:
                    i = size
                    size += 1
                while i > 0:  # sift up
                    par = (i - 1) // 4
                    if hk[par] <= nd:
                        break
                    hk[i] = hk[par]
                    hv[i] = hv[par]
                    where[hv[i]] = i
                    i = par
                hk[i] = nd
                hv[i] = h
                where[h] = i


@njit(cache=True, parallel=True)
def _dists_lanes(origins, n, start, head, ce, nonthru, lanes, D):
    """:func:`_dists` for every origin into the rows of D, the origins shared among ``lanes``
    numba threads (lane l takes origins l, l + lanes, …)."""
    K = origins.size
    for lane in prange(lanes):
        hk = np.empty(n + 1)
        hv = np.empty(n + 1, dtype=np.int64)
        where = np.empty(n, dtype=np.int64)
        for k in range(lane, K, lanes):
            _dists(origins[k], n, start, head, ce, nonthru, D[k], hk, hv, where)


@njit(cache=True)
def all_dists(origins, n, out_start, out_arcs, heads, tails, usable, nonthru, cost, threads):
    """Shortest-path distances (K × n) from every origin under ``cost`` (the arc-use rule of
    :func:`dijkstra`), the origins shared among ``threads`` numba threads (each row is written
    by one; the same bits for any count; one thread runs no parallel region, whose start-up
    and spinning workers cost more than the Dijkstras at these sizes). The usable arcs are
    packed once into a compact forward star with their costs (:func:`_dists`)."""
    K = origins.size
    start = np.zeros(n + 1, dtype=np.int64)
    head = np.empty(out_arcs.size, dtype=np.int64)
    ce = np.empty(out_arcs.size)
    j = 0
    for u in range(n):
        for e in range(out_start[u], out_start[u + 1]):
            a = out_arcs[e]
            if usable[a]:
                head[j] = heads[a]
                ce[j] = cost[a]
                j += 1
        start[u + 1] = j
    D = np.empty((K, n))
    lanes = max(min(threads, K), 1)
    if lanes > 1:
        _dists_lanes(origins, n, start, head, ce, nonthru, lanes, D)
        return D
    hk = np.empty(n + 1)
    hv = np.empty(n + 1, dtype=np.int64)
    where = np.empty(n, dtype=np.int64)
    for k in range(K):
        _dists(origins[k], n, start, head, ce, nonthru, D[k], hk, hv, where)
    return D


@njit(cache=True)
def _g(kind, A, B, S, P, so, x, pool, op, lp, os_, ls, mp, ms, stamp, delta):
    """Cost of path p minus cost of path s after shifting ``delta`` from p to s, and its
    derivative in delta (over the arcs the two paths do not share)."""
    g = 0.0
    dg = 0.0
    for i in range(op, op + lp):
        a = pool[i]
        if ms[a] != stamp:
            g += _cost(kind, A, B, S, P, a, x[a] - delta, so)
            dg += _deriv(kind, A, B, S, P, a, x[a] - delta, so)
    for i in range(os_, os_ + ls):
        a = pool[i]
        if mp[a] != stamp:
            g -= _cost(kind, A, B, S, P, a, x[a] + delta, so)
            dg += _deriv(kind, A, B, S, P, a, x[a] + delta, so)
    return g, dg


@njit(cache=True)
def _shift_amount(kind, A, B, S, P, so, x, pool, op, lp, os_, ls, mp, ms, stamp, fp, g0, dg0):
    """Flow to move from path p (flow fp, cost excess g0 > 0) to the cheaper path s: one Newton
    step on the cost difference (the gradient-projection step), safeguarded by bisection when
    the derivative is not finite or the step leaves the feasible range."""
    if dg0 == 0.0:
        return fp
    if np.isfinite(dg0):
        d = g0 / dg0
        if d >= fp:
            g1, _ = _g(kind, A, B, S, P, so, x, pool, op, lp, os_, ls, mp, ms, stamp, fp)
            if g1 >= 0.0:
                return fp
        else:
            g1, _ = _g(kind, A, B, S, P, so, x, pool, op, lp, os_, ls, mp, ms, stamp, d)
            if np.isfinite(g1):
                return d
    lo, hi = 0.0, fp
    g1, _ = _g(kind, A, B, S, P, so, x, pool, op, lp, os_, ls, mp, ms, stamp, fp)
    if g1 >= 0.0:
        return fp
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        gm, _ = _g(kind, A, B, S, P, so, x, pool, op, lp, os_, ls, mp, ms, stamp, mid)
        if gm > 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * fp:
            break
    return lo


@njit(cache=True)
def _grow(arr, need):
    if need <= arr.size:
        return arr
    new = np.empty(max(need, 2 * arr.size), dtype=arr.dtype)
    new[:arr.size] = arr
    return new


@njit(cache=True)
def sweep(kind, A, B, S, P, so, safe, rel, origins, od_start, od_dest, od_demand, n, out_start,
          out_arcs, heads, tails, usable, nonthru, x, pool, off, plen, pflow, pod, nxt, head,
          n_paths, pool_used, mp, ms, stamp, generate):
    """One Gauss–Seidel pass over all OD pairs of the gradient-projection method.

    Per origin: (``generate``) shortest-path tree at the current costs, its path to each
    destination added to the OD's path set (new OD pairs get their whole demand on it); then,
    per OD pair, flow moves from every costlier path to the cheapest path of the set by a
    projected Newton step, updating the arc flows ``x`` at once. Paths left without flow are
    unlinked. Returns the (possibly reallocated) path arrays and counters.
    """
    n_arcs = x.size
    dist = np.empty(n)
    pred = np.empty(n, dtype=np.int64)
    cst = np.empty(n_arcs)
    der = np.empty(n_arcs)
    for a in range(n_arcs):
        cst[a] = _cost(kind, A, B, S, P, a, x[a], so)
        der[a] = _deriv(kind, A, B, S, P, a, x[a], so)
    buf = np.empty(n, dtype=np.int64)
    worst = 0.0
    for k in range(origins.size):
        o = origins[k]
        if generate:
            dijkstra(o, n, out_start, out_arcs, heads, tails, usable, nonthru, cst, dist, pred)
        for q in range(od_start[k], od_start[k + 1]):
            if generate:
                d = od_dest[q]
                ln = 0
                v = d
                while v != o:
                    a = pred[v]
                    buf[ln] = a
                    ln += 1
                    v = tails[a]
                found = False
                p = head[q]
                while p >= 0:
                    if plen[p] == ln:
                        same = True
                        for i in range(ln):
                            if pool[off[p] + i] != buf[ln - 1 - i]:
                                same = False
                                break
                        if same:
                            found = True
                            break
                    p = nxt[p]
                if not found:
                    pool = _grow(pool, pool_used + ln)
                    if n_paths + 1 > off.size:
                        off = _grow(off, n_paths + 1)
                        plen = _grow(plen, n_paths + 1)
                        pflow = _grow(pflow, n_paths + 1)
                        pod = _grow(pod, n_paths + 1)
                        nxt = _grow(nxt, n_paths + 1)
                    p = n_paths
                    n_paths += 1
                    off[p] = pool_used
                    plen[p] = ln
                    for i in range(ln):
                        pool[pool_used + i] = buf[ln - 1 - i]
                    pool_used += ln
                    pod[p] = q
                    pflow[p] = 0.0
                    if head[q] < 0:  # a new OD pair: all of its demand on this path
                        pflow[p] = od_demand[q]
                        for i in range(ln):
                            a = buf[i]
                            xa = x[a] + od_demand[q]
                            x[a] = xa
                            cst[a] = _cost(kind, A, B, S, P, a, xa, so)
                            der[a] = _deriv(kind, A, B, S, P, a, xa, so)
                    nxt[p] = head[q]
                    head[q] = p
            w = _equilibrate(kind, A, B, S, P, so, safe, x, cst, der, pool, off, plen, pflow, nxt,
                             head, q, mp, ms, stamp, rel)
            if w > worst:
                worst = w
            stamp[0] += 1
    return pool, off, plen, pflow, pod, nxt, n_paths, pool_used, worst


@njit(cache=True)
def _equilibrate(kind, A, B, S, P, so, safe, x, cst, der, pool, off, plen, pflow, nxt, head, q,
                 mp, ms, stamp, rel):
    """Move flow of OD pair q from its costlier paths to its cheapest one; unlink empty paths.

    ``cst``/``der`` cache the arc costs and derivatives at ``x`` (updated on every shift).
    ``safe``: every cost is finite with a finite derivative (polynomials of power 0 or ≥ 1), so
    the clipped Newton step needs no safeguard. Paths within ``rel`` (relative) of the cheapest
    cost are left alone. Returns the largest cost excess seen on a used path.
    """
    if head[q] < 0 or nxt[head[q]] < 0:
        return 0.0
    best = -1
    bc = _INF
    p = head[q]
    while p >= 0:
        c = 0.0
        for i in range(off[p], off[p] + plen[p]):
            c += cst[pool[i]]
        if c < bc or best < 0:
            bc = c
            best = p
        p = nxt[p]
    s = best
    st = stamp[0]
    for i in range(off[s], off[s] + plen[s]):
        ms[pool[i]] = st
    prev = -1
    worst = 0.0
    p = head[q]
    while p >= 0:
        nx = nxt[p]
        if p != s and pflow[p] > 0.0:
            g0 = 0.0
            dg0 = 0.0
            for i in range(off[p], off[p] + plen[p]):
                a = pool[i]
                mp[a] = st
                if ms[a] != st:
                    g0 += cst[a]
                    dg0 += der[a]
            for i in range(off[s], off[s] + plen[s]):
                a = pool[i]
                if mp[a] != st:
                    g0 -= cst[a]
                    dg0 += der[a]
            if g0 > worst:
                worst = g0
            if g0 > rel * bc:
                if safe:
                    d = pflow[p] if dg0 <= 0.0 else min(g0 / dg0, pflow[p])
                else:
                    d = _shift_amount(kind, A, B, S, P, so, x, pool, off[p], plen[p], off[s],
                                      plen[s], mp, ms, st, pflow[p], g0, dg0)
                if d > 0.0:
                    if pflow[p] - d <= 1e-15 * pflow[p]:
                        d = pflow[p]
                    for i in range(off[p], off[p] + plen[p]):
                        a = pool[i]
                        if ms[a] != st:
                            xa = x[a] - d
                            x[a] = xa
                            cst[a] = _cost(kind, A, B, S, P, a, xa, so)
                            der[a] = _deriv(kind, A, B, S, P, a, xa, so)
                    for i in range(off[s], off[s] + plen[s]):
                        a = pool[i]
                        if mp[a] != st:
                            xa = x[a] + d
                            x[a] = xa
                            cst[a] = _cost(kind, A, B, S, P, a, xa, so)
                            der[a] = _deriv(kind, A, B, S, P, a, xa, so)
                    pflow[p] -= d
                    pflow[s] += d
            for i in range(off[p], off[p] + plen[p]):
                mp[pool[i]] = -1
        if p != s and pflow[p] <= 0.0:
            if prev < 0:
                head[q] = nx
            else:
                nxt[prev] = nx
        else:
            prev = p
        p = nx
    return worst


@njit(cache=True)
def flows_from_paths(pool, off, plen, pflow, pod, nxt, head, od_origin, K, n_arcs):
    """Origin flows (K × m) and arc flows summed exactly from the linked path flows."""
    F = np.zeros((K, n_arcs))
    for q in range(head.size):
        p = head[q]
        k = od_origin[q]
        while p >= 0:
            f = pflow[p]
            if f > 0.0:
                for i in range(off[p], off[p] + plen[p]):
                    F[k, pool[i]] += f
            p = nxt[p]
    return F
