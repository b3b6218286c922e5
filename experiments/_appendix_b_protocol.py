"""DLB Appendix-B protocol cells: one scenario × trial, every policy on the same arrivals.

This module belongs to the Appendix-B experiment (``experiments/appendix_b.py``), not to the
library: it is the *protocol* (which policies, how long, what is measured), built on the
library's simulator (:mod:`lbtheory.sim`), registry (:mod:`lbtheory.registry`) and stability
module. The sweep runner ships it to Dask workers by value, like the experiment file.

A *cell* (:func:`appendix_b_cell`, a pure function of a JSON config) draws the Appendix-B
scenario of ``scenario`` (:func:`~lbtheory.sim.appendix_b_scenario`: fitted latency models,
time-varying Poisson arrivals), the arrivals of ``(scenario, trial)`` once, runs every policy on
exactly those arrivals for ``duration_s`` (DLB: 10 minutes) and measures the requests that
arrive after the warm-up ``warmup_s`` (issue 25 item 7): mean / p50 / p90 / p99 end-to-end
latency of the successful ones (s), its network and serving parts, the overflow error rate, and
the latency normalised by Rand's on the same arrivals (THEORY §11.1 item 11). Rand and DLB's six
routers run inside DLB's error aversion (DLB App. B.1: Rand "utilizes our error aversion
mechanism"; it is part of the DLB stack the six routers run in); MNLB and the extras do not.

Experiment 7 ("theory meets practice") adds flow routers whose stepsize is a multiple of the
exact critical stepsize η_crit of the scenario's linearised fluid model at its equilibrium, with
the probe period in the feedback delay (:func:`lbtheory.stability.critical_stepsize`), next to
the default rule, all without error aversion (the fluid model has none), and measures
oscillation on the *workloads* (:mod:`_appendix_b_oscillation`). The fluid η_crit ignores
request-level randomness (Poisson arrivals, random service): it is a statement about the mean
dynamics only.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from _appendix_b_oscillation import workload_oscillation

from lbtheory._checks import check_int, check_real
from lbtheory.errors import DataFormatError, LBTheoryError
from lbtheory.registry import make_router, policy_names
from lbtheory.routers import CellView
from lbtheory.sim import (
    APPENDIX_B_PROBING,
    NOISE_MODES,
    SimResult,
    appendix_b_scenario,
    generate_arrivals,
    simulate,
)
from lbtheory.sim._staleness import age_summary
from lbtheory.stats import goodput_latency, mean, percentiles, ratio

__all__ = ["DLB_POLICIES", "MAIN_POLICIES", "EXTRA_POLICIES", "AVERSE_POLICIES", "FLOW_COSTS",
           "CELL_DEFAULTS", "appendix_b_cell", "check_cell_config", "trial_seed", "run_metrics",
           "flow_stepsize", "cell_scenario", "protocol_router"]

#: DLB's six algorithms (THEORY §11.1 item 12).
DLB_POLICIES = ("disc-rif", "disc-lat", "disc-grad", "flow-rif", "flow-lat", "flow-grad")
#: the protocol's policies: the six, Rand and MNLB.
MAIN_POLICIES = (*DLB_POLICIES, "rand", "mnlb")
#: extras of issue 12 (not in DLB's figures).
EXTRA_POLICIES = ("rr", "jsq", "p2c")
#: the policies of the DLB stack, which run inside error aversion (module docstring).
AVERSE_POLICIES = (*DLB_POLICIES, "rand")
#: cost name of the stability module → flow policy.
FLOW_COSTS = {"gradient": "flow-grad", "latency": "flow-lat", "rif": "flow-rif"}

#: every key a cell config may have, with its default (None = required). ``warmup_s`` [R]: one
#: interval of the arrival-rate path (60 s, 10 % of DLB's 10 minutes); the fluid model's
#: flow-grad decay time 1/|Re s| at the default stepsize is 5.1 s (median), 9.1 s (P90), 48 s
#: (max) over the 39 scenarios of experiments/_appendix_b_derive.py.
CELL_DEFAULTS: dict[str, Any] = {
    "scenario": None, "trial": 0, "duration_s": 600.0, "warmup_s": 60.0, "utilisation": 0.8,
    "y": 1.0, "noise_eps": 0.0, "burst": False, "outage": False, "homogeneous": False,
    "n_cells": None, "policies": list(MAIN_POLICIES), "error_aversion": True,
    "eta_factors": [], "eta_costs": [], "series_bins": 0, "record_period_s": 0.1,
    # issue 36: the probes' staleness ("stack": lbtheory.sim.APPENDIX_B_PROBING, the [R]
    # model of DLB §3.1; "ideal": one synchronised round read one delay late), the probe
    # period, the probe period the flow stepsize rule assumes (None: the actual one; a fixed
    # value holds η fixed across a staleness sweep), the noise reading and its redraw period,
    # and MNLB's headroom cap
    "probing": "stack", "probe_period_s": 0.01, "eta_probe_period_s": None,
    "noise_mode": "independent", "noise_period_s": None, "mnlb_rho_max": 0.9,
}


def _bad(field: str, msg: str) -> DataFormatError:
    return DataFormatError(f"appendix-b cell config: {field}: {msg}", field=field)


def check_cell_config(config: Any) -> dict[str, Any]:
    """The config with defaults filled in; raises :class:`DataFormatError` naming the field.

    Checks: known keys only; ``scenario`` / ``trial`` non-negative integers; ``duration_s`` > 0
    and 0 ≤ ``warmup_s`` < ``duration_s``; policies known, distinct and including ``rand`` (the
    normaliser); ``eta_costs`` among :data:`FLOW_COSTS` and ``eta_factors`` positive when given.
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
    for key in ("duration_s", "utilisation", "y", "record_period_s", "probe_period_s"):
        check_real(cfg[key], key, low=0.0, low_open=True, error=error(key))
    for key in ("eta_probe_period_s", "noise_period_s"):
        if cfg[key] is not None:
            check_real(cfg[key], key, low=0.0, low_open=True, error=error(key))
    check_real(cfg["mnlb_rho_max"], "mnlb_rho_max", low=0.0, high=1.0, low_open=True,
               error=error("mnlb_rho_max"))
    if cfg["probing"] not in ("stack", "ideal"):
        raise _bad("probing", f"expected 'stack' or 'ideal', got {cfg['probing']!r}")
    if cfg["noise_mode"] not in NOISE_MODES:
        raise _bad("noise_mode", f"expected one of {list(NOISE_MODES)}, "
                                 f"got {cfg['noise_mode']!r}")
    check_real(cfg["warmup_s"], "warmup_s", low=0.0, high=float(cfg["duration_s"]),
               high_open=True, error=error("warmup_s"))
    if cfg["n_cells"] is not None:
        check_int(cfg["n_cells"], "n_cells", low=1, error=error("n_cells"))
    if not isinstance(cfg["error_aversion"], bool):
        raise _bad("error_aversion", f"expected true or false, got {cfg['error_aversion']!r}")
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
    check_int(cfg["series_bins"], "series_bins", low=0, error=error("series_bins"))
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
                               y=float(cfg["y"]), homogeneous=bool(cfg["homogeneous"]),
                               probing=APPENDIX_B_PROBING if cfg["probing"] == "stack" else None,
                               probe_period_s=float(cfg["probe_period_s"]),
                               noise_mode=cfg["noise_mode"],
                               noise_period_s=cfg["noise_period_s"])


def protocol_router(name: str, error_aversion: bool = True, **options: Any) -> Any:
    """The router of policy ``name`` as the protocol runs it: inside error aversion when it is
    one of :data:`AVERSE_POLICIES` and ``error_aversion`` is on."""
    return make_router(name, error_aversion=error_aversion and name in AVERSE_POLICIES,
                       **options)


def _policy_options(p: str, cfg: dict[str, Any], sc: Any) -> dict[str, Any]:
    """Router options of the cell config: MNLB's cap; a flow router's stepsize held at the
    default rule's value for ``eta_probe_period_s`` (when given)."""
    if p == "mnlb":
        return {"rho_max": float(cfg["mnlb_rho_max"])}
    if p.startswith("flow-") and cfg["eta_probe_period_s"] is not None:
        held = dataclasses.replace(sc, probe_period_s=float(cfg["eta_probe_period_s"]))
        return {"stepsize": flow_stepsize(make_router(p), held)}
    return {}


def _finite(v: float) -> float | None:
    """JSON-safe number: None for nan/inf."""
    return float(v) if math.isfinite(v) else None


def run_metrics(res: SimResult, warmup_s: float = 0.0, series_bins: int = 0) -> dict[str, Any]:
    """Per-run numbers over the requests that arrived at or after ``warmup_s`` (s): latency of
    the successful ones (s) and its network / serving parts, the overflow errors that happened
    after ``warmup_s`` and the error rate errors / (completed + errors) among them; the share of
    requests routed away from their source cell and each cell's utilisation (whole run); and
    optionally a time series over the whole run in ``series_bins`` equal bins of [0, duration):
    mean latency of the requests completed in the bin (s, None if none), completions and errors
    in the bin."""
    order = res.completion_order()  # the completed requests, in completion order
    keep = order[res.arrival_s[order] >= warmup_s]
    lat, net = res.latency_s[keep], res.network_s[keep]
    errors = int((res.error_s >= warmup_s).sum())
    done = int(keep.size)
    routed = np.asarray(res.routed, dtype=float)
    out: dict[str, Any] = {"requests": res.requests, "completed": done, "errors": errors,
                           "in_flight": res.in_flight,
                           "error_rate": _finite(ratio(errors, done + errors)),
                           "mean": _finite(mean(lat)), "mean_network_s": _finite(mean(net)),
                           "mean_serving_s": _finite(mean(lat - net)),
                           "remote_share": _finite(ratio(routed.sum() - np.trace(routed),
                                                         routed.sum())),
                           # issue 36: rejected requests counted at the timeout, and the age
                           # of the probed workloads the requests were routed on (s)
                           "latency_goodput": {k: _finite(v) for k, v in goodput_latency(
                               lat, errors).items()},
                           "probe_age_s": age_summary(
                               res.probe_age_s[res.arrival_s >= warmup_s]),
                           "utilisation": [float(u) for u in res.utilisation]}
    out.update({k: _finite(v) for k, v in percentiles(lat, (50.0, 90.0, 99.0)).items()})
    if series_bins:
        edges = np.linspace(0.0, res.duration_s, series_bins + 1)
        idx = np.clip(np.searchsorted(edges, res.completion_s[order], side="right") - 1, 0,
                      series_bins - 1)
        n_done = np.bincount(idx, minlength=series_bins)
        tot = np.bincount(idx, weights=res.latency_s[order], minlength=series_bins)
        eidx = np.clip(np.searchsorted(edges, res.error_s, side="right") - 1, 0,
                       series_bins - 1)
        errs = np.bincount(eidx, minlength=series_bins)
        out["series"] = {"t_mid_s": (0.5 * (edges[:-1] + edges[1:])).tolist(),
                         "mean": [float(t / c) if c else None for t, c in zip(tot, n_done)],
                         "completed": n_done.tolist(), "errors": errs.tolist()}
    return out


def flow_stepsize(router: Any, sc: Any) -> float:
    """The stepsize η a flow router uses on scenario ``sc`` (1/(cost unit·s)): its own, or the
    default rule (:meth:`~lbtheory.routers.FlowRouter.eta` on the delays and probe period)."""
    net = sc.network
    return float(router.eta(CellView(time=0.0, workload=np.zeros(net.n),
                                     replicas=np.ones(net.n), delays=net.delays,
                                     mask=net.adjacency, probe_period_s=sc.probe_period_s)))


def _eta_crit(sc: Any, cost: str) -> dict[str, Any]:
    """η_crit of the scenario's linearised fluid model for ``cost``, the probe period in the
    feedback delay (or why there is none)."""
    from lbtheory.stability import critical_stepsize

    try:
        cs = critical_stepsize(sc.network, cost, probe_period_s=sc.probe_period_s)
    except (LBTheoryError, ValueError, np.linalg.LinAlgError) as exc:
        return {"eta_crit": None, "reason": f"{type(exc).__name__}: {str(exc)[:200]}"}
    crit = float(cs.critical_stepsize)
    if not (math.isfinite(crit) and crit > 0):
        return {"eta_crit": None, "reason": "stable for every stepsize (no finite η_crit)"}
    return {"eta_crit": crit, "period_s": _finite(float(cs.period)),
            "verified": bool(cs.verified), "reason": None}


def _scenario_info(sc: Any) -> dict[str, Any]:
    net = sc.network
    pos = net.adjacency & (net.delays > 0)
    return {"name": sc.name, "n_cells": net.n, "replicas": [c.replicas for c in net.cells],
            "arrival_rates": net.arrival_rates.tolist(),
            "capacities": [float(c) for c in sc.capacities()],
            "mean_delay_s": float(net.delays[pos].mean()) if pos.any() else 0.0,
            "probe_period_s": float(sc.probe_period_s)}


def _eta_runs(cfg: dict[str, Any], sc: Any, arr: Any, seed: int, runs: dict,
              series: dict) -> dict[str, Any]:
    """Experiment 7: the flow routers at the default rule and at factor × η_crit (no error
    aversion), with their workload oscillation relative to Rand's (``series['rand']``)."""
    T, W = float(cfg["duration_s"]), float(cfg["warmup_s"])
    crit_all: dict[str, Any] = {}
    for cost in cfg["eta_costs"]:
        info = crit_all[cost] = _eta_crit(sc, cost)
        pol = FLOW_COSTS[cost]
        labels = [(f"{pol}@dlb", make_router(pol))]
        if info["eta_crit"] is not None:
            labels += [(f"{pol}@{f:g}", make_router(pol, stepsize=f * info["eta_crit"]))
                       for f in cfg["eta_factors"]]
        for label, router in labels:
            res = simulate(sc, router, duration_s=T, seed=seed, arrivals=arr, policy=label,
                           record_period_s=cfg["record_period_s"])
            m = run_metrics(res, W, cfg["series_bins"])
            m["eta"] = eta = flow_stepsize(router, sc)
            m["eta_over_crit"] = (eta / info["eta_crit"] if info["eta_crit"] is not None
                                  else None)
            m.update(workload_oscillation(res.series_t, res.series_workload, *series["rand"],
                                          t_from=W))
            runs[label] = m
    return crit_all


def appendix_b_cell(config: dict[str, Any]) -> dict[str, Any]:
    """Run one Appendix-B cell (see the module docstring); pure and deterministic.

    Returns a JSON-serialisable dict: ``scenario`` (n cells, replicas, λ, μ̄ in req/s, mean
    one-way delay and probe period in s), ``seed``, ``runs`` (label → :func:`run_metrics`, plus
    ``eta`` (the flow stepsize used, 1/(cost unit·s)), ``eta_over_crit`` and the workload
    oscillation keys of :func:`workload_oscillation` for experiment-7 runs), ``normalised``
    (label → mean and p90 / Rand's, and the network and serving parts of the mean / Rand's
    mean) and ``eta_crit`` (cost → η_crit info) for experiment 7. Labels are policy names, and
    ``flow-grad@0.5`` (η = 0.5 η_crit) or ``flow-grad@dlb`` (the default rule) in experiment 7.

    Raises:
        DataFormatError: a bad config (the message names the field).
    """
    cfg = check_cell_config(config)
    sc = cell_scenario(cfg)
    T, W = float(cfg["duration_s"]), float(cfg["warmup_s"])
    seed = trial_seed(cfg["scenario"], cfg["trial"])
    arr = generate_arrivals(sc, T, seed)
    eta_exp = bool(cfg["eta_costs"])
    period = cfg["record_period_s"] if eta_exp else None
    runs: dict[str, dict[str, Any]] = {}
    series: dict[str, tuple] = {}
    for p in cfg["policies"]:
        # experiment 7 compares plain routers with the fluid model: no error aversion there
        router = protocol_router(p, cfg["error_aversion"] and not eta_exp,
                                 **_policy_options(p, cfg, sc))
        res = simulate(sc, router, duration_s=T, seed=seed, arrivals=arr, policy=p,
                       record_period_s=period)
        runs[p] = run_metrics(res, W, cfg["series_bins"])
        series[p] = (res.series_t, res.series_workload)
    out: dict[str, Any] = {"scenario": _scenario_info(sc), "seed": seed,
                           "requests": len(arr),
                           "requests_measured": int((arr.arrival_s >= W).sum()), "runs": runs}
    if eta_exp:
        out["eta_crit"] = _eta_runs(cfg, sc, arr, seed, runs, series)
    base = runs["rand"]
    out["normalised"] = {label: _normalised(m, base) for label, m in runs.items()}
    return out


def _normalised(m: dict[str, Any], base: dict[str, Any]) -> dict[str, float | None]:
    """mean, p90 / Rand's, the network and serving parts of the mean / Rand's mean, and the
    goodput-aware mean and p90 (rejections at the timeout) / Rand's (issue 36)."""
    def div(a: float | None, b: float | None) -> float | None:
        return _finite(ratio(a, b)) if a is not None and b is not None else None

    g, gb = m.get("latency_goodput") or {}, base.get("latency_goodput") or {}
    return {"mean": div(m["mean"], base["mean"]), "p90": div(m["p90"], base["p90"]),
            "network": div(m["mean_network_s"], base["mean"]),
            "serving": div(m["mean_serving_s"], base["mean"]),
            "goodput_mean": div(g.get("mean"), gb.get("mean")),
            "goodput_p90": div(g.get("p90"), gb.get("p90"))}
