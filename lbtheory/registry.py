"""The one policy registry: each routing policy's name, constructor, label and the simulators it
runs in, in one table (:data:`POLICIES`).

Three simulators share the router contract of :mod:`lbtheory.routers`:

* ``cells`` — the DLB cell simulator (:mod:`lbtheory.sim`, ``lbtheory simulate``);
* ``instances`` — the Intelligent Router's instance simulator (:mod:`lbtheory.intelligent`,
  ``lbtheory intelligent evaluate``);
* ``replicas`` — BalanceRoute's decode simulator (:mod:`lbtheory.barrier`, ``lbtheory barrier``).

Adding a policy is one entry here (plus its implementation). Constructors are named by dotted
path and imported on first use, so listing names (``lbtheory --help``) imports nothing heavy.
The shared baselines (random, round robin, JSQ, power of two) are one implementation each; an
entry may pass simulator-specific options (the deterministic instance and decode simulators
break JSQ ties by the lowest index, as their published tables did).
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._checks import check_option
from .errors import ParameterError

__all__ = ["Simulator", "PolicyEntry", "POLICIES", "make_router", "policy_names", "policy_entry",
           "label", "POLICY_NAMES", "BARRIER_POLICIES", "INSTANCE_POLICIES", "parse_policies",
           "compare_policies"]


class Simulator(enum.StrEnum):
    """The simulators a policy can run in (module docstring)."""

    CELLS = "cells"
    INSTANCES = "instances"
    REPLICAS = "replicas"


_ALL = frozenset(Simulator)


@dataclasses.dataclass(frozen=True)
class PolicyEntry:
    """One policy: its name, label, constructor and where it runs.

    Attributes:
        name: the CLI name (``--policy`` / ``--policies`` / ``--routers``).
        label: short display label (tables, figure legends).
        factory: ``"module:attribute"`` of the constructor, called with the options.
        simulators: where it runs.
        options: constructor options of this entry, per simulator (``"*"``: every simulator).
        needs: what the constructor also takes from the caller: ``"workload"`` (the requests it
            will route, e.g. BR-H's Oracle reads their true lengths) or ``"checkpoint"``.
        summary: one line for ``--help`` and the README.
    """

    name: str
    label: str
    factory: str
    simulators: frozenset
    options: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    needs: tuple[str, ...] = ()
    summary: str = ""

    def constructor(self) -> Callable[..., Any]:
        """The constructor, imported now."""
        module, _, attr = self.factory.partition(":")
        return getattr(importlib.import_module(module), attr)


def _e(name: str, label: str, factory: str, sims: frozenset | Simulator, summary: str, *,
       options: Mapping[str, Mapping[str, Any]] | None = None,
       needs: tuple[str, ...] = ()) -> PolicyEntry:
    sims = frozenset([sims]) if isinstance(sims, Simulator) else sims
    return PolicyEntry(name, label, factory, sims, options or {}, needs, summary)


_R = "lbtheory.routers"
_CELLS, _INST, _REPL = Simulator.CELLS, Simulator.INSTANCES, Simulator.REPLICAS
_LOWEST = {"instances": {"ties": "lowest"}, "replicas": {"ties": "lowest"}}

#: Every policy, in display order: name -> entry.
POLICIES: dict[str, PolicyEntry] = {e.name: e for e in [
    # DLB's six algorithms (THEORY §3-4): discrete (1) / flow (2) × RIF / latency / gradient
    *[_e(f"{mech}-{short}", f"{mech.capitalize()}-{lab}",
         f"{_R}:{'DiscreteRouter' if mech == 'disc' else 'FlowRouter'}", _CELLS,
         f"DLB {'discrete' if mech == 'disc' else 'flow'} routing on the {cost} cost",
         options={"*": {"cost": cost, "name": f"{mech}-{short}"}})
      for mech in ("disc", "flow")
      for cost, short, lab in (("rif", "rif", "RIF"), ("latency", "lat", "Lat"),
                               ("gradient", "grad", "Grad"))],
    # the shared baselines (one implementation each, every simulator)
    _e("rand", "Rand", f"{_R}:RandomRouter", _ALL,
       "random ∝ capacity weight (DLB's Rand: ∝ replicas)", options={"*": {"name": "rand"}}),
    # DLB's legacy balancer
    _e("mnlb", "MNLB", f"{_R}:MNLBRouter", _CELLS,
       "Google's legacy central LP balancer (re-solved every 10 s)"),
    _e("random", "Random", f"{_R}:RandomRouter", _ALL,
       "uniformly random eligible target (weighted by replicas in cells)",
       options={"*": {"name": "random"}}),
    _e("rr", "RR", f"{_R}:RoundRobinRouter", _ALL, "round robin over eligible targets"),
    _e("p2c", "P2C", f"{_R}:PowerOfDRouter", _ALL,
       "power of two choices on requests in flight"),
    _e("jsq", "JSQ", f"{_R}:JSQRouter", _ALL, "join the shortest queue (requests)",
       options=_LOWEST),
    _e("jsq-tokens", "JSQ-tok", f"{_R}:JSQRouter", frozenset({_INST, _REPL}),
       "least token load (KV / committed tokens): the decode balancer",
       options={"*": {"load": "tokens", "ties": "lowest", "name": "jsq-tokens"}}),
    # BalanceRoute (THEORY §9)
    _e("br0", "BR-0", "lbtheory.barrier:BR0Router", _REPL,
       "BalanceRoute's single-step F-score, two-stage allocation"),
    _e("brh-oracle", "BR-H oracle", "lbtheory.barrier:brh_router", _REPL,
       "BR-H with true remaining lengths", options={"*": {"predictor": "oracle"}},
       needs=("workload",)),
    _e("brh-survival", "BR-H survival", "lbtheory.barrier:brh_router", _REPL,
       "BR-H with the empirical-survival predictor", options={"*": {"predictor": "survival"}},
       needs=("workload",)),
    _e("brh-exactmatch", "BR-H exact", "lbtheory.barrier:brh_router", _REPL,
       "BR-H with the exact-match (prefix hash) predictor",
       options={"*": {"predictor": "exactmatch"}}, needs=("workload",)),
    # the Intelligent Router's heuristics (THEORY §10)
    _e("minmin", "Min-Min", "lbtheory.intelligent:MinMinRouter", _INST,
       "Min-Min over the visible router queue (estimated completion time)"),
    _e("maxcap", "MaxCap", "lbtheory.intelligent:MaxCapacityRouter", _INST,
       "most free batch/KV capacity"),
    _e("heuristic", "Mixing", "lbtheory.intelligent:MixingRouter", _INST,
       "greedy mixing heuristic (argmax r_mix)"),
    # the Intelligent Router's RL routers, from a checkpoint of `lbtheory intelligent train`
    *[_e(k, lab, "lbtheory.intelligent:dqn_router", _INST, f"Double-DQN router ({k}) from a "
         f"checkpoint", options={"*": {"name": k}}, needs=("checkpoint",)) for k, lab in
      (("rl", "RL"), ("wa-rl", "WA-RL"), ("wg-rl", "WG-RL"))],
]}


def policy_entry(name: str, simulator: Simulator | str | None = None) -> PolicyEntry:
    """The entry of ``name`` (checked to run in ``simulator`` when given).

    Raises:
        ParameterError: unknown name, or a policy that does not run in that simulator (the
            message lists the valid names).
    """
    sim = None if simulator is None else check_option(Simulator, simulator, "simulator")
    entry = POLICIES.get(name)
    if entry is None or (sim is not None and sim not in entry.simulators):
        valid = policy_names(sim)
        where = "" if sim is None else f" for the {sim.value} simulator"
        raise ParameterError(f"unknown policy {name!r}{where}; expected one of {list(valid)}")
    return entry


def policy_names(simulator: Simulator | str | None = None) -> tuple[str, ...]:
    """Names of the policies that run in ``simulator`` (all when None), in display order."""
    if simulator is None:
        return tuple(POLICIES)
    sim = check_option(Simulator, simulator, "simulator")
    return tuple(n for n, e in POLICIES.items() if sim in e.simulators)


def label(name: str) -> str:
    """The display label of a policy (the name itself for labels like ``flow-grad@0.5``)."""
    entry = POLICIES.get(name)
    return entry.label if entry is not None else name


def make_router(name: str, simulator: Simulator | str = Simulator.CELLS, *,
                error_aversion: bool = False, affinity: bool = False, **options: Any) -> Any:
    """The router called ``name`` for ``simulator``.

    Args:
        name: a name of :data:`POLICIES` that runs in ``simulator``.
        simulator: ``"cells"`` (default: the DLB simulator), ``"instances"`` or ``"replicas"``.
        error_aversion, affinity: wrap a cells router in DLB's error aversion (§3.4) and, outermost,
            affinity routing (§3.5).
        **options: constructor options (e.g. ``stepsize=`` for flow routers, ``d=`` for p2c,
            ``workload=`` for BR-H, ``checkpoint=`` for the RL routers); they override the
            entry's own.

    Raises:
        ParameterError: unknown name, a policy not available in ``simulator``, wrappers outside
            the cells simulator, or an option the constructor does not take (named).
    """
    sim = check_option(Simulator, simulator, "simulator")
    entry = policy_entry(name, sim)
    if (error_aversion or affinity) and sim is not Simulator.CELLS:
        raise ParameterError("error_aversion / affinity wrap DLB cell routers only "
                             f"(simulator='cells'), got simulator={sim.value!r}")
    kw = {**entry.options.get("*", {}), **entry.options.get(sim.value, {}), **options}
    missing = [k for k in entry.needs if k not in kw]
    if missing:
        raise ParameterError(f"policy {name!r} needs {', '.join(missing)}= (e.g. "
                             f"make_router({name!r}, {sim.value!r}, {missing[0]}=...))")
    try:
        router = entry.constructor()(**kw)
    except TypeError as exc:
        raise ParameterError(f"policy {name!r}: bad option(s) {sorted(options)}: {exc}") from None
    if error_aversion or affinity:
        from .routers import AffinityRouter, ErrorAversion

        router = ErrorAversion(router) if error_aversion else router
        router = AffinityRouter(router) if affinity else router
    return router


def parse_policies(text: str, simulator: Simulator | str) -> list[str]:
    """Split a comma-separated policy list and check every name (distinct, known there).

    Raises:
        ParameterError: an empty, unknown or repeated name.
    """
    names = [t.strip() for t in str(text).split(",")]
    if not names or any(not n for n in names):
        raise ParameterError(f"expected a comma-separated list of policy names, got {text!r}")
    for n in names:
        policy_entry(n, simulator)
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ParameterError(f"policy {dup[0]!r} is listed twice in {text!r}")
    return names


#: The policy names of ``lbtheory simulate --policy`` (the CLI contract), in display order.
POLICY_NAMES: tuple[str, ...] = policy_names(Simulator.CELLS)
#: The policy names of ``lbtheory barrier --policies``.
BARRIER_POLICIES: tuple[str, ...] = policy_names(Simulator.REPLICAS)
#: The router names of ``lbtheory intelligent evaluate --routers``.
INSTANCE_POLICIES: tuple[str, ...] = policy_names(Simulator.INSTANCES)


def compare_policies(workload: Any, policies: Sequence[str] | str, *, config: Any,
                     seed: int = 0, horizon: int = 80, gamma: float = 1.0,
                     params: Any = None) -> dict[str, Any]:
    """Run every decode-slot policy on ``workload`` in BalanceRoute's decode simulator; results
    (:class:`~lbtheory.barrier.DecodeResult`) keyed by policy name.

    Args:
        workload: the requests.
        policies: names (or a comma-separated string) from :data:`BARRIER_POLICIES`.
        config: :class:`~lbtheory.barrier.DecodeConfig` (replicas, slots, window, time scale,
            step model).
        seed: seed of the routers' random draws.
        horizon, gamma: BR-H horizon (steps) and discount.
        params: BR two-stage settings (:class:`~lbtheory.barrier.BRParams`).

    Raises:
        ParameterError: an unknown or repeated policy name (checked before anything runs).
    """
    from .barrier import simulate_decode

    text = policies if isinstance(policies, str) else ",".join(policies)
    names = parse_policies(text, Simulator.REPLICAS)
    out: dict[str, Any] = {}
    for name in names:
        opts: dict[str, Any] = {}
        if name.startswith("br"):
            opts = {"params": params} if params is not None else {}
        if "workload" in POLICIES[name].needs:
            opts.update(workload=workload, horizon=horizon, gamma=gamma)
        router = make_router(name, Simulator.REPLICAS, **opts)
        out[name] = simulate_decode(workload, router, config=config, seed=seed)
    return out
