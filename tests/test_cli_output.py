"""Every output format of every command has one shape: `--FORMAT FILE` writes FILE, `--FORMAT -` prints
it (kit.cli.output.output_options); a path that cannot be written is refused in one line before any work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fixtures.cli import run_main
from test_index_fixtures import make_bundle

RESULTS = Path(__file__).parent / "fixtures" / "results"
A, B = (str(RESULTS / f"fixture-host-{x}.results.json") for x in "ab")
FORMAT_OPTIONS = {"--json", "--csv", "--markdown", "--html"}


def _page(text: str) -> str:
    """An HTML page without the minute it was made (its footer)."""
    return re.sub(r"Made by mpkit \S+ on [^.]* UTC\.", "Made by mpkit", text)


def test_markdown_to_a_file_writes_it_and_the_tables_still_print(tmp_path, capsys, monkeypatch):
    """`kit compare a b --markdown out.md`, as a new user tries it after the README."""
    out_md = tmp_path / "out.md"
    code, out, err = run_main(["compare", A, B, "--markdown", str(out_md)], capsys, monkeypatch)
    assert code == 0, err
    assert f"Markdown: {out_md}" in err.splitlines()
    printed = run_main(["compare", A, B, "--markdown", "-"], capsys, monkeypatch)[1]
    assert out_md.read_text() == printed and printed.startswith("#")
    assert out == run_main(["compare", A, B], capsys, monkeypatch)[1]  # the tables, as without the option


@pytest.mark.parametrize("option", ["--json", "--csv", "--markdown", "--html"])
def test_each_format_of_compare_writes_to_its_file_what_dash_prints(option, tmp_path, capsys, monkeypatch):
    target = tmp_path / f"cmp.{option[2:]}"
    code, tables, err = run_main(["compare", A, B, option, str(target)], capsys, monkeypatch)
    assert code == 0, err
    code, printed, _ = run_main(["compare", A, B, option, "-"], capsys, monkeypatch)
    assert code == 0 and printed and printed != tables
    assert _page(target.read_text()) == _page(printed)


def test_several_formats_go_to_their_files_at_once_and_one_to_stdout(tmp_path, capsys, monkeypatch):
    files = {opt: tmp_path / f"c.{opt[2:]}" for opt in ("--csv", "--markdown", "--html")}
    args = ["compare", A, B, "--json", "-"] + [x for opt, f in files.items() for x in (opt, str(f))]
    code, out, err = run_main(args, capsys, monkeypatch)
    assert code == 0, err
    assert json.loads(out)["rows"]
    for opt, f in files.items():
        assert _page(f.read_text()) == _page(run_main(["compare", A, B, opt, "-"], capsys, monkeypatch)[1])


def test_two_formats_to_stdout_are_one_usage_error(capsys, monkeypatch):
    code, out, err = run_main(["compare", A, B, "--json", "-", "--csv", "-"], capsys, monkeypatch)
    assert code == 2 and out == ""
    assert "--csv - and --json -: only one format can go to stdout" in err and "Traceback" not in err


def test_a_format_without_its_file_is_one_usage_error(capsys, monkeypatch):
    code, out, err = run_main(["compare", A, B, "--json"], capsys, monkeypatch)
    assert code == 2 and out == ""
    assert "'--json' requires an argument" in err and "Traceback" not in err


@pytest.mark.parametrize("option", ["--json", "--csv", "--markdown", "--html"])
def test_a_path_that_cannot_be_written_is_refused_before_any_work(option, tmp_path, capsys, monkeypatch):
    """Refused before the inputs are read: a missing bundle would otherwise be the error (exit 5)."""
    (tmp_path / "file").write_text("a file, not a folder")
    for target, says in ((tmp_path, "is a folder, not a file"), (tmp_path / "file" / "x", "is a file, not a folder")):
        code, out, err = run_main(["compare", str(tmp_path / "missing.tar.gz"), B, option, str(target)], capsys,
                                  monkeypatch)
        assert code == 2 and out == "", err
        assert f"error: {option} {target}: " in err and says in err and "Traceback" not in err


def test_a_bundle_taken_for_the_output_file_is_refused_and_left_as_it_is(tmp_path, capsys, monkeypatch):
    """`kit compare --json a.tar.gz b.tar.gz` (the old bare --json first) would write the JSON over a.tar.gz."""
    a = make_bundle(tmp_path, "fixture-a", 0)
    b = make_bundle(tmp_path, "fixture-b", 1)
    before = a.read_bytes()
    code, out, err = run_main(["compare", "--json", str(a), str(b)], capsys, monkeypatch)
    assert code == 2 and out == ""
    assert f"--json {a}: that is a bundle's name" in err and "--json -" in err
    assert a.read_bytes() == before


def test_the_next_option_taken_for_the_file_is_refused_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """`kit compare a b --json --verbose` (the old bare --json): not a file named --verbose."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(["compare", A, B, "--json", "--verbose"], capsys, monkeypatch)
    assert code == 2 and out == ""
    assert "--json --verbose: that is an option, not a file" in err and "--json - --verbose" in err
    assert list(tmp_path.iterdir()) == []


def _commands(group, prefix=()):
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # a group (Typer's own copy of Click's class)
            yield from _commands(cmd, prefix + (name,))
        else:
            yield " ".join(prefix + (name,)), cmd


def test_every_format_option_of_every_command_takes_a_file_or_dash():
    import typer

    from kit.cli.main import app

    seen = {}
    for name, cmd in _commands(typer.main.get_command(app)):
        for param in cmd.params:
            for opt in FORMAT_OPTIONS & set(param.opts):
                seen.setdefault(name, []).append(opt)
                assert not getattr(param, "is_flag", False), f"kit {name} {opt} is a flag"
                assert param.metavar == "FILE|-", f"kit {name} {opt}"
                assert "to FILE, or print it with -" in param.help, f"kit {name} {opt}"
    assert {n: sorted(o) for n, o in seen.items()} == {
        "compare": ["--csv", "--html", "--json", "--markdown"], "doctor": ["--json"], "data info": ["--json"],
        "explain": ["--json"], "image list": ["--json"], "index list": ["--json"], "index history": ["--json"]}


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("index")
    bundles = [make_bundle(root, "fixture-node000", 0), make_bundle(root, "fixture-node000", 1, speed=0.9)]
    index = root / "index.sqlite"
    from kit.index.db import open_index
    from kit.index.ingest import add_bundles

    con = open_index(index, create=True)
    assert {o.outcome for o in add_bundles(con, bundles)} == {"added"}
    con.close()
    return index


@pytest.mark.parametrize("command", [
    ["index", "list"], ["index", "history", "--host", "fixture-node000"], ["data", "info"]])
def test_the_index_and_data_views_write_to_their_file_what_dash_prints(command, index, tmp_path, capsys, monkeypatch):
    args = command + (["--index", str(index)] if command[0] == "index" else ["--data-dir", str(tmp_path / "data")])
    target = tmp_path / "view.json"
    code, tables, err = run_main(args + ["--json", str(target)], capsys, monkeypatch)
    assert code == 0, err
    assert f"JSON: {target}" in err
    code, printed, _ = run_main(args + ["--json", "-"], capsys, monkeypatch)
    assert code == 0 and json.loads(printed)
    assert target.read_text() == printed
    assert tables == run_main(args, capsys, monkeypatch)[1]  # the tables, as without the option
