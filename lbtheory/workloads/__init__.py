"""Request workloads: trace readers (Azure LLM inference, Mooncake, JSONL/CSV), the ``Trace``.

A :class:`Trace` is the one request-level input of the barrier simulator (and, later, of the DLB
event simulator and the Intelligent Router): arrival times (s), prompt and output lengths (tokens).
"""

from .traces import COLUMN_ALIASES, Trace, TraceOrderWarning, read_trace, trace_from_arrays

__all__ = ["Trace", "TraceOrderWarning", "read_trace", "trace_from_arrays", "COLUMN_ALIASES"]
