"""Nonatomic routing games on general networks: Wardrop equilibrium, system optimum, PoA.

Solve a game with the verbs of :mod:`lbtheory.equilibrium` — ``solve_wardrop(game)``,
``solve_system_optimum(game)``, ``price_of_anarchy(game)`` — or with :func:`solve_game` here;
``wardrop_equilibrium``, ``system_optimum`` and ``price_of_anarchy`` of this package are
deprecated aliases of those verbs (they warn, take a :class:`RoutingGame` only, and are not in
``__all__``; removed in 0.3).

DESIGN.md puts ``RoutingGame`` in ``network.py`` and the arc-cost families in ``costs.py``; this
subpackage deviates (small modules, no edit conflicts). Modules: :mod:`.arccosts` (families),
:mod:`.game` (the game), :mod:`.solve` (:func:`solve_game`: CVXPY programs and the
fallback chain, :func:`certify`), :mod:`.frank_wolfe` (reference
algorithm), :mod:`.tap` (path-based gradient projection, numba kernels in :mod:`._gpkernels`),
:mod:`._bush` (bush-based Algorithm B, kernels in :mod:`._bushkernels`; the fast exact solver
above :data:`.solve.AUTO_THRESHOLD`), :mod:`.synthetic` (seeded networks of
classic TNTP sizes), :mod:`.metrics` (relative gap, AEC), :mod:`.cells` (CellNetwork → game),
:mod:`.classic` (Pigou, M/M/1, Braess), :mod:`.tntp` (TNTP reader), :mod:`._result`
(:class:`GameResult`, :class:`GamePoAResult`, :class:`Objective`, shared by every solver),
:mod:`._cvxforms` (the one registry of exact convex CVXPY forms, keyed by class).
"""

import sys
import types

#: public name -> the submodule defining it; names load on first use, so ``import
#: lbtheory.games`` imports neither numba, scipy, JAX nor CVXPY (a traffic assignment from a
#: TNTP file never needs the last two; see tests/test_startup.py).
_EXPORTS = {
    **dict.fromkeys(("BushState", "bush_assignment"), "_bush"),
    **dict.fromkeys(("ARC_FORMS", "DCP_FORMS", "DCPForm", "arc_objective", "bank_objective",
                     "check_convex_form", "dcp_potential_value", "form_terms"), "_cvxforms"),
    **dict.fromkeys(("GamePoAResult", "GameResult", "Objective", "SolveTrace", "evaluate_flow"),
                    "_result"),
    **dict.fromkeys(("MM1", "ArcCost", "ArcCostBank", "Polynomial", "ServiceArc", "affine",
                     "bpr", "constant"), "arccosts"),
    **dict.fromkeys(("cell_inflows", "routing_from_game", "to_routing_game"), "cells"),
    **dict.fromkeys(("GridFamily", "braess", "grid_game", "mm1_two_link", "mm1_two_link_poa",
                     "pigou", "pigou_poa"), "classic"),
    **dict.fromkeys(("FWMethod", "FWTrace", "frank_wolfe"), "frank_wolfe"),
    **dict.fromkeys(("Commodity", "GameArc", "RoutingGame"), "game"),
    **dict.fromkeys(("all_or_nothing", "gap_measures", "shortest_path_cost", "shortest_paths",
                     "used_arc_spread"), "metrics"),
    **dict.fromkeys(("Method", "certify", "solve_game"), "solve"),
    **dict.fromkeys(("synthetic_network",), "synthetic"),
    **dict.fromkeys(("TAPState", "gradient_projection"), "tap"),
    **dict.fromkeys(("load_tntp_game", "read_tntp_flow", "read_tntp_network", "read_tntp_trips",
                     "write_tntp"), "tntp"),
}

__all__ = [
    "ArcCost", "ArcCostBank", "Polynomial", "MM1", "ServiceArc", "affine", "bpr", "constant",
    "RoutingGame", "GameArc", "Commodity",
    "GameResult", "GamePoAResult", "Objective", "evaluate_flow", "frank_wolfe", "FWTrace",
    "SolveTrace", "FWMethod",
    "shortest_paths", "all_or_nothing", "gap_measures", "shortest_path_cost", "used_arc_spread",
    "gradient_projection", "TAPState", "bush_assignment", "BushState", "Method", "solve_game",
    "certify", "synthetic_network",
    "write_tntp",
    "to_routing_game", "cell_inflows", "routing_from_game",
    "load_tntp_game", "read_tntp_network", "read_tntp_trips", "read_tntp_flow",
    "pigou", "pigou_poa", "mm1_two_link", "mm1_two_link_poa", "braess", "grid_game", "GridFamily",
    # the registry of exact convex CVXPY forms (extend it to give a new family a DCP form)
    "ARC_FORMS", "DCP_FORMS", "DCPForm", "form_terms", "arc_objective", "bank_objective",
    "check_convex_form", "dcp_potential_value",
]

#: importable from here but not in ``__all__``: the deprecated verbs (they warn when called)
#: and the solver-name check the CLI and the cell programs share.
_HIDDEN = frozenset({"wardrop_equilibrium", "system_optimum", "price_of_anarchy",
                     "check_solver"})


def __getattr__(name: str) -> object:
    import importlib

    home = _EXPORTS.get(name) or ("solve" if name in _HIDDEN else None)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    if name in _EXPORTS:
        globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    mods = {n for n, v in globals().items()
            if isinstance(v, types.ModuleType) and n not in ("sys", "types")}
    return sorted(set(__all__) | mods)


class _Package(types.ModuleType):
    """This package's module type: the import system binds each loaded submodule as an
    attribute of its package, which would shadow the function ``frank_wolfe`` by the module
    ``frank_wolfe``; the function keeps the name (as when the package imported it eagerly)."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
