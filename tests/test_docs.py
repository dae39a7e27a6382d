"""The documentation: a short README, every command documented, no dead link, no tracker number.

The README is the front door (at most 150 lines, one screen from its title to the first result); the
depth is in docs/, one click away. Links are
checked as GitHub renders them: relative file links against the repository, ``#anchors`` against the
target's headings with GitHub's slug rules. Internal tracker numbers (the word issue with a number, or a
number after "#") mean nothing to a user, so none may appear where a user reads (README, docs, reference
READMEs, CLI help, path names), nor in the code and the tests, which say what is and why.
"""

from __future__ import annotations

import os
import sys
import re
from pathlib import Path

import pytest
import typer

from kit.cli.main import app

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_README_LINES = 150

#: Pages that other branches of this change add (the fleet views' docs/compare.md, the results index's
#: docs/results-index.md). While such a file is missing, a link to it is not counted as dead; once it
#: exists it is checked like any other. Empty this set once those branches are merged.
PENDING: set[str] = set()  # files a branch links before another branch adds them; empty on main

#: a number as this file's examples write it (so that the guard reads this file too, and finds none)
N = "17"

TRACKER = [
    re.compile(r"\bissues? ?#?[0-9]{1,3}\b", re.IGNORECASE),
    # "#17" as a tracker reference: not an HTML entity (&#39;), a URL fragment, or a hex colour
    re.compile(r"(?<![\w&/#])#[0-9]{1,3}\b(?![0-9a-fA-F])"),
]

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"`[^`]*`")


def _prose_lines(text: str):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: markup dropped, lower case, punctuation removed
    (letters, digits, spaces, hyphens and underscores kept), each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = github_slug(m.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links_of(path: Path):
    """(line number, target) of every Markdown link outside code."""
    for n, line in _prose_lines(path.read_text(encoding="utf-8")):
        for m in LINK.finditer(INLINE_CODE.sub("", line)):
            yield n, m.group(1)


def dead_links(path: Path) -> list[str]:
    dead = []
    for n, target in links_of(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto:, ...
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        rel = os.path.relpath(dest, REPO).replace(os.sep, "/")
        where = f"{path.relative_to(REPO)}:{n}: {target}"
        if not dest.exists():
            if rel not in PENDING:
                dead.append(f"{where} (no such file)")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors_of(dest):
            dead.append(f"{where} (no heading with that anchor in {rel})")
    return dead


def linked_docs(page: Path) -> set[Path]:
    """The Markdown pages that ``page`` links to (existing ones)."""
    out = set()
    for _, target in links_of(page):
        file_part = target.partition("#")[0]
        if not file_part or re.match(r"^[a-z][a-z0-9+.-]*:", file_part, re.IGNORECASE):
            continue
        dest = (page.parent / file_part).resolve()
        if dest.suffix == ".md" and dest.is_file():
            out.add(dest)
    return out


def _commands(group, prefix: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        path = prefix + (name,)
        yield path, cmd
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, path)


def all_commands():
    return list(_commands(typer.main.get_command(app)))


def doc_pages() -> list[Path]:
    return [README] + sorted((REPO / "docs").rglob("*.md"))


# --- the README ---------------------------------------------------------------------------------


def test_the_readme_is_at_most_150_lines():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_README_LINES, f"README.md has {n} lines; move depth to docs/ (at most {MAX_README_LINES})"


def test_the_readme_says_what_the_first_runs_download_and_take():
    """Promises a newcomer checks: the first `make test` needs the package index (torch is PyPI's CUDA
    build), the pair to install without the PyTorch index is the pinned one, and the cpu image's size
    and disk are what was measured (kit/facts/stacks.py)."""
    from kit.facts.stacks import BUILD_DISK_PEAKS

    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "no network needed" not in text and "no network needed" not in (REPO / "Makefile").read_text()
    assert "the first run downloads torch, about 3.2 GB" in text
    pins = dict(line.split("==") for line in (REPO / "requirements-test.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert f"pip install torch=={pins['torch']} torchvision=={pins['torchvision']}" in text
    # the CPU-only build, from PyTorch's own index, next to the PyPI pair
    assert "pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu" in text
    cpu = BUILD_DISK_PEAKS["cpu"]
    assert f"makes a {cpu.image_bytes / 1e9:.2f} GB image" in text
    assert f"needs about {round(cpu.peak_bytes / 1e9)} GB of free disk while it builds" in text


def test_every_page_of_docs_is_one_click_from_the_readme():
    linked = {p.relative_to(REPO).as_posix() for p in linked_docs(README)}
    missing = [p.relative_to(REPO).as_posix() for p in sorted((REPO / "docs").glob("*.md"))
               if p.relative_to(REPO).as_posix() not in linked]
    assert not missing, f"docs pages the README does not link: {missing}"


def test_every_command_is_in_the_readme_or_a_page_it_links():
    pages = [README] + sorted(linked_docs(README))
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    missing = [" ".join(p) for p, _ in all_commands() if f"kit {' '.join(p)}" not in text]
    assert not missing, f"commands in neither README.md nor a page it links: {missing}"


# --- links ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", doc_pages() + sorted((REPO / "references").rglob("*.md")),
                         ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_link_is_dead(page):
    dead = dead_links(page)
    assert not dead, "dead links:\n" + "\n".join(dead)


def test_the_slug_rules_are_githubs():
    assert github_slug("Behind a proxy: CA certificates") == "behind-a-proxy-ca-certificates"
    assert github_slug("The fastai learner (`--learner`)") == "the-fastai-learner---learner"
    assert github_slug("Cell isolation (Apex's patches of torch)") == "cell-isolation-apexs-patches-of-torch"
    assert github_slug("Speed beside the original (H200)") == "speed-beside-the-original-h200"
    assert github_slug("[docs](x.md) and `kit run`") == "docs-and-kit-run"


def test_a_dead_link_and_a_wrong_anchor_are_found(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Two words\n\n## Two words\n", encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text("[ok](docs/a.md#two-words-1) [gone](docs/b.md) [bad](docs/a.md#three)\n"
                    "```\n[in code](nowhere.md)\n```\n[web](https://example.com/x) `[inline](nowhere.md)`\n",
                    encoding="utf-8")
    dead = dead_links(page)
    assert len(dead) == 2 and "docs/b.md" in dead[0] and "#three" in dead[1], dead


# --- tracker numbers ------------------------------------------------------------------------------


def tracker_hits(text: str) -> list[str]:
    return [m.group(0) for rx in TRACKER for m in rx.finditer(text)]


def test_the_tracker_pattern_finds_what_it_should():
    for bad in (f"issue {N}'s targets", f"Issue {N}", f"issues {N}", f"references/h200/issue{N}-cells", f"see #{N}",
                f"(#{N})"):
        assert tracker_hits(bad), bad
    for fine in ("&#39;", "color #333333", "a.md#two-words", "an issue with the driver", "issues", "1,234 issues"):
        assert not tracker_hits(fine), fine


def _user_text_files():
    yield README
    yield from sorted((REPO / "docs").rglob("*.md"))
    yield from sorted((REPO / "references").rglob("*.md"))  # the READMEs and the tables beside them


@pytest.mark.parametrize("path", list(_user_text_files()), ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_tracker_number_where_a_user_reads(path):
    hits = [f"{n}: {h}" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            for h in tracker_hits(line)]
    assert not hits, f"{path.relative_to(REPO)} names internal tracker numbers: {hits}"


#: in code, "#555" in a string is a colour (CSS, SVG), and "hook #0" a count in a quoted message (tracker numbers
#: start at 1): a tracker number there is the word issue with a number, or a bare "#" and a number from 1
CODE_TRACKER = [TRACKER[0], re.compile(r"(?<![\w&/#\"'])#[1-9][0-9]{0,2}\b(?![0-9a-fA-F;\"'])")]


def test_no_tracker_number_in_the_code_or_the_tests():
    """Docstrings, comments and test names say what is and why; which tracker entry asked for it is git's
    history."""
    example = f"see #{N}, issue {N}'s fix; color: #555; '#222'; error running hook #0"
    assert [m.group(0) for rx in CODE_TRACKER for m in rx.finditer(example)] == [f"issue {N}", f"#{N}"]
    files = [*sorted((REPO / "kit").rglob("*.py")), *sorted((REPO / "tests").rglob("*.py"))]
    hits = [f"{path.relative_to(REPO).as_posix()}:{n}: {m.group(0)}" for path in files
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            for rx in CODE_TRACKER for m in rx.finditer(line)]
    assert not hits, f"tracker numbers in kit/ or tests/: {hits}"


#: a path to what the project keeps beside its checkout, which a user's checkout does not have
OUTSIDE = re.compile(r"\.\./shared\b|\bshared/(vendor|data)\b|field-notes\.md")


def test_nothing_a_user_reads_and_no_code_or_test_points_outside_the_project():
    """The kit, its tests (their comments and skip reasons) and the docs cite a primary source, or say what a
    user must provide and where; never a folder that lies beside the project's own checkout only."""
    example = "see " + "/".join(["..", "shared", "vendor", "apex"])  # (joined here, so that this file passes)
    assert OUTSIDE.search(example) and not OUTSIDE.search("the data shared by two runs")
    files = [README, *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "kit").rglob("*.py")),
             *sorted((REPO / "tests").rglob("*.py"))]
    hits = [f"{path.relative_to(REPO).as_posix()}:{n}" for path in files
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, f"paths outside the project: {hits}"


def test_no_tracker_number_in_the_cli_help():
    hits = []
    for path, cmd in [((), typer.main.get_command(app))] + all_commands():
        texts = [cmd.help or "", cmd.short_help or "", getattr(cmd, "epilog", None) or ""]
        texts += [getattr(p, "help", None) or "" for p in cmd.params]
        hits += [f"kit {' '.join(path)}: {h}" for t in texts for h in tracker_hits(t)]
    assert not hits, hits


def test_no_tracker_number_in_a_path_name():
    skip = {".git", ".venv", "__pycache__", ".pytest_cache", "node_modules", "results", "data", "build", "dist"}
    hits = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in skip and not d.endswith(".egg-info")]
        for name in dirs + files:
            if tracker_hits(name.replace("_", " ").replace("-", " ")) or tracker_hits(name):
                hits.append(os.path.relpath(os.path.join(root, name), REPO))
    assert not hits, f"paths named after tracker numbers: {hits}"


# --- commands shown -------------------------------------------------------------------------------

FORMAT_OPTIONS = ("--json", "--csv", "--markdown", "--html")


def format_options_without_a_target(text: str) -> list[str]:
    """The kit command lines of ``text``'s code blocks that give a format option no FILE or ``-``."""
    found, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        command = line.split("  #")[0].split()
        if not fenced or command[:1] != ["kit"]:
            continue
        for i, word in enumerate(command):
            value = command[i + 1] if i + 1 < len(command) else ""
            ends = not value or value[0] in "|;&<>" or value.startswith("2>")  # the shell's, not the option's
            if word in FORMAT_OPTIONS and (ends or (value.startswith("-") and value != "-")):
                found.append(f"{n}: {line.strip()}")
    return found


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_format_option_shown_in_a_command_has_its_file_or_dash(page):
    assert format_options_without_a_target("```\nkit compare a b --json\nkit doctor --json -\nkit compare a b --csv > x\n```\n") == [
        "2: kit compare a b --json", "4: kit compare a b --csv > x"]
    bad = format_options_without_a_target(page.read_text(encoding="utf-8"))
    assert not bad, "a format option needs FILE or - (kit.cli.output):\n" + "\n".join(bad)


def test_every_marked_command_output_in_the_docs_is_what_the_command_prints_today(doc_outputs):
    """scripts/doc_outputs.py's check over README.md, docs/ and references/: each block marked
    `<!-- output: COMMAND -->` holds what COMMAND prints from this checkout (the fix:
    `python scripts/doc_outputs.py --write`)."""
    mod = doc_outputs
    marked = [b for p in mod.doc_files() for b in mod.blocks(p)]
    assert len(marked) >= 4, "the README's bundle show, docs/explain.md's and docs/performance.md's blocks are marked"
    stale = mod.stale()
    assert not stale, "\n".join(f"{b.path.relative_to(REPO)}:{b.line}: not what `{b.command}` prints today; "
                                "run python scripts/doc_outputs.py --write" for b, _ in stale)


def test_every_shipped_bundles_report_beside_it_is_what_the_kit_renders_today(doc_outputs):
    """scripts/doc_outputs.py's check of references/: beside each bundle X.tar.gz, X.report.html is its
    report as `kit bundle report` renders it from the bundle today (the fix: python scripts/doc_outputs.py
    --write)."""
    stale = doc_outputs.stale_reports()
    assert not stale, "\n".join(f"{p.relative_to(REPO)}: " + ("its bundle is gone" if now is None else "not what `kit bundle "
                                 "report` renders today") + "; run python scripts/doc_outputs.py --write" for p, now in stale)


def test_the_performance_pages_speedup_chart_is_the_h100_references_own():
    """docs/performance.md leads with the H100 reference and shows its chart (charts/cifar-torch-speedup.svg in
    its bundle): a new reference brings its own, copied to docs/img/h100-speedup-torch.svg."""
    from kit.bundle.merge import reference_bundles
    from kit.bundle.safe_open import open_bundle

    (bundle,) = reference_bundles("h100")
    page = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    assert page.index("## On an H100") < page.index("## On H200s") and "](img/h100-speedup-torch.svg)" in page
    assert (REPO / "docs" / "img" / "h100-speedup-torch.svg").read_bytes() == \
        open_bundle(bundle).files["charts/cifar-torch-speedup.svg"], \
        f"copy charts/cifar-torch-speedup.svg of {bundle.name} to docs/img/h100-speedup-torch.svg"


def test_the_h200_reference_is_labelled_an_older_measurement_wherever_it_is_shown():
    for path in (REPO / "references" / "h200" / "README.md", REPO / "docs" / "performance.md", README):
        text = " ".join(path.read_text(encoding="utf-8").split())
        assert "older measurement" in text and ("older method" in text or "made before cells recorded how" in text), path


def _readme_prose() -> str:
    """The README's text outside code blocks and comments, its lines joined (a sentence may span lines)."""
    text = re.sub(r"<!--.*?-->", "", README.read_text(encoding="utf-8"), flags=re.S)
    return " ".join(line for _, line in _prose_lines(text))


def _first_screen() -> str:
    """The README from its title to its first section after the headline table ("What a run gives you")."""
    text = README.read_text(encoding="utf-8")
    return text[:text.index("## What a run gives you")]


def test_the_readmes_figures_and_example_are_the_h100_references_and_checked():
    """The headline table and the `kit bundle show` example are marked outputs of the H100 reference (what
    `--against h100` reads), so scripts/doc_outputs.py keeps every figure what today's kit prints; the H200
    reference's figures are not on the front door."""
    from kit.bundle.merge import reference_bundles

    text = README.read_text(encoding="utf-8")
    (h100,) = reference_bundles("h100")
    assert "<!-- output: python scripts/headline_table.py h100 -->" in _first_screen()
    assert f"<!-- output: COLUMNS=100 kit bundle show references/h100/{h100.name} " in text
    h200_figures = ("4,831", "57,294", "2.85×", "264,370", "7.62×", "101,212")  # the H200 reference's old headline
    assert not [f for f in h200_figures if f in text]
    assert "Inductor" not in text and "learner scratch" not in text and "method unknown" not in text


def test_the_h100_checks_exception_is_in_the_same_sentence_as_its_range():
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z`])", _readme_prose())
    (sentence,) = [x for x in sentences if "0.989–1.018×" in x]
    assert "1.46×" in sentence and "1.14×" in sentence and "fp16-master" in sentence and "host-paced" in sentence


@pytest.mark.parametrize("term, definition", [
    ("engine", "*engine* (the training loop that runs it)"),
    ("cell", "*cell*, measured 3 times"),
    ("stack", "*stack* that fits the driver (CUDA, torch and fastai versions pinned together"),
    ("synthetic data", "*synthetic data* (generated in the real data sets' shapes"),
    ("host-paced", "host-paced: their GPU idles"),
    ("bundle", "*bundle*, `results/"),
    ("r7", "(`r7`: the engine's revision"),
])
def test_each_term_of_the_readme_is_defined_where_it_first_appears(term, definition):
    """A newcomer reads the README top to bottom: a term's first use in its prose is its definition."""
    prose = _readme_prose()
    first = re.search(r"(?<![\w-])\*?`?" + re.escape(term) + r"(?![\w-])", prose)
    assert first, term
    at = prose.find(definition)
    assert at >= 0, f"the README no longer defines {term!r} as {definition!r}"
    assert at <= first.start() <= at + len(definition), (
        f"{term!r} is used before its definition: {prose[max(0, first.start() - 80):first.start() + 40]!r}")
