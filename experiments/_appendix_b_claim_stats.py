"""Reading the Appendix-B summaries for the claims table (:mod:`_appendix_b_claims`): groups,
per-policy intervals, paired differences over scenarios, and the latency metric a comparison
uses (goodput-aware when the two policies' error rates differ by more than
:data:`ERROR_RATIO`, issue 36 item 2).

"Paired" means: per scenario, the difference of the two policies' (trial-mean) values on the
same arrivals, then the mean and 95 % Student-t interval of those differences over scenarios.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lbtheory.stats import mean_ci

NAMES = ("baseline", "utilisation", "noise", "y", "events", "homogeneous", "eta", "linear")
#: error rates of two policies that differ by more than this factor make latency over completed
#: requests flatter the one that drops more: such comparisons use a goodput-aware
#: latency when the summary has one (fixed before any run that has one).
ERROR_RATIO = 1.5
#: summary keys of a goodput-aware normalised latency, in order of preference (issue 36 item 2
#: adds one; its final name is the simulator helper's — any of these is read).
GOODPUT_KEYS = ("latency_goodput_norm", "goodput_latency_norm", "latency_goodput")
EMPTY = {"mean": None, "lo": None, "hi": None, "n": 0}


def load_summaries(root: Path) -> dict[str, dict]:
    """``appendix-b-<name>/summary.json`` under ``root`` (missing ones are left out)."""
    out = {}
    for n in NAMES:
        p = Path(root) / f"appendix-b-{n}" / "summary.json"
        if p.is_file():
            out[n] = json.loads(p.read_text(encoding="utf-8"))
    return out


def group(s: dict, **level: Any) -> dict | None:
    """The group of summary ``s`` at ``level`` (None when absent)."""
    for g in s["groups"]:
        if all(g["level"].get(k) == v for k, v in level.items()):
            return g
    return None


def ci(g: dict, pol: str, metric: str = "mean_norm") -> dict:
    """{mean, lo, hi, n} of ``metric`` for ``pol`` in group ``g``."""
    return g["policies"].get(pol, {}).get(metric, EMPTY)


def mean(g: dict, pol: str, metric: str = "mean_norm") -> float:
    """The mean of :func:`ci` (nan when absent)."""
    v = ci(g, pol, metric)["mean"]
    return float("nan") if v is None else float(v)


def fmt(c: dict, pct: bool = False, clip: bool | None = None) -> str:
    """``mean [lo, hi]``; ``pct``: in % (an error rate's interval clipped at 0 unless ``clip``
    is False — a paired difference of error rates is not clipped)."""
    if c.get("mean") is None:
        return "n/a"
    k, unit = (100.0, "%") if pct else (1.0, "")
    if c.get("lo") is None:
        return f"{k * c['mean']:.3g}{unit} (n={c['n']}, no CI)"
    lo = max(c["lo"], 0.0) if (pct if clip is None else clip) else c["lo"]
    return f"{k * c['mean']:.3g}{unit} [{k * lo:.3g}, {k * c['hi']:.3g}]"


def _interval(d: list[float]) -> dict:
    m, lo, hi = mean_ci(d)
    return {"mean": None if m != m else m, "lo": None if lo != lo else lo,
            "hi": None if hi != hi else hi, "n": len(d)}


def paired(g: dict, a: str, b: str, metric: str = "mean_norm") -> dict:
    """(a − b) paired by scenario in group ``g``."""
    per = g.get("per_scenario", {})
    xa, xb = per.get(a, {}).get(metric, []), per.get(b, {}).get(metric, [])
    return _interval([x - y for x, y in zip(xa, xb) if x is not None and y is not None])


def paired_levels(g0: dict, g1: dict, a0: str, a1: str, metric: str = "mean_norm") -> dict:
    """(a1 at level g1) − (a0 at level g0), paired by scenario."""
    s0, s1 = g0.get("per_scenario", {}), g1.get("per_scenario", {})
    v0 = dict(zip(s0.get("scenarios", []), s0.get(a0, {}).get(metric, [])))
    v1 = dict(zip(s1.get("scenarios", []), s1.get(a1, {}).get(metric, [])))
    return _interval([v1[s] - v0[s] for s in v0
                      if s in v1 and v0[s] is not None and v1[s] is not None])


def paired_margins(g0: dict, g1: dict, pairs0: tuple[str, str], pairs1: tuple[str, str],
                   metric: str = "mean_norm") -> dict:
    """(x1 − y1 at g1) − (x0 − y0 at g0), paired by scenario: how a margin changes between two
    levels (``pairs = (x, y)``)."""
    def per(g: dict, x: str, y: str) -> dict:
        s = g.get("per_scenario", {})
        xs, ys = s.get(x, {}).get(metric, []), s.get(y, {}).get(metric, [])
        return {k: u - v for k, u, v in zip(s.get("scenarios", []), xs, ys)
                if u is not None and v is not None}
    m0, m1 = per(g0, *pairs0), per(g1, *pairs1)
    return _interval([m1[k] - m0[k] for k in m0 if k in m1])


def paired_vs_mean(g: dict, a: str, others: tuple[str, ...]) -> dict:
    """a − (mean of ``others``), paired by scenario."""
    per = g.get("per_scenario", {})
    xa = per.get(a, {}).get("mean_norm", [])
    cols = [per.get(p, {}).get("mean_norm", []) for p in others]
    d = []
    for k, x in enumerate(xa):
        ys = [c[k] for c in cols if k < len(c) and c[k] is not None]
        if x is not None and len(ys) == len(others):
            d.append(x - sum(ys) / len(ys))
    return _interval(d)


def below(c: dict) -> bool:
    """The interval lies below 0."""
    return c.get("hi") is not None and c["hi"] < 0


def above(c: dict) -> bool:
    """The interval lies above 0."""
    return c.get("lo") is not None and c["lo"] > 0


def best(g: dict, pols: tuple[str, ...], metric: str = "mean_norm") -> str:
    """The policy of ``pols`` with the lowest mean ``metric`` ("" when none has one)."""
    have = [p for p in pols if p in g["policies"] and ci(g, p, metric)["mean"] is not None]
    return min(have, key=lambda p: mean(g, p, metric)) if have else ""


def has(s: dict, pols: tuple[str, ...]) -> bool:
    """Every group of ``s`` holds every policy of ``pols``."""
    return all(p in g["policies"] for g in s["groups"] for p in pols)


def levels(s: dict, key: str) -> list:
    """The sorted levels of ``key``."""
    return sorted(g["level"][key] for g in s["groups"])


def ends(s: dict, key: str) -> tuple[list, dict, dict]:
    """The levels of ``key`` and the groups at the lowest and the highest."""
    lv = levels(s, key)
    return lv, group(s, **{key: lv[0]}), group(s, **{key: lv[-1]})


def latency_metric(g: dict, a: str, b: str) -> tuple[str, str]:
    """(metric key, note) for a latency comparison of ``a`` and ``b``: ``mean_norm`` (latency
    over completed requests) unless their error rates differ by more than :data:`ERROR_RATIO`,
    then the goodput-aware latency of :data:`GOODPUT_KEYS` when the summary has it; the note
    says which and why."""
    ea, eb = mean(g, a, "error_rate"), mean(g, b, "error_rate")
    lo, hi = sorted((ea, eb))
    differ = hi > 0 and (lo <= 0 or hi / lo > ERROR_RATIO)
    if not differ or hi != hi:
        return "mean_norm", "latency over completed requests"
    ratio = "∞" if lo <= 0 else f"{hi / lo:.2g}"
    for k in GOODPUT_KEYS:
        if ci(g, a, k)["mean"] is not None and ci(g, b, k)["mean"] is not None:
            return k, f"goodput-aware latency `{k}` (error rates differ {ratio}×)"
    return "mean_norm", (f"latency over completed requests: the error rates differ {ratio}× "
                         f"(> {ERROR_RATIO:g}×) but this summary has no goodput-aware latency, "
                         f"so the comparison flatters the policy that drops more")


def parts(g: dict, pols: tuple[str, ...]) -> str:
    """The measured reason: each policy's mean/Rand split into network and serving parts
    (Rand's own split first), its error rate and the share it routes off the source cell."""
    def one(p: str) -> str:
        return (f"{'Rand' if p == 'rand' else p} = network {mean(g, p, 'network_norm'):.3f} + "
                f"serving {mean(g, p, 'serving_norm'):.3f}, errors "
                f"{100 * mean(g, p, 'error_rate'):.2g}%, off-source "
                f"{mean(g, p, 'remote_share'):.2f}")
    out = [one("rand")] + [one(p) for p in dict.fromkeys(pols)
                           if p in g["policies"] and p != "rand"]
    return "measured (latency / Rand's mean): " + "; ".join(out)
