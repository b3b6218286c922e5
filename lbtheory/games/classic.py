"""Classic routing games with known answers (Pigou, M/M/1 two-link, Braess, grids).

Closed forms: Pigou with ℓ = x^d has PoA (1 − d(d+1)^{−(d+1)/d})^{−1} (Roughgarden 2003, attained);
the M/M/1 two-link game has PoA ½(1 + √(u/(u − R))) (THEORY §5); Braess (demand 6, link costs 10x,
50 + x, 50 + x, 10 + x, 10x) has equilibrium path cost 92, total 552, and without the bridge
(= system optimum) 83 and 498 (THEORY §5, §12).
"""

from __future__ import annotations

import enum

import numpy as np

from .._checks import Seed, as_generator, check_int, check_option
from ..errors import ParameterError
from ..instances import mm1_pigou_poa
from .arccosts import MM1, ArcCost, Polynomial, affine, bpr, constant
from .game import Commodity, GameArc, RoutingGame

__all__ = ["pigou", "pigou_poa", "mm1_two_link", "mm1_two_link_poa", "braess", "grid_game",
           "GridFamily"]


class GridFamily(enum.StrEnum):
    """Arc-cost family of :func:`grid_game`."""

    BPR = "bpr"
    AFFINE = "affine"


def pigou(d: float = 1.0, demand: float = 1.0) -> RoutingGame:
    """Two parallel links s → t with costs 1 and x^d; demand ``demand``."""
    arcs = [GameArc("s", "t", constant(1.0)), GameArc("s", "t", Polynomial(0.0, 1.0, 1.0, d))]
    return RoutingGame(["s", "t"], arcs, [Commodity("s", "t", demand)])


def pigou_poa(d: float) -> float:
    """Roughgarden's bound (1 − d(d+1)^{−(d+1)/d})^{−1} for polynomials of degree d (attained by
    :func:`pigou`; dimensionless)."""
    return 1.0 / (1.0 - d * (d + 1.0) ** (-(d + 1.0) / d))


def mm1_two_link(u: float = 1.0, R: float = 0.5) -> RoutingGame:
    """An M/M/1 link 1/(u − x) parallel to a constant link 1/(u − R); demand R < u."""
    arcs = [GameArc("s", "t", MM1(u)), GameArc("s", "t", constant(1.0 / (u - R)))]
    return RoutingGame(["s", "t"], arcs, [Commodity("s", "t", R)])


def mm1_two_link_poa(u: float = 1.0, R: float = 0.5) -> float:
    """Closed-form PoA ½(1 + √(u/(u − R))) of :func:`mm1_two_link` (dimensionless).

    The same game as the cell-network :func:`lbtheory.instances.mm1_pigou` (an M/M/1 link beside
    a constant one): its one definition is :func:`lbtheory.instances.mm1_pigou_poa`.
    """
    return mm1_pigou_poa(u, R)


def braess(demand: float = 6.0, *, bridge: bool = True) -> RoutingGame:
    """The Braess network of the TNTP example: nodes 1..4, demand 1 → 2.

    Arcs in file order: 1→3 (10x), 1→4 (50 + x), 3→2 (50 + x), 3→4 (10 + x, the bridge),
    4→2 (10x). ``bridge=False`` blocks arc 3→4.
    """
    arcs = [GameArc(1, 3, affine(0.0, 10.0)), GameArc(1, 4, affine(50.0, 1.0)),
            GameArc(3, 2, affine(50.0, 1.0)), GameArc(3, 4, affine(10.0, 1.0), not bridge),
            GameArc(4, 2, affine(0.0, 10.0))]
    return RoutingGame([1, 2, 3, 4], arcs, [Commodity(1, 2, demand)])


def grid_game(rows: int, cols: int, *, seed: Seed, n_origins: int | None = None,
              family: GridFamily | str = GridFamily.BPR, power: float = 4.0,
              congestion: float = 1.0) -> RoutingGame:
    """A random game on a rows × cols grid with arcs both ways (2·(2rc − r − c) arcs), seeded.

    A 4 × 6 grid with every node an origin has Sioux Falls' size (24 nodes, 76 arcs, 24 origins).

    Args:
        seed: an int (numpy ``default_rng``) or a ``numpy.random.Generator``.
        n_origins: number of origin nodes (default: all); every node is a destination.
        family: :class:`GridFamily` or its value: ``"bpr"`` (t0 ~ U[2, 6], B = 0.15,
            capacity ~ U[4000, 25000], power ``power``) or ``"affine"`` (a ~ U[0, 10],
            b ~ U[0, 1]).
        congestion: demand multiplier; 1 gives volume/capacity ratios of order 1 (BPR).

    Raises:
        ParameterError: ``rows``/``cols`` not positive integers with at least 2 nodes,
            ``n_origins`` outside 1..rows·cols, or an unknown ``family``.
    """
    family = check_option(GridFamily, family, "family")
    rows, cols = check_int(rows, "rows", low=1), check_int(cols, "cols", low=1)
    n = rows * cols
    if n < 2:
        raise ParameterError(f"rows, cols: a grid game needs at least 2 nodes, got "
                             f"{rows}x{cols}")
    if n_origins is not None:
        check_int(n_origins, "n_origins", low=1, high=n, unit="at most rows·cols")
    rng = as_generator(seed)
    edges = [(r * cols + c, r * cols + c + 1) for r in range(rows) for c in range(cols - 1)]
    edges += [(r * cols + c, (r + 1) * cols + c) for r in range(rows - 1) for c in range(cols)]
    pairs = [e for u, v in edges for e in ((u, v), (v, u))]
    arcs = []
    for u, v in pairs:
        if family is GridFamily.BPR:
            cost: ArcCost = bpr(rng.uniform(2, 6), 0.15, rng.uniform(4000, 25000), power)
        else:
            cost = affine(rng.uniform(0, 10), rng.uniform(0, 1))
        arcs.append(GameArc(u, v, cost))
    k = n if n_origins is None else int(n_origins)
    origins = rng.choice(n, size=k, replace=False)
    base = 40000.0 / (k * np.sqrt(n)) if family is GridFamily.BPR else 10.0 / k
    comms = [Commodity(int(o), d, float(congestion * base * rng.lognormal(0.0, 0.5)))
             for o in origins for d in range(n) if d != o]
    return RoutingGame(list(range(n)), arcs, comms)
