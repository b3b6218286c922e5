"""Swap preemption of the vLLM-faithful instance model (``ClusterConfig(preemption="swap")``,
issue 35; with chunked prefill too): schedules with a swap-out and a swap-in computed by hand,
recompute unchanged, the fallback to recomputation when the CPU swap space is full, block
conservation (GPU and CPU) at every iteration, the compiled engine equal to the reference bit
for bit, and bad options named."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_intelligent_engines import _Probe as _EngineProbe

from lbtheory.errors import ParameterError
from lbtheory.intelligent import ClusterConfig, IterationTimeModel, simulate
from lbtheory.intelligent._engine import ClusterSim
from lbtheory.intelligent._setups import vllm_cluster
from lbtheory.intelligent._simulate import make_sim, result_of, run_router
from lbtheory.intelligent._swap import swap_options, swap_seconds
from lbtheory.registry import make_router
from lbtheory.routers import Assignment
from lbtheory.workloads import workload_from_arrays

ENGINES = ["compiled", "reference"]
# base 10 ms, 1 ms per prefill token, 2 ms per decoding request, 0.1 ms per context token.
SIMPLE = IterationTimeModel(base_s=0.01, prefill_s_per_token=0.001, attention_s_per_token2=0.0,
                            decode_s_per_seq=0.002, context_s_per_token=0.0001)
FIELDS = ("dispatch_s", "admit_s", "first_token_s", "finish_s", "tbt_mean_s", "tbt_max_s",
          "tbt_var_s2", "generated_tokens", "preempted", "recomputed_tokens", "swaps",
          "instance", "peak_kv_tokens", "iterations")


def _tiny(**kw) -> ClusterConfig:
    # 3 blocks of 4 tokens, no watermark, vLLM's prompts-first scheduler; a swap moves a block
    # in 5 ms
    base = dict(n_instances=1, kv_budget_tokens=12, max_batch=8, max_prefill_tokens=1000,
                epoch_s=0.02, timing=SIMPLE, block_tokens=4, prefill_priority=True,
                preemption="swap", swap_blocks=10, swap_block_s=0.005)
    return ClusterConfig(**(base | kw))


def _run(wl, cfg, engine, router="rr", seed=0):
    sim = make_sim(wl, cfg, engine=engine, record=True)
    run_router(sim, make_router(router, "instances"), seed=seed)
    return sim, result_of(sim, router)


#: A (prompt 4, output 5) and B (prompt 3, output 4), both at 0 on one instance
PAIR = workload_from_arrays([0.0, 0.0], [4, 3], [5, 4])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_swap_out_and_its_swap_in_by_hand(engine):
    # 1. prefill-only [4, 3]: blocks ceil(5/4) + ceil(4/4) = 3 <= 3; 10 + 7 ms -> 17.0 ms
    # 2. decodes need ceil(6/4) + ceil(5/4) = 4 > 3: B (admitted last) is swapped out, its
    #    ceil(4/4) = 1 block to the CPU (1 of 10); A decodes alone, ctx 5: 10 + 2 + 0.5 ms,
    #    plus 1 block x 5 ms moved = 17.5 ms -> 34.5 ms
    # 3-5. B (4 tokens of KV, ceil(5/4) = 2 blocks with its next token) does not fit beside
    #    A's ceil(7/4), ceil(8/4), ceil(9/4) = 2, 2, 3 blocks: A decodes, ctx 6, 7, 8:
    #    12.6, 12.7, 12.8 ms -> 47.1, 59.8, 72.6 ms; A has its 5 tokens and leaves
    # 6. B swapped in (1 block back, 5 ms) and decodes, ctx 4: 12.4 + 5 = 17.4 ms -> 90.0 ms,
    #    its second token: it kept its KV, nothing is prefilled again
    # 7-8. B decodes, ctx 5, 6: 12.5, 12.6 ms -> 102.5, 115.1 ms
    sim, r = _run(PAIR, _tiny(), engine)
    log = sim.iterations_log
    ends = [0.017, 0.0345, 0.0471, 0.0598, 0.0726, 0.0900, 0.1025, 0.1151]
    np.testing.assert_allclose([e for _, _, e, _ in log], ends, atol=1e-12)
    np.testing.assert_allclose([s for _, s, _, _ in log], [0.0] + ends[:-1], atol=1e-12)
    assert [ids for *_, ids in log] == [(0, 1), (0,), (0,), (0,), (0,), (1,), (1,), (1,)]
    assert r.preempted.tolist() == [0, 1]
    assert r.swaps.tolist() == [0, 1]
    assert r.recomputed_tokens.tolist() == [0, 0]
    assert r.generated_tokens.tolist() == [5, 4]
    np.testing.assert_allclose(r.first_token_s, [0.017, 0.017], atol=1e-12)
    np.testing.assert_allclose(r.finish_s, [0.0726, 0.1151], atol=1e-12)
    # A's gaps: 17.5 (the swap-out), 12.6, 12.7, 12.8 ms; B's: 73.0, 12.5, 12.6 ms
    np.testing.assert_allclose(r.tbt_max_s, [0.0175, 0.073], atol=1e-12)
    assert r.iterations.tolist() == [8]
    assert r.peak_kv_tokens.tolist() == [12]


#: A (prompt 2, output 7) and B (prompt 4, output 2), both at 0 on one instance
CHUNK_PAIR = workload_from_arrays([0.0, 0.0], [2, 4], [7, 2])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_partial_prefill_swapped_out_and_in_under_chunked_prefill_by_hand(engine):
    # 3 blocks of 4 tokens, no watermark, chunked prefill of 3 tokens per iteration; attention
    # 0, so a chunk of c tokens costs c ms; a swap moves a block in 5 ms
    # 1. A admitted (2 tokens, blk(3) = 1), B admitted (blk(5) = 2: 1 + 2 <= 3) with the one
    #    token left: 10 + 3 ms -> 13.0 ms; A's first token (KV 3), B 1 of 4 computed
    # 2. blocks blk(4) + blk(5) = 1 + 2 = 3: A decodes (1 token), B a chunk of 3 - 1 = 2;
    #    context = A's 3: 10 + 2 + 2 + 0.3 = 14.3 ms -> 27.3 ms; A KV 4, B 3 of 4 computed
    # 3. blk(5) + blk(5) = 4 > 3: B (admitted last), mid-prefill, swaps out: [R] all its
    #    blk(4) = 1 block (vLLM swaps the whole block table), it keeps its 3 computed tokens;
    #    A decodes alone, ctx 4: 10 + 2 + 0.4 + 5 = 17.4 ms -> 44.7 ms
    # 4-7. B needs blk(5) = 2 blocks beside A's blk(6), blk(7), blk(8), blk(9) = 2, 2, 2, 3:
    #    it stays out; A decodes, ctx 5..8: 12.5, 12.6, 12.7, 12.8 ms -> 57.2, 69.8, 82.5,
    #    95.3 ms; A has its 7 tokens and leaves
    # 8. B swapped in (1 block, 5 ms) and goes on with its last prefill token at offset 3:
    #    10 + 1 + 5 = 16 ms (no decode, no decode context) -> 111.3 ms, its first token
    # 9. B decodes, ctx 5: 12.5 ms -> 123.8 ms, its second and last token
    cfg = _tiny(chunked_prefill=True, prefill_priority=False, max_prefill_tokens=3)
    sim, r = _run(CHUNK_PAIR, cfg, engine)
    log = sim.iterations_log
    ends = [0.013, 0.0273, 0.0447, 0.0572, 0.0698, 0.0825, 0.0953, 0.1113, 0.1238]
    np.testing.assert_allclose([e for _, _, e, _ in log], ends, atol=1e-12)
    np.testing.assert_allclose([s for _, s, _, _ in log], [0.0] + ends[:-1], atol=1e-12)
    assert [ids for *_, ids in log] == [(0, 1)] * 2 + [(0,)] * 5 + [(1,)] * 2
    assert r.preempted.tolist() == [0, 1] and r.swaps.tolist() == [0, 1]
    assert r.recomputed_tokens.tolist() == [0, 0]  # B's 3 computed tokens came back
    assert r.generated_tokens.tolist() == [7, 2]
    np.testing.assert_allclose(r.first_token_s, [0.013, 0.1113], atol=1e-12)
    np.testing.assert_allclose(r.finish_s, [0.0953, 0.1238], atol=1e-12)
    assert r.iterations.tolist() == [9] and r.peak_kv_tokens.tolist() == [12]
    # recomputation instead discards B's 3 computed tokens: its prefill starts over
    _, rec = _run(CHUNK_PAIR, dataclasses.replace(cfg, preemption="recompute"), engine)
    assert rec.recomputed_tokens.tolist() == [0, 3] and rec.swaps.tolist() == [0, 0]
    assert rec.generated_tokens.tolist() == [7, 2]


def test_the_swap_time_has_one_definition():
    assert swap_seconds(3, 0.25) == swap_seconds.py_func(3, 0.25) == 0.75
    # [R] vLLM's 4 GiB of swap space; Llama-2-7B 0.5 MiB/token over PCIe 3 (12 GB/s), Llama-3.1-8B
    # 128 KiB/token over PCIe 4 (25 GB/s); 16-token blocks
    v100 = vllm_cluster("v100", 2, preemption="swap")
    a100 = vllm_cluster("a100", 2, preemption="swap")
    assert (v100.swap_blocks, v100.swap_block_s) == (512, 16 * 2**19 / 12e9)
    assert (a100.swap_blocks, a100.swap_block_s) == (2048, 16 * 2**17 / 25e9)
    assert swap_options(2**19, 12e9) == {"swap_blocks": 512, "swap_block_s": 16 * 2**19 / 12e9}
    # the default stays recompute, the config unchanged
    assert vllm_cluster("v100", 2) == vllm_cluster("v100", 2, preemption="recompute")
    assert vllm_cluster("v100", 2).preemption == "recompute"
    assert vllm_cluster("v100", 2).swap_blocks == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_recompute_is_unchanged(engine):
    # test_intelligent_vllm's schedule by hand: B preempted by recomputation, 4 tokens again
    for cfg in (_tiny(preemption="recompute"), _tiny(preemption="recompute", swap_blocks=0),
                dataclasses.replace(_tiny(), preemption="recompute")):
        _, r = _run(PAIR, cfg, engine)
        np.testing.assert_allclose(r.finish_s, [0.0676, 0.1067], atol=1e-12)
        assert r.recomputed_tokens.tolist() == [0, 4] and r.swaps.tolist() == [0, 0]
    # explicit recompute (with or without swap parameters) = the default config, bit for bit
    wl = _random(11, 200)
    base = dict(n_instances=2, kv_budget_tokens=2048, max_batch=24, block_tokens=16,
                watermark=0.01, prefill_priority=True)
    ref = simulate(wl, make_router("jsq", "instances"), ClusterConfig(**base), engine=engine)
    assert ref.preempted.sum() > 10
    for extra in (dict(preemption="recompute"),
                  dict(preemption="recompute", swap_blocks=100, swap_block_s=1.0)):
        out = simulate(wl, make_router("jsq", "instances"), ClusterConfig(**base, **extra),
                       engine=engine)
        _assert_same(ref, out)
    # the same with chunked prefill (a 256-token budget, heavy preemption)
    base = dict(n_instances=2, kv_budget_tokens=2048, max_batch=24, block_tokens=16,
                watermark=0.01, chunked_prefill=True, max_prefill_tokens=256)
    ref = simulate(wl, make_router("rr", "instances"), ClusterConfig(**base), engine=engine)
    assert ref.preempted.sum() > 10 and ref.recomputed_tokens.sum() > 0
    for extra in (dict(preemption="recompute"),
                  dict(preemption="recompute", swap_blocks=100, swap_block_s=1.0)):
        out = simulate(wl, make_router("rr", "instances"), ClusterConfig(**base, **extra),
                       engine=engine)
        _assert_same(ref, out)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_full_swap_space_falls_back_to_recomputation(engine):
    # no CPU block free: B is recomputed, the schedule is recompute's (finish 67.6, 106.7 ms)
    _, r = _run(PAIR, _tiny(swap_blocks=0), engine)
    np.testing.assert_allclose(r.finish_s, [0.0676, 0.1067], atol=1e-12)
    assert r.preempted.tolist() == [0, 1]
    assert r.recomputed_tokens.tolist() == [0, 4] and r.swaps.tolist() == [0, 0]
    # a swap space of 40 blocks under heavy preemption: some swap, some are recomputed
    wl = _random(5, 250)
    cfg = ClusterConfig(n_instances=2, kv_budget_tokens=2048, max_batch=24, block_tokens=16,
                        watermark=0.01, prefill_priority=True, preemption="swap",
                        swap_blocks=40, swap_block_s=1e-3)
    r = simulate(wl, make_router("rr", "instances"), cfg, engine=engine)
    assert r.completed == len(wl) and r.swaps.sum() > 20
    assert r.recomputed_tokens.sum() > 0
    assert np.all(r.swaps <= r.preempted)
    recomputes = r.preempted - r.swaps
    assert np.all((r.recomputed_tokens > 0) == (recomputes > 0))


def _random(seed: int, n: int = 250):
    rng = np.random.default_rng(seed)
    arr = np.sort(rng.uniform(0, 5.0, n))
    return workload_from_arrays(arr, rng.integers(1, 500, n), rng.integers(1, 300, n))


def _assert_same(a, b) -> None:
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), f


class _Audited(ClusterSim):
    """The reference engine checking, whenever an iteration starts, that the GPU blocks held
    plus the free ones are the total (and every next token has its block), that the CPU
    blocks held are the swapped requests' KV within the swap space, and that every request on
    an instance is in exactly one of its queues; it counts the prefill tokens and the blocks
    moved."""

    prefilled = 0
    checked = 0
    moved = 0
    partial_out = 0  # iterations with a partial prefill swapped out (chunked prefill)

    def _begin(self, m, t, need, sum_q, sum_q2, n_decode, context):
        cfg, ins, p, gen, left = self.cfg, self.inst[m], self.p, self.gen, self.left
        blk = cfg.blocks
        if ins.prefill_only:
            assert not ins.swapped  # no prompt while a request is swapped out
            held = sum(blk(p[v] + gen[v]) for v in ins.running)
            held += sum(blk(p[v] + gen[v] + 1) for v in ins.admitted)
            assert held <= cfg.total_blocks - cfg.watermark_blocks
        else:
            held = sum(blk(p[v] + gen[v] + 1) for v in ins.running + ins.admitted)
            assert held <= cfg.total_blocks
        free = cfg.total_blocks - held
        assert held == need and free >= 0 and held + free == cfg.total_blocks
        cpu = sum(blk(p[v] + gen[v]) for v in ins.swapped)
        assert ins.cpu_used == cpu and 0 <= cfg.swap_blocks - cpu <= cfg.swap_blocks
        # the running requests' KV: all of it, but for partial prefills (``left`` to compute)
        assert ins.kv_used == sum(p[v] + gen[v] - left[v] for v in ins.running)
        self.partial_out += any(left[v] > 0 for v in ins.swapped)
        on = [*ins.running, *ins.admitted, *ins.waiting, *ins.swapped]
        assert len(on) == len(set(on)) == ins.n_on
        self.prefilled += int(sum_q)
        self.moved += ins.moved
        self.checked += 1
        super()._begin(m, t, need, sum_q, sum_q2, n_decode, context)


SWAP_CASES = {  # heavy preemption: a KV budget of 128 blocks, 2 or 3 instances
    "plenty": dict(n_instances=2, swap_blocks=10_000, watermark=0.01, max_batch=24),
    "tight": dict(n_instances=3, swap_blocks=60, watermark=0.0, max_batch=16),
}


#: vLLM's schedulers: the default one (prompts first) and the chunked one (128 tokens per
#: iteration: prefills span iterations, so partial prefills get preempted too); with it a tight
#: swap space is 30 blocks (it swaps out fewer blocks at a time)
SCHEDULERS = {"default": dict(prefill_priority=True),
              "chunked": dict(chunked_prefill=True, max_prefill_tokens=128)}


@pytest.mark.parametrize("scheduler", list(SCHEDULERS))
@pytest.mark.parametrize("case", list(SWAP_CASES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_blocks_are_conserved_and_the_engines_agree_bit_for_bit(scheduler, case, seed):
    wl = _random(seed, 240)
    space = SWAP_CASES[case] | ({"swap_blocks": 30} if (scheduler, case) == ("chunked", "tight")
                                else {})
    cfg = ClusterConfig(kv_budget_tokens=2048, block_tokens=16, preemption="swap",
                        swap_block_s=7e-4, **SCHEDULERS[scheduler], **space)
    router = ["rr", "jsq", "heuristic"][seed - 1]
    audited = _Audited(wl, cfg, record=True)
    run_router(audited, make_router(router, "instances"), seed=seed)
    ref = result_of(audited, router)
    comp_sim, comp = _run(wl, cfg, "compiled", router, seed)
    _assert_same(ref, comp)
    assert audited.iterations_log == comp_sim.iterations_log
    assert ref.completed == len(wl) and audited.checked > 300
    assert ref.swaps.sum() > 20  # the budget binds
    assert np.array_equal(ref.generated_tokens, wl.output_tokens)
    # a swapped request keeps its KV: every prefill token is a prompt token or one a
    # recomputation discarded, and every block swapped out came back in
    assert audited.prefilled == int(wl.prompt_tokens.sum() + ref.recomputed_tokens.sum())
    assert all(i.cpu_used == 0 and not i.swapped for i in audited.inst)
    assert audited.moved % 2 == 0
    if case == "plenty":
        assert ref.recomputed_tokens.sum() == 0
    if scheduler == "chunked":  # [R] partial prefills swap out too, keeping their chunks
        assert audited.partial_out > 0
        # 30 CPU blocks bind: some preemptions fall back to recomputation
        assert (ref.recomputed_tokens.sum() > 0) == (case == "tight")
    # swapping keeps the work: fewer prefill tokens than recomputation on the same workload
    rec = simulate(wl, make_router(router, "instances"),
                   dataclasses.replace(cfg, preemption="recompute"), seed=seed)
    assert rec.recomputed_tokens.sum() > ref.recomputed_tokens.sum()


class _Probe(_EngineProbe):
    """The engine tests' recording router, routing batches of two to the least loaded."""

    def route(self, state, view, rng):
        self.views.append(view)
        if view.queue_length >= 2:
            lo = int(np.argmin(view.n_running + view.n_waiting))
            return Assignment(np.array([1, 0]), np.array([lo, lo])), state
        return int(rng.integers(view.config.n_instances)), state


def test_a_python_router_sees_the_same_views_with_swapped_requests():
    wl = _random(7, 200)
    cfg = ClusterConfig(n_instances=2, kv_budget_tokens=1600, max_batch=16, block_tokens=16,
                        prefill_priority=True, preemption="swap", swap_blocks=50,
                        swap_block_s=1e-3)
    probes, results = [], []
    for engine in ENGINES:
        probes.append(_Probe())
        results.append(simulate(wl, probes[-1], cfg, seed=2, engine=engine))
    _assert_same(*results)
    assert results[0].swaps.sum() > 10
    a_views, b_views = probes[0].views, probes[1].views
    assert len(a_views) == len(b_views) > 100
    for a, b in zip(a_views, b_views):
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if f.name == "instance_requests":
                assert all(np.array_equal(u, w) for u, w in zip(x, y))
                assert sum(map(len, x)) == int(np.sum(a.n_running + a.n_waiting))
            elif isinstance(x, np.ndarray):
                assert x.dtype == y.dtype and np.array_equal(x, y), f.name
            else:
                assert x == y, f.name


def test_bad_swap_options_are_named():
    with pytest.raises(ParameterError, match=r"preemption must be 'recompute' or 'swap', got "
                                             r"'evict'"):
        ClusterConfig(preemption="evict")
    with pytest.raises(ParameterError, match="preemption"):
        vllm_cluster("v100", 2, preemption="evict")
    with pytest.raises(ParameterError, match="swap_blocks"):
        _tiny(swap_blocks=-1)
    with pytest.raises(ParameterError, match="swap_blocks"):
        _tiny(swap_blocks=2.5)
    with pytest.raises(ParameterError, match="swap_block_s"):
        _tiny(swap_block_s=-1e-3)
    with pytest.raises(ParameterError, match="swap_block_s"):
        _tiny(swap_block_s=float("nan"))
    # swap follows vLLM's schedulers: prompts first or chunked prefill, not the legacy mix
    with pytest.raises(ParameterError, match="prefill_priority"):
        _tiny(prefill_priority=False)
    with pytest.raises(ParameterError, match="chunked_prefill"):
        _tiny(prefill_priority=False, chunked_prefill=False)
    # with chunked prefill it is valid
    assert _tiny(prefill_priority=False, chunked_prefill=True).swap
    cfg = vllm_cluster("a100", 4, 1024, preemption="swap")
    assert cfg.chunked_prefill and cfg.swap and cfg.max_prefill_tokens == 1024
    assert (cfg.swap_blocks, cfg.swap_block_s) == (2048, 16 * 2**17 / 25e9)


def test_the_cli_runs_swap_preemption_and_names_what_cannot(capsys):
    import json

    from lbtheory.cli import main

    def run(*extra):
        rc = main(["intelligent", "evaluate", "--setup", "k4", "--policy", "rr", "--json",
                   *extra])
        out = capsys.readouterr()
        return rc, out.out, out.err

    rc, out, err = run("--preemption", "swap")
    assert rc == 0, err
    swap = json.loads(out)["routers"]["rr"]
    rc, out, err = run()
    assert rc == 0, err
    recompute = json.loads(out)["routers"]["rr"]
    assert "swaps_per_request" not in recompute  # the default's keys are unchanged
    # Knowl 4 under round robin preempts about once per request; with 512 CPU blocks nearly
    # every preemption is a swap (a swap is a preemption: never more swaps than preemptions)
    assert 0.5 < swap["swaps_per_request"] <= swap["preemptions_per_request"]
    assert swap["latency"]["mean"] != recompute["latency"]["mean"]
    rc, _, err = run("--preemption", "swap", "--instance-model", "legacy")
    assert rc == 2 and "--preemption swap needs the vLLM instance model" in err
    # Knowl 5 with chunked prefill swaps too
    rc = main(["intelligent", "evaluate", "--setup", "k5-chunked", "--preemption", "swap",
               "--requests", "300", "--policy", "rr", "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    chunked = json.loads(out.out)["routers"]["rr"]
    assert chunked["completed"] == chunked["requests"] == 300
    assert 0.0 <= chunked["swaps_per_request"] <= chunked["preemptions_per_request"]
    rc = main(["intelligent", "evaluate", "--setup", "k5-chunked", "--preemption", "swap",
               "--requests", "50", "--policy", "rr", "--instance-model", "legacy"])
    assert rc == 2 and "--preemption swap needs the vLLM instance model" in \
        capsys.readouterr().err
