"""BalanceRoute: step-barrier imbalance, F-scores, predictors and the decode simulator (THEORY §9).

Modules: :mod:`.imbalance` (calculator), :mod:`.fscore` (BR-0 / BR-H scores, subset search),
:mod:`.predictors` (Oracle, Empirical-Survival, ExactMatch), :mod:`.protocol` (router contract),
:mod:`.sim` (trace-driven decode simulation). The schedulers live in :mod:`lbtheory.routers`.
"""

from __future__ import annotations

from .fscore import (
    best_subset,
    discount_vector,
    expected_contribution,
    fscore_br0,
    fscore_horizon,
    projected_loads,
    projected_margins,
    score_peak,
    subset_table,
)
from .imbalance import (
    StepTimeModel,
    as_load_matrix,
    bottleneck,
    calibrate_step_time,
    idle_fraction,
    margins,
    run_idle_fraction,
    step_imbalance,
    throughput,
    tpot_per_request,
    tpot_percentiles,
)
from .predictors import ExactMatchPredictor, OraclePredictor, SurvivalPredictor
from .protocol import ClusterView, Router
from .sim import DecodeConfig, DecodeResult, decode_steps, simulate_decode

__all__ = [
    "best_subset", "discount_vector", "expected_contribution", "fscore_br0", "fscore_horizon",
    "projected_loads", "projected_margins", "score_peak", "subset_table",
    "StepTimeModel", "as_load_matrix", "bottleneck", "calibrate_step_time", "idle_fraction",
    "margins", "run_idle_fraction", "step_imbalance", "throughput", "tpot_per_request",
    "tpot_percentiles", "ExactMatchPredictor", "OraclePredictor", "SurvivalPredictor",
    "ClusterView", "Router", "DecodeConfig", "DecodeResult", "decode_steps", "simulate_decode",
]
