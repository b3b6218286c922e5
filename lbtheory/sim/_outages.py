"""The online-server changes a scenario's outages make (both engines push them): nested or
overlapping outages compose (split from :mod:`._scenario` to keep modules small)."""

from __future__ import annotations

from typing import Any

__all__ = ["outage_events"]


def outage_events(outages: tuple[Any, ...], replicas: Any) -> list[tuple[float, int, int]]:
    """The online-server changes of ``outages`` (the scenario's ``Outage`` records) —
    ``(t, cell, online)`` at each outage's start and end, in that order (both engines push
    them so) — where ``online`` is the cell's servers after every change at t: the minimum
    ``replicas`` of its outages active at t ([start_s, end_s)), or all its ``replicas[cell]``
    servers when none is. So a short outage nested in a long one does not end the long one."""

    def online(cell: int, t: float) -> int:
        return min([int(replicas[cell])] + [o.replicas for o in outages
                                            if o.cell == cell and o.start_s <= t < o.end_s])

    return [(t, o.cell, online(o.cell, t)) for o in outages for t in (o.start_s, o.end_s)]
