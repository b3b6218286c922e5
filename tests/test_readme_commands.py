"""Every command of README.md is run as written and its output compared with the block the README
shows (issue 33): a README output cannot go stale. Volatile numbers (wall times) are masked by
``tools/readme_commands.py``; commands needing the network or hours are listed there (SKIP)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("readme_commands", ROOT / "tools" /
                                               "readme_commands.py")
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)

CASES = [(c, shown) for c, shown in tool.commands((ROOT / "README.md").read_text("utf-8"))
         if not any(s in c for s in tool.SKIP)]


def test_the_readme_has_commands_and_stays_short():
    text = (ROOT / "README.md").read_text("utf-8")
    assert len(text.splitlines()) <= 350
    assert len(CASES) >= 8
    assert any(c.startswith("lbtheory equilibrium examples/three_cells.yaml") for c, _ in CASES)


@pytest.mark.parametrize("cmd, shown", CASES, ids=[c[:60] for c, _ in CASES])
def test_readme_command_output_is_current(cmd, shown):
    got = tool.run(cmd)
    assert tool.same(got, shown), f"README block of `{cmd}` is stale; now:\n{got}"
