"""``lbtheory intelligent``: the Intelligent Router (THEORY §10) — evaluate routers, train DQN."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from ..errors import ParameterError
from ..io import dumps_json, write_json_atomic
from ._help import number, option, spelling

NAME = "intelligent"
HELP = ("Intelligent Router (arXiv 2408.13510, THEORY §10): LLM instances with continuous "
        "batching, KV budget and prefill/decode interference; 'evaluate' compares routers on a "
        "trace, 'train' trains a Double-DQN router.")

#: the default --policy of evaluate (the seed's heuristics); any name of INSTANCE_POLICIES is
#: accepted.
ROUTER_NAMES = ("rr", "jsq", "minmin", "maxcap", "heuristic")
RL_NAMES = ("rl", "wa-rl", "wg-rl")
JSON_KEYS = ("requests", "completed", "preemptions", "latency", "ttft", "router_wait")


def _common(p: argparse.ArgumentParser, requests: int) -> None:
    p.add_argument("trace", nargs="+",
                   help="trace file(s) lbtheory.workloads reads; several are mixed, task = file")
    number(p, "--instances", kind=int, default=4, help="number of instances m")
    number(p, "--requests", kind=int, default=requests, help="requests per run/episode")
    number(p, "--seed", kind=int, default=0, help="seed of requests, arrivals (and training)")
    number(p, "--rate", high=1e9, unit="req/s", default=20.0,
           help="Poisson arrival rate (req/s); 0 = the trace timestamps")
    number(p, "--kv-budget", kind=int, default=32768,
           help="KV-cache budget per instance (tokens)")
    number(p, "--max-batch", kind=int, default=256, help="max requests per iteration")
    number(p, "--epoch", default=0.02, help="router decision epoch (s)")
    p.add_argument("--engine", default="auto",
                   help="instance simulator: auto / compiled (numba), or reference (the Python "
                        "engine: same results, slower)")
    p.add_argument("--json", action="store_true", help="print JSON")


def _predictor_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--predictor", choices=("oracle", "histogram"), default="oracle",
                   help="output lengths routers see: true ones, or the histogram classifier "
                        "fitted on the first half of each trace (requests drawn from the "
                        "second)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register ``lbtheory intelligent evaluate`` and ``lbtheory intelligent train``."""
    sub = parser.add_subparsers(dest="intelligent_command", metavar="ACTION")
    sub.required = True
    from ._help import HelpFormatter as fmt

    trace = "examples/traces/AzureLLMInferenceTrace_code.csv"
    ev = sub.add_parser("evaluate", formatter_class=fmt,
                        epilog=f"example:\n  lbtheory intelligent evaluate {trace} \\\n"
                               f"      {trace.replace('code', 'conv')} --requests 1000 --seed 1",
                        help="serve a trace with each router; latency, TTFT, router wait (s)",
                        description="Serve the same seeded workload with each router and report "
                                    "E2E latency, TTFT, TBT, router wait (s) and preemptions.")
    _common(ev, 2000)
    from ..registry import INSTANCE_POLICIES

    option(ev, "--policy", aliases=("--routers",), default=",".join(ROUTER_NAMES),
           help="router or comma-separated routers, each serving the same workload: "
                    + ", ".join(n for n in INSTANCE_POLICIES if n not in RL_NAMES)
                    + ", or NAME=DIR (NAME one of " + ", ".join(RL_NAMES)
                    + ") for a checkpoint of 'lbtheory intelligent train'")
    _predictor_flag(ev)
    ev.add_argument("--output", default=None, metavar="FILE",
                    help="also write the JSON (all statistics, with a run manifest) to this file")
    ev.add_argument("--out", default=None, metavar="DIR",
                    help=f"also write that JSON to the folder DIR, as DIR/{EVALUATE_FILE} (the "
                         f"old form --out FILE.json, or an existing file, still writes FILE)")
    ev.set_defaults(_action=_evaluate)
    tr = sub.add_parser("train", formatter_class=fmt,
                        epilog=f"example:\n  lbtheory intelligent train {trace} --policy wg-rl "
                               f"--episodes 2 --requests 200 --out out/wg-rl\n  lbtheory "
                               f"intelligent evaluate {trace} --policy rr,wg-rl=out/wg-rl",
                        help="train a Double-DQN router (rl, wa-rl, wg-rl); saves params + config",
                        description="Train a Double-DQN router on seeded episodes of the trace "
                                    "mix; writes params.eqx, config.json, history.json to --out.")
    _common(tr, 300)
    option(tr, "--policy", aliases=("--router",), default="wg-rl",
           help="the RL router to train, one of " + ", ".join(RL_NAMES) + " (rl: no guidance; "
                "wa-rl: static mixing penalty; wg-rl: annealed)")
    tr.add_argument("--reading", default="hurl",
                    help="λ_k of wg-rl: hurl = 1 − exp(−β k) (guidance vanishes); literal = "
                         "exp(−β k) (THEORY §10 ambiguity)")
    number(tr, "--episodes", kind=int, default=20, help="training episodes")
    number(tr, "--lr", default=3e-4, help="Adam learning rate")
    number(tr, "--eps-decay-steps", kind=int, default=None,
           help="env steps of the linear ε-greedy decay (default: half of the "
                "training's decisions)")
    number(tr, "--learning-starts", kind=int, default=500,
           help="transitions before the first update")
    tr.add_argument("--network", default="monotone",
                    help="Q-network: monotone (instance-symmetric, an instance's value cannot "
                         "grow with its load), symmetric (without that constraint) or mlp "
                         "(the seed's plain MLP)")
    number(tr, "--balance-factor", default=1.25,
           help="bounded loads [R]: a full instance holding ⌈c (n + 1) / m⌉ or more of "
                "the n requests on the instances is closed to new requests (c >= 1; "
                "0: no cap; default 1.25)")
    tr.add_argument("--selection", default="validation", choices=["validation", "last"],
                    help="which network to save [R]: validation = the one whose greedy policy "
                         "served held-out episodes (seeds seed + episodes, ...) with the lowest "
                         "mean E2E, checked after every episode; last = after the last episode")
    number(tr, "--validation-episodes", kind=int, default=2,
           help="held-out episodes per validation (with --selection validation)")
    _predictor_flag(tr)
    tr.add_argument("--out", required=True, metavar="DIR",
                    help="checkpoint folder (params.eqx, config.json, history.json, "
                         "manifest.json)")
    tr.set_defaults(_action=_train)


def run(args: argparse.Namespace) -> int:
    """Dispatch to the chosen action."""
    return int(args._action(args))


def _positive_int(value: int, flag: str) -> None:
    from .._checks import check_int

    check_int(value, flag, low=1)


def _parse_routers(spec: str, flag: str = "--policy") -> list[tuple[str, str | None]]:
    """``[(name, checkpoint folder or None)]`` of evaluate's ``--policy`` (``flag``: the
    spelling named in errors)."""
    from ..registry import INSTANCE_POLICIES

    out: list[tuple[str, str | None]] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        name, _, ckpt = item.partition("=")
        if ckpt:
            if name not in RL_NAMES:
                raise ParameterError(f"{flag}: checkpoint router {name!r} must be one of "
                                     f"{', '.join(RL_NAMES)}")
            if not Path(ckpt).is_dir():
                raise ParameterError(f"{flag}: checkpoint directory {ckpt!r} of {name} not "
                                     f"found")
        elif name not in INSTANCE_POLICIES or name in RL_NAMES:
            raise ParameterError(f"{flag}: unknown router {name!r}; expected one of "
                                 f"{', '.join(n for n in INSTANCE_POLICIES if n not in RL_NAMES)}"
                                 f" or NAME=DIR")
        out.append((name, ckpt or None))
    if not out:
        raise ParameterError(f"{flag}: expected at least one router name")
    if len({n for n, _ in out}) != len(out):
        raise ParameterError(f"{flag}: a router is listed twice in {spec!r}")
    return out


def _setup(args: argparse.Namespace):
    """Validated cluster config and traces (raises before anything is written)."""
    from ..intelligent import ClusterConfig
    from ..workloads import read_trace

    _positive_int(args.instances, "--instances")
    _positive_int(args.requests, "--requests")
    _positive_int(args.kv_budget, "--kv-budget")
    _positive_int(args.max_batch, "--max-batch")
    from .._checks import check_option
    from ..intelligent import Engine

    args.engine = check_option(Engine, args.engine, "--engine").value
    if not args.rate >= 0:
        raise ParameterError(f"--rate must be >= 0 (req/s), got {args.rate}")
    traces = [read_trace(p) for p in args.trace]
    cfg = ClusterConfig(n_instances=args.instances, kv_budget_tokens=args.kv_budget,
                        max_batch=args.max_batch, epoch_s=args.epoch)
    return cfg, traces, (args.rate if args.rate > 0 else None)


def _episodes(args: argparse.Namespace, traces: list, rate: float | None, cfg: Any):
    """``(seed -> workload, predict_fn or None)``: with ``--predictor histogram`` the
    histogram classifier (completion-time buckets at the cluster's decode speed,
    :func:`~lbtheory.intelligent.bucket_spec_for`) is fitted on the first half of each trace
    and the workloads are drawn from the second half."""
    from ..workloads import mix_traces

    window = (0.0, 1.0) if args.predictor == "oracle" else (0.5, 1.0)

    def workload_fn(seed: int):
        return mix_traces(traces, n_requests=args.requests, seed=seed, rate_rps=rate,
                          window=window)

    if args.predictor == "oracle":
        return workload_fn, None
    from ..intelligent import bucket_spec_for, fit_length_predictor

    half = sum(len(t) // 2 for t in traces)
    fit = mix_traces(traces, n_requests=max(half, 1), seed=args.seed, window=(0.0, 0.5))
    model = fit_length_predictor(fit.prompt_tokens, fit.task, fit.output_tokens,
                                 spec=bucket_spec_for(workload_fn(args.seed), cfg))

    def predict_fn(wl: Any):
        return model.predict(wl.prompt_tokens, wl.task, wl.output_tokens)[1]
    return workload_fn, predict_fn


def _offered_load(wl: Any, cfg: Any) -> Any:
    """The run's offered load (:func:`lbtheory.intelligent.offered_load`); its overload
    warning goes to stderr (the exit code does not change)."""
    import sys

    from ..intelligent import offered_load

    load = offered_load(wl, cfg)
    if load.warning():
        print(load.warning(), file=sys.stderr)
    return load


def _manifest(args: argparse.Namespace) -> dict[str, Any]:
    from ..io import run_manifest

    config = {k: v for k, v in vars(args).items() if not k.startswith("_")}
    return run_manifest(config, seed=args.seed)


#: the file ``evaluate --out DIR`` writes in DIR.
EVALUATE_FILE = "evaluate.json"


def _results_file(args: argparse.Namespace) -> tuple[Path | None, bool]:
    """Where evaluate writes its JSON with a manifest, checked before any work, and whether it
    came from the old ``--out FILE``: ``--output FILE``; ``--out DIR`` -> ``DIR/evaluate.json``
    (an existing folder is always one); ``--out X`` with X ending in ``.json`` or an existing
    file -> X (the old meaning)."""
    from ..io import check_output_path

    if args.output is not None and args.out is not None:
        raise ParameterError("--output FILE and --out DIR both name the results file: give one")
    if args.output is not None:
        return check_output_path(args.output, what="results", flag="--output"), False
    if args.out is None:
        return None, False
    out = Path(args.out)
    if not out.is_dir() and (out.suffix.lower() == ".json" or out.is_file()):
        return check_output_path(out, what="results", flag="--out"), True
    return check_output_path(out / EVALUATE_FILE, what="results", flag="--out"), False


def _evaluate(args: argparse.Namespace) -> int:
    from ..intelligent import simulate
    from ..registry import make_router

    routers = _parse_routers(args.policy, spelling(args, "policy", "--policy"))
    target, legacy = _results_file(args)
    cfg, traces, rate = _setup(args)
    workload_fn, predict_fn = _episodes(args, traces, rate, cfg)
    wl = workload_fn(args.seed)
    pred = None if predict_fn is None else predict_fn(wl)
    cfg.check_workload(wl)
    built = {name: make_router(name, "instances", **({"checkpoint": ck, "cluster": cfg}
                                                     if ck else {}))
             for name, ck in routers}  # checkpoints are read (and checked) before any run
    load = _offered_load(wl, cfg)
    results: dict[str, Any] = {}
    for name, _ in routers:
        res = simulate(wl, built[name], cfg, predicted_output=pred, seed=args.seed,
                       engine=args.engine)
        results[name] = res.summary()
    if target is not None:
        write_json_atomic(target, {"routers": results, "offered_load": load.as_dict(),
                                   "manifest": _manifest(args)})
        if legacy:
            import sys

            print(f"note: wrote {target}; --out FILE is the old spelling of --output FILE "
                  f"(--out DIR writes DIR/{EVALUATE_FILE})", file=sys.stderr)
    if args.json:
        print(dumps_json({"routers": {n: {k: r[k] for k in JSON_KEYS}
                                      for n, r in results.items()},
                          "offered_load": load.as_dict()}))
        return 0
    tasks = ", ".join(f"{Path(t.path).stem}" for t in traces)
    print(f"{len(wl)} requests ({tasks}), {args.instances} instances, seed {args.seed}")
    print(load.describe())
    print(f"{'router':<10} {'done':>5} {'E2E mean':>9} {'p50':>8} {'p99':>8} {'TTFT':>8} "
          f"{'TBT':>7} {'wait':>7} {'preempt':>7}")
    # the reference of the Δ column: round robin when it ran (the paper's baseline), else the
    # first router; no Δ with a single router (nothing to compare with)
    ref = "rr" if "rr" in results else routers[0][0]
    base = results[ref]["latency"]["mean"]

    def num(v: float, width: int, digits: int) -> str:
        return f"{v:>{width}.{digits}f}s" if v is not None and math.isfinite(v) else \
            f"{'—':>{width + 1}}"

    for n, r in results.items():
        lat = r["latency"]
        delta = "" if len(results) == 1 or n == ref else \
            f"  ({100.0 * (lat['mean'] / base - 1.0):+.1f}% vs {ref})"
        print(f"{n:<10} {r['completed']:>5} {num(lat['mean'], 8, 2)} {num(lat['p50'], 7, 2)} "
              f"{num(lat['p99'], 7, 2)} {num(r['ttft']['mean'], 7, 2)} "
              f"{num(r['tbt']['mean'], 6, 3)} {num(r['router_wait']['mean'], 6, 3)} "
              f"{r['preemptions']:>7}{delta}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..intelligent import DQNConfig, EnvConfig, save_checkpoint, train_dqn

    flag = spelling(args, "policy", "--policy")
    if "," in args.policy:
        raise ParameterError(f"{flag}: train trains one router, got {args.policy!r}; run train "
                             f"once per router")
    if args.policy not in RL_NAMES:
        raise ParameterError(f"{flag}: unknown RL router {args.policy!r}; expected one of "
                             f"{', '.join(RL_NAMES)}")
    if args.reading not in ("hurl", "literal"):
        raise ParameterError(f"--reading must be 'hurl' or 'literal', got {args.reading!r}")
    from ..io import check_output_path

    check_output_path(Path(args.out) / "config.json", what="checkpoint", flag="--out")
    cfg, traces, rate = _setup(args)
    _positive_int(args.episodes, "--episodes")
    _positive_int(args.validation_episodes, "--validation-episodes")
    dq = DQNConfig(router=args.policy, reading=args.reading, episodes=args.episodes,
                   seed=args.seed, lr=args.lr, eps_decay_steps=args.eps_decay_steps,
                   learning_starts=args.learning_starts, network=args.network,
                   selection=args.selection, validation_episodes=args.validation_episodes)
    if args.balance_factor != 0:
        from .._checks import check_real

        check_real(args.balance_factor, "--balance-factor (0: no cap)", low=1.0)
    env = EnvConfig(balance_factor=args.balance_factor or None)
    workload_fn, predict_fn = _episodes(args, traces, rate, cfg)
    n_check = args.episodes + (args.validation_episodes if args.selection == "validation"
                               else 0)
    for k in range(n_check):  # every episode's workload must fit (checked up front)
        cfg.check_workload(workload_fn(args.seed + k))
    load = _offered_load(workload_fn(args.seed), cfg)

    bar = tqdm(total=args.episodes, desc=f"train {args.policy}", unit="episode",
               disable=args.json)

    def progress(k: int, stats: dict[str, float]) -> None:
        post = {"e2e": f"{stats['mean_e2e_s']:.2f}s", "ret": f"{stats['return']:.1f}"}
        if "validation_e2e_s" in stats:
            post["val_e2e"] = f"{stats['validation_e2e_s']:.2f}s"
        bar.set_postfix(post)
        bar.update(1)

    result = train_dqn(workload_fn, cfg, dq, env_config=env, predict_fn=predict_fn,
                       progress=progress, engine=args.engine)
    bar.close()
    out = save_checkpoint(result, args.out)
    write_json_atomic(out / "manifest.json", _manifest(args))
    if args.json:
        print(dumps_json({"out": str(out), "history": result.history,
                          "selected_episode": result.selected_episode,
                          "offered_load": load.as_dict()}))
    else:
        last = result.history[-1]
        print(f"saved {args.policy} ({args.reading}) to {out}: {args.episodes} episodes, last "
              f"mean E2E {last['mean_e2e_s']:.3f} s, return {last['return']:.2f}")
        if "validation_e2e_s" in last:
            k = result.selected_episode
            print(f"kept the network after episode {k} (validation mean E2E "
                  f"{result.history[k]['validation_e2e_s']:.3f} s on {args.validation_episodes}"
                  f" held-out episode(s); --selection last keeps the final one)")
    return 0
