"""The house rules of docs/DESIGN.md, checked on the source: no import cycles, small modules.

The import graph is read from the AST of every module (top-level *and* function-local imports —
a lazy import is still a dependency), at the granularity DESIGN.md states its rule: the top-level
packages and modules of ``lbtheory`` (``lbtheory.games``, ``lbtheory.network``, ...). Inside a
subpackage, private modules form their own graph, which must also be acyclic. ``lbtheory/__init__``
is the lazy facade that re-exports everything and is not part of the graph.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "lbtheory"
MAX_LINES = 600

#: DESIGN.md's layers, top to bottom: a unit may import only units in later layers (or its own).
LAYERS: list[set[str]] = [
    {"cli", "commands"},
    {"sweep"},
    {"intelligent"},
    {"sim"},
    {"barrier"},
    {"stability"},
    {"fluid"},
    {"equilibrium"},
    {"games"},
    {"routers"},
    {"workloads"},
    {"io"},
    {"instances"},
    {"network"},
    {"costs"},
    {"models"},
    {"simplex"},
    {"stats", "plotting"},
    {"registry"},  # data: names every implementation by dotted path, imports none of them
    {"errors", "_array", "_checks", "_jit"},
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of the lbtheory modules that ``path`` imports (anywhere in the file)."""
    name = _module_name(path)
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("lbtheory"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("lbtheory"):
                continue
            out.add(mod)
            for a in node.names:  # `from . import commands` names a module
                out.add(f"{mod}.{a.name}")
    return out


def _all_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def _unit(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    color: dict[str, int] = {}
    stack: list[str] = []

    def visit(u: str) -> list[str] | None:
        color[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if color.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in color and (cyc := visit(v)):
                return cyc
        stack.pop()
        color[u] = 2
        return None

    for u in sorted(graph):
        if u not in color and (cyc := visit(u)):
            return cyc
    return None


def _unit_graph() -> dict[str, set[str]]:
    mods = _all_modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        src = _unit(name)
        if not src:  # the facade lbtheory/__init__.py
            continue
        for dep in _imports(path):
            if dep not in mods and dep.rpartition(".")[0] in mods:
                dep = dep.rpartition(".")[0]  # `from .x import name`
            dst = _unit(dep)
            if dst and dst != src:
                graph.setdefault(src, set()).add(dst)
    return graph


def test_cycle_detector_finds_a_planted_cycle() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": {"c"}}) is None


def test_import_parser_resolves_relative_and_lazy_imports(tmp_path: Path) -> None:
    mods = _imports(PKG / "games" / "solve.py")
    assert "lbtheory.errors" in mods and "lbtheory.games.game" in mods
    mods = _imports(PKG / "cli.py")  # `from . import commands` inside a function
    assert "lbtheory.commands" in mods


def test_no_import_cycle_between_units() -> None:
    cycle = _find_cycle(_unit_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_imports_go_down_the_layers() -> None:
    rank = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    wrong = []
    for src, dsts in _unit_graph().items():
        assert src in rank, f"lbtheory.{src} is not in DESIGN.md's layout (add it to LAYERS)"
        wrong += [f"{src} -> {d}" for d in dsts if rank[d] < rank[src]]
    assert not wrong, "imports going up the layout: " + ", ".join(sorted(wrong))


@pytest.mark.parametrize("package", sorted({_unit(m) for m in _all_modules() if _unit(m)}))
def test_no_import_cycle_inside_a_package(package: str) -> None:
    mods = {n: p for n, p in _all_modules().items() if _unit(n) == package}
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        for dep in _imports(path):
            if dep not in mods and dep.rpartition(".")[0] in mods:
                dep = dep.rpartition(".")[0]
            # a package's __init__ re-exports its modules: not a dependency of theirs
            if dep in mods and dep != name and not path.name == "__init__.py":
                if mods[dep].name != "__init__.py":
                    graph.setdefault(name, set()).add(dep)
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_modules_stay_small() -> None:
    big = {str(p.relative_to(PKG.parent)): n for p in PKG.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them): {big}"


def test_library_code_never_prints() -> None:
    offenders = []
    for name, path in _all_modules().items():
        if _unit(name) in ("cli", "commands"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "print"):
                offenders.append(f"{path.relative_to(PKG.parent)}:{node.lineno}")
    assert not offenders, "print() outside the CLI: " + ", ".join(offenders)


def test_facade_exports_resolve() -> None:
    import lbtheory

    for name in lbtheory.__all__:
        assert getattr(lbtheory, name) is not None, name


# ----------------------------------------------------------------------- one house (issue 20)
def _defs(path: Path) -> list[ast.AST]:
    return [n for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, (ast.ClassDef, ast.FunctionDef))]


def _where(pattern: str) -> set[str]:
    """Modules defining a class or function whose name matches ``pattern``."""
    import re

    rx = re.compile(pattern, re.IGNORECASE)
    return {str(p.relative_to(PKG.parent)) for p in PKG.rglob("*.py")
            if any(rx.fullmatch(d.name) for d in _defs(p))}


@pytest.mark.parametrize("pattern", [
    r"_?round_?robin(_?router)?", r"_?jsq(_?tokens)?(_?router)?",
    r"_?power_?of_?(two|d)(_?router)?", r"_?p2c(_?router)?", r"_?two_choices",
    r"_?random_?router", r"_?decode_?balancer",
])
def test_each_shared_baseline_is_written_once(pattern: str) -> None:
    """Round robin, JSQ, power of d and random routing live in one module, for all simulators."""
    assert _where(pattern) <= {"lbtheory/routers/_baselines.py"}, _where(pattern)


def test_one_router_contract_and_one_registry() -> None:
    assert _where(r"Router") <= {"lbtheory/routers/_contract.py"}
    assert _where(r"Assignment") == {"lbtheory/routers/_contract.py"}
    assert _where(r"make_router|parse_policies|policy_names|make_heuristic") == \
        {"lbtheory/registry.py"}


def test_one_request_type() -> None:
    """Only workloads/_workload.py defines a class with per-request arrival and token columns."""
    owners = set()
    for p in PKG.rglob("*.py"):
        for d in _defs(p):
            if not isinstance(d, ast.ClassDef):
                continue
            fields = {t.target.id for t in d.body if isinstance(t, ast.AnnAssign)
                      and isinstance(t.target, ast.Name)}
            if {"prompt_tokens", "output_tokens"} <= fields and \
                    fields & {"arrival_s", "time_s", "arrival", "arrival_time"}:
                owners.add(str(p.relative_to(PKG.parent)))
    assert owners == {"lbtheory/workloads/_workload.py"}, owners


def test_the_three_simulators_share_the_request_type_contract_and_registry() -> None:
    """The import graph: sim, intelligent and barrier read workloads and routers; the
    registry names its constructors and kernels by dotted path (tests/test_registry.py) and
    imports only the bottom layer, so the CLI, the compiled engines (their kernels by router
    type) and plotting (colours) read it."""
    graph = _unit_graph()
    for sim in ("sim", "intelligent", "barrier"):
        assert {"workloads", "routers"} <= graph[sim], (sim, graph[sim])
    assert graph.get("registry", set()) <= {"errors", "_checks"}, graph["registry"]
    users = {u for u, deps in graph.items() if "registry" in deps}
    assert users <= {"commands", "sweep", "sim", "intelligent", "plotting"}, users


@pytest.mark.parametrize("module, old, new", [
    ("lbtheory", "Trace", "Workload"), ("lbtheory.routers", "RouterView", "CellView"),
    ("lbtheory.workloads", "Trace", "Workload"),
    ("lbtheory.intelligent", "SimResult", "InstanceResult"),
    ("lbtheory.intelligent", "ClusterView", "InstanceView"),
])
def test_renamed_names_warn_and_resolve_to_the_new_object(module, old, new):
    import importlib

    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated, use .*{new}"):
        value = getattr(mod, old)
    assert value is getattr(mod, new)


# ------------------------------------------- experiments/ and paper_figures/ (issue 32, item 7)
ROOT = PKG.parent
#: the script folders above the package: experiments write results, paper_figures read them
SCRIPTS = ("experiments", "paper_figures")


def _script_imports(path: Path) -> set[str]:
    """Top-level names of everything ``path`` imports (anywhere in the file, lazy imports too):
    ``lbtheory.sim`` for ``from lbtheory.sim import x``, ``_intelligent_tables`` for a sibling."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module)
    return out


def _script_graph(folder: str) -> dict[str, set[str]]:
    """Sibling imports inside ``folder`` (a script imports its helpers by module name, the
    folder being on ``sys.path``)."""
    mods = {p.stem: p for p in (ROOT / folder).glob("*.py")}
    return {name: {d.partition(".")[0] for d in _script_imports(p)} & set(mods) - {name}
            for name, p in mods.items()}


def test_script_import_parser_sees_lazy_sibling_imports(tmp_path: Path) -> None:
    f = tmp_path / "script.py"
    f.write_text("import json\nfrom lbtheory.sim import simulate\n\n\ndef f():\n"
                 "    from _helper import x\n    import lbtheory.io as io\n")
    assert _script_imports(f) == {"json", "lbtheory.sim", "_helper", "lbtheory.io"}
    assert _find_cycle({"a": {"_t"}, "_t": {"a"}}) == ["_t", "a", "_t"]


@pytest.mark.parametrize("folder", SCRIPTS)
def test_no_import_cycle_among_scripts(folder: str) -> None:
    graph = _script_graph(folder)
    assert graph, f"{folder}/ has no modules"
    cycle = _find_cycle(graph)
    assert cycle is None, f"import cycle in {folder}/: " + " -> ".join(cycle or [])


def test_scripts_import_the_package_never_the_reverse() -> None:
    """The layering of DESIGN.md's picture: lbtheory → results (experiments/) → paper_figures/.
    The package imports no script; experiments import no figure script; figure scripts read
    results and import no experiment module; every lbtheory module a script names exists."""
    scripts = {f: {p.stem for p in (ROOT / f).glob("*.py")} for f in SCRIPTS}
    above = set(SCRIPTS) | set().union(*scripts.values())
    wrong = [f"{path.relative_to(ROOT)} -> {dep}" for name, path in _all_modules().items()
             for dep in _script_imports(path) if dep.partition(".")[0] in above]
    mods = _all_modules()
    for folder, names in scripts.items():
        # a sibling of the same name wins (the script's folder comes first on sys.path)
        others = set(SCRIPTS) - {folder} | (
            scripts["experiments" if folder == "paper_figures" else "paper_figures"] - names)
        for p in sorted((ROOT / folder).glob("*.py")):
            for dep in _script_imports(p):
                if dep.partition(".")[0] in others:
                    wrong.append(f"{folder}/{p.name} -> {dep}")
                if dep.partition(".")[0] == "lbtheory" and dep not in mods:
                    wrong.append(f"{folder}/{p.name} -> {dep} (no such module)")
    assert not wrong, "imports against the layering: " + ", ".join(wrong)
