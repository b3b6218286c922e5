"""Column generation for the CVXPY programs of :mod:`._solve` on large networks: the restricted
arc sets (private to :mod:`lbtheory.equilibrium`)."""

from __future__ import annotations

import numpy as np

from ..costs import CostKind
from ..network import CellNetwork, max_slack_flows
from ._result import _arc_cost_matrix

# ----------------------------------------------------------------------------- column generation
#: networks with more arcs than this are solved by delayed column generation by default.
#: Measured (BENCHMARKS.md): on full meshes up to n = 300 the full program is faster (each
#: pricing round recompiles the CVXPY program), so the default threshold is high.
COLGEN_MIN_ARCS = 200_000
#: arcs per source in the initial restricted set (cheapest at zero load)
COLGEN_INITIAL_ARCS = 6
#: arcs added per source and round (the most violated ones)
COLGEN_ADD_PER_SOURCE = 3


def _restrict(net: CellNetwork, mask: np.ndarray) -> CellNetwork:
    arcs = [a for a in net.arcs if mask[net.index(a.source), net.index(a.target)]]
    return CellNetwork(net.cells, arcs)


def _initial_arc_mask(net: CellNetwork, cost: CostKind) -> np.ndarray:
    """Self-arcs plus, per source, the arcs cheapest at zero load (f_j(0) + g_ij)."""
    C = _arc_cost_matrix(net, cost, np.zeros(net.n))
    C = np.where(net.adjacency, C, np.inf)
    k = min(COLGEN_INITIAL_ARCS, net.n)
    mask = np.zeros_like(net.adjacency)
    rows = np.arange(net.n)[:, None]
    mask[rows, np.argsort(C, axis=1, kind="stable")[:, :k]] = True
    mask &= net.adjacency
    mask |= net.adjacency & np.eye(net.n, dtype=bool)
    return mask


def _max_slack_support(net: CellNetwork) -> np.ndarray:
    """Arcs used by a max-slack routing (Assumption-2 LP): adding them makes a restricted arc set
    feasible whenever the full network is."""
    _, f = max_slack_flows(net)
    src, dst = net.arc_pairs
    mask = np.zeros_like(net.adjacency)
    mask[src[f > 0], dst[f > 0]] = True
    return mask
