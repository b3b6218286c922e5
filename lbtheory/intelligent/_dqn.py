"""Double-DQN routers in JAX + optax + equinox: Baseline RL, Workload-Aware RL, Workload-Guided RL.

The Q-network is an equinox MLP from the :class:`RoutingEnv` observation to ``m + 1`` action
values. Training (van Hasselt et al. 2016): ε-greedy exploration (linear decay), a replay buffer,
Huber loss on the Double-DQN target ``y = r + γ (1 − done) Q_target(s', argmax_a Q(s', a))``
(argmax and exploration over the env's valid actions),
Adam, a hard target-network copy every ``target_every`` updates. Everything random is seeded: the
network init by a ``jax.random`` key, exploration and replay sampling by a numpy Generator, the
episode workloads by ``seed + episode``. Same seed ⇒ identical parameters.

Router kinds (THEORY §10): ``rl`` (no guidance), ``wa-rl`` (static mixing penalty),
``wg-rl`` (annealed guidance, ``reading`` ``"hurl"`` or ``"literal"`` for λ_k).
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._checks import check_int, check_option, check_real, check_seed
from ..errors import DataFormatError, ParameterError, RunStatus
from ..io import write_json_atomic, write_text_atomic
from ._engine import ClusterConfig, InstanceView
from ._env import (
    EnvConfig,
    Guidance,
    Reading,
    RoutingEnv,
    observation,
    observation_size,
    wait_allowed,
)
from ._simulate import InstanceResult, make_sim, result_of, run_router
from ._timing import IterationTimeModel

__all__ = ["make_q_network", "double_dqn_update", "double_dqn_step", "DQNConfig", "TrainResult",
           "train_dqn", "greedy_rollout", "save_checkpoint", "load_checkpoint", "GUIDANCE_OF",
           "q_values", "split_net", "RLKind", "DQNRouter", "dqn_router", "ReplayBuffer",
           "greedy_action"]


class RLKind(enum.StrEnum):
    """The RL routers of THEORY §10 (the names of ``lbtheory intelligent train --router``)."""

    RL = "rl"        # Baseline RL: no guidance
    WA_RL = "wa-rl"  # Workload-Aware RL: static mixing penalty
    WG_RL = "wg-rl"  # Workload-Guided RL: annealed guidance


#: router kind -> guidance kind of :class:`EnvConfig`.
GUIDANCE_OF = {RLKind.RL: Guidance.NONE, RLKind.WA_RL: Guidance.STATIC,
               RLKind.WG_RL: Guidance.ANNEALED}


@dataclass(frozen=True)
class DQNConfig:
    """Training options (defaults fit a 2-core CPU: a few minutes per 10 episodes of 300).

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
        target_every: updates per target-network copy.
        eps_start, eps_end, eps_decay_steps: ε-greedy schedule (linear, in env steps).
        gamma: discount γ.
        beta_d: λ_k decay per episode.
    """

    router: RLKind | str = RLKind.WG_RL
    reading: Reading | str = Reading.HURL
    episodes: int = 10
    seed: int = 0
    hidden: tuple[int, ...] = (128, 128)
    lr: float = 1e-3
    batch_size: int = 64
    buffer_size: int = 50_000
    learning_starts: int = 500
    train_every: int = 2
    target_every: int = 250
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_decay_steps: int = 5_000
    gamma: float = 0.99
    beta_d: float = 0.2

    def __post_init__(self) -> None:
        object.__setattr__(self, "router", check_option(RLKind, self.router, "router"))
        object.__setattr__(self, "reading", check_option(Reading, self.reading, "reading"))
        check_seed(self.seed)
        for name in ("episodes", "batch_size", "buffer_size", "train_every", "target_every",
                     "eps_decay_steps"):
            check_int(getattr(self, name), f"DQNConfig.{name}", low=1)
        check_int(self.learning_starts, "DQNConfig.learning_starts", low=0)
        check_real(self.lr, "DQNConfig.lr (learning rate)", low=0.0, low_open=True)
        for name in ("eps_start", "eps_end", "gamma"):
            check_real(getattr(self, name), f"DQNConfig.{name}", low=0.0, high=1.0)
        check_real(self.beta_d, "DQNConfig.beta_d", low=0.0)
        if not self.hidden or any(isinstance(h, bool) or int(h) != h or h < 1
                                  for h in self.hidden):
            raise ParameterError(f"DQNConfig.hidden must be layer widths >= 1, got "
                                 f"{self.hidden!r}")

    def env_config(self, base: EnvConfig | None = None) -> EnvConfig:
        """The :class:`EnvConfig` this router trains on."""
        from dataclasses import replace

        return replace(base or EnvConfig(), guidance=GUIDANCE_OF[self.router],
                       reading=self.reading, gamma=self.gamma, beta_d=self.beta_d)


def make_q_network(obs_dim: int, n_actions: int, hidden: tuple[int, ...], key: jax.Array) -> Any:
    """The Q-network: an equinox MLP from an observation to ``n_actions`` action values."""
    return eqx.nn.MLP(obs_dim, n_actions, width_size=hidden[0], depth=len(hidden),
                      activation=jax.nn.relu, key=key)


@eqx.filter_jit
def q_values(net: Any, obs: jax.Array) -> jax.Array:
    """Q-values of one observation (``m + 1`` actions)."""
    return net(obs)


class Structure:
    """The static part of a network (``eqx.partition``'s second half) as a ``jax.jit`` static
    argument, hashed once: ``jax.jit`` hashes its static arguments at every call, and an
    equinox module hashes field by field (tens of µs, on every decision and every update).
    Equal structures compare equal, so trainings share compiled functions."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: Any) -> None:
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Structure) and self._hash == other._hash
                                 and self.value == other.value)


def combine(params: Any, static: Structure) -> Any:
    """The network from its arrays and :class:`Structure` (:func:`split_net`'s inverse)."""
    return eqx.combine(params, static.value)


@functools.partial(jax.jit, static_argnums=1)
def _q_split(params: Any, static: Structure, obs: jax.Array) -> jax.Array:
    return combine(params, static)(obs)


def split_net(net: Any) -> tuple[Any, Structure]:
    """(arrays, :class:`Structure`) of a Q-network, for the fast decision path of
    :func:`greedy_action` and the training step (``jax.jit`` with the structure static:
    several times less dispatch overhead than ``eqx.filter_jit`` per call)."""
    params, static = eqx.partition(net, eqx.is_array)
    return params, Structure(static)


def greedy_action(split: tuple[Any, Any], obs: np.ndarray, mask: np.ndarray) -> int:
    """argmax of the Q-values over the valid actions (``split`` from :func:`split_net`)."""
    q = np.asarray(_q_split(split[0], split[1], obs))
    return int(np.argmax(np.where(mask, q, -np.inf)))


class ReplayBuffer:
    """A ring buffer of transitions ``(s, a, r, s', done, mask')`` (the training loop's memory;
    the one mutable object of training, owned by :func:`train_dqn`)."""

    def __init__(self, capacity: int, obs_dim: int, n_actions: int) -> None:
        self.S = np.zeros((capacity, obs_dim), np.float32)
        self.S2 = np.zeros((capacity, obs_dim), np.float32)
        self.A = np.zeros(capacity, np.int32)
        self.R = np.zeros(capacity, np.float32)
        self.done = np.zeros(capacity, np.float32)
        self.mask2 = np.ones((capacity, n_actions), bool)
        self.capacity, self.size, self.ptr = capacity, 0, 0

    def add(self, s: np.ndarray, a: int, r: float, s2: np.ndarray, done: bool,
            mask2: np.ndarray) -> None:
        """Store one transition (overwriting the oldest when full)."""
        k = self.ptr
        self.S[k], self.A[k], self.R[k], self.S2[k], self.done[k] = s, a, r, s2, float(done)
        self.mask2[k] = mask2
        self.ptr, self.size = (k + 1) % self.capacity, min(self.size + 1, self.capacity)

    def sample(self, rng: np.random.Generator, batch: int) -> tuple[np.ndarray, ...]:
        """A uniform minibatch ``(s, a, r, s', done, mask')`` (with replacement)."""
        idx = rng.integers(self.size, size=batch)
        return (self.S[idx], self.A[idx], self.R[idx], self.S2[idx], self.done[idx],
                self.mask2[idx])


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
    online network, valued by the target network (van Hasselt et al. 2016); ``loss`` is the loss
    before the step."""
    opt, step = double_dqn_step(lr)

    def update(net, target, opt_state, s, a, r, s2, done, mask2, gamma):
        params, static = split_net(net)
        params, opt_state, loss = step(static, params, eqx.filter(target, eqx.is_array),
                                       opt_state, s, a, r, s2, done, mask2, gamma)
        return combine(params, static), opt_state, loss
    return opt, update


@dataclass
class TrainResult:
    """A trained Q-network, its configs and per-episode learning curve.

    ``status`` (:class:`~lbtheory.errors.RunStatus`): ``completed``, or ``diverged`` when a loss
    or a parameter became non-finite (training stops at that episode; the network is unusable).
    """

    net: Any
    config: DQNConfig
    env_config: EnvConfig
    cluster: ClusterConfig
    history: list[dict[str, float]] = field(default_factory=list)
    status: RunStatus = RunStatus.COMPLETED


def train_dqn(workload_fn: Callable[[int], Any], cluster: ClusterConfig, config: DQNConfig, *,
              env_config: EnvConfig | None = None,
              progress: Callable[[int, dict[str, float]], None] | None = None,
              engine: str = "auto") -> TrainResult:
    """Train a Double-DQN router on ``RoutingEnv(workload_fn, cluster)``.

    Args:
        workload_fn: ``seed -> Workload``; episode ``k`` uses ``seed = config.seed + k``.
        cluster: the cluster.
        config: training options.
        env_config: base state/reward options (guidance set from ``config.router``).
        progress: called after each episode with ``(k, stats)`` (a command's progress bar).
        engine: the environment's simulator (``"auto"``/``"compiled"`` or ``"reference"``;
            the same episodes and parameters either way).
    """
    ec = config.env_config(env_config)
    env = RoutingEnv(workload_fn, cluster, ec, engine=engine)
    m = cluster.n_instances
    obs_dim, n_act = observation_size(m, ec), m + 1
    key = jax.random.PRNGKey(config.seed)
    params, static = split_net(make_q_network(obs_dim, n_act, config.hidden, key))
    target = params
    opt, update = double_dqn_step(float(config.lr))
    opt_state = opt.init(params)
    rng = np.random.default_rng(config.seed)
    buf = ReplayBuffer(config.buffer_size, obs_dim, n_act)
    # ε-greedy schedule (optax's linear schedule, tabulated once: no JAX dispatch per step)
    eps_table = np.asarray(optax.linear_schedule(config.eps_start, config.eps_end,
                                                 config.eps_decay_steps)(
        np.arange(config.eps_decay_steps + 1)), dtype=float)

    def epsilon(step: int) -> float:
        return float(eps_table[min(step, config.eps_decay_steps)])

    steps = n_updates = 0
    history: list[dict[str, float]] = []
    status = RunStatus.COMPLETED
    for k in range(config.episodes):
        env.set_episode(k)
        obs, info = env.reset(seed=config.seed + k)
        mask = info["action_mask"]
        ret, losses, done, trunc = 0.0, [], env._done, False
        eps = float(epsilon(steps))
        while not (done or trunc):
            eps = float(epsilon(steps))
            if rng.random() < eps:
                a = int(rng.choice(np.flatnonzero(mask)))
            else:
                a = greedy_action((params, static), obs, mask)
            obs2, r, done, trunc, info = env.step(a)
            buf.add(obs, a, r, obs2, done, info["action_mask"])
            mask = info["action_mask"]
            obs, ret, steps = obs2, ret + r, steps + 1
            if buf.size >= config.learning_starts and steps % config.train_every == 0:
                params, opt_state, loss = update(static, params, target, opt_state,
                                                 *buf.sample(rng, config.batch_size),
                                                 config.gamma)
                losses.append(loss)  # a JAX scalar: read once per episode (no sync per step)
                n_updates += 1
                if n_updates % config.target_every == 0:
                    target = params
        net = combine(params, static)
        losses = [float(x) for x in losses]
        res = result_of(env.sim, config.router.value)
        stats = {"episode": k, "return": ret, "steps": env.steps,
                 "mean_e2e_s": float(np.nanmean(res.e2e_s)), "completed": res.completed,
                 "guidance_weight": env.guidance_w,
                 "loss": float(np.mean(losses)) if losses else float("nan"), "epsilon": eps}
        history.append(stats)
        if progress is not None:
            progress(k, stats)
        if (losses and not np.all(np.isfinite(losses))) or not _finite_params(net):
            status = RunStatus.DIVERGED
            break
    return TrainResult(combine(params, static), config, ec, cluster, history, status)


def _finite_params(net: Any) -> bool:
    leaves = jax.tree_util.tree_leaves(eqx.filter(net, eqx.is_array))
    return all(bool(jnp.all(jnp.isfinite(x))) for x in leaves)


@dataclass(frozen=True)
class DQNRouter:
    """A trained Double-DQN router on the one router contract: the greedy action of the
    Q-network on the :func:`~lbtheory.intelligent.observation` of the view; the wait action
    (allowed while the head has waited less than ``max_wait_s``) answers ``None``."""

    net: Any
    env_config: EnvConfig
    name: str = "dqn"

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
        mask = np.ones(m + 1, dtype=bool)
        mask[m] = wait_allowed(view, self.env_config)
        a = greedy_action(state, observation(view, self.env_config), mask)
        return (None if a == m else a), state


def dqn_router(checkpoint: str | Path, *, name: str | None = None,
               cluster: ClusterConfig | None = None) -> DQNRouter:
    """The :class:`DQNRouter` of a checkpoint of ``lbtheory intelligent train`` (with
    ``cluster``, refuse one trained for another cluster); named after its RL kind by default."""
    tr = load_checkpoint(checkpoint, cluster)
    return DQNRouter(tr.net, tr.env_config, name or tr.config.router.value)


def greedy_rollout(net: Any, env: RoutingEnv, seed: int, name: str = "dqn") -> InstanceResult:
    """Serve the environment's workload of episode ``seed`` with the greedy policy of ``net``
    (a :class:`DQNRouter` driven by :func:`~lbtheory.intelligent.run_router`)."""
    wl = env.workload_fn(int(seed))
    pred = None if env.predict_fn is None else np.asarray(env.predict_fn(wl))
    sim = make_sim(wl, env.cfg, pred, engine=env.engine)
    run_router(sim, DQNRouter(net, env.env_cfg, name), seed=seed)
    return result_of(sim, name)


def _config_dict(result: TrainResult) -> dict[str, Any]:
    c = result.cluster
    ec = asdict(result.env_config)
    ec["impact"] = None if result.env_config.impact is None else asdict(result.env_config.impact)
    dq = asdict(result.config)
    dq.update(router=result.config.router.value, reading=result.config.reading.value)
    ec.update(guidance=result.env_config.guidance.value, reading=result.env_config.reading.value)
    return {"dqn": dq, "env": ec,
            "cluster": {"n_instances": c.n_instances, "kv_budget_tokens": c.kv_budget_tokens,
                        "max_batch": c.max_batch, "max_prefill_tokens": c.max_prefill_tokens,
                        "epoch_s": c.epoch_s, "timing": asdict(c.timing)},
            "obs_dim": observation_size(c.n_instances, result.env_config)}


def save_checkpoint(result: TrainResult, out_dir: str | Path) -> Path:
    """Write ``params.eqx`` (equinox leaves), ``config.json`` and ``history.json`` to
    ``out_dir`` (atomic per file)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "params.eqx.tmp"
    eqx.tree_serialise_leaves(tmp, result.net)
    tmp.replace(out / "params.eqx")
    write_json_atomic(out / "config.json", _config_dict(result))
    write_json_atomic(out / "history.json", result.history)
    write_text_atomic(out / "README.txt", f"Double-DQN router {result.config.router} "
                      f"(lbtheory intelligent train); load with load_checkpoint().\n")
    return out


def _section(cfg: Any, key: str, p: Path) -> dict[str, Any]:
    """``cfg[key]`` as a dict, else a :class:`DataFormatError` naming the field."""
    if not isinstance(cfg, dict) or not isinstance(cfg.get(key), dict):
        raise DataFormatError(f"config.json: expected an object with a {key!r} object "
                              f"(a checkpoint written by save_checkpoint)", path=str(p),
                              field=key)
    return dict(cfg[key])


def _build(cls: Any, fields: dict[str, Any], key: str, p: Path) -> Any:
    """``cls(**fields)``, turning a missing, unknown or bad field into a DataFormatError."""
    import dataclasses as dc

    known = {f.name for f in dc.fields(cls)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise DataFormatError(f"config.json: unknown field(s) {unknown} in {key!r}; expected "
                              f"fields of {cls.__name__}", path=str(p), field=key)
    try:
        return cls(**fields)
    except (TypeError, ValueError) as exc:
        raise DataFormatError(f"config.json: bad {key!r} ({exc})", path=str(p),
                              field=key) from None


def _configs(cfg: Any, p: Path) -> tuple[ClusterConfig, DQNConfig, EnvConfig]:
    """The cluster, training and environment configs of a checkpoint's ``config.json``,
    validated field by field."""
    from ._impact import ImpactParams
    from ._predictor import BucketSpec

    cl = _section(cfg, "cluster", p)
    cl["timing"] = _build(IterationTimeModel, _section(cl, "timing", p), "cluster.timing", p)
    saved = _build(ClusterConfig, cl, "cluster", p)
    dq = _section(cfg, "dqn", p)
    if isinstance(dq.get("hidden"), list):
        dq["hidden"] = tuple(dq["hidden"])
    dconf = _build(DQNConfig, dq, "dqn", p)
    e = _section(cfg, "env", p)
    if isinstance(e.get("prompt_edges"), list):
        e["prompt_edges"] = tuple(e["prompt_edges"])
    e["buckets"] = _build(BucketSpec, _section(e, "buckets", p), "env.buckets", p)
    if e.get("impact") is not None:
        e["impact"] = _build(ImpactParams, _section(e, "impact", p), "env.impact", p)
    return saved, dconf, _build(EnvConfig, e, "env", p)


def load_checkpoint(path: str | Path, cluster: ClusterConfig | None = None) -> TrainResult:
    """Load a checkpoint; with ``cluster``, refuse one trained for a different cluster.

    Raises:
        DataFormatError: missing or corrupt files, a ``config.json`` that is not a checkpoint's
            (a missing section, an unknown or bad field — named).
        ParameterError: the checkpoint's cluster differs from ``cluster`` (the field is named).
    """
    p = Path(path)
    try:
        cfg = json.loads((p / "config.json").read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(f"cannot read checkpoint config ({exc})", path=str(p),
                              field="config.json") from None
    saved, dconf, ec = _configs(cfg, p)
    if cluster is not None:
        for name in ("n_instances", "kv_budget_tokens", "max_batch", "max_prefill_tokens",
                     "epoch_s", "timing"):
            if getattr(saved, name) != getattr(cluster, name):
                raise ParameterError(f"checkpoint {p} was trained with {name} = "
                                     f"{getattr(saved, name)}, expected "
                                     f"{getattr(cluster, name)}")
    m = saved.n_instances
    like = make_q_network(observation_size(m, ec), m + 1, dconf.hidden, jax.random.PRNGKey(0))
    try:
        net = eqx.tree_deserialise_leaves(p / "params.eqx", like)
    except (OSError, ValueError, RuntimeError) as exc:
        raise DataFormatError(f"cannot read checkpoint parameters ({exc})", path=str(p),
                              field="params.eqx") from None
    hist_path = p / "history.json"
    try:
        history = json.loads(hist_path.read_text(encoding="utf-8")) if hist_path.exists() else []
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(f"cannot read checkpoint history ({exc})", path=str(p),
                              field="history.json") from None
    return TrainResult(net, dconf, ec, saved, history)
