"""Run several decode-slot policies on one trace (shared by the CLI, experiments and notebooks)."""

from __future__ import annotations

from collections.abc import Sequence

from ..workloads import Trace
from .baselines import Seed
from .policies import BRParams, Policy, make_router, parse_policies
from .sim import DecodeConfig, DecodeResult, simulate_decode

__all__ = ["compare_policies", "summary_table"]


def compare_policies(trace: Trace, policies: Sequence[Policy | str] | str, *,
                     config: DecodeConfig, seed: Seed = 0, horizon: int = 80, gamma: float = 1.0,
                     params: BRParams | None = None) -> dict[str, DecodeResult]:
    """Simulate every policy on ``trace`` under ``config``; results keyed by policy name.

    Args:
        trace: the requests.
        policies: names (or a comma-separated string) from
            :data:`lbtheory.routers.BARRIER_POLICIES`.
        config: cluster settings (replicas, slots, window, time scale, step model).
        seed: seed of the random baselines.
        horizon, gamma: BR-H horizon (steps) and discount.
        params: BR two-stage settings.

    Raises:
        ModelError: an unknown policy name (checked before anything runs).
    """
    names = parse_policies(policies) if isinstance(policies, str) else \
        parse_policies(",".join(policies))
    out: dict[str, DecodeResult] = {}
    for name in names:
        router = make_router(name, trace=trace, seed=seed, horizon=horizon, gamma=gamma,
                             params=params)
        out[name] = simulate_decode(trace, router, config=config)
    return out


def summary_table(results: dict[str, DecodeResult]) -> dict[str, dict[str, float]]:
    """``{policy: summary}`` with the simulation wall time added (``sim_wall_s``)."""
    return {name: res.summary() | {"sim_wall_s": res.sim_wall_s} for name, res in results.items()}
