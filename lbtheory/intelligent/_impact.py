"""Workload-impact estimator of THEORY §10 (Knowl 1 of arXiv 2408.13510) — the one definition.

For request ``i`` (prompt ``p_i``, predicted decode ``d_i`` tokens) and instance ``m``::

    T_p   = grad_1 · p_i² + g · X_m                             (s)
    r_p   = 1 if T_p ≤ ε else 1 − T_p / ε
    r_d   = − grad_2 · (Y_m + p_i + d_i)
    r_mix = α r_p + (1 − α) r_d
    h     = r_mix(chosen instance) − max_l r_mix(l)             (≤ 0; 0 for the greedy choice)

**Readings** of the instance's load (:class:`MixReading`). The seed writes one sum
``Σ_j (p_j^m + d_j^m)`` over "the requests executing on m" in both terms. Read literally
(``"literal"``: ``X_m = Y_m = L_m``, the committed prompt + predicted output tokens, ``g =
grad_1``) both terms only fall as ``L_m`` grows, so ``argmax_m r_mix = argmin_m L_m`` — least
loaded routing, the decode balancer, whatever the request. [R] ``"split"`` (the default): each
term sees the load of its own phase — the prompt term the instance's **prefill backlog**
``X_m`` (prompt + regenerated tokens of the requests waiting for a prefill, which an FCFS
batcher prefills before ``i``'s prompt; ``g`` = the per-token prefill slope, s/token), the
decode term its **decode context** ``Y_m`` (the KV tokens of the running requests, which every
decode iteration reads). The request's own shape then decides: a short prompt keeps
``T_p ≤ ε`` on lightly backlogged instances, where the decode term picks the smallest context;
a long prompt (``grad_1 p_i² + g X_m > ε``) is steered away from prefill backlogs.

Calibration from the iteration-time model [R] (the paper says only "empirical gradients"):

* ``grad_2`` = ``context_s_per_token``: the decode iteration's time per context token, exactly.
* ``grad_1`` = the least-squares slope through the origin of the prefill iteration's extra time
  ``y(p, C) = t([p], 0, C) − t([], 0, 0) = a_p p + a_q p² + a_c C`` against the formula's feature
  ``x = p² + C`` over a grid of prompts ``p`` and contexts ``C``: ``grad_1 = Σ x y / Σ x²``.
* ``g`` (``"split"``) = ``prefill_s_per_token``: the backlog's prefill time per token.
* ``ε`` = ``y(p_ref, 0)``: the extra time of prefilling a reference prompt (default 2048 tokens)
  on an idle instance.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit, vectorize

from .._checks import check_option, check_real
from ..errors import ModelError
from ._timing import IterationTimeModel

__all__ = ["ImpactParams", "MixReading", "prompt_impact_s", "prompt_reward", "decode_reward",
           "mixing_reward", "guidance_penalty", "calibrate_impact", "mixing_reward_scalar",
           "instance_loads", "prompt_impact_scalar", "prompt_reward_scalar",
           "decode_reward_scalar", "mixing_argmax", "guidance_penalty_kernel"]


class MixReading(enum.StrEnum):
    """Which per-instance loads the estimator's two terms see (module docstring)."""

    #: [R] prefill backlog in the prompt term, decode context in the decode term.
    SPLIT = "split"
    #: the committed tokens L_m in both terms (argmax r_mix = least loaded).
    LITERAL = "literal"


@dataclass(frozen=True)
class ImpactParams:
    """Parameters of the estimator.

    Attributes:
        grad1: prefill execution gradient (s per token-feature unit).
        grad2: decode execution gradient (s/token).
        epsilon_s: prompt-latency threshold ε (s).
        alpha: weight α ∈ (0, 1) of the prompt term.
        grad_backlog: ``g``, the prompt term's gradient on its load (s/token); ``None``:
            ``grad1`` (the formula's one gradient).
        reading: :class:`MixReading` (or its value): which loads the terms see.
    """

    grad1: float
    grad2: float
    epsilon_s: float
    alpha: float = 0.5
    grad_backlog: float | None = None
    reading: MixReading | str = MixReading.SPLIT

    @property
    def g_load(self) -> float:
        """``g``: ``grad_backlog``, or ``grad1`` when unset."""
        return self.grad1 if self.grad_backlog is None else float(self.grad_backlog)

    def kernel_params(self) -> np.ndarray:
        """``[grad1, g, grad2, ε, α, reading (0 literal, 1 split)]`` for the compiled kernels."""
        return np.array([self.grad1, self.g_load, self.grad2, self.epsilon_s, self.alpha,
                         float(self.reading is MixReading.SPLIT)])

    def __post_init__(self) -> None:
        object.__setattr__(self, "reading", check_option(MixReading, self.reading,
                                                         "ImpactParams.reading",
                                                         error=ModelError))
        if self.grad_backlog is not None:
            check_real(self.grad_backlog, "ImpactParams.grad_backlog", unit="s/token", low=0.0,
                       error=ModelError)
        check_real(self.grad1, "ImpactParams.grad1", low=0.0, error=ModelError)
        check_real(self.grad2, "ImpactParams.grad2", low=0.0, error=ModelError)
        check_real(self.epsilon_s, "ImpactParams.epsilon_s", unit="s", low=0.0, low_open=True,
                   error=ModelError)
        check_real(self.alpha, "ImpactParams.alpha", low=0.0, high=1.0, low_open=True,
                   high_open=True, error=ModelError)


def instance_loads(params: ImpactParams, committed: np.ndarray, backlog: np.ndarray,
                   context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(X, Y)``, the loads of the prompt and decode terms per instance under
    ``params.reading``: ``(committed, committed)`` (literal) or ``(backlog, context)`` (split)
    — committed prompt + predicted output, waiting prefill and running-context tokens."""
    if params.reading is MixReading.LITERAL:
        return committed, committed
    return backlog, context


# -- the formulas, one numba function each: the Python functions below broadcast them (numpy
# ufuncs), the compiled engine's kernels call them per instance, so both engines evaluate the
# same operations in the same order.
@njit(cache=True)
def prompt_impact_scalar(p_i: float, x_load: float, grad1: float, g_load: float) -> float:
    """T_p = grad_1 · p_i² + g · X (s) for one instance."""
    return grad1 * (p_i * p_i) + g_load * x_load


@njit(cache=True)
def prompt_reward_scalar(t_p: float, epsilon_s: float) -> float:
    """r_p = 1 if T_p ≤ ε else 1 − T_p/ε."""
    return 1.0 if t_p <= epsilon_s else 1.0 - t_p / epsilon_s


@njit(cache=True)
def decode_reward_scalar(p_i: float, d_i: float, y_load: float, grad2: float) -> float:
    """r_d = − grad_2 · (Y + p_i + d_i) for one instance."""
    return -grad2 * (y_load + p_i + d_i)


@njit(cache=True)
def mixing_reward_scalar(p_i: float, d_i: float, x_load: float, y_load: float, grad1: float,
                         g_load: float, grad2: float, epsilon_s: float, alpha: float) -> float:
    """r_mix = α r_p + (1 − α) r_d of request (p_i, d_i) on one instance with loads ``X``,
    ``Y`` (tokens) — the one definition :func:`mixing_reward` and the kernels evaluate."""
    r_p = prompt_reward_scalar(prompt_impact_scalar(p_i, x_load, grad1, g_load), epsilon_s)
    return alpha * r_p + (1.0 - alpha) * decode_reward_scalar(p_i, d_i, y_load, grad2)


_F = "float64"


@vectorize([f"{_F}({_F}, {_F}, {_F}, {_F})"], cache=True)
def _prompt_impact_u(p_i, x_load, grad1, g_load):
    return prompt_impact_scalar(p_i, x_load, grad1, g_load)


@vectorize([f"{_F}({_F}, {_F})"], cache=True)
def _prompt_reward_u(t_p, epsilon_s):
    return prompt_reward_scalar(t_p, epsilon_s)


@vectorize([f"{_F}({_F}, {_F}, {_F}, {_F})"], cache=True)
def _decode_reward_u(p_i, d_i, y_load, grad2):
    return decode_reward_scalar(p_i, d_i, y_load, grad2)


@vectorize([f"{_F}({', '.join([_F] * 9)})"], cache=True)
def _mixing_reward_u(p_i, d_i, x_load, y_load, grad1, g_load, grad2, epsilon_s, alpha):
    return mixing_reward_scalar(p_i, d_i, x_load, y_load, grad1, g_load, grad2, epsilon_s, alpha)


@njit(cache=True)
def mixing_argmax(p_i, d_i, x_load, y_load, params):
    """The greedy mixing choice ``argmax_m r_mix`` (the first of equal rewards) for loads
    ``x_load``, ``y_load`` per instance (``params``: :meth:`ImpactParams.kernel_params`)."""
    best = -np.inf
    best_m = 0
    for m in range(x_load.size):
        r = mixing_reward_scalar(float(p_i), float(d_i), float(x_load[m]), float(y_load[m]),
                                 params[0], params[1], params[2], params[3], params[4])
        if m == 0 or r > best:
            best, best_m = r, m
    return best_m


@njit(cache=True)
def guidance_penalty_kernel(choice, p_i, d_i, x_load, y_load, params):
    """h = r_mix(choice) − max_l r_mix(l) for loads ``x_load``, ``y_load`` per instance
    (``params``: :meth:`ImpactParams.kernel_params`) — :func:`guidance_penalty`, both
    engines."""
    best = -np.inf
    mine = 0.0
    for m in range(x_load.size):
        r = mixing_reward_scalar(float(p_i), float(d_i), float(x_load[m]), float(y_load[m]),
                                 params[0], params[1], params[2], params[3], params[4])
        if r > best:
            best = r
        if m == choice:
            mine = r
    return mine - best


def prompt_impact_s(p_i: float, load_tokens: np.ndarray | float, params: ImpactParams):
    """T_p = grad_1 · p_i² + g · X_m (s), per instance when ``load_tokens`` (X) is an array."""
    return _prompt_impact_u(float(p_i), load_tokens, params.grad1, params.g_load)


def prompt_reward(t_p: np.ndarray | float, params: ImpactParams):
    """r_p: 1 if T_p ≤ ε else 1 − T_p/ε."""
    return _prompt_reward_u(t_p, params.epsilon_s)


def decode_reward(p_i: float, d_i: float, load_tokens: np.ndarray | float,
                  params: ImpactParams):
    """r_d = − grad_2 · (Y_m + p_i + d_i) (``load_tokens`` = Y)."""
    return _decode_reward_u(float(p_i), float(d_i), load_tokens, params.grad2)


def mixing_reward(p_i: float, d_i: float, load_tokens: np.ndarray | float,
                  params: ImpactParams, decode_load: np.ndarray | float | None = None):
    """r_mix = α r_p + (1 − α) r_d for sending request (p_i, d_i) to each instance, with the
    prompt term's load ``X = load_tokens`` and the decode term's ``Y = decode_load`` (default
    ``X``; :func:`instance_loads` gives both for a reading): :func:`mixing_reward_scalar`
    broadcast over the loads."""
    k = params.kernel_params()
    return _mixing_reward_u(float(p_i), float(d_i), load_tokens,
                            load_tokens if decode_load is None else decode_load, *k[:5])


def guidance_penalty(choice: int, p_i: float, d_i: float, load_tokens: np.ndarray,
                     params: ImpactParams, decode_load: np.ndarray | None = None) -> float:
    """h = r_mix(choice) − max_l r_mix(l) (≤ 0): how much worse than the greedy mixing choice
    (loads as in :func:`mixing_reward`; :func:`guidance_penalty_kernel`)."""
    x = np.asarray(load_tokens, dtype=float)
    y = x if decode_load is None else np.asarray(decode_load, dtype=float)
    return float(guidance_penalty_kernel(int(choice), float(p_i), float(d_i), x, y,
                                         params.kernel_params()))


def calibrate_impact(timing: IterationTimeModel, *, alpha: float = 0.5,
                     reference_prompt_tokens: int = 2048,
                     prompt_grid: Sequence[float] | None = None,
                     context_grid: Sequence[float] | None = None,
                     reading: MixReading | str = MixReading.SPLIT) -> ImpactParams:
    """grad_1, grad_2, g and ε from an iteration-time model (module docstring; [R]).

    Args:
        timing: the instance's iteration-time model.
        alpha: α of r_mix.
        reading: ``"split"`` (g = the per-token prefill slope) or ``"literal"`` (g = grad_1).
        reference_prompt_tokens: the prompt whose idle prefill time is ε (tokens).
        prompt_grid: prompts of the grad_1 fit (tokens; default 64 … 8192, 32 points).
        context_grid: contexts of the grad_1 fit (tokens; default 0 … 32768, 17 points).
    """
    p = np.linspace(64, 8192, 32) if prompt_grid is None else np.asarray(prompt_grid, float)
    c = np.linspace(0, 32768, 17) if context_grid is None else np.asarray(context_grid, float)
    pp, cc = np.meshgrid(p, c, indexing="ij")
    base = timing.iteration_time()
    y = np.array([timing.iteration_time([a], 0, b) - base for a, b in zip(pp.ravel(), cc.ravel())])
    x = pp.ravel() ** 2 + cc.ravel()
    grad1 = float(x @ y / (x @ x))
    eps = timing.iteration_time([reference_prompt_tokens]) - base
    reading = check_option(MixReading, reading, "reading")
    backlog = timing.prefill_s_per_token if reading is MixReading.SPLIT else None
    return ImpactParams(grad1=grad1, grad2=timing.context_s_per_token, epsilon_s=eps, alpha=alpha,
                        grad_backlog=backlog, reading=reading)
