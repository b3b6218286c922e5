"""Simulation scenarios: a cell network (today's topology schema) plus a ``simulation:`` section.

Schema (units: seconds, tokens; every field optional, defaults in brackets)::

    cells: [...]            # topology schema; replicas = servers per cell, service = the latency
    arcs:  [...]            # model the latency/gradient routers use (the "fitted" model)
    simulation:             # absent (or empty) = every cell runs `rate` servers: the file's
                            # service models, so `simulate` answers what `equilibrium` computes
      server:               # defaults for every cell
        kind: appendix_b    # [appendix_b] 1 prefill engine + decode_engines × slots_per_engine;
                            # or mmc: `slots` parallel slots, exponential service of mean
                            # `mean_service_s`; or rate: completions at rate μ_j(N_j) of the
                            # cell's service model (fluid-limit validation)
        prefill_s_per_token: 0.00025   # [R] THEORY §11.1 item 4
        decode_s_per_token: 0.025      # [R]
        decode_engines: 2
        slots_per_engine: 4
        slots: 1                        # mmc only
        mean_service_s: 1.0             # mmc only
        queue_limit: 32                 # requests waiting per server; overflow = error [R];
                                        # null = unbounded
      cells: {NAME: {any server field}} # per-cell overrides
      prompt_tokens: {shift: 16, shape: 1.5, scale: 300}   # P = shift + Gamma(shape, scale) [R]
      output_tokens: {shift: 4, shape: 1.2, scale: 40}     # D = shift + Gamma(shape, scale) [R]
      probe_period_s: 0.01    # root routers probe every cell this often
      probing:                # present = staleness of DLB's stack (§3.1) on top of the
                              # period; absent = one synchronised round, read one τ late
        root_replicas: 3      # [R] root replicas per source taking turns probing
        share_delay_s: 0.001  # [R] a peer's probe result reaches the others this late (s)
        leaf_cache_period_s: 0.01  # [R] leaves re-aggregate the cell's RIF this often (s)
        jitter_s: null        # [R] asynchronous probes: an answer up to this much older
                              # (s); null = one probe period
      leaf_policy: p2c        # in-cell routing to servers: p2c (waiting tokens) or rr
      rate_variation:         # present = time-varying Poisson arrivals: λ_i(t) = λ_i·m_i(t)
        sigma: 0.213          # [0] sd of log m_i (stationary); m_i has mean 1
        correlation: 0.865    # [0] lag-1 correlation of log m_i between intervals (AR(1))
        interval_s: 60.0      # [60] m_i is constant on [k·interval, (k+1)·interval)
                              # (0.213 / 0.865: the Azure conversation trace's per-minute
                              # counts, lbtheory.sim.rate_variation_from_counts)
      bursts:  [{cell: NAME, start_s: 180, end_s: 420, factor: 2.0}]   # λ_cell × factor
      outages: [{cell: NAME, start_s: 180, end_s: 420, replicas: 1}]   # online servers
      # overlapping events on one cell compose: bursts multiply (λ × both factors); outages
      # leave the fewest online servers of those active (the minimum), until none is active
      estimation:             # present = on: cells refit ℓ(N) on a sliding window (DLB §3.3)
        family: softplus      # or mm1
        window: 4000          # most recent (N at arrival, serving latency) samples per cell
        period_s: 5.0         # refit period
        min_samples: 30
        noise_eps: 0.0        # robustness mode: routers see ℓ̂ × (1 + εξ_j), ξ_j ~ U[−1, 1]
      model_noise:            # present = routers see every cell's model with its parameters
        eps: 0.1              # × (1 + εξ), ξ ~ U[−1, 1] drawn from the run's seed (per trial)
        joint: false          # [false] one ξ per parameter; true = one ξ per cell for all
        period_s: null        # [null] drawn once; else redrawn every period_s seconds
      affinity:               # present = requests belong to sessions (DLB §3.5) [R]
        followup_fraction: 0.65   # share of requests continuing a recent session
        active_sessions: 50       # recent sessions per source a follow-up picks from
        prefill_saving: 0.45      # prefill cut when served in the cell of the session's last one
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
from collections.abc import Mapping
from typing import Any

from .._checks import check_int, check_memory, check_option, check_real, check_ticks
from ..errors import DataFormatError
from ..io import read_config_file, topology_from_dict
from ..network import CellNetwork
from ..routers import FitFamily
from ._observation import ModelNoise, Probing
from ._outages import outage_events

__all__ = ["ServerSpec", "ServerKind", "LeafPolicy", "TokenDist", "Burst", "Outage",
           "Estimation", "Affinity", "RateVariation", "Probing", "ModelNoise",
           "Scenario", "scenario_from_dict",
           "load_scenario", "SERVER_KINDS", "outage_events"]


class ServerKind(enum.StrEnum):
    """The servers of a cell (module docstring)."""

    #: one prefill engine, then a decode slot out of decode_engines × slots_per_engine.
    APPENDIX_B = "appendix_b"
    #: ``slots`` parallel slots, exponential service of mean ``mean_service_s`` (validation).
    MMC = "mmc"
    #: the cell completes requests at rate μ_j(N_j) of its service model (fluid-limit check).
    RATE = "rate"


class LeafPolicy(enum.StrEnum):
    """In-cell routing of a request to one of the cell's online servers."""

    #: power of two choices on outstanding tokens (requests on ``mmc`` servers).
    P2C = "p2c"
    #: round robin.
    RR = "rr"


SERVER_KINDS = tuple(k.value for k in ServerKind)

#: Most parallel slots of one server [R]: a real engine batches at most a few thousand
#: sequences; a larger number is a typo (``decode_engines: 1e9``).
MAX_SLOTS = 65536
#: Most probe rounds one run may have (a 1-ns probe period is a typo, not an experiment).
MAX_PROBE_ROUNDS = 10**9
#: Most latency refits one run may have (each is a least-squares fit per cell).
MAX_REFITS = 10**6
#: Memory planned per arriving request (bytes): the request's columns plus the reference
#: engine's per-request records (Python lists of floats).
BYTES_PER_REQUEST = 400


@dataclasses.dataclass(frozen=True)
class ServerSpec:
    """One cell's servers (all k_j identical).

    Attributes:
        kind: "appendix_b" (prefill engine + decode slots), "mmc" (validation server), or
            "rate" (validation server for the fluid limit: the cell is one FIFO queue whose
            completions form a Poisson process of rate μ_j(N_j) of the cell's declared service
            model, THEORY §1–§2; replicas are ignored).
        prefill_s_per_token, decode_s_per_token: per-token times (s/token), appendix_b.
        decode_engines, slots_per_engine: decode parallelism (appendix_b).
        slots: parallel slots c (mmc).
        mean_service_s: mean of the exponential service time (s, mmc).
        queue_limit: requests waiting (not in service) per server; None = unbounded.
    """

    kind: ServerKind | str = ServerKind.APPENDIX_B
    prefill_s_per_token: float = 0.25e-3
    decode_s_per_token: float = 25e-3
    decode_engines: int = 2
    slots_per_engine: int = 4
    slots: int = 1
    mean_service_s: float = 1.0
    queue_limit: int | None = 32

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", check_option(ServerKind, self.kind, "ServerSpec.kind"))
        slots = self.decode_slots if self.kind is ServerKind.APPENDIX_B else self.slots
        if slots > MAX_SLOTS:  # [R] no inference server runs millions of sequences at once
            raise DataFormatError(f"a server with {slots:,} parallel slots: expected at most "
                                  f"{MAX_SLOTS:,} (decode_engines × slots_per_engine, or slots)",
                                  field="slots")

    @property
    def decode_slots(self) -> int:
        """Parallel decode slots per server."""
        return self.decode_engines * self.slots_per_engine

    def max_rate(self, mean_prompt: float, mean_output: float) -> float:
        """Saturation rate of one server (req/s): mmc c/mean; appendix_b
        min(1/(E[P] t_p), slots/(E[D] t_d)) (THEORY §11.1 item 6 [R])."""
        if self.kind is ServerKind.MMC:
            return self.slots / self.mean_service_s
        if self.kind is ServerKind.RATE:
            return math.inf  # the cell's μ̄ is its service model's (see Scenario.capacities)
        return min(1.0 / (mean_prompt * self.prefill_s_per_token),
                   self.decode_slots / (mean_output * self.decode_s_per_token))


@dataclasses.dataclass(frozen=True)
class TokenDist:
    """Shifted Gamma token count: shift + Gamma(shape, scale), rounded to whole tokens."""

    shift: float
    shape: float
    scale: float

    @property
    def mean(self) -> float:
        """Mean tokens (before rounding)."""
        return self.shift + self.shape * self.scale


@dataclasses.dataclass(frozen=True)
class Burst:
    """λ of ``cell`` (index) multiplied by ``factor`` during [start_s, end_s)."""

    cell: int
    start_s: float
    end_s: float
    factor: float


@dataclasses.dataclass(frozen=True)
class Outage:
    """Only ``replicas`` servers of ``cell`` (index) accept requests during [start_s, end_s).

    Outages of one cell that overlap compose: the cell has the fewest online servers of the
    outages active at t (:func:`outage_events`)."""

    cell: int
    start_s: float
    end_s: float
    replicas: int


@dataclasses.dataclass(frozen=True)
class Estimation:
    """Latency estimation in the cells (DLB §3.3) and its robustness mode (THEORY §11.1 item 10).

    Attributes:
        family: fitted model family, "softplus" or "mm1".
        window: samples kept per cell (most recent) [R]: enough to span the load changes that
            identify a knee — at ≈50 req/s per cell 4000 samples cover ≈80 s, more than one
            interval of the Appendix-B rate path (60 s); 400 (≈8 s at one load) did not, and
            the fits degenerated (issue 25 item 3).
        period_s: refit period (s).
        min_samples: a cell refits only with at least this many samples.
        noise_eps: ε; routers see the fitted latency × (1 + εξ_j), ξ_j ~ U[−1, 1] per cell.
    """

    family: FitFamily | str = FitFamily.SOFTPLUS
    window: int = 4000
    period_s: float = 5.0
    min_samples: int = 30
    noise_eps: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "family",
                           check_option(FitFamily, self.family, "Estimation.family"))


@dataclasses.dataclass(frozen=True)
class RateVariation:
    """Time-varying Poisson arrivals (DLB App. B.1: "a time-varying Poisson process"): source
    i's rate is λ_i(t) = λ_i·m_i(t), where m_i is constant on each interval
    [k·interval_s, (k+1)·interval_s) and log m_i follows a stationary Gaussian AR(1) across
    intervals, independently per source, with sd ``sigma`` and lag-1 correlation
    ``correlation``; m_i = exp(z − σ²/2), so E[m_i] = 1 and λ_i stays the mean rate. The path
    is drawn from the run's seed (each trial its own path; :func:`lbtheory.sim.rate_profile`).

    Attributes:
        sigma: sd of log m_i (≥ 0; 0 = homogeneous Poisson).
        correlation: lag-1 correlation of log m_i between consecutive intervals, in [0, 1).
        interval_s: length of an interval (s).
    """

    sigma: float = 0.0
    correlation: float = 0.0
    interval_s: float = 60.0

    def __post_init__(self) -> None:
        check_real(self.sigma, "RateVariation.sigma", low=0.0, high=3.0)
        check_real(self.correlation, "RateVariation.correlation", low=0.0, high=1.0,
                   high_open=True)
        check_real(self.interval_s, "RateVariation.interval_s", unit="s", low=0.0,
                   low_open=True)


@dataclasses.dataclass(frozen=True)
class Affinity:
    """Sessions and prefix caching (DLB §3.5; THEORY §8) [R defaults from the paper's 60–70%
    cacheable requests and 40–50% prefill reduction]."""

    followup_fraction: float = 0.65
    active_sessions: int = 50
    prefill_saving: float = 0.45


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A network plus everything the event simulator needs (see the module docstring)."""

    network: CellNetwork
    servers: tuple[ServerSpec, ...]
    prompt_tokens: TokenDist = TokenDist(16.0, 1.5, 300.0)
    output_tokens: TokenDist = TokenDist(4.0, 1.2, 40.0)
    probe_period_s: float = 0.01
    leaf_policy: LeafPolicy | str = LeafPolicy.P2C
    bursts: tuple[Burst, ...] = ()
    outages: tuple[Outage, ...] = ()
    name: str = ""
    estimation: Estimation | None = None
    affinity: Affinity | None = None
    rate_variation: RateVariation | None = None
    probing: Probing | None = None
    model_noise: ModelNoise | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "leaf_policy",
                           check_option(LeafPolicy, self.leaf_policy, "Scenario.leaf_policy"))

    def server_rates(self) -> list[float]:
        """Saturation rate of one server of each cell (req/s); a "rate" cell's μ̄/k."""
        return [float(c.service.max_rate) / c.replicas if s.kind is ServerKind.RATE else
                s.max_rate(self.prompt_tokens.mean, self.output_tokens.mean)
                for s, c in zip(self.servers, self.network.cells)]

    def capacities(self) -> list[float]:
        """μ̄_j = k_j × server rate (req/s)."""
        return [c.replicas * r for c, r in zip(self.network.cells, self.server_rates())]

    def expected_requests(self, duration_s: float) -> float:
        """Mean number of arrivals on [0, duration_s): Σ_i λ_i·T plus the bursts' extra (the
        mean over rate paths when the rates vary)."""
        lam = self.network.arrival_rates
        extra = sum(lam[b.cell] * (b.factor - 1.0) * max(0.0, min(b.end_s, duration_s)
                                                         - min(b.start_s, duration_s))
                    for b in self.bursts)
        return float(lam.sum() * duration_s + extra)

    def check_run(self, duration_s: float) -> None:
        """Refuse, up front, a run this machine cannot finish (naming the limit): more than
        :data:`MAX_PROBE_ROUNDS` probe rounds or :data:`MAX_REFITS` refits, more simulated time
        than the clock resolves, or arrivals needing more memory than
        :func:`lbtheory._checks.memory_limit_bytes` (at :data:`BYTES_PER_REQUEST`, 5 σ above
        the mean count)."""
        check_real(duration_s, "duration_s", unit="s", low=0.0, low_open=True)
        check_ticks(duration_s, min(self.probe_period_s, duration_s), "simulation duration")
        rounds = duration_s / self.probe_period_s
        if rounds > MAX_PROBE_ROUNDS:
            raise DataFormatError(f"simulation.probe_period_s: {self.probe_period_s:g} s over "
                                  f"{duration_s:g} s is {rounds:.3g} probe rounds, more than "
                                  f"the {MAX_PROBE_ROUNDS:.0e} a run may have",
                                  field="probe_period_s")
        mn = self.model_noise
        if mn is not None and mn.period_s is not None and duration_s / mn.period_s > MAX_REFITS:
            raise DataFormatError(f"simulation.model_noise.period_s: {mn.period_s:g} s over "
                                  f"{duration_s:g} s is {duration_s / mn.period_s:.3g} "
                                  f"redraws, more than the {MAX_REFITS:.0e} a run may have",
                                  field="model_noise.period_s")
        if self.estimation is not None and duration_s / self.estimation.period_s > MAX_REFITS:
            raise DataFormatError(f"simulation.estimation.period_s: "
                                  f"{self.estimation.period_s:g} s over {duration_s:g} s is "
                                  f"{duration_s / self.estimation.period_s:.3g} refits, more "
                                  f"than the {MAX_REFITS:.0e} a run may have",
                                  field="estimation.period_s")
        mean = self.expected_requests(duration_s)
        if self.rate_variation is not None:  # a rate path may run high: 3 sd of log m above
            mean *= math.exp(3.0 * self.rate_variation.sigma)
        check_memory((mean + 5.0 * math.sqrt(mean) + 1.0) * BYTES_PER_REQUEST,
                     f"{mean:.3g} expected requests over {duration_s:g} s")

    def cells_off_service_model(self) -> tuple[str, ...]:
        """Names of the cells whose servers are *not* their service model (kind other than
        ``rate``): there the simulated latency is the servers', not ℓ_j(N) of the file."""
        return tuple(c.name for c, s in zip(self.network.cells, self.servers)
                     if s.kind is not ServerKind.RATE)

    def clipped(self, duration_s: float) -> tuple[Scenario, list[str]]:
        """This scenario with its bursts and outages clipped to [0, duration_s): events that
        start at or after the horizon are dropped, events that end after it are cut at it.
        Returns (scenario, one description per changed event, e.g. ``"bursts[0] (near,
        40–60 s) dropped"``); the list is empty when nothing changed."""
        notes: list[str] = []
        kept: dict[str, list] = {"bursts": [], "outages": []}
        for kind, items in (("bursts", self.bursts), ("outages", self.outages)):
            for b_i, b in enumerate(items):
                what = (f"{kind}[{b_i}] ({self.network.names[b.cell]}, "
                        f"{b.start_s:g}–{b.end_s:g} s)")
                if b.start_s >= duration_s:
                    notes.append(f"{what} dropped")
                elif b.end_s > duration_s:
                    notes.append(f"{what} cut at {duration_s:g} s")
                    kept[kind].append(dataclasses.replace(b, end_s=float(duration_s)))
                else:
                    kept[kind].append(b)
        if not notes:
            return self, notes
        return dataclasses.replace(self, bursts=tuple(kept["bursts"]),
                                   outages=tuple(kept["outages"])), notes

    def check_horizon(self, duration_s: float) -> None:
        """Raise DataFormatError if a burst or outage lies outside [0, duration_s]."""
        for kind, items in (("bursts", self.bursts), ("outages", self.outages)):
            for b_i, b in enumerate(items):
                if b.end_s > duration_s:
                    raise DataFormatError(
                        f"simulation.{kind}[{b_i}].end_s: {b.end_s:g} s is outside the horizon "
                        f"(duration {duration_s:g} s)", field=f"{kind}[{b_i}].end_s")


def _err(path: str, field: str, msg: str) -> DataFormatError:
    return DataFormatError(f"simulation.{field}: {msg}", path=path, field=field)


def _num(path: str, field: str, v: Any, *, positive: bool = True, integer: bool = False,
         allow_none: bool = False) -> Any:
    """A field of the ``simulation:`` section through the one validator (:mod:`lbtheory._checks`),
    as a :class:`DataFormatError` naming the file and field."""
    if v is None and allow_none:
        return None

    def error(msg: str) -> DataFormatError:
        return DataFormatError(msg, path=path, field=field)

    name = f"simulation.{field}"
    if integer:
        return check_int(v, name, low=1 if positive else 0, integral_float=True, error=error)
    return check_real(v, name, low=0.0, low_open=positive, error=error)


def _option(path: str, field: str, cls: type, v: Any) -> Any:
    return check_option(cls, v, f"simulation.{field}",
                        error=lambda msg: DataFormatError(msg, path=path, field=field))


_SERVER_FIELDS = {f.name: f for f in dataclasses.fields(ServerSpec)}


def _server(path: str, where: str, spec: Any, base: ServerSpec) -> ServerSpec:
    if not isinstance(spec, Mapping):
        raise _err(path, where, f"expected a mapping, got {spec!r}")
    unknown = sorted(set(spec) - set(_SERVER_FIELDS))
    if unknown:
        raise _err(path, where, f"unknown field(s) {unknown}; expected {sorted(_SERVER_FIELDS)}")
    kw: dict[str, Any] = {}
    for k, v in spec.items():
        if k == "kind":
            kw[k] = _option(path, f"{where}.kind", ServerKind, v)
        elif k == "queue_limit":
            kw[k] = _num(path, f"{where}.{k}", v, positive=False, integer=True, allow_none=True)
        else:
            integer = k in ("decode_engines", "slots_per_engine", "slots")
            kw[k] = _num(path, f"{where}.{k}", v, integer=integer)
    return dataclasses.replace(base, **kw)


def _tokens(path: str, where: str, spec: Any, default: TokenDist) -> TokenDist:
    if spec is None:
        return default
    if not isinstance(spec, Mapping) or set(spec) - {"shift", "shape", "scale"}:
        raise _err(path, where, f"expected a mapping with shift, shape, scale, got {spec!r}")
    vals = dataclasses.asdict(default) | dict(spec)
    return TokenDist(_num(path, f"{where}.shift", vals["shift"], positive=False),
                     _num(path, f"{where}.shape", vals["shape"]),
                     _num(path, f"{where}.scale", vals["scale"]))


def _window(path: str, where: str, item: Any, net: CellNetwork, extra: str) -> tuple:
    if not isinstance(item, Mapping):
        raise _err(path, where, f"expected a mapping, got {item!r}")
    need = {"cell", "start_s", "end_s", extra}
    if set(item) != need:
        raise _err(path, where, f"expected exactly the fields {sorted(need)}, got {sorted(item)}")
    if item["cell"] not in net.names:
        raise _err(path, f"{where}.cell", f"unknown cell {item['cell']!r}; known cells: "
                                          f"{list(net.names)}")
    start = _num(path, f"{where}.start_s", item["start_s"], positive=False)
    end = _num(path, f"{where}.end_s", item["end_s"])
    if end <= start:
        raise _err(path, f"{where}.end_s", f"must be after start_s ({start:g} s), got {end:g}")
    return net.index(item["cell"]), start, end


def scenario_from_dict(data: Any, *, path: str = "") -> Scenario:
    """Build a :class:`Scenario` from the schema above; errors name the file and field."""
    if not isinstance(data, Mapping):
        raise DataFormatError("top level: expected a mapping", path=path)
    topo = {k: v for k, v in data.items() if k != "simulation"}
    net = topology_from_dict(topo, path=path)
    sim = data.get("simulation") or {}
    if not isinstance(sim, Mapping):
        raise _err(path, "", f"expected a mapping, got {sim!r}")
    # no simulation section: the cells are their service models (rate servers), so a topology
    # file simulates what `lbtheory equilibrium` computes; a section's server defaults to
    # appendix_b (ServerSpec's default)
    default_server = ServerSpec() if sim else ServerSpec(kind=ServerKind.RATE)
    known = {"server", "cells", "prompt_tokens", "output_tokens", "probe_period_s",
             "leaf_policy", "bursts", "outages", "estimation", "affinity", "rate_variation",
             "probing", "model_noise"}
    if set(sim) - known:
        raise _err(path, "", f"unknown key(s) {sorted(set(sim) - known)}; expected "
                             f"{sorted(known)}")
    base = _server(path, "server", sim.get("server", {}), default_server)
    per_cell = sim.get("cells") or {}
    if not isinstance(per_cell, Mapping):
        raise _err(path, "cells", f"expected a mapping cell name -> server fields, "
                                  f"got {per_cell!r}")
    for name in per_cell:
        if name not in net.names:
            raise _err(path, f"cells.{name}", f"unknown cell; known cells: {list(net.names)}")
    servers = tuple(_server(path, f"cells.{c.name}", per_cell[c.name], base)
                    if c.name in per_cell else base for c in net.cells)
    leaf = _option(path, "leaf_policy", LeafPolicy, sim.get("leaf_policy", "p2c"))
    bursts, outages = [], []
    for b_i, b in enumerate(sim.get("bursts") or []):
        j, s, e = _window(path, f"bursts[{b_i}]", b, net, "factor")
        bursts.append(Burst(j, s, e, _num(path, f"bursts[{b_i}].factor", b["factor"],
                                          positive=False)))
    for o_i, o in enumerate(sim.get("outages") or []):
        j, s, e = _window(path, f"outages[{o_i}]", o, net, "replicas")
        r = _num(path, f"outages[{o_i}].replicas", o["replicas"], integer=True)
        if r > net.cells[j].replicas:
            raise _err(path, f"outages[{o_i}].replicas", f"{r} exceeds the cell's "
                                                         f"{net.cells[j].replicas} servers")
        outages.append(Outage(j, s, e, r))
    return Scenario(
        network=net, servers=servers,
        prompt_tokens=_tokens(path, "prompt_tokens", sim.get("prompt_tokens"),
                              Scenario.prompt_tokens),
        output_tokens=_tokens(path, "output_tokens", sim.get("output_tokens"),
                              Scenario.output_tokens),
        probe_period_s=_num(path, "probe_period_s", sim.get("probe_period_s", 0.01)),
        leaf_policy=leaf, bursts=tuple(bursts), outages=tuple(outages),
        name=str(data.get("name", "")), estimation=_estimation(path, sim.get("estimation")),
        affinity=_affinity(path, sim.get("affinity")),
        rate_variation=_rate_variation(path, sim.get("rate_variation")),
        probing=_probing(path, sim.get("probing")),
        model_noise=_model_noise(path, sim.get("model_noise")))


def _model_noise(path: str, spec: Any) -> ModelNoise | None:
    if spec is None:
        return None
    kw: dict[str, Any] = {}
    spec = _section(path, "model_noise", spec, ModelNoise)
    if "eps" not in spec:
        raise _err(path, "model_noise.eps", "missing (the noise magnitude ε)")
    for k, v in spec.items():
        if k == "joint":
            if not isinstance(v, bool):
                raise _err(path, "model_noise.joint", f"expected true or false, got {v!r}")
            kw[k] = v
            continue
        kw[k] = _num(path, f"model_noise.{k}", v, positive=k == "period_s",
                     allow_none=k == "period_s")
        if k == "eps" and kw[k] >= 1:
            raise _err(path, "model_noise.eps", f"expected 0 ≤ ε < 1, got {v!r}")
    return ModelNoise(**kw)


def _probing(path: str, spec: Any) -> Probing | None:
    if spec is None:
        return None
    kw: dict[str, Any] = {}
    for k, v in _section(path, "probing", spec, Probing).items():
        kw[k] = _num(path, f"probing.{k}", v, positive=k == "root_replicas",
                     integer=k == "root_replicas", allow_none=k == "jitter_s")
    return Probing(**kw)


def _section(path: str, name: str, spec: Any, cls: type) -> Mapping[str, Any]:
    """``spec`` as a mapping whose keys are fields of the dataclass ``cls``, else an error."""
    fields = {f.name for f in dataclasses.fields(cls)}
    if not isinstance(spec, Mapping) or set(spec) - fields:
        raise _err(path, name, f"expected a mapping with fields from {sorted(fields)}, "
                               f"got {spec!r}")
    return spec


def _affinity(path: str, spec: Any) -> Affinity | None:
    if spec is None:
        return None
    kw: dict[str, Any] = {}
    for k, v in _section(path, "affinity", spec, Affinity).items():
        kw[k] = _num(path, f"affinity.{k}", v, positive=k == "active_sessions",
                     integer=k == "active_sessions")
        if k != "active_sessions" and kw[k] > 1:
            raise _err(path, f"affinity.{k}", f"expected a fraction in [0, 1], got {v!r}")
    return Affinity(**kw)


def _rate_variation(path: str, spec: Any) -> RateVariation | None:
    if spec is None:
        return None
    kw: dict[str, Any] = {}
    for k, v in _section(path, "rate_variation", spec, RateVariation).items():
        kw[k] = _num(path, f"rate_variation.{k}", v, positive=k == "interval_s")
        if k == "correlation" and kw[k] >= 1:
            raise _err(path, "rate_variation.correlation",
                       f"expected a correlation in [0, 1), got {v!r}")
        if k == "sigma" and kw[k] > 3:
            raise _err(path, "rate_variation.sigma",
                       f"expected at most 3 (a rate that varies e^3 = 20-fold), got {v!r}")
    return RateVariation(**kw)


def _estimation(path: str, spec: Any) -> Estimation | None:
    if spec is None:
        return None
    kw: dict[str, Any] = {}
    for k, v in _section(path, "estimation", spec, Estimation).items():
        if k == "family":
            kw[k] = _option(path, "estimation.family", FitFamily, v)
        elif k == "noise_eps":
            kw[k] = _num(path, "estimation.noise_eps", v, positive=False)
            if kw[k] >= 1:
                raise _err(path, "estimation.noise_eps", f"expected 0 ≤ ε < 1, got {v!r}")
        else:
            kw[k] = _num(path, f"estimation.{k}", v, integer=k in ("window", "min_samples"))
    return Estimation(**kw)


def load_scenario(path: str | os.PathLike) -> Scenario:
    """Read a scenario file (YAML or JSON; :func:`lbtheory.io.read_config_file`)."""
    from .._checks import check_path

    p = check_path(path, "scenario path")
    sc = scenario_from_dict(read_config_file(p, "scenario"), path=str(p))
    return sc if sc.name else dataclasses.replace(sc, name=p.stem)
