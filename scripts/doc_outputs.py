"""The docs' copies of what a command prints, checked against (or rewritten from) what it prints today.

A block in README.md, docs/*.md or references/**/README.md that shows a command's output names the
command in an HTML comment on the line before it, and is either a fenced block (terminal text):

    <!-- output: kit explain references/h200/REF.tar.gz --cell 'cifar/resnet18/*/fastai' -->
    ```
    what it prints
    ```

or Markdown the command prints itself (tables), up to a closing comment:

    <!-- output: python scripts/perf_table.py --suite references/h200/REF.tar.gz -->
    | ... |
    <!-- /output -->

    python scripts/doc_outputs.py            # check: exit 1, naming each block that differs
    python scripts/doc_outputs.py --write    # rewrite every block from its command

A command is `kit ...` (this checkout's kit, ``python -m kit``) or `python scripts/...` (this
interpreter), run from the repository root with a 120-column terminal and no colour; lines lose their
trailing spaces. tests/test_docs.py runs the check, so every figure in such a block is what today's kit
prints from the bundle the block names: replacing a shipped reference and running --write updates them
all, and a change that alters what a command prints fails the tests until the docs say it too.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- output: (?P<command>.+?) -->$")
END = "<!-- /output -->"
FENCE = "```"
#: the terminal the commands print for (rich reads COLUMNS)
COLUMNS = 120


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the marker
    command: str
    start: int  # index of the block's first content line
    end: int  # index one past its last content line
    text: str  # the content as the file has it


def doc_files(root: Path = ROOT) -> list[Path]:
    return sorted([root / "README.md", *(root / "docs").glob("*.md"), *(root / "references").rglob("README.md")])


def blocks(path: Path) -> list[Block]:
    """The marked blocks of one Markdown file (ValueError for a marker with no block after it)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        m = MARKER.match(line.strip())
        if not m:
            continue
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{i + 1}"
        if i + 1 < len(lines) and lines[i + 1].startswith(FENCE):
            close = next((j for j in range(i + 2, len(lines)) if lines[j].startswith(FENCE)), None)
            if close is None:
                raise ValueError(f"{where}: the fenced block after the marker is never closed")
            start, end = i + 2, close
        else:
            close = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == END), None)
            if close is None:
                raise ValueError(f"{where}: no fenced block after the marker and no {END} closing it")
            start, end = i + 1, close
        out.append(Block(path, i + 1, m.group("command"), start, end, "\n".join(lines[start:end])))
    return out


def argv(command: str) -> list[str]:
    """The command as this checkout runs it (ValueError for anything but kit or a script of ours)."""
    words = shlex.split(command)
    if words[:1] == ["kit"]:
        return [sys.executable, "-m", "kit", *words[1:]]
    if words[:1] == ["python"] and len(words) > 1 and words[1].startswith("scripts/"):
        return [sys.executable, *words[1:]]
    raise ValueError(f"{command!r}: a marked command is `kit ...` or `python scripts/...`")


def output(command: str) -> str:
    """What ``command`` prints today, as a block holds it."""
    env = dict(os.environ, COLUMNS=str(COLUMNS), LINES="50", NO_COLOR="1", TERM="dumb")
    env.pop("FORCE_COLOR", None)
    done = subprocess.run(argv(command), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{command!r} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return "\n".join(line.rstrip() for line in done.stdout.rstrip("\n").splitlines())


def stale(files: list[Path] | None = None) -> list[tuple[Block, str]]:
    """Every marked block whose content is not what its command prints today, with today's output."""
    found = []
    for path in files or doc_files():
        for b in blocks(path):
            now = output(b.command)
            if now != b.text:
                found.append((b, now))
    return found


def write(found: list[tuple[Block, str]]) -> None:
    """Replace each stale block's content with today's output (bottom up, so line numbers hold)."""
    for path in {b.path for b, _ in found}:
        lines = path.read_text(encoding="utf-8").splitlines()
        for b, now in sorted((x for x in found if x[0].path == path), key=lambda x: -x[0].start):
            lines[b.start:b.end] = now.splitlines()
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the stale blocks instead of failing")
    ap.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README.md, docs/, references/)")
    args = ap.parse_args()
    found = stale([p.resolve() for p in args.files] or None)
    for b, _ in found:
        print(f"{b.path.relative_to(ROOT)}:{b.line}: not what `{b.command}` prints today", file=sys.stderr)
    if args.write:
        write(found)
        print(f"{len(found)} block(s) rewritten", file=sys.stderr)
        return 0
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
