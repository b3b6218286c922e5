"""lbtheory: load balancing under delayed feedback.

Equilibria, price of anarchy, delayed fluid models, stepsize verification, three simulators.

The top level is a curated page of about forty names, one group per job (``__all__``, in the
order below); everything else lives in its subpackage (``lbtheory.games``, ``lbtheory.sim``,
``lbtheory.intelligent`` …), each with an explicit ``__all__``. Names load lazily on first use,
so ``lbtheory --help`` does not import JAX or CVXPY::

    import lbtheory as lb
    net = lb.load_topology("examples/three_cells.yaml")
    lb.solve_wardrop(net).routing
    lb.check_stepsize(net, "gradient", 0.5).verdict        # "stable" / "unstable"

* topologies and models: :func:`load_topology`, :class:`CellNetwork`, :class:`Cell`,
  :class:`Arc`, :class:`MM1Latency`, :class:`SoftplusLatency`;
* equilibria and price of anarchy (cell networks and routing games alike):
  :func:`solve_wardrop`, :func:`solve_system_optimum`, :func:`solve_rif`,
  :func:`price_of_anarchy`, :class:`EquilibriumResult`, :class:`PoAResult`,
  :class:`RoutingGame`, :func:`load_tntp_game`;
* stability of flow routing under delay: :func:`check_stepsize` (verdict at a stepsize),
  :func:`critical_stepsize`, :class:`StepsizeReport`;
* the delayed fluid model (JAX): :func:`simulate_fluid`, :func:`simulate_fluid_batch`,
  :func:`fluid_sensitivity`, :class:`FluidSolution`, :class:`Mechanism`;
* the DLB cell simulator: :func:`simulate_cells`, :class:`Scenario`, :func:`load_scenario`,
  :func:`generate_arrivals`, :class:`SimResult`; policies by name: :func:`make_router`,
  :func:`policy_names`, :func:`register_policy` (a policy of your own); requests:
  :class:`Workload`, :func:`read_trace`;
* BalanceRoute: :func:`step_imbalance`, :func:`simulate_decode`, :class:`DecodeConfig`;
  the Intelligent Router: :func:`simulate_instances`, :class:`ClusterConfig`,
  :class:`InstanceResult`;
* what a caller catches or compares: :class:`LBTheoryError` (every error's base),
  :class:`SolveStatus`, :class:`DynamicsStatus`, :class:`StepsizeStatus`, :class:`RunStatus`,
  :class:`Engine`.

Randomness: functions outside JAX take ``seed`` (an ``int`` or a ``numpy.random.Generator``);
JAX functions take a ``key``.

See README.md for a tour and docs/THEORY.md for the mathematics; docs/DESIGN.md for the layout.
"""

__version__ = "0.1.0"

from ._jit import use_fingerprinted_cache as _use_fingerprinted_cache  # noqa: E402

# numba's cache per package fingerprint, before anything compiles (lbtheory/_jit.py says why)
_use_fingerprinted_cache()
del _use_fingerprinted_cache

#: public name -> submodule that defines it (the one definition; this module only re-exports).
_EXPORTS = {
    **dict.fromkeys(("load_topology",), "io"),
    **dict.fromkeys(("CellNetwork", "Cell", "Arc"), "network"),
    **dict.fromkeys(("MM1Latency", "SoftplusLatency"), "models"),
    **dict.fromkeys(("solve_wardrop", "solve_system_optimum", "solve_rif", "price_of_anarchy",
                     "EquilibriumResult", "PoAResult"), "equilibrium"),
    **dict.fromkeys(("RoutingGame", "load_tntp_game"), "games"),
    **dict.fromkeys(("check_stepsize", "critical_stepsize", "StepsizeReport"), "stability"),
    **dict.fromkeys(("simulate_fluid", "simulate_fluid_batch", "fluid_sensitivity",
                     "FluidSolution", "Mechanism"), "fluid"),
    **dict.fromkeys(("simulate_cells", "Scenario", "load_scenario", "generate_arrivals",
                     "SimResult"), "sim"),
    **dict.fromkeys(("make_router", "policy_names", "register_policy"), "registry"),
    **dict.fromkeys(("Workload", "read_trace"), "workloads"),
    **dict.fromkeys(("step_imbalance", "simulate_decode", "DecodeConfig"), "barrier"),
    **dict.fromkeys(("simulate_instances", "ClusterConfig", "InstanceResult"), "intelligent"),
    **dict.fromkeys(("LBTheoryError", "SolveStatus", "DynamicsStatus", "StepsizeStatus",
                     "RunStatus", "Engine"), "errors"),
}

__all__ = list(_EXPORTS)

#: old top-level names (0.1) -> (subpackage, name there): they still work, warn, and point to
#: their home; removed in 0.3. The renamed ones (``Trace``, ``simulate``, ``assess_stepsize``,
#: ``wardrop_equilibrium`` …) point to their new name.
_MOVED = {
    **{n: ("errors", n) for n in (
        "TopologyError", "ModelError", "InfeasibleDemandError", "SolverError", "UnstableError",
        "DataFormatError", "StepsizeError", "BoundaryEquilibriumError", "SweepError",
        "ParameterError")},
    **{n: ("models", n) for n in ("ServiceModel", "ExpSaturation", "service_model",
                                  "ModelBank", "check_assumption_1")},
    **{n: ("costs", n) for n in ("CostKind", "cell_cost", "cell_cost_prime", "static_cost",
                                 "arc_costs", "flow_cost", "flow_potential",
                                 "total_latency_rate")},
    "FeasibilityReport": ("network", "FeasibilityReport"),
    **{n: ("simplex", n) for n in ("project_simplex", "project_tangent_cone", "simplex_argmin",
                                   "flow_update")},
    **{n: ("io", n) for n in ("topology_from_dict", "topology_to_dict", "write_json_atomic",
                              "run_manifest")},
    **{n: ("instances", n) for n in ("symmetric_two_cell", "spill_example", "mm1_pigou",
                                     "mm1_pigou_poa", "random_network", "full_mesh")},
    **{n: ("stats", n) for n in ("percentile", "percentiles", "summarize", "mean_ci")},
    **{n: ("workloads", n) for n in ("trace_from_arrays", "workload_from_arrays",
                                     "mix_traces")},
    **{n: ("games", n) for n in ("GameArc", "Commodity", "GameResult", "GamePoAResult",
                                 "Objective", "FWMethod", "frank_wolfe", "to_routing_game",
                                 "gradient_projection", "TAPState", "bush_assignment",
                                 "BushState", "solve_game", "certify", "synthetic_network",
                                 "write_tntp")},
    # the deprecated games verbs: the top-level spelling now means the verb, which takes a
    # CellNetwork or a RoutingGame (the games aliases took a game only)
    "wardrop_equilibrium": ("equilibrium", "solve_wardrop"),
    "system_optimum": ("equilibrium", "solve_system_optimum"),
    **{n: ("equilibrium", n) for n in ("EquilibriumProblem", "solve_equilibrium",
                                       "optimality_residuals", "evaluate_routing",
                                       "demand_sweep")},
    **{n: ("stability", n) for n in ("empirical_rule", "operating_point", "linearise",
                                     "CriticalStepsize")},
    "assess_stepsize": ("stability", "check_stepsize"),
    **{n: ("barrier", n) for n in ("fscore_br0", "StepTimeModel", "ReplicaView", "BR0Router",
                                   "BRHRouter")},
    **{n: ("routers", n) for n in ("Router", "Assignment", "CellView", "DiscreteRouter",
                                   "FlowRouter", "RandomRouter", "MNLBRouter", "JSQRouter",
                                   "PowerOfDRouter", "RoundRobinRouter", "ErrorAversion",
                                   "AffinityRouter")},
    **{n: ("registry", n) for n in ("POLICIES", "POLICY_NAMES", "compare_policies")},
    "simulate": ("sim", "simulate_cells"),
    **{n: ("sim", n) for n in ("scenario_from_dict", "appendix_b_scenario", "Estimation")},
    **{n: ("intelligent", n) for n in ("ClusterSim", "InstanceView", "run_router",
                                       "IterationTimeModel", "fit_iteration_model",
                                       "calibrate_impact", "fit_length_predictor")},
    **{n: ("sweep", n) for n in ("Experiment", "SweepResult", "run_sweep", "script_main",
                                 "discover_experiments")},
    # renamed in 0.2
    "Trace": ("workloads", "Workload"),
    "RouterView": ("routers", "CellView"),
}


def __getattr__(name: str) -> object:
    from importlib import import_module

    mod = _EXPORTS.get(name)
    if mod is not None:
        value = getattr(import_module(f"{__name__}.{mod}"), name)
        globals()[name] = value  # cached: the next access is a plain attribute
        return value
    if name in _MOVED:
        from .errors import warn_deprecated

        mod, new = _MOVED[name]
        where = new if new in _EXPORTS else f"{mod}.{new}"
        warn_deprecated(f"lbtheory.{name}", f"lbtheory.{where}")
        return getattr(import_module(f"{__name__}.{mod}"), new)
    raise AttributeError(f"module 'lbtheory' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names only (``__all__`` and ``__version__``), not the facade's machinery."""
    return sorted([*__all__, "__version__"])
