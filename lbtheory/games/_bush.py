"""Fast exact traffic assignment: bush-based Algorithm B (Dial 2006), numba kernels.

Every origin keeps a *bush*, an acyclic subnetwork its flow uses, with its own arc flows
(K × m origin flows). Each outer iteration updates every bush (unused arcs off the cheapest-path
tree dropped, arcs that shorten the longest-path labels added) and equilibrates it (flow moves
from the costliest used path to the cheapest path of the bush, segment by segment, by Newton
steps; kernels in :mod:`._bushkernels`), followed by ``inner`` equilibration passes over all
bushes without updates. Bushes start as the shortest-path trees of an incremental
all-or-nothing loading (origins in turn, costs updated between them); the game's arc-use rule
(blocked arcs, non-through zones) is honoured by every tree and every added arc.

Certificate: as :func:`lbtheory.games.gradient_projection` — the relative gap of
:func:`lbtheory.games.gap_measures` at the re-summed arc flows with distances from a fresh
shortest-path tree, then the independent recomputation of
:func:`~lbtheory.games.evaluate_flow` (scipy Dijkstra); status OPTIMAL only when both are ≤ tol.
The system optimum is the equilibrium of the marginal costs (``objective="system_optimum"``).
Warm start: the :class:`BushState` of an earlier solve of a game with the same arcs and origins:
an origin with unchanged demand keeps its flows, the others are reloaded all-or-nothing within
their old bushes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import time
from collections.abc import Callable

import numpy as np

from .._checks import check_int, check_real
from ..errors import ParameterError, SolverError, SolveStatus, renamed_keywords
from . import _bushkernels as bk
from ._result import GameResult, Objective, SolveTrace, evaluate_flow
from .game import RoutingGame
from .tap import _Net, certificate_parts, encode_costs

__all__ = ["BushState", "bush_assignment", "RELAX", "PARALLEL_MIN", "INNER", "REGIONAL_INNER",
           "REGIONAL_SHARE", "REGIONAL_NODES", "numba_threads"]

#: Default over-relaxation ω of the bush solver's flow shifts (see :func:`bush_assignment`).
RELAX = 1.0

#: Origin-arc pairs (origins × arcs) below which the bush solver runs on one thread whatever
#: ``threads`` says: a parallel pass costs more in thread wake-ups than it saves there.
PARALLEL_MIN = 100_000

#: Equilibration passes per bush update (``inner=None``): :data:`INNER`, or, for the Wardrop
#: equilibrium only, :data:`REGIONAL_INNER` on a regional network — at least
#: :data:`REGIONAL_NODES` nodes, and
#: after the first update the bushes' flows reach under :data:`REGIONAL_SHARE` of them (mean
#: over origins; :func:`._bushkernels._relevant`). Measured (issue 37, one thread, gap 1e-6,
#: CPU s, 8 passes → 2): on regional networks the gap after each iteration is the same
#: whatever the passes — the bush updates limit it — so the extra passes are waste: Austin
#: size (7,388 nodes, all zones, share 0.15) 179.7 → 143.9 s; synthetic Austin (7,466 nodes,
#: 1,117 zones, share 0.31) 37.5 → 27.5 s (system optimum 54.1 → 39.3 s); synthetic
#: Chicago-regional (12,982 nodes, share 0.26) see BENCHMARKS.md. On the classic networks
#: (Anaheim 0.46, Barcelona 0.49, Winnipeg 0.55, Chicago-Sketch 0.85) 8 passes are as fast or
#: faster, up to 3.6× (Winnipeg-size system optimum at 1e-10: 1.46 vs 5.22 s), and so on a
#: 500-node network of share 0.40 (2×): hence the node floor. Thresholds between the measured
#: networks: a rule of thumb, not a derivation. Not for the system optimum: on Austin size its
#: steeper marginal costs need the passes — with 2 it stalled at gap 1.44e-6 (asked 1e-6; one
#: thread, where 8 passes reach it in 13 iterations) and took 28 iterations on two threads
#: (8 passes: 19).
INNER, REGIONAL_INNER, REGIONAL_SHARE, REGIONAL_NODES = 8, 2, 0.4, 5_000


@dataclasses.dataclass
class BushState:
    """Bushes and origin flows of a bush-based solve (for warm starts).

    Attributes: ``origins`` (node indices), ``demand`` (origins × nodes, flow units), ``bush``
    (origins × arcs, bool), ``origin_flow`` (origins × arcs, flow units), ``history`` (the
    solve's ``(iteration, seconds, relative gap)`` after each certificate; an iteration is the
    passes between two certificates) and ``passes`` (the solve's passes over all origins, a
    partial pass counted by its share of the origins: the work, whatever the certificates).
    """

    n_arcs: int
    origins: np.ndarray
    demand: np.ndarray
    bush: np.ndarray
    origin_flow: np.ndarray
    history: tuple[tuple[int, float, float], ...] = ()
    passes: float = 0.0


def _start(game: RoutingGame, net: _Net, enc: tuple, so: bool, warm: BushState | None,
           args: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Initial ``(x, F, bush)``: the warm state's, or an incremental all-or-nothing loading."""
    m, n, K = game.n_arcs, game.n_nodes, len(game.origins)
    out_start, out_arcs, in_start, in_arcs, heads, tails, usable, nonthru = args
    if warm is not None:
        if warm.n_arcs != m or not np.array_equal(warm.origins, game.origins):
            raise ParameterError(f"warm: the state is for a game with {warm.n_arcs} arcs and "
                             f"origins {warm.origins.tolist()[:5]}…, this game has {m} arcs "
                             f"and origins {game.origins.tolist()[:5]}…")
        if all(not np.any(warm.bush[k] & ~game.usable(k)) for k in range(K)):
            # an origin with its old demand keeps its flows; the others are reloaded (flows
            # scaled to a new demand start worse: Chicago size ×1.05, 70 iterations against 44)
            same = np.all(game.demand == warm.demand, axis=1)
            F = np.where(same[:, None], warm.origin_flow, 0.0)
            x, inb = F.sum(axis=0), warm.bush.copy()
            if bk.load_in_bushes(*enc, so, net.origins, game.demand, n, out_start, out_arcs,
                                 in_start, in_arcs, heads, tails, x, F, inb, ~same):
                return x, F, inb
    x, F, inb = np.zeros(m), np.zeros((K, m)), np.zeros((K, m), dtype=bool)
    bk.load_trees(*enc, so, net.origins, game.demand, n, out_start, out_arcs, heads, tails,
                  usable, nonthru, x, F, inb)
    return x, F, inb


@contextlib.contextmanager
def numba_threads(threads: int):
    """Run the numba parallel regions of the block on ``threads`` threads (at most numba's
    ``NUMBA_NUM_THREADS``); the previous count is restored afterwards."""
    import numba

    prev = numba.get_num_threads()
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    try:
        yield numba.get_num_threads()
    finally:
        numba.set_num_threads(prev)


@renamed_keywords(max_iter="max_iterations")
def bush_assignment(game: RoutingGame, *, objective: Objective | str = Objective.WARDROP,
                    tol: float = 1e-10, max_iterations: int = 10_000, time_limit: float = 600.0,
                    inner: int | None = None, repeat: int = 1, warm: BushState | None = None,
                    stall: int = 30, throw: bool = True, relax: float = RELAX,
                    threads: int = 1) -> GameResult:
    """Wardrop equilibrium (or system optimum) by Dial's bush-based Algorithm B.

    Args:
        objective: ``"wardrop"`` (costs ℓ) or ``"system_optimum"`` (marginal costs).
        tol: stop when the relative gap (dimensionless, :func:`gap_measures`) is ≤ tol.
        max_iterations: outer iterations (each: every bush updated and equilibrated ``repeat``
            times, then up to ``inner`` passes equilibrating every bush once, then a
            certificate; near ``tol`` fewer passes, down to one over some origins, so that the
            certified gap lands in [tol/2, tol] — see :func:`_plan`; ``max_iter=`` is its
            deprecated name); time_limit: wall-clock seconds.
        inner: equilibration passes after each bush update; None: :data:`INNER` (8), or
            :data:`REGIONAL_INNER` (2) for a Wardrop equilibrium on regional networks, where
            the bush updates, not the passes, limit each iteration's gap (see
            :data:`REGIONAL_SHARE`).
        warm: the state of an earlier solve of a game with the same arcs and origins.
        stall: stop (status MAX_ITERATIONS) when the best gap has not halved over this many
            outer iterations — Algorithm B gains about a decade every 3–4 when it works, and a
            stalled solve should hand over to the next route of :func:`~lbtheory.games.solve_game`
            at once instead of spending its time limit.
        throw: raise :class:`~lbtheory.errors.SolverError` when a limit stops it before ``tol``
            (else the result has status MAX_ITERATIONS).
        relax: over-relaxation factor ω of each flow shift (the Newton step g/g' times ω, at
            most the whole segment flow), in [1, 2); see :data:`RELAX`.
        threads: numba threads (≥ 1; at most numba's ``NUMBA_NUM_THREADS``; 1 below
            :data:`PARALLEL_MIN` origin-arc pairs). One thread is deterministic; with more, the
            origins are equilibrated concurrently (:func:`._bushkernels.bush_pass`) and the
            flows vary in the last bits from run to run, every result still certified by the
            same gap.

    Returns:
        :class:`GameResult` with its :class:`BushState` in ``result.state`` (pass it as
        ``warm=``) and the ``(iteration, seconds, gap)`` after each certificate in
        ``result.stats`` (a :class:`SolveTrace`; also ``state.history``);
        ``result.status`` is OPTIMAL when the certified gap ≤ tol.

    Raises:
        ModelError: an arc family without a kernel (Polynomial and MM1 only).
        ParameterError: a ``warm`` state of another game, ``tol`` ≤ 0, ``stall`` < 1,
            ``threads`` < 1 or ``relax`` outside [1, 2).
        SolverError: the all-or-nothing loading exceeds an M/M/1 capacity (infinite cost;
            status FAILED, detail ``"infeasible_start"``), or a limit is hit with ``throw=True``
            (status MAX_ITERATIONS, naming the gap reached and the iterations).
    """
    objective = Objective.parse(objective)
    check_real(tol, "tol", low=0.0, low_open=True)
    check_int(stall, "stall", low=1, unit="iterations")
    check_int(threads, "threads", low=1)
    if inner is not None:
        check_int(inner, "inner", low=0, unit="passes")
    check_real(relax, "relax", low=1.0, high=2.0, high_open=True)
    if len(game.origins) * game.n_arcs < PARALLEL_MIN:
        threads = 1
    with numba_threads(threads) as threads:
        return _solve(game, Objective.parse(objective), tol, max_iterations, time_limit, inner,
                      repeat, warm, stall, throw, relax, threads)


#: A partial pass (see :func:`_plan`) aims at this share of the requested gap: high enough
#: that the gap's noise from pass to pass (a factor 0.5–2) rarely lands it below half the gap.
AIM = 0.75


def _excess(game: RoutingGame, F: np.ndarray, cost: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """Each origin's TSTT − SPTT (cost units) under ``cost`` with distances ``dist``."""
    return F @ cost - np.einsum("kv,kv->k", game.demand, np.where(game.demand > 0, dist, 0.0))


def _plan(g: float, rate: float | None, tol: float, full: int,
          excess: Callable[[], np.ndarray], tstt: float) -> tuple[int, np.ndarray | None]:
    """The passes until the next certificate, at gap ``g`` > ``tol`` with ``rate`` the gap's
    factor per pass over the last stretch of whole passes (None: unknown; NaN: the first
    certificate, after which one pass measures it): ``(passes, None)``
    for whole passes — ``full`` (the update pass and the inner passes), or fewer when the rate
    predicts ``tol`` sooner: half the passes it predicts — or, within 2 passes of it,
    ``(1, subset)``: one pass over the origins of largest ``excess()`` (their
    TSTT − SPTT terms, cost units, of total ``tstt``; computed only then), as many as the rate
    says bring the gap to :data:`AIM` × tol. So the certificate lands in [tol/2, tol] instead
    of one pass's factor (2–5×) or one iteration's (10–100×) below it."""
    if rate is None:
        return full, None
    if math.isnan(rate):  # after the first certificate: one pass measures the rate
        return 1, None
    need = math.log(tol / g) / math.log(rate)  # passes to reach tol at that rate
    if need >= 2.0:  # half the way (the gap speeds up near the optimum), then re-measured
        return int(min(full, math.floor(need / 2.0 + 1e-9))), None
    e = excess()
    cut = (g - AIM * tol) * tstt / (1.0 - rate)  # excess those origins must carry
    top = np.argsort(-e, kind="stable")
    take = int(np.searchsorted(np.cumsum(e[top]), cut)) + 1
    if take >= e.size:
        return 1, None
    return 1, top[:take].astype(np.int64)


def _rate(history: list[tuple[int, float, float]], spent: list[float]) -> float | None:
    """The gap's factor per pass between the last two certificates (``spent[-1]``: the whole
    passes between them, negative for a partial pass; None when the gap did not fall or the
    passes were a partial one)."""
    if len(history) < 2 or spent[-1] < 1:
        return None
    g0, g1 = history[-2][2], history[-1][2]
    if not 0.0 < g1 < g0 or not np.isfinite(g0):
        return None
    return min((g1 / g0) ** (1.0 / spent[-1]), 0.95)


def setup(game: RoutingGame) -> tuple[tuple, bool, _Net, tuple, np.ndarray]:
    """What every bush pass of ``game`` reads: ``(enc, safe, net, args, tiny)`` — the encoded
    costs, whether every cost is BPR-safe for the Newton shift, the network, the forward and
    backward stars (``args`` of :func:`_bushkernels.bush_pass`) and each origin's negligible
    flow (1e-13 of its demand). Shared by the solver and ``benchmarks/profile_bush_pass.py``."""
    enc = encode_costs(game)
    kind, A, B, S, P = enc
    safe = bool(np.all(kind == 0) and np.all((P == 0) | (P >= 1) | (B == 0)))
    net = _Net(game)
    n = game.n_nodes
    by_head = np.argsort(game.heads, kind="stable").astype(np.int64)
    in_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(game.heads, minlength=n), out=in_start[1:])
    args = (net.out_start, net.out_arcs, in_start, by_head, net.heads, net.tails, net.usable,
            net.nonthru)
    return enc, safe, net, args, 1e-13 * game.demand.sum(axis=1)


def _solve(game: RoutingGame, objective: Objective, tol: float, max_iterations: int,
           time_limit: float, inner: int | None, repeat: int, warm: BushState | None, stall: int,
           throw: bool, relax: float, threads: int) -> GameResult:
    so = objective is Objective.SYSTEM_OPTIMUM
    t0 = time.perf_counter()
    enc, safe, net, args, tiny = setup(game)
    n, K = game.n_nodes, len(game.origins)
    x, F, inb = _start(game, net, enc, so, warm, args)
    # the bushes' topological orders, in-arc lists and the nodes their flows can use
    cache = bk.new_cache(K, n, game.n_arcs, net.od_start, net.od_dest)
    best_F = np.empty_like(F)  # the best flows so far (one buffer: K × m can be large)
    gap, best, status, it = np.inf, np.inf, SolveStatus.MAX_ITERATIONS, 0
    history: list[tuple[int, float, float]] = []  # (iteration, seconds, gap)
    lowest: list[float] = []  # lowest[k] = min gap of history[: k + 1] (the stall test's)
    done: list[float] = []  # passes done before each certificate (a partial pass: its share)
    spent: list[float] = [0.0]  # passes before each certificate (see below)
    stalled = False
    order = np.random.default_rng(0)  # origin order of each pass (seeded: reproducible)
    what = f"bush assignment ({objective})"
    full, rate, partials = 1 + (INNER if inner is None else inner), None, 0
    while it < max_iterations:
        gap, cost, dist = certificate_parts(game, net, enc, x, so, what, "bush", threads)
        history.append((it, time.perf_counter() - t0, gap))
        lowest.append(min(gap, lowest[-1]) if lowest else gap)
        done.append(done[-1] + abs(spent[-1]) if done else 0.0)
        if gap < best:
            best = gap
            np.copyto(best_F, F)
        if gap <= tol:
            status = SolveStatus.OPTIMAL
            break
        # stalled: the best gap has not halved over the last `stall` iterations' passes
        back = int(np.searchsorted(done, done[-1] - stall * full, side="right")) - 1
        if back >= 0 and done[-1] >= stall * full and not best <= 0.5 * lowest[back]:
            stalled = True
            break
        if time.perf_counter() - t0 > time_limit:
            break
        it += 1
        rate = _rate(history, spent) or rate
        passes, subset = _plan(gap, (math.nan if it == 1 else rate) if partials < 3 else None,
                               tol, full,
                               functools.partial(_excess, game, F, cost, dist), float(x @ cost))
        partials = partials + 1 if subset is not None else 0
        for j in range(passes):
            perm = order.permutation(K) if subset is None else order.permutation(subset)
            bk.bush_pass(*enc, so, safe, net.origins, n, *args, x, F, inb, j == 0,
                         repeat if j == 0 else 1, tiny, cache, relax, threads, perm)
            if threads > 1:  # concurrent shifts may have missed updates of the totals
                x = F.sum(axis=0)
            if (inner is None and not so and it == 1 and j == 0 and n >= REGIONAL_NODES
                    and cache[5].mean() < REGIONAL_SHARE * n):
                full = 1 + REGIONAL_INNER  # a regional network (see REGIONAL_SHARE)
        # whole passes, or a partial pass as minus its share of the origins
        spent.append(float(passes) if subset is None else -subset.size / K)
        x = F.sum(axis=0)  # re-summed: no drift of the incrementally updated totals
    res = evaluate_flow(game, best_F, objective, status=status, solver="bush",
                        seconds=time.perf_counter() - t0, iterations=it)
    if status is SolveStatus.OPTIMAL and not res.relative_gap <= tol:
        res = dataclasses.replace(res, status=SolveStatus.MAX_ITERATIONS)
    if throw and res.status is not SolveStatus.OPTIMAL:
        why = f", stalled (no halving in {stall} iterations)" if stalled else ""
        raise SolverError(f"{what}: relative gap {res.relative_gap:.3g} "
                          f"> tol {tol:g} after {it} iterations "
                          f"({time.perf_counter() - t0:.1f} s){why}", solver="bush",
                          status=res.status)
    state = BushState(game.n_arcs, game.origins.copy(), game.demand.copy(), inb, F,
                      tuple(history), done[-1] if done else 0.0)
    h = np.asarray(history, dtype=float).reshape(-1, 3)
    trace = SolveTrace(h[:, 1].copy(), h[:, 2].copy(), h[:, 0].astype(np.int64))
    return dataclasses.replace(res, state=state, stats=trace)
