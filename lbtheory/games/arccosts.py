"""Arc-cost families of routing games: cost ℓ(x), Beckmann integral, marginal cost.

DESIGN.md places the arc-cost families in ``costs.py``; we deviate and keep them in this
``lbtheory.games`` subpackage so that the routing-game code stays in small modules and does not
collide with the cell-network cost signals (which remain the one definition of DLB's costs in
:mod:`lbtheory.costs`; :class:`ServiceArc` wraps them instead of re-deriving them).

Every family is a frozen dataclass whose fields may be scalars or arrays (one entry per arc), and
exposes, elementwise in the arc flow ``x`` (flow units per time unit of the data):

* :meth:`cost` ℓ(x) and :meth:`cost_prime` ℓ'(x);
* :meth:`potential` the Beckmann integral ∫_0^x ℓ(s) ds;
* :meth:`marginal` the marginal cost x·ℓ'(x) + ℓ(x) (the cost whose Wardrop equilibrium is the
  system optimum) and :meth:`total` x·ℓ(x).

The families never import cvxpy: their exact convex (DCP) CVXPY forms live in one registry keyed
by class, :data:`lbtheory.games._cvxforms.ARC_FORMS`. The formulas of :class:`Polynomial` and
:class:`MM1` are written once, as the numba functions :func:`~._gpkernels.poly_formula` and
:func:`~._gpkernels.mm1_formula` that the compiled solvers call per arc: the methods here run them
elementwise (parameters broadcast against the flows), so both compute the same bits.

Families:

* :class:`Polynomial` ℓ = a + b·(x/s)^p with any real p ≥ 0 (p = 0 is constant a + b for x ≥ 0),
  built by :func:`affine`, :func:`bpr` (t0·(1 + B·(x/c)^p)) and :func:`constant`;
* :class:`MM1` ℓ = k/(u − x) (M/M/1 mean sojourn time for k = 1; +inf at x ≥ u);
* :class:`ServiceArc`: a cell's cost signal in flow view f(μ⁻¹(x)) from :mod:`lbtheory.costs`
  (any service model; no exact convex form in general, so CVXPY raises and Frank–Wolfe is used).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._checks import check_fields, check_option
from ..costs import CostKind, cell_cost_prime, flow_cost, flow_potential
from ..errors import ModelError
from ..models import ServiceModel
from . import _codes as codes

__all__ = [
    "ArcCost",
    "Polynomial",
    "MM1",
    "ServiceArc",
    "affine",
    "bpr",
    "constant",
    "ArcCostBank",
]


class ArcCost:
    """Protocol of an arc-cost family (see the module docstring for the methods)."""

    def cost(self, x: Any) -> np.ndarray:
        """ℓ(x), the travel cost per unit of flow at arc flow x."""
        raise NotImplementedError

    def cost_prime(self, x: Any) -> np.ndarray:
        """ℓ'(x)."""
        raise NotImplementedError

    def potential(self, x: Any) -> np.ndarray:
        """Beckmann integral ∫_0^x ℓ(s) ds."""
        raise NotImplementedError

    def total(self, x: Any) -> np.ndarray:
        """x·ℓ(x), the total cost the arc contributes."""
        return np.asarray(x, dtype=float) * self.cost(x)

    def marginal(self, x: Any) -> np.ndarray:
        """Marginal cost d(x·ℓ(x))/dx = x·ℓ'(x) + ℓ(x)."""
        x = np.asarray(x, dtype=float)
        return self.cost(x) + x * self.cost_prime(x)

    def upper(self, m: int) -> np.ndarray:
        """Flow bound per arc (the cost is finite strictly below it); +inf when none."""
        return np.full(m, np.inf)

    def group_key(self) -> Any:
        """Arcs with equal keys are stacked into one vectorised family."""
        return (type(self),)


def _nonneg(x: Any) -> np.ndarray:
    return np.maximum(np.asarray(x, dtype=float), 0.0)


class _Compiled(ArcCost):
    """A family whose formulas are compiled (:mod:`._gpkernels`): the methods run
    :func:`~._gpkernels.formula_array` on the family code ``_FAMILY`` and :meth:`_params`
    (broadcast against the flows); a scalar in with scalar parameters gives a numpy scalar."""

    _FAMILY: int  # the family code of formula_array (set by each subclass)

    def _params(self) -> tuple:
        """The four parameter arrays of formula_array (see there)."""
        raise NotImplementedError

    def _eval(self, what: int, x: Any) -> np.ndarray:
        vals = [np.asarray(v, dtype=float) for v in (*self._params(), x)]
        shape = np.broadcast_shapes(*(v.shape for v in vals))
        if any(v.size != 1 and v.shape != shape for v in vals):  # a size-1 array is repeated
            vals = [np.broadcast_to(v, shape) for v in vals]
        out = np.empty(shape)
        from ._gpkernels import formula_array  # numba: loaded with the first evaluation

        formula_array(self._FAMILY, what, *(v.reshape(-1) for v in vals), out.reshape(-1))
        return out[()]

    def cost(self, x: Any) -> np.ndarray:
        return self._eval(codes.COST, x)

    def cost_prime(self, x: Any) -> np.ndarray:
        return self._eval(codes.PRIME, x)

    def potential(self, x: Any) -> np.ndarray:
        return self._eval(codes.POTENTIAL, x)

    def total(self, x: Any) -> np.ndarray:
        return self._eval(codes.TOTAL, x)

    def marginal(self, x: Any) -> np.ndarray:
        return self._eval(codes.MARGINAL, x)


@dataclasses.dataclass(frozen=True)
class Polynomial(_Compiled):
    """ℓ(x) = a + b·(x/s)^p with a, b ≥ 0, scale s > 0 and any real power p ≥ 0.

    Beckmann integral a·x + b·s/(p+1)·(x/s)^{p+1}; marginal a + b(p+1)(x/s)^p. The flow is scaled
    by s inside the power so that BPR data with large capacities stays well conditioned in CVXPY.
    p = 0 means the constant a + b for every x ≥ 0 (0^0 = 1).

    Args:
        a: cost at zero flow (e.g. free-flow time).
        b: congestion coefficient (cost units).
        scale: s, flow scale (e.g. capacity), > 0.
        power: p ≥ 0 (a scalar; arcs with different powers form different groups).
    """

    _FAMILY = codes.POLYNOMIAL

    a: Any
    b: Any
    scale: Any = 1.0
    power: float = 1.0

    def __post_init__(self) -> None:
        check_fields("Polynomial", self, {"a": "non-negative", "b": "non-negative",
                                          "scale": "positive", "power": "non-negative"},
                     error=ModelError)
        if np.ndim(self.power) != 0:
            raise ModelError(f"Polynomial.power must be a scalar, got shape {np.shape(self.power)}")

    def group_key(self) -> Any:
        return (Polynomial, float(self.power))

    def _params(self) -> tuple:
        return self.a, self.b, self.scale, float(self.power)


def affine(a: Any, b: Any) -> Polynomial:
    """ℓ(x) = a + b·x."""
    return Polynomial(a, b, 1.0, 1.0)


def constant(a: Any) -> Polynomial:
    """ℓ(x) = a (flow independent)."""
    return Polynomial(a, 0.0, 1.0, 1.0)


def bpr(free_flow_time: Any, B: Any, capacity: Any, power: float = 4.0) -> Polynomial:
    """BPR / polynomial link cost ℓ(x) = t0·(1 + B·(x/c)^p) (TNTP convention), any real p ≥ 0.

    Zero free-flow time gives a zero-cost arc; tiny B is kept exactly (the product t0·B is the
    congestion coefficient, and x/c keeps the power term well scaled).
    """
    t0 = np.asarray(free_flow_time, dtype=float)
    return Polynomial(t0, t0 * np.asarray(B, dtype=float), capacity, float(power))


@dataclasses.dataclass(frozen=True)
class MM1(_Compiled):
    """M/M/1 link ℓ(x) = k/(u − x) for 0 ≤ x < u (+inf at x ≥ u).

    Beckmann integral k·log(u/(u − x)); total k·x/(u − x); marginal k·u/(u − x)². With
    k = K and u = μ̄ this is exactly the latency of an :class:`~lbtheory.models.MM1Latency` cell
    in flow view (THEORY §5 "DCP status").

    Args:
        capacity: u > 0 (flow units).
        scale: k > 0 (cost units × flow units).
    """

    _FAMILY = codes.QUEUE

    capacity: Any
    scale: Any = 1.0

    def __post_init__(self) -> None:
        check_fields("MM1", self, {"capacity": "positive", "scale": "positive"},
                     error=ModelError)

    def _params(self) -> tuple:
        return self.scale, self.capacity, 0.0, 0.0

    def upper(self, m: int) -> np.ndarray:
        return np.broadcast_to(np.asarray(self.capacity, dtype=float), (m,)).copy()


@dataclasses.dataclass(frozen=True)
class ServiceArc(ArcCost):
    """A cell's congestion arc: ℓ(x) = f(μ⁻¹(x)) for cost signal ``kind`` (THEORY §4–5).

    Evaluated with :func:`lbtheory.costs.flow_cost` / :func:`~lbtheory.costs.flow_potential`
    (numpy; one arc per instance). It has no exact convex CVXPY form in general (no entry in
    :data:`~lbtheory.games._cvxforms.ARC_FORMS`), so the CVXPY solvers raise
    :class:`~lbtheory.errors.ModelError`; use :func:`lbtheory.games.frank_wolfe`.
    """

    kind: CostKind
    model: ServiceModel
    replicas: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", check_option(CostKind, self.kind, "ServiceArc.kind",
                                                      error=ModelError))
        if not isinstance(self.model, ServiceModel):
            raise ModelError(f"ServiceArc.model must be a ServiceModel, got "
                             f"{type(self.model).__name__}")

    def group_key(self) -> Any:
        return (ServiceArc, id(self))

    def cost(self, x: Any) -> np.ndarray:
        return np.asarray(flow_cost(self.kind, self.model, _nonneg(x), self.replicas), dtype=float)

    def cost_prime(self, x: Any) -> np.ndarray:
        N = np.asarray(self.model.inverse_rate(_nonneg(x)), dtype=float)
        fin = np.isfinite(N)
        Ns = np.where(fin, N, 0.0)
        val = np.asarray(cell_cost_prime(self.kind, self.model, Ns, self.replicas)) \
            / np.asarray(self.model.rate_prime(Ns))
        return np.where(fin, val, np.inf)

    def potential(self, x: Any) -> np.ndarray:
        return np.asarray(flow_potential(self.kind, self.model, _nonneg(x), self.replicas))

    def upper(self, m: int) -> np.ndarray:
        return np.full(m, float(self.model.max_rate))


def _stack(items: list[ArcCost]) -> ArcCost:
    first = items[0]
    if len(items) == 1 or isinstance(first, ServiceArc):
        return first
    cls = type(first)
    fields = [f.name for f in dataclasses.fields(cls)]
    vals = {}
    for f in fields:
        if cls is Polynomial and f == "power":
            vals[f] = float(first.power)  # type: ignore[attr-defined]
        else:
            vals[f] = np.concatenate([np.atleast_1d(np.asarray(getattr(c, f), dtype=float))
                                      for c in items])
    return cls(**vals)


class ArcCostBank:
    """The per-arc cost families of a game, grouped and vectorised (numpy; CVXPY forms via
    :func:`lbtheory.games._cvxforms.bank_objective`).

    Args:
        costs: one scalar :class:`ArcCost` per arc, in arc order.
    """

    def __init__(self, costs: Sequence[ArcCost]) -> None:
        groups: dict[Any, list[int]] = {}
        for a, c in enumerate(costs):
            if not isinstance(c, ArcCost):
                raise ModelError(f"arc {a}: cost must be an ArcCost (Polynomial, MM1, "
                                 f"ServiceArc, ...), got {type(c).__name__}")
            if any(np.ndim(getattr(c, f.name)) > 0 for f in dataclasses.fields(c)):
                raise ModelError(f"arc {a}: give one scalar-parameter cost per arc")
            groups.setdefault(c.group_key(), []).append(a)
        self._init(len(costs), tuple((_stack([costs[a] for a in idx]),
                                      np.asarray(idx, dtype=int)) for idx in groups.values()))
        self._costs = tuple(costs)

    def _init(self, m: int, groups: tuple) -> None:
        self.m = m
        self.groups = groups
        self._costs: tuple[ArcCost, ...] | None = None
        self.upper = np.full(self.m, np.inf)
        for fam, idx in self.groups:
            self.upper[idx] = fam.upper(len(idx))

    @classmethod
    def from_groups(cls, m: int, groups: Sequence[tuple[ArcCost, np.ndarray]]) -> ArcCostBank:
        """The bank of ``m`` arcs whose families are given grouped: ``(family with one
        parameter array entry per arc of the group, arc indices)`` per group, the groups
        partitioning 0..m−1 (vectorised construction, e.g. a TNTP file's links)."""
        bank = cls.__new__(cls)
        bank._init(m, tuple((fam, np.asarray(idx, dtype=int)) for fam, idx in groups))
        return bank

    @property
    def costs(self) -> tuple[ArcCost, ...]:
        """One scalar-parameter :class:`ArcCost` per arc, in arc order."""
        if self._costs is None:
            out: list[Any] = [None] * self.m
            for fam, idx in self.groups:
                fields = [f.name for f in dataclasses.fields(fam)]
                vals = {f: np.broadcast_to(np.asarray(getattr(fam, f)), (len(idx),))
                        if np.ndim(getattr(fam, f)) else getattr(fam, f) for f in fields}
                for j, a in enumerate(idx):
                    out[a] = type(fam)(**{f: (float(v[j]) if np.ndim(v) else v)
                                          for f, v in vals.items()})
            self._costs = tuple(out)
        return self._costs

    def _apply(self, method: str, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        out = np.empty(self.m)
        for fam, idx in self.groups:
            out[idx] = getattr(fam, method)(x[idx])
        return out

    def cost(self, x: Any) -> np.ndarray:
        """ℓ_a(x_a) for every arc."""
        return self._apply("cost", x)

    def cost_prime(self, x: Any) -> np.ndarray:
        """ℓ'_a(x_a)."""
        return self._apply("cost_prime", x)

    def potential(self, x: Any) -> np.ndarray:
        """Beckmann integrals ∫_0^{x_a} ℓ_a."""
        return self._apply("potential", x)

    def total(self, x: Any) -> np.ndarray:
        """x_a·ℓ_a(x_a)."""
        return self._apply("total", x)

    def marginal(self, x: Any) -> np.ndarray:
        """Marginal costs x_a·ℓ'_a(x_a) + ℓ_a(x_a)."""
        return self._apply("marginal", x)
