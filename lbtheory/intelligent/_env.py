"""The routing MDP of THEORY §10 as a ``gymnasium.Env`` (so any RL library can train on it).

* **Decision**: the head-of-line request of the router queue at a decision epoch. Action
  ``a < m`` routes it to instance ``a`` (the next queued request is decided at the same epoch);
  ``a = m`` waits. Time moves to the next epoch with a non-empty queue after a wait or when the
  queue empties.
* **State** (float32, scaled to O(1)): router queue length / 64; head prompt tokens / 4096; head
  predicted decode bucket (one-hot, ``n_d``); per instance the counts of its requests by prompt
  bucket ``P ∈ ℝ^{m×n_p}`` and predicted decode bucket ``D ∈ ℝ^{m×n_d}`` (/16); capacities
  ``C_m = min(1 − n_m/max_batch, 1 − committed KV/budget)``, mapped to ``−log(1 − C_m)`` below 0
  [R] (:func:`~lbtheory.intelligent._envkernels.capacity_feature`: it never saturates); the
  estimated earliest completion time ``T̂_c`` (s / 10): min over instances of the fewest
  predicted remaining tokens × the instance's current decode iteration time [R]; the head
  request's time in the router queue / ``max_wait_s``. :func:`observation_layout` says which
  entries are global and which belong to each instance (the symmetric Q-network's input).
* **Action mask** [R, not in the paper]: waiting is allowed only while the head request has waited
  less than ``max_wait_s`` (without this a policy that always waits never ends an episode) and,
  with ``wait_only_when_full`` (the default), only while no instance could start the request
  now (every capacity ``C_m ≤ 0``): deferring is the late binding that can help when every
  instance is full, and otherwise only delays the queue, by one epoch per wait — a difference
  of ≈1e-4 of |Q| that a network cannot resolve (greedy policies waited at 70% of their
  steps). **Bounded loads** [R, not in the paper] (``balance_factor`` c, default 1.25): a
  *full* instance (``C_m ≤ 0``: the request would queue there) is open only while it holds
  fewer than ``⌈c (n + 1) / m⌉`` of the ``n`` requests on the instances (Mirrokni, Thorup &
  Zadimoghaddam 2018, "Consistent hashing with bounded loads"; HAProxy's
  ``hash-balance-factor``; c = 1.25 is their example value, fixed before any run); an instance
  with room is always open, and so is the least-loaded one. Why: on the overloaded Knowl 7
  cluster (offered load 12.7, every instance full at 92 % of round robin's decisions) the
  instances' Q-values differed by < 0.05 % of |Q| and the greedy policies sent up to 2.1× the
  fair share of requests to one instance (issue 22); there a choice's consequences are hundreds
  of seconds away, below what TD learning resolves, and the cap keeps any policy's queues
  within c of each other. Below saturation it binds rarely (on Knowl 4 at 3 % of round robin's
  decisions, on Knowl 5 never: no instance is full), and it leaves lanes (a short-output
  instance, size-interval assignment) to the policy. Applied only while *every* instance is
  full, it would not bind against a policy that piles everything on one instance (the others
  then have room). :meth:`RoutingEnv.action_mask` gives the valid actions (also
  ``info["action_mask"]``; one definition, :func:`~lbtheory.intelligent._envkernels.fill_mask`,
  for both engines and :class:`~lbtheory.intelligent.DQNRouter`); an invalid action is
  replaced by routing to the valid instance with the fewest committed tokens (the shared
  :func:`~lbtheory.routers.jsq_pick`, ties to the lowest index).
* **Reward** (× ``reward_scale``), THEORY §10:
  ``r_t = − Σ_{j∈J} c_j + r_w Σ w_mit + w_k s_h h(s_t, s_{t+1})``, a semi-MDP in continuous time
  [R]. A step that routes within an epoch takes no time (progress terms 0, discount 1); a step
  that moves the clock from ``t0`` to ``t1`` charges every request in the system for the part of
  ``(t0, t1]`` it spends there, discounted from ``t0`` by ``e^{−(t − t0)/H}`` (``H =
  horizon_s``), and the next state's value is discounted by ``e^{−(t1 − t0)/H}``
  (``info["discount"]``). The last step charges the whole drain after the last decision, so an
  episode's undiscounted return is ``−reward_scale · (Σ_j latency_j − r_w n)`` exactly with the
  default ``progress="latency"`` (``c_j = 1`` per second in the system). ``progress="paper"``
  weights it by the seed's ``(1/T̂_j)(1 − f_jt)`` per epoch (``T̂_j`` the request's time alone on
  an idle instance, ``f_jt = min(1, o_jt / d̂_j)`` at the end of the interval). Completions
  (``r_w``) are discounted to their finish times. The cost has one definition,
  :func:`~lbtheory.intelligent._envkernels.charge_interval`, for both engines.

  **Guidance**: ``h = r_mix(chosen) − max_l r_mix(l) ≤ 0`` (:mod:`._impact`). **Sign [R]**: the
  paper writes ``−(γ − γ̃_k) h``, which with ``h ≤ 0`` would *reward* a worse-than-greedy
  choice; we add ``+w_k s_h h`` (a penalty of ``w_k s_h |h|``), the reading under which the term
  is "guidance". **Scale** ``s_h`` [R] (``guidance_scale``): raw ``h`` is ≈1e-5 of a step's
  progress cost, so the term would change nothing; :func:`~lbtheory.intelligent.calibrate_env`
  sets ``s_h = ρ / σ_h`` (ρ the mean progress cost per decision, σ_h the standard deviation of
  ``h``, both under round robin on the calibration workload), making a typical guidance term
  ``w_k`` times a typical step's cost. **Weight** ``w_k`` (:func:`guidance_weight`, episode
  ``k``): ``none`` → 0 (Baseline RL); ``static`` → γ (Workload-Aware RL); ``annealed``
  (Workload-Guided RL) → ``γ − λ_k γ`` with ``λ_k = 1 − e^{−β_d k}`` (reading ``"hurl"``, Cheng
  et al. 2021: the guidance vanishes) or ``λ_k = e^{−β_d k}`` (reading ``"literal"``, the seed's
  formula: the guidance *grows* to γ). ``γ`` (``gamma``) is the seed's γ = 0.99, here only the
  guidance's scale: the MDP's discount is per elapsed time.

  ``info`` carries the raw parts of each step: ``h`` (0 for a wait), ``progress`` (the
  discounted cost, s), ``completions`` (discounted) and ``discount``.

**Engines.** On the compiled simulator (the default) a step is one call of the kernel
:func:`~lbtheory.intelligent._envkernels.env_step` — dispatch, advance, the interval's cost —
and one of :func:`~lbtheory.intelligent._envkernels.observe_state`, which keeps the
per-instance bucket counts P and D up to date instead of rebuilding a view; the reward is
assembled here, in Python. The state vector has one definition,
:func:`~lbtheory.intelligent._envkernels.fill_observation`, which :func:`observation` of a
view calls too. ``engine="reference"`` runs the Python :class:`ClusterSim`; both give the same
observations, rewards and episodes bit for bit (``tests/test_intelligent_engines.py``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from .._checks import check_option, check_real
from ..errors import ParameterError
from ..routers import jsq_pick
from ..workloads import Workload
from . import _core
from ._compiled import CompiledClusterSim
from ._engine import ClusterConfig, ClusterSim, InstanceView
from ._envkernels import (
    OBS_HIGH,
    charge_interval,
    env_step,
    fill_mask,
    fill_observation,
    guidance_h,
    observe_state,
)
from ._impact import ImpactParams, calibrate_impact, guidance_penalty, instance_loads
from ._predictor import BucketSpec
from ._simulate import Engine, make_sim

__all__ = ["EnvConfig", "RoutingEnv", "guidance_weight", "observation_size", "ideal_time_s",
           "observation", "wait_allowed", "routing_mask", "Guidance", "Reading", "Progress",
           "observation_layout", "load_sign", "episode_labels"]


class Guidance(enum.StrEnum):
    """The guidance term's weight schedule (module docstring)."""

    NONE = "none"          # Baseline RL
    STATIC = "static"      # Workload-Aware RL
    ANNEALED = "annealed"  # Workload-Guided RL


class Reading(enum.StrEnum):
    """The two readings of λ_k in the annealed guidance (THEORY §10 ambiguity)."""

    HURL = "hurl"          # λ_k = 1 − e^{−β_d k}: the guidance vanishes (Cheng et al. 2021)
    LITERAL = "literal"    # λ_k = e^{−β_d k}: the seed's formula, the guidance grows to γ


def guidance_weight(kind: Guidance | str, gamma: float, beta_d: float, episode: int,
                    reading: Reading | str = Reading.HURL) -> float:
    """``w_k = γ − γ̃_k`` of the guidance term at training episode ``k`` (module docstring)."""
    kind = check_option(Guidance, kind, "guidance kind")
    if kind is Guidance.NONE:
        return 0.0
    if kind is Guidance.STATIC:
        return float(gamma)
    reading = check_option(Reading, reading, "reading")
    decay = math.exp(-beta_d * episode)
    lam = 1.0 - decay if reading is Reading.HURL else decay
    return float(gamma - lam * gamma)


class Progress(enum.StrEnum):
    """The progress cost of the reward (module docstring)."""

    LATENCY = "latency"  # [R] 1 per second in the system: the return is the total latency
    PAPER = "paper"      # the seed's (1/T̂_j)(1 − f_jt) per epoch


@dataclass(frozen=True)
class EnvConfig:
    """Options of :class:`RoutingEnv` (see the module docstring).

    Attributes:
        prompt_edges: prompt-bucket edges (tokens); ``n_p = len + 1``.
        buckets: decode buckets of the predicted output length.
        completion_reward: ``r_w`` per finished request (in seconds of latency).
        reward_scale: multiplies the whole reward; ``None``: 1 (``calibrate_env`` sets it so
            that round robin's values are ≈ 3 in size).
        guidance: ``none`` / ``static`` / ``annealed``.
        reading: λ_k reading for ``annealed``: ``hurl`` or ``literal``.
        gamma: the seed's γ, the guidance weight's scale (not the discount: ``horizon_s``).
        beta_d: λ_k decay rate per episode.
        max_steps: decisions before the episode is truncated.
        impact: estimator parameters (default: calibrated from the cluster's timing model).
        max_wait_s: longest router-queue wait (s) after which waiting is masked.
        progress: ``latency`` (default, [R]) or ``paper`` (:class:`Progress`).
        horizon_s: discount horizon H (s): a step of duration Δt discounts the next value by
            ``e^{−Δt/H}``; ``None``: no discount.
        guidance_scale: ``s_h``, the factor on raw ``h``; ``None``: 1.
        wait_only_when_full: allow waiting only while every instance is full (module
            docstring).
        balance_factor: the bounded-loads factor c ≥ 1 on full instances (module docstring)
            [R]; ``None``: no cap.
    """

    prompt_edges: tuple[int, ...] = (256, 1024, 4096)
    buckets: BucketSpec = field(default_factory=BucketSpec)
    completion_reward: float = 1.0
    reward_scale: float | None = None
    guidance: Guidance | str = Guidance.NONE
    reading: Reading | str = Reading.HURL
    gamma: float = 0.99
    beta_d: float = 0.2
    max_steps: int = 100_000
    impact: ImpactParams | None = None
    max_wait_s: float = 2.0
    progress: Progress | str = Progress.LATENCY
    horizon_s: float | None = None
    guidance_scale: float | None = None
    wait_only_when_full: bool = True
    balance_factor: float | None = 1.25

    def __post_init__(self) -> None:
        object.__setattr__(self, "guidance",
                           check_option(Guidance, self.guidance, "EnvConfig.guidance"))
        object.__setattr__(self, "reading",
                           check_option(Reading, self.reading, "EnvConfig.reading"))
        object.__setattr__(self, "progress",
                           check_option(Progress, self.progress, "EnvConfig.progress"))
        check_real(self.max_wait_s, "EnvConfig.max_wait_s", unit="s", low=0.0)
        for name in ("reward_scale", "horizon_s"):
            if getattr(self, name) is not None:
                check_real(getattr(self, name), f"EnvConfig.{name}", low=0.0, low_open=True)
        if self.guidance_scale is not None:
            check_real(self.guidance_scale, "EnvConfig.guidance_scale", low=0.0)
        if self.balance_factor is not None:
            check_real(self.balance_factor, "EnvConfig.balance_factor (bounded loads)",
                       low=1.0)

    @property
    def balance(self) -> float:
        """The kernels' bounded-loads factor (0: no cap)."""
        return 0.0 if self.balance_factor is None else float(self.balance_factor)

    @property
    def discount_horizon_s(self) -> float:
        """H (s; inf: no discount)."""
        return math.inf if self.horizon_s is None else float(self.horizon_s)

    def discount(self, dt: float) -> float:
        """The value discount of a step that lasts ``dt`` seconds, ``e^{−dt/H}``."""
        return math.exp(-dt / self.horizon_s) if self.horizon_s is not None else 1.0


def observation_layout(n_instances: int, env: EnvConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(global_index, instance_index)``: the observation entries that describe the decision
    as a whole (queue, head request, ``T̂_c``, head wait) and, per instance (rows), its own
    entries (its ``P`` row, ``D`` row and capacity) — the layout written by
    :func:`~lbtheory.intelligent._envkernels.fill_observation`."""
    n_p, n_d, m = len(env.prompt_edges) + 1, env.buckets.n_buckets, n_instances
    k = 2 + n_d
    inst = np.array([[k + i * n_p + b for b in range(n_p)]
                     + [k + m * n_p + i * n_d + b for b in range(n_d)]
                     + [k + m * (n_p + n_d) + i] for i in range(m)], dtype=np.int32)
    end = k + m * (n_p + n_d + 1)
    glob = np.array([*range(k), end, end + 1], dtype=np.int32)
    return glob, inst


def load_sign(env: EnvConfig) -> np.ndarray:
    """Per entry of an instance's row in :func:`observation_layout`: +1 where a larger value
    means more load (its P and D counts), −1 where a smaller one does (its capacity)."""
    n_p, n_d = len(env.prompt_edges) + 1, env.buckets.n_buckets
    return np.array([1.0] * (n_p + n_d) + [-1.0])


def observation_size(n_instances: int, env: EnvConfig) -> int:
    """Length of the observation vector."""
    n_p, n_d = len(env.prompt_edges) + 1, env.buckets.n_buckets
    return 2 + n_d + n_instances * (n_p + n_d + 1) + 2


def observation(view: InstanceView, env: EnvConfig) -> np.ndarray:
    """The state vector of a decision (module docstring), from the router's view — the one
    definition the environment and the trained routers share (the vector itself is written
    by :func:`~lbtheory.intelligent._envkernels.fill_observation`, which the compiled
    environment calls too)."""
    cfg = view.config
    m, n_p, n_d = cfg.n_instances, len(env.prompt_edges) + 1, env.buckets.n_buckets
    obs = np.zeros(observation_size(m, env), dtype=np.float32)
    counts = np.zeros((n_p + n_d, m), dtype=np.int64)
    for i, ids in enumerate(view.instance_requests):
        if ids.size:
            counts[:n_p, i] = np.bincount(np.searchsorted(env.prompt_edges,
                                                          view.request_prompt[ids],
                                                          side="right"), minlength=n_p)
            counts[n_p:, i] = np.bincount(env.buckets.bucket(view.request_pred[ids]),
                                          minlength=n_d)
    q = view.queue_length
    head_bucket = int(env.buckets.bucket(np.array([view.queue_output_pred[0]]))[0]) if q else 0
    fill_observation(obs, q, int(view.queue_prompt[0]) if q else 0, head_bucket, counts, n_p,
                     np.asarray(view.n_running + view.n_waiting, dtype=np.int64),
                     np.asarray(view.kv_committed, dtype=np.int64), cfg.max_batch,
                     cfg.kv_budget_tokens, float(view.earliest_completion_s),
                     float(view.queue_wait_s[0]) if q else 0.0, float(env.max_wait_s))
    return obs


def episode_labels(prompt: np.ndarray, pred: np.ndarray, env: EnvConfig) -> np.ndarray:
    """Per-request histogram labels of the compiled environment (:mod:`._envkernels`): row 0
    the prompt bucket (of the prompt served, ``max(·, 1)`` tokens), row 1 ``n_p`` + the
    decode bucket of the predicted output."""
    n_p = len(env.prompt_edges) + 1
    return np.stack([np.searchsorted(env.prompt_edges, np.maximum(prompt, 1), side="right"),
                     n_p + env.buckets.bucket(np.asarray(pred, dtype=np.int64))])


def routing_mask(view: InstanceView, env: EnvConfig) -> np.ndarray:
    """The valid actions of the decision in ``view`` (bool, ``m + 1``; the last: wait) [R]:
    :func:`~lbtheory.intelligent._envkernels.fill_mask` (module docstring)."""
    cfg = view.config
    q = view.queue_length
    mask = np.ones(cfg.n_instances + 1, dtype=np.bool_)
    fill_mask(mask, q, float(view.queue_wait_s[0]) if q else 0.0, float(env.max_wait_s),
              np.asarray(view.n_running + view.n_waiting, dtype=np.int64),
              np.asarray(view.kv_committed, dtype=np.int64), cfg.max_batch,
              cfg.kv_budget_tokens, env.wait_only_when_full, env.balance)
    return mask


def wait_allowed(view: InstanceView, env: EnvConfig) -> bool:
    """The action mask's wait entry [R] (:func:`routing_mask`'s last entry)."""
    return bool(routing_mask(view, env)[-1])


def ideal_time_s(config: ClusterConfig, prompt: np.ndarray, output_pred: np.ndarray) -> np.ndarray:
    """T̂_j: seconds request j takes alone on an idle instance (prefill, then decodes)."""
    tm = config.timing
    return np.array([tm.iteration_time([p]) + max(d - 1, 0) * tm.iteration_time((), 1, p + d / 2)
                     for p, d in zip(prompt.tolist(), output_pred.tolist())])


class RoutingEnv(gym.Env):
    """Routing MDP over the instance simulator (module docstring).

    Args:
        workload_fn: ``seed -> Workload`` (a new workload per episode; seeded).
        config: the cluster.
        env_config: state/reward options.
        predict_fn: ``Workload -> predicted output tokens`` (default: the true lengths).
        engine: ``"auto"`` / ``"compiled"`` (default): a step is one call of the compiled
            kernel :func:`~lbtheory.intelligent._envkernels.env_step` (no view is built);
            ``"reference"``: the Python :class:`ClusterSim` and :func:`observation` of its view.
            Both give the same observations, rewards and episodes.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, workload_fn: Callable[[int], Workload], config: ClusterConfig,
                 env_config: EnvConfig | None = None,
                 predict_fn: Callable[[Workload], np.ndarray] | None = None, *,
                 engine: Engine | str = Engine.AUTO) -> None:
        self.workload_fn, self.cfg = workload_fn, config
        self.env_cfg = env_config or EnvConfig()
        self.predict_fn = predict_fn
        self.engine = check_option(Engine, engine, "engine")
        self.impact = self.env_cfg.impact or calibrate_impact(config.timing)
        self._impact_k = self.impact.kernel_params()
        e = self.env_cfg
        self._scale = 1.0 if e.reward_scale is None else float(e.reward_scale)
        self._s_h = 1.0 if e.guidance_scale is None else float(e.guidance_scale)
        m = config.n_instances
        self._obs_dim = observation_size(m, self.env_cfg)
        self.observation_space = gym.spaces.Box(-OBS_HIGH, OBS_HIGH, (self._obs_dim,),
                                                np.float32)
        self.action_space = gym.spaces.Discrete(m + 1)
        self.episode = 0
        self.sim: ClusterSim | CompiledClusterSim | None = None
        self._n_p = len(self.env_cfg.prompt_edges) + 1
        self._n_bins = self._n_p + self.env_cfg.buckets.n_buckets

    def set_episode(self, k: int) -> None:
        """Training episode index k (drives the guidance weight w_k)."""
        self.episode = int(k)

    @property
    def guidance_w(self) -> float:
        """Current guidance weight w_k."""
        e = self.env_cfg
        return guidance_weight(e.guidance, e.gamma, e.beta_d, self.episode, e.reading)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """New episode on ``workload_fn(seed)``; returns (observation, info)."""
        super().reset(seed=seed)
        wl = self.workload_fn(0 if seed is None else int(seed))
        pred = None if self.predict_fn is None else np.asarray(self.predict_fn(wl))
        if self.engine is Engine.REFERENCE:
            self.sim = make_sim(wl, self.cfg, pred, engine=Engine.REFERENCE)
            self._pred = np.asarray(self.sim.pred, dtype=float)
        else:
            self.sim = CompiledClusterSim(wl, self.cfg, pred, n_bins=self._n_bins, labels=(
                episode_labels(wl.prompt_tokens, np.maximum(wl.output_tokens, 1) if pred is None
                               else pred, self.env_cfg)))
            self._pred = self.sim.state.ri[_core.PRED].astype(float)
        self._first = np.zeros(1, np.int64)
        self._out = np.zeros(2)
        self._inv_ideal = 1.0 / ideal_time_s(self.cfg, wl.prompt_tokens, self._pred)
        self._arrival = wl.arrival_s
        self._t_charged = float(wl.arrival_s[0])
        self.steps = 0
        self._done = not self.sim.advance()
        obs, mask = self._observe()
        self._mask = mask
        return obs, {"action_mask": mask}

    def _observe(self) -> tuple[np.ndarray, np.ndarray]:
        """(observation, action mask) of the current decision."""
        if isinstance(self.sim, CompiledClusterSim):
            obs = np.empty(self._obs_dim, np.float32)
            mask = np.empty(self.cfg.n_instances + 1, np.bool_)
            observe_state(self.sim.state, obs, mask, self._n_p, self._n_bins,
                          float(self.env_cfg.max_wait_s), self.env_cfg.wait_only_when_full,
                          self.env_cfg.balance)
            return obs, mask
        return self.observe(), self.action_mask()

    def observe(self) -> np.ndarray:
        """The state vector at the current decision (:func:`observation` of the view; the
        compiled engine writes the same vector from its state)."""
        if isinstance(self.sim, CompiledClusterSim):
            return self._observe()[0]
        return observation(self.sim.view(), self.env_cfg)

    def action_mask(self) -> np.ndarray:
        """Valid actions now (bool, length m + 1; the last: wait): :func:`routing_mask`
        (module docstring)."""
        sim = self.sim
        if isinstance(sim, CompiledClusterSim):
            return self._observe()[1]
        if sim is None or not sim.queue:
            return np.ones(self.cfg.n_instances + 1, dtype=bool)
        return routing_mask(sim.view(), self.env_cfg)

    def _committed(self) -> np.ndarray:
        """The instances' committed (prompt + predicted output) tokens."""
        sim = self.sim
        if isinstance(sim, CompiledClusterSim):
            return sim.state.mi[_core.LOAD].astype(float)
        return np.array([i.load_tokens for i in sim.inst], dtype=float)

    def _guidance_h(self, a: int) -> float:
        """h of sending the head request to instance ``a`` (:func:`guidance_penalty`)."""
        sim = self.sim
        if isinstance(sim, CompiledClusterSim):
            return float(guidance_h(sim.state, a, self._impact_k))
        h = sim.queue[0]
        ins = sim.inst
        x, y = instance_loads(self.impact, self._committed(),
                              np.array([i.wait_tokens for i in ins], dtype=float),
                              np.array([i.kv_used for i in ins], dtype=float))
        return guidance_penalty(a, sim.p[h], sim.pred[h], x, self.impact, y)

    def _apply(self, a: int) -> tuple[bool, bool]:
        """Dispatch (``a`` an instance) or wait (``a = -1``), advancing when the action waits
        or the queue emptied and charging the elapsed interval into ``self._out``:
        ``(advanced, alive)``."""
        sim, e = self.sim, self.env_cfg
        t0, horizon = self._t_charged, e.discount_horizon_s
        paper = e.progress is Progress.PAPER
        if isinstance(sim, CompiledClusterSim):
            advanced, alive = env_step(sim.state, a, self._inv_ideal, self._pred, self._first,
                                       t0, horizon, paper, self._out)
            return bool(advanced), bool(alive)
        if a >= 0:
            sim.dispatch(0, a)
        if a >= 0 and sim.queue:
            return False, True
        alive = sim.advance()
        self._out[:] = charge_interval(
            self._arrival, np.array(sim.finish_s), np.array(sim.gen, dtype=np.int64),
            self._pred, self._inv_ideal, self._first, sim.next_arrival, t0,
            sim.now if alive else math.inf, horizon, paper, self.cfg.epoch_s)
        return True, alive

    def step(self, action: int):
        """Apply ``action``; returns (obs, reward, terminated, truncated, info)."""
        sim, e, m = self.sim, self.env_cfg, self.cfg.n_instances
        if sim is None or self._done:
            raise ParameterError("RoutingEnv.step called before reset() or after the episode "
                                 "ended")
        a = int(action)
        if not 0 <= a <= m:
            raise ParameterError(f"action {a} out of range [0, {m}]")
        if not self._mask[a]:  # the valid instance with the fewest committed tokens: JSQ-tokens
            a = int(jsq_pick(self._committed(), self._mask[:m], False, self.np_random))
        h = self._guidance_h(a) if a < m else 0.0
        reward = self.guidance_w * self._s_h * h
        t_decision = sim.now
        advanced, alive = self._apply(a if a < m else -1)
        progress = completions = 0.0
        discount = 1.0
        if advanced:
            progress, completions = float(self._out[0]), float(self._out[1])
            reward += e.completion_reward * completions - progress
            self._done = not alive
            self._t_charged = sim.now
            discount = e.discount(sim.now - t_decision) if alive else 0.0
        self.steps += 1
        truncated = not self._done and self.steps >= e.max_steps
        obs, mask = self._observe()
        self._mask = mask
        info = {"completed": sim.n_done, "time_s": sim.now, "action_mask": mask, "h": h,
                "progress": progress, "completions": completions, "discount": discount}
        return obs, float(reward * self._scale), self._done, truncated, info
