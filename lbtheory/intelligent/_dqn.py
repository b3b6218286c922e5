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

from ..errors import DataFormatError, ModelError
from ..io import write_json_atomic, write_text_atomic
from ._engine import ClusterConfig
from ._env import EnvConfig, RoutingEnv, observation_size
from ._simulate import SimResult, result_of
from ._timing import IterationTimeModel

__all__ = ["DQNConfig", "TrainResult", "train_dqn", "greedy_rollout", "save_checkpoint",
           "load_checkpoint", "GUIDANCE_OF", "q_values", "split_net"]

#: router kind -> guidance kind of :class:`EnvConfig`.
GUIDANCE_OF = {"rl": "none", "wa-rl": "static", "wg-rl": "annealed"}


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

    router: str = "wg-rl"
    reading: str = "hurl"
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
        if self.router not in GUIDANCE_OF:
            raise ModelError(f"router must be one of {', '.join(GUIDANCE_OF)}, got "
                             f"{self.router!r}")
        if self.reading not in ("hurl", "literal"):
            raise ModelError(f"reading must be 'hurl' or 'literal', got {self.reading!r}")
        if self.episodes < 1:
            raise ModelError(f"episodes must be >= 1, got {self.episodes}")

    def env_config(self, base: EnvConfig | None = None) -> EnvConfig:
        """The :class:`EnvConfig` this router trains on."""
        from dataclasses import replace

        return replace(base or EnvConfig(), guidance=GUIDANCE_OF[self.router],
                       reading=self.reading, gamma=self.gamma, beta_d=self.beta_d)


def _make_net(obs_dim: int, n_actions: int, hidden: tuple[int, ...], key: jax.Array):
    return eqx.nn.MLP(obs_dim, n_actions, width_size=hidden[0], depth=len(hidden),
                      activation=jax.nn.relu, key=key)


@eqx.filter_jit
def q_values(net: Any, obs: jax.Array) -> jax.Array:
    """Q-values of one observation (``m + 1`` actions)."""
    return net(obs)


@functools.partial(jax.jit, static_argnums=1)
def _q_split(params: Any, static: Any, obs: jax.Array) -> jax.Array:
    return eqx.combine(params, static)(obs)


def split_net(net: Any) -> tuple[Any, Any]:
    """(arrays, static structure) of a Q-network, for the fast decision path of :func:`_greedy`
    (``jax.jit`` with the structure static: several times less dispatch overhead than
    ``eqx.filter_jit`` per call)."""
    return eqx.partition(net, eqx.is_array)


def _greedy(split: tuple[Any, Any], obs: np.ndarray, mask: np.ndarray) -> int:
    """argmax of the Q-values over the valid actions (``split`` from :func:`split_net`)."""
    q = np.asarray(_q_split(split[0], split[1], obs))
    return int(np.argmax(np.where(mask, q, -np.inf)))


@functools.lru_cache(maxsize=8)
def _update_fn(lr: float):
    """(optimizer, jitted Double-DQN update) for Adam with learning rate ``lr`` (cached, so
    repeated trainings reuse the compiled update)."""
    opt = optax.adam(lr)

    @eqx.filter_jit
    def update(net, target, opt_state, s, a, r, s2, done, mask2, gamma):
        def loss_fn(model):
            q = jax.vmap(model)(s)
            qa = jnp.take_along_axis(q, a[:, None], axis=1)[:, 0]
            a2 = jnp.argmax(jnp.where(mask2, jax.vmap(model)(s2), -jnp.inf), axis=1)
            q2 = jnp.take_along_axis(jax.vmap(target)(s2), a2[:, None], axis=1)[:, 0]
            y = r + gamma * (1.0 - done) * jax.lax.stop_gradient(q2)
            return jnp.mean(optax.huber_loss(qa, y))

        loss, grads = eqx.filter_value_and_grad(loss_fn)(net)
        updates, opt_state = opt.update(grads, opt_state, eqx.filter(net, eqx.is_array))
        return eqx.apply_updates(net, updates), opt_state, loss
    return opt, update


@dataclass
class TrainResult:
    """A trained Q-network, its configs and per-episode learning curve."""

    net: Any
    config: DQNConfig
    env_config: EnvConfig
    cluster: ClusterConfig
    history: list[dict[str, float]] = field(default_factory=list)


def train_dqn(workload_fn: Callable[[int], Any], cluster: ClusterConfig, config: DQNConfig, *,
              env_config: EnvConfig | None = None,
              progress: Callable[[int, dict[str, float]], None] | None = None) -> TrainResult:
    """Train a Double-DQN router on ``RoutingEnv(workload_fn, cluster)``.

    Args:
        workload_fn: ``seed -> Workload``; episode ``k`` uses ``seed = config.seed + k``.
        cluster: the cluster.
        config: training options.
        env_config: base state/reward options (guidance set from ``config.router``).
        progress: called after each episode with ``(k, stats)`` (a command's progress bar).
    """
    ec = config.env_config(env_config)
    env = RoutingEnv(workload_fn, cluster, ec)
    m = cluster.n_instances
    obs_dim, n_act = observation_size(m, ec), m + 1
    key = jax.random.PRNGKey(config.seed)
    net = _make_net(obs_dim, n_act, config.hidden, key)
    target = net
    opt, update = _update_fn(float(config.lr))
    opt_state = opt.init(eqx.filter(net, eqx.is_array))
    rng = np.random.default_rng(config.seed)
    cap = config.buffer_size
    S = np.zeros((cap, obs_dim), np.float32)
    S2 = np.zeros((cap, obs_dim), np.float32)
    A = np.zeros(cap, np.int32)
    R = np.zeros(cap, np.float32)
    Dn = np.zeros(cap, np.float32)
    M2 = np.ones((cap, n_act), bool)
    size = ptr = steps = n_updates = 0
    split = split_net(net)
    history: list[dict[str, float]] = []
    for k in range(config.episodes):
        env.set_episode(k)
        obs, info = env.reset(seed=config.seed + k)
        mask = info["action_mask"]
        ret, losses, done, trunc = 0.0, [], env._done, False
        eps = config.eps_start
        while not (done or trunc):
            eps = max(config.eps_end, config.eps_start - (config.eps_start - config.eps_end)
                      * steps / max(config.eps_decay_steps, 1))
            if rng.random() < eps:
                a = int(rng.choice(np.flatnonzero(mask)))
            else:
                a = _greedy(split, obs, mask)
            obs2, r, done, trunc, info = env.step(a)
            S[ptr], A[ptr], R[ptr], S2[ptr], Dn[ptr] = obs, a, r, obs2, float(done)
            M2[ptr] = mask = info["action_mask"]
            ptr, size = (ptr + 1) % cap, min(size + 1, cap)
            obs, ret, steps = obs2, ret + r, steps + 1
            if size >= config.learning_starts and steps % config.train_every == 0:
                idx = rng.integers(size, size=config.batch_size)
                net, opt_state, loss = update(net, target, opt_state, S[idx], A[idx], R[idx],
                                              S2[idx], Dn[idx], M2[idx], config.gamma)
                split = split_net(net)
                losses.append(float(loss))
                n_updates += 1
                if n_updates % config.target_every == 0:
                    target = net
        res = result_of(env.sim, config.router)
        stats = {"episode": k, "return": ret, "steps": env.steps,
                 "mean_e2e_s": float(np.nanmean(res.e2e_s)), "completed": res.completed,
                 "guidance_weight": env.guidance_w,
                 "loss": float(np.mean(losses)) if losses else float("nan"), "epsilon": eps}
        history.append(stats)
        if progress is not None:
            progress(k, stats)
    return TrainResult(net, config, ec, cluster, history)


def greedy_rollout(net: Any, env: RoutingEnv, seed: int, name: str = "dqn") -> SimResult:
    """Run ``env`` (episode ``seed``) with the greedy policy of ``net``; the simulation result.
    Truncation (``max_steps``) or a policy that keeps waiting leaves requests unfinished (NaN)."""
    obs, info = env.reset(seed=seed)
    done, trunc = env._done, False
    split = split_net(net)
    while not (done or trunc):
        obs, _, done, trunc, info = env.step(_greedy(split, obs, info["action_mask"]))
    return result_of(env.sim, name)


def _config_dict(result: TrainResult) -> dict[str, Any]:
    c = result.cluster
    ec = asdict(result.env_config)
    ec["impact"] = None if result.env_config.impact is None else asdict(result.env_config.impact)
    return {"dqn": asdict(result.config), "env": ec,
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


def load_checkpoint(path: str | Path, cluster: ClusterConfig | None = None) -> TrainResult:
    """Load a checkpoint; with ``cluster``, refuse one trained for a different cluster.

    Raises:
        DataFormatError: missing/corrupt files.
        ModelError: the checkpoint's cluster differs from ``cluster`` (the field is named).
    """
    from ._predictor import BucketSpec

    p = Path(path)
    try:
        cfg = json.loads((p / "config.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataFormatError(f"cannot read checkpoint config ({exc})", path=str(p),
                              field="config.json") from None
    cl = cfg["cluster"]
    saved = ClusterConfig(n_instances=cl["n_instances"], kv_budget_tokens=cl["kv_budget_tokens"],
                          max_batch=cl["max_batch"], max_prefill_tokens=cl["max_prefill_tokens"],
                          epoch_s=cl["epoch_s"], timing=IterationTimeModel(**cl["timing"]))
    if cluster is not None:
        for name in ("n_instances", "kv_budget_tokens", "max_batch", "max_prefill_tokens",
                     "epoch_s", "timing"):
            if getattr(saved, name) != getattr(cluster, name):
                raise ModelError(f"checkpoint {p} was trained with {name} = "
                                 f"{getattr(saved, name)}, expected {getattr(cluster, name)}")
    dq = cfg["dqn"]
    dq["hidden"] = tuple(dq["hidden"])
    dconf = DQNConfig(**dq)
    e = dict(cfg["env"])
    e["prompt_edges"] = tuple(e["prompt_edges"])
    e["buckets"] = BucketSpec(**e["buckets"])
    if e.get("impact") is not None:
        from ._impact import ImpactParams

        e["impact"] = ImpactParams(**e["impact"])
    ec = EnvConfig(**e)
    m = saved.n_instances
    like = _make_net(observation_size(m, ec), m + 1, dconf.hidden, jax.random.PRNGKey(0))
    try:
        net = eqx.tree_deserialise_leaves(p / "params.eqx", like)
    except (OSError, ValueError, RuntimeError) as exc:
        raise DataFormatError(f"cannot read checkpoint parameters ({exc})", path=str(p),
                              field="params.eqx") from None
    hist_path = p / "history.json"
    history = json.loads(hist_path.read_text()) if hist_path.exists() else []
    return TrainResult(net, dconf, ec, saved, history)
