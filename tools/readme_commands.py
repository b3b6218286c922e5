"""Run every ``$ lbtheory ...`` command of README.md as written and compare its output with the
block the README shows (or rewrite the block with ``--update``).

A README "real output" block is a fenced ``text``/``console`` block whose lines starting with
``$ `` are commands; the lines up to the next ``$ `` line or the block's end are that command's
output. Numbers that vary run to run (wall times: ``in 11.4 s``, ``12.3 s/episode``) are masked
before comparing. Commands listed in :data:`SKIP` need the network or a long run and are
reported, not run.

Usage:  .venv/bin/python tools/readme_commands.py [--update] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent  # the interpreter's own bin (.venv/bin when run as README says)
#: commands (substrings) not run here: network access, or minutes of compute.
SKIP = ("tntp fetch", "sweep appendix-b", "--profile full", "make ")
_VOLATILE = [
    (re.compile(r"\bin \d+(\.\d+)? s\b"), "in <t> s"),
    (re.compile(r"\d+(\.\d+)?s/episode"), "<t>s/episode"),
    (re.compile(r"wall \d+(\.\d+)? s"), "wall <t> s"),
    (re.compile(r"\(([\w:]+), \d+(\.\d+)?(e-?\d+)? s(?=[,)])"), r"(\1, <t> s"),  # solver time
    (re.compile(r"^compiling kernels once.*\n?", re.M), ""),  # first run after an install only
    (re.compile(r"/tmp/tmp\.\w+"), "/tmp/<dir>"),  # a `mktemp -d` folder
    (re.compile(r"residual \d\.\de-(1[3-9]|[2-9]\d)"), "residual <1e-12"),  # rounding level
    # gaps and AECs at rounding level (below 1e-10) differ with the CPU's floating-point paths
    (re.compile(r"\b\d(\.\d+)?e-(1[1-9]|[2-9]\d)\b"), "<1e-10"),
]


def _mask(text: str) -> str:
    for rx, rep in _VOLATILE:
        text = rx.sub(rep, text)
    return text.rstrip()


def blocks(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line indices of the fenced text/console blocks holding ``$ `` commands."""
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```") and lines[i].strip("`").strip() in ("text", "console"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if any(lines[k].startswith("$ ") for k in range(i + 1, j)):
                out.append((i + 1, j))
            i = j + 1
        else:
            i += 1
    return out


def run(cmd: str) -> str:
    """The command's stdout + stderr (as a user sees them), run from the repository root with
    the project's virtualenv first on PATH."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "COLUMNS": "100"}
    shell_cmd = cmd.replace(".venv/bin/", "")
    proc = subprocess.run(["bash", "-c", shell_cmd], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1800)
    return (proc.stdout + proc.stderr).rstrip("\n")


def commands(text: str) -> list[tuple[str, str]]:
    """Every ``(command, shown output)`` of the README's real-output blocks, in order (the
    commands of :data:`SKIP` included)."""
    lines = text.split("\n")
    out = []
    for first, last in blocks(lines):
        body = lines[first:last]
        cmds = [k for k, line in enumerate(body) if line.startswith("$ ")]
        for n, k in enumerate(cmds):
            end = cmds[n + 1] if n + 1 < len(cmds) else len(body)
            out.append((body[k][2:].split("  #")[0].strip(), "\n".join(body[k + 1:end])))
    return out


def same(got: str, shown: str) -> bool:
    """Whether a command's output equals the README's, volatile numbers masked."""
    return _mask(got) == _mask(shown)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="rewrite the README's output blocks")
    ap.add_argument("--only", default="", help="run only commands containing this text")
    args = ap.parse_args(argv)
    lines = README.read_text(encoding="utf-8").split("\n")
    new = list(lines)
    changed = 0
    for first, last in reversed(blocks(lines)):
        body = lines[first:last]
        cmds = [k for k, line in enumerate(body) if line.startswith("$ ")]
        out_body: list[str] = []
        for n, k in enumerate(cmds):
            end = cmds[n + 1] if n + 1 < len(cmds) else len(body)
            cmd = body[k][2:].split("  #")[0].strip()
            shown = "\n".join(body[k + 1:end])
            out_body.append(body[k])
            if args.only not in cmd or any(s in cmd for s in SKIP):
                out_body.extend(body[k + 1:end])
                print(f"skip   {cmd}")
                continue
            got = run(cmd)
            same = _mask(got) == _mask(shown)
            print(f"{'same  ' if same else 'DIFFER'} {cmd}", flush=True)
            if not same:
                changed += 1
                if not args.update:
                    print("  --- README\n  " + shown.replace("\n", "\n  ")
                          + "\n  --- now\n  " + got.replace("\n", "\n  "))
            out_body.extend((got if args.update else shown).split("\n") if (got or shown)
                            else [])
        new[first:last] = out_body
    if args.update and changed:
        README.write_text("\n".join(new), encoding="utf-8")
        print(f"updated {changed} output block(s) in {README}")
    return 1 if changed and not args.update else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
