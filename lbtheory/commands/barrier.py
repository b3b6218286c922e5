"""``lbtheory barrier``: replay a request trace on G barrier-synchronised decode replicas."""

from __future__ import annotations

import argparse

from ..barrier import BRParams, DecodeConfig, StepTimeModel, summary_table
from ..io import dumps_json
from ..registry import BARRIER_POLICIES, compare_policies, parse_policies
from ..workloads import read_trace
from ._help import number, option, spelling

NAME = "barrier"
HELP = ("BalanceRoute step-barrier simulation: mean imbalance, idle fraction, throughput and TPOT "
        "per routing policy on a request trace.")

DEFAULT_POLICIES = "random,rr,p2c,jsq,br0,brh-oracle,brh-survival"


#: Longest BR-H horizon ``--horizon`` takes (steps) [R]: 12,500× the paper's H = 80; its
#: discount table is one float per step (1e12 asked for 7.28 TiB).
MAX_HORIZON = 10**6


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``lbtheory barrier``."""
    parser.add_argument("trace", help="CSV/JSONL trace (Azure TIMESTAMP,ContextTokens,"
                                      "GeneratedTokens, arrival/prompt/output columns, or "
                                      "Mooncake JSONL with hash_ids)")
    number(parser, "--replicas", "-G", kind=int, default=8, help="decode replicas G")
    option(parser, "--policy", aliases=("--policies",), default=DEFAULT_POLICIES,
           help=f"policy or comma-separated policies, each run on the same trace, from: "
                f"{', '.join(BARRIER_POLICIES)}")
    number(parser, "--slots", kind=int, default=32, help="decode slots per replica")
    number(parser, "--window", kind=int, default=128,
           help="saturation replay: prompt-pool size (requests)")
    number(parser, "--time-scale", default=None,
           help="replay timestamps compressed by this factor (default: saturation "
                "replay, the pool always full)")
    number(parser, "--kv-budget", kind=int, default=None,
           help="KV-cache tokens per replica that admission respects (default: none)")
    number(parser, "--requests", aliases=("--limit",), kind=int, default=None, metavar="N",
           help="use the first N requests of the trace (N ≥ 1; default: all)")
    number(parser, "--seed", kind=int, default=0, help="seed of the random baselines")
    number(parser, "--horizon", kind=int, default=80, high=MAX_HORIZON,
           help="BR-H horizon H (steps)")
    number(parser, "--gamma", default=1.0, help="BR-H discount")
    number(parser, "--s-greedy", kind=int, default=None, help="Stage-1 threshold (default G)")
    number(parser, "--r-max", kind=int, default=4, help="Stage-2 candidates")
    number(parser, "--max-wait", kind=int, default=2000,
           help="age guard in ticks (negative: off)")
    number(parser, "--step-a", low=0.0, high=1.0, unit="s per token",
           default=StepTimeModel.a_s_per_token,
           help="step time a (s per bottleneck KV token)")
    number(parser, "--step-b", low=0.0, high=100.0, unit="s", default=StepTimeModel.b_s,
           help="step time b (s)")
    parser.add_argument("--unsorted", choices=("sort", "error"), default="sort",
                        help="unsorted timestamps: sort with a warning (default) or refuse")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """Run every policy and print a table (or JSON with ``policies.{name}.{...}``)."""
    if args.requests is not None and args.requests < 1:  # refused before the trace is read
        from ..errors import ParameterError

        raise ParameterError(f"{spelling(args, 'requests', '--requests')} must be an integer "
                             f"≥ 1 (requests), got {args.requests}")
    names = parse_policies(args.policy, "replicas")
    cfg = DecodeConfig(replicas=args.replicas, slots=args.slots, window=args.window,
                       time_scale=args.time_scale, kv_budget=args.kv_budget,
                       step_model=StepTimeModel(args.step_a, args.step_b))
    params = BRParams(s_greedy=args.s_greedy, r_max=args.r_max,
                      max_wait=None if args.max_wait < 0 else args.max_wait)
    trace = read_trace(args.trace, on_unsorted=args.unsorted)
    if args.requests is not None:
        trace = trace.head(args.requests)
    out = summary_table(compare_policies(trace, names, config=cfg, seed=args.seed,
                                         horizon=args.horizon, gamma=args.gamma, params=params))
    if args.json:
        print(dumps_json({"trace": str(args.trace), "requests": len(trace),
                          "config": cfg.to_dict() | {"seed": args.seed, "horizon": args.horizon,
                                                     "gamma": args.gamma,
                                                     "s_greedy": params.s_greedy,
                                                     "r_max": params.r_max,
                                                     "max_wait": params.max_wait},
                          "policies": out}))
        return 0
    print(f"{len(trace)} requests, G={cfg.replicas}, {cfg.slots} slots/replica, "
          + ("saturation replay" if cfg.time_scale is None else f"time scale {cfg.time_scale:g}"))
    print(f"{'policy':<15}{'imbalance (tok)':>16}{'idle':>8}{'tok/s':>10}"
          f"{'TPOT p50 (ms)':>15}{'TPOT p95 (ms)':>15}")
    for name, s in out.items():
        print(f"{name:<15}{s['mean_imbalance']:>16,.0f}{s['idle_fraction']:>8.3f}"
              f"{s['throughput']:>10,.0f}{s['tpot_p50']:>15.1f}{s['tpot_p95']:>15.1f}")
    return 0
