"""BalanceRoute (THEORY §9): barrier imbalance, F-scores, predictors, schedulers, decode simulator.

Modules: :mod:`.imbalance` (calculator), :mod:`.fscore` (BR-0 / BR-H scores, subset search),
:mod:`.predictors` (Oracle, Empirical-Survival, ExactMatch), :mod:`.protocol` (decode-slot router
contract), :mod:`.schedulers` (BR-0 / BR-H two-stage schedulers), :mod:`.baselines` (random, RR,
P2C, JSQ, JSQ-tokens), :mod:`.policies` (policies by name), :mod:`.sim` (trace-driven decode
simulation), :mod:`.compare` (several policies on one trace).

These are *decode-slot* schedulers inside one data-parallel engine; DLB's cell routers are a
different thing and live in :mod:`lbtheory.routers`.
"""

from __future__ import annotations

from .baselines import Seed, jsq, jsq_tokens, power_of_two, random_router, rng_factory, round_robin
from .compare import compare_policies, summary_table
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
from .policies import BARRIER_POLICIES, Policy, make_router, parse_policies
from .predictors import ExactMatchPredictor, OraclePredictor, SurvivalPredictor
from .protocol import ClusterView, Router
from .schedulers import (
    BRParams,
    GuardScope,
    Lifetime,
    MarginSource,
    OwnLoad,
    Refill,
    allocate,
    br0,
    brh,
)
from .sim import DecodeConfig, DecodeResult, decode_steps, simulate_decode

__all__ = [
    "best_subset", "discount_vector", "expected_contribution", "fscore_br0", "fscore_horizon",
    "projected_loads", "projected_margins", "score_peak", "subset_table",
    "StepTimeModel", "as_load_matrix", "bottleneck", "calibrate_step_time", "idle_fraction",
    "imbalance_from_totals", "margins", "run_idle_fraction", "step_imbalance", "throughput",
    "tpot_per_request", "tpot_percentiles", "ExactMatchPredictor", "OraclePredictor",
    "SurvivalPredictor",
    "ClusterView", "Router", "DecodeConfig", "DecodeResult", "decode_steps", "simulate_decode",
    "BARRIER_POLICIES", "make_router", "parse_policies", "BRParams", "allocate", "br0", "brh",
    "jsq", "jsq_tokens", "power_of_two", "random_router", "round_robin",
    "compare_policies", "summary_table", "Policy", "GuardScope", "Seed", "rng_factory",
    "Lifetime", "MarginSource", "OwnLoad", "Refill", "fscore_profile", "refill_loads",
]
