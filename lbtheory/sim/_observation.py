"""What routers observe, as scenario fields: how stale the probed workloads are
(:class:`Probing`, the model of :mod:`._staleness`) and how wrong the latency models they see
are (:class:`ModelNoise`, applied by :class:`~._probes.SeenModels`). Issue 36 items 1 and 3."""

from __future__ import annotations

import dataclasses

from .._checks import check_int, check_real

__all__ = ["Probing", "ModelNoise"]


@dataclasses.dataclass(frozen=True)
class Probing:
    """How stale the root routers' view of a cell's workload is (DLB §3.1), beyond one round
    every ``probe_period_s`` read one one-way delay late (:mod:`._staleness` has the model and
    ``probe_age_s``, the age it produces).

    Every default is [R], fixed from the paper's description of its stack before any run:

    * ``root_replicas`` = 3: "both tiers use multiple router replicas"; "the root routers
      within a cell take turns probing leaves and sharing the results with local peer root
      routers". Three is the smallest group that stays redundant with one replica down.
      Round k is made by replica k mod R; the source's router state stands for one replica,
      which sees its own rounds at once and its peers' ``share_delay_s`` later.
    * ``share_delay_s`` = 1 ms: a peer-to-peer hop inside one cell; the paper puts a whole
      root + leaf traversal at "a few hundred microseconds to one millisecond".
    * ``leaf_cache_period_s`` = 10 ms: "the leaf router asynchronously queries all peer leaf
      routers within the cell and caches the aggregated results"; no period is given, so the
      cache is refreshed as often as it is read (the probe period's default), each cell at
      its own phase (asynchronous).
    * ``jitter_s`` = None (one probe period): roots probe "at a pre-specified frequency" but
      not in lockstep; an asynchronous probe answer is up to one period older than a
      synchronised round's, uniformly.

    Attributes (s unless said): root_replicas (count ≥ 1), share_delay_s, leaf_cache_period_s
    (0 = no cache: the leaf answers with the live count), jitter_s (None: probe period).
    """

    root_replicas: int = 3
    share_delay_s: float = 0.001
    leaf_cache_period_s: float = 0.01
    jitter_s: float | None = None

    def __post_init__(self) -> None:
        check_int(self.root_replicas, "Probing.root_replicas", low=1)
        for name in ("share_delay_s", "leaf_cache_period_s"):
            check_real(getattr(self, name), f"Probing.{name}", unit="s", low=0.0)
        if self.jitter_s is not None:
            check_real(self.jitter_s, "Probing.jitter_s", unit="s", low=0.0)

    def jitter(self, probe_period_s: float) -> float:
        """The jitter bound (s): ``jitter_s``, or one probe period when None."""
        return float(probe_period_s if self.jitter_s is None else self.jitter_s)

    def max_extra_age(self, probe_period_s: float) -> float:
        """The most this model adds to a read's age beyond one one-way delay (s)."""
        return self.share_delay_s + self.jitter(probe_period_s) + self.leaf_cache_period_s


@dataclasses.dataclass(frozen=True)
class ModelNoise:
    """Latency-estimation error as DLB App. B can mean it (issue 36 item 3): the routers see
    each cell's model with its parameters θ̂ × (1 + εξ), ξ ~ U[−1, 1] — drawn from the run's
    seed (so independently per trial), independently per parameter (``joint`` = one ξ per cell
    for all its parameters, the generator's old reading), once per run or redrawn every
    ``period_s`` seconds (:class:`~._probes.SeenModels`).

    Attributes: eps (ε, in [0, 1)), joint, period_s (s; None = drawn once).
    """

    eps: float
    joint: bool = False
    period_s: float | None = None

    def __post_init__(self) -> None:
        check_real(self.eps, "ModelNoise.eps (ε)", low=0.0, high=1.0, high_open=True)
        if self.period_s is not None:
            check_real(self.period_s, "ModelNoise.period_s", unit="s", low=0.0, low_open=True)
