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
interpreter), run from the repository root with a 120-column terminal (``COLUMNS=100 kit ...``: a
narrower one) and no colour; lines lose their trailing spaces. tests/test_docs.py runs the check, so every figure in such a block is what today's kit
prints from the bundle the block names: replacing a shipped reference and running --write updates them
all, and a change that alters what a command prints fails the tests until the docs say it too.

The same goes for the reports shipped beside the bundles under references/: each bundle
``X.tar.gz`` has ``X.report.html`` beside it, its report as today's kit renders it from the bundle's
data (``kit bundle report X.tar.gz``; the report.html inside a bundle is the one rendered when it
was made). The check names each report that is missing, differs or has no bundle; --write renders
them again (and removes a report whose bundle is gone).
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
sys.path.insert(0, str(ROOT))  # the kit of this checkout renders the shipped reports
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


def columns(command: str) -> tuple[int, str]:
    """The terminal's width a marked command asks for (``COLUMNS=N`` before it), and the command."""
    m = re.match(r"^COLUMNS=(\d+)\s+(.*)$", command)
    return (int(m.group(1)), m.group(2)) if m else (COLUMNS, command)


def argv(command: str) -> list[str]:
    """The command as this checkout runs it (ValueError for anything but kit or a script of ours)."""
    words = shlex.split(columns(command)[1])
    if words[:1] == ["kit"]:
        return [sys.executable, "-m", "kit", *words[1:]]
    if words[:1] == ["python"] and len(words) > 1 and words[1].startswith("scripts/"):
        return [sys.executable, *words[1:]]
    raise ValueError(f"{command!r}: a marked command is `kit ...` or `python scripts/...`")


def output(command: str) -> str:
    """What ``command`` prints today, as a block holds it."""
    env = dict(os.environ, COLUMNS=str(columns(command)[0]), LINES="50", NO_COLOR="1", TERM="dumb")
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


def shipped_bundles(root: Path = ROOT) -> list[Path]:
    """Every bundle under references/."""
    return sorted((root / "references").rglob("*.tar.gz"))


def beside(bundle: Path) -> Path:
    """Where a shipped bundle's report is (kit.report.export.report_path: beside it)."""
    from kit.report.export import report_path

    return report_path(bundle)


def stale_reports(root: Path = ROOT) -> list[tuple[Path, str | None]]:
    """Each shipped report that is not what today's kit renders from its bundle, with what it
    renders (None: a report whose bundle is gone)."""
    from kit.bundle.safe_open import open_bundle
    from kit.report.export import REPORT_SUFFIX, bundle_report

    found: list[tuple[Path, str | None]] = []
    bundles = shipped_bundles(root)
    for bundle in bundles:
        page = beside(bundle)
        now = bundle_report(open_bundle(bundle))
        if not page.is_file() or _undated(page.read_bytes()) != _undated(now.encode("utf-8")):
            found.append((page, now))
    wanted = {beside(b) for b in bundles}
    found += [(page, None) for page in sorted((root / "references").rglob(f"*{REPORT_SUFFIX}")) if page not in wanted]
    return found


#: the footer's time of rendering (kit.report.html.page): the one part of a report that its data do not make
RENDERED_AT = re.compile(rb"(<footer>Made by mpkit [^<]*? on )\d{4}-\d\d-\d\d \d\d:\d\d UTC")


def _undated(page: bytes) -> bytes:
    """A report's bytes (bytes: a report may hold a "\\r") without the time it was rendered."""
    return RENDERED_AT.sub(rb"\1(time)", page)


def write_reports(found: list[tuple[Path, str | None]]) -> None:
    for page, now in found:
        if now is None:
            page.unlink()
        else:
            page.write_bytes(now.encode("utf-8"))


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
    ap.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README.md, docs/, references/, and "
                                                        "the reports beside the shipped bundles)")
    args = ap.parse_args()
    found = stale([p.resolve() for p in args.files] or None)
    reports = [] if args.files else stale_reports()
    for b, _ in found:
        print(f"{b.path.relative_to(ROOT)}:{b.line}: not what `{b.command}` prints today", file=sys.stderr)
    for page, now in reports:
        print(f"{page.relative_to(ROOT)}: " + ("its bundle is gone" if now is None else "missing, or not what "
              "`kit bundle report` renders from its bundle today"), file=sys.stderr)
    if args.write:
        write(found)
        write_reports(reports)
        print(f"{len(found)} block(s) and {len(reports)} report(s) rewritten", file=sys.stderr)
        return 0
    return 1 if found or reports else 0


if __name__ == "__main__":
    sys.exit(main())
