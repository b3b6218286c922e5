"""Generate ``claims.md``: each published claim of DLB App. B and §5.4 (THEORY §11.2), and §1.2's
summary sentence, beside what the Appendix-B experiments measured, with 95 % Student-t intervals
over scenarios, a verdict, and the rule that gave it.

A helper of ``experiments/appendix_b.py`` (the leading underscore keeps the sweep runner's
discovery from treating it as an experiment file). Each verdict is computed by a rule fixed
before the run it judges (the issue-25 rules before the issue-25 full run; the rules issue 36
added or split — marked in their text — before any run of issue 36's protocol), applied
mechanically and stated in the table; ``tests/test_appendix_b_claims.py`` checks every rule on
hand-built summaries with known verdicts. Where the paper makes several claims in one sentence,
each gets its own row (ids ``U1a``, ``U1b``, …) and the sentence a combined verdict: reproduced
when every part is, not reproduced when none is, else partly. A latency comparison of two
policies whose error rates differ by more than 1.5× uses the goodput-aware latency when the
summary has one (:func:`_appendix_b_claim_stats.latency_metric`).
"""

from __future__ import annotations

from pathlib import Path

import _appendix_b_claim_stats as S
from _appendix_b_linear import linear_section
from _appendix_b_oscillation import eta_section
from _appendix_b_protocol import DLB_POLICIES as DLB

from lbtheory.io import write_text_atomic

RIF = tuple(p for p in DLB if p.endswith("-rif"))
MODEL = tuple(p for p in DLB if not p.endswith("-rif"))
NOT_MEASURED = "this profile does not run all of DLB's six policies and MNLB"
MISSING = "experiment not run (no summary)"
#: the rule's threshold on a "≈20 % better" / "drastically better" normalised mean.
GAIN = 0.90
#: "competitive": a mean gap to the best DLB policy of at most this (normalised latency).
COMPETITIVE = 0.05
#: "degrade gracefully": a paired increase of at most this from the lowest to the highest ε.
GRACEFUL = 0.10
REPRODUCED, PARTLY, NOT = "reproduced", "partly", "not reproduced"

load_summaries = S.load_summaries
_group, _v, _m, _fmt, _paired = S.group, S.ci, S.mean, S.fmt, S.paired
_above, _below, _best = S.above, S.below, S.best


def _three(full: bool, some: bool) -> str:
    """reproduced / partly / not reproduced."""
    return REPRODUCED if full else PARTLY if some else NOT


def _sig(c: dict, *, lower: bool = True) -> str:
    """The verdict of a paired difference claimed to be < 0 (``lower``) or > 0: its interval
    on the claimed side → reproduced; only its mean → partly; else not reproduced."""
    if lower:
        return _three(_below(c), (c["mean"] or 0) < 0)
    return _three(_above(c), (c["mean"] or 0) > 0)


def _row(claim: str, meas: str, verdict: str, rule: str, g: dict | None = None,
         pols: tuple[str, ...] = ()) -> tuple[str, str, str, str]:
    """(statement, measured, verdict, rule — with the measured reason when not reproduced)."""
    why = rule if verdict == REPRODUCED or g is None else f"{rule}. {S.parts(g, pols)}"
    return claim, meas, verdict, why


def _lat(g: dict, a: str, b: str, claimed_lower: bool = True) -> tuple[dict, str, str]:
    """(paired a − b on the latency metric of :func:`S.latency_metric`, the verdict of "a is
    lower" (or higher), the metric's note)."""
    key, note = S.latency_metric(g, a, b)
    d = _paired(g, a, b, key)
    return d, _sig(d, lower=claimed_lower), note


def _direction(d: dict, a: str, b: str) -> str:
    """Which of the two is lower on average, in words."""
    if d["mean"] is None:
        return "n/a"
    lo, hi = (a, b) if d["mean"] < 0 else (b, a)
    return f"{lo} lower than {hi} by {abs(d['mean']):.3g}"


def _unusable(s: dict | None, title: str, levels: int = 1) -> list[tuple] | None:
    """The one row of a claim group that cannot be judged (no summary, or a profile without
    DLB's six policies and MNLB, or fewer than ``levels`` levels); None when it can."""
    if not s:
        return [(title, MISSING, "not run", "")]
    if not S.has(s, (*DLB, "mnlb")) or len(s["groups"]) < levels:
        return [(title, NOT_MEASURED, "not measured", "")]
    return None


# ------------------------------------------------------------------------------ baseline
def _baseline(s: dict | None) -> list[tuple]:
    g = _group(s, utilisation=0.8) if s else None
    if not (g and all(p in g["policies"] for p in (*DLB, "mnlb"))):
        return [("Baseline 80% (three claims)", NOT_MEASURED if s else MISSING,
                 "not measured" if s else "not run", "")]
    rows = []
    sig = [p for p in DLB if (_v(g, p)["hi"] or 2) < 1.0]
    big = [p for p in sig if _m(g, p) <= GAIN]
    rows.append(_row("B1 · \"Most DLB policies show improvements around 20% relative to random "
                     "routing\" (App. B.2, mean latency)",
                     "; ".join(f"{p} {_fmt(_v(g, p))}" for p in DLB),
                     _three(len(big) >= 4, bool(sig)),
                     f"rule: ≥ 4 of 6 with CI < 1 and mean ≤ {GAIN} (partly: ≥ 1 with CI < 1); "
                     f"here {len(sig)}/6 with CI < 1, {len(big)}/6 also ≤ {GAIN}", g, DLB))
    # the seed's policies: the six and MNLB (Rand is 1 by definition; RR/JSQ/P2C are extras)
    others = [p for p in (*DLB, "mnlb") if p != "flow-grad"]
    d = {p: _paired(g, "flow-grad", p) for p in others}
    lowest = _best(g, (*DLB, "mnlb")) == "flow-grad"
    beaten = [p for p, c in d.items() if _above(c)]
    near = min(others, key=lambda p: _m(g, p))
    rows.append(_row("B2 · \"with Flow-Grad performing the best\" (App. B.2)",
                     f"flow-grad {_fmt(_v(g, 'flow-grad'))}; flow-grad − {near} (paired) "
                     f"{_fmt(d[near])}", _three(lowest and not beaten, not beaten),
                     "rule: lowest normalised mean of the six and MNLB, and none of them "
                     "significantly lower (paired CI of flow-grad − other > 0; partly: none "
                     f"significantly lower); significantly lower: {', '.join(beaten) or 'none'}",
                     g, ("flow-grad", near)))
    br, bd = _best(g, RIF), _best(g, DLB)
    gap = _paired(g, br, bd)
    rows.append(_row("B3 · \"RIF-based routing … achieves competitive results\" (App. B.2)",
                     f"best RIF {br} − best DLB {bd} (paired) {_fmt(gap)}",
                     REPRODUCED if (gap["mean"] or 0) <= COMPETITIVE else NOT,
                     f"rule: mean gap ≤ {COMPETITIVE}", g, (br, bd)))
    # issue 36: the tail-latency sentence, one row per baseline
    tail_r = [p for p in DLB if (_v(g, p, "p90_norm")["hi"] or 2) < 1.0]
    rows.append(_row("B4a · \"our policies outperform Rand … by actively balancing requests to "
                     "mitigate the local queue buildups that drive tail latency\" (App. B.2, "
                     "p90 vs Rand)",
                     "p90/Rand: " + "; ".join(f"{p} {_fmt(_v(g, p, 'p90_norm'))}" for p in DLB),
                     _three(len(tail_r) >= 4, bool(tail_r)),
                     f"rule: ≥ 4 of 6 with p90/Rand CI < 1 (partly: ≥ 1); here "
                     f"{len(tail_r)}/6", g, DLB))
    dm = {p: _paired(g, p, "mnlb", "p90_norm") for p in DLB}
    tail_m = [p for p, c in dm.items() if _below(c)]
    rows.append(_row("B4b · \"… and MNLB …\" (App. B.2, p90 vs MNLB)",
                     f"MNLB p90/Rand {_fmt(_v(g, 'mnlb', 'p90_norm'))}; policy − MNLB (paired): "
                     + "; ".join(f"{p} {_fmt(c)}" for p, c in dm.items()),
                     _three(len(tail_m) >= 4, bool(tail_m)),
                     f"rule: ≥ 4 of 6 with paired p90 − MNLB's CI < 0 (partly: ≥ 1); "
                     f"here {len(tail_m)}/6", g, (*DLB, "mnlb")))
    return rows


# --------------------------------------------------------------------------- utilisation
def _utilisation(s: dict | None) -> list[tuple]:
    if bad := _unusable(s, "Utilisation sweep (three claims)", 2):
        return bad
    us, lo_g, hi_g = S.ends(s, "utilisation")
    mid = _group(s, utilisation=0.8) or hi_g
    u_lo, u_mid = us[0], mid["level"]["utilisation"]
    b_lo, b_mid = _best(lo_g, DLB), _best(mid, DLB)
    # gain over Rand = 1 − normalised mean; claimed: larger at 0.8 than at the lowest load
    d = S.paired_levels(mid, lo_g, b_mid, b_lo)   # (best at low) − (best at 0.8)
    rows = [_row("U1a · \"the relative improvements of our stateful policies over Rand … are "
                 "smaller when utilization is low\" (App. B.2, §5.4)",
                 f"best DLB at {u_lo:g}: {b_lo} {_fmt(_v(lo_g, b_lo))}; at {u_mid:g}: {b_mid} "
                 f"{_fmt(_v(mid, b_mid))}; gain at {u_mid:g} − gain at {u_lo:g} (paired) "
                 f"{_fmt(d)}", _sig(d, lower=False),
                 "rule: the paired gain difference's CI > 0 (partly: mean > 0)", lo_g, (b_lo,))]
    # issue 36: the same sentence's MNLB half. Margin over MNLB = MNLB − best DLB, per scenario
    dm = S.paired_margins(lo_g, mid, ("mnlb", b_lo), ("mnlb", b_mid))
    m_lo = _m(lo_g, "mnlb") - _m(lo_g, b_lo)
    m_mid = _m(mid, "mnlb") - _m(mid, b_mid)
    rows.append(_row("U1b · \"… over … MNLB are smaller when utilization is low\" (App. B.2, "
                     "§5.4)",
                     f"margin MNLB − best DLB: {m_lo:.3g} at {u_lo:g}, {m_mid:.3g} at "
                     f"{u_mid:g}; margin at {u_mid:g} − margin at {u_lo:g} (paired) {_fmt(dm)}",
                     _sig(dm, lower=False),
                     "rule: the paired margin difference's CI > 0 (partly: mean > 0)",
                     lo_g, (b_lo, "mnlb")))
    diffs = {r: S.paired_vs_mean(lo_g, r, MODEL) for r in RIF}
    n_sig = sum(_above(c) for c in diffs.values())
    mod = ", ".join(f"{p} {_m(lo_g, p):.3g}" for p in MODEL)
    rows.append(_row("U2 · \"Disc-RIF and Flow-RIF … sub-optimal performance by spilling requests "
                     "to slower cells\" at low load (App. B.2)",
                     f"at {u_lo:g}: " + "; ".join(f"{r} {_fmt(_v(lo_g, r))}, − mean of lat/grad "
                                                  f"(paired) {_fmt(c)}" for r, c in diffs.items())
                     + f"; lat/grad {mod}", _three(n_sig == len(RIF), n_sig > 0),
                     "rule: each RIF policy significantly above the mean of the four lat/grad "
                     "policies (paired CI > 0; partly: one)", lo_g, (*RIF, "disc-grad")))
    b = _best(hi_g, DLB)
    u_hi = us[-1]
    sentence = ("\"When utilization is high, our policies yield substantially lower latencies "
                "and error rates compared with MNLB (and Rand)\" (App. B.2, §5.4)")
    dl, v_l, note = _lat(hi_g, b, "mnlb")
    rows.append(_row(f"U3a · {sentence}: latency vs MNLB",
                     f"at {u_hi:g}: best DLB {b} {_fmt(_v(hi_g, b))}, mnlb "
                     f"{_fmt(_v(hi_g, 'mnlb'))}; {b} − mnlb (paired) {_fmt(dl)}: "
                     f"{_direction(dl, b, 'mnlb')}", v_l,
                     f"rule: best DLB − MNLB paired CI < 0 (partly: mean < 0), on {note}",
                     hi_g, (b, "mnlb")))
    r_ci = _v(hi_g, b)
    rows.append(_row(f"U3b · {sentence}: latency vs Rand",
                     f"at {u_hi:g}: best DLB {b} {_fmt(r_ci)} (Rand = 1)",
                     _three((r_ci["hi"] or 2) < 1.0, _m(hi_g, b) < 1.0),
                     "rule: best DLB's normalised mean CI < 1 (partly: mean < 1)", hi_g, (b,)))
    for tag, other in (("c", "mnlb"), ("d", "rand")):
        de = _paired(hi_g, b, other, "error_rate")
        rows.append(_row(f"U3{tag} · {sentence}: errors vs {'MNLB' if other == 'mnlb' else 'Rand'}",
                         f"at {u_hi:g}: error rate {b} {_fmt(_v(hi_g, b, 'error_rate'), True)}, "
                         f"{other} {_fmt(_v(hi_g, other, 'error_rate'), True)}; paired "
                         f"{b} − {other} {_fmt(de, True, False)}", _sig(de),
                         f"rule (split): best DLB − {other} error rate paired CI < 0 "
                         "(partly: mean < 0)", hi_g, (b, other)))
    high = [u for u in us if u >= 0.9]
    gaps = {u: S.paired(_group(s, utilisation=u), _best(_group(s, utilisation=u), RIF),
                        _best(_group(s, utilisation=u), DLB)) for u in high}
    ok = [u for u, c in gaps.items() if (c["mean"] or 0) <= COMPETITIVE]
    rows.append(_row("U4 · \"the simpler RIF-based routing proved highly competitive at high "
                     "utilization levels\" (§5.4)",
                     "; ".join(f"util {u:g}: best RIF − best DLB (paired) {_fmt(c)}"
                               for u, c in gaps.items()) or "no level ≥ 0.9",
                     _three(bool(high) and len(ok) == len(high), bool(ok)),
                     f"rule: at every utilisation ≥ 0.9 the best RIF policy's mean gap "
                     f"to the best DLB policy ≤ {COMPETITIVE} (partly: at some)", hi_g,
                     (_best(hi_g, RIF), b)))
    return rows


# ------------------------------------------------------------------------------------ y
def _y(s: dict | None) -> list[tuple]:
    if bad := _unusable(s, "y scaling (two claims)"):
        return bad
    ys, _, gh = S.ends(s, "y")
    top = ys[-1] >= 10
    order = sorted((p for p in gh["policies"] if p in (*DLB, "mnlb")), key=lambda p: _m(gh, p))
    rank = ", ".join(f"{p} {_m(gh, p):.3g}" for p in order)
    rif_bad = all(_m(gh, r) >= max(_m(gh, p) for p in MODEL) for r in RIF)
    rows = [_row("Y1a · \"When requests are short (y=10) … RIF-based routing performs poorly\" "
                 "(App. B.2)", f"at y = {ys[-1]:g}, ranking: {rank}",
                 (REPRODUCED if rif_bad else NOT) if top else "not measured",
                 f"rule: both RIF policies worse than every lat/grad policy ({rif_bad})", gh,
                 (*RIF, "flow-grad"))]
    better = [p for p in DLB if _m(gh, p) < _m(gh, "mnlb")]
    fg, only = "flow-grad" in better, better in ([], ["flow-grad"])
    rows.append(_row("Y1b · \"MNLB … performs remarkably well, beaten only by Flow-Grad\" "
                     "(App. B.2)", f"at y = {ys[-1]:g}, ranking: {rank}",
                     _three(fg and only, fg or only) if top else "not measured",
                     f"rule: flow-grad below MNLB ({fg}) and no other DLB policy below it "
                     f"({only}); below MNLB: {', '.join(better) or 'none'}", gh,
                     ("flow-grad", "mnlb")))
    low = [y for y in ys if y <= 1.0]
    cnt = {y: sum(_m(_group(s, y=y), p) < _m(_group(s, y=y), "mnlb") for p in DLB) for y in low}
    g1 = (_group(s, y=1.0) or _group(s, y=low[-1])) if low else gh
    rows.append(_row("Y2 · \"For longer processing times (y≤1), our algorithms improve upon "
                     "MNLB\" (App. B.2)",
                     "; ".join(f"y={y:g}: {c}/6 DLB below MNLB" for y, c in cnt.items()),
                     _three(bool(cnt) and all(c >= 4 for c in cnt.values()),
                            any(c >= 1 for c in cnt.values())),
                     "rule: ≥ 4 of 6 below MNLB at every y ≤ 1 (partly: ≥ 1 at some)", g1,
                     (*DLB, "mnlb")))
    return rows


def _homogeneous(s: dict | None) -> list[tuple]:
    if not s:
        return [("Homogeneous cells", MISSING, "not run", "")]
    parts, ok, worst = [], True, None
    for u in S.levels(s, "utilisation"):
        g = _group(s, utilisation=u)
        b = _best(g, tuple(p for p in g["policies"] if p != "rand"))
        parts.append(f"util {u:g}: best {b} {_fmt(_v(g, b))}")
        if u <= 0.8 and _m(g, b) < GAIN:
            ok, worst = False, (g, b)
    return [_row("H1 · homogeneous cells, small delays: \"none of the algorithms performs "
                 "drastically better than Rand\" when utilisation is not too high (App. B.2)",
                 "; ".join(parts), REPRODUCED if ok else NOT,
                 f"rule: every policy's normalised mean ≥ {GAIN} at utilisation ≤ 0.8",
                 worst[0] if worst else None, (worst[1],) if worst else ())]


# ------------------------------------------------------------------------------- events
def _events(s: dict | None) -> list[tuple]:
    gb = _group(s, burst=True) if s else None
    go = _group(s, outage=True) if s else None
    if s and not S.has(s, (*DLB, "mnlb")):
        return [("Bursts and outages", NOT_MEASURED, "not measured", "")]
    if not (gb and go):
        return [("Bursts and outages", MISSING, "not run", "")]
    b = _best(gb, DLB)
    r_ci = _v(gb, b)
    rows = [_row("E1a · bursts: \"Our policies significantly improve upon Rand\" (App. B.3)",
                 f"best DLB {b} {_fmt(r_ci)} (Rand = 1)",
                 _three((r_ci["hi"] or 2) < 1.0, _m(gb, b) < 1.0),
                 "rule: best DLB's normalised mean CI < 1 (partly: mean < 1)", gb, (b,))]
    dm, v, note = _lat(gb, "mnlb", b, claimed_lower=False)
    rows.append(_row("E1b · bursts: \"The long cycle times of MNLB lead to higher latency "
                     "compared with our policies\" (App. B.3)",
                     f"mnlb − {b} (paired) {_fmt(dm)}: {_direction(dm, 'mnlb', b)}", v,
                     f"rule: MNLB − best DLB paired CI > 0 (partly: mean > 0), on {note}", gb,
                     (b, "mnlb")))
    for tag, other in (("c", "mnlb"), ("d", "rand")):
        de = _paired(gb, other, b, "error_rate")
        rows.append(_row(f"E1{tag} · bursts: \"{'MNLB' if other == 'mnlb' else 'Rand'} … "
                         "ha[s] higher error rates\" (App. B.3)",
                         f"error rate {other} {_fmt(_v(gb, other, 'error_rate'), True)}, {b} "
                         f"{_fmt(_v(gb, b, 'error_rate'), True)}; paired {other} − {b} "
                         f"{_fmt(de, True, False)}", _sig(de, lower=False),
                         f"rule: {other} − best DLB error rate paired CI > 0 (partly: mean > 0)",
                         gb, (b, other)))
    bo = _best(go, DLB)
    mb = _m(gb, "mnlb") - _m(gb, b)
    mo = _m(go, "mnlb") - _m(go, bo)
    # the claim: DLB keeps a margin at outages, narrower than at bursts. MNLB ahead at outages
    # is a sign change — no margin left — not a narrower one (issue 32/36)
    rows.append(_row("E2a · outages: \"The performance advantage of our policies over MNLB is "
                     "slightly narrower in this specific experiment\" (App. B.3)",
                     f"margin MNLB − best DLB ({bo}): outage {mo:.3g} vs burst {mb:.3g}"
                     + (f" — a sign change: MNLB is lower at outages by {-mo:.3g}"
                        if mo <= 0 else ""),
                     _three(0 < mo < mb, mo > 0),
                     "rule: 0 < outage margin < burst margin (partly: outage margin > 0 but not "
                     "narrower); a margin ≤ 0 is MNLB ahead: not reproduced", go, (bo, "mnlb")))
    for tag, other, metric, word in (("b", "rand", "p90_norm", "tail latencies"),
                                     ("c", "mnlb", "p90_norm", "tail latencies"),
                                     ("d", "rand", "error_rate", "error rates"),
                                     ("e", "mnlb", "error_rate", "error rates")):
        pct = metric == "error_rate"
        de = _paired(go, other, bo, metric)
        rows.append(_row(f"E2{tag} · outages: \"{'Rand' if other == 'rand' else 'MNLB'} lead[s] "
                         f"to higher {word}\" (App. B.3)",
                         f"{metric} {other} {_fmt(_v(go, other, metric), pct)}, {bo} "
                         f"{_fmt(_v(go, bo, metric), pct)}; paired {other} − {bo} "
                         f"{_fmt(de, pct, False)}", _sig(de, lower=False),
                         f"rule (split): {other} − best DLB {metric} paired CI > 0 "
                         "(partly: mean > 0)", go, (bo, other)))
    return rows


def _summary_sentences(s: dict | None) -> list[tuple]:
    """§1.2's and §5.4's summary sentences on bursts and outages."""
    gb = _group(s, burst=True) if s else None
    go = _group(s, outage=True) if s else None
    if not (s and gb and go) or not S.has(s, (*DLB, "mnlb")):
        return [("Summary sentences (§1.2, §5.4)", MISSING if not s else NOT_MEASURED,
                 "not run" if not s else "not measured", "")]
    rows = []
    for tag, ev, g in (("a", "bursts", gb), ("b", "outages", go)):
        b = _best(g, DLB)
        held, parts = 0, []
        for other in ("mnlb", "rand"):
            for metric in ("mean_norm", "p90_norm", "error_rate"):
                key, _ = S.latency_metric(g, b, other) if metric == "mean_norm" else (metric, "")
                d = _paired(g, b, other, key)
                held += _below(d)
                parts.append(f"{metric if metric != 'mean_norm' else key} vs {other} "
                             f"{_fmt(d, metric == 'error_rate', False)}")
        rows.append(_row(f"S1{tag} · \"In simulations, DLB policies show lower mean and tail "
                         f"latency and fewer queue-overflow errors than MNLB and weighted random "
                         f"routing under … demand bursts, and capacity outages\" (§1.2): {ev}",
                         f"best DLB {b} − other (paired): " + "; ".join(parts),
                         _three(held == 6, held > 0),
                         f"rule: all 6 paired differences (mean, p90, errors × MNLB, "
                         f"Rand) with CI < 0 (partly: ≥ 1); here {held}/6", g, (b, "mnlb")))
    for tag, ev, g in (("a", "bursts", gb), ("b", "outages", go)):
        b = _best(g, DLB)
        dp, de = _paired(g, b, "mnlb", "p90_norm"), _paired(g, b, "mnlb", "error_rate")
        rows.append(_row(f"S2{tag} · \"DLB exhibited superior robustness compared to the legacy "
                         "MNLB system, significantly reducing tail latencies and error rates "
                         f"during demand bursts and capacity outages\" (§5.4): {ev}",
                         f"best DLB {b} − mnlb (paired): p90 {_fmt(dp)}, errors "
                         f"{_fmt(de, True, False)}",
                         _three(_below(dp) and _below(de), _below(dp) or _below(de)),
                         "rule: paired p90 and error-rate differences both with CI < 0 "
                         "(partly: one)", g, (b, "mnlb")))
    return rows


# -------------------------------------------------------------------------------- noise
def _noise(s: dict | None) -> list[tuple]:
    if bad := _unusable(s, "Noise ε (two claims)", 2):
        return bad
    es, g0, g1 = S.ends(s, "noise_eps")
    imm = {p: abs(_m(g1, p) - _m(g0, p)) for p in (*RIF, "mnlb") if p in g0["policies"]}
    rand_same = _m(g1, "rand", "mean_s") == _m(g0, "rand", "mean_s")
    rows = [_row("N1 · \"RIF-based routing … is immune to latency estimation errors … MNLB and "
                 "Rand do not use the latency estimator, so are also immune\" (§5.4)",
                 "; ".join(f"{p} Δ={d:.2g}" for p, d in imm.items())
                 + f"; Rand identical: {rand_same}",
                 REPRODUCED if rand_same and max(imm.values()) < 1e-9 else NOT,
                 "by construction: they never read the latency model (the noise draws leave "
                 "the arrivals and every other draw unchanged)")]
    for tag, metric, word in (("N2", "mean_norm", "mean latency"),
                              ("N3", "p90_norm", "p90 latency")):
        d = {p: S.paired_levels(g0, g1, p, p, metric) for p in MODEL}
        worst = max(MODEL, key=lambda p: d[p]["mean"] if d[p]["mean"] is not None else -1)
        small = all((c["mean"] or 0) <= GRACEFUL for c in d.values())
        comp = all(_m(g1, p, metric) <= 1.0 for p in MODEL)
        rows.append(_row(f"{tag} · \"Disc-Lat, Flow-Lat, Disc-Grad, and Flow-Grad degrade "
                         "gracefully; … they maintain competitive performance even in the "
                         f"presence of substantial parameter noise\" (§5.4, Fig. 7): {word}",
                         f"ε {es[0]:g}→{es[-1]:g}: " + "; ".join(
                             f"{p} {_m(g0, p, metric):.3g}→{_m(g1, p, metric):.3g} (paired Δ "
                             f"{_fmt(d[p])})" for p in MODEL), _three(small and comp,
                                                                     small or comp),
                         f"rule{'' if tag == 'N3' else ''}: every lat/grad policy's "
                         f"paired increase ≤ {GRACEFUL} ({small}) and its {word}/Rand at "
                         f"ε = {es[-1]:g} ≤ 1 ({comp}) (partly: one of the two)", g1, (worst,)))
    de = {p: _paired(g1, p, "rand", "error_rate") for p in MODEL}
    ok = [p for p, c in de.items() if not _above(c)]
    rows.append(_row("N4 · the same sentence, on error rates (§5.4, Fig. 7)",
                     f"at ε = {es[-1]:g}, error rate − Rand's (paired): "
                     + "; ".join(f"{p} {_fmt(c, True, False)}" for p, c in de.items()),
                     _three(len(ok) == len(MODEL), bool(ok)),
                     f"rule: at the largest ε every lat/grad policy's error rate not "
                     f"significantly above Rand's (paired CI of p − Rand not > 0; partly: some); "
                     f"here {len(ok)}/{len(MODEL)}", g1, MODEL))
    return rows


def _claims(summ: dict[str, dict]) -> list[tuple[str, str, str, str]]:
    """(statement, measured, verdict, rule) rows."""
    return [*_baseline(summ.get("baseline")), *_utilisation(summ.get("utilisation")),
            *_y(summ.get("y")), *_homogeneous(summ.get("homogeneous")),
            *_events(summ.get("events")), *_summary_sentences(summ.get("events")),
            *_noise(summ.get("noise"))]


def sentence_verdicts(rows: list[tuple]) -> dict[str, tuple[str, list[str]]]:
    """Per sentence split into parts (ids ``U1a``, ``U1b`` … → ``U1``; also ``S1``/``S2``,
    whose rows are its events): the combined verdict (reproduced when every part is, not
    reproduced when none is — partly otherwise) and the parts' verdicts, for sentences with
    more than one judged part."""
    by: dict[str, list[str]] = {}
    for claim, _, verdict, _ in rows:
        rid = claim.split(" · ")[0]
        if " · " not in claim or verdict not in (REPRODUCED, PARTLY, NOT):
            continue
        key = rid.rstrip("abcdefgh")
        by.setdefault(key, []).append(f"{rid} {verdict}")
    out = {}
    for key, parts in by.items():
        if len(parts) < 2:
            continue
        vs = [p.split(" ", 1)[1] for p in parts]
        out[key] = (_three(all(v == REPRODUCED for v in vs),
                           any(v in (REPRODUCED, PARTLY) for v in vs)), parts)
    return out


def write_claims(root: Path) -> Path:
    """Write ``root/claims.md`` from the Appendix-B summaries under ``root``."""
    summ = S.load_summaries(root)
    profiles = sorted({s["profile"] for s in summ.values()})
    prof_lines = [f"* `appendix-b-{n}`: profile **{s['profile']}**, {s['cells']} grid cells: "
                  f"scenarios {s.get('scenarios', '?')}, trials {s.get('trials', '?')}, "
                  f"{'/'.join(f'{d:g}' for d in s.get('duration_s', []))} simulated s per run, "
                  f"first {'/'.join(f'{w:g}' for w in s.get('warmup_s', []))} s discarded"
                  for n, s in summ.items() if n != "linear"]
    rows = _claims(summ)
    text = [
        "# DLB Appendix B: published claims vs this toolkit's measurements",
        "",
        f"Generated by `experiments/appendix_b.py` (collect step; or `python "
        f"experiments/_appendix_b_claims.py` on the stored summaries); profile(s): "
        f"{', '.join(profiles) or 'none'}. **DLB's protocol is the `full` profile "
        "(10 scenarios × 5 trials × 600 s)**; a `reduced` or `quick` profile is a smaller "
        "sample and its verdicts are provisional.",
        "",
        *prof_lines,
        "",
        "Protocol: time-varying Poisson arrivals per source (per-minute rate path "
        "with the Azure conversation trace's variation), each cell's latency model fitted to "
        "the simulator's own (N, latency) measurements, per-cost flow stepsizes derived from "
        "the fluid model's critical stepsize (flow weights start at Rand's), latency-model "
        "noise drawn per fitted parameter and per trial, Rand and the six DLB routers inside "
        "error aversion, probes as stale as DLB's stack makes them [R] (3 root replicas taking "
        "turns, 10-ms leaf caches, one period of jitter; probe period 10 ms), MNLB spilling "
        "above its 0.9 cap in proportion to capacity, 10-minute runs with the first 60 s "
        "discarded.",
        "",
        "Numbers: normalised latency = policy / Rand on the same arrivals; per scenario the mean "
        "over its trials, then the mean over scenarios with a 95 % Student-t interval over "
        "scenarios in brackets; 'paired' = the same for the per-scenario difference of two "
        "policies (or levels); error rates in %. 'Best DLB' = the lowest normalised mean of the "
        "six DLB policies at that level. Scenario defaults marked [R] in THEORY §11.1 are the "
        "toolkit's reconstructions and were **not tuned** towards the paper. Verdict rules were "
        "fixed before the runs they judge and are applied mechanically (each is tested on "
        "hand-built summaries, `tests/test_appendix_b_claims.py`); a sentence with several "
        "claims is split into rows (U1a, U1b, …) and gets a combined verdict below the table. "
        "Latency comparisons of two policies whose error rates differ by more than "
        f"{S.ERROR_RATIO:g}× use a goodput-aware latency when the summary has one (the rule "
        "says which). Where a verdict is not 'reproduced', the rule column adds the measured "
        "reason: each policy's normalised mean split into its network and serving parts, its "
        "error rate and the share of requests it routes away from their source cell.",
        "",
        "| paper's statement (section) | measured | verdict | rule |",
        "|---|---|---|---|",
    ]
    text += [f"| {c} | {m} | **{v}** | {w} |" for c, m, v, w in rows]
    sv = sentence_verdicts(rows)
    if sv:
        text += ["", "Sentences with several claims (combined verdict: reproduced when every "
                 "part is, not reproduced when none is, else partly):", ""]
        text += [f"* {k}: **{v}** ({', '.join(parts)})" for k, (v, parts) in sv.items()]
    text += ["", "## Experiment 7: theory meets practice (not a paper claim)", "",
             *eta_section(summ.get("eta")), "",
             "## Experiment 7 as a test of the linear theory", "",
             *linear_section(summ.get("linear")), ""]
    path = Path(root) / "claims.md"
    write_text_atomic(path, "\n".join(text))
    return path


if __name__ == "__main__":  # regenerate claims.md from the committed summaries (no run)
    import sys

    root = Path(sys.argv[1]) if len(sys.argv) > 1 else \
        Path(__file__).resolve().parent / "results"
    print(write_claims(root))
