"""The one policy registry: each routing policy whole — its CLI name, label, plot colour,
router constructor, the simulators it runs in and, per simulator, its compiled kernel or an
explicit "Python only" mark — in one table (:data:`POLICIES`).

Three simulators share the router contract of :mod:`lbtheory.routers`:

* ``cells`` — the DLB cell simulator (:mod:`lbtheory.sim`, ``lbtheory simulate``);
* ``instances`` — the Intelligent Router's instance simulator (:mod:`lbtheory.intelligent`,
  ``lbtheory intelligent evaluate``);
* ``replicas`` — BalanceRoute's decode simulator (:mod:`lbtheory.barrier`, ``lbtheory barrier``).

Adding a policy is one entry (plus its implementation): inside the package a line of
:data:`POLICIES`, outside it :func:`register_policy` (``examples/custom_policy.py``). Plot colours
(:func:`lbtheory.plotting.policy_color`) and the README's policy table
(``tools/policy_table.py``) are read from here.

The registry is data: constructors and kernels are named by dotted path (``"module:attr"``) and
imported on first use, so it imports no simulator (every layer may read it) and listing names
(``lbtheory --help``) imports nothing heavy. The shared baselines (random, round robin, JSQ,
power of two) are one implementation each; an entry may pass simulator-specific options (the
deterministic instance and decode simulators break JSQ ties by the lowest index, as their
published tables did).

A compiled engine finds a router's kernel here by the router's **exact** type (a subclass may
change ``route``, which the kernel would not see, so it runs on the reference engine): the
entry's ``kernels[simulator]`` is ``fn(router, setting)`` (``setting``: the cell
:class:`~lbtheory.sim.Scenario` or the :class:`~lbtheory.intelligent.ClusterConfig`) answering
a :class:`~lbtheory.routers.KernelSpec` (the one user-kernel contract), the engine's built-in
parameters, or a sentence saying why not this time.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._checks import check_option
from .errors import ParameterError

__all__ = ["Simulator", "PolicyEntry", "POLICIES", "PYTHON_ONLY", "make_router", "policy_names",
           "policy_entry", "label", "colour", "register_policy", "unregister_policy",
           "compiled_kernel", "POLICY_NAMES", "BARRIER_POLICIES", "INSTANCE_POLICIES",
           "parse_policies", "compare_policies"]


class Simulator(enum.StrEnum):
    """The simulators a policy can run in (module docstring)."""

    CELLS = "cells"
    INSTANCES = "instances"
    REPLICAS = "replicas"


_ALL = frozenset(Simulator)
#: The mark of a policy that runs only on a simulator's reference (Python) engine.
PYTHON_ONLY = "python-only"
_NEEDS = frozenset({"workload", "checkpoint"})
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_COLOUR = re.compile(r"^#[0-9a-fA-F]{6}$")


def _resolve(ref: str | Callable[..., Any]) -> Any:
    """``"module:attr"`` imported now (a callable is returned as it is)."""
    if callable(ref):
        return ref
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclasses.dataclass(frozen=True)
class PolicyEntry:
    """One policy, whole: its name, label, colour, constructor, where it runs and how.

    Attributes:
        name: the CLI name (``--policy`` of every simulating subcommand).
        label: short display label (tables, figure legends).
        factory: the constructor, ``"module:attribute"`` or a callable, called with the options.
        simulators: where it runs.
        options: constructor options of this entry, per simulator (``"*"``: every simulator).
        needs: what the constructor also takes from the caller: ``"workload"`` (the requests it
            will route, e.g. BR-H's Oracle reads their true lengths) or ``"checkpoint"``.
        summary: one line for ``--help`` and the README.
        colour: its colour in every figure (``"#rrggbb"``).
        kernels: per simulator (value of :class:`Simulator`), its compiled form —
            ``fn(router, setting)`` or its ``"module:attr"`` (module docstring) — or
            :data:`PYTHON_ONLY`.
    """

    name: str
    label: str
    factory: str | Callable[..., Any]
    simulators: frozenset
    options: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    needs: tuple[str, ...] = ()
    summary: str = ""
    colour: str = ""
    kernels: Mapping[str, str | Callable[..., Any]] = dataclasses.field(default_factory=dict)

    def constructor(self) -> Callable[..., Any]:
        """The constructor, imported now."""
        return _resolve(self.factory)

    def compiled(self, simulator: Simulator | str) -> bool:
        """True when the policy has a compiled kernel in ``simulator``."""
        sim = check_option(Simulator, simulator, "simulator")
        return self.kernels.get(sim.value, PYTHON_ONLY) != PYTHON_ONLY

    def kernel(self, simulator: Simulator | str) -> Callable[..., Any] | None:
        """Its kernel function for ``simulator``, imported now (None: Python only)."""
        sim = check_option(Simulator, simulator, "simulator")
        return _resolve(self.kernels[sim.value]) if self.compiled(sim) else None


def _e(name: str, label: str, factory: str, sims: frozenset | Simulator, summary: str,
       colour: str, *, options: Mapping[str, Mapping[str, Any]] | None = None,
       needs: tuple[str, ...] = (), **kernels: str) -> PolicyEntry:
    sims = frozenset([sims]) if isinstance(sims, Simulator) else sims
    marks = {s.value: kernels.get(s.value, PYTHON_ONLY) for s in Simulator if s in sims}
    return PolicyEntry(name, label, factory, sims, options or {}, needs, summary, colour, marks)


_R = "lbtheory.routers"
_CP = "lbtheory.sim._kernel_plan:plan_"         # the DLB cell engine's kernels
_IK = "lbtheory.intelligent._compiled:spec_"    # the instance engine's kernels
_CELLS, _INST, _REPL = Simulator.CELLS, Simulator.INSTANCES, Simulator.REPLICAS
_LOWEST = {"instances": {"ties": "lowest"}, "replicas": {"ties": "lowest"}}
#: DLB's six routers take their cost signal's equilibrium colour (latency = Wardrop red,
#: gradient = optimum green, RIF blue), discrete ones paler.
_DLB_COLOURS = {("flow", "lat"): "#b2182b", ("flow", "grad"): "#1b7837",
                ("flow", "rif"): "#2166ac", ("disc", "lat"): "#ff9896",
                ("disc", "grad"): "#98df8a", ("disc", "rif"): "#aec7e8"}

#: Every policy, in display order: name -> entry. The shared baselines take greys and browns,
#: BalanceRoute's and the Intelligent Router's policies the remaining hues; no two share one.
POLICIES: dict[str, PolicyEntry] = {e.name: e for e in [
    # DLB's six algorithms (THEORY §3-4): discrete (1) / flow (2) × RIF / latency / gradient
    *[_e(f"{mech}-{short}", f"{mech.capitalize()}-{lab}",
         f"{_R}:{'DiscreteRouter' if mech == 'disc' else 'FlowRouter'}", _CELLS,
         f"DLB {'discrete' if mech == 'disc' else 'flow'} routing on the {cost} cost",
         _DLB_COLOURS[mech, short], options={"*": {"cost": cost, "name": f"{mech}-{short}"}},
         cells=_CP + "dlb")
      for mech in ("disc", "flow")
      for cost, short, lab in (("rif", "rif", "RIF"), ("latency", "lat", "Lat"),
                               ("gradient", "grad", "Grad"))],
    # the shared baselines (one implementation each, every simulator)
    _e("rand", "Rand", f"{_R}:RandomRouter", _ALL,
       "random ∝ capacity weight (DLB's Rand: ∝ replicas)", "#7f7f7f",
       options={"*": {"name": "rand"}}, cells=_CP + "random", instances=_IK + "random"),
    # DLB's legacy balancer
    _e("mnlb", "MNLB", f"{_R}:MNLBRouter", _CELLS,
       "Google's legacy central LP balancer (re-solved every 10 s)", "#9467bd",
       cells=_CP + "mnlb"),
    _e("random", "Random", f"{_R}:RandomRouter", _ALL,
       "uniformly random eligible target (weighted by replicas in cells)", "#bdbdbd",
       options={"*": {"name": "random"}}, cells=_CP + "random", instances=_IK + "random"),
    _e("rr", "RR", f"{_R}:RoundRobinRouter", _ALL, "round robin over eligible targets",
       "#8c564b", cells=_CP + "rr", instances=_IK + "rr"),
    _e("p2c", "P2C", f"{_R}:PowerOfDRouter", _ALL,
       "power of two choices on requests in flight", "#c49c94", cells=_CP + "queue",
       instances=_IK + "p2c"),
    _e("jsq", "JSQ", f"{_R}:JSQRouter", _ALL, "join the shortest queue (requests)", "#ff7f0e",
       options=_LOWEST, cells=_CP + "queue", instances=_IK + "jsq"),
    _e("jsq-tokens", "JSQ-tok", f"{_R}:JSQRouter", frozenset({_INST, _REPL}),
       "least token load (KV / committed tokens): the decode balancer", "#ffbb78",
       options={"*": {"load": "tokens", "ties": "lowest", "name": "jsq-tokens"}},
       instances=_IK + "jsq"),
    # BalanceRoute (THEORY §9)
    _e("br0", "BR-0", "lbtheory.barrier:BR0Router", _REPL,
       "BalanceRoute's single-step F-score, two-stage allocation", "#17becf"),
    _e("brh-oracle", "BR-H oracle", "lbtheory.barrier:brh_router", _REPL,
       "BR-H with true remaining lengths", "#e377c2", options={"*": {"predictor": "oracle"}},
       needs=("workload",)),
    _e("brh-survival", "BR-H survival", "lbtheory.barrier:brh_router", _REPL,
       "BR-H with the empirical-survival predictor", "#bcbd22",
       options={"*": {"predictor": "survival"}}, needs=("workload",)),
    _e("brh-exactmatch", "BR-H exact", "lbtheory.barrier:brh_router", _REPL,
       "BR-H with the exact-match (prefix hash) predictor", "#dbdb8d",
       options={"*": {"predictor": "exactmatch"}}, needs=("workload",)),
    # the Intelligent Router's heuristics (THEORY §10)
    _e("minmin", "Min-Min", "lbtheory.intelligent:MinMinRouter", _INST,
       "Min-Min over the visible router queue (estimated completion time)", "#393b79",
       instances=_IK + "minmin"),
    _e("maxcap", "MaxCap", "lbtheory.intelligent:MaxCapacityRouter", _INST,
       "most free batch/KV capacity", "#637939", instances=_IK + "maxcap"),
    _e("heuristic", "Mixing", "lbtheory.intelligent:MixingRouter", _INST,
       "greedy mixing heuristic (argmax r_mix)", "#8c6d31", instances=_IK + "mixing"),
    _e("small-large", "Small-Large", "lbtheory.intelligent:SizePartitionRouter", _INST,
       "dedicated small/large partition: round robin within the half of the request's size",
       "#843c39", instances=_IK + "small_large"),
    # the Intelligent Router's RL routers, from a checkpoint of `lbtheory intelligent train`
    *[_e(k, lab, "lbtheory.intelligent:dqn_router", _INST, f"Double-DQN router ({k}) from a "
         f"checkpoint", col, options={"*": {"name": k}}, needs=("checkpoint",)) for k, lab, col in
      (("rl", "RL", "#7b4173"), ("wa-rl", "WA-RL", "#a55194"), ("wg-rl", "WG-RL", "#ce6dbd"))],
]}

#: Names of the package's own policies (only policies registered from outside may be replaced).
_BUILTIN = frozenset(POLICIES)


def register_policy(name: str, *, label: str, colour: str,
                    factory: str | Callable[..., Any],
                    simulators: Simulator | str | Iterable[Simulator | str],
                    kernels: Mapping[Simulator | str, str | Callable[..., Any]],
                    summary: str, options: Mapping[str, Mapping[str, Any]] | None = None,
                    needs: Sequence[str] = (), replace: bool = False) -> PolicyEntry:
    """Register a policy from outside the package: after this, :func:`make_router`, the CLI's
    policy lists, plot colours and the compiled engines know it (``examples/custom_policy.py``).

    Args:
        name: the CLI name (lower-case letters, digits and ``-``).
        label: display label; colour: ``"#rrggbb"``.
        factory: the router's constructor (its class, or ``"module:Class"``), called with the
            options; a class when a kernel is given (kernels are found by exact router type).
        simulators: where it runs (``"cells"``, ``"instances"``, ``"replicas"``).
        kernels: for *every* simulator in ``simulators``, its compiled form ``fn(router,
            setting) -> KernelSpec`` (or ``"module:attr"``) or :data:`PYTHON_ONLY`.
        summary: one line for ``--help`` and the README.
        options, needs: as :class:`PolicyEntry`.
        replace: allow replacing a policy registered earlier from outside (never a built-in).

    Returns:
        The new :class:`PolicyEntry`.

    Raises:
        ParameterError: a duplicate name, or a bad field (named).
    """
    sims = [simulators] if isinstance(simulators, (str, Simulator)) else list(simulators)
    if not sims:
        raise ParameterError(f"register_policy({name!r}): simulators must name at least one of "
                             f"{[s.value for s in Simulator]}")
    sims_set = frozenset(check_option(Simulator, s, "simulators") for s in sims)
    if not isinstance(kernels, Mapping):
        raise ParameterError(f"register_policy({name!r}): kernels must be a mapping simulator "
                             f"-> kernel function or PYTHON_ONLY, got {type(kernels).__name__}")
    marks = {check_option(Simulator, s, "kernels").value: k for s, k in kernels.items()}
    entry = PolicyEntry(name, label, factory, sims_set, dict(options or {}),
                        tuple(needs), summary, colour, marks)
    _check_entry(entry)
    if name in POLICIES and (not replace or name in _BUILTIN):
        raise ParameterError(f"register_policy: a policy named {name!r} exists already"
                             + (" (built in)" if name in _BUILTIN else
                                "; pass replace=True to replace it"))
    _check_same_kernels(entry)
    POLICIES[name] = entry
    _refresh_names()
    return entry


def _check_same_kernels(new: PolicyEntry) -> None:
    """Kernels are found by router class: refuse a class that another policy already runs
    with another kernel (or Python-only mark) in the same simulator."""
    if not isinstance(new.factory, type) and not any(new.compiled(s) for s in new.simulators):
        return  # a string or function factory without kernels: nothing found by its type
    kind = new.constructor()
    for e in POLICIES.values():
        if e.name == new.name or not isinstance(kind, type):
            continue
        for sim in new.simulators & e.simulators:
            if (new.compiled(sim) or e.compiled(sim)) and e.kernels[sim.value] != \
                    new.kernels[sim.value] and e.constructor() is kind:
                raise ParameterError(
                    f"policy {new.name!r}: {kind.__name__} runs with another kernel in the "
                    f"{sim.value} simulator (policy {e.name!r}); kernels are found by router "
                    f"class, so give the policy its own class (a subclass will do)")


def unregister_policy(name: str) -> None:
    """Remove a policy registered with :func:`register_policy` (built-ins stay).

    Raises:
        ParameterError: a built-in or unknown name.
    """
    if name in _BUILTIN or name not in POLICIES:
        raise ParameterError(f"unregister_policy: {name!r} is "
                             f"{'built in' if name in _BUILTIN else 'not registered'}")
    del POLICIES[name]
    _refresh_names()


def _check_entry(e: PolicyEntry) -> None:
    """Raise ParameterError naming the first bad field of ``e``."""
    def bad(field: str, why: str) -> ParameterError:
        return ParameterError(f"policy {e.name!r}: {field} {why}")

    if not isinstance(e.name, str) or not _NAME.match(e.name):
        raise ParameterError(f"policy name must be lower-case letters, digits and '-' (a CLI "
                             f"name), got {e.name!r}")
    for field in ("label", "summary"):
        if not isinstance(getattr(e, field), str) or not getattr(e, field).strip():
            raise bad(field, "must be a non-empty string")
    if not isinstance(e.colour, str) or not _COLOUR.match(e.colour):
        raise bad("colour", f"must be '#rrggbb', got {e.colour!r}")
    if not (callable(e.factory) or (isinstance(e.factory, str) and ":" in e.factory)):
        raise bad("factory", f"must be a callable or 'module:attr', got {e.factory!r}")
    if not e.simulators or not all(isinstance(s, Simulator) for s in e.simulators):
        raise bad("simulators", "must be a non-empty set of Simulator")
    for s in Simulator:
        k = e.kernels.get(s.value)
        if (s in e.simulators) != (k is not None):
            raise bad("kernels", f"must give every simulator of the policy (and only those) "
                                 f"a kernel function or PYTHON_ONLY; {s.value!r}: "
                                 f"{'missing' if k is None else 'not a simulator of it'}")
        if k is not None and k != PYTHON_ONLY and not (callable(k) or (
                isinstance(k, str) and ":" in k)):
            raise bad(f"kernels[{s.value!r}]", f"must be a function or 'module:attr' or "
                                              f"PYTHON_ONLY, got {k!r}")
    if not set(e.options) <= {"*", *Simulator}:
        raise bad("options", f"keys must be '*' or a simulator, got {sorted(e.options)}")
    if not set(e.needs) <= _NEEDS:
        raise bad("needs", f"must be among {sorted(_NEEDS)}, got {list(e.needs)}")
    if any(e.compiled(s) for s in e.simulators):
        try:
            ctor = e.constructor()
        except (ImportError, AttributeError) as exc:
            raise bad("factory", f"cannot be imported: {exc}") from None
        if not isinstance(ctor, type):
            raise bad("factory", "must be the router class when a kernel is given (kernels "
                                 "are found by exact router type)")


def compiled_kernel(router: Any, simulator: Simulator | str) -> Callable[..., Any] | None:
    """The kernel function of the policy whose router class is exactly ``type(router)`` in
    ``simulator`` (module docstring), or None: no such policy, or it runs in Python only."""
    sim = check_option(Simulator, simulator, "simulator")
    kind = type(router)
    for e in POLICIES.values():
        if sim in e.simulators and e.compiled(sim) and e.constructor() is kind:
            return e.kernel(sim)
    return None


def policy_entry(name: str, simulator: Simulator | str | None = None) -> PolicyEntry:
    """The entry of ``name`` (checked to run in ``simulator`` when given).

    Raises:
        ParameterError: unknown name, or a policy that does not run in that simulator (the
            message lists the valid names).
    """
    sim = None if simulator is None else check_option(Simulator, simulator, "simulator")
    if not isinstance(name, str):
        raise ParameterError(f"policy name must be a string, got {name!r}")
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


def colour(name: str) -> str | None:
    """The plot colour of a policy, also for a label like ``flow-grad@0.5``; None if unknown."""
    entry = POLICIES.get(name) or POLICIES.get(name.split("@")[0])
    return entry.colour if entry is not None else None


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
    ctor = entry.constructor()
    _check_keywords(name, ctor, kw, options)
    router = ctor(**kw)  # errors raised inside the constructor are its own: they propagate
    if error_aversion:
        router = _resolve("lbtheory.routers:ErrorAversion")(router)
    if affinity:
        router = _resolve("lbtheory.routers:AffinityRouter")(router)
    return router


def _check_keywords(name: str, ctor: Callable[..., Any], kw: Mapping[str, Any],
                    given: Mapping[str, Any]) -> None:
    """Raise ParameterError for an option ``ctor`` does not take, or a required one missing
    (read from its signature before calling it)."""
    try:
        sig = inspect.signature(ctor)
    except (TypeError, ValueError):  # no signature to read: the constructor checks its own
        return
    params = sig.parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    takes = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    unknown = sorted(set(kw) - takes)
    if unknown:
        opts = sorted(takes - {"name"})
        raise ParameterError(f"policy {name!r}: bad option(s) {unknown}"
                             f"{'' if set(unknown) <= set(given) else ' (of its entry)'}: "
                             f"{getattr(ctor, '__name__', name)} takes "
                             f"{opts if opts else 'no options'}")
    missing = [p.name for p in params if p.default is p.empty and p.name not in kw
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if missing:
        raise ParameterError(f"policy {name!r}: missing option(s) {missing}")


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
#: The policy names of ``lbtheory barrier --policy``.
BARRIER_POLICIES: tuple[str, ...] = policy_names(Simulator.REPLICAS)
#: The router names of ``lbtheory intelligent evaluate --policy``.
INSTANCE_POLICIES: tuple[str, ...] = policy_names(Simulator.INSTANCES)


def _refresh_names() -> None:
    """The three name lists above, after a policy was (un)registered."""
    global POLICY_NAMES, BARRIER_POLICIES, INSTANCE_POLICIES
    POLICY_NAMES = policy_names(Simulator.CELLS)
    BARRIER_POLICIES = policy_names(Simulator.REPLICAS)
    INSTANCE_POLICIES = policy_names(Simulator.INSTANCES)


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
    simulate_decode = _resolve("lbtheory.barrier:simulate_decode")
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
