"""The vLLM-faithful instance model (paged KV in blocks, an admission watermark, prompts first
with the decodes stalled, preemption by recomputation of the most recent request): a schedule
computed by hand on one instance, block conservation at every iteration, recomputed tokens in
the per-request record, and the compiled engine equal to the reference bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from lbtheory.intelligent import Admission, ClusterConfig, IterationTimeModel, simulate
from lbtheory.intelligent._engine import ClusterSim
from lbtheory.intelligent._simulate import result_of, run_router
from lbtheory.registry import make_router
from lbtheory.workloads import workload_from_arrays

ENGINES = ["compiled", "reference"]
# base 10 ms, 1 ms per prefill token, 2 ms per decoding request, 0.1 ms per context token.
SIMPLE = IterationTimeModel(base_s=0.01, prefill_s_per_token=0.001, attention_s_per_token2=0.0,
                            decode_s_per_seq=0.002, context_s_per_token=0.0001)


def _vllm(**kw) -> ClusterConfig:
    base = dict(n_instances=1, kv_budget_tokens=12, max_batch=8, max_prefill_tokens=1000,
                epoch_s=0.02, timing=SIMPLE, block_tokens=4, prefill_priority=True)
    base.update(kw)
    return ClusterConfig(**base)


@pytest.mark.parametrize("engine", ENGINES)
def test_block_schedule_with_a_preemption_and_its_recompute_by_hand(engine):
    # 3 blocks of 4 tokens. A (p 4, d 5) and B (p 3, d 4) arrive at 0 and start together:
    # 1. prefill-only [4, 3]: blocks ceil(5/4) + ceil(4/4) = 3 <= 3; 10 + 7 ms -> 17.0 ms
    # 2. decodes need ceil(6/4) + ceil(5/4) = 4 > 3: B (admitted last) is preempted, its 4
    #    KV tokens discarded; A decodes alone, ctx 5: 12.5 ms -> 29.5 ms
    # 3-5. B's recompute (4 tokens, ceil(5/4) = 2 blocks) does not fit beside A's 2 blocks:
    #    A decodes: ctx 6, 7, 8 -> 42.1, 54.8, 67.6 ms (A needs a third block at its 9th token)
    # 6. A gone; B re-prefills 3 + 1 tokens: 14 ms -> 81.6 ms (its 2nd token)
    # 7-8. B decodes, ctx 3 + 2, 3 + 3: 12.5, 12.6 ms -> 94.1, 106.7 ms
    wl = workload_from_arrays([0.0, 0.0], [4, 3], [5, 4])
    r = simulate(wl, make_router("rr", "instances"), _vllm(), engine=engine)
    assert r.preempted.tolist() == [0, 1]
    assert r.recomputed_tokens.tolist() == [0, 4]
    assert r.generated_tokens.tolist() == [5, 4]
    np.testing.assert_allclose(r.first_token_s, [0.017, 0.017], atol=1e-12)
    np.testing.assert_allclose(r.finish_s, [0.0676, 0.1067], atol=1e-12)
    assert r.iterations.tolist() == [8]
    assert r.peak_kv_tokens.tolist() == [12]  # 3 blocks of 4
    # B's gaps: 17.0 -> 81.6 (preempted) -> 94.1 -> 106.7 ms
    assert r.tbt_max_s[1] == pytest.approx(0.0646, abs=1e-12)
    s = r.summary()
    assert s["preemptions_per_request"] == 0.5


@pytest.mark.parametrize("engine", ENGINES)
def test_prefill_priority_stalls_the_decodes_where_the_legacy_model_mixes(engine):
    # A (p 4, d 3) at 0; C (p 8, d 1) routed at the 20 ms epoch while A's first decode runs.
    wl = workload_from_arrays([0.0, 0.02], [4, 8], [3, 1])
    big = dict(kv_budget_tokens=100)
    # vLLM: 0-14 prefill A; 14-26.5 decode A (ctx 5); 26.5-44.5 prefill-only C (10 + 8 ms),
    # A stalls; 44.5-57.1 decode A (ctx 6)
    r = simulate(wl, make_router("rr", "instances"), _vllm(**big), engine=engine)
    np.testing.assert_allclose(r.finish_s, [0.0571, 0.0445], atol=1e-12)
    assert r.tbt_max_s[0] == pytest.approx(0.0306, abs=1e-12)
    # legacy: the third iteration mixes C's prefill with A's decode: 10 + 8 + 2 + 0.6 ms
    old = simulate(wl, make_router("rr", "instances"), _vllm(block_tokens=1,
                   prefill_priority=False, **big), engine=engine)
    np.testing.assert_allclose(old.finish_s, [0.0471, 0.0471], atol=1e-12)


class _Audited(ClusterSim):
    """The reference engine checking block conservation whenever an iteration starts and
    counting the prefill tokens it schedules."""

    prefilled = 0
    checked = 0

    def _begin(self, m, t, need, sum_q, sum_q2, n_decode, context):
        cfg, ins, p, gen = self.cfg, self.inst[m], self.p, self.gen
        blk = cfg.blocks
        if ins.prefill_only:  # the running requests hold their KV; the admitted reserve
            held = sum(blk(p[v] + gen[v]) for v in ins.running)
            held += sum(blk(p[v] + gen[v] + 1) for v in ins.admitted)
            assert held <= cfg.total_blocks - cfg.watermark_blocks
        else:  # every running request's next token has its block
            held = sum(blk(p[v] + gen[v] + 1) for v in ins.running + ins.admitted)
            assert held <= cfg.total_blocks
        assert held == need and 0 <= cfg.total_blocks - held  # allocated + free = total
        assert ins.kv_used == sum(p[v] + gen[v] for v in ins.running)
        self.prefilled += int(sum_q)
        self.checked += 1
        super()._begin(m, t, need, sum_q, sum_q2, n_decode, context)


def _random(seed: int, n: int = 250):
    rng = np.random.default_rng(seed)
    arr = np.sort(rng.uniform(0, 5.0, n))
    return workload_from_arrays(arr, rng.integers(1, 500, n), rng.integers(1, 300, n))


@pytest.mark.parametrize("watermark", [0.0, 0.05])
def test_blocks_are_conserved_at_every_iteration_and_recomputes_accounted(watermark):
    wl = _random(5)
    cfg = ClusterConfig(n_instances=2, kv_budget_tokens=2048, max_batch=24, block_tokens=16,
                        watermark=watermark, prefill_priority=True)
    sim = _Audited(wl, cfg)
    run_router(sim, make_router("rr", "instances"))
    r = result_of(sim, "rr")
    assert r.completed == len(wl) and sim.checked > 500
    assert r.preempted.sum() > 20  # the budget binds
    assert np.array_equal(r.generated_tokens, wl.output_tokens)
    # every prefill token is a prompt token or a token a preemption discarded
    assert sim.prefilled == int(wl.prompt_tokens.sum() + r.recomputed_tokens.sum())
    assert np.all(r.recomputed_tokens[r.preempted == 0] == 0)
    assert np.all(r.recomputed_tokens[r.preempted > 0] >= wl.prompt_tokens[r.preempted > 0])
    assert np.all(r.peak_kv_tokens <= cfg.total_blocks * 16)


#: every admission order of the instance batcher
ADMISSIONS = [a.value for a in Admission]

VLLM_CASES = {
    "vllm": dict(n_instances=3, kv_budget_tokens=2048, max_batch=24, block_tokens=16,
                 watermark=0.01, prefill_priority=True),
    "vllm-chunked": dict(n_instances=2, kv_budget_tokens=2048, max_batch=24, block_tokens=16,
                         watermark=0.01, chunked_prefill=True, max_prefill_tokens=256),
    "blocks-mixed": dict(n_instances=2, kv_budget_tokens=1600, max_batch=16, block_tokens=8),
}


@pytest.mark.parametrize("case", list(VLLM_CASES))
@pytest.mark.parametrize("admission", ADMISSIONS)
@pytest.mark.parametrize("router", ["rr", "jsq", "minmin", "heuristic", "small-large"])
def test_compiled_vllm_model_equals_the_reference(case, admission, router):
    wl = _random(6, 200)
    cfg = ClusterConfig(admission=admission, **VLLM_CASES[case])
    ref = simulate(wl, make_router(router, "instances"), cfg, seed=3, engine="reference")
    out = simulate(wl, make_router(router, "instances"), cfg, seed=3, engine="compiled")
    for f in ("dispatch_s", "admit_s", "first_token_s", "finish_s", "tbt_mean_s", "tbt_max_s",
              "tbt_var_s2", "generated_tokens", "preempted", "recomputed_tokens", "instance",
              "peak_kv_tokens", "iterations"):
        x, y = getattr(ref, f), getattr(out, f)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), f
    assert ref.completed == len(wl) and ref.preempted.sum() > 0


def test_bad_block_options_are_named():
    from lbtheory.errors import ParameterError
    with pytest.raises(ParameterError, match="block_tokens"):
        ClusterConfig(block_tokens=0)
    with pytest.raises(ParameterError, match="watermark"):
        ClusterConfig(watermark=0.9)
    with pytest.raises(ParameterError, match="prefill_priority"):
        ClusterConfig(prefill_priority=1)
    # a request must fit the blocks above the watermark
    wl = workload_from_arrays([0.0], [30], [3])
    with pytest.raises(ParameterError, match="kv_budget_tokens"):
        simulate(wl, make_router("rr", "instances"), ClusterConfig(kv_budget_tokens=40,
                 block_tokens=16), engine="reference")
