"""RESULTS.md carries the Appendix-B claims table exactly as the claims module generated it
(experiments/results/claims.md): a rule or summary change cannot leave the two disagreeing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("results_claims", ROOT / "tools" /
                                               "results_claims.py")
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)


def test_results_md_holds_the_generated_claims_table():
    text = (ROOT / "RESULTS.md").read_text(encoding="utf-8")
    assert tool.block(text) == tool.render(), "run tools/results_claims.py --write"
    table = tool.claims_table(tool.CLAIMS.read_text(encoding="utf-8"))
    rows = [ln for ln in table.splitlines()[2:]]
    assert len(rows) >= 25 and all(ln.count("|") >= 5 for ln in rows)
    assert any("not reproduced" in ln for ln in rows) and any("**reproduced**" in ln
                                                             for ln in rows)
