"""lbtheory against TAP-B as a user runs each: a fresh process per network, gap and thread count.

lbtheory runs ``lbtheory equilibrium NET --trips TRIPS --objective wardrop --method bush --gap G
--threads T --json`` (one process: interpreter, imports, reading, solving, JSON); printed per
run: the process wall and CPU time, the solve seconds and outer iterations of the JSON, the rest
(start-up + reading = wall − solve), and the relative gap reached. With ``TAPB_BIN`` (the
``bin/tap`` of spartalab/tap-b built with ``make release``; this script builds nothing) TAP-B
runs on the same files, gap and threads through a parameters file (``<CONVERGENCE GAP>``,
``<NUMBER OF THREADS>``), and its process wall time stands next to lbtheory's with the ratio.
Without it, the TAP-B figures measured in issue 37 on this machine (real TNTP files, one run
each) are printed as reference figures, labelled so.

Networks: the pairs under ``examples/tntp/`` (``*_net.tntp`` with a ``*_trips*.tntp``) and under
each ``--tntp DIR``, and synthetic ones written to a temporary folder with ``--synthetic``:
``winnipeg`` and ``chicago_sketch`` (the sizes of the real networks,
:func:`lbtheory.games.synthetic.synthetic_network`) and ``austin_size`` (7,388 nodes, 18,960
links, every node a zone — the real Austin has 7,388 / 18,961 / 7,388 — and a sparse
distance-decaying trip table of ~2·10⁵ OD pairs like Austin's 2.9 MB AM-peak file: density
0.004, decay 0.3 [R]: chosen before running, to match the real file's size and locality).

Run (machine otherwise idle, or ``nice``): ``.venv/bin/python benchmarks/bench_tntp_vs_tapb.py
--synthetic winnipeg chicago_sketch --gap 1e-6 1e-10 --threads 1 2`` and ``--synthetic
austin_size --gap 1e-6 --threads 1 2``; with TAP-B: ``TAPB_BIN=~/tap-b/bin/tap ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: TAP-B process wall (its own solve seconds) from issue 37's table: real TNTP files, this
#: machine, one run each — (network, gap, threads) -> (wall s, solve s).
TAPB_REFERENCE = {
    ("Winnipeg", 1e-6, 1): (0.81, 0.60), ("Chicago-Sketch", 1e-6, 1): (1.21, 0.87),
    ("Chicago-Sketch", 1e-6, 2): (1.12, 0.77), ("Winnipeg", 1e-10, 1): (1.43, 1.14),
    ("Chicago-Sketch", 1e-10, 1): (2.25, 1.68), ("Austin", 1e-6, 1): (149.3, 108.5),
    ("Austin", 1e-6, 2): (98.8, 58.5),
}

#: the real network each synthetic one stands for (for the reference figures)
STANDS_FOR = {"winnipeg": "Winnipeg", "chicago_sketch": "Chicago-Sketch",
              "ChicagoSketch": "Chicago-Sketch", "austin_size": "Austin"}

#: synthetic networks: name -> (size, keyword arguments of synthetic_network)
SYNTHETIC = {"winnipeg": ("winnipeg", {}), "chicago_sketch": ("chicago_sketch", {}),
             "austin_size": ((7388, 18960, 7388), {"density": 0.004, "decay": 0.3})}


def pairs(folder: Path) -> list[tuple[str, Path, Path]]:
    """(name, net, trips) of every ``*_net.tntp`` with a trips file beside it."""
    out = []
    for net in sorted(folder.rglob("*_net.tntp")):
        stem = net.name[: -len("_net.tntp")]
        trips = sorted(net.parent.glob(f"{stem}_trips*.tntp"))
        if trips:
            out.append((stem, net, trips[0]))
    return out


def synthetic(names: list[str], folder: Path) -> list[tuple[str, Path, Path]]:
    from lbtheory.games.synthetic import synthetic_network
    from lbtheory.games.tntp import write_tntp

    out = []
    for name in names:
        size, kw = SYNTHETIC[name]
        _, data = synthetic_network(size, seed=0, **kw)
        net, trips = folder / f"{name}_net.tntp", folder / f"{name}_trips.tntp"
        write_tntp(net, trips, data)
        out.append((name, net, trips))
    return out


def timed(cmd: list[str], **kw) -> tuple[float, float, int, str, str]:
    """(wall s, CPU s = user + system of the process, exit code, stdout, stderr) of ``cmd``.
    The CPU time is the figure to read on a shared machine: contention stretches the wall
    time, hardly the CPU time (one thread: CPU ≈ wall on an idle machine)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, **kw)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        out.seek(0)
        err.seek(0)
        return (wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status),
                out.read().decode(), err.read().decode())


def run_lbtheory(net: Path, trips: Path, gap: float, threads: int,
                 objective: str = "wardrop") -> dict:
    cmd = [sys.executable, "-m", "lbtheory.cli", "equilibrium", str(net), "--trips", str(trips),
           "--objective", objective, "--method", "bush", "--gap", repr(gap), "--threads",
           str(threads), "--json"]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    wall, cpu, code, out, err = timed(cmd, env=env)
    if code != 0:
        return {"wall": wall, "error": err.strip().splitlines()[-1:]}
    rep = json.loads(out)
    eqs = rep["equilibria"]
    solve = sum(e["seconds"] for e in eqs.values())
    return {"wall": wall, "cpu": cpu, "solve": solve,
            "iterations": [e["iterations"] for e in eqs.values()],
            "gap": [rep["relative_gaps"][k] for k in eqs],
            "status": [e["status"] for e in eqs.values()]}


def run_tapb(binary: str, net: Path, trips: Path, gap: float, threads: int,
             folder: Path) -> dict:
    params = folder / "tapb_parameters.txt"
    params.write_text(f"<NETWORK FILE> {net}\n<TRIPS FILE> {trips}\n<CONVERGENCE GAP> {gap!r}\n"
                      f"<MAX RUN TIME> 600\n<NUMBER OF THREADS> {threads}\n"
                      f"<FLOWS FILE> {folder / 'tapb_flows.txt'}\n<DATA PATH> {folder}/\n")
    wall, cpu, code, out, err = timed([binary, str(params)], cwd=folder)
    gaps = re.findall(r"[Gg]ap[^0-9\-]*([0-9.]+e[-+]?[0-9]+)", out + err)
    return {"wall": wall, "cpu": cpu, "rc": code, "gap": float(gaps[-1]) if gaps else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tntp", type=Path, action="append", default=[],
                    help="a folder of TNTP networks (repeatable)")
    ap.add_argument("--synthetic", nargs="*", default=[], choices=sorted(SYNTHETIC))
    ap.add_argument("--no-examples", action="store_true", help="skip examples/tntp/")
    ap.add_argument("--gap", type=float, nargs="+", default=[1e-6, 1e-10])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--objective", default="wardrop",
                    choices=["wardrop", "system-optimum", "both"])
    args = ap.parse_args()
    tapb = os.environ.get("TAPB_BIN")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        nets = [] if args.no_examples else pairs(ROOT / "examples" / "tntp")
        for d in args.tntp:
            nets += pairs(d)
        nets += synthetic(args.synthetic, folder)
        print(f"{'network':16} {'gap':>6} {'thr':>3} | {'wall s':>7} {'cpu s':>7} "
              f"{'solve s':>7} {'start+read':>10} {'iters':>6} {'reached':>16} | TAP-B")
        for name, net, trips in nets:
            for gap in args.gap:
                for threads in args.threads:
                    r = run_lbtheory(net, trips, gap, threads, args.objective)
                    if "error" in r:
                        print(f"{name:16} {gap:6.0e} {threads:3d} | error {r['error']}")
                        continue
                    if tapb:
                        b = run_tapb(tapb, net, trips, gap, threads, folder)
                        ref = (f"{b['wall']:.2f} s (cpu {b['cpu']:.2f}), gap {b['gap']}, "
                               f"rc {b['rc']}; "
                               f"ratio {r['wall'] / b['wall']:.2f}")
                    else:
                        key = (STANDS_FOR.get(name, name), gap, threads)
                        ref = ("issue-37 reference, real files: "
                               f"{TAPB_REFERENCE[key][0]:.2f} s ({TAPB_REFERENCE[key][1]:.2f})"
                               if key in TAPB_REFERENCE else "-")
                    gaps = "/".join(f"{g:.1e}" for g in r["gap"])
                    its = "/".join(str(i) for i in r["iterations"])
                    print(f"{name:16} {gap:6.0e} {threads:3d} | {r['wall']:7.2f} "
                          f"{r['cpu']:7.2f} {r['solve']:7.2f} {r['wall'] - r['solve']:10.2f} "
                          f"{its:>6} "
                          f"{gaps:>16} | {ref}", flush=True)


if __name__ == "__main__":
    main()
