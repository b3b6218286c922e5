"""Workload-impact estimator (THEORY §10) and heuristic routers on hand-computed states."""

from __future__ import annotations

import numpy as np
import pytest

from lbtheory.errors import ModelError
from lbtheory.intelligent import (
    ClusterConfig,
    ImpactParams,
    InstanceView,
    IterationTimeModel,
    MixingRouter,
    SizePartitionRouter,
    calibrate_impact,
    decode_reward,
    estimated_completion_s,
    guidance_penalty,
    mixing_reward,
    prompt_impact_s,
    prompt_reward,
)
from lbtheory.registry import make_router
from lbtheory.routers import Assignment

P = ImpactParams(grad1=1e-3, grad2=1e-4, epsilon_s=2.0, alpha=0.25)
P_LITERAL = ImpactParams(grad1=1e-3, grad2=1e-4, epsilon_s=2.0, alpha=0.25, reading="literal")
LOADS = np.array([0.0, 1000.0, 3000.0])


def test_impact_terms_by_hand():
    # p = 10, d = 20: T_p = 1e-3 (100 + L) = 0.1, 1.1, 3.1 s; ε = 2 -> r_p = 1, 1, 1 - 3.1/2.
    np.testing.assert_allclose(prompt_impact_s(10, LOADS, P), [0.1, 1.1, 3.1])
    np.testing.assert_allclose(prompt_reward(prompt_impact_s(10, LOADS, P), P), [1, 1, -0.55])
    # r_d = -1e-4 (L + 30)
    np.testing.assert_allclose(decode_reward(10, 20, LOADS, P), [-0.003, -0.103, -0.303])
    np.testing.assert_allclose(mixing_reward(10, 20, LOADS, P), [0.24775, 0.17275, -0.36475])
    assert guidance_penalty(2, 10, 20, LOADS, P) == pytest.approx(-0.6125)
    assert guidance_penalty(0, 10, 20, LOADS, P) == 0.0


def test_threshold_boundary_is_inclusive():
    # T_p exactly ε gives r_p = 1 (the "≤ ε" branch); both branches meet there (continuity).
    prm = ImpactParams(grad1=1.0, grad2=0.0, epsilon_s=5.0, alpha=0.5)
    assert float(prompt_reward(5.0, prm)) == 1.0
    assert float(prompt_reward(5.0 + 1e-9, prm)) == pytest.approx(0.0, abs=1e-9)


def test_calibration_recovers_a_model_of_the_formula_shape():
    # a_p = 0 and a_q = a_c = g: the prefill's extra time is exactly g (p² + C), so grad_1 = g.
    g = 3e-8
    tm = IterationTimeModel(base_s=0.01, prefill_s_per_token=0.0, attention_s_per_token2=g,
                            decode_s_per_seq=5e-4, context_s_per_token=g)
    prm = calibrate_impact(tm, reference_prompt_tokens=1000)
    assert prm.grad1 == pytest.approx(g, rel=1e-12)
    assert prm.grad2 == g
    assert prm.epsilon_s == pytest.approx(g * 1000**2, rel=1e-12)


def test_calibration_least_squares_slope_by_hand():
    # only a linear prefill slope 1 s/token; grid p = 1, 2 and C = 0: y = p, x = p²,
    # grad_1 = Σ p³ / Σ p⁴ = 9 / 17; ε = y(3) = 3 s.
    tm = IterationTimeModel(base_s=1.0, prefill_s_per_token=1.0, attention_s_per_token2=0.0,
                            decode_s_per_seq=0.0, context_s_per_token=0.0)
    prm = calibrate_impact(tm, reference_prompt_tokens=3, prompt_grid=[1, 2], context_grid=[0])
    assert prm.grad1 == pytest.approx(9 / 17, rel=1e-12)
    assert prm.epsilon_s == pytest.approx(3.0)


def test_impact_params_validated():
    with pytest.raises(ModelError, match="alpha"):
        ImpactParams(1.0, 1.0, 1.0, alpha=1.0)
    with pytest.raises(ModelError, match="epsilon_s"):
        ImpactParams(1.0, 1.0, 0.0)


TM = IterationTimeModel(base_s=0.01, prefill_s_per_token=0.001, attention_s_per_token2=0.0,
                        decode_s_per_seq=0.002, context_s_per_token=0.0)


def _view(*, n_running, n_waiting=None, kv_used=None, kv_committed=None, load=None, wait_tok=None,
          qp=(10,), qd=(5,), m=None, **cfg) -> InstanceView:
    n_running = np.asarray(n_running)
    m = len(n_running)
    z = np.zeros(m, dtype=int)
    conf = dict(n_instances=m, kv_budget_tokens=1000, max_batch=10, timing=TM)
    conf.update(cfg)
    return InstanceView(
        time_s=0.0, n_running=n_running,
        n_waiting=z if n_waiting is None else np.asarray(n_waiting),
        kv_used=z if kv_used is None else np.asarray(kv_used),
        kv_committed=z if kv_committed is None else np.asarray(kv_committed),
        load_tokens=z if load is None else np.asarray(load),
        waiting_prefill_tokens=z if wait_tok is None else np.asarray(wait_tok),
        queue_prompt=np.asarray(qp), queue_output_pred=np.asarray(qd),
        queue_wait_s=np.zeros(len(qp)), queue_length=len(qp), config=ClusterConfig(**conf))


RNG = np.random.default_rng(0)


def _router(name):
    return make_router(name, "instances")


def _route(name, view, state=None):
    r = make_router(name, "instances")
    s = r.init(0) if state is None else state
    return r.route(s, view, RNG)


def test_round_robin_cycles():
    view = _view(n_running=[0, 0, 0])
    r = make_router("rr", "instances")
    s = r.init(0)
    out = []
    for _ in range(4):
        d, s = r.route(s, view, RNG)
        out.append(d)
    assert out == [0, 1, 2, 0]  # the head of the queue to each instance in turn


def test_jsq_counts_running_and_waiting_lowest_index_on_ties():
    # requests on instances (3, 2, 2): a tie between 1 and 2 → the lowest index
    d, _ = _route("jsq", _view(n_running=[3, 1, 2], n_waiting=[0, 1, 0]))
    assert d == 1


def test_min_min_by_hand_picks_a_non_head_request():
    # instances: W = (0, 50) waiting prefill tokens, n = (4, 0) running; requests (10, 50), (20, 1)
    # ECT = 0.01 + 0.001 (W + p) + 0.002 n + d (0.01 + 0.002 (n + 1))
    view = _view(n_running=[4, 0], wait_tok=[0, 50], qp=(10, 20), qd=(50, 1))
    ect = estimated_completion_s(view, view.queue_prompt, view.queue_output_pred)
    np.testing.assert_allclose(ect, [[1.028, 0.67], [0.058, 0.092]], rtol=1e-12)
    d, _ = _route("minmin", view)
    assert isinstance(d, Assignment)
    assert d.positions.tolist() == [1] and d.targets.tolist() == [0]


def test_max_capacity_by_hand():
    # free = min(1 - (n + w + 1)/10, 1 - (K + p)/1000); p = 10
    # inst 0: min(0.7, 1 - 510/1000 = 0.49) = 0.49; inst 1: min(0.1, 0.99) = 0.1;
    # inst 2: min(0.6, 1 - 410/1000 = 0.59) = 0.59 -> instance 2
    view = _view(n_running=[2, 8, 3], n_waiting=[0, 1, 0], kv_committed=[500, 0, 400])
    d, _ = _route("maxcap", view)
    assert d == 2


def test_mixing_heuristic_by_hand():
    # literal reading (committed tokens L in both terms)
    # p = 10, d = 20, loads (3000, 500, 1000), grad1 = 1e-3, grad2 = 1e-4, ε = 2, α = 0.25:
    # T_p = 1e-3 (100 + L) = (3.1, 0.6, 1.1) → r_p = (1 − 3.1/2, 1, 1) = (−0.55, 1, 1);
    # r_d = −1e-4 (L + 30) = (−0.303, −0.053, −0.103);
    # r_mix = 0.25 r_p + 0.75 r_d = (−0.36475, 0.21025, 0.17275) → instance 1,
    # and the guidance penalty of the other choices: h = r_mix − 0.21025 = (−0.575, 0, −0.0375)
    view = _view(n_running=[0, 0, 0], load=[3000, 500, 1000], qp=(10,), qd=(20,))
    np.testing.assert_allclose(mixing_reward(10, 20, view.load_tokens, P),
                               [-0.36475, 0.21025, 0.17275], rtol=1e-12)
    r = MixingRouter(P_LITERAL)
    d, _ = r.route(r.init(0), view, RNG)
    assert d == 1
    h = [guidance_penalty(m, 10, 20, view.load_tokens, P) for m in range(3)]
    np.testing.assert_allclose(h, [-0.575, 0.0, -0.0375], rtol=1e-12, atol=1e-15)


def test_split_mixing_uses_the_requests_own_shape_and_differs_from_the_decode_balancer():
    # instance 0: no prefill backlog, 20,000 context tokens decoding (30,000 committed);
    # instance 1: 2,000 backlog tokens, nothing decoding (2,500 committed).
    # grad1 = 1e-7, g = 2e-4 s/token, grad2 = 1e-6, ε = 0.5 s, α = 0.5.
    prm = ImpactParams(grad1=1e-7, grad2=1e-6, epsilon_s=0.5, alpha=0.5, grad_backlog=2e-4)
    kw = dict(n_running=[5, 0], n_waiting=[0, 2], kv_used=[20_000, 0], load=[30_000, 2_500],
              wait_tok=[0, 2_000])
    short = _view(qp=(100,), qd=(50,), **kw)
    long = _view(qp=(2000,), qd=(50,), **kw)
    # short prompt: T_p = 0.001 + (0, 0.4) ≤ ε → r_p = 1 on both; r_d = −1e-6 (C + 150)
    # = (−0.02015, −0.00015) → instance 1 (the smaller decode context)
    np.testing.assert_allclose(mixing_reward(100, 50, [0, 2000], prm, [20_000, 0]),
                               [0.5 - 0.5 * 0.02015, 0.5 - 0.5 * 0.00015], rtol=1e-12)
    # long prompt: T_p = 0.4 + (0, 0.4) → r_p = (1, 1 − 0.8/0.5 = −0.6);
    # r_mix = (0.5 − 0.5 · 0.02205, −0.3 − 0.5 · 0.00205) → instance 0 (no backlog)
    np.testing.assert_allclose(mixing_reward(2000, 50, [0, 2000], prm, [20_000, 0]),
                               [0.5 - 0.5 * 0.02205, -0.3 - 0.5 * 0.00205], rtol=1e-12)
    r = MixingRouter(prm)
    assert [r.route(r.init(0), v, RNG)[0] for v in (short, long)] == [1, 0]
    # the decode balancer (least committed tokens) and the literal reading send both to 1
    assert [_route("jsq-tokens", v)[0] for v in (short, long)] == [1, 1]
    lit = MixingRouter(ImpactParams(grad1=1e-7, grad2=1e-6, epsilon_s=0.5, alpha=0.5,
                                    reading="literal"))
    assert [lit.route(lit.init(0), v, RNG)[0] for v in (short, long)] == [1, 1]


def test_split_mixing_routes_differently_from_the_decode_balancer_on_a_workload():
    # end to end on the five-task mix: the literal reading is least-loaded routing exactly
    # (same instance for every request); the calibrated split heuristic takes, at every one of
    # its 400 decisions, the argmax of r_mix recomputed here from the decision's view —
    # α r_p + (1 − α) r_d, r_p = 1 if T_p = grad1 p² + g · backlog ≤ ε else 1 − T_p / ε,
    # r_d = −grad2 (context + p + d) — and that argmax is not the decode balancer's pick
    # (least committed tokens) at some of them. (Issue 32: was "differs in > 10 % of requests".)
    from lbtheory.intelligent import ClusterConfig, simulate
    from lbtheory.workloads import five_task_workload

    wl, cfg = five_task_workload(400, seed=3, rate_rps=25.0), ClusterConfig(n_instances=4)
    jsq = simulate(wl, _router("jsq-tokens"), cfg).instance
    prm = calibrate_impact(cfg.timing)
    literal = simulate(wl, MixingRouter(calibrate_impact(cfg.timing, reading="literal")),
                       cfg).instance
    assert np.array_equal(literal, jsq)

    class Recording:  # the split heuristic, each decision checked against the hand formula
        name = "split-recording"

        def __init__(self) -> None:
            self.inner, self.decisions, self.off_balancer = MixingRouter(prm), 0, 0

        def init(self, seed: int = 0):
            return self.inner.init(seed)

        def observe(self, state, view):
            return self.inner.observe(state, view)

        def route(self, state, view, rng):
            choice, state = self.inner.route(state, view, rng)
            p, d = float(view.queue_prompt[0]), float(view.queue_output_pred[0])
            backlog = np.asarray(view.waiting_prefill_tokens, dtype=float)
            context = np.asarray(view.kv_used, dtype=float)
            t_p = prm.grad1 * (p * p) + prm.g_load * backlog
            r_p = np.where(t_p <= prm.epsilon_s, 1.0, 1.0 - t_p / prm.epsilon_s)
            r_d = -prm.grad2 * (context + p + d)
            want = int(np.argmax(prm.alpha * r_p + (1.0 - prm.alpha) * r_d))
            assert choice == want, self.decisions
            self.off_balancer += want != int(np.argmin(view.load_tokens))
            self.decisions += 1
            return choice, state

    rec = Recording()
    split = simulate(wl, rec, cfg).instance
    assert rec.decisions == 400 and 0 < rec.off_balancer < 400
    assert np.array_equal(split, simulate(wl, MixingRouter(prm), cfg).instance)  # as compiled
    assert not np.array_equal(split, jsq)


def test_size_partition_and_decode_balancer_by_hand():
    r = SizePartitionRouter(100)
    s = r.init(0)
    small = _view(n_running=[0, 0, 0, 0], qp=(10,), qd=(5,))
    large = _view(n_running=[0, 0, 0, 0], qp=(200,), qd=(5,))
    out = []
    for v in (small, large, small, large, large):
        d, s = r.route(s, v, RNG)
        out.append(d)
    assert out == [0, 2, 1, 3, 2]  # small: instances 0, 1 in turn; large: 2, 3 in turn
    # the decode balancer is the shared JSQ on token loads
    d, _ = _route("jsq-tokens", _view(n_running=[0, 0, 0], load=[500, 100, 300]))
    assert d == 1
