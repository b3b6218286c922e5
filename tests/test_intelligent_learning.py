"""The Intelligent Router's RL parts against oracles outside them: the return of an episode is
its total latency (the drain charged, the discount per elapsed time), the guidance term's
scale next to the step reward, the symmetric Q-network's exact equivariance, and a Double-DQN
that finds the brute-force optimum of a small routing problem."""

from __future__ import annotations

import dataclasses
import itertools

import equinox as eqx
import jax
import numpy as np
import pytest
from test_intelligent_rl import SIMPLE  # the small timing model, defined once

from lbtheory.errors import FitStatus
from lbtheory.intelligent import (
    BucketSpec,
    ClusterConfig,
    DQNConfig,
    EnvConfig,
    RoutingEnv,
    calibrate_env,
    load_sign,
    make_q_network,
    observation_layout,
    observation_size,
    q_values,
    simulate,
    train_dqn,
)
from lbtheory.intelligent._qnet import greedy_action, split_net
from lbtheory.workloads import five_task_workload, workload_from_arrays


@dataclasses.dataclass(frozen=True)
class _Sequence:
    """Route the k-th request to ``seq[k]`` (a fixed policy on the router contract)."""

    seq: tuple
    name: str = "sequence"

    def init(self, seed=0):
        return 0

    def observe(self, state, view):
        return state

    def route(self, state, view, rng):
        return self.seq[state], state + 1


def _episode(wl, cfg, seq, **env_kw):
    """Play ``seq`` in the environment: (rewards, discounts, records) — as given: no
    bounded-loads cap (it would replace the routings that pile up on one instance)."""
    ec = EnvConfig(reward_scale=1.0, completion_reward=0.0, wait_only_when_full=False,
                   max_wait_s=0.0, balance_factor=None, **env_kw)
    env = RoutingEnv(lambda s: wl, cfg, ec)
    env.reset(seed=0)
    rewards, discounts, done, k = [], [], False, 0
    while not done:
        _, r, done, _, info = env.step(seq[k])
        k += 1
        rewards.append(r)
        discounts.append(info["discount"])
    return np.array(rewards), np.array(discounts), env.sim.records()


WL = workload_from_arrays([0.0, 0.0, 0.03, 0.05, 0.05, 0.31], [60, 20, 300, 60, 40, 80],
                          [40, 5, 3, 60, 2, 30])
CFG = ClusterConfig(n_instances=2, kv_budget_tokens=400, max_batch=4, timing=SIMPLE)


def test_return_is_minus_the_total_latency_with_the_drain_charged():
    # every routing of the six requests (2^6 episodes): the undiscounted return is exactly
    # −Σ latency (the simulator's records), so it is monotone in the total latency
    totals, returns = [], []
    for seq in itertools.product((0, 1), repeat=len(WL)):
        rewards, _, rec = _episode(WL, CFG, seq)
        lat = float(np.sum(rec["finish_s"] - rec["arrival_s"]))
        assert rewards.sum() == pytest.approx(-lat, rel=1e-12, abs=1e-12)
        totals.append(lat)
        returns.append(rewards.sum())
        # the drain after the last decision is most of the latency here: charged in full
        assert -rewards[-1] > 0.5 * lat
    order = np.argsort(totals)
    assert np.all(np.diff(np.array(returns)[order]) <= 1e-12)
    assert max(totals) > 1.5 * min(totals)  # the routings differ: the ordering is not trivial


def test_discounted_return_is_the_discounted_latency_integral():
    # semi-MDP: G_0 = Σ_t (Π_{k<t} γ_k) r_t with γ_k = e^{−Δt_k/H} must equal
    # −Σ_j ∫_{a_j}^{f_j} e^{−(t − t_0)/H} dt + r_w Σ_j e^{−(f_j − t_0)/H}, from the records
    h = 0.2
    for seq in [(0, 1, 0, 1, 0, 1), (0, 0, 0, 0, 0, 0), (1, 0, 0, 1, 1, 0)]:
        rewards, discounts, rec = _episode(WL, CFG, seq, horizon_s=h)
        g = np.sum(rewards * np.concatenate([[1.0], np.cumprod(discounts[:-1])]))
        a, f = rec["arrival_s"], rec["finish_s"]
        want = -np.sum(h * (np.exp(-(a - a[0]) / h) - np.exp(-(f - a[0]) / h)))
        assert g == pytest.approx(want, rel=1e-10)
    ec = EnvConfig(reward_scale=1.0, completion_reward=2.0, wait_only_when_full=False,
                   max_wait_s=0.0, horizon_s=h)
    env = RoutingEnv(lambda s: WL, CFG, ec)
    env.reset(seed=0)
    g, disc, done, k = 0.0, 1.0, False, 0
    while not done:
        _, r, done, _, info = env.step(k % 2)
        g += disc * r
        disc *= info["discount"]
        k += 1
    rec = env.sim.records()
    a, f = rec["arrival_s"], rec["finish_s"]
    want = (-np.sum(h * (np.exp(-(a - a[0]) / h) - np.exp(-(f - a[0]) / h)))
            + 2.0 * np.sum(np.exp(-(f - a[0]) / h)))
    assert g == pytest.approx(want, rel=1e-10)


def test_guidance_term_is_on_the_scale_of_the_step_reward():
    # calibrated (s_h = ρ/σ_h): under round robin, the mean |guidance term| per routing decision
    # is within a factor 5 of the mean progress cost per decision (w_k = γ = 0.99, static);
    # raw h (s_h = 1) is below 1e-3 of it — the term did nothing
    cfg = ClusterConfig(n_instances=4)
    wl = five_task_workload(400, seed=11, rate_rps=25.0)
    ec, cal = calibrate_env(wl, cfg, EnvConfig(guidance="static"))
    assert cal.status is FitStatus.GOOD  # every scale measured (none fell back)
    assert ec.horizon_s == pytest.approx(float(np.nanmean(simulate(
        wl, _Sequence(tuple(i % 4 for i in range(len(wl)))), cfg).e2e_s)))

    def ratio(config):
        env = RoutingEnv(lambda s: wl, cfg, config)
        env.reset(seed=0)
        guide, cost, done = [], [], False
        while not done:
            _, _, done, _, info = env.step(env.steps % 4)
            guide.append(abs(config.gamma * (config.guidance_scale or 1.0) * info["h"]))
            cost.append(info["progress"])
        return np.mean(guide) / np.mean(cost)

    assert 0.2 <= ratio(ec) <= 5.0
    assert ratio(dataclasses.replace(ec, guidance_scale=1.0)) < 1e-3
    assert cal.h_std > 0 and ec.guidance_scale == pytest.approx(
        cal.progress_per_decision / cal.h_std)


@pytest.mark.parametrize("monotone", [False, True], ids=["symmetric", "monotone"])
@pytest.mark.parametrize("m", [2, 3, 4, 8])
def test_symmetric_q_network_is_exactly_equivariant(m, monotone):
    ec = EnvConfig()
    glob, inst = observation_layout(m, ec)
    d = observation_size(m, ec)
    # the layout covers every entry once
    assert sorted([*glob.tolist(), *inst.ravel().tolist()]) == list(range(d))
    net = make_q_network(d, m + 1, (32, 32), jax.random.PRNGKey(m), layout=(glob, inst),
                         load_sign=load_sign(ec) if monotone else None)
    if monotone:
        net = _perturbed(net, m)
    mlp = make_q_network(d, m + 1, (32, 32), jax.random.PRNGKey(m))
    rng = np.random.default_rng(m)
    batched = eqx.filter_jit(lambda n, x: jax.vmap(n)(x))
    mlp_exact = 0
    for _ in range(20):
        obs = rng.standard_normal(d).astype(np.float32)
        perm = rng.permutation(m)
        while m > 1 and np.array_equal(perm, np.arange(m)):
            perm = rng.permutation(m)
        moved = obs.copy()
        moved[inst.ravel()] = obs[inst[perm].ravel()]  # instance i now shows perm[i]'s state
        q, q2 = np.asarray(q_values(net, obs)), np.asarray(q_values(net, moved))
        assert np.array_equal(q2[:m], q[:m][perm]) and q2[m] == q[m]
        b, b2 = (np.asarray(batched(net, np.stack([x, -x]))) for x in (obs, moved))
        assert np.array_equal(b2[:, :m], b[:, :m][:, perm]) and np.array_equal(b2[:, m],
                                                                                 b[:, m])
        p, p2 = np.asarray(q_values(mlp, obs)), np.asarray(q_values(mlp, moved))
        mlp_exact += np.array_equal(p2[:m], p[:m][perm])
    assert mlp_exact == 0  # a plain MLP is not (the test can tell)


def _perturbed(net, seed: int):
    """``net`` with every array moved by N(0, 0.5²) noise (a state no initialisation is in)."""
    leaves, tree = jax.tree_util.tree_flatten(eqx.filter(net, eqx.is_array))
    keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
    noisy = [x + 0.5 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys, strict=True)]
    return eqx.combine(jax.tree_util.tree_unflatten(tree, noisy), net)


@pytest.mark.parametrize("m", [2, 4, 8])
def test_monotone_network_never_prefers_the_more_loaded_instance(m):
    """Instance i at least as loaded as j in every entry (more requests in each bucket, less
    capacity) never has the larger Q; strictly more ⇒ strictly smaller — for any parameters
    (random, perturbed) and any state. The symmetric network has no such guarantee (the test
    can tell)."""
    ec = EnvConfig()
    glob, inst = observation_layout(m, ec)
    d, sign = observation_size(m, ec), load_sign(ec)
    mono = _perturbed(make_q_network(d, m + 1, (32, 32), jax.random.PRNGKey(m),
                                     layout=(glob, inst), load_sign=sign), m)
    sym = _perturbed(make_q_network(d, m + 1, (32, 32), jax.random.PRNGKey(m),
                                    layout=(glob, inst)), m)
    rng = np.random.default_rng(m)
    sym_violations = 0
    for _ in range(200):
        obs = rng.uniform(0, 1, d).astype(np.float32)
        i, j = rng.choice(m, 2, replace=False)
        more = rng.uniform(0.01, 0.5, inst.shape[1]) * (rng.random(inst.shape[1]) < 0.5)
        more[rng.integers(inst.shape[1])] = 0.25           # at least one entry strictly more
        obs[inst[i]] = obs[inst[j]] + (sign * more).astype(np.float32)
        q = np.asarray(q_values(mono, obs))
        assert q[i] < q[j]
        qs = np.asarray(q_values(sym, obs))
        sym_violations += qs[i] > qs[j]
    assert sym_violations > 20


# -- learning a known optimum ------------------------------------------------------------------
# Two instances whose KV budget (120 tokens) holds one 60-token prompt at a time: each is a
# FCFS single server. Six requests arrive together: long (50 output tokens), short (5), short,
# long, short, short. The brute-force optimum over all 2^6 routings puts the long ones together
# on one instance (shortest-processing-time logic); round robin is 37% worse.
OPT_WL = workload_from_arrays(np.zeros(6), [60] * 6, [50, 5, 5, 50, 5, 5])
OPT_CFG = ClusterConfig(n_instances=2, kv_budget_tokens=120, max_batch=4, timing=SIMPLE)


def _total(seq) -> float:
    r = simulate(OPT_WL, _Sequence(tuple(seq)), OPT_CFG, engine="reference")
    return float(np.sum(r.e2e_s))


@pytest.mark.parametrize("network", ["monotone", "symmetric"])
@pytest.mark.parametrize("seed", [1, 2])
def test_double_dqn_learns_the_optimal_routing_of_a_small_problem(seed, network):
    """Both instance-symmetric networks find the optimum, although the monotone one must send
    the second long request to the instance already holding a long one (its load weights
    depend on the request: ``MonotoneQNetwork``)."""
    totals = {seq: _total(seq) for seq in itertools.product((0, 1), repeat=len(OPT_WL))}
    best, random_mean = min(totals.values()), float(np.mean(list(totals.values())))
    rr = totals[(0, 1, 0, 1, 0, 1)]
    assert rr > 1.3 * best and random_mean > rr
    # the return is the total latency (undiscounted: a long horizon); no waiting
    ec = EnvConfig(buckets=BucketSpec("equal", bucket_tokens=20, n_equal=4), max_wait_s=0.0,
                   horizon_s=1e3, completion_reward=0.0)
    res = train_dqn(lambda s: OPT_WL, OPT_CFG,
                    DQNConfig(router="rl", episodes=800, seed=seed, hidden=(32, 32),
                              learning_starts=64, batch_size=32, train_every=1, lr=1e-3,
                              target_every=50, network=network,
                              # the learner itself, not a choice among its 800 networks on
                              # this very workload (validation selection would see it)
                              selection="last",
                              # the monotone cost starts at full scale here: from 0.01, one of
                              # the two seeds ended at round robin's routing after 800 episodes
                              head_init_scale=1.0 if network == "monotone" else 0.01),
                    env_config=ec)
    env = RoutingEnv(lambda s: OPT_WL, OPT_CFG, res.env_config)
    obs, info = env.reset(seed=0)
    split, done = split_net(res.net), False
    while not done:
        obs, _, done, _, info = env.step(greedy_action(split, obs, info["action_mask"]))
    rec = env.sim.records()
    got = float(np.sum(rec["finish_s"] - rec["arrival_s"]))
    assert got < random_mean and got < rr
    assert got <= 1.02 * best  # within 2% of the optimum (the next-best routing is +17%)


def test_n_step_writer_sums_discounted_rewards_with_each_transitions_discount():
    from lbtheory.intelligent import ReplayBuffer
    from lbtheory.intelligent._dqn import NStepWriter

    rng = np.random.default_rng(0)
    r, g = rng.standard_normal(5), rng.uniform(0.5, 1.0, 5)
    s = np.arange(6, dtype=np.float32)[:, None] * np.ones((6, 2), np.float32)
    buf = ReplayBuffer(10, 2, 3)
    w = NStepWriter(buf, 3)
    for t in range(5):
        w.add(s[t], t % 3, r[t], s[t + 1], t == 4, np.ones(3, bool), g[t])
    w.flush(s[5], True, np.ones(3, bool))
    assert buf.size == 5
    for t in range(5):
        k = min(3, 5 - t)  # transitions the target spans (fewer at the end of the episode)
        want_r = sum(np.prod(g[t:t + j]) * r[t + j] for j in range(k))
        assert buf.R[t] == pytest.approx(want_r, rel=1e-6)
        assert buf.gamma[t] == pytest.approx(np.prod(g[t:t + k]), rel=1e-6)
        assert buf.S[t][0] == t and buf.S2[t][0] == t + k and buf.A[t] == t % 3
        assert buf.done[t] == float(t + k == 5)


def test_advantage_heads_start_small_and_equivariant():
    from lbtheory.intelligent import build_network

    ec = EnvConfig()
    d = observation_size(4, ec)
    plain = build_network(DQNConfig(head_init_scale=1.0), 4, ec, jax.random.PRNGKey(3))
    small = build_network(DQNConfig(), 4, ec, jax.random.PRNGKey(3))
    obs = np.random.default_rng(3).standard_normal(d).astype(np.float32)
    qp, qs = np.asarray(q_values(plain, obs)), np.asarray(q_values(small, obs))
    # the differences between instances × 0.01 (the shared head's last layer is linear and
    # its bias cancels): the initial preference among instances is 100× weaker
    np.testing.assert_allclose(qs[1:4] - qs[0], 0.01 * (qp[1:4] - qp[0]), rtol=1e-4,
                               atol=1e-7)
    assert np.ptp(qp[:4]) > 50 * np.ptp(qs[:4]) > 0
