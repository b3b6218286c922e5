"""lbtheory: load balancing under delayed feedback.

Equilibria, price of anarchy, delayed fluid models, stepsize verification, BalanceRoute.

One import serves a notebook: the public verbs and types of every subpackage are re-exported
here, loaded lazily on first use (so ``lbtheory --help`` does not import JAX or CVXPY)::

    import lbtheory as lb
    net = lb.load_topology("examples/three_cells.yaml")
    lb.solve_wardrop(net).routing

See README.md for a tour and docs/THEORY.md for the mathematics; docs/DESIGN.md for the layout.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> submodule that defines it (the one definition; this module only re-exports).
_EXPORTS: dict[str, str] = {}
for _mod, _names in {
    "errors": ("LBTheoryError", "TopologyError", "ModelError", "InfeasibleDemandError",
               "SolverError", "UnstableError", "DataFormatError", "StepsizeError",
               "BoundaryEquilibriumError", "SolveStatus", "DynamicsStatus", "StepsizeStatus",
               "SweepError", "ParameterError", "RunStatus"),
    "models": ("ServiceModel", "MM1Latency", "SoftplusLatency", "ExpSaturation", "service_model",
               "ModelBank", "check_assumption_1"),
    "costs": ("CostKind", "cell_cost", "cell_cost_prime", "static_cost", "arc_costs",
              "flow_cost", "flow_potential", "total_latency_rate"),
    "network": ("Cell", "Arc", "CellNetwork", "FeasibilityReport"),
    "simplex": ("project_simplex", "project_tangent_cone", "simplex_argmin", "flow_update"),
    "io": ("load_topology", "topology_from_dict", "topology_to_dict", "write_json_atomic",
           "run_manifest"),
    "instances": ("symmetric_two_cell", "spill_example", "mm1_pigou", "mm1_pigou_poa",
                  "random_network", "full_mesh"),
    "stats": ("percentile", "percentiles", "summarize", "mean_ci"),
    "workloads": ("Workload", "read_trace", "trace_from_arrays", "workload_from_arrays",
                  "mix_traces"),
    "games": ("RoutingGame", "GameArc", "Commodity", "GameResult", "GamePoAResult", "Objective",
              "FWMethod", "wardrop_equilibrium", "system_optimum", "frank_wolfe",
              "to_routing_game", "load_tntp_game", "gradient_projection", "TAPState",
              "bush_assignment", "BushState",
              "solve_game", "certify", "synthetic_network", "write_tntp"),
    # games' wardrop_equilibrium / system_optimum above: deprecated aliases (until 0.3) of
    # solve_wardrop / solve_system_optimum, which take a RoutingGame too; games.price_of_anarchy
    # is not re-exported: lbtheory.price_of_anarchy is the equilibrium verb, which takes both
    "equilibrium": ("EquilibriumProblem", "EquilibriumResult", "PoAResult", "solve_equilibrium",
                    "solve_wardrop", "solve_system_optimum", "solve_rif", "price_of_anarchy",
                    "optimality_residuals", "evaluate_routing", "demand_sweep"),
    "fluid": ("simulate_fluid", "simulate_fluid_batch", "fluid_sensitivity", "FluidSolution",
              "Mechanism"),
    "stability": ("critical_stepsize", "assess_stepsize", "check_stepsize", "empirical_rule",
                  "operating_point", "linearise", "CriticalStepsize"),
    "barrier": ("step_imbalance", "fscore_br0", "simulate_decode", "DecodeConfig",
                "StepTimeModel", "ReplicaView", "BR0Router", "BRHRouter"),
    # the one router contract, the shared baselines and DLB's cell routers
    "routers": ("Router", "Assignment", "CellView", "DiscreteRouter", "FlowRouter",
                "RandomRouter", "MNLBRouter", "JSQRouter", "PowerOfDRouter", "RoundRobinRouter",
                "ErrorAversion", "AffinityRouter"),
    # the one policy registry (every simulator)
    "registry": ("make_router", "policy_names", "POLICIES", "POLICY_NAMES", "compare_policies"),
    "sim": ("simulate", "SimResult", "Scenario", "load_scenario", "scenario_from_dict",
            "generate_arrivals", "appendix_b_scenario", "Estimation"),
    "intelligent": ("ClusterConfig", "ClusterSim", "InstanceView", "InstanceResult",
                    "run_router", "IterationTimeModel", "fit_iteration_model",
                    "calibrate_impact", "fit_length_predictor"),
    "sweep": ("Experiment", "SweepResult", "run_sweep", "script_main", "discover_experiments"),
}.items():
    for _name in _names:
        if _name in _EXPORTS:  # one name, one definition: a clash is a packaging error
            raise ImportError(f"lbtheory: {_name!r} re-exported from both lbtheory.{_mod} and "
                              f"lbtheory.{_EXPORTS[_name]}")
        _EXPORTS[_name] = _mod

__all__ = ["__version__", *_EXPORTS]


#: renamed public names (0.2): old name -> (module, new name); they warn for one release.
_RENAMED: dict[str, tuple[str, str]] = {"Trace": ("workloads", "Workload"),
                                        "RouterView": ("routers", "CellView")}


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        from .errors import warn_deprecated

        mod, new = _RENAMED[name]
        warn_deprecated(f"lbtheory.{name}", f"lbtheory.{new}")
        return getattr(importlib.import_module(f".{mod}", __name__), new)
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'lbtheory' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
