"""Fast exact traffic assignment: path-based gradient projection (numba kernels).

The method of Jayakrishnan, Tsai, Prashker & Rajadhyaksha (Transp. Res. Rec. 1443, 1994) in its
Gauss–Seidel form (Florian, Constantin & Florian, Transp. Res. Rec. 2090, 2009): per origin a
shortest-path tree at the current costs (numba binary-heap Dijkstra under the game's arc-use
rule, i.e. blocked arcs and non-through zones honoured) adds its paths to the OD path sets; flow
then moves from each costlier path to the cheapest one by a projected Newton step on the path
cost difference (bisection-safeguarded where the derivative is infinite, e.g. BPR powers below 1
at zero flow or M/M/1 arcs near capacity). Extra passes over the known path sets (no shortest
paths) are interleaved. Arc flows are re-summed from the path flows every iteration.

Certificate: the relative gap of :func:`lbtheory.games.gap_measures` (the one definition) at the
re-summed flows, with shortest-path distances from a fresh tree at those flows; the returned
:class:`~lbtheory.games.GameResult` is built by :func:`~lbtheory.games.evaluate_flow`, which
recomputes the gap independently (scipy.sparse.csgraph Dijkstra).

The system optimum is the Wardrop equilibrium of the marginal costs x·ℓ'(x) + ℓ(x): the same
solver with ``objective="system_optimum"``. Warm start: pass the :class:`TAPState` of an earlier
solve of a game with the same arcs (demands may differ; path flows are rescaled per OD pair).
Supported arc families: :class:`~lbtheory.games.Polynomial` (BPR with any real power ≥ 0,
affine, constant) and :class:`~lbtheory.games.MM1`.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from .._checks import check_real
from ..errors import ModelError, ParameterError, SolverError, SolveStatus, renamed_keywords
from . import _gpkernels as kern
from ._result import GameResult, Objective, evaluate_flow
from .arccosts import MM1, Polynomial
from .game import RoutingGame
from .metrics import gap_measures

__all__ = ["TAPState", "gradient_projection", "encode_costs", "supports"]


def supports(game: RoutingGame) -> bool:
    """Whether every arc family of ``game`` has a kernel (Polynomial or MM1)."""
    return all(isinstance(fam, (Polynomial, MM1)) for fam, _ in game.costs.groups)


def encode_costs(game: RoutingGame) -> tuple[np.ndarray, ...]:
    """Per-arc kernel encoding ``(kind, A, B, S, P)`` of the game's cost families.

    Raises:
        ModelError: an arc family other than Polynomial/MM1 (e.g. ServiceArc), naming the arc.
    """
    m = game.n_arcs
    kind = np.zeros(m, dtype=np.int64)
    A, B, S, P = np.zeros(m), np.zeros(m), np.ones(m), np.ones(m)
    for fam, idx in game.costs.groups:
        if isinstance(fam, Polynomial):
            A[idx], B[idx], S[idx] = fam.a, fam.b, fam.scale
            P[idx] = float(fam.power)
        elif isinstance(fam, MM1):
            kind[idx] = 1
            B[idx], S[idx] = fam.scale, fam.capacity
        else:
            raise ModelError(f"arc {int(idx[0])}: the gradient-projection solver supports "
                             f"Polynomial (BPR, affine, constant) and MM1 arcs, got "
                             f"{type(fam).__name__}; use frank_wolfe")
    return kind, A, B, S, P


@dataclasses.dataclass
class TAPState:
    """Path sets and flows of a gradient-projection solve (for warm starts).

    Attributes: ``od_key`` (origin node index × n + destination node index per OD pair),
    ``od_demand`` (flow units), and the path pool: path ``p`` is the arc list
    ``pool[off[p]:off[p] + plen[p]]`` carrying flow ``pflow[p]`` for OD pair ``pod[p]``; each OD
    pair ``q``'s paths form a linked list from ``head[q]`` through ``nxt`` (−1 ends it);
    ``n_paths`` paths and ``pool_used`` pool entries are in use (unlinked paths keep their
    storage until :meth:`compact`).
    """

    n_arcs: int
    od_key: np.ndarray
    od_demand: np.ndarray
    pool: np.ndarray
    off: np.ndarray
    plen: np.ndarray
    pflow: np.ndarray
    pod: np.ndarray
    nxt: np.ndarray
    head: np.ndarray
    n_paths: int
    pool_used: int

    def compact(self) -> TAPState:
        """A new state without the storage of unlinked paths: the same path lists (each OD
        pair's in its order) and flows, smaller arrays; this state is not modified.

        :func:`gradient_projection` compacts its working state as unlinked paths pile up in the
        pool; compact a state before keeping it for many warm starts."""
        live = np.zeros(self.n_paths, dtype=bool)
        front = self.head[self.head >= 0]
        while front.size:
            live[front] = True
            front = self.nxt[front]
            front = front[front >= 0]
        ids = np.flatnonzero(live)
        new_id = np.full(self.n_paths + 1, -1, dtype=np.int64)  # index −1 maps to −1
        new_id[ids] = np.arange(ids.size)
        lens = self.plen[ids]
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
        src = np.repeat(self.off[ids] - starts, lens) + np.arange(int(lens.sum()))
        used = int(lens.sum())
        return dataclasses.replace(
            self, pool=np.concatenate([self.pool[src], np.empty(used, dtype=np.int64)]),
            off=starts, plen=lens.copy(), pflow=self.pflow[ids].copy(),
            pod=self.pod[ids].copy(), nxt=new_id[self.nxt[ids]], head=new_id[self.head],
            n_paths=int(ids.size), pool_used=used)


class _Net:
    """Forward-star arrays and the OD list of a game (origins in ``game.origins`` order)."""

    def __init__(self, game: RoutingGame) -> None:
        n = game.n_nodes
        order = np.argsort(game.tails, kind="stable")
        self.out_arcs = order.astype(np.int64)
        self.out_start = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(game.tails, minlength=n), out=self.out_start[1:])
        self.heads = game.heads.astype(np.int64)
        self.tails = game.tails.astype(np.int64)
        self.usable = ~game.blocked
        self.nonthru = game.non_through.copy()
        self.origins = game.origins.astype(np.int64)
        kk, dd = np.nonzero(game.demand > 0)  # row-major: grouped by origin
        self.od_origin = kk.astype(np.int64)
        self.od_dest = dd.astype(np.int64)
        self.od_demand = game.demand[kk, dd].astype(float)
        self.od_start = np.searchsorted(kk, np.arange(len(game.origins) + 1)).astype(np.int64)
        self.od_key = game.origins[kk].astype(np.int64) * n + dd


def _fresh_state(net: _Net, m: int, n: int) -> TAPState:
    Q = net.od_dest.size
    cap = max(4 * Q, 16)
    return TAPState(m, net.od_key, net.od_demand, np.empty(cap * 8, dtype=np.int64),
                    np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64), np.empty(cap),
                    np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64),
                    np.full(Q, -1, dtype=np.int64), 0, 0)


def _warm_state(net: _Net, m: int, n: int, warm: TAPState) -> TAPState:
    """Reuse the path sets of ``warm``; path flows rescaled to the new demand per OD pair."""
    if warm.n_arcs != m:
        raise ParameterError(f"warm: the state is for a game with {warm.n_arcs} arcs, this "
                             f"game has {m}")
    st = _fresh_state(net, m, n)
    pos = {int(k): i for i, k in enumerate(warm.od_key)}
    new_of_old = np.full(warm.od_key.size, -1, dtype=np.int64)
    for q, key in enumerate(net.od_key):
        i = pos.get(int(key))
        if i is not None:
            new_of_old[i] = q
    st.pool, st.off, st.plen = warm.pool.copy(), warm.off.copy(), warm.plen.copy()
    st.pflow, st.pod, st.nxt = warm.pflow.copy(), warm.pod.copy(), warm.nxt.copy()
    st.n_paths, st.pool_used = warm.n_paths, warm.pool_used
    for i, q in enumerate(new_of_old):
        if q < 0 or warm.head[i] < 0:
            continue
        ratio = net.od_demand[q] / warm.od_demand[i]
        p = int(warm.head[i])
        st.head[q] = p
        while p >= 0:
            st.pflow[p] *= ratio
            st.pod[p] = q
            p = int(st.nxt[p])
    return st


def certificate_gap(game: RoutingGame, net: _Net, enc: tuple[np.ndarray, ...], x: np.ndarray,
                    so: bool, what: str, solver: str, threads: int = 1) -> float:
    """Relative gap (:func:`gap_measures`) at arc flows ``x`` with shortest-path distances from a
    fresh tree at those flows — the fast solvers' own certificate (``threads``: numba threads
    for the shortest-path trees).

    Raises:
        SolverError: an arc at or above its M/M/1 capacity (infinite cost), naming ``what``.
    """
    return certificate_parts(game, net, enc, x, so, what, solver, threads)[0]


def certificate_parts(game: RoutingGame, net: _Net, enc: tuple[np.ndarray, ...], x: np.ndarray,
                      so: bool, what: str, solver: str,
                      threads: int = 1) -> tuple[float, np.ndarray, np.ndarray]:
    """``(gap, cost, dist)``: :func:`certificate_gap` with the arc costs (ℓ or marginal) and the
    shortest-path distances (origins × nodes) it was computed from."""
    c = kern.arc_costs(*enc, x, so, False)
    if not np.all(np.isfinite(c)):
        bad = int(np.flatnonzero(~np.isfinite(c))[0])
        raise SolverError(f"{what}: flow {x[bad]:g} on arc {bad} reaches its capacity "
                          f"{game.costs.upper[bad]:g} (infinite cost); use the CVXPY solver for "
                          "this game", solver=solver, status=SolveStatus.FAILED,
                          detail="infeasible_start")
    dist = kern.all_dists(net.origins, game.n_nodes, net.out_start, net.out_arcs, net.heads,
                          net.tails, net.usable, net.nonthru, c, threads)
    od = (net.od_origin, net.od_dest, net.od_demand)
    return gap_measures(game, x, c, dist=dist, od=od)[0], c, dist


@renamed_keywords(max_iter="max_iterations")
def gradient_projection(game: RoutingGame, *, objective: Objective | str = Objective.WARDROP,
                        tol: float = 1e-10, max_iterations: int = 10_000,
                        time_limit: float = 600.0,
                        inner: int = 2, rel: float = 0.0, warm: TAPState | None = None,
                        throw: bool = True) -> GameResult:
    """Wardrop equilibrium (or system optimum) by path-based gradient projection.

    Args:
        objective: ``"wardrop"`` (costs ℓ) or ``"system_optimum"`` (marginal costs).
        tol: stop when the relative gap (dimensionless, :func:`gap_measures`) is ≤ tol.
        max_iterations: outer iterations (each: one shortest-path pass and ``inner`` passes
            over the known path sets; ``max_iter=`` is its deprecated name); time_limit:
            wall-clock seconds.
        rel: paths whose cost excess is below rel·gap·(cheapest path cost) are left alone
            (0: always shift).
        warm: the state of an earlier solve of a game with the same arcs.
        throw: raise :class:`~lbtheory.errors.SolverError` when a limit stops it before ``tol``
            (else the result has status MAX_ITERATIONS).

    Returns:
        :class:`GameResult` with its :class:`TAPState` in ``result.state`` (pass it as
        ``warm=``); ``result.status`` is OPTIMAL when the certified gap ≤ tol.

    Raises:
        ModelError: an arc family without a kernel.
        ParameterError: a ``warm`` state of another game, or ``tol`` ≤ 0.
        SolverError: the all-or-nothing loading exceeds an M/M/1 capacity (infinite cost;
            status FAILED, detail ``"infeasible_start"``), or a limit is hit with ``throw=True``
            (status MAX_ITERATIONS, naming the gap reached and the iterations).
    """
    objective = Objective.parse(objective)
    check_real(tol, "tol", low=0.0, low_open=True)
    so = objective is Objective.SYSTEM_OPTIMUM
    t0 = time.perf_counter()
    kind, A, B, S, P = encode_costs(game)
    net = _Net(game)
    m, n, K = game.n_arcs, game.n_nodes, len(game.origins)
    st = _fresh_state(net, m, n) if warm is None else _warm_state(net, m, n, warm)
    mp = np.full(m, -1, dtype=np.int64)
    ms = np.full(m, -1, dtype=np.int64)
    stamp = np.zeros(1, dtype=np.int64)
    safe = bool(np.all(kind == 0) and np.all((P == 0) | (P >= 1) | (B == 0)))
    F = kern.flows_from_paths(st.pool, st.off, st.plen, st.pflow, st.pod, st.nxt, st.head,
                              net.od_origin, K, m)
    x = F.sum(axis=0)
    gap = np.inf
    best = (np.inf, F)
    next_compact = 4 * max(net.od_dest.size, 1024)
    status = SolveStatus.MAX_ITERATIONS
    it = 0
    args = (net.origins, net.od_start, net.od_dest, net.od_demand, n, net.out_start,
            net.out_arcs, net.heads, net.tails, net.usable, net.nonthru)
    while it < max_iterations:
        it += 1
        for j in range(1 + inner):
            out = kern.sweep(kind, A, B, S, P, so, safe, rel * min(gap, 1.0), *args, x, st.pool,
                             st.off, st.plen, st.pflow, st.pod, st.nxt, st.head, st.n_paths,
                             st.pool_used, mp, ms, stamp, j == 0)
            st.pool, st.off, st.plen, st.pflow, st.pod, st.nxt, st.n_paths, st.pool_used = out[:8]
        if st.n_paths > next_compact:  # unlinked paths pile up in the pool: reclaim them
            st = st.compact()
            next_compact = max(2 * st.n_paths, next_compact)
        F = kern.flows_from_paths(st.pool, st.off, st.plen, st.pflow, st.pod, st.nxt, st.head,
                                  net.od_origin, K, m)
        x = F.sum(axis=0)
        gap = certificate_gap(game, net, (kind, A, B, S, P), x, so,
                              f"gradient projection ({objective})", "gradient_projection")
        if gap < best[0]:
            best = (gap, F)
        if gap <= tol:
            status = SolveStatus.OPTIMAL
            break
        if time.perf_counter() - t0 > time_limit:
            break
    res = evaluate_flow(game, best[1], objective, status=status, solver="gradient_projection",
                        seconds=time.perf_counter() - t0, iterations=it)
    if status is SolveStatus.OPTIMAL and not res.relative_gap <= tol:
        # the independent check (scipy Dijkstra) disagrees beyond the target: not certified
        res = dataclasses.replace(res, status=SolveStatus.MAX_ITERATIONS)
    if throw and res.status is not SolveStatus.OPTIMAL:
        raise SolverError(f"gradient projection ({objective}): relative gap "
                          f"{res.relative_gap:.3g} > tol {tol:g} after {it} iterations "
                          f"({time.perf_counter() - t0:.1f} s)", solver="gradient_projection",
                          status=res.status)
    return dataclasses.replace(res, state=st)
