"""Policy names of the CLI contract (no heavy imports: ``lbtheory --help`` reads them)."""

from __future__ import annotations

__all__ = ["POLICY_NAMES"]

#: The policy names of ``lbtheory simulate --policy`` (issue 11), in display order.
POLICY_NAMES: tuple[str, ...] = ("disc-rif", "disc-lat", "disc-grad", "flow-rif", "flow-lat",
                                 "flow-grad", "rand", "mnlb", "rr", "jsq", "p2c")
