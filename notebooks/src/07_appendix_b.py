CELLS = [
("md", """
# 07 — DLB Appendix B: the published claims, re-measured

The Appendix-B experiments of DLB (THEORY §11; issue 12) run on the sweep runner
(`lbtheory.sweep`) as the group `appendix-b`: seven experiments, each a grid of *cells*; one cell
is one Appendix-B scenario × trial on which **every policy routes the same arrivals**
(`appendix_b_cell` in `experiments/_appendix_b_protocol.py`, the protocol module the experiment owns). Latency is normalised by Rand's on those arrivals.

| # | experiment | sweep |
|---|---|---|
| 1 | `appendix-b-baseline` | all policies at 80 % utilisation (Fig 6-style) |
| 2 | `appendix-b-utilisation` | utilisation 20–95 % (Fig 7-style) |
| 3 | `appendix-b-noise` | latency-model noise ε (Fig 10-style) |
| 4 | `appendix-b-y` | processing-time scaling y (rocks vs sand) |
| 5 | `appendix-b-events` | demand burst and capacity outage (time series) |
| 6 | `appendix-b-homogeneous` | homogeneous cells, small delays |
| 7 | `appendix-b-eta` | flow routers at factor × η_crit (exact, fluid model) vs DLB's rule |

This notebook **only reads cached results** from `experiments/results/appendix-b-*/`
(`lbtheory sweep appendix-b --profile reduced` or `make experiments`). When they are missing
(as in CI) it runs the `quick` profile (3-cell scenarios, 5 simulated s) through the runner
into a temporary folder first — a smoke run whose numbers mean nothing. Every table and figure
names the profile it comes from; DLB's protocol is the `full` profile
(10 scenarios × 5 trials × 600 s).
"""),
("code", """
%matplotlib inline
import importlib.util
import json
import tempfile
from pathlib import Path

from IPython.display import Image, Markdown, display

from lbtheory.sweep import load_experiments, run_sweep

ROOT = Path("..").resolve()
RESULTS = ROOT / "experiments" / "results"
EXPERIMENTS = load_experiments(ROOT / "experiments" / "appendix_b.py")
have = all((RESULTS / e.name / "summary.json").is_file() for e in EXPERIMENTS)
if not have:  # CI: the quick smoke profile, serial, into a temporary folder
    RESULTS = Path(tempfile.mkdtemp(prefix="appb_"))
    for e in EXPERIMENTS:
        run_sweep(e, profile="quick", backend="serial", out_dir=RESULTS, progress=False)
S = {e.name.removeprefix("appendix-b-"): json.loads((RESULTS / e.name / "summary.json").read_text())
     for e in EXPERIMENTS}
for name, s in S.items():
    print(f"{name:>12}: profile {s['profile']:>7}, {s['cells']:3d} grid cells, scenarios "
          f"{s['scenarios']}, trials {s['trials']}, {s['duration_s']} simulated s per run")
"""),
("md", """
## Experiment 1 — baseline at 80 % utilisation
Mean over cells of policy / Rand (same arrivals) with a 95 % Student-t interval
(`lbtheory.stats.mean_ci`) over scenario × trial.
"""),
("code", """
def ci(c):
    return f"{c['mean']:.3f}" + (f" [{c['lo']:.3f},{c['hi']:.3f}]" if c["lo"] is not None
                                 else " (n=1)")


def table(s, level_key):
    for g in sorted(s["groups"], key=lambda g: g["level"][level_key]):
        print(f"{level_key} = {g['level'][level_key]:g} ({g['cells']} cells)")
        print(f"{'policy':>10} {'mean/Rand':>22} {'p90/Rand':>22} {'errors %':>9}")
        for p, v in sorted(g["policies"].items(), key=lambda kv: kv[1]["mean_norm"]["mean"]):
            print(f"{p:>10} {ci(v['mean_norm']):>22} {ci(v['p90_norm']):>22} "
                  f"{100 * v['error_rate']['mean']:9.2f}")

table(S["baseline"], "utilisation")
"""),
("md", """
## Figures
Drawn by `paper_figures/appendix_b.py` from the same summaries (here into a temporary folder).
"""),
("code", """
spec = importlib.util.spec_from_file_location("appb_figs", ROOT / "paper_figures" / "appendix_b.py")
figs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(figs)
FIG = Path(tempfile.mkdtemp(prefix="appb_fig_"))
figs.main(RESULTS, FIG)
for name in ("baseline", "utilisation", "noise", "y", "events", "homogeneous", "eta"):
    display(Image(filename=str(FIG / f"appendix_b_{name}.png"), width=900))
"""),
("md", """
## Experiment 7 — does the fluid model's critical stepsize predict oscillation?
For each scenario, `lbtheory.stability.critical_stepsize` gives the exact η_crit of the flow
dynamics linearised at the scenario's equilibrium; the flow routers then run at
factor × η_crit and at DLB's rule (η = 0.01 / mean one-way delay [R]), on the same arrivals.
The oscillation measure is the RMS deviation of the routing weights from their linear trend after
the first third of the run (probability units).
"""),
("code", """
pts = S["eta"]["points"]
print(f"{'policy':>10} {'stepsize':>10} {'η/η_crit':>9} {'oscillation':>11} {'mean/Rand':>9}")
for p in sorted(pts, key=lambda p: (p["policy"], p["scenario"], p["eta_over_crit"] or 0)):
    print(f"{p['policy']:>10} {p['rule']:>10} {p['eta_over_crit'] or float('nan'):9.3g} "
          f"{p['osc_weights'] if p['osc_weights'] is not None else float('nan'):11.3f} "
          f"{p['mean_norm']:9.3f}")
"""),
("md", """
## Claims table
`experiments/results/claims.md` is written by every collect step of the group (verdict rules
fixed in advance, stated in the file). For the profile used here:
"""),
("code", """
display(Markdown((RESULTS / "claims.md").read_text()))
"""),
("md", """
## Reading
* The reduced profile (the one run for this repository on 2 shared cores) has 1 trial, 60 or
  30 simulated seconds and 3–10 scenarios: its intervals are wide and its verdicts provisional.
  The `full` profile is DLB's protocol; `lbtheory sweep appendix-b --scheduler tcp://host:8786`
  runs it on a Dask cluster, resumably.
* Scenario ingredients marked [R] in THEORY §11.1 (region RTTs, token times and counts, queue
  limit, MNLB period, the flow-stepsize constant, the homogeneous-case reading) are
  reconstructions; none was tuned towards the paper's numbers.
"""),
]
