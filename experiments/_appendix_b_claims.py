"""Generate ``claims.md``: each published claim of THEORY §11.2 (DLB App. B) beside what the
Appendix-B experiments measured, with 95 % Student-t intervals over scenarios, a verdict, and —
where the verdict is not "reproduced" — the measured reason (the parts of latency that differ).

A helper of ``experiments/appendix_b.py`` (the leading underscore keeps the sweep runner's
discovery from treating it as an experiment file). The verdict rules below were written — and
committed — before the issue-25 full-profile run; they are applied mechanically and stated in the
generated file. "Paired" means: per scenario, the difference of the two policies' (trial-mean)
values on the same arrivals, then the mean and 95 % interval of those differences over scenarios.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from _appendix_b_protocol import DLB_POLICIES as DLB

from lbtheory.io import write_text_atomic
from lbtheory.stats import mean_ci

RIF = tuple(p for p in DLB if p.endswith("-rif"))
MODEL = tuple(p for p in DLB if not p.endswith("-rif"))
NAMES = ("baseline", "utilisation", "noise", "y", "events", "homogeneous", "eta")
NOT_MEASURED = "this profile does not run all of DLB's six policies and MNLB"
MISSING = "experiment not run (no summary)"
#: the rule's threshold on a "≈20 % better" / "drastically better" normalised mean.
GAIN = 0.90


def load_summaries(root: Path) -> dict[str, dict]:
    """``appendix-b-<name>/summary.json`` under ``root`` (missing ones are left out)."""
    out = {}
    for n in NAMES:
        p = Path(root) / f"appendix-b-{n}" / "summary.json"
        if p.is_file():
            out[n] = json.loads(p.read_text(encoding="utf-8"))
    return out


def _group(s: dict, **level: Any) -> dict | None:
    for g in s["groups"]:
        if all(g["level"].get(k) == v for k, v in level.items()):
            return g
    return None


def _v(g: dict, pol: str, metric: str = "mean_norm") -> dict:
    return g["policies"].get(pol, {}).get(metric, {"mean": None, "lo": None, "hi": None, "n": 0})


def _m(g: dict, pol: str, metric: str = "mean_norm") -> float:
    v = _v(g, pol, metric)["mean"]
    return float("nan") if v is None else float(v)


def _fmt(c: dict, pct: bool = False) -> str:
    if c.get("mean") is None:
        return "n/a"
    k, unit = (100.0, "%") if pct else (1.0, "")
    if c.get("lo") is None:
        return f"{k * c['mean']:.3g}{unit} (n={c['n']}, no CI)"
    lo = max(c["lo"], 0.0) if pct else c["lo"]  # an error rate is ≥ 0: clip the t-interval
    return f"{k * c['mean']:.3g}{unit} [{k * lo:.3g}, {k * c['hi']:.3g}]"


def _paired(g: dict, a: str, b: str, metric: str = "mean_norm") -> dict:
    """Mean and 95 % interval over scenarios of (a − b), per scenario on the same arrivals."""
    per = g.get("per_scenario", {})
    xa, xb = per.get(a, {}).get(metric, []), per.get(b, {}).get(metric, [])
    d = [x - y for x, y in zip(xa, xb) if x is not None and y is not None]
    m, lo, hi = mean_ci(d)
    nan = m != m
    return {"mean": None if nan else m, "lo": None if lo != lo else lo,
            "hi": None if hi != hi else hi, "n": len(d)}


def _paired_levels(g0: dict, g1: dict, a0: str, a1: str, metric: str = "mean_norm") -> dict:
    """(a1 at level g1) − (a0 at level g0), paired by scenario."""
    s0, s1 = g0.get("per_scenario", {}), g1.get("per_scenario", {})
    v0 = dict(zip(s0.get("scenarios", []), s0.get(a0, {}).get(metric, [])))
    v1 = dict(zip(s1.get("scenarios", []), s1.get(a1, {}).get(metric, [])))
    d = [v1[s] - v0[s] for s in v0 if s in v1 and v0[s] is not None and v1[s] is not None]
    m, lo, hi = mean_ci(d)
    return {"mean": None if m != m else m, "lo": None if lo != lo else lo,
            "hi": None if hi != hi else hi, "n": len(d)}


def _below(c: dict) -> bool:
    """The interval lies below 0 (or below 1 for a ratio shifted by the caller)."""
    return c.get("hi") is not None and c["hi"] < 0


def _above(c: dict) -> bool:
    return c.get("lo") is not None and c["lo"] > 0


def _best(g: dict, pols: tuple[str, ...]) -> str:
    have = [p for p in pols if p in g["policies"] and _v(g, p)["mean"] is not None]
    return min(have, key=lambda p: _m(g, p)) if have else ""


def _has(s: dict, pols: tuple[str, ...]) -> bool:
    return all(p in g["policies"] for g in s["groups"] for p in pols)


def _levels(s: dict, key: str) -> list:
    return sorted(g["level"][key] for g in s["groups"])


def _ends(s: dict, key: str) -> tuple[list, dict, dict]:
    """The levels of ``key`` and the groups at the lowest and the highest."""
    lv = _levels(s, key)
    return lv, _group(s, **{key: lv[0]}), _group(s, **{key: lv[-1]})


def _parts(g: dict, pols: tuple[str, ...]) -> str:
    """The measured reason: each policy's mean/Rand split into network and serving parts
    (Rand's own split first), its error rate and the share it routes off the source cell."""
    r_net, r_srv = _m(g, "rand", "network_norm"), _m(g, "rand", "serving_norm")
    out = [f"Rand = network {r_net:.3f} + serving {r_srv:.3f}, errors "
           f"{100 * _m(g, 'rand', 'error_rate'):.2g}%, off-source "
           f"{_m(g, 'rand', 'remote_share'):.2f}"]
    for p in pols:
        if p in g["policies"] and p != "rand":
            out.append(f"{p} = network {_m(g, p, 'network_norm'):.3f} + serving "
                       f"{_m(g, p, 'serving_norm'):.3f}, errors "
                       f"{100 * _m(g, p, 'error_rate'):.2g}%, off-source "
                       f"{_m(g, p, 'remote_share'):.2f}")
    return "measured (latency / Rand's mean): " + "; ".join(out)


def _row(claim: str, meas: str, verdict: str, rule: str, g: dict | None = None,
         pols: tuple[str, ...] = ()) -> tuple[str, str, str, str]:
    why = rule if verdict == "reproduced" or g is None else f"{rule}. {_parts(g, pols)}"
    return claim, meas, verdict, why


def _baseline(s: dict | None) -> list[tuple]:
    g = _group(s, utilisation=0.8) if s else None
    if not (g and all(p in g["policies"] for p in DLB)):
        return [("Baseline 80% (three claims)", NOT_MEASURED if s else MISSING,
                 "not measured" if s else "not run", "")]
    rows = []
    sig = [p for p in DLB if (_v(g, p)["hi"] or 2) < 1.0]
    big = [p for p in sig if _m(g, p) <= GAIN]
    verdict = "reproduced" if len(big) >= 4 else "partly" if sig else "not reproduced"
    rows.append(_row("Baseline 80%: most DLB policies ≈20% better than Rand (mean latency)",
                     "; ".join(f"{p} {_fmt(_v(g, p))}" for p in DLB), verdict,
                     f"rule: ≥ 4 of 6 with CI < 1 and mean ≤ {GAIN}; here {len(sig)}/6 with "
                     f"CI < 1, {len(big)}/6 also ≤ {GAIN}", g, DLB))
    # the seed's policies: the six and MNLB (Rand is 1 by definition; RR/JSQ/P2C are extras)
    others = [p for p in (*DLB, "mnlb") if p != "flow-grad" and p in g["policies"]]
    d = {p: _paired(g, "flow-grad", p) for p in others}
    lowest = _best(g, (*DLB, "mnlb")) == "flow-grad"
    beaten = [p for p, c in d.items() if _above(c)]
    verdict = "reproduced" if lowest and not beaten else "partly" if not beaten else \
        "not reproduced"
    near = min(others, key=lambda p: _m(g, p))
    rows.append(_row("Baseline 80%: Flow-Grad best",
                     f"flow-grad {_fmt(_v(g, 'flow-grad'))}; flow-grad − {near} (paired) "
                     f"{_fmt(d[near])}", verdict,
                     "rule: lowest normalised mean of the six and MNLB, and none of them "
                     "significantly lower (paired CI of flow-grad − other > 0); significantly "
                     "lower: "
                     f"{', '.join(beaten) or 'none'}",
                     g, ("flow-grad", near)))
    br, bd = _best(g, RIF), _best(g, DLB)
    gap = _paired(g, br, bd)
    verdict = "reproduced" if (gap["mean"] or 0) <= 0.05 else "not reproduced"
    rows.append(_row("Baseline 80%: RIF surprisingly competitive",
                     f"best RIF {br} − best DLB {bd} (paired) {_fmt(gap)}", verdict,
                     "rule: mean gap ≤ 0.05", g, (br, bd)))
    return rows


def _unusable(s: dict | None, title: str, levels: int = 1) -> list[tuple] | None:
    """The one row of a claim group that cannot be judged (no summary, or a profile without
    DLB's six policies and MNLB, or fewer than ``levels`` levels); None when it can."""
    if not s:
        return [(title, MISSING, "not run", "")]
    if not _has(s, (*DLB, "mnlb")) or len(s["groups"]) < levels:
        return [(title, NOT_MEASURED, "not measured", "")]
    return None


def _utilisation(s: dict | None) -> list[tuple]:
    if bad := _unusable(s, "Utilisation sweep (three claims)", 2):
        return bad
    us, lo_g, hi_g = _ends(s, "utilisation")
    mid = _group(s, utilisation=0.8) or hi_g
    b_lo, b_mid = _best(lo_g, DLB), _best(mid, DLB)
    # gain = 1 − normalised mean; the claim: gain at 0.8 > gain at the lowest load
    d = _paired_levels(mid, lo_g, b_mid, b_lo)   # (best at low) − (best at 0.8) = gain difference
    verdict = "reproduced" if _above(d) else "partly" if (d["mean"] or 0) > 0 else \
        "not reproduced"
    rows = [_row("Utilisation: gains shrink at low load",
                 f"best DLB at {us[0]:g}: {b_lo} {_fmt(_v(lo_g, b_lo))}; at "
                 f"{mid['level']['utilisation']:g}: {b_mid} {_fmt(_v(mid, b_mid))}; gain at "
                 f"{mid['level']['utilisation']:g} − gain at {us[0]:g} (paired) {_fmt(d)}",
                 verdict, "rule: the paired gain difference's CI > 0 (partly: mean > 0)",
                 lo_g, (b_lo,))]
    mod_mean = {p: _v(lo_g, p)["mean"] for p in MODEL}
    diffs = {r: _paired_mean_vs_group(lo_g, r, MODEL) for r in RIF}
    n_sig = sum(_above(c) for c in diffs.values())
    verdict = "reproduced" if n_sig == len(RIF) else "partly" if n_sig else "not reproduced"
    rows.append(_row("Utilisation: RIF poor at low load",
                     f"at {us[0]:g}: " + "; ".join(f"{r} {_fmt(_v(lo_g, r))}, − mean of "
                                                   f"lat/grad (paired) {_fmt(c)}"
                                                   for r, c in diffs.items())
                     + f"; lat/grad {', '.join(f'{p} {v:.3g}' for p, v in mod_mean.items() if v)}",
                     verdict, "rule: each RIF policy significantly above the mean of the four "
                              "lat/grad policies (paired CI > 0)", lo_g, (*RIF, "disc-grad")))
    b = _best(hi_g, DLB)
    dm = _paired(hi_g, b, "mnlb")
    e = {p: _m(hi_g, p, "error_rate") for p in (b, "rand", "mnlb")}
    lat_ok = (_v(hi_g, b)["hi"] or 2) < 1.0 and _below(dm)
    err_ok = e[b] <= min(e["rand"], e["mnlb"])
    verdict = "reproduced" if lat_ok and err_ok else "partly" if lat_ok or err_ok else \
        "not reproduced"
    rows.append(_row("Utilisation: at high load DLB ≫ MNLB and Rand (latency and errors)",
                     f"at {us[-1]:g}: best DLB {b} {_fmt(_v(hi_g, b))}; {b} − mnlb (paired) "
                     f"{_fmt(dm)}; error rate {b} {_fmt(_v(hi_g, b, 'error_rate'), True)}, rand "
                     f"{_fmt(_v(hi_g, 'rand', 'error_rate'), True)}, mnlb "
                     f"{_fmt(_v(hi_g, 'mnlb', 'error_rate'), True)}", verdict,
                     "rule: best DLB CI < 1 and significantly below MNLB (paired); its error "
                     "rate ≤ Rand's and MNLB's", hi_g, (b, "mnlb")))
    return rows


def _paired_mean_vs_group(g: dict, a: str, group: tuple[str, ...]) -> dict:
    """a − (mean of ``group``), paired by scenario."""
    per = g.get("per_scenario", {})
    xa = per.get(a, {}).get("mean_norm", [])
    cols = [per.get(p, {}).get("mean_norm", []) for p in group]
    d = []
    for k, x in enumerate(xa):
        ys = [c[k] for c in cols if k < len(c) and c[k] is not None]
        if x is not None and len(ys) == len(group):
            d.append(x - sum(ys) / len(ys))
    m, lo, hi = mean_ci(d)
    return {"mean": None if m != m else m, "lo": None if lo != lo else lo,
            "hi": None if hi != hi else hi, "n": len(d)}


def _y(s: dict | None) -> list[tuple]:
    if bad := _unusable(s, "y scaling (two claims)"):
        return bad
    ys, _, gh = _ends(s, "y")
    order = sorted((p for p in gh["policies"] if p != "rand"), key=lambda p: _m(gh, p))
    better = order[:order.index("mnlb")] if "mnlb" in order else []
    rif_bad = all(_m(gh, r) >= max(_m(gh, p) for p in MODEL) for r in RIF)
    verdict = ("reproduced" if rif_bad and better == ["flow-grad"] else
               "partly" if rif_bad or better == ["flow-grad"] else "not reproduced")
    rows = [_row("y = 10: RIF poor; MNLB very good, beaten only by Flow-Grad",
                 f"at y = {ys[-1]:g}, ranking: {', '.join(f'{p} {_m(gh, p):.3g}' for p in order)}",
                 verdict if ys[-1] >= 10 else "not measured",
                 f"rule: both RIF policies worse than every lat/grad policy, and flow-grad the "
                 f"only policy below MNLB; RIF worse: {rif_bad}; below MNLB: "
                 f"{', '.join(better) or 'none'}", gh, (*RIF, "flow-grad", "mnlb"))]
    low = [y for y in ys if y <= 1.0]
    cnt = {y: sum(_m(_group(s, y=y), p) < _m(_group(s, y=y), "mnlb") for p in DLB) for y in low}
    verdict = ("reproduced" if cnt and all(c >= 4 for c in cnt.values()) else
               "partly" if any(c >= 1 for c in cnt.values()) else "not reproduced")
    g1 = _group(s, y=1.0) or _group(s, y=low[-1]) if low else gh
    rows.append(_row("y ≤ 1: DLB policies beat MNLB",
                     "; ".join(f"y={y:g}: {c}/6 DLB below MNLB" for y, c in cnt.items()),
                     verdict, "rule: ≥ 4 of 6 below MNLB at every y ≤ 1", g1, (*DLB, "mnlb")))
    return rows


def _homogeneous(s: dict | None) -> list[tuple]:
    if not s:
        return [("Homogeneous cells", MISSING, "not run", "")]
    parts, ok, worst = [], True, None
    for u in _levels(s, "utilisation"):
        g = _group(s, utilisation=u)
        b = _best(g, tuple(p for p in g["policies"] if p != "rand"))
        parts.append(f"util {u:g}: best {b} {_fmt(_v(g, b))}")
        if u <= 0.8 and _m(g, b) < GAIN:
            ok, worst = False, (g, b)
    return [_row("Homogeneous cells, small delays: nobody drastically better than Rand",
                 "; ".join(parts), "reproduced" if ok else "not reproduced",
                 f"rule: every policy's normalised mean ≥ {GAIN} at utilisation ≤ 0.8",
                 worst[0] if worst else None, (worst[1],) if worst else ())]


def _events(s: dict | None) -> list[tuple]:
    gb = _group(s, burst=True) if s else None
    go = _group(s, outage=True) if s else None
    if s and not _has(s, (*DLB, "mnlb")):
        return [("Bursts and outages", NOT_MEASURED, "not measured", "")]
    if not (gb and go):
        return [("Bursts and outages", MISSING, "not run", "")]
    b = _best(gb, DLB)
    e = {p: _m(gb, p, "error_rate") for p in (b, "rand", "mnlb")}
    c1 = (_v(gb, b)["hi"] or 2) < 1.0
    dm = _paired(gb, "mnlb", b)
    c2 = _above(dm)
    c3 = e["rand"] > e[b] and e["mnlb"] > e[b]
    rows = [_row("Bursts: DLB ≪ Rand; MNLB higher latency; MNLB and Rand more overflow",
                 f"best DLB {b} {_fmt(_v(gb, b))}; mnlb − {b} (paired) {_fmt(dm)}; error rate "
                 f"{b} {_fmt(_v(gb, b, 'error_rate'), True)}, rand "
                 f"{_fmt(_v(gb, 'rand', 'error_rate'), True)}, mnlb "
                 f"{_fmt(_v(gb, 'mnlb', 'error_rate'), True)}",
                 "reproduced" if c1 and c2 and c3 else "partly" if c1 or c2 or c3
                 else "not reproduced",
                 f"rule: best DLB CI < 1 ({c1}); MNLB significantly above it, paired ({c2}); "
                 f"Rand's and MNLB's error rates above it ({c3})", gb, (b, "mnlb"))]
    bo = _best(go, DLB)
    m_b, m_o = _m(gb, "mnlb") - _m(gb, b), _m(go, "mnlb") - _m(go, bo)
    # DLB keeps a margin over MNLB at outages, smaller than at bursts: MNLB ahead at outages is
    # a reversal, not a smaller margin (issue 32)
    smaller = 0 < m_o < m_b
    tails = _m(go, "mnlb", "p90_norm") > _m(go, bo, "p90_norm") and \
        _m(go, bo, "p90_norm") < 1.0
    errs = min(_m(go, "rand", "error_rate"), _m(go, "mnlb", "error_rate")) > \
        _m(go, bo, "error_rate")
    rows.append(_row("Outages: smaller margin over MNLB; Rand/MNLB worse tails and errors",
                     f"margin MNLB − best DLB: outage {m_o:.3g} vs burst {m_b:.3g}; p90/Rand "
                     f"{bo} {_fmt(_v(go, bo, 'p90_norm'))}, mnlb "
                     f"{_fmt(_v(go, 'mnlb', 'p90_norm'))}; error rate {bo} "
                     f"{_fmt(_v(go, bo, 'error_rate'), True)}, rand "
                     f"{_fmt(_v(go, 'rand', 'error_rate'), True)}, mnlb "
                     f"{_fmt(_v(go, 'mnlb', 'error_rate'), True)}",
                     "reproduced" if smaller and tails and errs else
                     "partly" if smaller or tails or errs else "not reproduced",
                     f"rule: smaller margin, still DLB's: 0 < outage < burst ({smaller}); "
                     f"MNLB's p90 above best DLB's, which is "
                     f"< Rand's ({tails}); Rand's and MNLB's error rates above it ({errs})",
                     go, (bo, "mnlb")))
    return rows


def _noise(s: dict | None) -> list[tuple]:
    if bad := _unusable(s, "Noise ε (two claims)", 2):
        return bad
    es, g0, g1 = _ends(s, "noise_eps")
    imm = {p: abs(_m(g1, p) - _m(g0, p)) for p in (*RIF, "mnlb") if p in g0["policies"]}
    rand_same = _m(g1, "rand", "mean_s") == _m(g0, "rand", "mean_s")
    rows = [_row("Noise ε: RIF, Rand, MNLB immune",
                 "; ".join(f"{p} Δ={d:.2g}" for p, d in imm.items())
                 + f"; Rand identical: {rand_same}",
                 "reproduced" if rand_same and max(imm.values()) < 1e-9 else "not reproduced",
                 "by construction: they never read the latency model (the noise draws leave "
                 "the arrivals and every other draw unchanged)")]
    d = {p: _paired_levels(g0, g1, p, p) for p in MODEL}
    worst = max(MODEL, key=lambda p: d[p]["mean"] if d[p]["mean"] is not None else -1)
    small = all((c["mean"] or 0) <= 0.10 for c in d.values())
    competitive = all(_m(g1, p) <= 1.0 for p in MODEL)
    verdict = "reproduced" if small and competitive else "partly" if small or competitive \
        else "not reproduced"
    rows.append(_row("Noise ε: Lat/Grad policies degrade gracefully",
                     f"ε {es[0]:g}→{es[-1]:g}: " + "; ".join(
                         f"{p} {_m(g0, p):.3g}→{_m(g1, p):.3g} (paired Δ {_fmt(d[p])})"
                         for p in MODEL), verdict,
                     f"rule: every lat/grad policy's paired increase ≤ 0.10 ({small}) and its "
                     f"normalised mean at ε = {es[-1]:g} ≤ 1 ({competitive})", g1, (worst,)))
    return rows


def _claims(S: dict[str, dict]) -> list[tuple[str, str, str, str]]:
    """(claim, measured, verdict, why) rows."""
    return [*_baseline(S.get("baseline")), *_utilisation(S.get("utilisation")),
            *_y(S.get("y")), *_homogeneous(S.get("homogeneous")), *_events(S.get("events")),
            *_noise(S.get("noise"))]


#: experiment 7's rule (fixed before the run): the fluid bound predicts the onset of
#: oscillation when the median spectral peak ratio at the first factor above 1 is ≥ ONSET_JUMP ×
#: the one at the last factor below 1, and the latter ≤ ONSET_FLAT × the one at the smallest
#: factor; the oscillation is the fluid one when, above 1, the median of peak period / fluid
#: period lies in [1/PERIOD_TOL, PERIOD_TOL].
ONSET_JUMP, ONSET_FLAT, PERIOD_TOL = 2.0, 1.5, 1.5


def _med(vals: list) -> float:
    v = [x for x in vals if x is not None]
    return statistics.median(v) if v else float("nan")


def _eta_section(s: dict | None) -> list[str]:
    if not s:
        return ["Experiment 7 not run (no summary)."]
    pts = s["points"]
    lines = ["| flow policy | stepsize | runs | η/η_crit (median) | workload variation / Rand "
             "(median) | spectral peak / Rand (median) | peak period / fluid period (median) "
             "| mean latency / Rand's (median) |", "|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for pol in sorted({p["policy"] for p in pts}):
        med: dict[str, float] = {}
        for rule in sorted({p["rule"] for p in pts if p["policy"] == pol},
                           key=lambda r: (r == "dlb", float(r) if r != "dlb" else 0)):
            q = [p for p in pts if p["policy"] == pol and p["rule"] == rule]
            med[rule] = _med([p["peak_ratio"] for p in q])
            per = _med([p["peak_period_s"] / p["fluid_period_s"] for p in q
                        if p["peak_period_s"] and p["fluid_period_s"]])
            lines.append(f"| {pol} | {'default rule' if rule == 'dlb' else rule + ' η_crit'} | "
                         f"{len(q)} | {_med([p['eta_over_crit'] for p in q]):.3g} | "
                         f"{_med([p['workload_var_rel'] for p in q]):.3g} | {med[rule]:.3g} | "
                         f"{per:.3g} | {_med([p['mean_norm'] for p in q]):.3g} |")
        below = [float(r) for r in med if r != "dlb" and float(r) < 1]
        above = [float(r) for r in med if r != "dlb" and float(r) > 1]
        if below and above:
            b_hi, a_lo, b_lo = max(below), min(above), min(below)
            jump = med[f"{a_lo:g}"] >= ONSET_JUMP * med[f"{b_hi:g}"]
            flat = med[f"{b_hi:g}"] <= ONSET_FLAT * med[f"{b_lo:g}"]
            per = _med([p["peak_period_s"] / p["fluid_period_s"] for p in pts
                        if p["policy"] == pol and p["rule"] != "dlb" and float(p["rule"]) > 1
                        and p["peak_period_s"] and p["fluid_period_s"]])
            same = 1 / PERIOD_TOL <= per <= PERIOD_TOL
            verdicts.append(
                f"{pol}: spectral peak ×{med[f'{a_lo:g}'] / med[f'{b_hi:g}']:.2g} from {b_hi:g} "
                f"to {a_lo:g} η_crit, ×{med[f'{b_hi:g}'] / med[f'{b_lo:g}']:.2g} from {b_lo:g} to "
                f"{b_hi:g}; peak period / fluid period above η_crit {per:.2g} → the fluid bound "
                f"{'predicts' if jump and flat else 'does not clearly predict'} the onset"
                f"{' at the fluid period' if jump and flat and same else ''}")
    none = sum(1 for c in s.get("eta_crit", []) for v in c.values()
               if isinstance(v, dict) and v.get("eta_crit") is None)
    return lines + ["", f"Rule (fixed in advance): the bound predicts the onset when the median "
                    f"spectral peak ratio at the first factor above 1 is ≥ {ONSET_JUMP:g}× the one "
                    f"at the last factor below 1, and the latter is ≤ {ONSET_FLAT:g}× the one at "
                    f"the smallest factor; 'at the fluid period' when above 1 the median peak "
                    f"period is within a factor {PERIOD_TOL:g} of the fluid model's 2π/ω.",
                    *[f"* {v}" for v in verdicts],
                    f"* scenario × cost pairs without a finite η_crit (skipped): {none}"]


def write_claims(root: Path) -> Path:
    """Write ``root/claims.md`` from the Appendix-B summaries under ``root``."""
    S = load_summaries(root)
    profiles = sorted({s["profile"] for s in S.values()})
    prof_lines = [f"* `appendix-b-{n}`: profile **{s['profile']}**, {s['cells']} grid cells: "
                  f"scenarios {s.get('scenarios', '?')}, trials {s.get('trials', '?')}, "
                  f"{'/'.join(f'{d:g}' for d in s.get('duration_s', []))} simulated s per run, "
                  f"first {'/'.join(f'{w:g}' for w in s.get('warmup_s', []))} s discarded"
                  for n, s in S.items()]
    text = [
        "# DLB Appendix B: published claims vs this toolkit's measurements",
        "",
        f"Generated by `experiments/appendix_b.py` (collect step); profile(s): "
        f"{', '.join(profiles) or 'none'}. **DLB's protocol is the `full` profile "
        "(10 scenarios × 5 trials × 600 s)**; a `reduced` or `quick` profile is a smaller "
        "sample and its verdicts are provisional.",
        "",
        *prof_lines,
        "",
        "Protocol (issue 25): time-varying Poisson arrivals per source (per-minute rate path "
        "with the Azure conversation trace's variation), each cell's latency model fitted to "
        "the simulator's own (N, latency) measurements, per-cost flow stepsizes derived from "
        "the fluid model's critical stepsize (flow weights start at Rand's), latency-model "
        "noise on every fitted parameter, Rand and the six DLB routers inside error aversion, "
        "10-minute runs with the first 60 s discarded.",
        "",
        "Numbers: normalised latency = policy / Rand on the same arrivals; per scenario the mean "
        "over its trials, then the mean over scenarios with a 95 % Student-t interval over "
        "scenarios in brackets; 'paired' = the same for the per-scenario difference of two "
        "policies (or levels); error rates in %. Scenario defaults marked [R] in THEORY §11.1 "
        "are the toolkit's reconstructions and were **not tuned** towards the paper. Verdict "
        "rules were fixed before the runs and are applied mechanically; where a verdict is not "
        "'reproduced', the 'why' column adds the measured reason: each policy's normalised mean "
        "split into its network and serving parts, its error rate and the share of requests it "
        "routes away from their source cell.",
        "",
        "| claim (THEORY §11.2) | measured | verdict | why |",
        "|---|---|---|---|",
    ]
    for claim, meas, verdict, why in _claims(S):
        text.append(f"| {claim} | {meas} | **{verdict}** | {why} |")
    text += ["", "## Experiment 7: theory meets practice (not a paper claim)", "",
             "Flow routers (no error aversion) with η = factor × η_crit, η_crit the exact "
             "critical stepsize of each scenario's fluid model linearised at its equilibrium, "
             "with the probe period in the feedback delay (τ + δ/2; "
             "`lbtheory.stability.critical_stepsize`), vs the default rule (η = per-cost "
             "constant / (mean one-way delay + δ/2)). **The fluid η_crit ignores request-level "
             "randomness** (Poisson arrivals, random service times): it bounds the mean "
             "dynamics only, so the simulated cluster's workloads fluctuate at every stepsize. "
             "Oscillation is measured on the workloads, against Rand's on the same arrivals: "
             "workload variation = Σ_j sd of N_j(t) high-passed (30-s moving average removed) "
             "relative to Rand's; spectral peak = the largest ratio of the two Welch spectra "
             "over periods 0.4–20 s, and its period against the fluid model's 2π/ω at η_crit.",
             "", *_eta_section(S.get("eta")), ""]
    path = Path(root) / "claims.md"
    write_text_atomic(path, "\n".join(text))
    return path
