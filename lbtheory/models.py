"""Service models: a cell's mean serving latency ℓ(N) (seconds) at N requests in flight.

Everything else is derived here, once (THEORY §4): the processing rate μ(N) = N/ℓ(N) (req/s),
its supremum μ̄, its derivative μ'(N) = (ℓ − Nℓ')/ℓ², and its inverse μ⁻¹(z). Each formula uses
:func:`lbtheory._array.xp`, so the same definition runs on numpy arrays (routers, equilibria) and is
traced by JAX (fluid model). Models are frozen dataclasses registered as JAX pytrees: their numeric
fields are differentiable leaves, and may be arrays (one value per cell) for batched evaluation.

Families:

* :class:`MM1Latency` — ℓ(N) = (N + K)/μ̄, μ(N) = μ̄N/(N + K) (THEORY §4 "hyperbolic"; K = 1 is the
  M/M/1 mean-value model). Exact closed forms everywhere.
* :class:`SoftplusLatency` — ℓ(N) = θ0 + θ1·θ3·log(1 + e^{(N − θ2)/θ3}): DLB's fitted shape (flat,
  then linear; μ̄ = 1/θ1). Parameters are **[R]** reconstructed (THEORY §4, §13.7). Requires
  θ0 > θ1·θ2 (Assumption 1 and slow variation (4), THEORY §4 [D]).
* :class:`ExpSaturation` — μ(N) = μ̄(1 − e^{−N/K}) (THEORY §4 [R]); its gradient cost violates (4).
* User models: subclass :class:`ServiceModel`, implement :meth:`~ServiceModel.latency` and
  :attr:`~ServiceModel.max_rate` (optionally :meth:`~ServiceModel.latency_prime` and
  :meth:`~ServiceModel.inverse_rate`), and decorate with :func:`service_model`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np

from ._array import is_concrete, is_jax, sigmoid, softplus, when_jax_loaded, xp
from ._checks import check_real
from .errors import ModelError

__all__ = [
    "ServiceModel", "MM1Latency", "SoftplusLatency", "ExpSaturation", "service_model",
    "check_assumption_1", "MODEL_REGISTRY", "model_from_dict", "model_to_dict", "ModelBank",
]


def _real(value: Any, name: str, **rules: Any) -> float:
    """:func:`~lbtheory._checks.check_real` raising :class:`ModelError` (a model field)."""
    return check_real(value, name, error=ModelError, **rules)


#: Relative accuracy of the numerical inverse μ⁻¹ (THEORY: 1e-12 requested).
INVERSE_RTOL = 1e-13


class ServiceModel:
    """Base class (the protocol) of a cell's service model.

    Subclasses are frozen dataclasses whose fields are the model parameters. Required:
    :meth:`latency` (seconds) and :attr:`max_rate` (req/s). Everything else has a generic
    definition that subclasses may override with a closed form.
    """

    #: Name used in topology files (``service: {model: NAME, ...}``).
    name: ClassVar[str] = ""

    # -- required -------------------------------------------------------------------------
    def latency(self, N: Any) -> Any:
        """Mean serving latency ℓ(N) in seconds at N requests in flight."""
        raise NotImplementedError

    @property
    def max_rate(self) -> Any:
        """μ̄ = sup_N μ(N), in req/s."""
        raise NotImplementedError

    # -- derived ---------------------------------------------------------------------------
    def latency_prime(self, N: Any) -> Any:
        """dℓ/dN in s/request (generic: JAX autodiff of :meth:`latency`)."""
        import jax
        import jax.numpy as jnp

        f = jax.vmap(jax.grad(lambda n: jnp.asarray(self.latency(n), dtype=jnp.result_type(n))))
        if is_jax(N):
            return f(N.reshape(-1)).reshape(N.shape)
        with jax.enable_x64(True):  # numpy callers get float64 accuracy (no global state change)
            arr = jnp.asarray(N, dtype=jnp.float64)
            return np.asarray(f(arr.reshape(-1)).reshape(arr.shape))

    def latency_second(self, N: Any) -> Any:
        """d²ℓ/dN² (generic: JAX autodiff of :meth:`latency_prime`)."""
        import jax
        import jax.numpy as jnp

        f = jax.vmap(jax.grad(lambda n: jnp.asarray(self.latency_prime(n),
                                                    dtype=jnp.result_type(n))))
        if is_jax(N):
            return f(N.reshape(-1)).reshape(N.shape)
        with jax.enable_x64(True):
            arr = jnp.asarray(N, dtype=jnp.float64)
            return np.asarray(f(arr.reshape(-1)).reshape(arr.shape))

    def rate(self, N: Any) -> Any:
        """Processing rate μ(N) = N/ℓ(N) in req/s."""
        return N / self.latency(N)

    def rate_second(self, N: Any) -> Any:
        """μ''(N) = −Nℓ''/ℓ² − 2(ℓ − Nℓ')ℓ'/ℓ³."""
        lat, d1 = self.latency(N), self.latency_prime(N)
        return -N * self.latency_second(N) / lat**2 - 2.0 * (lat - N * d1) * d1 / lat**3

    def gradient_cost_prime(self, N: Any) -> Any:
        """d/dN of the gradient cost 1/μ'(N): −μ''/μ'² (s per request)."""
        return -self.rate_second(N) / self.rate_prime(N) ** 2

    def rate_prime(self, N: Any) -> Any:
        """μ'(N) = (ℓ − Nℓ')/ℓ² in req/s per request."""
        lat = self.latency(N)
        return (lat - N * self.latency_prime(N)) / lat**2

    def inverse_rate(self, z: Any) -> Any:
        """μ⁻¹(z): the workload N (requests) whose processing rate is z req/s; +inf for z ≥ μ̄.

        Generic: safeguarded Newton on h(N) = N − z·ℓ(N) inside a bisection bracket, to
        relative accuracy 1e-13 (numpy only).
        """
        return _inverse_rate_numeric(self, z)

    def gradient_cost(self, N: Any) -> Any:
        """Gradient cost f(N) = 1/μ'(N) in seconds (THEORY §4)."""
        return 1.0 / self.rate_prime(N)

    def parameters(self) -> dict[str, Any]:
        """The model's parameters as a dict (field name → value)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def _check(self) -> None:
        """Validate parameters (named in messages); called at construction with concrete values."""


def _register_pytree(cls: type, fields: list[str]) -> None:
    """Register a service-model dataclass as a JAX pytree (run once JAX is imported)."""
    import jax

    jax.tree_util.register_dataclass(cls, data_fields=fields, meta_fields=[])


def service_model(cls: type | None = None, *, replace: bool = False) -> Any:
    """Class decorator: frozen dataclass + JAX pytree + Assumption-1 check at construction.

    A class with a non-empty ``name`` is registered in :data:`MODEL_REGISTRY` (topology files
    refer to it by that name). Use ``@service_model`` or ``@service_model(replace=True)``.

    Args:
        cls: the model class.
        replace: allow the class to take over a name another class already registered.

    Raises:
        ModelError: ``name`` is already registered by a different class and ``replace`` is
            False (re-running the same definition, e.g. a module reload, is allowed).
    """
    if cls is None:
        return lambda c: service_model(c, replace=replace)
    orig_post = cls.__dict__.get("__post_init__")

    def __post_init__(self: ServiceModel) -> None:
        if orig_post is not None:
            orig_post(self)
        names = [f.name for f in dataclasses.fields(self)]  # type: ignore[arg-type]
        vals = [getattr(self, f) for f in names]
        for f, v in zip(names, vals):  # neither a number, an array nor a tracer
            if isinstance(v, (str, bytes, dict, set, type(None))):
                _real(v, f"{type(self).__name__}.{f}")
        if is_concrete(*vals) and all(np.ndim(v) == 0 for v in vals):
            for f, v in zip(names, vals):
                _real(v, f"{type(self).__name__}.{f}")
            self._check()

    cls.__post_init__ = __post_init__
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    when_jax_loaded(lambda: _register_pytree(cls, fields))
    if cls.name:
        old = MODEL_REGISTRY.get(cls.name)
        same = old is not None and (old.__module__, old.__qualname__) == \
            (cls.__module__, cls.__qualname__)
        if old is not None and not same and not replace:
            raise ModelError(f"service model name {cls.name!r} is already registered by "
                             f"{old.__module__}.{old.__qualname__}; pick another name or pass "
                             f"replace=True to service_model")
        MODEL_REGISTRY[cls.name] = cls
    return cls


MODEL_REGISTRY: dict[str, type] = {}


@service_model
class MM1Latency(ServiceModel):
    """Hyperbolic ("M/M/1 with K") model: ℓ(N) = (N + K)/μ̄ s, μ(N) = μ̄N/(N + K) req/s.

    Args:
        capacity: μ̄, the saturation rate (req/s).
        K: half-saturation workload (requests); K = 1 is the M/M/1 mean-value model.

    Example:
        >>> m = MM1Latency(capacity=10.0, K=5.0)
        >>> float(m.inverse_rate(7.0))  # Kz/(μ̄ − z)
        11.666666666666666
    """

    capacity: Any
    K: Any
    name: ClassVar[str] = "mm1"

    def _check(self) -> None:
        _real(self.capacity, "MM1Latency.capacity", unit="req/s", low=0.0, low_open=True)
        _real(self.K, "MM1Latency.K", unit="requests", low=0.0, low_open=True)

    @property
    def max_rate(self) -> Any:
        return self.capacity

    def latency(self, N: Any) -> Any:
        return (N + self.K) / self.capacity

    def latency_prime(self, N: Any) -> Any:
        return xp(N).zeros_like(N * 1.0) + 1.0 / self.capacity

    def rate(self, N: Any) -> Any:
        return self.capacity * N / (N + self.K)

    def rate_prime(self, N: Any) -> Any:
        return self.capacity * self.K / (N + self.K) ** 2

    def gradient_cost(self, N: Any) -> Any:
        return (N + self.K) ** 2 / (self.capacity * self.K)

    def latency_second(self, N: Any) -> Any:
        return xp(N).zeros_like(N * 1.0)

    def rate_second(self, N: Any) -> Any:
        return -2.0 * self.capacity * self.K / (N + self.K) ** 3

    def gradient_cost_prime(self, N: Any) -> Any:
        return 2.0 * (N + self.K) / (self.capacity * self.K)

    def inverse_rate(self, z: Any) -> Any:
        m = xp(z)
        z = m.asarray(z, dtype=float) if not is_jax(z) else z
        gap = self.capacity - z
        return m.where(gap > 0, self.K * z / m.where(gap > 0, gap, 1.0), m.inf)


@service_model
class SoftplusLatency(ServiceModel):
    """DLB's fitted latency shape, flat below the knee then linear (THEORY §4; parameters [R]).

    ℓ(N) = θ0 + θ1·θ3·log(1 + exp((N − θ2)/θ3)) seconds; μ̄ = 1/θ1.

    Args:
        base_latency: θ0, unloaded service time (s).
        slope: θ1, latency added per request beyond the knee (s/request) ≈ 1/μ̄.
        knee: θ2, workload the cell serves without queueing (requests), ≥ 0.
        softness: θ3 > 0, width of the knee (requests).

    Raises:
        ModelError: unless θ0 > θ1·θ2 — otherwise μ = N/ℓ overshoots 1/θ1 and decreases
            (violates Assumption 1), or (θ0 = θ1·θ2) its gradient cost grows exponentially,
            violating slow variation (4) (THEORY §4 [D]).
    """

    base_latency: Any
    slope: Any
    knee: Any
    softness: Any
    name: ClassVar[str] = "softplus"

    def _check(self) -> None:
        name = "SoftplusLatency."
        _real(self.base_latency, name + "base_latency", unit="s", low=0.0, low_open=True)
        _real(self.slope, name + "slope", unit="s/request", low=0.0, low_open=True)
        _real(self.knee, name + "knee", unit="requests", low=0.0)
        _real(self.softness, name + "softness", unit="requests", low=0.0, low_open=True)
        t0, t1, t2 = float(self.base_latency), float(self.slope), float(self.knee)
        if not t0 > t1 * t2:
            raise ModelError(
                f"SoftplusLatency needs base_latency > slope*knee (θ0 > θ1·θ2) for Assumption 1 "
                f"and slow variation (4); got base_latency={t0:g} ≤ slope*knee={t1 * t2:g}")

    @property
    def max_rate(self) -> Any:
        return 1.0 / self.slope

    def _u(self, N: Any) -> Any:
        return (N - self.knee) / self.softness

    def latency(self, N: Any) -> Any:
        return self.base_latency + self.slope * self.softness * softplus(self._u(N))

    def latency_prime(self, N: Any) -> Any:
        return self.slope * sigmoid(self._u(N))

    def latency_second(self, N: Any) -> Any:
        sig = sigmoid(self._u(N))
        return self.slope * sig * (1.0 - sig) / self.softness


@service_model
class ExpSaturation(ServiceModel):
    """Exponential-saturation model μ(N) = μ̄(1 − e^{−N/K}) (THEORY §4, [R]).

    Satisfies Assumption 1, but its gradient cost (K/μ̄)e^{N/K} violates slow variation (4), so
    Theorem 1 does not cover it (local analysis still applies).

    Args:
        capacity: μ̄ (req/s).
        K: saturation scale (requests).
    """

    capacity: Any
    K: Any
    name: ClassVar[str] = "exp"

    def _check(self) -> None:
        _real(self.capacity, "ExpSaturation.capacity", unit="req/s", low=0.0,
                   low_open=True)
        _real(self.K, "ExpSaturation.K", unit="requests", low=0.0, low_open=True)

    @property
    def max_rate(self) -> Any:
        return self.capacity

    def rate(self, N: Any) -> Any:
        return -self.capacity * xp(N).expm1(-N / self.K)

    def latency(self, N: Any) -> Any:
        m = xp(N)
        Nsafe = m.where(N > 0, N, 1.0)
        return m.where(N > 0, Nsafe / self.rate(Nsafe), self.K / self.capacity)

    def latency_prime(self, N: Any) -> Any:
        # ℓ = N/μ ⇒ ℓ' = (μ − Nμ')/μ²; at N → 0 the limit is 1/(2μ̄).
        m = xp(N)
        small = m.abs(N) < 1e-6 * self.K
        Nsafe = m.where(small, self.K, N)
        mu = self.rate(Nsafe)
        val = (mu - Nsafe * self.rate_prime(Nsafe)) / mu**2
        return m.where(small, 1.0 / (2.0 * self.capacity), val)

    def rate_prime(self, N: Any) -> Any:
        return (self.capacity / self.K) * xp(N).exp(-N / self.K)

    def gradient_cost(self, N: Any) -> Any:
        return (self.K / self.capacity) * xp(N).exp(N / self.K)

    def rate_second(self, N: Any) -> Any:
        return -(self.capacity / self.K**2) * xp(N).exp(-N / self.K)

    def gradient_cost_prime(self, N: Any) -> Any:
        return xp(N).exp(N / self.K) / self.capacity

    def inverse_rate(self, z: Any) -> Any:
        m = xp(z)
        z = m.asarray(z, dtype=float) if not is_jax(z) else z
        u = z / self.capacity
        return m.where(u < 1, -self.K * m.log1p(-m.where(u < 1, u, 0.0)), m.inf)


# ----------------------------------------------------------------------------- numerics
def _inverse_rate_numeric(model: ServiceModel, z: Any) -> np.ndarray:
    """Safeguarded Newton–bisection for μ(N) = z, vectorised over z (numpy).

    Works for models with scalar parameters or with array parameters matching ``z`` elementwise.
    """
    z = np.asarray(z, dtype=float)
    mubar = np.asarray(model.max_rate, dtype=float)
    shape = np.broadcast_shapes(z.shape, mubar.shape)
    zf = np.broadcast_to(z, shape).astype(float)
    mub = np.broadcast_to(mubar, shape)
    act = (zf > 0) & (zf < mub)
    za = np.where(act, zf, 0.5 * mub)  # safe dummy targets where inactive
    lo = np.zeros(shape)
    hi = np.maximum(1.0, za * np.asarray(model.latency(np.zeros(shape)), dtype=float))
    for _ in range(2000):  # expand until μ(hi) ≥ z (μ increasing, sup μ = μ̄ > z)
        need = model.rate(hi) < za
        if not np.any(need):
            break
        lo = np.where(need, hi, lo)
        hi = np.where(need, hi * 2.0, hi)
    N = 0.5 * (lo + hi)
    for _ in range(200):
        h = model.rate(N) - za
        lo = np.where(h < 0, N, lo)
        hi = np.where(h >= 0, N, hi)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            newton = N - h / model.rate_prime(N)
        inside = np.isfinite(newton) & (newton > lo) & (newton < hi)
        N_new = np.where(inside, newton, 0.5 * (lo + hi))
        done = np.abs(N_new - N) <= INVERSE_RTOL * np.maximum(np.abs(N_new), 1e-300)
        N = N_new
        if np.all(done | (hi - lo <= INVERSE_RTOL * hi)):
            break
    out = np.where(act, N, np.where(zf <= 0, 0.0, np.inf))
    return out[()] if out.ndim == 0 else out


def check_assumption_1(model: ServiceModel, *, label: str = "", n_grid: int = 400) -> None:
    """Check Assumption 1 numerically: μ(0) = 0, μ continuous, strictly increasing, μ < μ̄ < ∞.

    Used for user-defined models (the built-in families check their parameters in closed form).

    Raises:
        ModelError: naming ``label`` (e.g. the cell) and the violated property.
    """
    who = f"{label}: " if label else ""
    mubar = float(model.max_rate)
    if not (math.isfinite(mubar) and mubar > 0):
        raise ModelError(f"{who}max_rate μ̄ must be positive and finite (Assumption 1), got {mubar}")
    mu0 = float(model.rate(np.float64(0.0)))
    if abs(mu0) > 1e-12 * mubar:
        raise ModelError(f"{who}μ(0) must be 0 (Assumption 1), got {mu0:g}")
    lat0 = float(model.latency(np.float64(0.0)))
    if not lat0 > 0:
        raise ModelError(f"{who}latency ℓ(0) must be positive, got {lat0:g} s")
    scale = max(1.0, lat0 * mubar)
    N = np.concatenate([[0.0], np.geomspace(1e-6, 1e6, n_grid) * scale])
    mu = np.asarray(model.rate(N), dtype=float)
    if not np.all(np.isfinite(mu)):
        raise ModelError(f"{who}μ(N) is not finite on [0, {N[-1]:g}] (Assumption 1)")
    dmu = np.diff(mu)
    # flat steps are only allowed once μ has saturated to μ̄ in floating point
    bad = (dmu < 0) | ((dmu == 0) & (mu[1:] < mubar * (1 - 1e-9)))
    if np.any(bad):
        k = int(np.argmax(bad))
        raise ModelError(f"{who}μ(N) = N/ℓ(N) must be strictly increasing (Assumption 1); it "
                         f"decreases between N = {N[k]:g} and {N[k + 1]:g} "
                         f"({mu[k]:g} → {mu[k + 1]:g} req/s)")
    if np.any(mu > mubar * (1 + 1e-9)):
        raise ModelError(f"{who}μ(N) exceeds max_rate μ̄ = {mubar:g} (Assumption 1)")


# ----------------------------------------------------------------------------- serialisation
def model_from_dict(spec: dict[str, Any], *, where: str = "service") -> ServiceModel:
    """Build a service model from ``{"model": NAME, **parameters}``; errors name ``where``."""
    if not isinstance(spec, dict):
        raise ModelError(f"{where}: expected a mapping with a 'model' key, got {spec!r}")
    name = spec.get("model")
    if not isinstance(name, str) or name not in MODEL_REGISTRY:
        raise ModelError(f"{where}.model: unknown service model {name!r}; "
                         f"expected one of {sorted(MODEL_REGISTRY)}")
    cls = MODEL_REGISTRY[name]
    fields = [f.name for f in dataclasses.fields(cls)]
    params = {k: v for k, v in spec.items() if k != "model"}
    unknown = sorted(set(params) - set(fields))
    missing = [f for f in fields if f not in params]
    if unknown:
        raise ModelError(f"{where}: unknown parameter(s) {unknown} for model {name!r}; "
                         f"expected {fields}")
    if missing:
        raise ModelError(f"{where}: missing parameter(s) {missing} for model {name!r}")
    values = {k: _real(v, f"{where}.{k}") for k, v in params.items()}
    try:
        model = cls(**values)
    except ModelError as exc:
        raise ModelError(f"{where}: {exc}") from None
    return model


def model_to_dict(model: ServiceModel) -> dict[str, Any]:
    """Inverse of :func:`model_from_dict`."""
    return {"model": model.name, **{k: float(v) for k, v in model.parameters().items()}}


# ----------------------------------------------------------------------------- model banks
class ModelBank:
    """Per-cell service models evaluated together on a workload vector (numpy or JAX).

    Cells of the same family are stacked into one model with array parameters, so a network of
    n cells costs one vectorised evaluation per family (this is what the fluid model traces).
    A ``ModelBank`` is a JAX pytree: its stacked parameters are differentiable leaves.

    Args:
        models: one service model per cell, in cell order.
    """

    def __init__(self, models: tuple[ServiceModel, ...] | list[ServiceModel]) -> None:
        models = tuple(models)
        self.n = len(models)
        groups: dict[type, list[int]] = {}
        for j, m in enumerate(models):
            groups.setdefault(type(m), []).append(j)
        self.groups: tuple[tuple[ServiceModel, np.ndarray], ...] = tuple(
            (_stack([models[j] for j in idx]), np.asarray(idx, dtype=int))
            for idx in groups.values())

    @classmethod
    def _from_groups(cls, n: int, groups: tuple) -> ModelBank:
        obj = cls.__new__(cls)
        obj.n = n
        obj.groups = groups
        return obj

    def _apply(self, method: str, x: Any) -> Any:
        m = xp(x, *[g for g, _ in self.groups for g in jax_leaves(g)])
        if len(self.groups) == 1 and len(self.groups[0][1]) == self.n:
            return getattr(self.groups[0][0], method)(x)
        if m is np:
            x = np.asarray(x, dtype=float)
            out = np.empty(np.shape(x), dtype=float)
            for model, idx in self.groups:
                out[..., idx] = getattr(model, method)(x[..., idx])
            return out
        out = m.zeros(np.shape(x), dtype=m.result_type(x, float))
        for model, idx in self.groups:
            out = out.at[..., idx].set(getattr(model, method)(x[..., idx]))
        return out

    @property
    def max_rate(self) -> Any:
        """μ̄ per cell (req/s)."""
        return self._apply_prop("max_rate")

    def _apply_prop(self, prop: str) -> Any:
        vals = [(getattr(model, prop), idx) for model, idx in self.groups]
        if is_jax(*[v for v, _ in vals]):
            import jax.numpy as jnp

            out = jnp.zeros(self.n)
            for v, idx in vals:
                out = out.at[idx].set(v)
            return out
        out = np.empty(self.n)
        for v, idx in vals:
            out[idx] = v
        return out

    def latency(self, N: Any) -> Any:
        """ℓ_j(N_j) per cell (s)."""
        return self._apply("latency", N)

    def latency_prime(self, N: Any) -> Any:
        """ℓ'_j(N_j) per cell (s/request)."""
        return self._apply("latency_prime", N)

    def rate(self, N: Any) -> Any:
        """μ_j(N_j) per cell (req/s)."""
        return self._apply("rate", N)

    def rate_prime(self, N: Any) -> Any:
        """μ'_j(N_j) per cell."""
        return self._apply("rate_prime", N)

    def gradient_cost(self, N: Any) -> Any:
        """1/μ'_j(N_j) per cell (s)."""
        return self._apply("gradient_cost", N)

    def inverse_rate(self, z: Any) -> Any:
        """μ_j⁻¹(z_j) per cell (requests); +inf at or above capacity (numpy)."""
        return self._apply("inverse_rate", z)

    def latency_second(self, N: Any) -> Any:
        """ℓ''_j(N_j) per cell."""
        return self._apply("latency_second", N)

    def rate_second(self, N: Any) -> Any:
        """μ''_j(N_j) per cell."""
        return self._apply("rate_second", N)

    def gradient_cost_prime(self, N: Any) -> Any:
        """d/dN (1/μ'_j) per cell (s per request)."""
        return self._apply("gradient_cost_prime", N)


def jax_leaves(model: ServiceModel) -> list[Any]:
    """The parameter values of a model (its pytree leaves)."""
    return [getattr(model, f.name) for f in dataclasses.fields(model)]  # type: ignore[arg-type]


def _stack(models: list[ServiceModel]) -> ServiceModel:
    cls = type(models[0])
    fields = [f.name for f in dataclasses.fields(cls)]
    vals = {f: [getattr(m, f) for m in models] for f in fields}
    if is_jax(*[v for vs in vals.values() for v in vs]):
        import jax.numpy as jnp

        return cls(**{f: jnp.stack([jnp.asarray(v) for v in vs]) for f, vs in vals.items()})
    return cls(**{f: np.asarray(vs, dtype=float) for f, vs in vals.items()})


def _bank_flatten(bank: ModelBank):
    return tuple(m for m, _ in bank.groups), (bank.n, tuple(tuple(idx) for _, idx in bank.groups))


def _bank_unflatten(aux, children):
    n, idxs = aux
    return ModelBank._from_groups(n, tuple((m, np.asarray(i, dtype=int))
                                           for m, i in zip(children, idxs)))


def _register_bank() -> None:
    import jax

    jax.tree_util.register_pytree_node(ModelBank, _bank_flatten, _bank_unflatten)


when_jax_loaded(_register_bank)
