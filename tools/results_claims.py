"""Copy the Appendix-B claims table of experiments/results/claims.md (generated from the
committed summaries by experiments/_appendix_b_claims.py) into RESULTS.md, between
``<!-- claims:begin -->`` and ``<!-- claims:end -->`` (tests/test_results_doc.py checks they
agree).

Usage:  .venv/bin/python tools/results_claims.py [--write | --check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = ROOT / "experiments" / "results" / "claims.md"
RESULTS = ROOT / "RESULTS.md"
BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"


def claims_table(text: str) -> str:
    """The first markdown table of claims.md (its header row to its last row)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| paper's statement"))
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[start:end])


def block(text: str) -> str | None:
    """RESULTS.md's current block (markers included), or None."""
    if BEGIN not in text or END not in text:
        return None
    return text[text.index(BEGIN):text.index(END) + len(END)]


def render() -> str:
    return (f"{BEGIN}\n<!-- copied from experiments/results/claims.md by "
            f"tools/results_claims.py: do not edit -->\n"
            f"{claims_table(CLAIMS.read_text(encoding='utf-8'))}\n{END}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite RESULTS.md's block")
    args = ap.parse_args(argv)
    text = RESULTS.read_text(encoding="utf-8")
    old = block(text)
    if old is None:
        print(f"RESULTS.md has no {BEGIN} … {END} block", file=sys.stderr)
        return 1
    if not args.write:
        return 0 if old == render() else 1
    RESULTS.write_text(text.replace(old, render()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
