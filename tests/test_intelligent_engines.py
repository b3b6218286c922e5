"""The compiled instance simulator against the Python reference: the same per-request outcomes
bit for bit for every registry router (every admission order, KV-limited preemption-heavy runs,
tight prefill limits), the same views at every decision for a Python router, the same
environment episodes and trained parameters (the shared baseline picks against numpy:
``test_decisions.py``); the formulas the kernels share with the Python code;
compiled routers written by a user; bad input."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np
import pytest
from numba import njit

from lbtheory.errors import ParameterError
from lbtheory.intelligent import (
    Admission,
    ClusterConfig,
    CompiledClusterSim,
    DQNConfig,
    EnvConfig,
    ImpactParams,
    IterationTimeModel,
    KernelSpec,
    RoutingEnv,
    SizePartitionRouter,
    _compiled,
    estimated_completion_s,
    make_sim,
    mixing_reward,
    run_router,
    simulate,
    train_dqn,
)
from lbtheory.intelligent._core import LOAD
from lbtheory.intelligent._impact import mixing_reward_scalar
from lbtheory.intelligent._rkernels import _ect, route_builtin
from lbtheory.intelligent._timing import iteration_seconds
from lbtheory.registry import INSTANCE_POLICIES, make_router
from lbtheory.routers import Assignment, RoundRobinRouter
from lbtheory.workloads import mix_traces, read_trace, workload_from_arrays

ROOT = Path(__file__).resolve().parents[1]
TRACES = [ROOT / "examples" / "traces" / f"AzureLLMInferenceTrace_{k}.csv"
          for k in ("code", "conv")]
FIELDS = ("dispatch_s", "admit_s", "first_token_s", "finish_s", "tbt_mean_s", "tbt_max_s",
          "generated_tokens", "preempted", "instance", "peak_kv_tokens", "iterations")
#: every instance policy of the registry that runs without a checkpoint, plus option variants
ROUTERS = [n for n in INSTANCE_POLICIES if n not in ("rl", "wa-rl", "wg-rl")]
VARIANTS = {"jsq-random-ties": dict(name="jsq", ties="random"),
            "p2c-tokens-d3": dict(name="p2c", d=3, load="tokens"),
            "p2c-d1": dict(name="p2c", d=1),
            "small-large-output": dict(name="small-large", size="output", threshold_tokens=120)}


def _router(name: str):
    if name == "small-large":
        return SizePartitionRouter(threshold_tokens=600)
    if name in VARIANTS:
        opts = dict(VARIANTS[name])
        return make_router(opts.pop("name"), "instances", **opts)
    return make_router(name, "instances")


def _azure(n: int, rate: float, seed: int):
    return mix_traces([read_trace(p) for p in TRACES], n_requests=n, seed=seed, rate_rps=rate)


def _synthetic(seed: int, n: int = 300):
    rng = np.random.default_rng(seed)
    arr = np.sort(rng.uniform(0, 6.0, n))
    return workload_from_arrays(arr, rng.integers(0, 700, n), rng.integers(0, 260, n))


#: workload families: (workload, cluster) — Azure mix at saturation; a KV budget that forces
#: preemptions; prefill and batch limits that bind on most iterations.
#: every admission order of the instance batcher
ADMISSIONS = [a.value for a in Admission]

CASES = {
    "azure": lambda adm: (_azure(400, 20.0, 1), ClusterConfig(n_instances=4, admission=adm)),
    "kv-limited": lambda adm: (_synthetic(2), ClusterConfig(
        n_instances=3, kv_budget_tokens=1000, max_batch=32, admission=adm)),
    "prefill-limited": lambda adm: (_synthetic(3), ClusterConfig(
        n_instances=2, kv_budget_tokens=4000, max_batch=6, max_prefill_tokens=700,
        admission=adm)),
    "chunked": lambda adm: (_synthetic(4), ClusterConfig(
        n_instances=2, kv_budget_tokens=1500, max_batch=16, max_prefill_tokens=200,
        chunked_prefill=True, admission=adm)),
}


def _assert_same(a, b) -> None:
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), f
    assert a.status == b.status and a.summary() | {"engine": 0} == b.summary() | {"engine": 0}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("admission", ADMISSIONS)
@pytest.mark.parametrize("name", ROUTERS + list(VARIANTS))
def test_compiled_engine_reproduces_the_reference_bit_for_bit(name, admission, case):
    wl, cfg = CASES[case](admission)
    ref = simulate(wl, _router(name), cfg, seed=7, engine="reference")
    out = simulate(wl, _router(name), cfg, seed=7, engine="compiled")
    assert (ref.engine, out.engine) == ("reference", "compiled")
    _assert_same(ref, out)
    assert ref.completed == len(wl)
    if case == "kv-limited":
        assert ref.preempted.sum() > 20  # the family does exercise preemption ...
    if case == "prefill-limited":  # ... and batches cut by the prefill and batch limits
        assert np.array_equal(np.unique(ref.instance), [0, 1]) or name == "small-large"


@pytest.mark.parametrize("name", ROUTERS + list(VARIANTS))
def test_router_kernels_decide_as_the_python_routers_at_every_decision(name):
    # Drive a compiled simulator with the Python router; at every decision ask the kernel too
    # (its own state and rng stream) on the same state: the same (position, instance) and the
    # same draws. Min-Min also compares every estimated completion time, bit for bit.
    wl = _synthetic(11, 300)
    cfg = ClusterConfig(n_instances=3, kv_budget_tokens=1500, max_batch=16)
    router = _router(name)
    spec = _compiled.kernel_spec(router, cfg)
    sim = CompiledClusterSim(wl, cfg)
    rng_py, rng_k = np.random.default_rng(5), np.random.default_rng(5)
    pstate, kstate = router.init(0), spec.state.copy()
    decisions = 0
    while sim.advance():
        while sim.queue_length:
            view = sim.view()
            want, pstate = router.route(pstate, view, rng_py)
            pos, target = (int(want.positions[0]), int(want.targets[0])) \
                if isinstance(want, Assignment) else (0, want)
            got = route_builtin(sim.state, spec.code, spec.params, kstate, rng_k)
            assert (pos, target) == got, (name, decisions)
            if name == "minmin":
                ect = estimated_completion_s(view, view.queue_prompt, view.queue_output_pred)
                for i, (p, d) in enumerate(zip(view.queue_prompt, view.queue_output_pred)):
                    assert ect[i].tolist() == [_ect(sim.state.mi, sim.state.gf, m, p, d)
                                               for m in range(3)]
            sim.dispatch(pos, target)
            decisions += 1
    assert decisions == 300 and rng_py.random() == rng_k.random()


def test_every_router_has_a_kernel():
    # Issue 32: was `kernel_spec(...) is not None`; now each router's kernel is its own (the
    # registry kernel of its rule, never another's) with its options as the kernel's parameters,
    # and a subclass that changes `route` really runs its own Python decision on the compiled
    # engine.
    from lbtheory.intelligent._impact import calibrate_impact
    from lbtheory.intelligent._rkernels import CODES

    cfg = ClusterConfig()
    expected = {  # name -> (kernel, parameters): JSQ (tokens?, random ties?), P2C (d, tokens?)
        "rr": ("rr", []), "rand": ("random", []), "random": ("random", []),
        "jsq": ("jsq", [0, 0]), "jsq-tokens": ("jsq", [1, 0]), "jsq-random-ties": ("jsq", [0, 1]),
        "p2c": ("p2c", [2, 0]), "p2c-tokens-d3": ("p2c", [3, 1]), "p2c-d1": ("p2c", [1, 0]),
        "minmin": ("minmin", []), "maxcap": ("maxcap", []),
        "heuristic": ("heuristic", calibrate_impact(cfg.timing).kernel_params().tolist()),
        "small-large": ("small-large", [600, 0]),  # threshold, size (0: prompt + output)
        "small-large-output": ("small-large", [120, 1])}  # 1: the predicted output
    names = ROUTERS + list(VARIANTS)
    assert set(names) <= set(expected), set(names) - set(expected)
    assert len(set(CODES.values())) == len(CODES)  # one code per kernel
    for name in {*names, "small-large"}:
        spec = _compiled.kernel_spec(_router(name), cfg)
        kernel, params = expected[name]
        assert getattr(spec, "kernel", None) is None and spec.code == CODES[kernel], name
        assert spec.params.dtype == np.float64 and spec.params.tolist() == params, name
        assert spec.state.tolist() == ([0, 0] if name.startswith("small") else [0]), name
    prm = _compiled.kernel_spec(_router("heuristic"), cfg).params
    assert prm[3] > 0 and prm[4:].tolist() == [0.5, 1.0]  # ε (s) calibrated, α = 1/2, split

    class Tweaked(RoundRobinRouter):  # a subclass may change route: it runs in Python
        def route(self, state, view, rng):
            return view.config.n_instances - 1, state

    assert _compiled.kernel_spec(Tweaked(), cfg) is None
    wl = _synthetic(5, n=40)
    out = simulate(wl, Tweaked(), ClusterConfig(n_instances=3), engine="compiled")
    assert out.engine == "compiled" and out.instance.tolist() == [2] * 40


class _Probe:
    """A Python router exercising the whole contract (waits, batches of non-head positions)
    that records every view it sees."""

    name = "probe"

    def __init__(self) -> None:
        self.views: list = []

    def init(self, seed: int = 0):
        return 0

    def observe(self, state, view):
        return state + 1

    def route(self, state, view, rng):
        self.views.append(view)
        if state % 5 == 0 and view.queue_wait_s[0] < 0.1:
            return None, state
        if view.queue_length >= 3:
            lo, hi = int(np.argmin(view.load_tokens)), int(np.argmax(view.kv_committed))
            return Assignment(np.array([2, 0]), np.array([lo, hi])), state
        return int(rng.integers(view.config.n_instances)), state


@pytest.mark.parametrize("admission", ADMISSIONS)
def test_a_python_router_sees_the_same_views_on_both_engines(admission):
    wl = _synthetic(4, 250)
    cfg = ClusterConfig(n_instances=3, kv_budget_tokens=1100, max_batch=12, admission=admission)
    probes, results = [], []
    for engine in ("reference", "compiled"):
        probe = _Probe()
        results.append(simulate(wl, probe, cfg, seed=3, engine=engine))
        probes.append(probe)
    _assert_same(*results)
    ref, comp = probes
    assert len(ref.views) == len(comp.views) > 200
    for a, b in zip(ref.views, comp.views):
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if f.name == "instance_requests":
                assert all(np.array_equal(u, w) for u, w in zip(x, y))
            elif isinstance(x, np.ndarray):
                assert x.dtype == y.dtype and np.array_equal(x, y), f.name
            else:
                assert x == y, f.name
    assert any(v.earliest_completion_s < np.inf for v in ref.views)


def test_iteration_time_has_one_definition_evaluated_alike_in_both_engines():
    tm = IterationTimeModel(0.012, 1.7e-4, 7e-9, 1.3e-4, 5.1e-7)
    rng = np.random.default_rng(1)
    coef = tm.coefficients()
    for _ in range(200):
        q = rng.integers(0, 5000, rng.integers(0, 4)).tolist()
        n, ctx = int(rng.integers(0, 200)), float(rng.integers(0, 10**6)) + 0.5 * rng.integers(2)
        by_hand = (0.012 + 1.7e-4 * float(sum(q)) + 7e-9 * float(sum(x * x for x in q))
                   + 1.3e-4 * n + 5.1e-7 * ctx)
        py = tm.iteration_time(q, n, ctx)
        nb = iteration_seconds(coef, float(sum(q)), float(sum(x * x for x in q)), float(n), ctx)
        assert py == nb  # the same expression, bit for bit
        assert py == pytest.approx(by_hand, rel=1e-14)


def test_mixing_reward_kernel_matches_the_estimator_bit_for_bit():
    rng = np.random.default_rng(2)
    for _ in range(300):
        prm = ImpactParams(grad1=float(rng.uniform(1e-9, 1e-6)), grad2=float(rng.uniform(0, 1e-5)),
                           epsilon_s=float(rng.uniform(0.05, 3.0)), alpha=float(rng.uniform(0.05,
                                                                                           0.95)),
                           grad_backlog=float(rng.uniform(0, 1e-3)))
        p, d = int(rng.integers(1, 20000)), int(rng.integers(1, 4000))
        x_load, y_load = rng.integers(0, 200000, (2, 6)).astype(float)
        # numpy's vector expression of the estimator, written here as the oracle
        t_p = prm.grad1 * float(p * p) + prm.g_load * x_load
        r_p = np.where(t_p <= prm.epsilon_s, 1.0, 1.0 - t_p / prm.epsilon_s)
        want = prm.alpha * r_p + (1.0 - prm.alpha) * (-prm.grad2 * (y_load + p + d))
        got = [mixing_reward_scalar(float(p), float(d), x, y, *prm.kernel_params()[:5])
               for x, y in zip(x_load, y_load)]
        assert want.tolist() == got == mixing_reward(p, d, x_load, prm, y_load).tolist()
    prm = ImpactParams(grad1=1.0, grad2=0.0, epsilon_s=5.0, alpha=0.5)  # T_p = ε exactly: r_p = 1
    assert mixing_reward_scalar(1.0, 0.0, 4.0, 4.0, 1.0, 1.0, 0.0, 5.0, 0.5) == 0.5 == float(
        mixing_reward(1, 0, 4.0, prm))


# -- the environment ----------------------------------------------------------------------------
@pytest.mark.parametrize("guidance, admission, kv", [("static", "fcfs", 32768),
                                                     ("annealed", "spf", 1200),
                                                     ("static", "lwl", 1200),
                                                     ("annealed", "bin-packing", 1200),
                                                     ("none", "fcfs", 1200)])
def test_environment_episodes_are_identical_on_both_engines(guidance, admission, kv):
    def wf(seed):
        return _synthetic(seed, 150)

    cfg = ClusterConfig(n_instances=3, kv_budget_tokens=kv, max_batch=16, admission=admission)
    ec = EnvConfig(guidance=guidance, max_wait_s=0.3)
    envs = [RoutingEnv(wf, cfg, ec, engine=e) for e in ("reference", "compiled")]
    first = [e.reset(seed=5) for e in envs]
    assert np.array_equal(first[0][0], first[1][0])
    rng = np.random.default_rng(0)
    done, steps, waits = False, 0, 0
    while not done:
        a = int(rng.integers(0, 4))
        waits += a == 3
        (o1, r1, d1, t1, i1), (o2, r2, d2, t2, i2) = (e.step(a) for e in envs)
        assert o1.dtype == o2.dtype == np.float32 and np.array_equal(o1, o2), steps
        assert r1 == r2 and d1 == d2 and t1 == t2, steps
        assert np.array_equal(i1["action_mask"], i2["action_mask"])
        assert (i1["completed"], i1["time_s"]) == (i2["completed"], i2["time_s"])
        done, steps = d1, steps + 1
    assert steps > 150 and waits > 20
    assert envs[1].sim.engine == "compiled" and envs[0].sim.engine == "reference"


def test_training_gives_the_same_parameters_on_both_engines():
    def wf(seed):
        return _synthetic(seed, 40)

    cfg = ClusterConfig(n_instances=2, kv_budget_tokens=2000, max_batch=16)
    conf = DQNConfig(router="wa-rl", seed=3, episodes=2, learning_starts=32, batch_size=16,
                     train_every=1, target_every=10, eps_decay_steps=60, hidden=(16, 16))
    a, b = (train_dqn(wf, cfg, conf, env_config=EnvConfig(max_wait_s=0.1), engine=e)
            for e in ("reference", "compiled"))
    assert a.history == b.history
    la, lb = (jax.tree_util.tree_leaves(x.net) for x in (a, b))
    assert all(np.array_equal(x, y) for x, y in zip(la, lb))


# -- compiled routers written by a user ---------------------------------------------------------
@njit
def _first_two(s, state, rng):
    """Send the head to the less loaded of instances 0 and 1 (ties: 0); count decisions."""
    state[0] += 1
    return 0, 0 if s.mi[LOAD, 0] <= s.mi[LOAD, 1] else 1


@njit
def _out_of_range(s, state, rng):
    return 0, 7


@njit
def _first_two_former(s, code, params, rstate, rng):
    """The same decision in the former instance form (code, params, int64 rstate)."""
    return 0, 0 if s.mi[LOAD, 0] <= s.mi[LOAD, 1] + params[0] else 1


@dataclasses.dataclass(frozen=True)
class _FirstTwo:
    kernel: object = None
    name: str = "first-two"

    def init(self, seed=0):
        return None

    def observe(self, state, view):
        return state

    def route(self, state, view, rng):
        return (0 if view.load_tokens[0] <= view.load_tokens[1] else 1), state

    def kernel_spec(self, config):
        if self.kernel is _first_two_former:
            with pytest.warns(DeprecationWarning, match="KernelSpec.kernel, code, params, "):
                return KernelSpec(self.kernel, 0, np.zeros(1), np.zeros(1, np.int64))
        return KernelSpec(self.kernel, state=np.zeros(1))


def test_a_users_compiled_router_runs_inside_the_compiled_loop():
    wl, cfg = _synthetic(6, 120), ClusterConfig(n_instances=3)
    ref = simulate(wl, _FirstTwo(_first_two), cfg, engine="reference")
    out = simulate(wl, _FirstTwo(_first_two), cfg, engine="compiled")
    _assert_same(ref, out)
    assert set(np.unique(out.instance)) == {0, 1}
    spec = _FirstTwo(_first_two).kernel_spec(cfg)
    assert spec.state.tolist() == [0.0]  # each run counted on its own copy
    former = simulate(wl, _FirstTwo(_first_two_former), cfg, engine="compiled")
    _assert_same(ref, former)
    with pytest.raises(ParameterError, match="router first-two chose a queue position or "
                                             "instance out of range"):
        simulate(wl, _FirstTwo(_out_of_range), cfg)
    with pytest.raises(ParameterError, match="KernelSpec.observe is not used by the instance"):
        CompiledClusterSim(wl, cfg).run(KernelSpec(_first_two, _first_two), name="x")
    with pytest.raises(ParameterError, match="KernelSpec.route: expected a numba.njit"):
        KernelSpec(lambda s, state, rng: (0, 0))


# -- bad input ----------------------------------------------------------------------------------
def test_bad_input_is_refused_with_typed_errors(monkeypatch):
    wl = _synthetic(7, 30)
    cfg = ClusterConfig(n_instances=2)
    with pytest.raises(ParameterError, match="engine must be one of 'auto', 'compiled', "
                                             "'reference', got 'fast'"):
        simulate(wl, make_router("rr", "instances"), cfg, engine="fast")
    sim = CompiledClusterSim(wl, cfg)
    sim.advance()
    with pytest.raises(ParameterError, match=r"instance 2 out of range \[0, 2\)"):
        sim.dispatch(0, 2)
    with pytest.raises(ParameterError, match=r"queue position 5 out of range"):
        sim.dispatch(5, 0)
    far = workload_from_arrays([0.0, 1e15], [3, 3], [2, 2])
    for engine in ("compiled", "reference"):  # the same clock limit on both engines
        with pytest.raises(ParameterError, match="arrival span: 1e\\+15 s of 0.02-s ticks is "
                                                 "5e\\+16 ticks, more than the 1e\\+12"):
            simulate(far, make_router("rr", "instances"), cfg, engine=engine)
    # the house memory limit: 1e-4 GiB (≈ 107 kB) lets the cluster exist but not the run's
    # arrays (≈ 232 bytes per request) or a 30-request iteration log (40 bytes per token)
    monkeypatch.setenv("LBTHEORY_MAX_MEMORY_GB", "1e-4")
    with pytest.raises(ParameterError, match=r"the compiled instance simulator \(30 requests on 2 "
                                             r"instances, iteration log\) would need about "
                                             r"[0-9.e-]+ GiB, more than the 0\.0001 GiB limit "
                                             r"\(LBTHEORY_MAX_MEMORY_GB\)"):
        make_sim(wl, cfg, record=True)
    big = _synthetic(8, 1000)
    with pytest.raises(ParameterError, match=r"\(1,000 requests on 2 instances\) would need"):
        simulate(big, make_router("rr", "instances"), cfg)
    assert simulate(big, make_router("rr", "instances"), cfg, engine="reference").completed \
        == 1000  # the reference has no per-request check (its Python lists grow as needed)


def test_python_routers_drive_the_compiled_core_directly():
    wl, cfg = _synthetic(9, 80), ClusterConfig(n_instances=2)
    sims = [make_sim(wl, cfg, engine=e) for e in ("reference", "compiled")]
    for sim in sims:
        run_router(sim, make_router("jsq", "instances"))
    assert sims[1].done and sims[1].n_done == 80
    assert sims[0].preemptions == sims[1].preemptions
    assert all(np.array_equal(x, y, equal_nan=True)
               for x, y in zip(sims[0].records().values(), sims[1].records().values()))


def test_core_kernels_compile_without_reference_counting():
    # _core's kernels allocate nothing; numba's refcounting was over half of the engine's time
    from lbtheory.intelligent import _core

    assert _core._KERNEL.get("_nrt") is False
    for fn in (_core.advance, _core.dispatch, _core._start, _core._finish, _core._preempt):
        assert fn.targetoptions.get("_nrt") is False, fn
