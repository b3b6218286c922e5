"""Double-DQN routers in JAX + optax + equinox: Baseline RL, Workload-Aware RL, Workload-Guided RL.

The Q-network (:mod:`._qnet`) is by default the monotone instance-symmetric network (one
shared head per instance whose value cannot grow with that instance's load, a wait head;
exactly equivariant under permuting the instances), or the symmetric one without the
monotonicity, or the seed's plain MLP. Training (van Hasselt et al. 2016): ε-greedy exploration
(linear decay), a replay buffer,
Huber loss on the Double-DQN target ``y = r + γ_t (1 − done) Q_target(s', argmax_a Q(s', a))``
(argmax and exploration over the env's valid actions) with the *transition's own* discount ``γ_t
= e^{−Δt/H}`` (a semi-MDP: routing within an epoch takes no time, a wait or the end of an epoch
the time that passed; :mod:`._env`), Adam, a hard target-network copy every ``target_every``
updates. ``n_step > 1`` uses n-step targets (:class:`NStepWriter`); one step is the default (an
n-step target spanning one horizon, n = λH ≈ 160, did not stop the development runs of Baseline
RL from overloading instances). Everything random is seeded: the network init by a
``jax.random`` key, exploration and replay sampling by a numpy Generator, the episode workloads
by ``seed + episode``. Same seed ⇒ identical parameters.

Derived from the workload before training [R] (nothing tuned on results): the reward's
horizon, scale and guidance scale (:func:`~lbtheory.intelligent.calibrate_env` on the first
training workload, ``seed``), and — unless given — the ε schedule: ε falls linearly from
``eps_start`` to ``eps_end`` over the first half of training (``eps_decay_fraction`` × episodes
× the decisions of one round-robin episode), instead of a fixed 5,000 steps (2–3 of 20
episodes of 2,000 requests); and the target network is copied once per episode's worth of
updates. Adam's rate is 3e-4 (1e-3 let development runs — training seeds, never the
evaluation seeds — swing between episodes and end on a greedy policy that overloaded one
instance).

**Which network is returned** [R] (``DQNConfig.selection``, not in the seed): by default the
one that served held-out validation episodes best. After every training episode the greedy
policy serves ``validation_episodes`` episodes (workload seeds ``seed + episodes``, … — never a
training episode) and the network with the lowest mean E2E there is kept (the later one on a
tie); the validation does not touch the training's random streams, so the trajectory is the
one ``selection="last"`` trains, and each episode's ``validation_e2e_s`` and
``validation_max_share`` are in the history. Why: a one-step DQN's greedy policy can drift
while ε sits at its floor; on Knowl 5 one training seed's greedy policy got *worse* on the
validation episodes after every episode (3.96 s → 4.05–4.23 s) while it built a lane for short
outputs holding 1.9× its fair share of requests, and the network after the last episode was
what the tables had evaluated (issue 22). Keeping the best validated network is what DQN
practice does (Mnih et al. 2015 report their best evaluated policies; Stable-Baselines3's
``EvalCallback`` keeps ``best_model``); ``selection="last"`` keeps the old behaviour.

Router kinds (THEORY §10): ``rl`` (no guidance), ``wa-rl`` (static mixing penalty),
``wg-rl`` (annealed guidance, ``reading`` ``"hurl"`` or ``"literal"`` for λ_k).
"""

from __future__ import annotations

import enum
import functools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._checks import check_int, check_option, check_real, check_seed
from ..errors import ParameterError, RunStatus
from ._calibrate import Calibration, calibrate_env
from ._engine import ClusterConfig, InstanceView
from ._env import (
    EnvConfig,
    Guidance,
    Reading,
    RoutingEnv,
    load_sign,
    observation,
    observation_layout,
    observation_size,
    routing_mask,
)
from ._qnet import combine, greedy_action, make_q_network, split_net
from ._simulate import InstanceResult, make_sim, result_of, run_router

__all__ = ["double_dqn_update", "double_dqn_step", "DQNConfig", "TrainResult", "train_dqn",
           "greedy_rollout", "GUIDANCE_OF", "RLKind", "Selection", "DQNRouter", "ReplayBuffer",
           "Network", "build_network", "NStepWriter"]


class RLKind(enum.StrEnum):
    """The RL routers of THEORY §10 (the names of ``lbtheory intelligent train --policy``)."""

    RL = "rl"        # Baseline RL: no guidance
    WA_RL = "wa-rl"  # Workload-Aware RL: static mixing penalty
    WG_RL = "wg-rl"  # Workload-Guided RL: annealed guidance


#: router kind -> guidance kind of :class:`EnvConfig`.
GUIDANCE_OF = {RLKind.RL: Guidance.NONE, RLKind.WA_RL: Guidance.STATIC,
               RLKind.WG_RL: Guidance.ANNEALED}


class Selection(enum.StrEnum):
    """Which of a training's networks :func:`train_dqn` returns."""

    VALIDATION = "validation"  # [R] the end-of-episode network best on held-out episodes
    LAST = "last"              # the network after the last episode


class Network(enum.StrEnum):
    """The Q-network's architecture (:mod:`._qnet`)."""

    MONOTONE = "monotone"    # [R] symmetric, value non-increasing in an instance's load (default)
    SYMMETRIC = "symmetric"  # [R] shared per-instance head + wait head
    MLP = "mlp"              # the seed's plain MLP, one output per action


@dataclass(frozen=True)
class DQNConfig:
    """Training options.

    Attributes:
        router: ``rl``, ``wa-rl`` or ``wg-rl``.
        reading: λ_k reading for ``wg-rl`` (``hurl`` or ``literal``).
        episodes: training episodes.
        seed: seed of everything random.
        hidden: hidden-layer widths.
        lr: Adam learning rate.
        batch_size, buffer_size: replay minibatch and capacity (transitions).
        learning_starts: transitions before the first update.
        train_every: environment steps per update.
        target_every: updates per target-network copy; ``None``: one copy per episode (the
            updates of one round-robin episode's decisions).
        eps_start, eps_end: ε-greedy schedule's ends (linear, in env steps).
        eps_decay_steps: env steps of the decay; ``None``: ``eps_decay_fraction`` of the
            training's decisions (module docstring).
        eps_decay_fraction: see ``eps_decay_steps``.
        gamma: the seed's γ, the scale of the guidance weight ``w_k = γ − γ̃_k`` (the value
            discount is per elapsed time: the environment's ``horizon_s``).
        beta_d: λ_k decay per episode.
        network: ``monotone`` (default), ``symmetric`` or ``mlp`` (:class:`Network`).
        n_step: transitions per target (n-step returns, each transition with its own
            discount); 1: one-step Double-DQN (module docstring).
        head_init_scale: the symmetric network's advantage heads start × this (bias 0) [R]
            (:mod:`._qnet`).
        selection: ``validation`` (default) [R]: after every episode the greedy policy serves
            ``validation_episodes`` held-out episodes (workload seeds from
            ``validation_seed``) and the network with the lowest mean E2E there is returned;
            ``last``: the network after the last episode (module docstring).
        validation_episodes: held-out episodes per validation.
        validation_seed: workload seed of the first validation episode; ``None``: ``seed +
            episodes`` (the next seed after the training episodes').
    """

    router: RLKind | str = RLKind.WG_RL
    reading: Reading | str = Reading.HURL
    episodes: int = 10
    seed: int = 0
    hidden: tuple[int, ...] = (128, 128)
    lr: float = 3e-4
    batch_size: int = 64
    buffer_size: int = 50_000
    learning_starts: int = 500
    train_every: int = 2
    target_every: int | None = None
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_decay_steps: int | None = None
    eps_decay_fraction: float = 0.5
    gamma: float = 0.99
    beta_d: float = 0.2
    network: Network | str = Network.MONOTONE
    n_step: int = 1
    head_init_scale: float = 0.01
    selection: Selection | str = Selection.VALIDATION
    validation_episodes: int = 2
    validation_seed: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "router", check_option(RLKind, self.router, "router"))
        object.__setattr__(self, "reading", check_option(Reading, self.reading, "reading"))
        object.__setattr__(self, "network", check_option(Network, self.network, "network"))
        object.__setattr__(self, "selection", check_option(Selection, self.selection,
                                                           "selection"))
        check_seed(self.seed)
        if self.validation_seed is not None:
            check_seed(self.validation_seed, "DQNConfig.validation_seed")
        for name in ("episodes", "batch_size", "buffer_size", "train_every",
                     "validation_episodes"):
            check_int(getattr(self, name), f"DQNConfig.{name}", low=1)
        check_int(self.n_step, "DQNConfig.n_step", low=1)
        for name in ("eps_decay_steps", "target_every"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), f"DQNConfig.{name}", low=1)
        check_int(self.learning_starts, "DQNConfig.learning_starts", low=0)
        check_real(self.lr, "DQNConfig.lr (learning rate)", low=0.0, low_open=True)
        for name in ("eps_start", "eps_end", "gamma"):
            check_real(getattr(self, name), f"DQNConfig.{name}", low=0.0, high=1.0)
        check_real(self.eps_decay_fraction, "DQNConfig.eps_decay_fraction", low=0.0,
                   high=1.0, low_open=True)
        check_real(self.beta_d, "DQNConfig.beta_d", low=0.0)
        check_real(self.head_init_scale, "DQNConfig.head_init_scale", low=0.0, low_open=True)
        if not self.hidden or any(isinstance(h, bool) or int(h) != h or h < 1
                                  for h in self.hidden):
            raise ParameterError(f"DQNConfig.hidden must be layer widths >= 1, got "
                                 f"{self.hidden!r}")

    def env_config(self, base: EnvConfig | None = None) -> EnvConfig:
        """The :class:`EnvConfig` this router trains on."""
        from dataclasses import replace

        return replace(base or EnvConfig(), guidance=GUIDANCE_OF[self.router],
                       reading=self.reading, gamma=self.gamma, beta_d=self.beta_d)


def build_network(config: DQNConfig, n_instances: int, env: EnvConfig, key: jax.Array) -> Any:
    """The Q-network of ``config`` for ``n_instances`` instances and ``env``'s observation."""
    layout = None if config.network is Network.MLP else observation_layout(n_instances, env)
    sign = load_sign(env) if config.network is Network.MONOTONE else None
    return make_q_network(observation_size(n_instances, env), n_instances + 1, config.hidden,
                          key, layout=layout, head_init_scale=config.head_init_scale,
                          load_sign=sign)


class NStepWriter:
    """Turns the environment's one-step transitions into n-step ones for a
    :class:`ReplayBuffer`: ``(s_t, a_t, Σ_{k<n} Γ_k r_{t+k}, s_{t+n}, done, mask_{t+n}, Γ_n)``
    with ``Γ_k`` the product of the first ``k`` transitions' own discounts (a semi-MDP);
    shorter at the end of an episode (:meth:`flush`). ``n = 1`` stores each transition as is."""

    def __init__(self, buffer: ReplayBuffer, n: int) -> None:
        self.buffer, self.n = buffer, int(n)
        self._q: deque = deque()

    def add(self, s: np.ndarray, a: int, r: float, s2: np.ndarray, done: bool,
            mask2: np.ndarray, gamma: float) -> None:
        """One environment transition; emits the n-step transition that starts ``n`` back."""
        self._q.append((s, a, r, gamma))
        if len(self._q) >= self.n:
            self._emit(s2, done, mask2)

    def flush(self, s2: np.ndarray, done: bool, mask2: np.ndarray) -> None:
        """At the end of an episode: emit the shorter transitions still pending."""
        while self._q:
            self._emit(s2, done, mask2)

    def _emit(self, s2: np.ndarray, done: bool, mask2: np.ndarray) -> None:
        s, a = self._q[0][0], self._q[0][1]
        ret, disc = 0.0, 1.0
        for _, _, r, g in self._q:
            ret += disc * r
            disc *= g
        self.buffer.add(s, a, ret, s2, done, mask2, disc)
        self._q.popleft()


class ReplayBuffer:
    """A ring buffer of transitions ``(s, a, r, s', done, mask', γ)`` (the training loop's
    memory; the one mutable object of training, owned by :func:`train_dqn`); ``γ`` is the
    transition's own value discount (semi-MDP)."""

    def __init__(self, capacity: int, obs_dim: int, n_actions: int) -> None:
        self.S = np.zeros((capacity, obs_dim), np.float32)
        self.S2 = np.zeros((capacity, obs_dim), np.float32)
        self.A = np.zeros(capacity, np.int32)
        self.R = np.zeros(capacity, np.float32)
        self.done = np.zeros(capacity, np.float32)
        self.gamma = np.ones(capacity, np.float32)
        self.mask2 = np.ones((capacity, n_actions), bool)
        self.capacity, self.size, self.ptr = capacity, 0, 0

    def add(self, s: np.ndarray, a: int, r: float, s2: np.ndarray, done: bool,
            mask2: np.ndarray, gamma: float = 1.0) -> None:
        """Store one transition (overwriting the oldest when full)."""
        k = self.ptr
        self.S[k], self.A[k], self.R[k], self.S2[k], self.done[k] = s, a, r, s2, float(done)
        self.mask2[k], self.gamma[k] = mask2, gamma
        self.ptr, self.size = (k + 1) % self.capacity, min(self.size + 1, self.capacity)

    def sample(self, rng: np.random.Generator, batch: int) -> tuple[np.ndarray, ...]:
        """A uniform minibatch ``(s, a, r, s', done, mask', γ)`` (with replacement)."""
        idx = rng.integers(self.size, size=batch)
        return (self.S[idx], self.A[idx], self.R[idx], self.S2[idx], self.done[idx],
                self.mask2[idx], self.gamma[idx])


@functools.lru_cache(maxsize=8)
def double_dqn_step(lr: float) -> tuple[Any, Callable[..., Any]]:
    """(optimizer, jitted Double-DQN step on a split network) for Adam with learning rate
    ``lr`` (cached): ``step(static, params, target_params, opt_state, s, a, r, s2, done, mask2,
    gamma) -> (params, opt_state, loss)`` is :func:`double_dqn_update` on the network's arrays
    (``split_net``), its structure a static argument of ``jax.jit`` — what :func:`train_dqn`
    calls, without equinox's per-call filtering (same arithmetic, same results)."""
    opt = optax.adam(lr)

    @functools.partial(jax.jit, static_argnums=0)
    def step(static, params, target_params, opt_state, s, a, r, s2, done, mask2, gamma):
        target = combine(target_params, static)

        def loss_fn(p):
            model = combine(p, static)
            q = jax.vmap(model)(s)
            qa = jnp.take_along_axis(q, a[:, None], axis=1)[:, 0]
            a2 = jnp.argmax(jnp.where(mask2, jax.vmap(model)(s2), -jnp.inf), axis=1)
            q2 = jnp.take_along_axis(jax.vmap(target)(s2), a2[:, None], axis=1)[:, 0]
            y = r + gamma * (1.0 - done) * jax.lax.stop_gradient(q2)
            return jnp.mean(optax.huber_loss(qa, y))

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return eqx.apply_updates(params, updates), opt_state, loss
    return opt, step


def double_dqn_update(lr: float) -> tuple[Any, Callable[..., Any]]:
    """(optimizer, Double-DQN update) for Adam with learning rate ``lr`` (the compiled step is
    cached, so repeated trainings reuse it).

    ``update(net, target, opt_state, s, a, r, s2, done, mask2, gamma) -> (net, opt_state, loss)``:
    one Adam step on the Huber loss of ``Q(s, a)`` against
    ``y = r + γ (1 − done) target(s2, argmax_{a' valid} Q(s2, a'))`` — the action chosen by the
    online network, valued by the target network (van Hasselt et al. 2016); ``gamma`` a number
    or one discount per transition; ``loss`` is the loss before the step."""
    opt, step = double_dqn_step(lr)

    def update(net, target, opt_state, s, a, r, s2, done, mask2, gamma):
        params, static = split_net(net)
        params, opt_state, loss = step(static, params, eqx.filter(target, eqx.is_array),
                                       opt_state, s, a, r, s2, done, mask2, gamma)
        return combine(params, static), opt_state, loss
    return opt, update


@dataclass
class TrainResult:
    """A trained Q-network, its configs (the environment's with its calibrated scales) and
    per-episode learning curve; ``calibration`` is what :func:`calibrate_env` measured.

    ``status`` (:class:`~lbtheory.errors.RunStatus`): ``completed``, or ``diverged`` when a loss
    or a parameter became non-finite (training stops at that episode; the network is unusable
    unless ``selection="validation"`` kept an earlier one). ``selected_episode``: the episode
    after which ``net`` was taken (:attr:`DQNConfig.selection`); ``last_net``: the network
    after the last episode (the same object as ``net`` when that one was kept; ``None`` for a
    loaded checkpoint, which stores only the kept one).
    """

    net: Any
    config: DQNConfig
    env_config: EnvConfig
    cluster: ClusterConfig
    history: list[dict[str, float]] = field(default_factory=list)
    status: RunStatus = RunStatus.COMPLETED
    calibration: Calibration | None = None
    selected_episode: int | None = None
    last_net: Any = None


def _eps_table(config: DQNConfig, decisions: int) -> np.ndarray:
    """ε per env step (optax's linear schedule, tabulated once: no JAX dispatch per step)."""
    n = config.eps_decay_steps
    if n is None:
        n = max(1, int(round(config.eps_decay_fraction * config.episodes * decisions)))
    return np.asarray(optax.linear_schedule(config.eps_start, config.eps_end, n)(
        np.arange(n + 1)), dtype=float)


def train_dqn(workload_fn: Callable[[int], Any], cluster: ClusterConfig, config: DQNConfig, *,
              env_config: EnvConfig | None = None,
              predict_fn: Callable[[Any], np.ndarray] | None = None,
              progress: Callable[[int, dict[str, float]], None] | None = None,
              engine: str = "auto",
              tick: Callable[[str, int, int], None] | None = None) -> TrainResult:
    """Train a Double-DQN router on ``RoutingEnv(workload_fn, cluster)``.

    Args:
        workload_fn: ``seed -> Workload``; episode ``k`` uses ``seed = config.seed + k``.
        cluster: the cluster.
        config: training options.
        env_config: base state/reward options (guidance set from ``config.router``); its unset
            scales are calibrated on ``workload_fn(config.seed)`` (:func:`calibrate_env`).
        predict_fn: ``Workload -> predicted output tokens`` the router sees (default: the true
            lengths); the calibration uses it too.
        progress: called after each episode with ``(k, stats)`` (a command's progress bar).
        engine: the environment's simulator (``"auto"``/``"compiled"`` or ``"reference"``;
            the same episodes and parameters either way).
        tick: called as work goes on within an episode, ``(phase, done, total)``: ``("step",
            decisions so far, 0)`` every 256 decisions of a training episode, ``("validation",
            j, n)`` after each held-out episode (a command's sign of life on long episodes).
    """
    ec, cal = calibrate_env(workload_fn(config.seed), cluster, config.env_config(env_config),
                            predict_fn, engine=engine)
    env = RoutingEnv(workload_fn, cluster, ec, predict_fn, engine=engine)
    m = cluster.n_instances
    obs_dim, n_act = observation_size(m, ec), m + 1
    params, static = split_net(build_network(config, m, ec, jax.random.PRNGKey(config.seed)))
    target = params
    opt, update = double_dqn_step(float(config.lr))
    opt_state = opt.init(params)
    rng = np.random.default_rng(config.seed)
    buf = ReplayBuffer(config.buffer_size, obs_dim, n_act)
    writer = NStepWriter(buf, config.n_step)
    eps_table = _eps_table(config, cal.decisions)
    target_every = config.target_every or max(1, cal.decisions // config.train_every)
    steps = n_updates = 0
    val_seeds = _validation_seeds(config)
    best: tuple[float, int, Any] = (np.inf, -1, params)
    history: list[dict[str, float]] = []
    status = RunStatus.COMPLETED
    for k in range(config.episodes):
        env.set_episode(k)
        obs, info = env.reset(seed=config.seed + k)
        mask = info["action_mask"]
        ret, losses, done, trunc, waits = 0.0, [], env._done, False, 0
        eps = float(eps_table[min(steps, eps_table.size - 1)])
        while not (done or trunc):
            eps = float(eps_table[min(steps, eps_table.size - 1)])
            if rng.random() < eps:
                a = int(rng.choice(np.flatnonzero(mask)))
            else:
                a = greedy_action((params, static), obs, mask)
            waits += a == m
            obs2, r, done, trunc, info = env.step(a)
            writer.add(obs, a, r, obs2, done, info["action_mask"], info["discount"])
            if done or trunc:
                writer.flush(obs2, done, info["action_mask"])
            mask = info["action_mask"]
            obs, ret, steps = obs2, ret + r, steps + 1
            if tick is not None and env.steps % 256 == 0:
                tick("step", env.steps, 0)
            if buf.size >= config.learning_starts and steps % config.train_every == 0:
                params, opt_state, loss = update(static, params, target, opt_state,
                                                 *buf.sample(rng, config.batch_size))
                losses.append(loss)  # a JAX scalar: read once per episode (no sync per step)
                n_updates += 1
                if n_updates % target_every == 0:
                    target = params
        net = combine(params, static)
        losses = [float(x) for x in losses]
        res = result_of(env.sim, config.router.value)
        share = np.bincount(res.instance[res.instance >= 0], minlength=m) / max(len(
            res.instance), 1)
        stats = {"episode": k, "return": ret, "steps": env.steps,
                 "mean_e2e_s": float(np.nanmean(res.e2e_s)), "completed": res.completed,
                 "guidance_weight": env.guidance_w,
                 "loss": float(np.mean(losses)) if losses else float("nan"), "epsilon": eps,
                 "wait_fraction": waits / max(env.steps, 1),
                 "max_share": float(share.max() * m)}
        diverged = bool(losses and not np.all(np.isfinite(losses))) or not _finite_params(net)
        if val_seeds and not diverged:
            v_e2e, v_share = _validate(net, env, val_seeds, tick)
            stats.update(validation_e2e_s=v_e2e, validation_max_share=v_share)
            if v_e2e <= best[0]:  # ties: the later network (trained longer)
                best = (v_e2e, k, params)
        history.append(stats)
        if progress is not None:
            progress(k, stats)
        if diverged:
            status = RunStatus.DIVERGED
            break
    last = combine(params, static)
    selected = best[1] if best[1] >= 0 else (history[-1]["episode"] if history else None)
    kept = combine(best[2], static) if best[1] >= 0 and best[2] is not params else last
    return TrainResult(kept, config, ec, cluster, history, status, cal, selected, last)


def _validation_seeds(config: DQNConfig) -> list[int]:
    """The workload seeds of the held-out validation episodes (none for ``selection="last"``)."""
    if config.selection is Selection.LAST:
        return []
    s0 = config.seed + config.episodes if config.validation_seed is None \
        else config.validation_seed
    return [s0 + j for j in range(config.validation_episodes)]


def _validate(net: Any, env: RoutingEnv, seeds: list[int],
              tick: Callable[[str, int, int], None] | None = None) -> tuple[float, float]:
    """(mean E2E in s, largest instance share × m) of ``net``'s greedy policy over the held-out
    episodes ``seeds``; E2E ``inf`` when a request did not finish. ``tick``: see
    :func:`train_dqn`."""
    e2e, share = [], 0.0
    m = env.cfg.n_instances
    for j, s in enumerate(seeds):
        if tick is not None:
            tick("validation", j, len(seeds))
        res = greedy_rollout(net, env, s, "validation")
        e2e.append(float(np.mean(res.e2e_s)) if res.completed == len(res.e2e_s) else np.inf)
        routed = res.instance[res.instance >= 0]
        share = max(share, float(np.bincount(routed, minlength=m).max() * m
                                 / max(len(res.instance), 1)))
    return float(np.mean(e2e)), share


def _finite_params(net: Any) -> bool:
    leaves = jax.tree_util.tree_leaves(eqx.filter(net, eqx.is_array))
    return all(bool(jnp.all(jnp.isfinite(x))) for x in leaves)


@dataclass(frozen=True)
class DQNRouter:
    """A trained Double-DQN router on the one router contract: the greedy action of the
    Q-network on the :func:`~lbtheory.intelligent.observation` of the view over the valid
    actions (:func:`~lbtheory.intelligent.routing_mask`: waiting, bounded loads); the wait
    action answers ``None``. With ``defer=False`` (an ablation: the same network without
    deferral) waiting is masked whenever some instance is a valid action."""

    net: Any
    env_config: EnvConfig
    name: str = "dqn"
    defer: bool = True

    def init(self, seed: int = 0) -> tuple:
        """The network split for the fast decision path."""
        return split_net(self.net)

    def observe(self, state: tuple, view: InstanceView) -> tuple:
        """Nothing to learn (a trained policy)."""
        return state

    def route(self, state: tuple, view: InstanceView,
              rng: np.random.Generator) -> tuple[int | None, tuple]:
        """The greedy action: an instance, or ``None`` (wait)."""
        m = view.config.n_instances
        mask = routing_mask(view, self.env_config)
        if not self.defer and mask[:m].any():
            mask[m] = False
        a = greedy_action(state, observation(view, self.env_config), mask)
        return (None if a == m else a), state


def greedy_rollout(net: Any, env: RoutingEnv, seed: int, name: str = "dqn",
                   defer: bool = True) -> InstanceResult:
    """Serve the environment's workload of episode ``seed`` with the greedy policy of ``net``
    (a :class:`DQNRouter` driven by :func:`~lbtheory.intelligent.run_router`; ``defer=False``:
    waiting masked whenever an instance is valid)."""
    wl = env.workload_fn(int(seed))
    pred = None if env.predict_fn is None else np.asarray(env.predict_fn(wl))
    sim = make_sim(wl, env.cfg, pred, engine=env.engine)
    run_router(sim, DQNRouter(net, env.env_cfg, name, defer), seed=seed)
    return result_of(sim, name)


