"""The routing MDP of THEORY §10 as a ``gymnasium.Env`` (so any RL library can train on it).

* **Decision**: the head-of-line request of the router queue at a decision epoch. Action
  ``a < m`` routes it to instance ``a`` (the next queued request is decided at the same epoch);
  ``a = m`` waits. Time moves to the next epoch with a non-empty queue after a wait or when the
  queue empties.
* **State** (float32, scaled to O(1)): router queue length / 64; head prompt tokens / 4096; head
  predicted decode bucket (one-hot, ``n_d``); per instance the counts of its requests by prompt
  bucket ``P ∈ ℝ^{m×n_p}`` and predicted decode bucket ``D ∈ ℝ^{m×n_d}`` (/16); capacities
  ``C_m = min(1 − n_m/max_batch, 1 − committed KV/budget)`` (clipped at −4); the estimated
  earliest completion time ``T̂_c`` (s / 10): min over instances of the fewest predicted
  remaining tokens × the instance's current decode iteration time [R]; the head request's time in
  the router queue / ``max_wait_s``.
* **Action mask** [R, not in the paper]: waiting is allowed only while the head request has waited
  less than ``max_wait_s``; without this a policy that always waits never ends an episode.
  :meth:`RoutingEnv.action_mask` gives the valid actions (also ``info["action_mask"]``); an invalid
  wait is replaced by routing to the instance with the fewest committed tokens.
* **Reward** (× ``reward_scale``), THEORY §10:
  ``r_t = − Σ_{j∈J} (1/T̂_j)(1 − f_jt) + r_w Σ w_mit + w_k h(s_t, s_{t+1})``. The first two
  terms are counted when time advances (the progress penalty once per elapsed epoch, at the end
  of the interval [R]); ``T̂_j`` is the request's time alone on an idle instance,
  ``f_jt = min(1, o_jt / d̂_j)``. ``h = r_mix(chosen) − max_l r_mix(l) ≤ 0``.

  **Sign [R]**: the paper writes ``−(γ − γ̃_k) h``, which with ``h ≤ 0`` would *reward* a
  worse-than-greedy choice; we add ``+w_k h`` (a penalty of ``w_k |h|``), the reading under which
  the term is "guidance". **Weight** ``w_k`` (:func:`guidance_weight`, episode ``k``):
  ``none`` → 0 (Baseline RL); ``static`` → γ (Workload-Aware RL); ``annealed`` (Workload-Guided
  RL) → ``γ − λ_k γ`` with ``λ_k = 1 − e^{−β_d k}`` (reading ``"hurl"``, Cheng et al. 2021:
  the guidance vanishes) or ``λ_k = e^{−β_d k}`` (reading ``"literal"``, the seed's formula: the
  guidance *grows* to γ). ``γ`` is the MDP discount.

**Engines.** On the compiled simulator (the default) a step is one call of the kernel
:func:`~lbtheory.intelligent._envkernels.env_step` — dispatch, advance, the progress-penalty
terms — and one of :func:`~lbtheory.intelligent._envkernels.observe_state`, which keeps the
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

from .._checks import check_option
from ..errors import ParameterError
from ..workloads import Workload
from . import _core
from ._compiled import CompiledClusterSim
from ._engine import ClusterConfig, ClusterSim, InstanceView
from ._envkernels import (
    MAX_WAIT_TOL,
    OBS_HIGH,
    env_step,
    fill_observation,
    guidance_h,
    observe_state,
)
from ._impact import ImpactParams, calibrate_impact, guidance_penalty
from ._predictor import BucketSpec
from ._simulate import Engine, make_sim

__all__ = ["EnvConfig", "RoutingEnv", "guidance_weight", "observation_size", "ideal_time_s",
           "observation", "wait_allowed", "Guidance", "Reading"]


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


@dataclass(frozen=True)
class EnvConfig:
    """Options of :class:`RoutingEnv` (see the module docstring).

    Attributes:
        prompt_edges: prompt-bucket edges (tokens); ``n_p = len + 1``.
        buckets: decode buckets of the predicted output length.
        completion_reward: ``r_w`` per finished request.
        reward_scale: multiplies the whole reward (keeps Q-values O(1)).
        guidance: ``none`` / ``static`` / ``annealed``.
        reading: λ_k reading for ``annealed``: ``hurl`` or ``literal``.
        gamma: MDP discount γ (also the guidance scale).
        beta_d: λ_k decay rate per episode.
        max_steps: decisions before the episode is truncated.
        max_wait_s: longest router-queue wait (s) after which waiting is masked.
        impact: estimator parameters (default: calibrated from the cluster's timing model).
    """

    prompt_edges: tuple[int, ...] = (256, 1024, 4096)
    buckets: BucketSpec = field(default_factory=BucketSpec)
    completion_reward: float = 1.0
    reward_scale: float = 0.01
    guidance: Guidance | str = Guidance.NONE
    reading: Reading | str = Reading.HURL
    gamma: float = 0.99
    beta_d: float = 0.2
    max_steps: int = 100_000
    impact: ImpactParams | None = None
    max_wait_s: float = 2.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "guidance",
                           check_option(Guidance, self.guidance, "EnvConfig.guidance"))
        object.__setattr__(self, "reading",
                           check_option(Reading, self.reading, "EnvConfig.reading"))


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


def wait_allowed(view: InstanceView, env: EnvConfig) -> bool:
    """The action mask's wait entry [R]: waiting is allowed only while the head request has
    waited less than ``max_wait_s``."""
    return not view.queue_length or view.queue_wait_s[0] < env.max_wait_s - MAX_WAIT_TOL


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
        m = config.n_instances
        self._obs_dim = observation_size(m, self.env_cfg)
        self.observation_space = gym.spaces.Box(-4.0, OBS_HIGH, (self._obs_dim,), np.float32)
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
            self._active = np.zeros(2, np.int64)
            self._terms = np.empty(len(wl))
        self._inv_ideal = 1.0 / ideal_time_s(self.cfg, wl.prompt_tokens, self._pred)
        self._arrival = wl.arrival_s
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
                          float(self.env_cfg.max_wait_s))
            return obs, mask
        return self.observe(), self.action_mask()

    def observe(self) -> np.ndarray:
        """The state vector at the current decision (:func:`observation` of the view; the
        compiled engine writes the same vector from its state)."""
        if isinstance(self.sim, CompiledClusterSim):
            return self._observe()[0]
        return observation(self.sim.view(), self.env_cfg)

    def action_mask(self) -> np.ndarray:
        """Valid actions now (bool, length m + 1): every instance; wait while the head request
        has waited less than ``max_wait_s``."""
        sim = self.sim
        if isinstance(sim, CompiledClusterSim):
            return self._observe()[1]
        mask = np.ones(self.cfg.n_instances + 1, dtype=bool)
        if sim is not None and sim.queue:
            mask[-1] = (sim.now - sim.arrival[sim.queue[0]]
                        < self.env_cfg.max_wait_s - MAX_WAIT_TOL)
        return mask

    def _progress_penalty(self) -> float:
        sim = self.sim
        now = sim.now
        gen = np.asarray(sim.gen, dtype=float)
        fin = np.asarray(sim.finish_s)
        active = (self._arrival <= now + 1e-12) & ~(fin <= now + 1e-12)
        f = np.minimum(1.0, gen[active] / np.maximum(self._pred[active], 1.0))
        return float(np.sum(self._inv_ideal[active] * (1.0 - f)))

    def _head_and_loads(self) -> tuple[int, int, np.ndarray]:
        """(prompt, predicted output) of the head request and the instances' token loads."""
        sim = self.sim
        if isinstance(sim, CompiledClusterSim):
            st = sim.state
            h = int(st.ri[_core.RQ, st.gi[_core.QH]])
            return (int(st.ri[_core.P, h]), int(st.ri[_core.PRED, h]),
                    st.mi[_core.LOAD].astype(float))
        h = sim.queue[0]
        return sim.p[h], sim.pred[h], np.array([i.load_tokens for i in sim.inst], dtype=float)

    def _guidance_h(self, a: int) -> float:
        """h of sending the head request to instance ``a`` (:func:`guidance_penalty`)."""
        if isinstance(self.sim, CompiledClusterSim):
            imp = self.impact
            return float(guidance_h(self.sim.state, a, np.array(
                [imp.grad1, imp.grad2, imp.epsilon_s, imp.alpha])))
        p, d, load = self._head_and_loads()
        return guidance_penalty(a, p, d, load, self.impact)

    def _apply(self, a: int) -> tuple[bool, bool, float]:
        """Dispatch (``a`` an instance) or wait (``a = -1``), advancing when the action waits
        or the queue emptied: ``(advanced, alive, progress penalty)``."""
        sim = self.sim
        if isinstance(sim, CompiledClusterSim):
            advanced, alive = env_step(sim.state, a, self._inv_ideal, self._pred, self._active,
                                       self._terms)
            pen = float(np.sum(self._terms[:self._active[1]])) if advanced else 0.0
            return bool(advanced), bool(alive), pen
        if a >= 0:
            sim.dispatch(0, a)
        if a >= 0 and sim.queue:
            return False, True, 0.0
        alive = sim.advance()
        return True, alive, self._progress_penalty()

    def step(self, action: int):
        """Apply ``action``; returns (obs, reward, terminated, truncated, info)."""
        sim, e, m = self.sim, self.env_cfg, self.cfg.n_instances
        if sim is None or self._done:
            raise ParameterError("RoutingEnv.step called before reset() or after the episode "
                                 "ended")
        a = int(action)
        if not 0 <= a <= m:
            raise ParameterError(f"action {a} out of range [0, {m}]")
        reward = 0.0
        if a == m and not self._mask[m]:
            a = int(np.argmin(self._head_and_loads()[2]))
        if a < m:
            w = self.guidance_w
            if w:
                reward += w * self._guidance_h(a)
        t0, done0 = sim.now, sim.n_done
        advanced, alive, penalty = self._apply(a if a < m else -1)
        if advanced:
            epochs = max(1, round((sim.now - t0) / self.cfg.epoch_s)) if alive else 1
            reward -= epochs * penalty
            reward += e.completion_reward * (sim.n_done - done0)
            self._done = not alive
        self.steps += 1
        truncated = not self._done and self.steps >= e.max_steps
        obs, mask = self._observe()
        self._mask = mask
        info = {"completed": sim.n_done, "time_s": sim.now, "action_mask": mask}
        return obs, float(reward * e.reward_scale), self._done, truncated, info
