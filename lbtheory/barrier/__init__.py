"""BalanceRoute (THEORY §9): barrier imbalance, F-scores, predictors, schedulers, decode simulator.

Modules: :mod:`.imbalance` (calculator), :mod:`.fscore` (BR-0 / BR-H scores, subset search),
:mod:`.predictors` (Oracle, Empirical-Survival, ExactMatch), :mod:`.protocol` (the decode
simulator's :class:`ReplicaView`), :mod:`.schedulers` (BR-0 / BR-H two-stage schedulers),
:mod:`.sim` (trace-driven decode simulation), :mod:`.compare` (summaries of several runs).

These are *decode-slot* schedulers inside one data-parallel engine; they follow the one router
contract of :mod:`lbtheory.routers`, whose shared baselines (random, RR, P2C, JSQ, JSQ-tokens) run
here too. Policies are made by name in :mod:`lbtheory.registry`
(``make_router("br0", "replicas")``).
"""

from .compare import summary_table
from .fscore import (
    best_subset,
    discount_vector,
    expected_contribution,
    fscore_br0,
    fscore_horizon,
    fscore_profile,
    projected_loads,
    projected_margins,
    refill_loads,
    score_peak,
    subset_table,
)
from .imbalance import (
    StepTimeModel,
    as_load_matrix,
    bottleneck,
    calibrate_step_time,
    idle_fraction,
    imbalance_from_totals,
    margins,
    run_idle_fraction,
    step_imbalance,
    throughput,
    tpot_per_request,
    tpot_percentiles,
)
from .predictors import ExactMatchPredictor, OraclePredictor, SurvivalPredictor
from .protocol import ReplicaView
from .schedulers import (
    BR0Router,
    BRHRouter,
    BRHState,
    BRParams,
    GuardScope,
    Lifetime,
    MarginSource,
    OwnLoad,
    PredictorKind,
    Refill,
    allocate,
    br0,
    brh,
    brh_router,
)
from .sim import DecodeConfig, DecodeResult, decide_tick, decode_steps, simulate_decode

__all__ = [
    "best_subset", "discount_vector", "expected_contribution", "fscore_br0", "fscore_horizon",
    "projected_loads", "projected_margins", "score_peak", "subset_table",
    "StepTimeModel", "as_load_matrix", "bottleneck", "calibrate_step_time", "idle_fraction",
    "imbalance_from_totals", "margins", "run_idle_fraction", "step_imbalance", "throughput",
    "tpot_per_request", "tpot_percentiles", "ExactMatchPredictor", "OraclePredictor",
    "SurvivalPredictor", "ReplicaView", "DecodeConfig", "DecodeResult", "decode_steps",
    "decide_tick",
    "simulate_decode", "BRParams", "allocate", "br0", "brh", "brh_router", "BR0Router",
    "BRHRouter", "BRHState", "PredictorKind", "summary_table", "GuardScope", "Lifetime",
    "MarginSource", "OwnLoad", "Refill", "fscore_profile", "refill_loads",
]
