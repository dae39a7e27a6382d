"""scripts/doc_outputs.py: the docs' copies of what a command prints are what it prints today (the
check over the repository is in tests/test_docs.py); here its parsing, its refusals and its rewrite,
on Markdown files built in tmp_path."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

SHOW = "kit bundle show references/h200/vm_NVIDIA-H200_native_20261130-141944.tar.gz --cell 'lstm/apex-2018/fp32/kit'"


def test_a_fenced_and_a_markdown_block_are_found_checked_and_rewritten(doc_outputs, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"Intro.\n\n<!-- output: {SHOW} -->\n```\nan old copy\n```\n\nBetween.\n\n"
                   "<!-- output: kit --version -->\nkit 0.0.0\n<!-- /output -->\nEnd.\n", encoding="utf-8")
    found = doc_outputs.stale([doc])
    assert [(b.line, b.text) for b, _ in found] == [(3, "an old copy"), (10, "kit 0.0.0")]
    doc_outputs.write(found)
    text = doc.read_text(encoding="utf-8")
    assert "an old copy" not in text and "lstm/apex-2018/fp32/kit" in text and "99,936" in text
    assert text.startswith("Intro.\n\n<!-- output: ") and text.endswith("<!-- /output -->\nEnd.\n")
    assert all(line == line.rstrip() for line in text.splitlines())
    assert doc_outputs.stale([doc]) == []  # written once, then what the commands print


def test_a_marker_without_its_block_is_named_with_its_line(doc_outputs, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- output: kit --version -->\nno closing comment\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"doc.md:1: no fenced block"):
        doc_outputs.blocks(doc)
    doc.write_text("<!-- output: kit --version -->\n```\nnever closed\n", encoding="utf-8")
    with pytest.raises(ValueError, match="never closed"):
        doc_outputs.blocks(doc)


@pytest.mark.parametrize("command", ["rm -rf /", "python -c 'print(1)'", "bash scripts/reference_run.sh"])
def test_only_kit_and_our_scripts_are_run(doc_outputs, command):
    with pytest.raises(ValueError, match="kit ...` or `python scripts"):
        doc_outputs.argv(command)


def test_a_command_that_fails_says_so(doc_outputs):
    with pytest.raises(RuntimeError, match="exited 2"):
        doc_outputs.output("kit bundle show no-such-bundle.tar.gz")


def test_a_shipped_bundles_report_is_found_missing_stale_or_orphaned_and_rendered_again(doc_outputs, tmp_path):
    """The reports beside the bundles under references/: one missing, one changed by hand and one whose
    bundle is gone are each found; --write renders the first two from their bundles and removes the third;
    the time a page was rendered (its footer) is not a difference."""
    repo = Path(__file__).resolve().parents[1]
    small = repo / "references" / "h100" / "window-trials"
    (tmp_path / "references" / "a").mkdir(parents=True)
    bundles = [shutil.copy(b, tmp_path / "references" / "a" / b.name) for b in sorted(small.glob("*.tar.gz"))]
    assert len(bundles) == 2
    found = doc_outputs.stale_reports(tmp_path)
    assert sorted(p.name for p, _ in found) == sorted(doc_outputs.beside(Path(b)).name for b in bundles)
    orphan = tmp_path / "references" / "a" / "gone.report.html"
    orphan.write_text("<html></html>")
    doc_outputs.write_reports(doc_outputs.stale_reports(tmp_path))
    assert not orphan.exists() and doc_outputs.stale_reports(tmp_path) == []
    page = doc_outputs.beside(Path(bundles[0]))
    text = page.read_text(encoding="utf-8")
    page.write_text(re.sub(r"on \d{4}-\d\d-\d\d \d\d:\d\d UTC", "on 1999-01-01 00:00 UTC", text), encoding="utf-8")
    assert doc_outputs.stale_reports(tmp_path) == []  # only the time it was rendered differs
    page.write_text(text.replace("<h2>Cells</h2>", "<h2>Cells, edited</h2>"), encoding="utf-8")
    assert [p for p, _ in doc_outputs.stale_reports(tmp_path)] == [page]


def test_a_marked_command_may_ask_for_a_narrower_terminal(doc_outputs):
    assert doc_outputs.columns("kit --version") == (120, "kit --version")
    assert doc_outputs.columns("COLUMNS=100 kit bundle show x.tar.gz") == (100, "kit bundle show x.tar.gz")
    assert doc_outputs.argv("COLUMNS=100 kit --version")[1:] == ["-m", "kit", "--version"]
    with pytest.raises(ValueError, match="kit ...` or `python scripts"):
        doc_outputs.argv("COLUMNS=100 rm -rf /")
