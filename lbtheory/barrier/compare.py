"""Summaries of several decode-simulator runs (shared by the CLI, experiments and notebooks).

Running several *named* policies on one workload goes through the registry:
:func:`lbtheory.registry.compare_policies`.
"""

from __future__ import annotations

from .sim import DecodeResult

__all__ = ["summary_table"]


def summary_table(results: dict[str, DecodeResult]) -> dict[str, dict[str, float]]:
    """``{policy: summary}`` with the simulation wall time added (``sim_wall_s``)."""
    return {name: res.summary() | {"sim_wall_s": res.sim_wall_s} for name, res in results.items()}
