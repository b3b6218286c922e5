"""BalanceRoute schedulers BR-0 and BR-H: two-stage allocation of the prompt pool (THEORY §9.3–9.4).

Per tick, with ``cap[g]`` free slots and ``S_tot = Σ cap``:

* **Stage 1** (while ``S_tot > S_greedy``): the replica with most free slots (ties: largest margin)
  takes the single pool request maximising ``F_g({i})`` — in the safe zone, the longest prompt. The
  score is concave in the prompt length, so the best request is found by binary search over the
  pool sorted by length: the longest prompt ``≤ Δ*`` or the shortest ``> Δ*`` (``Δ*`` = score peak).
* **Stage 2**: replicas with a free slot are popped from a priority queue keyed by
  ``(cap[g], m_g)`` (largest first); each takes the best subset ``Q*`` of the first ``R_max``
  candidates (``|Q| ≤ min(cap[g], R_max)``, ≤ 15 subsets for ``R_max = 4``). [R] Candidates are the
  longest prompts first (THEORY §13 item 9). If ``F_g(Q*) ≤ 0`` the starvation guard assigns the
  best single candidate anyway (the summary's wording: the guard prevents stranded requests).
* **KV budget** (when ``view.kv_free`` is set): a replica only considers pool requests whose
  prompt fits its remaining KV room; Stage-2 subsets must fit it in total; a replica with room
  for none takes nothing this tick, and a request that fits nowhere waits in the pool.
* **Age guard** [R] (the trigger is not in the source): at the start of a tick, every pool request
  that has waited ``max_wait`` ticks or more (oldest first) goes to the replica with a free slot
  where its score ``F_g({i})`` is largest, so no request waits forever (even one never among the
  longest).

BR-H replaces the single-step margins with projected margins over ``H`` steps (built [R] from the
predictor's ``ĉ_i``, see :mod:`lbtheory.barrier.fscore`); with ``H = 0, α = 1, β = G`` it makes
exactly the decisions of BR-0 (tested). [R] The projection's readings are explicit options of
:func:`brh` (:class:`MarginSource`, :class:`OwnLoad`, :class:`Lifetime`, :class:`Refill`; defaults =
the seed's formula); ``OwnLoad.PROJECTED`` scores each candidate set by its per-step load profile
(the pool is then scanned exhaustively instead of by the score peak). Ablation: THEORY §9.4.
"""

from __future__ import annotations

import enum
import heapq
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._checks import check_int, check_option
from ..routers import Assignment
from ..workloads import Workload
from .fscore import (
    best_subset,
    discount_vector,
    expected_contribution,
    fscore_br0,
    fscore_horizon,
    fscore_profile,
    projected_loads,
    projected_margins,
    refill_loads,
    score_peak,
    subset_table,
)
from .predictors import ExactMatchPredictor, OraclePredictor, SurvivalPredictor
from .protocol import ReplicaView
from .sim import decode_steps

__all__ = ["BRParams", "GuardScope", "MarginSource", "OwnLoad", "Lifetime", "Refill", "br0",
           "brh", "allocate", "BR0Router", "BRHRouter", "BRHState", "brh_router",
           "PredictorKind"]


class GuardScope(enum.StrEnum):
    """Where the Stage-2 starvation guard looks for the best single request ([R])."""

    #: Among the ``R_max`` Stage-2 candidates (the longest prompts).
    CANDIDATES = "candidates"
    #: Over the whole pool, as Stage 1 does.
    POOL = "pool"


class MarginSource(enum.StrEnum):
    """[R] Which requests the BR-H projected margins count (ablation piece (a), issue 14)."""

    #: Running requests plus those already placed earlier in this tick (the default).
    PLACED = "placed"
    #: Running requests only: placements within the tick do not move the margins.
    RUNNING = "running"


class OwnLoad(enum.StrEnum):
    """[R] The candidate set's own load in the BR-H score (ablation piece (b), issue 14)."""

    #: ``Δ_s(Q)`` at every offset ``h`` (the default; the seed's formula).
    CONSTANT = "constant"
    #: ``Σ_{i∈Q} (s_i + h) 1[h < ĉ_i]``: grows while the request runs, 0 after it ends.
    PROJECTED = "projected"


class Lifetime(enum.StrEnum):
    """[R] How a request's lifetime ``ĉ_i`` maps to offsets it counts at (ablation piece (c))."""

    #: ``h < max(ĉ_i, 1)`` with ``ĉ_i ≤ H``: a request outliving the horizon drops out at ``h = H``.
    CLAMPED = "clamped"
    #: A request predicted to outlive the horizon counts at every ``h = 0..H``; the Oracle's known
    #: finishing step is then counted exactly (``h < r_i``).
    EXACT = "exact"


class Refill(enum.StrEnum):
    """[R] Whether the projection refills slots freed inside the window (THEORY §9.4, issue 14)."""

    #: No future admissions: a request's load simply leaves at ``ĉ_i`` (the seed's projection).
    NONE = "none"
    #: Saturation refill: a freed slot is refilled at once by a request of the pool's mean prompt
    #: (:func:`~lbtheory.barrier.fscore.refill_loads`).
    POOL_MEAN = "pool-mean"


@dataclass(frozen=True)
class BRParams:
    """Settings of the two-stage allocation.

    Attributes:
        s_greedy: Stage-1 threshold on total free slots (``None`` → ``G``).
        r_max: Stage-2 candidates per replica (the paper's 4).
        max_wait: [R] age-guard threshold in ticks (``None`` disables the age guard).
        guard_scope: [R] where the starvation guard looks for the best single request when no
            subset scores positive: :class:`GuardScope` or its value, ``"candidates"`` (the
            ``R_max`` candidates; default) or ``"pool"`` (the whole pool, as Stage 1 does). The
            source does not say which. Stored as the enum.
    """

    s_greedy: int | None = None
    r_max: int = 4
    max_wait: int | None = 2000
    guard_scope: GuardScope | str = GuardScope.CANDIDATES

    def __post_init__(self) -> None:
        check_int(self.r_max, "R_max (BRParams.r_max)", low=1)
        if self.s_greedy is not None:
            check_int(self.s_greedy, "S_greedy (BRParams.s_greedy)", low=0, unit="slots")
        if self.max_wait is not None:
            check_int(self.max_wait, "max_wait (BRParams.max_wait)", low=0, unit="ticks")
        object.__setattr__(self, "guard_scope",
                           check_option(GuardScope, self.guard_scope, "guard_scope"))


class _BR0Scorer:
    """Single-step margins on plain Python numbers (the fast path)."""

    __slots__ = ("G", "load", "M")

    def __init__(self, loads: list[int]) -> None:
        self.G = len(loads)
        self.load = loads
        self.M = max(loads)

    def f_many(self, g: int, deltas: list[float]) -> list[float]:
        m = self.M - self.load[g]
        return [fscore_br0(d, m, self.G) for d in deltas]

    def peak(self, g: int) -> float:
        return float(self.M - self.load[g]) if self.G >= 2 else float("inf")

    def add(self, g: int, delta: int, positions: list[int] | None = None) -> None:
        self.load[g] += delta
        if self.load[g] > self.M:
            self.M = self.load[g]


class _HorizonScorer:
    """Projected margins ``(G, H+1)`` and the horizon score."""

    by_item = False

    def __init__(self, loads_h: np.ndarray, d: np.ndarray, alpha: float, beta: float,
                 update: bool = True) -> None:
        self.Lh = loads_h
        self.d, self.alpha, self.beta = d, alpha, beta
        self.load = loads_h[:, 0].tolist()
        self.update = update
        self._m: np.ndarray | None = None

    def _margins(self) -> np.ndarray:
        if self._m is None:
            self._m = projected_margins(self.Lh)
        return self._m

    def f_many(self, g: int, deltas: list[float]) -> list[float]:
        return fscore_horizon(np.asarray(deltas, dtype=float), self._margins()[g], self.d,
                              self.alpha, self.beta).tolist()

    def peak(self, g: int) -> float:
        return score_peak(self._margins()[g], self.d, self.alpha, self.beta)

    def add(self, g: int, delta: int, positions: list[int] | None = None) -> None:
        self.load[g] += delta
        if self.update:
            self.Lh[g] += delta
            self._m = None


class _ProfileScorer(_HorizonScorer):
    """Horizon score of the candidates' projected per-step loads ``(P, H+1)`` (by pool position)."""

    by_item = True

    def __init__(self, loads_h: np.ndarray, d: np.ndarray, alpha: float, beta: float,
                 profiles: np.ndarray, update: bool = True) -> None:
        super().__init__(loads_h, d, alpha, beta, update)
        self.prof = profiles

    def f_items(self, g: int, sets: list[list[int]]) -> list[float]:
        x = np.stack([self.prof[q].sum(axis=0) for q in sets])
        return fscore_profile(x, self._margins()[g], self.d, self.alpha, self.beta).tolist()

    def add(self, g: int, delta: int, positions: list[int] | None = None) -> None:
        self.load[g] += delta
        if self.update and positions:
            self.Lh[g] += self.prof[positions].sum(axis=0)
            self._m = None


def _best_single(ps: list[int], scorer: Any, g: int, hi: int | None = None) -> int:
    """Index into ascending ``ps[:hi]`` of the best single request for replica ``g`` (score
    peak); ``hi`` (default ``len(ps)``) excludes prompts that do not fit a KV budget."""
    hi = len(ps) if hi is None else hi
    j = bisect_right(ps, scorer.peak(g), 0, hi) - 1  # last index with s ≤ peak
    if j + 1 >= hi:
        return j
    k = bisect_right(ps, ps[j + 1], 0, hi) - 1  # last of the run of the smallest s > peak
    if j < 0:
        return k
    fj, fk = scorer.f_many(g, [ps[j], ps[k]])
    return k if fk >= fj else j


class _Pool:
    """The pool sorted by prompt length (ascending; ties: earliest arrival last)."""

    def __init__(self, view: ReplicaView) -> None:
        order = np.lexsort((-view.pool_ids, view.pool_prompt))
        self.ps: list[int] = view.pool_prompt[order].tolist()
        self.pos: list[int] = order.tolist()

    def take(self, j: int) -> tuple[int, int]:
        return self.pos.pop(j), self.ps.pop(j)


def allocate(view: ReplicaView, scorer: Any, params: BRParams,
             tables: list[list[tuple[int, ...]]]) -> tuple[np.ndarray, np.ndarray]:
    """The two-stage allocation for one tick; returns (pool positions, replicas)."""
    G = view.free.size
    cap = view.free.tolist()
    s_tot = sum(cap)
    s_greedy = G if params.s_greedy is None else params.s_greedy
    pool = _Pool(view)
    kv = None if view.kv_free is None else view.kv_free.tolist()
    out_pos: list[int] = []
    out_g: list[int] = []
    by_item = getattr(scorer, "by_item", False)

    def assign(g: int, j: int) -> int:
        p, s = pool.take(j)
        out_pos.append(p)
        out_g.append(g)
        cap[g] -= 1
        if kv is not None:
            kv[g] -= s
        return s

    def n_fit(g: int) -> int:
        """How many of the (ascending) pool prompts fit in replica ``g``'s KV room."""
        return len(pool.ps) if kv is None else bisect_right(pool.ps, kv[g])

    def single(g: int) -> int:
        nf = n_fit(g)
        if not by_item:
            return _best_single(pool.ps, scorer, g, nf)
        f = scorer.f_items(g, [[p] for p in pool.pos[:nf]])
        return max(range(len(f)), key=lambda j: (f[j], j))

    def f_one(g: int, j: int) -> float:
        return scorer.f_items(g, [[pool.pos[j]]])[0] if by_item else \
            scorer.f_many(g, [pool.ps[j]])[0]

    if params.max_wait is not None and view.pool_wait.size and \
            int(view.pool_wait.max()) >= params.max_wait:
        for p in np.flatnonzero(view.pool_wait >= params.max_wait).tolist():
            if s_tot == 0:
                break
            j = pool.pos.index(p)
            room = [g for g in range(G) if cap[g] > 0 and (kv is None or pool.ps[j] <= kv[g])]
            if not room:  # fits nowhere under the KV budget: it waits
                continue
            best_g = max(room, key=lambda g: (f_one(g, j), cap[g], -scorer.load[g], -g))
            scorer.add(best_g, assign(best_g, j), [p])
            s_tot -= 1

    heap = [(-cap[g], scorer.load[g], g) for g in range(G) if cap[g] > 0]
    heapq.heapify(heap)
    while s_tot > s_greedy and pool.ps and heap:  # Stage 1
        g = heapq.heappop(heap)[2]
        if n_fit(g) == 0:  # no pool request fits its KV room: it takes nothing this tick,
            s_tot -= cap[g]  # and its free slots stop counting towards the Stage-1 threshold
            continue
        j = single(g)
        p = pool.pos[j]
        scorer.add(g, assign(g, j), [p])
        s_tot -= 1
        if cap[g] > 0:
            heapq.heappush(heap, (-cap[g], scorer.load[g], g))
    while heap and pool.ps:  # Stage 2
        g = heapq.heappop(heap)[2]
        nf = n_fit(g)
        if nf == 0:
            continue
        n = min(params.r_max, nf)
        idx = list(range(nf - 1, nf - 1 - n, -1))  # longest (that fit) first
        sizes = [pool.ps[j] for j in idx]
        room = float("inf") if kv is None else kv[g]
        if by_item:
            subs = [q for q in tables[n] if len(q) <= min(cap[g], params.r_max)
                    and sum(sizes[c] for c in q) <= room]
            sc = scorer.f_items(g, [[pool.pos[idx[c]] for c in q] for q in subs])
            b = max(range(len(subs)), key=lambda j: (sc[j], -j))  # first best, as best_subset
            q, score = subs[b], sc[b]
        else:
            def f_room(ds: list[float], g: int = g, room: float = room) -> list[float]:
                return [f if d <= room else float("-inf")
                        for d, f in zip(ds, scorer.f_many(g, ds))]
            q, score = best_subset(sizes, min(cap[g], params.r_max), f_room, tables[n])
        chosen = [idx[c] for c in q]
        if score <= 0:  # starvation guard: best single request
            if params.guard_scope is GuardScope.POOL:
                chosen = [single(g)]
            else:
                singles = scorer.f_items(g, [[pool.pos[j]] for j in idx]) if by_item else \
                    scorer.f_many(g, sizes)
                chosen = [idx[max(range(n), key=lambda c: (singles[c], -c))]]
        delta = 0
        placed = [pool.pos[j] for j in chosen]
        for j in sorted(chosen, reverse=True):
            delta += assign(g, j)
        scorer.add(g, delta, placed)
        s_tot -= len(chosen)
        if cap[g] > 0:
            heapq.heappush(heap, (-cap[g], scorer.load[g], g))
    return np.asarray(out_pos, dtype=np.int64), np.asarray(out_g, dtype=np.int64)


def _tables(params: BRParams) -> list[list[tuple[int, ...]]]:
    return [subset_table(n, params.r_max) for n in range(params.r_max + 1)]


@dataclass(frozen=True)
class BR0Router:
    """BR-0: single-step F-score, no prediction (THEORY §9.2–9.3); answers the tick's whole
    :class:`~lbtheory.routers.Assignment`."""

    params: BRParams = BRParams()
    name: str = "br0"

    def init(self, seed: int = 0) -> tuple:
        """The subset tables of Stage 2 (computed once per run)."""
        return (_tables(self.params),)

    def observe(self, state: tuple, view: ReplicaView) -> tuple:
        """Nothing to learn."""
        return state

    def route(self, state: tuple, view: ReplicaView,
              rng: np.random.Generator) -> tuple[Assignment, tuple]:
        """The two-stage allocation of the tick."""
        pos, reps = allocate(view, _BR0Scorer(view.loads.tolist()), self.params, state[0])
        return Assignment(pos, reps), state


def br0(params: BRParams | None = None) -> BR0Router:
    """BR-0 with ``params`` (default :class:`BRParams`)."""
    return BR0Router(params if params is not None else BRParams())


class BRHState(NamedTuple):
    """BR-H state of one run: its predictor (an immutable value that learns online from
    finished requests) and the Stage-2 subset tables."""

    predictor: Any
    tables: list


@dataclass(frozen=True)
class BRHRouter:
    """BR-H: horizon F-score with projected margins from a remaining-length predictor.

    Attributes:
        predictor: the starting predictor (:mod:`lbtheory.barrier.predictors`; immutable, so
            every run starts from it).
        horizon: ``H`` (steps; the paper's 80).
        gamma: discount ``γ ∈ (0, 1]``.
        alpha: reward weight ``α``.
        beta: overflow penalty ``β`` (``None`` → ``G``).
        gate: confidence gate on ``p̂_fin``.
        params: two-stage settings.
        name: router name in results.
        margins: [R] :class:`MarginSource` (ablation (a)): whether placements earlier in the
            tick move the projected margins.
        own_load: [R] :class:`OwnLoad` (ablation (b)): the candidates' load as ``Δ_s`` at every
            offset or as their projected per-step load.
        lifetime: [R] :class:`Lifetime` (ablation (c)): how ``ĉ_i`` maps to counted offsets.
        refill: [R] :class:`Refill`: whether slots freed inside the window are refilled in the
            projection (the saturated pool refills them at once).

    Raises:
        ParameterError: an unknown option value (names the parameter) or a bad horizon.
    """

    predictor: Any
    horizon: int = 80
    gamma: float = 1.0
    alpha: float = 1.0
    beta: float | None = None
    gate: float = 0.5
    params: BRParams = BRParams()
    name: str = "brh"
    margins: MarginSource | str = MarginSource.PLACED
    own_load: OwnLoad | str = OwnLoad.CONSTANT
    lifetime: Lifetime | str = Lifetime.CLAMPED
    refill: Refill | str = Refill.NONE

    def __post_init__(self) -> None:
        check_int(self.horizon, "horizon", low=0, unit="steps")
        for field, cls in (("margins", MarginSource), ("own_load", OwnLoad),
                           ("lifetime", Lifetime), ("refill", Refill)):
            object.__setattr__(self, field, check_option(cls, getattr(self, field), field))
        object.__setattr__(self, "_d", discount_vector(self.horizon, self.gamma))

    def init(self, seed: int = 0) -> BRHState:
        """The starting predictor and the subset tables."""
        return BRHState(self.predictor, _tables(self.params))

    def observe(self, state: BRHState, view: ReplicaView) -> BRHState:
        """Teach the predictor the lengths of the requests that finished."""
        if not view.finished_ids:
            return state
        return state._replace(predictor=state.predictor.observe(view.finished_ids,
                                                                view.finished_steps))

    def _lifetimes(self, p_fin: np.ndarray, mu: np.ndarray) -> np.ndarray:
        # EXACT: a request outliving H has lifetime H + 1 (counts at every h = 0..H)
        return expected_contribution(p_fin, mu,
                                     self.horizon + int(self.lifetime is Lifetime.EXACT),
                                     self.gate)

    def route(self, state: BRHState, view: ReplicaView,
              rng: np.random.Generator) -> tuple[Assignment, BRHState]:
        """The two-stage allocation with projected margins."""
        pred, horizon, d = state.predictor, self.horizon, self._d
        G = view.free.size
        rows, cols = np.nonzero(view.slot_ids >= 0)
        ids = view.slot_ids[rows, cols]
        decoded = view.tick - view.slot_start[rows, cols]
        p_fin, mu = pred.predict(ids, decoded, horizon)
        base = view.slot_prompt[rows, cols] + decoded
        life_i = self._lifetimes(p_fin, mu)
        lh = projected_loads(rows, base, life_i, G, horizon)
        pool_mean = float(view.pool_prompt.mean()) if view.pool_prompt.size else 0.0
        if self.refill is Refill.POOL_MEAN and view.pool_prompt.size:
            lh += refill_loads(rows, life_i, pool_mean, G, horizon)
        b = float(G if self.beta is None else self.beta)
        update = self.margins is MarginSource.PLACED
        if self.own_load is OwnLoad.PROJECTED:
            P = view.pool_ids.size
            pp, pmu = pred.predict(view.pool_ids, np.zeros(P, dtype=np.int64), horizon)
            life_p = self._lifetimes(pp, pmu)
            prof = projected_loads(np.arange(P), view.pool_prompt, life_p, P, horizon)
            if self.refill is Refill.POOL_MEAN:
                prof += refill_loads(np.arange(P), life_p, pool_mean, P, horizon)
            scorer: _HorizonScorer = _ProfileScorer(lh, d, self.alpha, b, prof, update)
        else:
            scorer = _HorizonScorer(lh, d, self.alpha, b, update)
        pos, reps = allocate(view, scorer, self.params, state.tables)
        return Assignment(pos, reps), state


def brh(predictor_factory: Any, *, params: BRParams | None = None, **options: Any) -> BRHRouter:
    """BR-H whose starting predictor is ``predictor_factory()`` (options: :class:`BRHRouter`)."""
    return BRHRouter(predictor_factory(), params=params if params is not None else BRParams(),
                     **options)


class PredictorKind(enum.StrEnum):
    """The remaining-length predictors of BR-H (THEORY §9.4)."""

    ORACLE = "oracle"
    SURVIVAL = "survival"
    EXACTMATCH = "exactmatch"


def brh_router(predictor: PredictorKind | str, workload: Workload, *,
               params: BRParams | None = None, **options: Any) -> BRHRouter:
    """BR-H with the ``predictor`` of the registry's ``brh-*`` policies, for ``workload``: the
    Oracle reads its true lengths, ExactMatch its prompt keys. Named ``brh-{predictor}``.

    Raises:
        ParameterError: unknown predictor.
    """
    kind = check_option(PredictorKind, predictor, "predictor")
    if kind is PredictorKind.ORACLE:
        start: Any = OraclePredictor(decode_steps(workload))
    elif kind is PredictorKind.SURVIVAL:
        start = SurvivalPredictor()
    else:
        start = ExactMatchPredictor(workload.prompt_key)
    options.setdefault("name", f"brh-{kind.value}")
    return BRHRouter(start, params=params if params is not None else BRParams(), **options)
