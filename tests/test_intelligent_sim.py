"""Instance simulator of the Intelligent Router: hand-computed timelines, conservation, KV budget,
preemption by recomputation, determinism, iteration-time calibration — on both engines (the
compiled one and the Python reference)."""

from __future__ import annotations

import numpy as np
import pytest

from lbtheory.errors import DataFormatError, LBTheoryError, ModelError, ParameterError
from lbtheory.intelligent import (
    ClusterConfig,
    IterationTimeModel,
    fit_iteration_model,
    make_sim,
    result_of,
    run_router,
    simulate,
)
from lbtheory.registry import make_router
from lbtheory.workloads import mix_traces, trace_from_arrays, workload_from_arrays


def make_heuristic(name):
    return make_router(name, "instances")


ENGINES = ["compiled", "reference"]

# base 10 ms, 1 ms per prefill token, 2 ms per decoding request, 0.1 ms per context token.
SIMPLE = IterationTimeModel(base_s=0.01, prefill_s_per_token=0.001, attention_s_per_token2=0.0,
                            decode_s_per_seq=0.002, context_s_per_token=0.0001)


def _cfg(**kw) -> ClusterConfig:
    base = dict(n_instances=1, kv_budget_tokens=1000, max_batch=8, max_prefill_tokens=1000,
                epoch_s=0.02, timing=SIMPLE)
    base.update(kw)
    return ClusterConfig(**base)


@pytest.mark.parametrize("engine", ENGINES)
def test_single_request_timeline_by_hand(engine):
    # p = 4, d = 3, arrives at 5 ms; routed at the epoch t = 20 ms.
    wl = workload_from_arrays([0.005], [4], [3])
    r = simulate(wl, make_heuristic("rr"), _cfg(), engine=engine)
    # prefill [4]: 10 + 4 = 14 ms -> 34 ms; decode ctx 5: 12.5 ms -> 46.5; ctx 6: 12.6 -> 59.1
    assert r.router_wait_s[0] == pytest.approx(0.015, abs=1e-12)
    assert r.ttft_s[0] == pytest.approx(0.029, abs=1e-12)
    assert r.finish_s[0] == pytest.approx(0.0591, abs=1e-12)
    assert r.e2e_s[0] == pytest.approx(0.0541, abs=1e-12)
    assert r.tbt_mean_s[0] == pytest.approx((0.0125 + 0.0126) / 2, abs=1e-12)
    assert r.instance_queue_s[0] == pytest.approx(0.0, abs=1e-12)
    assert r.iterations.tolist() == [3]


CHUNK_TM = IterationTimeModel(base_s=0.01, prefill_s_per_token=0.001,
                              attention_s_per_token2=1e-6, decode_s_per_seq=0.002,
                              context_s_per_token=0.0001)


@pytest.mark.parametrize("engine", ENGINES)
def test_chunked_prefill_timeline_by_hand(engine):
    # p = 250 in chunks of 100 at offsets 0, 100, 200: prefill 10 + 100 (+ 1e-6 · 100²) ms,
    # 10 + 100 + 1e-6 (100² + 2·100·100) ms, 10 + 50 + 1e-6 (50² + 2·50·200) ms — the chunks'
    # attention terms sum to 1e-6 · 250²; the first token after the third; then two decodes
    # at contexts 251 and 252: 10 + 2 + 25.1 and 10 + 2 + 25.2 ms.
    wl = workload_from_arrays([0.0], [250], [3])
    cfg = _cfg(max_prefill_tokens=100, chunked_prefill=True, timing=CHUNK_TM)
    r = simulate(wl, make_heuristic("rr"), cfg, engine=engine)
    chunks = [0.01 + 0.1 + 1e-6 * 100**2, 0.01 + 0.1 + 1e-6 * (100**2 + 2 * 100 * 100),
              0.01 + 0.05 + 1e-6 * (50**2 + 2 * 50 * 200)]
    assert sum(chunks) == pytest.approx(3 * 0.01 + 0.25 + 1e-6 * 250**2, abs=1e-15)
    assert r.ttft_s[0] == pytest.approx(sum(chunks), abs=1e-12)
    assert r.finish_s[0] == pytest.approx(sum(chunks) + 0.0371 + 0.0372, abs=1e-12)
    assert r.iterations.tolist() == [5] and r.preempted.sum() == 0
    # without chunking the same prefill is one iteration: 10 + 250 + 62.5 ms
    r1 = simulate(wl, make_heuristic("rr"), _cfg(timing=CHUNK_TM), engine=engine)
    assert r1.ttft_s[0] == pytest.approx(0.01 + 0.25 + 0.0625, abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_chunked_prefill_shares_the_budget_with_decodes_by_hand(engine):
    # A (p = 10, d = 3) and B (p = 150, d = 2) at 0, budget 100 tokens per iteration:
    # it 1: A's whole prefill (10) and B's first chunk (90): 10 + 100 + 1e-6 (10² + 90²) ms,
    #       A's first token;
    # it 2: A decodes (1 token of the budget) and B's last 60 tokens at offset 90:
    #       10 + 60 + 1e-6 (60² + 2·60·90) + 2 + 0.1·11 ms; B's first token, A's second;
    # it 3: both decode, contexts 12 + 151: 10 + 4 + 16.3 ms: A and B finish (3 and 2 tokens).
    wl = workload_from_arrays([0.0, 0.0], [10, 150], [3, 2])
    cfg = _cfg(max_prefill_tokens=100, chunked_prefill=True, timing=CHUNK_TM)
    r = simulate(wl, make_heuristic("rr"), cfg, engine=engine)
    t1 = 0.01 + 0.1 + 1e-6 * (10**2 + 90**2)
    t2 = t1 + 0.01 + 0.06 + 1e-6 * (60**2 + 2 * 60 * 90) + 0.002 + 0.0011
    t3 = t2 + 0.01 + 0.004 + 0.0001 * (12 + 151)
    assert r.first_token_s.tolist() == pytest.approx([t1, t2], abs=1e-12)
    assert r.finish_s.tolist() == pytest.approx([t3, t3], abs=1e-12)
    assert r.admit_s.tolist() == [0.0, 0.0] and r.iterations.tolist() == [3]


@pytest.mark.parametrize("engine", ENGINES)
def test_two_request_interference_timeline_by_hand(engine):
    # A (p=4, d=3) at 0; B (p=6, d=2) at 1 ms, routed at 20 ms while A's 2nd iteration runs.
    wl = workload_from_arrays([0.0, 0.001], [4, 6], [3, 2])
    r = simulate(wl, make_heuristic("rr"), _cfg(), engine=engine)
    # A: prefill 0->14 ms; decode ctx 5 14->26.5 ms; then A decodes (ctx 6) while B prefills 6:
    # 10 + 6 + 2 + 0.6 = 18.6 ms -> 45.1 ms (A done, B's first token); B decodes ctx 7: 12.7 ms.
    assert r.finish_s[0] == pytest.approx(0.0451, abs=1e-12)
    assert r.tbt_max_s[0] == pytest.approx(0.0186, abs=1e-12)  # the prefill stalled A's decode
    assert r.dispatch_s[1] == pytest.approx(0.02, abs=1e-12)
    assert r.admit_s[1] == pytest.approx(0.0265, abs=1e-12)
    assert r.first_token_s[1] == pytest.approx(0.0451, abs=1e-12)
    assert r.finish_s[1] == pytest.approx(0.0578, abs=1e-12)
    assert r.summary()["latency"]["mean"] == pytest.approx((0.0451 + 0.0568) / 2, abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_co_scheduled_prefills_by_hand(engine):
    # both at t = 0: prefill [4, 6] = 20 ms; decode ctx 5 + 7 = 12: 10 + 4 + 1.2 = 15.2 ms.
    wl = workload_from_arrays([0.0, 0.0], [4, 6], [2, 2])
    r = simulate(wl, make_heuristic("rr"), _cfg(), engine=engine)
    np.testing.assert_allclose(r.first_token_s, [0.02, 0.02], atol=1e-12)
    np.testing.assert_allclose(r.finish_s, [0.0352, 0.0352], atol=1e-12)
    assert r.peak_kv_tokens.tolist() == [4 + 2 + 6 + 2]


@pytest.mark.parametrize("engine", ENGINES)
def test_preemption_by_recomputation_by_hand(engine):
    # budget 10: A and B (p=4, d=4) both admitted (KV 5 + 5); next iteration needs 12 > 10, so B
    # (admitted last) is preempted, A finishes alone, then B re-prefills 4 + 1 tokens and resumes.
    wl = workload_from_arrays([0.0, 0.0], [4, 4], [4, 4])
    r = simulate(wl, make_heuristic("rr"), _cfg(kv_budget_tokens=10), engine=engine)
    assert r.preempted.tolist() == [0, 1]
    assert r.generated_tokens.tolist() == [4, 4]  # no token emitted twice
    # A: 18, +12.5, +12.6, +12.7 ms -> 55.8 ms; B: prefill [5] 15 ms -> 70.8, +12.6, +12.7
    assert r.finish_s[0] == pytest.approx(0.0558, abs=1e-12)
    assert r.first_token_s[1] == pytest.approx(0.018, abs=1e-12)
    assert r.finish_s[1] == pytest.approx(0.0961, abs=1e-12)
    assert r.peak_kv_tokens.tolist() == [10]


def _random_workload(seed: int, n: int = 300):
    rng = np.random.default_rng(seed)
    arr = np.sort(rng.uniform(0, 8.0, n))
    return workload_from_arrays(arr, rng.integers(1, 600, n), rng.integers(1, 200, n),
                                task=rng.integers(0, 2, n), task_names=("a", "b"))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("router", ["rr", "jsq", "minmin", "maxcap", "heuristic"])
def test_conservation_and_kv_budget_under_pressure(router, engine):
    wl = _random_workload(1)
    cfg = ClusterConfig(n_instances=3, kv_budget_tokens=1200, max_batch=16,
                        max_prefill_tokens=1024, epoch_s=0.02)
    r = simulate(wl, make_heuristic(router), cfg, engine=engine)
    assert r.engine == engine
    n = len(wl)
    assert r.completed == n
    assert np.array_equal(r.generated_tokens, wl.output_tokens)  # each token exactly once
    assert np.all(r.peak_kv_tokens <= cfg.kv_budget_tokens)
    assert r.preempted.sum() > 0  # the budget is tight enough to preempt ...
    assert np.all(np.isfinite(r.finish_s[r.preempted > 0]))  # ... and preempted requests resume
    assert np.all(r.dispatch_s >= r.arrival_s - 1e-12)
    assert np.all(r.admit_s >= r.dispatch_s - 1e-12)
    assert np.all(r.first_token_s > r.admit_s)
    assert np.all(r.finish_s >= r.first_token_s)
    assert set(np.unique(r.instance)) <= set(range(3))


@pytest.mark.parametrize("engine", ENGINES)
def test_every_request_finishes_exactly_once(engine):
    wl = _random_workload(2, 200)
    sim = make_sim(wl, ClusterConfig(n_instances=2, kv_budget_tokens=900, max_batch=8),
                   engine=engine, record=True)
    run_router(sim, make_heuristic("jsq"))
    # a request finishes in the iteration where it emits its last token: count, from the log,
    # the iterations in which each request emits its d-th token
    emitted = np.zeros(len(wl), dtype=int)
    finished_in = np.zeros(len(wl), dtype=int)
    for _, _, end, reqs in sim.iterations_log:
        emitted[list(reqs)] += 1
        for v in reqs:
            if emitted[v] == max(int(wl.output_tokens[v]), 1):
                finished_in[v] += 1
                assert result_of(sim, "jsq").finish_s[v] == end
    assert finished_in.tolist() == [1] * len(wl)
    assert sim.n_done == len(wl) and sim.done


@pytest.mark.parametrize("engine", ENGINES)
def test_kv_budget_recomputed_independently_from_the_iteration_log(engine):
    # Rebuild every request's context from the log alone (its prompt + tokens emitted so far,
    # zero while preempted) and check the budget, one token per scheduled request per iteration,
    # and non-overlapping iterations per instance.
    wl = _random_workload(3, 150)
    cfg = ClusterConfig(n_instances=2, kv_budget_tokens=900, max_batch=8)
    sim = make_sim(wl, cfg, engine=engine, record=True)
    run_router(sim, make_heuristic("rr"))
    emitted = np.zeros(len(wl), dtype=int)
    last_end = [0.0, 0.0]
    preemptions = 0
    batch_before: dict[int, set] = {0: set(), 1: set()}
    for m, start, end, reqs in sim.iterations_log:
        assert start >= last_end[m] - 1e-12
        last_end[m] = end
        emitted[list(reqs)] += 1
        kv = sum(int(wl.prompt_tokens[v]) + emitted[v] for v in reqs)
        assert kv <= cfg.kv_budget_tokens
        dropped = {v for v in batch_before[m] if emitted[v] < wl.output_tokens[v]} - set(reqs)
        preemptions += len(dropped)  # left the batch unfinished: preempted
        batch_before[m] = set(reqs)
    np.testing.assert_array_equal(emitted, wl.output_tokens)
    assert preemptions == sim.preemptions > 0


@pytest.mark.parametrize("engine", ENGINES)
def test_deterministic_and_seeded(engine):
    # Issue 32: the simulation half compared a deterministic router's run with itself; it now
    # checks Min-Min's whole schedule against a hand computation (SIMPLE timing: 10 ms + 1 ms
    # per prefill token + 2 ms per decoding request + 0.1 ms per context token).
    tr1 = trace_from_arrays(np.arange(50) * 0.1, np.arange(1, 51) * 7, np.arange(50) % 9 + 1)
    tr2 = trace_from_arrays(np.arange(40) * 0.3, np.arange(1, 41) * 11, np.arange(40) % 5 + 3)
    a = mix_traces([tr1, tr2], n_requests=60, seed=3, rate_rps=10.0)
    b = mix_traces([tr1, tr2], n_requests=60, seed=3, rate_rps=10.0)
    c = mix_traces([tr1, tr2], n_requests=60, seed=4, rate_rps=10.0)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.task, b.task)
    assert not np.array_equal(a.arrival_s, c.arrival_s)
    # drawn without replacement from the pooled traces: 60 distinct rows, each of its trace
    pool = {(7 * (i + 1), i % 9 + 1, 0) for i in range(50)} | \
        {(11 * (i + 1), i % 5 + 3, 1) for i in range(40)}
    rows = set(zip(a.prompt_tokens.tolist(), a.output_tokens.tolist(), a.task.tolist()))
    assert len(rows) == 60 and rows <= pool and set(np.unique(a.task)) == {0, 1}
    assert a.arrival_s[0] == 0.0 and np.all(np.diff(a.arrival_s) > 0)  # Poisson, from 0
    # Min-Min on two idle instances, three requests at t = 0 (p, d) = A (100, 10), B (10, 2),
    # C (50, 5); ECT = T([w, p], n, kv) + d T((), n + 1, kv + p + d/2):
    #   idle: A 0.11 + 10 (0.012 + 0.0105) = 0.335, B 0.0462, C 0.14625 -> B to 0 (first tie);
    #   C: 0.15625 on 0 (B's 10 prompt tokens waiting) vs 0.14625 on 1 -> C to 1;
    #   A: 0.12 + 0.225 = 0.345 on 0 vs 0.16 + 0.225 = 0.385 on 1 -> A to 0.
    # Instance 0 prefills [10, 100] in 0.12 s; one decode of both, contexts 11 + 101: 0.0252 s
    # (B done at 0.1452); A alone, contexts 102..109: 0.096 + 0.0844 = 0.1804 s -> 0.3256.
    # Instance 1: C's prefill 0.06, decodes at contexts 51..54: 0.0690 s -> 0.129.
    wl = workload_from_arrays([0.0, 0.0, 0.0], [100, 10, 50], [10, 2, 5])
    r = simulate(wl, make_heuristic("minmin"), _cfg(n_instances=2), engine=engine)
    assert r.instance.tolist() == [0, 0, 1]
    np.testing.assert_allclose(r.ttft_s, [0.12, 0.12, 0.06], rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.finish_s, [0.3256, 0.1452, 0.129], rtol=0, atol=1e-12)
    # round robin on the same requests: A and C share instance 0, B alone on 1
    assert simulate(wl, make_heuristic("rr"), _cfg(n_instances=2),
                    engine=engine).instance.tolist() == [0, 1, 0]


def test_trace_timestamps_mode_merges_in_time_order():
    tr1 = trace_from_arrays([0.0, 1.0, 2.0], [5, 5, 5], [1, 1, 1])
    tr2 = trace_from_arrays([0.5, 1.5], [9, 9], [2, 2])
    w = mix_traces([tr1, tr2], n_requests=4, seed=0)
    np.testing.assert_allclose(w.arrival_s, [0.0, 0.0, 1.0, 1.0])  # each trace starts at 0
    assert w.task.tolist() == [0, 1, 0, 1]


@pytest.mark.parametrize("engine", ENGINES)
def test_zero_output_counts_as_one_token(engine):
    # the workload keeps the trace's 0; the simulator serves it as one token (the prefill emits
    # one), exactly like a request of output 1
    w0 = workload_from_arrays([0.0], [3], [0])
    w1 = workload_from_arrays([0.0], [3], [1])
    assert w0.output_tokens.tolist() == [0]
    r0, r1 = (simulate(w, make_heuristic("rr"), _cfg(), engine=engine) for w in (w0, w1))
    assert r0.generated_tokens.tolist() == r1.generated_tokens.tolist() == [1]
    np.testing.assert_array_equal(r0.finish_s, r1.finish_s)


def test_bad_inputs_are_typed_errors():
    with pytest.raises(ParameterError, match="n_instances"):
        ClusterConfig(n_instances=0)
    with pytest.raises(ParameterError, match="kv_budget_tokens = 10 is smaller than request 0"):
        simulate(workload_from_arrays([0.0], [8], [5]), make_heuristic("rr"),
                 _cfg(kv_budget_tokens=10))
    with pytest.raises(DataFormatError, match="output_tokens"):
        workload_from_arrays([0.0], [3], [-1])
    with pytest.raises(ParameterError, match="unknown policy 'foo' for the instances simulator"):
        make_heuristic("foo")
    with pytest.raises(LBTheoryError, match="epoch_s"):
        ClusterConfig(epoch_s=0.0)


def test_fit_recovers_known_slopes():
    true = IterationTimeModel(0.012, 1.5e-4, 6e-9, 2e-4, 4e-7)
    rng = np.random.default_rng(0)
    n = 400
    q = rng.integers(0, 4000, n) * (rng.random(n) < 0.5)
    nd = rng.integers(0, 64, n)
    ctx = nd * rng.integers(100, 1500, n)
    t = np.array([true.iteration_time([a] if a else [], b, c) for a, b, c in zip(q, nd, ctx)])
    exact = fit_iteration_model(q, q.astype(float) ** 2, nd, ctx, t)
    np.testing.assert_allclose(exact.coefficients(), true.coefficients(), rtol=1e-6)
    noisy = fit_iteration_model(q, q.astype(float) ** 2, nd, ctx,
                                t * (1 + 0.01 * rng.standard_normal(n)))
    np.testing.assert_allclose(noisy.coefficients()[[0, 1, 3, 4]],
                               true.coefficients()[[0, 1, 3, 4]], rtol=0.15)


def test_fit_refuses_degenerate_samples():
    z = np.zeros(10)
    with pytest.raises(ModelError, match="rank"):
        fit_iteration_model(z, z, np.arange(10), np.arange(10) * 100, 0.01 + 0.001 * np.arange(10))
    with pytest.raises(ModelError, match="time_s has 3 samples"):
        fit_iteration_model(z, z, z, z, np.ones(3))


@pytest.mark.parametrize("engine", ENGINES)
def test_shortest_prompt_first_admission_by_hand(engine):
    # one slot per iteration; A (50 tokens), B (5), C (20) all at t = 0, one output token each.
    wl = workload_from_arrays([0.0, 0.0, 0.0], [50, 5, 20], [1, 1, 1])
    fcfs = simulate(wl, make_heuristic("rr"), _cfg(max_batch=1), engine=engine)
    spf = simulate(wl, make_heuristic("rr"), _cfg(max_batch=1, admission="spf"),
                   engine=engine)
    # FCFS: A 60 ms, B +15 ms, C +30 ms; SPF: B 15 ms, C +30 ms, A +60 ms
    np.testing.assert_allclose(fcfs.finish_s, [0.06, 0.075, 0.105], atol=1e-12)
    np.testing.assert_allclose(spf.finish_s, [0.105, 0.015, 0.045], atol=1e-12)
    with pytest.raises(ParameterError, match="admission"):
        _cfg(admission="lifo")
