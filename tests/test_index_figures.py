"""The index stores each run's figures (kit.compare.figures, computed at ingest) and `kit compare
--index` reads them instead of the results: every view of `kit compare` is the same from the index
as from the tarballs, on the committed H200 references (measured runs of every suite: CIFAR with
its batch curves, GPT and the LSTM, in throughput and convergence mode, on both LSTM engines)."""

from __future__ import annotations

import json
import re
import sqlite3
import zlib
from pathlib import Path

import pytest

from fixtures.cli import run_main

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "references" / "h200"
#: pairs compared as columns (their charts drawn), and all of them at once as a fleet
PAIRS = {
    "cifar": ["vm_NVIDIA-H200_native_20261130-141944.tar.gz", "batch-search-224px/vm_NVIDIA-H200_native_20261130-142343.tar.gz"],
    "curves": ["curve/curve-32px/vm_NVIDIA-H200_native_20261201-232729.tar.gz",
               "curve/curve-224px/vm_NVIDIA-H200_native_20261201-233203.tar.gz"],
    "gpt-convergence": ["gpt/convergence/convergence-3pass/vm_NVIDIA-H200_native_20261202-181320.tar.gz",
                        "gpt/convergence/convergence-preset/vm_NVIDIA-H200_native_20261202-181550.tar.gz"],
    "lstm": ["lstm/convergence/vm_NVIDIA-H200_native_20261203-083019.tar.gz",
             "lstm/bench/vm_NVIDIA-H200_native_20261203-082406.tar.gz"],
    "mixed": ["gpt/throughput/vm_NVIDIA-H200_native_20261202-150450.tar.gz",
              "perf/lstm-tc/vm_NVIDIA-H200_native_20261201-231455.tar.gz"],
}
ALL = sorted({p for pair in PAIRS.values() for p in pair})


@pytest.fixture(scope="module")
def indexes(tmp_path_factory) -> dict:
    """One index per pair and one of all, made by `kit index add` from the references."""
    missing = [p for p in ALL if not (H200 / p).is_file()]
    assert not missing, f"references moved: {missing}"
    from kit.index.db import open_index
    from kit.index.ingest import add_bundles

    root = tmp_path_factory.mktemp("figures")
    out = {}
    for name, files in list(PAIRS.items()) + [("all", ALL)]:
        con = open_index(root / f"{name}.sqlite", create=True)
        assert {o.outcome for o in add_bundles(con, [H200 / p for p in files])} == {"added"}
        con.close()
        out[name] = root / f"{name}.sqlite"
    return out


def _in_index_order(index: Path) -> list[str]:
    con = sqlite3.connect(index)
    try:
        return [r[0] for r in con.execute("SELECT path FROM bundles ORDER BY run_started IS NULL, run_started, id")]
    finally:
        con.close()


def _views(args: list[str], capsys, monkeypatch, tmp_path: Path, tag: str) -> dict:
    out = {}
    for view, extra in (("json", ["--json", "-"]), ("csv", ["--csv", "-"]), ("markdown", ["--markdown", "-", "--verbose"]),
                        ("terminal", ["--verbose"]), ("rows", ["--metric", "speedup"]),
                        ("groups", ["--group-by", "gpu", "--json", "-"])):
        code, stdout, stderr = run_main(args + extra, capsys, monkeypatch)
        assert code == 0, stderr
        out[view] = stdout
    page = tmp_path / f"{tag}.html"
    assert run_main(args + ["--html", str(page)], capsys, monkeypatch)[0] == 0
    # the footer says when the page was made (to the minute): not a difference between the inputs
    out["html"] = re.sub(r"Made by mpkit (\S+) on [0-9-]+ [0-9:]+ UTC", r"Made by mpkit \1 on (date)", page.read_text())
    return out


def _same_but_kind(a: str, b: str) -> None:
    x, y = json.loads(a), json.loads(b)
    for s, t in zip(x["sources"], y["sources"]):
        assert s.pop("kind") == "index" and t.pop("kind") == "bundle"
    assert x == y


@pytest.mark.parametrize("name", list(PAIRS) + ["all"])
def test_every_view_from_the_index_is_the_view_of_the_tarballs(name, indexes, capsys, monkeypatch, tmp_path):
    index = indexes[name]
    files = _in_index_order(index)  # the index's baseline is its earliest run: the same first here
    from_index = _views(["compare", "--index", str(index)], capsys, monkeypatch, tmp_path, "index")
    from_files = _views(["compare", *files], capsys, monkeypatch, tmp_path, "files")
    _same_but_kind(from_index.pop("json"), from_files.pop("json"))
    _same_but_kind(from_index.pop("groups"), from_files.pop("groups"))
    for view in from_index:
        assert from_index[view] == from_files[view], view
    if name != "all":  # a pair is drawn as columns with each run's charts
        assert from_index["html"].count("<svg") > 2


def test_the_stored_figures_read_back_as_computed_and_are_a_small_part_of_the_results():
    """kit.index.figures_codec: what is stored reads back equal to what kit.compare.figures computed,
    for every reference run, at a small part of its results.json."""
    from kit.bundle.safe_open import open_bundle
    from kit.results.run_files import RESULTS_NAME
    from kit.compare.figures import run_figures
    from kit.index.figures_codec import decode, encode

    for name in ALL:
        bundle = open_bundle(H200 / name)
        figures = run_figures(bundle.results)
        blob = encode(figures)
        assert decode(blob) == figures, name
        assert len(zlib.decompress(blob)) < 0.15 * len(bundle.files[RESULTS_NAME]), name
        assert [c.key for c in figures.cells] == [
            tuple(c.cell_id.split("/")) for c in bundle.results.cells], name


def _older_schema(index: Path, to: Path, version: int) -> None:
    """A copy of ``index`` as a kit of schema ``version`` left it: v3 stored the figures in their
    first form (JSON text, format 1: here a stand-in of that format, which no step reads), v2 had
    compare_z and no figures_z (its compare_z is left as this kit keeps it, empty: nothing reads it),
    v1 neither."""
    to.write_bytes(index.read_bytes())
    con = sqlite3.connect(to)
    if version == 3:
        con.execute("UPDATE bundles SET figures_z = ?", (zlib.compress(b'{"format": 1, "cells": []}'),))
    else:
        con.execute("ALTER TABLE bundles DROP COLUMN figures_z")
    if version < 2:
        con.execute("ALTER TABLE bundles DROP COLUMN compare_z")
    con.execute(f"PRAGMA user_version = {version}")
    con.commit()
    con.close()


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_index_of_an_older_schema_is_migrated_once_and_compares_the_same(indexes, capsys, monkeypatch, tmp_path,
                                                                           version):
    """An index made by an older kit (schema v1: no compare_z; v2: no figures_z; v3: the figures in
    their first form) is brought to the current schema by a command that writes (`kit index add`, here
    without a bundle), in one transaction, and says so: each run's figures computed from the
    results.json it holds; it then compares as a new one does. A read alone never migrates."""
    from kit.index import db

    old = tmp_path / f"v{version}.sqlite"
    _older_schema(indexes["lstm"], old, version)
    code, out, err = run_main(["index", "add", "--index", str(old)], capsys, monkeypatch)
    assert code == 0 and f"updated from schema v{version} to v{db.SCHEMA_VERSION}" in err, err
    code, new_json, err = run_main(["compare", "--index", str(old), "--json", "-"], capsys, monkeypatch)
    assert code == 0, err
    assert new_json == run_main(["compare", "--index", str(indexes["lstm"]), "--json", "-"], capsys, monkeypatch)[1]
    con = sqlite3.connect(old)
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
        meta = dict(con.execute("SELECT key, value FROM meta"))
        assert f"migrated_v{version}_to_v{db.SCHEMA_VERSION}" in meta
        stored = [z for (z,) in con.execute("SELECT figures_z FROM bundles")]
        new = [z for (z,) in sqlite3.connect(indexes["lstm"]).execute("SELECT figures_z FROM bundles")]
        assert len(stored) == 2 and stored == new
        assert {z for (z,) in con.execute("SELECT compare_z FROM bundles")} == {b""}
    finally:
        con.close()


def test_an_older_schema_index_that_cannot_be_written_is_one_line_naming_the_update(indexes, capsys, monkeypatch, tmp_path):
    """An older index this process may not write (a read-only file or mount: here SQLite's query_only, which
    refuses every write as a read-only file does, and holds as root too) is one line from the command
    that would update it, exit 1, and stays as it was."""
    from kit.index import db

    old = tmp_path / "v1.sqlite"
    _older_schema(indexes["lstm"], old, 1)
    before = old.read_bytes()
    connect = db.connect

    def read_only(target, uri=False):
        c = connect(target, uri)
        c.execute("PRAGMA query_only = 1")
        return c

    monkeypatch.setattr(db, "connect", read_only)
    code, out, err = run_main(["index", "add", "--index", str(old)], capsys, monkeypatch)
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 2
    assert "schema v1" in err and "needs to write it" in err and "kit index add --index" in err
    assert old.read_bytes() == before


@pytest.mark.parametrize("damage", [zlib.compress(b"[1, 2]"), b"not zlib"])
def test_a_damaged_copy_in_an_older_schema_index_is_named_after_the_migration_not_a_traceback(
        indexes, capsys, monkeypatch, tmp_path, damage):
    """A stored results.json that is not the kit's (or not even zlib) gets no figures when the index
    is migrated (by `kit index add`); the migration completes, and compare names that run's copy
    damaged (exit 4)."""
    old = tmp_path / "v2.sqlite"
    _older_schema(indexes["lstm"], old, 2)
    con = sqlite3.connect(old)
    con.execute("UPDATE bundles SET results_z = ? WHERE id = (SELECT MIN(id) FROM bundles)", (damage,))
    con.commit()
    con.close()
    assert run_main(["index", "add", "--index", str(old)], capsys, monkeypatch)[0] == 0
    code, out, err = run_main(["compare", "--index", str(old), "--json", "-"], capsys, monkeypatch)
    assert code == 4 and "is damaged" in err and "Traceback" not in err
    con = sqlite3.connect(old)
    try:  # migrated all the same
        from kit.index.db import SCHEMA_VERSION

        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert sorted(len(z) > 0 for (z,) in con.execute("SELECT figures_z FROM bundles")) == [False, True]
    finally:
        con.close()
