"""Requests: the one request type (:class:`Workload`), trace readers (Azure LLM inference,
Mooncake, JSONL/CSV) and the trace mixer.

Every simulator reads a :class:`Workload` — the DLB cell simulator, the Intelligent Router's
instance simulator and BalanceRoute's decode simulator. ``Trace`` is the old name of the same
type (deprecated alias, kept for one release).
"""

from typing import Any

from ._mix import mix_traces
from ._workload import MAX_TOKENS, TraceOrderWarning, Workload, workload_from_arrays
from .traces import COLUMN_ALIASES, TraceFormatWarning, read_trace, trace_from_arrays

__all__ = ["Workload", "TraceOrderWarning", "TraceFormatWarning", "read_trace", "trace_from_arrays",
           "workload_from_arrays", "mix_traces", "COLUMN_ALIASES", "MAX_TOKENS"]


def __getattr__(name: str) -> Any:
    if name == "Trace":
        from ..errors import warn_deprecated

        warn_deprecated("lbtheory.workloads.Trace", "lbtheory.workloads.Workload (the same type)")
        return Workload
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
