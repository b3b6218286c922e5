"""End to end, as a user runs it: ``lbtheory equilibrium NET_net.tntp --trips NET_trips.tntp``.

Issue 13's acceptance command on seeded synthetic networks of the classic TNTP sizes (Sioux
Falls, Anaheim, Barcelona, Winnipeg, Chicago-Sketch) and the regional ones (Austin,
Chicago-Regional; :func:`lbtheory.games.synthetic.synthetic_network`, written with
:func:`lbtheory.games.tntp.write_tntp`), or on real files (``--tntp NET TRIPS``, repeatable).
Each network runs in a fresh process (file parsing, Wardrop equilibrium, system optimum — warm-
started from the equilibrium —, price of anarchy, JSON), so the wall time includes the
interpreter, imports and loading the cached numba kernels; the peak resident memory is that
process's own (``os.wait4``). Printed per network (medians over ``--repeats``): wall time, peak
RSS, and from the JSON the solver, seconds, relative gap reached and status of both equilibria,
the system optimum / Wardrop seconds ratio and the price of anarchy. ``--gap`` (one value or
several: one CLI run per gap) and ``--threads`` are passed to the CLI. With several gaps each
network ends with issue 24's checks: every gap certified (both equilibria ``optimal`` at a gap
reached ≤ the requested one) and the solve time (Wardrop + system optimum seconds, from the
JSON) never larger at a looser gap than at a tighter one (beyond :func:`noise`). The solver
baselines (bi-conjugate Frank–Wolfe, one thread against two) are in ``benchmarks/bench_tap.py``.

Run: ``.venv/bin/python benchmarks/bench_tntp_cli.py [--sizes anaheim winnipeg] [--gap 1e-10]
[--threads 2]``; the gap sweep: ``--gap 1e-3 1e-4 1e-6 1e-8 1e-10 1e-12``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lbtheory.games.synthetic import OD_DENSITY, SIZES, synthetic_network
from lbtheory.games.tntp import write_tntp

REGIONAL = set(OD_DENSITY)  # the regional sizes: opt in with --sizes


def noise(seconds: float) -> float:
    """The most a looser gap may take against ``seconds`` at a tighter one before it counts as
    slower: 10 % + 0.05 s of timing noise (one run each; the same Clarabel solve at every gap
    varies by ±0.01 s)."""
    return 1.1 * seconds + 0.05


def run_cli(net: Path, trips: Path, gap: float, method: str,
            threads: int | None) -> tuple[float, float, dict | str]:
    """(wall seconds, peak RSS MiB, parsed JSON or the error text) of one CLI process."""
    cmd = [sys.executable, "-m", "lbtheory.cli", "equilibrium", str(net), "--trips", str(trips),
           "--json", "--gap", repr(gap), "--method", method]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    t = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t
        out.seek(0)
        err.seek(0)
        text, etext = out.read().decode(), err.read().decode()
    rss = usage.ru_maxrss / 1024  # KiB on Linux
    if proc.returncode != 0:
        return wall, rss, etext.strip().splitlines()[-1] if etext.strip() else "no output"
    return wall, rss, json.loads(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", default=[s for s in SIZES if s not in REGIONAL],
                    choices=list(SIZES), help="synthetic networks (default: the classic sizes)")
    ap.add_argument("--tntp", nargs=2, action="append", default=[], metavar=("NET", "TRIPS"),
                    help="real TNTP files (repeatable)")
    ap.add_argument("--gap", type=float, nargs="+", default=[1e-10],
                    help="target relative gap(s) (default 1e-10)")
    ap.add_argument("--method", default="auto", help="--method of the CLI (default auto)")
    ap.add_argument("--seed", type=int, default=0, help="synthetic network seed (default 0)")
    ap.add_argument("--threads", type=int, default=None, help="--threads of the CLI")
    ap.add_argument("--repeats", type=int, default=1, help="runs per network (medians)")
    args = ap.parse_args()
    gaps = sorted(args.gap, reverse=True)  # loosest first
    print(f"load average {os.getloadavg()[0]:.2f}; target gap(s) "
          f"{', '.join(f'{g:g}' for g in gaps)}; method {args.method}"
          f"; threads {args.threads or 'CLI default'}")
    print(f"{'network':<18}{'gap':>8}{'wall s':>8}{'RSS MiB':>9}  {'wardrop (solver, s, gap)':<38}"
          f"{'system optimum (solver, s, gap)':<38}{'SO/UE':>7}{'PoA':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for size in args.sizes:
            _, data = synthetic_network(size, seed=args.seed)
            net, trips = Path(tmp) / f"{size}_net.tntp", Path(tmp) / f"{size}_trips.tntp"
            write_tntp(net, trips, data)
            jobs.append((size, net, trips))
        jobs += [(Path(n).name.removesuffix("_net.tntp"), Path(n), Path(t)) for n, t in args.tntp]
        for name, net, trips in jobs:
            solve_s: list[float] = []
            certified = True
            for gap in gaps:
                ok, total = one_gap(name, net, trips, gap, args)
                certified &= ok
                solve_s.append(total)
            if len(gaps) > 1:
                slower = [f"{a:g} ({sa:.2f} s) > {b:g} ({sb:.2f} s)" for a, b, sa, sb
                          in zip(gaps, gaps[1:], solve_s, solve_s[1:]) if sa > noise(sb)]
                print(f"{name}: every gap certified: {'yes' if certified else 'NO'}; a looser "
                      f"gap never slower (Wardrop + optimum s): "
                      f"{'yes' if not slower else 'NO: ' + '; '.join(slower)}", flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    print("goals (issue 24): any --gap in [1e-12, 1e-3] certified; system optimum ≤ 1.5× the "
          "Wardrop time; Austin size to 1e-6 ≤ 90 s and 1e-10 ≤ 300 s on 2 cores; "
          "Chicago-Regional size ≤ 4 GB")


def one_gap(name: str, net: Path, trips: Path, gap: float,
            args: argparse.Namespace) -> tuple[bool, float]:
    """One row: ``--repeats`` CLI runs at ``gap``; (certified, median Wardrop + optimum s)."""
    runs = [run_cli(net, trips, gap, args.method, args.threads) for _ in range(args.repeats)]
    failed = next((r for r in runs if isinstance(r[2], str)), None)
    if failed:
        print(f"{name:<18}{gap:>8.0e}{failed[0]:>8.1f}{failed[1]:>9.0f}  FAILED: {failed[2]}",
              flush=True)
        return False, float("inf")
    wall = statistics.median(r[0] for r in runs)
    rss = max(r[1] for r in runs)
    sec = {key: statistics.median(r[2]["equilibria"][key]["seconds"] for r in runs)
           for key in ("wardrop", "system_optimum")}
    rep = runs[-1][2]
    cols = []
    ok = True
    for key in ("wardrop", "system_optimum"):
        g = rep["equilibria"][key]
        ok &= g["status"] == "optimal" and g["relative_gap"] <= gap
        cols.append(f"{g['solver']}, {sec[key]:.2f}, {g['relative_gap']:.1e} "
                    f"{'ok' if g['status'] == 'optimal' else g['status']}")
    print(f"{name:<18}{gap:>8.0e}{wall:>8.1f}{rss:>9.0f}  {cols[0]:<38}{cols[1]:<38}"
          f"{sec['system_optimum'] / sec['wardrop']:>6.2f}x"
          f"{rep['price_of_anarchy']:>10.6f}", flush=True)
    return ok, sec["wardrop"] + sec["system_optimum"]


if __name__ == "__main__":
    main()
