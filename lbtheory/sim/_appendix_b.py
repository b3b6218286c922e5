"""DLB's Appendix-B scenario generator (THEORY §11.1; defaults marked [R] there), seeded.

Without Google's cell locations and RTT history, the network comes from a fixed table of region
round-trip times [R]: cells are spread over randomly chosen regions; intra-region RTT ~ U[1, 5] ms,
inter-region RTT from :data:`REGION_RTT_MS` (30–250 ms); τ = RTT/2; every cell may use every cell.
The routers' latency model of a cell is DLB's softplus fitted to the simulator's own
(N, latency) measurements of that cell (:func:`~._calibrate.fit_cell_model`, slope fixed at
1/μ̄_j; issue 25 item 2); the fit's prior is the formula the generator used before [R]:
θ0 = unloaded latency E[P]t_p + E[D]t_d, θ1 = 1/μ̄_j, knee θ2 = min(decode slots, 0.9 θ0 μ̄_j),
θ3 = θ2/10 (``fit_latency=False`` keeps that formula — its knee is sharper than the servers'
measured curve). Arrivals are a time-varying Poisson process (DLB App. B.1) whose per-source rate
path has the per-minute variation of the Azure conversation trace
(:data:`APPENDIX_B_RATE_VARIATION`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._checks import check_int, check_memory, check_real, check_seed
from ..errors import ParameterError
from ..models import SoftplusLatency
from ..network import Arc, Cell, CellNetwork
from ..routers import perturb_model
from ._calibrate import fit_cell_model
from ._scenario import Burst, ModelNoise, Outage, Probing, RateVariation, Scenario, ServerSpec

__all__ = ["appendix_b_scenario", "REGION_RTT_MS", "REGION_NAMES", "EVENT_WINDOW",
           "APPENDIX_B_RATE_VARIATION", "APPENDIX_B_PROBING", "NOISE_MODES"]

#: readings of DLB App. B's "(1 + εξ_i)·θ̂_i" (:func:`appendix_b_scenario`'s ``noise_mode``):
#: "independent" — one ξ per parameter of cell i, drawn per run (trial) [default, issue 36];
#: "joint" — one ξ per cell for all its parameters, per run; "scenario" — one ξ per cell
#: drawn with the scenario, the same in every trial (the generator before issue 36).
NOISE_MODES = ("independent", "joint", "scenario")

REGION_NAMES = ("us-east", "us-west", "europe", "asia-east", "asia-south", "south-america")
#: Round-trip times between regions (ms) [R]: plausible public-internet values, not Google's.
REGION_RTT_MS = np.array([
    [0, 65, 80, 160, 200, 120],
    [65, 0, 140, 110, 220, 170],
    [80, 140, 0, 220, 120, 190],
    [160, 110, 220, 0, 90, 250],
    [200, 220, 120, 90, 0, 250],
    [120, 170, 190, 250, 250, 0]], dtype=float)

#: a burst or outage lasts [EVENT_WINDOW[0], EVENT_WINDOW[1]) × duration (fractions of the horizon).
EVENT_WINDOW = (0.3, 0.7)

#: per-source rate path of the Appendix-B arrivals: the variation of the per-minute request
#: counts of the bundled Azure LLM conversation trace (examples/traces, 58 complete minutes),
#: Poisson noise removed (:func:`lbtheory.sim.rate_variation_from_counts`: σ = 0.2126,
#: lag-1 correlation 0.8652; tests/test_appendix_b.py recomputes them). The code trace
#: (σ = 0.86, correlation 0.22) has 12 of its 57 minutes without a request — an on/off
#: source, the "synchronised traffic that defies standard probabilistic modelling" of DLB §6,
#: not the time-varying Poisson process of App. B.1 — so it is not used.
APPENDIX_B_RATE_VARIATION = RateVariation(sigma=0.2126, correlation=0.8652, interval_s=60.0)

#: the staleness of DLB's stack (§3.1): root replicas taking turns, leaf caches, asynchronous
#: probes — :class:`~lbtheory.sim.Probing`'s [R] defaults (fixed from the paper's text before
#: any run; its docstring says why each). None in :func:`appendix_b_scenario` = the idealised
#: synchronised round read one one-way delay late (issue 36's baseline).
APPENDIX_B_PROBING = Probing()

#: lognormal per-cell speed factor: mean 1, sd 0.2 (THEORY §11.1 item 4).
_SIGMA = math.sqrt(math.log(1.04))


def appendix_b_scenario(seed: int, *, n_cells: int | None = None, utilisation: float = 0.8,
                        duration_s: float = 600.0, burst: bool = False, outage: bool = False,
                        noise_eps: float = 0.0, y: float = 1.0, homogeneous: bool = False,
                        prefill_s_per_token: float = 0.25e-3,
                        decode_s_per_token: float = 25e-3, fit_latency: bool = True,
                        rate_variation: RateVariation | None = APPENDIX_B_RATE_VARIATION,
                        probing: Probing | None = APPENDIX_B_PROBING,
                        probe_period_s: float = 0.01, noise_mode: str = "independent",
                        noise_period_s: float | None = None) -> Scenario:
    """Draw one Appendix-B scenario.

    Args:
        seed: the only source of randomness (same seed ⇒ same scenario).
        n_cells: number of cells (default ~ U{2..10}).
        utilisation: Λ / Σ μ̄_j (default 0.8).
        duration_s: horizon (s); a burst or outage lasts [0.3, 0.7]·duration (180–420 s of 600 s).
        burst: raise one random cell's λ so that total utilisation is 95% during the window.
        outage: set random cells to 1 online server until utilisation exceeds 95% in the window.
        noise_eps: ε of the robustness mode: the fitted parameters of cell j scaled by
            (1 + εξ), ξ ~ U[−1, 1] (DLB App. B; :func:`lbtheory.routers.perturb_model`), as
            ``noise_mode`` reads it (:data:`NOISE_MODES`; all but "scenario" draw from the
            run's seed through :class:`~lbtheory.sim.ModelNoise`).
        noise_period_s: redraw the noise every this many seconds (None: once per run; not
            with ``noise_mode="scenario"``).
        y: token times ÷ y and rates × y (item 13; utilisation unchanged).
        homogeneous: DLB's "homogeneous cells, small latencies" case (THEORY §11.2) [R reading]:
            every cell in one region (RTT ~ U[1, 5] ms), k_j = 10 servers, identical servers
            (ξ = 1); demand shares stay Dirichlet. The same random draws are made (then overridden),
            so the other cells' draws do not depend on this flag.
        prefill_s_per_token, decode_s_per_token: t̄_p, t̄_d (s/token) [R].
        fit_latency: fit each cell's latency model to the simulator's measurements (default;
            ≈0.1–0.3 s per cell) or keep the formula (module docstring).
        rate_variation: the arrivals' rate path (None: homogeneous Poisson).
        probing: the probes' staleness model (:data:`APPENDIX_B_PROBING`; None: idealised).
        probe_period_s: root routers' probe period (s) [R: the paper's "once every few
            milliseconds", read as 10 ms].
    """
    seed = check_seed(seed, "appendix_b.seed")
    for name, v in (("utilisation", utilisation), ("duration_s", duration_s), ("y", y)):
        check_real(v, f"appendix_b.{name}", low=0.0, low_open=True)
    check_real(noise_eps, "appendix_b.noise_eps (ε)", low=0.0, high=1.0, high_open=True)
    check_real(probe_period_s, "appendix_b.probe_period_s", unit="s", low=0.0, low_open=True)
    if noise_mode not in NOISE_MODES:
        raise ParameterError(f"appendix_b.noise_mode: expected one of {', '.join(NOISE_MODES)}, "
                             f"got {noise_mode!r}")
    if noise_period_s is not None:
        check_real(noise_period_s, "appendix_b.noise_period_s", unit="s", low=0.0,
                   low_open=True)
        if noise_mode == "scenario":
            raise ParameterError("appendix_b.noise_period_s: the 'scenario' noise is drawn once "
                                 "with the scenario; use 'independent' or 'joint'")
    if n_cells is not None:
        check_int(n_cells, "appendix_b.n_cells", low=1)
        # a full mesh: n² arcs, each a Python object (~600 bytes measured at n = 400) in the
        # network and its arrays
        check_memory(600.0 * n_cells * n_cells, f"an Appendix-B scenario of {n_cells} cells "
                                                f"({n_cells * n_cells:,} arcs)")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 11]))
    n = int(rng.integers(2, 11)) if n_cells is None else int(n_cells)
    n_regions = int(rng.integers(1, min(n, len(REGION_NAMES)) + 1))
    regions = rng.choice(len(REGION_NAMES), size=n_regions, replace=False)
    cell_region = regions[rng.integers(0, n_regions, size=n)]
    if homogeneous:
        cell_region = np.full(n, regions[0])
    rtt = REGION_RTT_MS[np.ix_(cell_region, cell_region)].copy()
    same = cell_region[:, None] == cell_region[None, :]
    intra = rng.uniform(1.0, 5.0, size=(n, n))
    intra = np.triu(intra, 1) + np.triu(intra, 1).T
    rtt = np.where(same, intra, rtt)
    np.fill_diagonal(rtt, 0.0)
    tau = rtt / 2000.0                                      # one-way, seconds
    k = rng.poisson(10.0, size=n)
    while (k < 1).any():                                    # [R] resample empty cells
        k = np.where(k < 1, rng.poisson(10.0, size=n), k)
    xi = rng.lognormal(-_SIGMA ** 2 / 2, _SIGMA, size=(2, n))
    if homogeneous:
        k, xi = np.full(n, 10), np.ones((2, n))
    tp = prefill_s_per_token * xi[0] / y
    td = decode_s_per_token * xi[1] / y
    servers = tuple(ServerSpec(kind="appendix_b", prefill_s_per_token=float(tp[j]),
                               decode_s_per_token=float(td[j])) for j in range(n))
    proto = Scenario(network=_dummy_network(), servers=servers)
    EP, ED = proto.prompt_tokens.mean, proto.output_tokens.mean
    mu_server = np.array([s.max_rate(EP, ED) for s in servers])
    cap = k * mu_server
    _check_y_scale(y, cap, EP * tp + ED * td, utilisation, seed)
    lam = rng.dirichlet(np.ones(n)) * utilisation * cap.sum()
    noise = 1.0 + noise_eps * rng.uniform(-1.0, 1.0, size=n)
    names = [f"{REGION_NAMES[cell_region[j]]}-{j}" for j in range(n)]
    cells = []
    for j in range(n):
        theta0 = EP * tp[j] + ED * td[j]
        knee = min(float(servers[j].decode_slots * k[j]), 0.9 * theta0 * cap[j])
        model = SoftplusLatency(base_latency=float(theta0), slope=float(1.0 / cap[j]),
                                knee=knee, softness=max(knee / 10.0, 1e-3))
        cells.append(Cell(names[j], int(k[j]), float(lam[j]), model))
    arcs = [Arc(names[i], names[j], float(tau[i, j])) for i in range(n) for j in range(n)]
    net = CellNetwork(cells, arcs)
    if fit_latency:
        measured = dataclasses.replace(proto, network=net, name=f"appendix-b-{seed}")
        cells = [dataclasses.replace(c, service=_fitted(measured, j, seed))
                 for j, c in enumerate(cells)]
    baked = noise_eps > 0 and noise_mode == "scenario"
    if baked:
        cells = [dataclasses.replace(c, service=perturb_model(c.service, float(noise[j])))
                 for j, c in enumerate(cells)]
    if fit_latency or baked:
        net = CellNetwork(cells, arcs)
    t0, t1 = EVENT_WINDOW[0] * duration_s, EVENT_WINDOW[1] * duration_s
    bursts, outages = (), ()
    if burst:
        b = int(rng.integers(n))
        factor = 1.0 + (0.95 - utilisation) * cap.sum() / max(lam[b], 1e-12)
        bursts = (Burst(b, t0, t1, float(max(factor, 1.0))),)
    if outage:
        online = k.astype(float)
        out: dict[int, int] = {}
        for _ in range(100 * n):
            if lam.sum() / float((online * mu_server).sum()) > 0.95:
                break
            j = int(rng.integers(n))
            online[j] = 1.0
            out[j] = 1
        outages = tuple(Outage(j, t0, t1, r) for j, r in sorted(out.items()))
    return dataclasses.replace(proto, network=net, bursts=bursts, outages=outages,
                               name=f"appendix-b-{seed}", rate_variation=rate_variation,
                               probing=probing, probe_period_s=float(probe_period_s),
                               model_noise=None if noise_eps == 0 or baked else ModelNoise(
                                   float(noise_eps), joint=noise_mode == "joint",
                                   period_s=noise_period_s))


#: fitted cell models by everything a fit depends on (issue 36 item 6): an Appendix-B sweep
#: draws the same scenario seed at many levels and trials, and the fit (≈0.1–0.3 s per cell)
#: depends on neither the demand, the events, the noise nor the trial. Bounded: cleared when
#: it reaches :data:`FIT_CACHE_SIZE` entries.
_FIT_CACHE: dict[tuple, SoftplusLatency] = {}
FIT_CACHE_SIZE = 4096


def _fitted(measured: Scenario, j: int, seed: int) -> SoftplusLatency:
    """:func:`~._calibrate.fit_cell_model` of cell j, memoised in-process by its inputs: the
    seed, the cell index, its servers, replicas and prior model, the request sizes (the fit
    measures the cell alone at fixed loads of its own capacity, so nothing else enters)."""
    c = measured.network.cells[j]
    key = (seed, j, c.replicas, c.service, measured.servers[j], measured.prompt_tokens,
           measured.output_tokens)
    hit = _FIT_CACHE.get(key)
    if hit is None:
        if len(_FIT_CACHE) >= FIT_CACHE_SIZE:
            _FIT_CACHE.clear()
        hit = _FIT_CACHE[key] = fit_cell_model(measured, j, seed=seed)
    return hit


def _check_y_scale(y: float, cap: np.ndarray, theta0: np.ndarray, utilisation: float,
                   seed: int) -> None:
    """Refuse a ``y`` that scales a cell's capacity or its arrival rate (∝ y) or its zero-load
    latency (∝ 1/y) out of :data:`lbtheory.network.LIMITS` (a cell's rate is at most the total
    ``utilisation · Σ cap``), naming ``y`` and the range this seed accepts
    (rather than the generated cell the limit would otherwise name)."""
    from ..network import LIMITS

    r_lo, r_hi, _ = LIMITS["max_rate"]
    l_lo, l_hi, _ = LIMITS["latency_at_zero"]
    cap1, th1 = cap / y, theta0 * y  # the same cells at y = 1
    lo = max(r_lo / float(cap1.min()), float(th1.max()) / l_hi)
    hi = min(r_hi / float(cap1.max()), float(th1.min()) / l_lo,
             LIMITS["arrival_rate"][1] / (utilisation * float(cap1.sum())))
    if not lo <= y <= hi:
        raise ParameterError(f"appendix_b.y must be in [{lo:.3g}, {hi:.3g}] for seed {seed} "
                             f"(cell capacities scale with y, zero-load latencies with 1/y, "
                             f"within [{r_lo:g}, {r_hi:g}] req/s and [{l_lo:g}, {l_hi:g}] s), "
                             f"got {y:g}")


def _dummy_network() -> CellNetwork:
    from ..models import MM1Latency

    return CellNetwork([Cell("x", 1, 0.0, MM1Latency(1.0, 1.0))], [])
