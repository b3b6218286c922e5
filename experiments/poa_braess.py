"""Price of anarchy of the Braess network as a function of demand (parametric curve).

Run:  .venv/bin/python experiments/poa_braess.py [--quick]

Writes ``experiments/results/poa_braess/poa_vs_demand.json`` (atomically) with its config and
:func:`lbtheory.io.run_manifest`: for each total demand d, the Wardrop and system-optimum total
travel times, the Wardrop total without the bridge 3 → 4, and PoA = TSTT(UE)/TSTT(SO). Link costs
are those of the TNTP Braess example (10x, 50 + x, 50 + x, 10 + x, 10x); at d = 6 the known values
are 552, 498 and PoA ≈ 1.1084 (THEORY §5).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from lbtheory.games import braess, price_of_anarchy, wardrop_equilibrium
from lbtheory.io import run_manifest, write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "poa_braess"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="13 demand levels instead of 121")
    args = ap.parse_args()
    demands = np.linspace(0.25, 30.25, 13 if args.quick else 121)
    rows = []
    for d in demands:
        poa = price_of_anarchy(braess(float(d)))
        ue, so = poa.wardrop, poa.optimum
        nb = wardrop_equilibrium(braess(float(d), bridge=False))
        rows.append({"demand": float(d), "wardrop_tstt": ue.total_travel_time,
                     "system_optimum_tstt": so.total_travel_time,
                     "no_bridge_tstt": nb.total_travel_time,
                     "bridge_flow": float(ue.arc_flow[3]),
                     "price_of_anarchy": poa.ratio,
                     "max_relative_gap": max(ue.relative_gap, so.relative_gap, nb.relative_gap)})
    best = max(rows, key=lambda r: r["price_of_anarchy"])
    print(f"max PoA {best['price_of_anarchy']:.6f} at demand {best['demand']:.3f}; "
          f"max relative gap {max(r['max_relative_gap'] for r in rows):.2e}")
    conf = {"network": "Braess (TNTP example costs)", "demands": demands.tolist(),
            "solver": "CLARABEL (lbtheory.games)"}
    write_json_atomic(OUT / "poa_vs_demand.json",
                      {"config": conf, "manifest": run_manifest(conf), "results": rows})


if __name__ == "__main__":
    main()
