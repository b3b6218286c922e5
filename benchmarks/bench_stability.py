"""Benchmark of the exact stepsize analysis (issue 5).

1. Time of ``critical_stepsize`` on full meshes of n = 4, 16, 64 cells (equilibrium solved once
   outside the timing; the linearisation is timed separately), as medians and as ratios to the
   symmetric two-cell case measured in the same run.
2. Convergence of the spectral abscissa with the number of Chebyshev nodes, without Newton
   refinement, against the Newton-refined value (n = 16 mesh at 1.1× its critical stepsize) and
   against the closed form (symmetric two-cell, THEORY §7.5).

Run: ``.venv/bin/python benchmarks/bench_stability.py [--sizes 4 16 64] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import os

# one BLAS thread: the eigenproblems are small, and threaded OpenBLAS on a shared machine is
# up to ~100x slower (measured); must be set before numpy is imported
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from lbtheory.equilibrium import solve_equilibrium  # noqa: E402
from lbtheory.instances import full_mesh, symmetric_two_cell  # noqa: E402
from lbtheory.stability import (  # noqa: E402
    critical_stepsize,
    linearise,
    rightmost_roots,
    spectrum,
    symmetric_threshold,
)
from lbtheory.stats import median_wall_time  # noqa: E402


def timing_table(sizes: list[int], repeats: int) -> None:
    base_net = symmetric_two_cell()
    base_eq = solve_equilibrium(base_net, "gradient")
    t_base, _ = median_wall_time(lambda: critical_stepsize(base_net, equilibrium=base_eq),
                                 repeats)
    print(f"baseline: symmetric two-cell critical_stepsize, median {t_base * 1e3:.1f} ms")
    print("| n | DDE dim | delays | linearise (s) | critical_stepsize (s) | ratio to baseline "
          "| full spectra | eta_crit | rule | crit/rule |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        net = full_mesh(n, seed=0)
        eq = solve_equilibrium(net, "gradient")
        reps = repeats if n <= 16 else 1
        t_lin, lin = median_wall_time(
            lambda net=net, eq=eq: linearise(net, "gradient", equilibrium=eq), reps)
        t_crit, cr = median_wall_time(
            lambda net=net, lin=lin: critical_stepsize(net, linearisation=lin), reps)
        print(f"| {n} | {lin.fixed.dim} | {lin.fixed.delays.size} | {t_lin:.3f} | {t_crit:.3f} "
              f"| {t_crit / t_base:.1f} | {cr.evaluations} | {cr.critical_stepsize:.6g} "
              f"| {cr.empirical_rule:.6g} | {cr.rule_ratio:.3f} |")


def convergence_table(nodes: list[int]) -> None:
    net = full_mesh(16, seed=0)
    lin = linearise(net, "gradient")
    c = 1.1 * critical_stepsize(net, linearisation=lin).critical_stepsize
    ref = spectrum(lin, c, n_nodes=32).abscissa
    sym = symmetric_two_cell()
    slin = linearise(sym, "gradient")
    closed = symmetric_threshold(sym, slin.point)
    sdde = slin.dde(closed.eta_crit)  # at the closed-form threshold the abscissa is exactly 0
    print(f"\nreference abscissa (n = 16 mesh, 1.1 x critical, Newton-refined): {ref:.12e} /s")
    print("| nodes | abscissa error, n=16 mesh (no Newton) | abscissa at closed-form threshold, "
          "two-cell (no Newton) | with Newton, two-cell |")
    print("|---|---|---|---|")
    for N in nodes:
        raw = rightmost_roots(lin.dde(c), n_nodes=N, refine=False,
                              structural_zeros=lin.structural_zeros).abscissa
        s_raw = rightmost_roots(sdde, n_nodes=N, refine=False).abscissa
        s_ref = rightmost_roots(sdde, n_nodes=N).abscissa
        print(f"| {N} | {abs(raw - ref):.2e} | {abs(s_raw):.2e} | {abs(s_ref):.2e} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--sizes", type=int, nargs="+", default=[4, 16, 64])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--nodes", type=int, nargs="+", default=[4, 6, 8, 12, 16, 24, 32])
    args = p.parse_args()
    np.set_printoptions(precision=4)
    timing_table(args.sizes, args.repeats)
    convergence_table(args.nodes)


if __name__ == "__main__":
    main()
