"""DLB Appendix-B protocol cells: one scenario × trial, every policy on the same arrivals.

This module belongs to the Appendix-B experiment (``experiments/appendix_b.py``), not to the
library: it is the *protocol* (which policies, how long, what is measured), built on the
library's simulator (:mod:`lbtheory.sim`), registry (:mod:`lbtheory.registry`) and stability
module. The sweep runner ships it to Dask workers by value, like the experiment file.

A *cell* of the Appendix-B experiments (issue 12; THEORY §11.1 items 11–13) is a pure function
of a JSON config (:func:`appendix_b_cell`): it draws the Appendix-B scenario of ``scenario``
(:func:`~lbtheory.sim.appendix_b_scenario`), the arrivals of ``(scenario, trial)`` once, runs
every policy on exactly those arrivals and returns, per policy, the mean / p50 / p90 / p99
end-to-end latency of the successful requests (s), the overflow error rate and the latency
normalised by Rand's on the same arrivals (policy / Rand, THEORY §11.1 item 11).

Experiment 7 ("theory meets practice") adds flow routers whose stepsize is a multiple of the
exact critical stepsize η_crit of the scenario's linearised fluid model at its equilibrium
(:func:`lbtheory.stability.critical_stepsize`), next to DLB's rule (η ∝ 1/mean delay), and an
oscillation measure of the routing weights the simulator records at every
``record_every``-th probe round (``simulate(..., record_routing_every=...)``, on either engine).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lbtheory._checks import check_int, check_real
from lbtheory.errors import DataFormatError, LBTheoryError
from lbtheory.registry import make_router, policy_names
from lbtheory.routers import CellView
from lbtheory.sim import SimResult, appendix_b_scenario, generate_arrivals, simulate
from lbtheory.stats import mean, percentiles, ratio

__all__ = ["DLB_POLICIES", "MAIN_POLICIES", "EXTRA_POLICIES", "FLOW_COSTS", "CELL_DEFAULTS",
           "appendix_b_cell", "check_cell_config", "trial_seed", "run_metrics",
           "weight_oscillation", "flow_stepsize", "cell_scenario"]

#: DLB's six algorithms (THEORY §11.1 item 12).
DLB_POLICIES = ("disc-rif", "disc-lat", "disc-grad", "flow-rif", "flow-lat", "flow-grad")
#: the protocol's policies: the six, Rand and MNLB.
MAIN_POLICIES = (*DLB_POLICIES, "rand", "mnlb")
#: extras of issue 12 (not in DLB's figures).
EXTRA_POLICIES = ("rr", "jsq", "p2c")
#: cost name of the stability module → flow policy.
FLOW_COSTS = {"gradient": "flow-grad", "latency": "flow-lat", "rif": "flow-rif"}

#: every key a cell config may have, with its default (None = required).
CELL_DEFAULTS: dict[str, Any] = {
    "scenario": None, "trial": 0, "duration_s": 600.0, "utilisation": 0.8, "y": 1.0,
    "noise_eps": 0.0, "burst": False, "outage": False, "homogeneous": False, "n_cells": None,
    "policies": list(MAIN_POLICIES), "eta_factors": [], "eta_costs": [],
    "series_bins": 0, "burn_in_frac": 1.0 / 3.0, "record_every": 5,
}


def _bad(field: str, msg: str) -> DataFormatError:
    return DataFormatError(f"appendix-b cell config: {field}: {msg}", field=field)


def check_cell_config(config: Any) -> dict[str, Any]:
    """The config with defaults filled in; raises :class:`DataFormatError` naming the field.

    Checks: known keys only; ``scenario`` / ``trial`` non-negative integers; ``duration_s`` > 0;
    policies known, distinct and including ``rand`` (the normaliser); ``eta_costs`` among
    :data:`FLOW_COSTS` and ``eta_factors`` positive when given.
    """
    POLICY_NAMES = policy_names("cells")
    if not isinstance(config, dict):
        raise _bad("config", f"expected a JSON object, got {type(config).__name__}")
    unknown = sorted(set(config) - set(CELL_DEFAULTS))
    if unknown:
        raise _bad(unknown[0], f"unknown key(s) {unknown}; expected keys from "
                               f"{sorted(CELL_DEFAULTS)}")
    cfg = {**CELL_DEFAULTS, **config}
    def error(key: str):
        return lambda msg: _bad(key, msg)

    for key in ("scenario", "trial"):
        check_int(cfg[key], key, low=0, error=error(key))
    for key in ("duration_s", "utilisation", "y"):
        check_real(cfg[key], key, low=0.0, low_open=True, error=error(key))
    if cfg["n_cells"] is not None:
        check_int(cfg["n_cells"], "n_cells", low=1, error=error("n_cells"))
    pols = cfg["policies"]
    if not isinstance(pols, list) or not pols:
        raise _bad("policies", f"expected a non-empty list of policy names, got {pols!r}")
    for p in pols:
        if p not in POLICY_NAMES:
            raise _bad("policies", f"unknown policy {p!r}; expected names from "
                                   f"{list(POLICY_NAMES)}")
    if len(set(pols)) != len(pols):
        raise _bad("policies", f"duplicate policy in {pols!r}")
    if "rand" not in pols:
        raise _bad("policies", "must include 'rand' (latency is normalised by Rand's on the "
                               "same arrivals)")
    for c in cfg["eta_costs"]:
        if c not in FLOW_COSTS:
            raise _bad("eta_costs", f"unknown cost {c!r}; expected names from "
                                    f"{list(FLOW_COSTS)}")
    for f in cfg["eta_factors"]:
        check_real(f, "eta_factors", low=0.0, low_open=True, error=error("eta_factors"))
    if bool(cfg["eta_costs"]) != bool(cfg["eta_factors"]):
        raise _bad("eta_factors", "give both eta_costs and eta_factors (experiment 7) or "
                                  "neither")
    check_real(cfg["burn_in_frac"], "burn_in_frac", low=0.0, high=1.0, high_open=True,
               error=error("burn_in_frac"))
    check_int(cfg["series_bins"], "series_bins", low=0, error=error("series_bins"))
    check_int(cfg["record_every"], "record_every", low=1, error=error("record_every"))
    return cfg


def trial_seed(scenario: int, trial: int) -> int:
    """Seed of the arrivals / routing draws of trial ``trial`` of scenario ``scenario``."""
    return int(np.random.SeedSequence([int(scenario), int(trial), 12]).generate_state(1)[0])


def cell_scenario(cfg: dict[str, Any]):
    """The Appendix-B :class:`~lbtheory.sim.Scenario` of a (checked) cell config."""
    return appendix_b_scenario(cfg["scenario"], n_cells=cfg["n_cells"],
                               utilisation=float(cfg["utilisation"]),
                               duration_s=float(cfg["duration_s"]), burst=bool(cfg["burst"]),
                               outage=bool(cfg["outage"]), noise_eps=float(cfg["noise_eps"]),
                               y=float(cfg["y"]), homogeneous=bool(cfg["homogeneous"]))


def _finite(v: float) -> float | None:
    """JSON-safe number: None for nan/inf."""
    return float(v) if math.isfinite(v) else None


def run_metrics(res: SimResult, series_bins: int = 0) -> dict[str, Any]:
    """Per-run numbers: latency of successful requests (s), errors, and optionally a time series
    in ``series_bins`` equal bins of [0, duration): mean latency of the requests completed in the
    bin (s, None if none), completions and errors in the bin."""
    lat = res.latency_s
    out: dict[str, Any] = {"requests": res.requests, "completed": res.completed,
                           "errors": res.errors, "error_rate": _finite(res.error_rate),
                           "mean": _finite(mean(lat)),
                           "mean_network_s": _finite(mean(res.network_s))}
    out.update({k: _finite(v) for k, v in percentiles(lat, (50.0, 90.0, 99.0)).items()})
    if series_bins:
        edges = np.linspace(0.0, res.duration_s, series_bins + 1)
        idx = np.clip(np.searchsorted(edges, res.completion_s, side="right") - 1, 0,
                      series_bins - 1)
        done = np.bincount(idx, minlength=series_bins)
        tot = np.bincount(idx, weights=lat, minlength=series_bins)
        eidx = np.clip(np.searchsorted(edges, res.error_s, side="right") - 1, 0,
                       series_bins - 1)
        errs = np.bincount(eidx, minlength=series_bins)
        out["series"] = {"t_mid_s": (0.5 * (edges[:-1] + edges[1:])).tolist(),
                         "mean": [float(t / c) if c else None for t, c in zip(tot, done)],
                         "completed": done.tolist(), "errors": errs.tolist()}
    return out


def flow_stepsize(router: Any, net: Any) -> float:
    """The stepsize η a flow router uses on ``net`` (1/(cost unit·s)): its own, or DLB's rule
    (:meth:`~lbtheory.routers.FlowRouter.eta` on the network's delays)."""
    return float(router.eta(CellView(time=0.0, workload=np.zeros(net.n),
                                     replicas=np.ones(net.n), delays=net.delays,
                                     mask=net.adjacency)))


def weight_oscillation(times: np.ndarray, rows: np.ndarray, weights: np.ndarray,
                       t_from: float) -> float:
    """RMS deviation of the routing rows from their linear trend after ``t_from`` (s).

    ``rows`` has shape (samples, sources, cells); every weight x_ij(t) on t ≥ t_from is detrended
    by its least-squares line (so a slow drift towards equilibrium is not counted as an
    oscillation), and per source i the measure is sqrt(mean_t ‖x_i(t) − trend_i(t)‖²) — a
    probability: 0 = routing on a straight line; a row alternating between two vertices of the
    simplex gives 1. The result is the ``weights``-weighted mean over sources (DLB: λ_i); nan
    with fewer than three samples.
    """
    t = np.asarray(times, dtype=float)
    X = np.asarray(rows, dtype=float)
    keep = t >= t_from
    if keep.sum() < 3:
        return float("nan")
    X, t = X[keep], t[keep]
    A = np.column_stack([np.ones_like(t), t - t.mean()])
    flat = X.reshape(X.shape[0], -1)
    coef, *_ = np.linalg.lstsq(A, flat, rcond=None)
    resid = (flat - A @ coef).reshape(X.shape)
    dev = np.sqrt((resid ** 2).sum(axis=2).mean(axis=0))
    w = np.asarray(weights, dtype=float)
    return float((dev * w).sum() / w.sum()) if w.sum() > 0 else float(dev.mean())


def _workload_cv(res: SimResult, t_from: float) -> float | None:
    """Mean over cells of the coefficient of variation of N_j(t) after ``t_from`` (s)."""
    keep = res.series_t >= t_from
    if keep.sum() < 2:
        return None
    W = res.series_workload[keep]
    m = W.mean(axis=0)
    cv = np.where(m > 0, W.std(axis=0) / np.where(m > 0, m, 1.0), 0.0)
    return _finite(float(cv.mean()))


def _eta_crit(net: Any, cost: str) -> dict[str, Any]:
    """η_crit of the scenario's linearised fluid model for ``cost`` (or why there is none)."""
    from lbtheory.stability import critical_stepsize

    try:
        cs = critical_stepsize(net, cost)
    except (LBTheoryError, ValueError, np.linalg.LinAlgError) as exc:
        return {"eta_crit": None, "reason": f"{type(exc).__name__}: {str(exc)[:200]}"}
    crit = float(cs.critical_stepsize)
    if not (math.isfinite(crit) and crit > 0):
        return {"eta_crit": None, "reason": "stable for every stepsize (no finite η_crit)"}
    return {"eta_crit": crit, "period_s": _finite(float(cs.period)),
            "verified": bool(cs.verified), "reason": None}


def appendix_b_cell(config: dict[str, Any]) -> dict[str, Any]:
    """Run one Appendix-B cell (see the module docstring); pure and deterministic.

    Returns a JSON-serialisable dict: ``scenario`` (n cells, replicas, λ, μ̄ in req/s, mean
    one-way delay in s), ``seed``, ``runs`` (label → :func:`run_metrics`, plus ``eta`` (the
    flow stepsize used, 1/(cost unit·s)), ``eta_over_crit``, ``osc_weights`` and
    ``osc_workload`` for experiment-7 runs), ``normalised`` (label → mean and p90 / Rand's) and
    ``eta_crit`` (cost → :func:`_eta_crit`) for experiment 7. Labels are policy names, and
    ``flow-grad@0.5`` (η = 0.5 η_crit) or ``flow-grad@dlb`` (DLB's rule) in experiment 7.

    Raises:
        DataFormatError: a bad config (the message names the field).
    """
    cfg = check_cell_config(config)
    sc = cell_scenario(cfg)
    T = float(cfg["duration_s"])
    seed = trial_seed(cfg["scenario"], cfg["trial"])
    arr = generate_arrivals(sc, T, seed)
    net = sc.network
    runs: dict[str, dict[str, Any]] = {}
    for p in cfg["policies"]:
        res = simulate(sc, make_router(p), duration_s=T, seed=seed, arrivals=arr, policy=p)
        runs[p] = run_metrics(res, cfg["series_bins"])
    out: dict[str, Any] = {
        "scenario": {"name": sc.name, "n_cells": net.n,
                     "replicas": [c.replicas for c in net.cells],
                     "arrival_rates": net.arrival_rates.tolist(),
                     "capacities": [float(c) for c in sc.capacities()],
                     "mean_delay_s": float(net.delays[net.adjacency & (net.delays > 0)].mean())
                     if (net.adjacency & (net.delays > 0)).any() else 0.0},
        "seed": seed, "requests": len(arr), "runs": runs}
    if cfg["eta_costs"]:
        t_from = cfg["burn_in_frac"] * T
        lam = net.arrival_rates
        out["eta_crit"] = {}
        for cost in cfg["eta_costs"]:
            info = _eta_crit(net, cost)
            out["eta_crit"][cost] = info
            pol = FLOW_COSTS[cost]
            labels = [(f"{pol}@dlb", make_router(pol))]
            if info["eta_crit"] is not None:
                labels += [(f"{pol}@{f:g}", make_router(pol, stepsize=f * info["eta_crit"]))
                           for f in cfg["eta_factors"]]
            for label, router in labels:
                res = simulate(sc, router, duration_s=T, seed=seed, arrivals=arr, policy=label,
                               record_routing_every=cfg["record_every"])
                m = run_metrics(res, cfg["series_bins"])
                m["eta"] = eta = flow_stepsize(router, net)
                m["eta_over_crit"] = (eta / info["eta_crit"]
                                      if info["eta_crit"] is not None else None)
                m["osc_weights"] = _finite(weight_oscillation(
                    res.routing_t, res.routing_x, lam[list(res.routing_sources)], t_from)) \
                    if res.routing_t.size else None
                m["osc_workload"] = _workload_cv(res, t_from)
                runs[label] = m
    base = runs["rand"]
    out["normalised"] = {
        label: {"mean": _finite(ratio(m["mean"], base["mean"]))
                if m["mean"] is not None and base["mean"] is not None else None,
                "p90": _finite(ratio(m["p90"], base["p90"]))
                if m["p90"] is not None and base["p90"] is not None else None}
        for label, m in runs.items()}
    return out
