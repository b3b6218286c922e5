"""Each routing decision is defined once (issue 32): round robin, JSQ, power of d and the uniform
draw are numba functions of :mod:`lbtheory.routers._baselines` that the Python routers, the DLB
leaf and the compiled engines all call. Here the one definition is checked against independent
numpy oracles (the Python routers as they were written before: ``np.roll``, ``argmin`` with
``rng.integers`` ties, ``rng.choice(replace=False)``), so a kernel that drifts from numpy's draws
fails, and the source is checked for second definitions."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from pathlib import Path

import numpy as np
import pytest

import lbtheory
from lbtheory.intelligent import (
    ClusterConfig,
    IterationTimeModel,
    MaxCapacityRouter,
    SizePartitionRouter,
    estimated_completion_s,
)
from lbtheory.intelligent._rkernels import size_partition_pick
from lbtheory.routers import (
    JSQRouter,
    PowerOfDRouter,
    RandomRouter,
    RoundRobinRouter,
    jsq_pick,
    power_of_d_pick,
    round_robin_pick,
    uniform_pick,
)
from lbtheory.routers._baselines import two_choices

PKG = Path(lbtheory.__file__).parent


@dataclasses.dataclass
class _View:
    eligible: np.ndarray
    queue: np.ndarray
    tokens: np.ndarray
    weights: np.ndarray | None = None
    stream: int = 0


# -- oracles: numpy, written independently of the kernels --------------------------------------
def _rr_oracle(ok, pointer):
    n = ok.size
    start = pointer % n
    order = np.flatnonzero(np.roll(ok, -start))
    if order.size == 0:
        return -1
    return (start + int(order[0])) % n


def _jsq_oracle(values, ok, random_ties, rng):
    cand = np.flatnonzero(ok)
    if cand.size == 0:
        return -1
    vals = values[cand]
    best = cand[vals <= vals.min()]
    if best.size == 1 or not random_ties:
        return int(best[0])
    return int(best[rng.integers(best.size)])


def _p2c_oracle(values, ok, d, rng):
    cand = np.flatnonzero(ok)
    if cand.size <= 1:
        return int(cand[0]) if cand.size else -1
    drawn = rng.choice(cand.size, size=min(d, cand.size), replace=False)
    best = int(cand[drawn[0]])
    for k in drawn[1:].tolist():
        if values[cand[k]] < values[best]:
            best = int(cand[k])
    return best


def _uniform_oracle(ok, rng):
    el = np.flatnonzero(ok)
    return -1 if el.size == 0 else int(el[rng.integers(el.size)])


def _views(n_views, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n_views):
        m = int(rng.integers(1, 40))
        ok = rng.random(m) < rng.choice([0.3, 0.8, 1.0])
        queue = rng.integers(0, 4, m).astype(float)  # small values: many ties
        w = rng.integers(1, 5, m).astype(float)
        yield ok, queue, w, int(rng.integers(1 << 30))


def _cases(ok, queue, w):
    """(router, its numpy oracle, its kernel or None) on one view's loads."""
    def jsq(t, pr, ld):
        values = (queue * 7.0 if ld == "tokens" else queue) / (w if pr else 1.0)
        return lambda r: _jsq_oracle(values, ok, t == "random", r)

    return [
        (RandomRouter(), lambda r: _uniform_oracle(ok, r), lambda r: uniform_pick(ok, r)),
        *[(JSQRouter(ties=t, per_replica=pr, load=ld), jsq(t, pr, ld), None)
          for t in ("random", "lowest") for pr in (False, True) for ld in ("requests", "tokens")],
        *[(PowerOfDRouter(d=d), lambda r, d=d: _p2c_oracle(queue, ok, d, r),
           lambda r, d=d: power_of_d_pick(queue, ok, d, r)) for d in (1, 2, 3, 5)],
    ]


def test_jsq_p2c_and_uniform_decide_and_draw_as_numpy():
    counts = np.zeros(3, int)
    for ok, queue, w, seed in _views(500):
        cases = _cases(ok, queue, w)
        for router, oracle, kernel in cases:
            if isinstance(router, RandomRouter):
                view = _View(ok, queue, queue * 7.0, None)  # uniform: no weights
            else:
                view = _View(ok, queue, queue * 7.0, w)
            rngs = [np.random.default_rng(seed) for _ in range(3)]
            want = oracle(rngs[0])
            got, _ = router.route(router.init(0), view, rngs[1])
            assert (-1 if got is None else got) == want, router
            if kernel is not None:
                assert kernel(rngs[2]) == want
            else:
                rngs.pop()
            assert len({r.random() for r in rngs}) == 1, router  # the same draws
        counts += [ok.any(), ok.sum() > 1, not ok.any()]
    assert counts.min() > 0  # views with none, one and several eligible targets were seen
    # integer eligibility: n targets, all eligible (no mask)
    values = np.array([3.0, 1.0, 1.0, 2.0])
    r1, r2 = np.random.default_rng(7), np.random.default_rng(7)
    assert [jsq_pick(values, 4, True, r1) for _ in range(20)] == \
        [jsq_pick(values, np.ones(4, bool), True, r2) for _ in range(20)]
    assert [power_of_d_pick(values, 4, 2, r1) for _ in range(20)] == \
        [power_of_d_pick(values, np.ones(4, bool), 2, r2) for _ in range(20)]
    assert [uniform_pick(4, r1) for _ in range(20)] == \
        [uniform_pick(np.ones(4, bool), r2) for _ in range(20)]


def test_round_robin_cycles_as_numpy_per_stream_and_skips_ineligible_targets():
    for ok, queue, w, _ in _views(300, seed=1):
        rr = RoundRobinRouter()
        state = rr.init(0)
        pointers = {0: 0, 3: 0}
        for k in range(12):
            s = 3 if k % 3 == 0 else 0
            want = _rr_oracle(ok, pointers[s])
            got, state = rr.route(state, _View(ok, queue, queue, w, stream=s), None)
            assert (-1 if got is None else got) == want
            if want >= 0:
                pointers[s] = want + 1
    # the pointer is "one past the target": the DLB leaf's counter (the next start, mod n)
    assert round_robin_pick(np.array([False, True, True]), 2) == (2, 3)
    assert round_robin_pick(np.array([False, True, True]), 3) == (1, 2)
    assert round_robin_pick(np.zeros(3, bool), 5) == (-1, 5)
    assert [round_robin_pick(4, p)[0] for p in range(6)] == [0, 1, 2, 3, 0, 1]


def test_size_partition_is_round_robin_within_each_half():
    router = SizePartitionRouter(threshold_tokens=100)
    cfg = ClusterConfig(n_instances=5)
    rng = np.random.default_rng(3)
    state = router.init(0)
    ptr = np.zeros(2, np.int64)
    got, want = [], []
    n_small = n_large = 0
    for _ in range(60):
        p, d = int(rng.integers(1, 120)), int(rng.integers(0, 60))
        view = _InstanceHead(cfg, p, d)
        g, state = router.route(state, view, rng)
        got.append(g)
        small = p + d < 100
        assert size_partition_pick(small, 5, ptr) == g  # the kernel, its own pointers
        want.append(n_small % 2 if small else 2 + n_large % 3)
        n_small += small
        n_large += not small
    assert got == want and 0 < n_small < 60


@dataclasses.dataclass
class _InstanceHead:
    config: ClusterConfig
    p: int
    d: int

    @property
    def queue_prompt(self):
        return np.array([self.p])

    @property
    def queue_output_pred(self):
        return np.array([self.d])


def test_min_min_completion_estimate_is_the_iteration_time_model():
    tm = IterationTimeModel(0.012, 1.7e-4, 7e-9, 1.3e-4, 5.1e-7)
    cfg = ClusterConfig(n_instances=3, timing=tm)
    view = _MinMinView(cfg, np.array([0, 700, 50]), np.array([4, 0, 9]),
                       np.array([300, 0, 12000]))
    prompt, pred = np.array([10, 2048, 1]), np.array([1, 300, 77])
    ect = estimated_completion_s(view, prompt, pred)
    for i, (p, d) in enumerate(zip(prompt.tolist(), pred.tolist())):
        for m in range(3):
            w, n, kv = (int(view.waiting_prefill_tokens[m]), int(view.n_running[m]),
                        int(view.kv_used[m]))
            by_hand = (tm.iteration_time([w, p] if w else [p], n, kv)
                       + d * tm.iteration_time((), n + 1, kv + p + d / 2))
            assert ect[i, m] == by_hand  # bit for bit: the same expression


@dataclasses.dataclass
class _MinMinView:
    config: ClusterConfig
    waiting_prefill_tokens: np.ndarray
    n_running: np.ndarray
    kv_used: np.ndarray


def test_max_capacity_picks_the_most_free_room_after_the_request():
    cfg = ClusterConfig(n_instances=3, max_batch=10, kv_budget_tokens=1000)

    @dataclasses.dataclass
    class V:
        n_running: np.ndarray
        n_waiting: np.ndarray
        kv_committed: np.ndarray
        queue_prompt: np.ndarray
        config: ClusterConfig = cfg

    # free = min(1 − (n + 1)/10, 1 − (K + p)/1000): (0.5, 0.35), (0.8, 0.15), (0.3, 0.65)
    v = V(np.array([3, 1, 6]), np.array([1, 0, 0]), np.array([600, 800, 300]), np.array([50]))
    assert MaxCapacityRouter().route(None, v, None)[0] == 0  # 0.35 > 0.3 > 0.15
    v = V(np.array([3, 1, 6]), np.array([1, 0, 0]), np.array([600, 800, 300]), np.array([400]))
    assert MaxCapacityRouter().route(None, v, None)[0] == 2  # (0.0, −0.2, 0.3)


def test_two_choices_draws_two_distinct_servers_uniformly():
    rng = np.random.default_rng(0)
    pairs = np.array([two_choices(rng.random(), rng.random(), 4) for _ in range(40_000)])
    assert (pairs[:, 0] != pairs[:, 1]).all() and pairs.min() == 0 and pairs.max() == 3
    freq = np.bincount(pairs[:, 0] * 4 + pairs[:, 1], minlength=16).reshape(4, 4) / 40_000
    off = ~np.eye(4, dtype=bool)
    assert np.allclose(freq[off], 1 / 12, atol=0.006) and (freq[~off] == 0).all()


# -- no second definition ------------------------------------------------------------------------
_KERNELS = {"round_robin_pick", "jsq_pick", "power_of_d_pick", "uniform_pick", "two_choices"}


def _functions(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            yield node


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def test_each_decision_is_defined_once_and_called_by_both_engines():
    where = {}
    for path in PKG.rglob("*.py"):
        for fn in _functions(path):
            if fn.name in _KERNELS or "round_robin" in fn.name or fn.name.startswith("jsq"):
                where.setdefault(fn.name, []).append(path.relative_to(PKG).as_posix())
    assert where == {k: ["routers/_baselines.py"] for k in _KERNELS}
    # the callers: Python routers, the DLB leaf (both engines), the instance kernels, the env
    from lbtheory.intelligent import RoutingEnv
    from lbtheory.intelligent._rkernels import route_builtin
    from lbtheory.sim._kernels_servers import _leaf
    from lbtheory.sim._servers import Cluster

    calls = {
        RoundRobinRouter.route: {"round_robin_pick"},
        JSQRouter.route: {"jsq_pick"},
        PowerOfDRouter.route: {"power_of_d_pick"},
        RandomRouter.route: {"uniform_pick", "sample_index"},
        Cluster.leaf: {"round_robin_pick", "two_choices"},
        _leaf.py_func: {"round_robin_pick", "two_choices"},
        route_builtin.py_func: {"round_robin_pick", "jsq_pick", "power_of_d_pick",
                                "uniform_pick", "size_partition_pick", "maxcap_pick",
                                "mixing_argmax"},
        size_partition_pick.py_func: {"round_robin_pick"},
        RoutingEnv.step: {"jsq_pick"},
    }
    for fn, names in calls.items():
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        assert names <= _names(tree), fn
        assert not {"choice", "roll", "argmin"} & _names(tree), fn


@pytest.mark.parametrize("module", ["routers/_baselines.py", "intelligent/_routers.py",
                                    "sim/_servers.py", "intelligent/_env.py"])
def test_no_numpy_reimplementation_of_a_decision(module):
    names = set().union(*(_names(fn) for fn in _functions(PKG / module)))
    assert not {"roll", "choice"} & names
