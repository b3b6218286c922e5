"""Nonatomic routing games on general networks: Wardrop equilibrium, system optimum, PoA.

DESIGN.md puts ``RoutingGame`` in ``network.py`` and the arc-cost families in ``costs.py``; this
subpackage deviates (small modules, no edit conflicts). Modules: :mod:`.arccosts` (families),
:mod:`.game` (the game), :mod:`.solve` (CVXPY programs), :mod:`.frank_wolfe` (reference
algorithm), :mod:`.metrics` (relative gap, AEC), :mod:`.cells` (CellNetwork → game),
:mod:`.instances` (Pigou, M/M/1, Braess), :mod:`.tntp` (TNTP reader), :mod:`._result`
(:class:`GameResult`, shared by every solver).
"""

from ._result import GameResult, evaluate_flow
from .arccosts import MM1, ArcCost, ArcCostBank, Polynomial, ServiceArc, affine, bpr, constant
from .cells import cell_inflows, routing_from_game, to_routing_game
from .frank_wolfe import FWTrace, frank_wolfe
from .game import Commodity, GameArc, RoutingGame
from .instances import braess, grid_game, mm1_two_link, mm1_two_link_poa, pigou, pigou_poa
from .metrics import all_or_nothing, gap_measures, shortest_path_cost, shortest_paths
from .solve import price_of_anarchy, system_optimum, wardrop_equilibrium
from .tntp import load_tntp_game, read_tntp_flow, read_tntp_network, read_tntp_trips

__all__ = [
    "ArcCost", "ArcCostBank", "Polynomial", "MM1", "ServiceArc", "affine", "bpr", "constant",
    "RoutingGame", "GameArc", "Commodity",
    "GameResult", "wardrop_equilibrium", "system_optimum", "price_of_anarchy", "evaluate_flow",
    "frank_wolfe", "FWTrace",
    "shortest_paths", "all_or_nothing", "gap_measures", "shortest_path_cost",
    "to_routing_game", "cell_inflows", "routing_from_game",
    "load_tntp_game", "read_tntp_network", "read_tntp_trips", "read_tntp_flow",
    "pigou", "pigou_poa", "mm1_two_link", "mm1_two_link_poa", "braess", "grid_game",
]
