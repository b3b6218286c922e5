"""Price of anarchy of the Braess network as a function of demand (parametric curve).

Run:  .venv/bin/lbtheory sweep poa-braess [--quick]
      (or .venv/bin/python experiments/poa_braess.py [--quick])

One sweep cell per total demand d (cached, resumable; see :mod:`lbtheory.sweep`). Writes
``experiments/results/poa-braess/poa_vs_demand.json`` (atomically) with its config and
:func:`lbtheory.io.run_manifest`: for each d, the Wardrop and system-optimum total travel times,
the Wardrop total without the bridge 3 → 4, and PoA = TSTT(UE)/TSTT(SO). Link costs are those of
the TNTP Braess example (10x, 50 + x, 50 + x, 10 + x, 10x); at d = 6 the known values are 552, 498
and PoA ≈ 1.1084 (THEORY §5).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from lbtheory.io import run_manifest, write_json_atomic
from lbtheory.sweep import CellField, Experiment, script_main

PROFILE_POINTS = {"quick": 13, "full": 121}


def grid(profile: str) -> list[dict]:
    """One config per demand level: 13 (quick) or 121 (full) points on [0.25, 30.25]."""
    return [{"demand": float(d)} for d in np.linspace(0.25, 30.25, PROFILE_POINTS[profile])]


def cell(config: dict) -> dict:
    """Wardrop / optimum / no-bridge totals at one demand (unitless time and flow)."""
    from lbtheory.equilibrium import price_of_anarchy, solve_wardrop
    from lbtheory.games import braess

    d = config["demand"]
    poa = price_of_anarchy(braess(d))
    ue, so = poa.wardrop, poa.optimum
    nb = solve_wardrop(braess(d, bridge=False))
    return {"demand": d, "wardrop_tstt": ue.total_travel_time,
            "system_optimum_tstt": so.total_travel_time,
            "no_bridge_tstt": nb.total_travel_time,
            "bridge_flow": float(ue.arc_flow[3]),
            "price_of_anarchy": poa.ratio,
            "max_relative_gap": max(ue.relative_gap, so.relative_gap, nb.relative_gap)}


def collect(rows: list, out_dir: Path, profile: str) -> None:
    """Write ``poa_vs_demand.json``: config, manifest and one result row per demand."""
    conf = {"network": "Braess (TNTP example costs)", "demands": [c["demand"] for c, _ in rows],
            "solver": "CLARABEL (lbtheory.games)", "profile": profile}
    write_json_atomic(out_dir / "poa_vs_demand.json",
                      {"config": conf, "manifest": run_manifest(conf),
                       "results": [r for _, r in rows]})


#: What a cell's result must hold (checked on every read of the cache): travel times are
#: non-negative, and with affine costs the price of anarchy lies in [1, 4/3] (Roughgarden and
#: Tardos's bound; 1e-6 slack for the certified relative gap).
CELL_SCHEMA = {
    "demand": CellField("real", low=0.0),
    "wardrop_tstt": CellField("real", low=0.0),
    "system_optimum_tstt": CellField("real", low=0.0),
    "no_bridge_tstt": CellField("real", low=0.0),
    "bridge_flow": CellField("real", low=-1e-6),
    "price_of_anarchy": CellField("real", low=1.0 - 1e-6, high=4.0 / 3.0 + 1e-6),
    "max_relative_gap": CellField("real", low=0.0, high=1.0),
}

EXPERIMENT = Experiment(name="poa-braess", description="Braess network: price of anarchy vs "
                        "total demand (Wardrop, system optimum, no bridge)",
                        grid=grid, cell=cell, collect=collect, cell_schema=CELL_SCHEMA)

if __name__ == "__main__":
    sys.exit(script_main(EXPERIMENT))
