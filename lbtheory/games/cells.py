"""A DLB cell network as a routing game (THEORY §5; DESIGN "to_routing_game").

Nodes: one source node per cell with arrivals, one node per destination cell, one sink. Arcs:
source i → cell j with the constant cost g_ij (2τ_ij for latency/gradient costs, 0 for RIF;
:func:`lbtheory.costs.static_cost`), then cell j → sink with the congestion cost f_j(μ_j⁻¹(z)).
Commodities: (source i, sink, λ_i). With the latency cost, the game's Wardrop equilibrium is
:func:`lbtheory.equilibrium.solve_wardrop` and its system optimum (Σ z_j ℓ_j(μ_j⁻¹(z_j)) = Σ N_j by
Little's law) is :func:`lbtheory.equilibrium.solve_system_optimum`.

For :class:`~lbtheory.models.MM1Latency` cells under the latency cost the congestion arc is exactly
:class:`~.arccosts.MM1` with u = μ̄ and k = K (ℓ((N+K)/μ̄) at N = Kz/(μ̄ − z) is K/(μ̄ − z)), which is
DCP (THEORY §5 "DCP status"). Other service models or cost signals get a
:class:`~.arccosts.ServiceArc` backed by :func:`lbtheory.costs.flow_cost` /
:func:`~lbtheory.costs.flow_potential` (Frank–Wolfe only).
"""

from __future__ import annotations

import numpy as np

from ..costs import CostKind, static_cost
from ..models import MM1Latency
from ..network import CellNetwork
from .arccosts import MM1, ArcCost, ServiceArc, constant
from .game import Commodity, GameArc, RoutingGame

__all__ = ["to_routing_game", "cell_inflows", "routing_from_game"]

SINK = "sink"


def _src(name: str) -> tuple[str, str]:
    return ("src", name)


def _cell(name: str) -> tuple[str, str]:
    return ("cell", name)


def to_routing_game(net: CellNetwork, *, cost: CostKind | str = "latency") -> RoutingGame:
    """Build the routing game of a cell network.

    Args:
        net: the cell network.
        cost: cost signal of the congestion arcs (``"latency"`` gives Wardrop/system optimum).

    Returns:
        A game whose arcs are, in order, the network's arcs (source → cell, for sources with
        arrivals) and then one congestion arc per cell (cell → sink), in cell order.
    """
    kind = CostKind.parse(cost)
    g = static_cost(kind, net.delays)
    lam = net.arrival_rates
    nodes: list = [_src(c.name) for c in net.cells if c.arrival_rate > 0]
    nodes += [_cell(c.name) for c in net.cells] + [SINK]
    arcs = []
    for a in net.arcs:
        i, j = net.index(a.source), net.index(a.target)
        if lam[i] > 0:
            arcs.append(GameArc(_src(a.source), _cell(a.target), constant(float(g[i, j]))))
    for c in net.cells:
        arcs.append(GameArc(_cell(c.name), SINK, _congestion(kind, c.service, c.replicas)))
    comms = [Commodity(_src(c.name), SINK, c.arrival_rate) for c in net.cells
             if c.arrival_rate > 0]
    return RoutingGame(nodes, arcs, comms)


def _congestion(kind: CostKind, service, replicas: int) -> ArcCost:
    if kind is CostKind.LATENCY and isinstance(service, MM1Latency):
        return MM1(float(service.capacity), float(service.K))
    return ServiceArc(kind, service, float(replicas))


def cell_inflows(net: CellNetwork, arc_flow: np.ndarray) -> np.ndarray:
    """z_j (req/s) from the arc flows of :func:`to_routing_game` (its last n arcs)."""
    return np.asarray(arc_flow, dtype=float)[-net.n:]


def routing_from_game(net: CellNetwork, arc_flow: np.ndarray) -> np.ndarray:
    """Routing matrix x_ij (n×n) from the arc flows of :func:`to_routing_game`."""
    lam = net.arrival_rates
    x = np.zeros((net.n, net.n))
    k = 0
    for a in net.arcs:
        i, j = net.index(a.source), net.index(a.target)
        if lam[i] > 0:
            x[i, j] = arc_flow[k] / lam[i]
            k += 1
    return x
