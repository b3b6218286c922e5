"""Benchmark of the delayed fluid model (issue 4): numpy loop vs JAX single vs JAX batched.

Same model, same run: full-mesh networks of n = 4, 16, 64 hyperbolic cells, one-way delays drawn
uniformly from 5–50 ms (whole milliseconds), dt = 1 ms, flow routing with the gradient cost.
Baseline: a straightforward numpy loop of the same Heun scheme (ring-buffer history, the numpy
driver of the same Michelot projection, the same cost functions), timed on a shorter horizon and
reported in steps/s. Ratios are against that baseline measured in the same run; times are medians.

    .venv/bin/python benchmarks/bench_fluid.py            # full run (prints a Markdown table)
    .venv/bin/python benchmarks/bench_fluid.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from lbtheory.costs import arc_costs  # noqa: E402
from lbtheory.fluid import fluid_sensitivity  # noqa: E402
from lbtheory.fluid._batch import _run_batch, choose_batch_size  # noqa: E402
from lbtheory.fluid._model import _run, run_compiled  # noqa: E402
from lbtheory.fluid._setup import build  # noqa: E402
from lbtheory.instances import full_mesh  # noqa: E402
from lbtheory.simplex import project_simplex  # noqa: E402

DT = 1e-3
ETA = 0.5
COST = "gradient"


def mesh(n: int, seed: int = 0):
    """Full mesh with whole-millisecond one-way delays U{5..50} ms on every arc."""
    net = full_mesh(n, seed=seed)
    rng = np.random.default_rng(seed + 1)
    return net.with_delays(rng.integers(5, 51, size=(n, n)) * 1e-3)


def numpy_loop(net, t1: float) -> np.ndarray:
    """The baseline: the same Heun scheme as lbtheory.fluid._integrator, as a plain numpy loop."""
    n, lam, tau, mask = net.n, net.arrival_rates, net.delays, net.adjacency
    bank, reps = net.models, net.replicas
    d = np.round(tau / DT).astype(int)
    L = d.max() + 1
    N, x = np.zeros(n), net.uniform_routing()
    HN, Hx = np.tile(N, (L, 1)), np.tile(x, (L, 1, 1))
    rows, cols = np.indices((n, n))
    eta = np.full(n, ETA)
    for k in range(round(t1 / DT)):
        HN[k % L], Hx[k % L] = N, x
        c1 = arc_costs(COST, bank, HN[(k - d) % L, cols], reps, tau)
        in1 = (lam[:, None] * Hx[(k - d) % L, rows, cols]).sum(0)
        mu = bank.rate(N)
        Nt = np.maximum(N + DT * (in1 - mu), 0.0)
        c2 = arc_costs(COST, bank, np.where(d == 0, Nt[None, :], HN[(k + 1 - d) % L, cols]),
                       reps, tau)
        xn = project_simplex(x - DT * eta[:, None] * 0.5 * (c1 + c2), mask)
        in2 = (lam[:, None] * np.where(d == 0, xn, Hx[(k + 1 - d) % L, rows, cols])).sum(0)
        avail = N + 0.5 * DT * (in1 + in2)
        N = avail - np.minimum(0.5 * DT * (mu + bank.rate(Nt)), avail)
        x = xn
    return N


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _setup(net, t1: float, save_every: int | None = None):
    K = round(t1 / DT)
    return build(net, mechanism="flow", cost=COST, stepsize=ETA, t1=t1, dt=DT, x0=None, N0=None,
                 save_every=save_every or K, delay_mode="snap")


def bench_single(net, t1: float, repeats: int) -> dict:
    params, cfg, _ = _setup(net, t1)
    t0 = time.perf_counter()
    compiled = _run.lower(params, cfg=cfg).compile()
    compile_s = time.perf_counter() - t0

    def go():
        jax.block_until_ready(compiled(params))

    go()
    run_s = _median_time(go, repeats)
    return {"compile_s": compile_s, "run_s": run_s, "steps_per_s": round(t1 / DT) / run_s}


def bench_batch(nets, t1: float, strategy: str, repeats: int) -> dict:
    built = [_setup(nt, t1) for nt in nets]
    cfg = built[0][1]
    params = jax.tree_util.tree_map(lambda *ls: jnp.stack([jnp.asarray(v) for v in ls]),
                                    *[p for p, _, _ in built])
    bs = choose_batch_size(cfg.n, len(nets), strategy)

    def go():
        jax.block_until_ready(_run_batch(params, cfg, bs))

    t0 = time.perf_counter()
    go()
    first = time.perf_counter() - t0
    run_s = _median_time(go, repeats)
    sps = len(nets) * round(t1 / DT) / run_s
    return {"strategy": strategy, "batch_size": bs, "compile_s": first - run_s, "run_s": run_s,
            "scenario_steps_per_s": sps}


def bench_grad(net, t1: float, repeats: int) -> dict:
    fwd = bench_single(net, t1, repeats)["run_s"]
    kw = dict(stepsize=ETA, cost=COST, t1=t1, dt=DT)
    out = {"forward_s": fwd}
    for label, wrt, mode in (("d/dη forward", ("stepsize",), "forward"),
                             ("d/dη reverse", ("stepsize",), "reverse"),
                             ("all params reverse", ("stepsize", "arrival_rates", "delays",
                                                    "service"), "reverse")):
        def go(wrt=wrt, mode=mode):
            fluid_sensitivity(net, wrt=wrt, mode=mode, throw=False, **kw)

        go()
        out[label] = _median_time(go, repeats) / fwd
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", default="4,16,64")
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    t_np = {4: 2.0, 16: 1.0, 64: 0.5}
    t_jax = {4: 60.0, 16: 60.0, 64: 20.0}
    t_batch = {4: 10.0, 16: 5.0, 64: 2.0}
    reps = 3
    if args.quick:
        t_np, t_jax, t_batch, reps = ({k: 0.2 for k in t_np}, {k: 2.0 for k in t_jax},
                                      {k: 0.5 for k in t_batch}, 1)
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, devices {jax.devices()}")
    rows = []
    for n in sizes:
        net = mesh(n)
        t0 = time.perf_counter()
        N_np = numpy_loop(net, t_np[n])
        np_s = time.perf_counter() - t0
        np_sps = round(t_np[n] / DT) / np_s
        params, cfg, _ = _setup(net, t_np[n])
        N_jax = np.asarray(run_compiled(params, cfg)[1]["workload"])
        same = float(np.max(np.abs(N_jax - N_np)))
        single = bench_single(net, t_jax[n], reps)
        nets = [net.with_demand_scale(s) for s in np.linspace(0.8, 1.0, args.batch)]
        batches = {s: bench_batch(nets, t_batch[n], s, reps if n < 64 else 1)
                   for s in ("vmap", "map", "chunked", "auto")}
        rows.append((n, np_sps, single, batches, same))
        print(f"n={n}: numpy {np_sps:,.0f} steps/s | JAX single {single['steps_per_s']:,.0f} "
              f"steps/s ({single['steps_per_s'] / np_sps:.1f}×), compile "
              f"{single['compile_s']:.2f} s | max|N_jax − N_numpy| = {same:.1e}")
        for s, b in batches.items():
            print(f"    batch {args.batch} {s:<8} (batch_size {b['batch_size']}): "
                  f"{b['scenario_steps_per_s']:,.0f} scenario-steps/s = "
                  f"{b['scenario_steps_per_s'] / single['steps_per_s']:.2f}× single")
    n0 = sizes[min(1, len(sizes) - 1)]
    net = mesh(n0)
    for t1 in ((0.5, 1.0, 2.0) if args.quick else (15.0, 30.0, 60.0)):
        r = bench_single(net, t1, reps)
        print(f"horizon n={n0}, t1={t1:g}s: {r['run_s']:.2f} s ({r['steps_per_s']:,.0f} steps/s)")
    for n in sizes[:2]:
        g = bench_grad(mesh(n), 2.0 if args.quick else 10.0, reps)
        print(f"sensitivities n={n}: forward pass {g['forward_s']:.2f} s; cost ratios "
              + ", ".join(f"{k} {v:.2f}×" for k, v in g.items() if k != "forward_s"))
    print("\n| n | numpy steps/s | JAX steps/s | × numpy | compile s | best batched "
          "scenario-steps/s (strategy) | × single | auto × single |")
    print("|---|---|---|---|---|---|---|---|")
    for n, np_sps, single, batches, _ in rows:
        best = max(batches.values(), key=lambda b: b["scenario_steps_per_s"])
        auto = batches["auto"]["scenario_steps_per_s"] / single["steps_per_s"]
        print(f"| {n} | {np_sps:,.0f} | {single['steps_per_s']:,.0f} | "
              f"{single['steps_per_s'] / np_sps:.1f} | {single['compile_s']:.2f} | "
              f"{best['scenario_steps_per_s']:,.0f} ({best['strategy']}) | "
              f"{best['scenario_steps_per_s'] / single['steps_per_s']:.2f} | {auto:.2f} |")


if __name__ == "__main__":
    main()
