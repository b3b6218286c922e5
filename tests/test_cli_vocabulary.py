"""One CLI vocabulary (issue 32): one flag per concept across subcommands, the old spellings
hidden aliases that parse to the same values, ``--out`` always a folder, defaults in ``--help``.

The tree of subcommands is walked from :func:`lbtheory.cli.build_parser`, so a new subcommand is
checked without listing it here; the lists below (simulating subcommands, old spellings) are the
contract, and the walk fails when the parser disagrees with them.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from lbtheory.cli import build_parser, main
from lbtheory.commands._help import HelpFormatter

ROOT = Path(__file__).resolve().parents[1]
CONV = str(ROOT / "examples" / "traces" / "AzureLLMInferenceTrace_conv.csv")
TOPO = str(ROOT / "examples" / "three_cells.yaml")

#: subcommands that run a policy (a router) and so take ``--policy``.
SIMULATING = {("simulate",), ("barrier",), ("fluid",), ("intelligent", "evaluate"),
              ("intelligent", "train")}
#: per subcommand: old spelling -> the flag it is now (the old one keeps working).
OLD_SPELLINGS = {
    ("barrier",): {"--policies": "--policy", "--limit": "--requests"},
    ("fluid",): {"--t1": "--duration"},
    ("intelligent", "evaluate"): {"--routers": "--policy"},
    ("intelligent", "train"): {"--router": "--policy"},
}
#: spellings that must never be the visible name of an option.
RETIRED = {"--policies", "--routers", "--router", "--t1", "--limit"}
#: the minimal arguments that make each subcommand parse (positionals, required options).
BASE_ARGV = {
    ("simulate",): ["simulate", "--appendix-b", "1"],
    ("barrier",): ["barrier", "trace.csv"],
    ("fluid",): ["fluid", "topology.yaml"],
    ("intelligent", "evaluate"): ["intelligent", "evaluate", "trace.csv"],
    ("intelligent", "train"): ["intelligent", "train", "trace.csv", "--out", "ck"],
}
#: a value for each flag of OLD_SPELLINGS / the utilisation pair.
VALUES = {"--policy": "jsq", "--requests": "7", "--duration": "12.5", "--utilisation": "0.55"}


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(path, parser)`` of every leaf subcommand (``("intelligent", "train")``, ...)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _commands(child, (*path, name))


COMMANDS = dict(_commands(build_parser()))


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS]


def _hidden(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions if a.option_strings and a.help == argparse.SUPPRESS
            for s in a.option_strings}


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in _visible(parser) for s in a.option_strings}


def test_the_walk_finds_every_subcommand():
    assert set(SIMULATING) | {("equilibrium",), ("stepsize",), ("sweep",),
                              ("tntp", "fetch"), ("schema",)} == set(COMMANDS)


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_no_retired_spelling_is_visible(path):
    parser = COMMANDS[path]
    help_text = parser.format_help()  # usage, options and the epilog's examples
    for flag in RETIRED:
        assert flag not in _flags(parser), f"{' '.join(path)} shows {flag}"
        assert not re.search(rf"(?<![\w-]){flag}\b", help_text), (path, flag)
    if "--utilization" in _flags(parser):  # both spellings, never the American one alone
        assert "--utilisation" in _flags(parser)


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_simulating_subcommands_take_policy(path):
    parser = COMMANDS[path]
    assert ("--policy" in _flags(parser)) == (path in SIMULATING)
    if path in SIMULATING:
        assert "--policies" not in _flags(parser) and "--routers" not in _flags(parser)


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_hidden_options_are_exactly_the_old_spellings(path):
    parser = COMMANDS[path]
    assert set(_hidden(parser)) == set(OLD_SPELLINGS.get(path, {}))
    usage = parser.format_usage()
    for old in _hidden(parser):
        assert f"{old} " not in usage and f"{old}]" not in usage


@pytest.mark.parametrize("path, old, new", [(p, o, n) for p, m in OLD_SPELLINGS.items()
                                            for o, n in m.items()],
                         ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_old_spelling_parses_to_the_same_namespace(path, old, new):
    parser = build_parser()
    value = VALUES[new]

    def parsed(flag: str) -> dict:
        ns = vars(parser.parse_args([*BASE_ARGV[path], flag, value]))
        return {k: v for k, v in ns.items() if k != "_spelling"}

    by_old, by_new = parsed(old), parsed(new)
    assert by_old == by_new
    act = COMMANDS[path]._option_string_actions[new]
    number = getattr(act, "number", None)  # a numeric flag: read by its Number rule
    typed = number.parse(value, new) if number is not None else (act.type or str)(value)
    assert by_new[act.dest] == typed  # the value typed, converted
    # neither spelling: the new option's default (the hidden alias adds no default of its own)
    assert vars(parser.parse_args(BASE_ARGV[path]))[act.dest] == act.default != by_new[act.dest]


def test_both_spellings_of_utilisation_parse_to_the_same_namespace():
    parser = build_parser()
    a = parser.parse_args([*BASE_ARGV["simulate",], "--utilisation", "0.55"])
    b = parser.parse_args([*BASE_ARGV["simulate",], "--utilization", "0.55"])
    assert a._spelling["utilisation"] == "--utilisation"  # an error names the spelling typed
    assert b._spelling["utilisation"] == "--utilization"
    del a._spelling, b._spelling
    assert vars(a) == vars(b) and a.utilisation == 0.55
    assert parser.parse_args(BASE_ARGV["simulate",]).utilisation == 0.8


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_out_is_always_a_folder(path):
    parser = COMMANDS[path]
    for a in _visible(parser):
        if "--out" in a.option_strings:
            assert a.metavar == "DIR", path
            assert "folder" in a.help or "results root" in a.help, (path, a.help)


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_default_is_shown_in_help(path):
    parser = COMMANDS[path]
    assert parser.formatter_class is HelpFormatter
    fmt = parser._get_formatter()
    for a in _visible(parser):
        if (a.default in (None, False, argparse.SUPPRESS) or a.nargs == 0
                or isinstance(a, (argparse._HelpAction, argparse._VersionAction))):
            continue
        text = fmt._expand_help(a) if a.help else ""
        assert "default" in text.lower(), (path, a.option_strings, text)
        if "%(default)s" in fmt._get_help_string(a):
            assert f"(default: {a.default})" in text


# ------------------------------------------------------------------- end-to-end, tiny inputs


def _run(capsys, argv):
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _numbers(text: str) -> object:
    """A command's JSON without its wall-clock times (keys with ``wall``), which vary."""
    def strip(v: object) -> object:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if "wall" not in k}
        return [strip(x) for x in v] if isinstance(v, list) else v
    return strip(json.loads(text))


def test_barrier_old_and_new_spellings_print_the_same(capsys):
    tail = ["--replicas", "2", "--json"]
    rc1, old, _ = _run(capsys, ["barrier", CONV, "--limit", "20", "--policies", "jsq,rr", *tail])
    rc2, new, _ = _run(capsys, ["barrier", CONV, "--requests", "20", "--policy", "jsq,rr", *tail])
    assert rc1 == rc2 == 0
    old, new = _numbers(old), _numbers(new)
    assert old == new
    assert new["requests"] == 20 and list(new["policies"]) == ["jsq", "rr"]


@pytest.mark.parametrize("flag", ["--limit", "--requests"])
def test_barrier_error_names_the_spelling_typed(capsys, flag):
    rc, out, err = _run(capsys, ["barrier", CONV, flag, "0"])
    assert rc == 2 and out == ""
    assert err.strip() == f"error: {flag} must be an integer ≥ 1 (requests), got 0"


def test_fluid_old_and_new_spellings_and_policy_print_the_same(capsys):
    base = ["fluid", TOPO, "--stepsize", "0.5", "--no-equilibrium", "--json"]
    rc1, old, _ = _run(capsys, [*base, "--t1", "0.5", "--mechanism", "flow", "--cost", "latency"])
    rc2, new, _ = _run(capsys, [*base, "--duration", "0.5", "--policy", "flow-lat"])
    assert rc1 == rc2 == 0 and old == new
    assert json.loads(new)["t"][-1] == 0.5
    rc3, grad, _ = _run(capsys, [*base, "--duration", "0.5"])  # default: flow, gradient
    rc4, explicit, _ = _run(capsys, [*base, "--duration", "0.5", "--policy", "flow-grad"])
    assert rc3 == rc4 == 0 and grad == explicit != new


def test_fluid_policies_are_the_dlb_policies_with_a_fluid_model():
    from lbtheory.commands.fluid import FLUID_POLICIES
    from lbtheory.registry import POLICY_NAMES

    assert set(FLUID_POLICIES) == {p for p in POLICY_NAMES
                                   if p.startswith(("disc-", "flow-"))}
    assert FLUID_POLICIES["disc-lat"] == ("discrete", "latency")
    assert len(FLUID_POLICIES) == 6
    from lbtheory.registry import make_router

    for name, (mech, cost) in FLUID_POLICIES.items():  # each pair is what the router runs
        router = make_router(name)
        assert type(router).__name__ == {"discrete": "DiscreteRouter", "flow": "FlowRouter"}[mech]
        assert router.cost.value == cost


@pytest.mark.parametrize("argv, match", [
    (["--duration", "1", "--policy", "disc-lat", "--cost", "gradient"],
     "error: --policy disc-lat means --cost latency, but --cost gradient was given"),
    (["--stepsize", "0.5"], "error: --duration: required, the horizon in seconds"),
])
def test_fluid_bad_vocabulary_is_one_error_line(capsys, argv, match):
    rc, out, err = _run(capsys, ["fluid", TOPO, *argv])
    assert rc == 2 and out == "" and err.startswith(match) and len(err.splitlines()) == 1


def test_simulate_both_utilisation_spellings_print_the_same(capsys):
    base = ["simulate", "--appendix-b", "1", "--cells", "2", "--duration", "2", "--policy",
            "rand", "--engine", "reference", "--json"]
    rc1, uk, _ = _run(capsys, [*base, "--utilisation", "0.5"])
    rc2, us, _ = _run(capsys, [*base, "--utilization", "0.5"])
    rc3, other, _ = _run(capsys, [*base, "--utilization", "0.3"])
    assert rc1 == rc2 == rc3 == 0
    assert _numbers(uk) == _numbers(us) != _numbers(other)  # the value is used, not dropped


def _tiny_trace(tmp_path: Path) -> str:
    p = tmp_path / "t.csv"
    p.write_text("arrival,prompt_tokens,output_tokens\n0.0,40,5\n0.1,30,3\n0.2,20,4\n")
    return str(p)


def test_evaluate_old_and_new_spellings_print_the_same(tmp_path, capsys):
    base = ["intelligent", "evaluate", _tiny_trace(tmp_path), "--requests", "3", "--rate", "0",
            "--instances", "2", "--json"]
    rc1, old, _ = _run(capsys, [*base, "--routers", "rr,jsq"])
    rc2, new, _ = _run(capsys, [*base, "--policy", "rr,jsq"])
    assert rc1 == rc2 == 0 and old == new
    assert list(json.loads(new)["routers"]) == ["rr", "jsq"]
    rc, out, err = _run(capsys, [*base, "--routers", "rr,nope"])
    assert rc == 2 and err.startswith("error: --routers: unknown router 'nope'")
    rc, out, err = _run(capsys, [*base, "--policy", "rr,nope"])
    assert rc == 2 and err.startswith("error: --policy: unknown router 'nope'")


def test_evaluate_out_is_a_folder_output_a_file_and_the_old_out_file_still_works(tmp_path,
                                                                                 capsys):
    base = ["intelligent", "evaluate", _tiny_trace(tmp_path), "--requests", "3", "--rate", "0",
            "--instances", "2", "--policy", "rr"]
    folder, file, old = tmp_path / "res", tmp_path / "one.json", tmp_path / "old.json"
    assert _run(capsys, [*base, "--out", str(folder)])[0] == 0
    assert _run(capsys, [*base, "--output", str(file)])[0] == 0
    rc, _, err = _run(capsys, [*base, "--out", str(old)])  # the old meaning: a .json file
    assert rc == 0 and old.is_file()
    assert err.strip().splitlines()[-1].startswith(f"note: wrote {old}; --out FILE is the old "
                                                   f"spelling of --output FILE")
    docs = [json.loads(p.read_text()) for p in (folder / "evaluate.json", file, old)]
    assert [sorted(d) for d in docs] == [["manifest", "offered_load", "routers"]] * 3
    assert docs[0]["routers"] == docs[1]["routers"] == docs[2]["routers"]
    assert docs[0]["routers"]["rr"]["completed"] == 3
    existing = tmp_path / "existing"  # an existing file without .json: the old meaning too
    existing.write_text("x")
    assert _run(capsys, [*base, "--out", str(existing)])[0] == 0
    assert json.loads(existing.read_text())["routers"] == docs[0]["routers"]
    named = tmp_path / "named.json"  # an existing folder is a folder, whatever its name
    named.mkdir()
    assert _run(capsys, [*base, "--out", str(named)])[0] == 0
    assert json.loads((named / "evaluate.json").read_text())["routers"] == docs[0]["routers"]
    rc, out, err = _run(capsys, [*base, "--out", str(folder), "--output", str(file)])
    assert rc == 2 and out == "" and "give one" in err


@pytest.mark.parametrize("flag, value, match", [
    ("--router", "dqn", "error: --router: unknown RL router 'dqn'"),
    ("--policy", "dqn", "error: --policy: unknown RL router 'dqn'"),
    ("--policy", "rl,wa-rl", "error: --policy: train trains one router, got 'rl,wa-rl'"),
])
def test_train_policy_errors_name_the_spelling_typed(tmp_path, capsys, flag, value, match):
    rc, out, err = _run(capsys, ["intelligent", "train", _tiny_trace(tmp_path), "--out",
                                 str(tmp_path / "ck"), flag, value])
    assert rc == 2 and err.startswith(match) and not (tmp_path / "ck").exists()
