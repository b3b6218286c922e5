"""Q-networks of the Double-DQN routers (equinox) and their fast decision path.

Two networks map a :class:`~lbtheory.intelligent.RoutingEnv` observation to ``m + 1`` action
values (route to instance 0 … m − 1, wait):

* :class:`SymmetricQNetwork` (the default) [R]: one **shared** per-instance head scores
  "route to instance i" from the global entries (queue, head request, ``T̂_c``, head wait), the
  instance's own entries (its P and D rows and capacity) and context pooled over all instances
  (the mean and the instance's difference from it); a separate head scores waiting from the
  global entries and the pooled mean and maximum; a value head ``V`` reads the same pooled
  input. The heads' outputs are advantages, combined as in a dueling network (Wang et al.
  2016): ``Q(s, a) = V(s) + A(s, a) − mean_a A(s, a)``, so the large state-dependent part of Q
  (|Q| ≈ 3) is learnt once and the small differences between choices (a wait costs one epoch,
  ≈1e-4 of |Q|) are not buried under it. Permuting the instances in the observation permutes
  the first ``m`` outputs the same way and leaves the wait value unchanged — exactly: each
  pooling (the features' mean and maximum, the advantages' mean) sorts over the instances
  before summing, so it sees the same numbers in the same order for every permutation, and the
  head is one function applied to each instance's row. The advantage heads start small
  (``head_init_scale``, 0.01 in training [R]): a randomly initialised head differs between two
  instances' states by ≈3% of |Q|, far more than the true gaps (≈0.1%), and that random
  preference for some load pattern, reinforced by the greedy policy, overloaded an instance in
  development runs. A choice's value is learnt as a
  function of that instance's state, so "the same choice on another instance" is the same
  function (an MLP with one output per
  instance learns a separate bias per instance, and its greedy policy collapsed onto one or
  two instances). Its size does not grow with ``m``.
* :class:`MonotoneQNetwork` (the default, ``network="monotone"``) [R]: the same symmetric
  structure, with one more constraint — the advantage of routing to an instance is ``−f(c, ℓ_i)``
  with ``ℓ_i`` the instance's load (its bucket counts and negated capacity) and ``f`` increasing
  in every load entry for every context ``c`` (the request at hand and the pooled state), so
  within one state an instance at least as loaded as another in every entry never scores
  higher. Why: the symmetric network removed the per-instance bias, but on the full Knowl 4/5
  runs (5 seeds × 10 episodes, issue 22) its greedy policies still sent > 1.5× the fair share to
  one instance in 5 of 8 router rows. The action gap (≈ 0.1 % of |Q|) sits far below the TD
  noise (the loss's ≈ 0.03 rms on |Q| ≈ 3: the next arrivals' sizes), so the learnt advantage
  is mostly noise, and where it happens to grow with an instance's load the greedy policy feeds
  that instance until it takes most requests. The constraint rules that loop out by
  construction; what is learnt is how much each kind of load costs for each kind of request
  (the weights on the load depend on ``c``: a long request may weigh long decodes more), which
  still finds the brute-force optimum of the small test problem, where the best routing sends a
  long request to the instance that already holds a long one
  (``tests/test_intelligent_learning.py``). Queueing theory's prior, not the seed's (an
  unconstrained MLP), hence [R].
* ``eqx.nn.MLP`` (``network="mlp"``): the seed's plain network, one output per action.

:func:`split_net` splits a network into arrays and a hashed :class:`Structure` so that
:func:`greedy_action` and the training step call ``jax.jit`` with the structure static.
"""

from __future__ import annotations

import functools
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["SymmetricQNetwork", "MonotoneQNetwork", "make_q_network", "q_values", "Structure",
           "combine", "split_net", "greedy_action"]


def _small_output(mlp: eqx.nn.MLP, scale: float) -> eqx.nn.MLP:
    """``mlp`` with its output layer × ``scale`` and bias 0 (an advantage head that starts
    small)."""
    last = mlp.layers[-1]
    return eqx.tree_at(lambda n: (n.layers[-1].weight, n.layers[-1].bias), mlp,
                       (last.weight * scale, jnp.zeros_like(last.bias)))


def _pool(obs: jax.Array, glob: tuple[int, ...], inst: tuple[tuple[int, ...], ...]):
    """``(g, x, mean, pooled)``: the global entries, the instances' rows ``(m, F)``, their mean
    and the pooled input ``[g, x̄, max_i x_i]`` — sums over sorted values, so every instance
    permutation gives the same numbers bit for bit."""
    g = obs[jnp.asarray(glob)]
    x = obs[jnp.asarray(inst)]
    srt = jnp.sort(x, axis=0)                          # each feature over the instances
    mean = jnp.sum(srt, axis=0) / x.shape[0]
    return g, x, mean, jnp.concatenate([g, mean, srt[-1]])


def _dueling(v: jax.Array, adv: jax.Array) -> jax.Array:
    """``Q = V + A − mean(A)`` (the mean over sorted advantages: permutation-exact)."""
    return v + (adv - jnp.sum(jnp.sort(adv)) / adv.shape[0])


class SymmetricQNetwork(eqx.Module):
    """Instance-symmetric Q-network (module docstring).

    Attributes:
        glob: observation indices of the global entries.
        inst: per instance (rows), the observation indices of its entries.
        head: the shared per-instance MLP, ``[g, x_i, x_i − x̄, x̄] → A(route to i)``.
        wait: the wait MLP, ``[g, x̄, max_i x_i] → A(wait)``.
        value: the state-value MLP, ``[g, x̄, max_i x_i] → V``.
    """

    glob: tuple[int, ...] = eqx.field(static=True)
    inst: tuple[tuple[int, ...], ...] = eqx.field(static=True)
    head: eqx.nn.MLP
    wait: eqx.nn.MLP
    value: eqx.nn.MLP

    def __init__(self, glob: np.ndarray, inst: np.ndarray, hidden: tuple[int, ...],
                 key: jax.Array, head_init_scale: float = 1.0) -> None:
        self.glob = tuple(int(i) for i in glob)
        self.inst = tuple(tuple(int(i) for i in row) for row in inst)
        n_g, n_f = len(self.glob), len(self.inst[0])
        k1, k2, k3 = jax.random.split(key, 3)
        self.head = eqx.nn.MLP(n_g + 3 * n_f, 1, width_size=hidden[0], depth=len(hidden),
                               activation=jax.nn.relu, key=k1)
        self.wait = eqx.nn.MLP(n_g + 2 * n_f, 1, width_size=hidden[0], depth=len(hidden),
                               activation=jax.nn.relu, key=k2)
        self.value = eqx.nn.MLP(n_g + 2 * n_f, 1, width_size=hidden[0], depth=len(hidden),
                                activation=jax.nn.relu, key=k3)
        if head_init_scale != 1.0:  # the advantage heads' output layer: scaled, no bias
            self.head = _small_output(self.head, head_init_scale)
            self.wait = _small_output(self.wait, head_init_scale)

    def __call__(self, obs: jax.Array) -> jax.Array:
        g, x, mean, pooled = _pool(obs, self.glob, self.inst)
        m = x.shape[0]
        rows = jnp.concatenate([jnp.broadcast_to(g, (m, g.shape[0])), x, x - mean,
                                jnp.broadcast_to(mean, x.shape)], axis=1)
        adv = jnp.concatenate([jax.vmap(self.head)(rows)[:, 0], self.wait(pooled)])
        return _dueling(self.value(pooled)[0], adv)


def _positive(raw: jax.Array) -> jax.Array:
    """The constrained weights of :class:`MonotoneQNetwork` (> 0)."""
    return jax.nn.softplus(raw)


def _inverse_positive(w: np.ndarray) -> np.ndarray:
    """``raw`` with ``_positive(raw) = w`` (``w > 0``)."""
    return np.log(np.expm1(w))


class _MonotoneCost(eqx.Module):
    """``f(c, ℓ)``: strictly increasing and convex in the load vector ``ℓ`` for every context
    ``c``. First layer ``softplus(W_c c + W_ℓ(c) ℓ + b)`` with ``W_ℓ(c) = softplus(R + U c) > 0``
    (the load's weights depend on the context, so a request can weigh kinds of load
    differently); then softplus-positive weights and softplus activations (increasing and
    convex, so composition keeps both)."""

    w_ctx: jax.Array
    raw_load: jax.Array
    u_load: jax.Array
    b1: jax.Array
    raws: tuple[jax.Array, ...]
    biases: tuple[jax.Array, ...]

    def __init__(self, n_ctx: int, n_load: int, hidden: tuple[int, ...], key: jax.Array,
                 out_scale: float) -> None:
        keys = jax.random.split(key, len(hidden) + 2)
        h0 = hidden[0]
        lim = 1.0 / np.sqrt(n_ctx + n_load)
        self.w_ctx = jax.random.uniform(keys[0], (h0, n_ctx), minval=-lim, maxval=lim)
        # positive weights ≈ U(0.5, 1.5) / fan-in: every unit starts load-sensitive
        self.raw_load = jnp.asarray(_inverse_positive(np.asarray(jax.random.uniform(
            keys[1], (h0, n_load), minval=0.5, maxval=1.5)) / (n_ctx + n_load)),
            dtype=jnp.float32)
        self.u_load = jnp.zeros((h0 * n_load, n_ctx))
        self.b1 = jnp.zeros(h0)
        widths = [*hidden, 1]
        raws, biases = [], []
        for k in range(len(hidden)):
            fan_in, fan_out = widths[k], widths[k + 1]
            scale = (out_scale if k == len(hidden) - 1 else 1.0) / fan_in
            w = np.asarray(jax.random.uniform(keys[2 + k], (fan_out, fan_in), minval=0.5,
                                              maxval=1.5)) * scale
            raws.append(jnp.asarray(_inverse_positive(w), dtype=jnp.float32))
            biases.append(jnp.zeros(fan_out) if k < len(hidden) - 1 else jnp.zeros(1))
        self.raws, self.biases = tuple(raws), tuple(biases)

    def __call__(self, ctx: jax.Array, load: jax.Array) -> jax.Array:
        w_load = _positive(self.raw_load + (self.u_load @ ctx).reshape(self.raw_load.shape))
        h = jax.nn.softplus(self.w_ctx @ ctx + w_load @ load + self.b1)
        for k, (raw, b) in enumerate(zip(self.raws, self.biases, strict=True)):
            h = _positive(raw) @ h + b
            if k < len(self.raws) - 1:
                h = jax.nn.softplus(h)
        return h[0]


class MonotoneQNetwork(eqx.Module):
    """Instance-symmetric Q-network whose advantage of routing to an instance cannot increase
    with that instance's load [R] (module docstring).

    ``A(s, i) = −f(c(s), ℓ_i)`` with ``ℓ_i`` the instance's load vector (its P and D counts and
    its negated capacity: each entry larger = more loaded), ``c(s)`` a context that is the same
    for every instance (the global entries and the instances' pooled mean and maximum) and ``f``
    non-decreasing and convex in ``ℓ`` (:class:`_MonotoneCost`); wait and value heads as in
    :class:`SymmetricQNetwork`. In one state, an instance at least as loaded as another in every
    entry never has the larger value, so a greedy policy cannot feed one instance because it
    already holds more; what the network learns is how much each kind of load costs, for the
    request at hand.

    Attributes:
        glob, inst: as in :class:`SymmetricQNetwork`.
        sign: per instance entry, +1 where larger is more load, −1 where smaller is (capacity).
        cost: the shared cost ``f``; wait, value: MLPs of the pooled input.
    """

    glob: tuple[int, ...] = eqx.field(static=True)
    inst: tuple[tuple[int, ...], ...] = eqx.field(static=True)
    sign: tuple[float, ...] = eqx.field(static=True)
    cost: _MonotoneCost
    wait: eqx.nn.MLP
    value: eqx.nn.MLP

    def __init__(self, glob: np.ndarray, inst: np.ndarray, sign: np.ndarray,
                 hidden: tuple[int, ...], key: jax.Array, head_init_scale: float = 1.0) -> None:
        self.glob = tuple(int(i) for i in glob)
        self.inst = tuple(tuple(int(i) for i in row) for row in inst)
        self.sign = tuple(float(x) for x in sign)
        n_g, n_f = len(self.glob), len(self.inst[0])
        if len(self.sign) != n_f:
            raise ValueError(f"sign has {len(self.sign)} entries, expected {n_f}")
        k1, k2, k3 = jax.random.split(key, 3)
        self.cost = _MonotoneCost(n_g + 2 * n_f, n_f, hidden, k1, head_init_scale)
        self.wait = _small_output(eqx.nn.MLP(n_g + 2 * n_f, 1, width_size=hidden[0],
                                             depth=len(hidden), activation=jax.nn.relu,
                                             key=k2), head_init_scale)
        self.value = eqx.nn.MLP(n_g + 2 * n_f, 1, width_size=hidden[0], depth=len(hidden),
                                activation=jax.nn.relu, key=k3)

    def __call__(self, obs: jax.Array) -> jax.Array:
        _, x, _, pooled = _pool(obs, self.glob, self.inst)
        load = x * jnp.asarray(self.sign)
        adv = jnp.concatenate([-jax.vmap(lambda li: self.cost(pooled, li))(load),
                               self.wait(pooled)])
        return _dueling(self.value(pooled)[0], adv)


def make_q_network(obs_dim: int, n_actions: int, hidden: tuple[int, ...], key: jax.Array, *,
                   layout: tuple[np.ndarray, np.ndarray] | None = None,
                   head_init_scale: float = 1.0, load_sign: np.ndarray | None = None) -> Any:
    """The Q-network: with ``layout`` (``observation_layout``'s ``(global, per instance)``
    indices) a :class:`SymmetricQNetwork` with ``n_actions = m + 1`` (its advantage heads'
    output layer initialised × ``head_init_scale``, bias 0); without, an equinox MLP from an
    observation to ``n_actions`` action values."""
    if layout is None:
        return eqx.nn.MLP(obs_dim, n_actions, width_size=hidden[0], depth=len(hidden),
                          activation=jax.nn.relu, key=key)
    glob, inst = layout
    if inst.shape[0] + 1 != n_actions:
        raise ValueError(f"layout has {inst.shape[0]} instances, expected {n_actions - 1}")
    if load_sign is not None:
        return MonotoneQNetwork(glob, inst, load_sign, hidden, key, head_init_scale)
    return SymmetricQNetwork(glob, inst, hidden, key, head_init_scale)


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
