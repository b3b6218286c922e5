"""``lbtheory intelligent``: the Intelligent Router (THEORY §10) — evaluate routers, train DQN."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from ..errors import ParameterError
from ..io import dumps_json, write_json_atomic
from ._help import number, option, spelling
from ._intelligent_ckpt import MAX_EPOCH_S, checkpoint_cluster

NAME = "intelligent"
HELP = ("Intelligent Router (arXiv 2408.13510, THEORY §10): LLM instances with continuous "
        "batching, KV budget and prefill/decode interference; 'evaluate' compares routers on a "
        "trace, 'train' trains a Double-DQN router.")

#: the default --policy of evaluate (the seed's heuristics); any name of INSTANCE_POLICIES is
#: accepted.
ROUTER_NAMES = ("rr", "jsq", "minmin", "maxcap", "heuristic")
RL_NAMES = ("rl", "wa-rl", "wg-rl")
JSON_KEYS = ("requests", "completed", "preemptions", "latency", "ttft", "router_wait", "tbt",
             "preemptions_per_request")
#: keys ``evaluate --json`` adds when they apply (``--preemption swap``)
OPTIONAL_KEYS = ("swaps_per_request",)
#: evaluation-only headroom routers (lbtheory.intelligent._headroom): not in the registry,
#: they drive the simulator's state themselves.
HEADROOM_NAMES = ("clairvoyant", "oracle-defer")
SETUP_NAMES = ("k4", "k5", "k5-chunked", "k7", "k8")
#: the values of lbtheory.intelligent.Admission (not imported here: the CLI starts without numba)
ADMISSIONS = ("fcfs", "spf", "lwl", "bin-packing")


def _common(p: argparse.ArgumentParser, requests: int) -> None:
    p.add_argument("trace", nargs="*",
                   help="trace file(s) lbtheory.workloads reads; several are mixed, task = file; "
                        "with --setup they replace the setup's synthetic task mix (requests "
                        "drawn from the traces at the setup's rate)")
    p.add_argument("--setup", default=None, choices=SETUP_NAMES,
                   help="a Knowl setup of the Intelligent Router paper on the vLLM-faithful "
                        "instance model: its cluster, task mix, rate, requests and operating "
                        "point; --instances/--requests/--rate/--kv-budget/--max-batch override it")
    p.add_argument("--instance-model", default=None, choices=("legacy", "vllm"),
                   help="instance model: legacy (token-exact KV, mixed prefill/decode "
                        "iterations; the default with traces) or vllm (16-token blocks, "
                        "watermark, prompts first; the default with --setup)")
    number(p, "--instances", kind=int, default=4, help="number of instances m")
    number(p, "--requests", kind=int, default=requests,
           help="requests per run/episode (with --setup: the setup's unless given)")
    number(p, "--seed", kind=int, default=0, help="seed of requests, arrivals (and training)")
    number(p, "--rate", high=1e9, unit="req/s", default=20.0,
           help="Poisson arrival rate (req/s); 0 = the trace timestamps")
    number(p, "--kv-budget", kind=int, default=32768,
           help="KV-cache budget per instance (tokens; with --setup: the setup's unless given)")
    number(p, "--max-batch", kind=int, default=256, help="max requests per iteration")
    number(p, "--epoch", default=0.02, help="router decision epoch (s)")
    p.add_argument("--chunked-prefill", action="store_true",
                   help="split prefills into chunks (the iteration's token budget covers "
                        "decodes too); evaluate takes it, and the other cluster settings, from "
                        "a checkpoint unless given")
    option(p, "--admission", default="fcfs", choices=ADMISSIONS,
           help="the instances' batcher (admission order): fcfs (vLLM's), spf (shortest prompt "
                "first), lwl (least work left: fewest predicted output tokens first) or "
                "bin-packing (first-fit decreasing by prompt + predicted output); preempted "
                "requests resume first under every one")
    option(p, "--preemption", default="recompute", choices=("recompute", "swap"),
           help="how a vLLM-model instance preempts when its KV blocks run out: recompute "
                "(vLLM's choice for a single sequence: the KV is discarded and prefilled "
                "again) or swap (the blocks go to the CPU swap space and back over PCIe; [R] "
                "4 GiB, 12 / 25 GB/s on V100 / A100; with or without chunked prefill)")
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
                    + ", the evaluation-only headroom routers " + ", ".join(HEADROOM_NAMES)
                    + " (true lengths and future arrivals; slow: decisions × instances × one "
                    "episode), or NAME=DIR (NAME one of " + ", ".join(RL_NAMES)
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
    number(tr, "--balance-factor", default=None,
           help="bounded loads [R]: a full instance holding ⌈c (n + 1) / m⌉ or more of "
                "the n requests on the instances is closed to new requests (c >= 1; "
                "0: no cap; default 1.25, none with --action-space paper)")
    tr.add_argument("--action-space", default=None, choices=("paper", "capped"),
                    help="paper: deferral (a = m) always available (a 30 s guard ends an "
                         "always-waiting episode [R]), no bounded loads (the default with "
                         "--setup); capped [R]: waiting only while every "
                         "instance is full, at most 2 s, bounded loads 1.25 (the default with "
                         "traces)")
    tr.add_argument("--selection", default="validation", choices=["validation", "last"],
                    help="which network to save [R]: validation = the one whose greedy policy "
                         "served held-out episodes (seeds seed + episodes, ...) with the lowest "
                         "mean E2E, checked after every episode; last = after the last episode")
    number(tr, "--validation-episodes", kind=int, default=2,
           help="held-out episodes per validation (with --selection validation)")
    _predictor_flag(tr)
    tr.add_argument("--out", required=True, metavar="DIR",
                    help="checkpoint folder (params.eqx, config.json, history.json, "
                         "manifest.json), written atomically; absent or empty unless "
                         "--overwrite")
    tr.add_argument("--overwrite", action="store_true",
                    help="replace the checkpoint already in --out (only a checkpoint: a folder "
                         "holding anything else is never replaced); the old one stays intact "
                         "until the new one is complete")
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
        elif name in HEADROOM_NAMES:
            pass
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


def _knowl(args: argparse.Namespace) -> Any:
    """The ``--setup`` (a :class:`~lbtheory.intelligent._setups.KnowlSetup`) or None; fills
    the unset numeric options from it (or from the legacy defaults)."""
    from ..intelligent._setups import SETUPS

    st = SETUPS[args.setup] if args.setup else None
    if st is None and not args.trace:
        raise ParameterError("give trace file(s) or --setup NAME")
    if args.instance_model is None:
        args.instance_model = "vllm" if st else "legacy"
    if st is not None:  # the setup's values unless the option was given
        given = getattr(args, "_spelling", {})  # the options the user typed
        for k, v in {"instances": st.instances, "requests": st.requests, "rate": st.rate_rps,
                     "kv_budget": None}.items():
            if k not in given:
                setattr(args, k, v)
    return st


def _setup(args: argparse.Namespace):
    """Validated cluster config and traces (raises before anything is written)."""
    from ..intelligent import ClusterConfig
    from ..workloads import read_trace

    st = _knowl(args)
    _positive_int(args.instances, "--instances")
    _positive_int(args.requests, "--requests")
    if args.kv_budget is not None:
        _positive_int(args.kv_budget, "--kv-budget")
    _positive_int(args.max_batch, "--max-batch")
    from .._checks import check_option
    from ..intelligent import Engine

    args.engine = check_option(Engine, args.engine, "--engine").value
    from .._checks import check_real

    check_real(args.rate, "--rate", unit="req/s", low=0.0)
    check_real(args.epoch, "--epoch", unit="s", low=0.0, high=MAX_EPOCH_S, low_open=True)
    traces = [read_trace(p) for p in args.trace]
    over = {"max_batch": args.max_batch, "epoch_s": args.epoch, "admission": args.admission}
    if args.kv_budget is not None:
        over["kv_budget_tokens"] = args.kv_budget
    if args.chunked_prefill:  # (a setup's own chunked prefill stays unless asked for)
        over["chunked_prefill"] = True
    if args.preemption != "recompute":
        if args.instance_model != "vllm":
            raise ParameterError("--preemption swap needs the vLLM instance model "
                                 "(--instance-model vllm or --setup NAME); the legacy model "
                                 "recomputes")
        over["preemption"] = args.preemption
    if st is not None:
        import dataclasses

        st = dataclasses.replace(st, instances=args.instances, rate_rps=args.rate or st.rate_rps)
        cfg = st.cluster(**over) if args.instance_model == "vllm" else ClusterConfig(
            n_instances=args.instances, timing=st.cluster().timing,
            **({"kv_budget_tokens": st.cluster().kv_budget_tokens} | over))
        args._knowl = st
    elif args.instance_model == "vllm":
        from ..intelligent._setups import vllm_cluster

        cfg = vllm_cluster("v100", args.instances, **over)
    else:
        cfg = ClusterConfig(n_instances=args.instances, **over)
    return cfg, traces, (args.rate if args.rate > 0 else None)


def _episodes(args: argparse.Namespace, traces: list, rate: float | None, cfg: Any):
    """``(seed -> workload, predict_fn or None)``: with ``--predictor histogram`` the
    histogram classifier (completion-time buckets at the cluster's decode speed,
    :func:`~lbtheory.intelligent.bucket_spec_for`) is fitted on the first half of each trace
    and the workloads are drawn from the second half."""
    from ..workloads import mix_traces

    window = (0.0, 1.0) if args.predictor == "oracle" else (0.5, 1.0)
    st = getattr(args, "_knowl", None)
    total = sum(len(t) for t in traces)
    if traces and args.predictor == "oracle" and args.requests > total:
        raise ParameterError(f"--requests {args.requests} exceeds the {total} request(s) the "
                             f"trace(s) hold")

    def workload_fn(seed: int):
        if st is not None and not traces:
            from ..intelligent._setups import setup_workload

            return setup_workload(st, seed, args.requests)
        return mix_traces(traces, n_requests=args.requests, seed=seed, rate_rps=rate,
                          window=window)

    if args.predictor == "oracle":
        return workload_fn, None
    from ..intelligent import bucket_spec_for, fit_length_predictor

    if st is not None and not traces:  # fitted on a separate sample of the setup's mix
        from ..intelligent._setups import setup_workload

        fit = setup_workload(st, 10_000, 20_000)
    else:
        _check_histogram_split(args, traces)
        half = sum(len(t) // 2 for t in traces)
        fit = mix_traces(traces, n_requests=max(half, 1), seed=args.seed, window=(0.0, 0.5))
    model = fit_length_predictor(fit.prompt_tokens, fit.task, fit.output_tokens,
                                 spec=bucket_spec_for(workload_fn(args.seed), cfg))

    def predict_fn(wl: Any):
        return model.predict(wl.prompt_tokens, wl.task, wl.output_tokens)[1]
    return workload_fn, predict_fn


def _check_histogram_split(args: argparse.Namespace, traces: list) -> None:
    """``--predictor histogram`` splits each trace in halves (by position, as
    :func:`~lbtheory.workloads.mix_traces`'s ``window``): the classifier is fitted on the first
    halves and the ``--requests`` of a run are drawn from the second; both must hold enough."""
    first = sum(round(0.5 * len(t)) for t in traces)
    second = sum(len(t) - round(0.5 * len(t)) for t in traces)
    if first < 1 or second < args.requests:
        total = sum(len(t) for t in traces)
        raise ParameterError(
            f"--predictor histogram fits its classifier on the first half of each trace and "
            f"draws the --requests {args.requests} of a run from the second half: the traces "
            f"hold {total} request(s), {first} in their first halves and {second} in their "
            f"second; expected at least 1 and {args.requests} (fewer --requests, a longer "
            f"trace, or --predictor oracle)")


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
    cfg = checkpoint_cluster(args, cfg, routers, spelling(args, "policy", "--policy"))
    workload_fn, predict_fn = _episodes(args, traces, rate, cfg)
    wl = workload_fn(args.seed)
    pred = None if predict_fn is None else predict_fn(wl)
    cfg.check_workload(wl)
    built = {name: None if name in HEADROOM_NAMES else
             make_router(name, "instances", **({"checkpoint": ck, "cluster": cfg} if ck else {}))
             for name, ck in routers}  # checkpoints are read (and checked) before any run
    load = _offered_load(wl, cfg)
    results: dict[str, Any] = {}
    for name, _ in routers:
        if name in HEADROOM_NAMES:
            from ..intelligent._headroom import simulate_headroom

            res = simulate_headroom(wl, cfg, name, predicted_output=pred)
        else:
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
        print(dumps_json({"routers": {n: {k: r[k] for k in JSON_KEYS + OPTIONAL_KEYS if k in r}
                                      for n, r in results.items()},
                          "offered_load": load.as_dict()}))
        return 0
    tasks = ", ".join(f"{Path(t.path).stem}" for t in traces)
    tasks = (f"{tasks} on setup {args.setup}" if tasks else f"setup {args.setup}") \
        if args.setup else tasks
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
    _check_out(args)
    bar = _Progress(args)  # on screen before any slow step (reading traces, checks, calibration)
    try:
        return _train_run(args, bar)
    finally:
        bar.close()


def _check_out(args: argparse.Namespace) -> None:
    """Refuse ``--out`` before any work: a checkpoint there without ``--overwrite``, or
    anything that is not a checkpoint (never replaced)."""
    from ..intelligent._checkpoint import checkpoint_state

    try:
        state = checkpoint_state(args.out)
    except ParameterError as exc:
        raise ParameterError(f"--out: {exc}") from None
    if state == "checkpoint" and not args.overwrite:
        raise ParameterError(f"--out: {args.out} already holds a checkpoint; pass --overwrite "
                             f"to replace it (or give another folder)")


class _Progress:
    """The train command's progress bar on stderr (tqdm; off with ``--json`` or when stderr is
    not a terminal): episodes done, and within an episode what is running (setup, decisions,
    validation episode j/n), refreshed at most 5 times a second."""

    def __init__(self, args: argparse.Namespace) -> None:
        import sys
        import time

        from tqdm import tqdm

        self._time = time.monotonic
        self._last = 0.0
        self.bar = tqdm(total=args.episodes if isinstance(args.episodes, int) else None,
                        desc=f"train {args.policy}", unit="episode", file=sys.stderr,
                        disable=True if args.json else None, dynamic_ncols=True)
        self.phase("reading traces")

    def phase(self, text: str, force: bool = True) -> None:
        now = self._time()
        if force or now - self._last >= 0.2:
            self._last = now
            self.bar.set_postfix_str(text)

    def tick(self, phase: str, done: int, total: int) -> None:
        self.phase(f"validation episode {done + 1}/{total}" if phase == "validation" else
                   f"{done:,} decisions", force=phase == "validation" and done == 0)

    def episode(self, k: int, stats: dict[str, float]) -> None:
        post = f"e2e {stats['mean_e2e_s']:.2f}s, return {stats['return']:.1f}"
        if "validation_e2e_s" in stats:
            post += f", validation e2e {stats['validation_e2e_s']:.2f}s"
        self.bar.set_postfix_str(post, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _train_run(args: argparse.Namespace, bar: _Progress) -> int:
    from ..intelligent import DQNConfig, EnvConfig, save_checkpoint, train_dqn

    cfg, traces, rate = _setup(args)
    _positive_int(args.episodes, "--episodes")
    _positive_int(args.validation_episodes, "--validation-episodes")
    dq = DQNConfig(router=args.policy, reading=args.reading, episodes=args.episodes,
                   seed=args.seed, lr=args.lr, eps_decay_steps=args.eps_decay_steps,
                   learning_starts=args.learning_starts, network=args.network,
                   selection=args.selection, validation_episodes=args.validation_episodes)
    paper = (args.action_space or ("paper" if args.setup else "capped")) == "paper"
    if args.balance_factor is None:
        args.balance_factor = 0.0 if paper else 1.25
    if args.balance_factor != 0:
        from .._checks import check_real

        check_real(args.balance_factor, "--balance-factor (0: no cap)", low=1.0)
    # the paper's action space: waiting whenever; 30 s is only a guard that ends episodes of a
    # policy that always waits [R] (the paper's routers wait 0.6-4.4 s on average)
    env = EnvConfig(balance_factor=args.balance_factor or None,
                    **({"wait_only_when_full": False, "max_wait_s": 30.0} if paper else {}))
    bar.phase("checking the workloads")
    workload_fn, predict_fn = _episodes(args, traces, rate, cfg)
    n_check = args.episodes + (args.validation_episodes if args.selection == "validation"
                               else 0)
    _check_workloads(cfg, traces, workload_fn, args.seed, n_check)
    load = _offered_load(workload_fn(args.seed), cfg)
    bar.phase("calibrating the environment")
    result = train_dqn(workload_fn, cfg, dq, env_config=env, predict_fn=predict_fn,
                       progress=bar.episode, engine=args.engine, tick=bar.tick)
    _check_trained(result)
    bar.phase("saving the checkpoint")
    out = save_checkpoint(result, args.out, overwrite=args.overwrite, run=_manifest(args))
    bar.close()
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


def _check_trained(result: Any) -> None:
    """Refuse to save a network with non-finite parameters (a diverged training that kept
    no earlier network): it would route as if trained; nothing is written."""
    import jax
    import numpy as np

    leaves = jax.tree_util.tree_leaves(result.net)
    if all(np.all(np.isfinite(np.asarray(x))) for x in leaves if hasattr(x, "dtype")):
        return
    from ..errors import SolverError

    k = result.history[-1]["episode"] if result.history else 0
    raise SolverError(f"training diverged (non-finite loss or parameters at episode {k}) and "
                      f"kept no finite network: nothing saved; try a smaller --lr")


def _check_workloads(cfg: Any, traces: list, workload_fn: Any, seed: int, n: int) -> None:
    """Every episode's workload must fit one instance's KV budget, checked before training:
    once on the traces when every request of them fits (episodes draw from them), else
    episode by episode (the first that does not fit is named)."""
    import numpy as np

    need = max((int(np.max(np.maximum(t.prompt_tokens, 1) + np.maximum(t.output_tokens, 1)))
                for t in traces if len(t)), default=0)
    if need <= cfg.kv_budget_tokens:
        return
    for k in range(n):
        cfg.check_workload(workload_fn(seed + k))
