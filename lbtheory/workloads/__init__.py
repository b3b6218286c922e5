"""Requests: the one request type (:class:`Workload`), trace readers (Azure LLM inference,
Mooncake, JSONL/CSV), the trace mixer and seeded synthetic task mixes (the Intelligent
Router's five-task and production-like workloads).

Every simulator reads a :class:`Workload` — the DLB cell simulator, the Intelligent Router's
instance simulator and BalanceRoute's decode simulator. ``Trace`` is the old name of the same
type (deprecated alias, kept for one release).
"""

from ._mix import mix_traces
from ._tasks import (
    FIVE_TASKS,
    PRODUCTION_LIKE,
    PRODUCTION_MEANS,
    TaskShape,
    five_task_workload,
    production_like_workload,
    scale_to_means,
    task_mix,
)
from ._workload import MAX_TOKENS, TraceOrderWarning, Workload, workload_from_arrays
from .traces import COLUMN_ALIASES, TraceFormatWarning, read_trace, trace_from_arrays

__all__ = ["Workload", "TraceOrderWarning", "TraceFormatWarning", "read_trace", "trace_from_arrays",
           "workload_from_arrays", "mix_traces", "COLUMN_ALIASES", "MAX_TOKENS", "TaskShape",
           "task_mix", "scale_to_means", "FIVE_TASKS", "PRODUCTION_LIKE", "PRODUCTION_MEANS",
           "five_task_workload", "production_like_workload"]


def __getattr__(name: str) -> object:
    if name == "Trace":
        from ..errors import warn_deprecated

        warn_deprecated("lbtheory.workloads.Trace", "lbtheory.workloads.Workload (the same type)")
        return Workload
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
