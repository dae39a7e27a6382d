"""The index stores only the part of each results.json a comparison reads (kit.compare.projection):
every view of `kit compare` is the same from the index as from the tarballs, on the committed H200
references (measured runs of every suite: CIFAR with its batch curves, GPT and the LSTM, in
throughput and convergence mode, on both LSTM engines)."""

from __future__ import annotations

import json
import re
import sqlite3
import zlib
from pathlib import Path

import pytest

from fixtures.cli import run_main
from kit.compare.projection import project

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

    root = tmp_path_factory.mktemp("projection")
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
    for view, extra in (("json", ["--json"]), ("csv", ["--csv"]), ("markdown", ["--markdown", "--verbose"]),
                        ("terminal", ["--verbose"]), ("rows", ["--metric", "speedup"]),
                        ("groups", ["--group-by", "gpu", "--json"])):
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


def test_the_projection_is_a_small_part_of_the_results():
    """What is left out is what no view reads: the H200 reference keeps a few tenths of its size,
    every cell, and each cell's identity and measures."""
    import tarfile

    with tarfile.open(H200 / PAIRS["cifar"][0]) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/results.json"))
        raw = tar.extractfile(member).read()
    full = json.loads(raw)
    slim = project(full)
    assert len(json.dumps(slim)) < 0.2 * len(raw)
    ident = ("workload", "model", "precision", "engine", "status", "params")
    assert [[c[k] for k in ident] for c in slim["cells"]] == [[c[k] for k in ident] for c in full["cells"]]
    assert "derived" not in slim and "environment" not in slim and all("notes" not in c for c in slim["cells"])
    ok = next(c for c in full["cells"] if c["status"] == "ok")
    kept = slim["cells"][full["cells"].index(ok)]
    assert [r["throughput_items_per_s"] for r in kept["repeats"]] == [r["throughput_items_per_s"] for r in ok["repeats"]]


def test_an_index_of_the_first_schema_is_migrated_once_and_compares_the_same(indexes, capsys, monkeypatch, tmp_path):
    """An index made by the kit before the projection (schema v1, no compare_z) is brought to the
    current schema when it is opened, in one transaction, and compares as a new one does."""
    from kit.index import db

    old = tmp_path / "v1.sqlite"
    old.write_bytes(indexes["lstm"].read_bytes())
    con = sqlite3.connect(old)
    con.execute("ALTER TABLE bundles DROP COLUMN compare_z")  # what the first schema had
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()
    code, new_json, err = run_main(["compare", "--index", str(old), "--json"], capsys, monkeypatch)
    assert code == 0, err
    assert new_json == run_main(["compare", "--index", str(indexes["lstm"]), "--json"], capsys, monkeypatch)[1]
    con = sqlite3.connect(old)
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
        meta = dict(con.execute("SELECT key, value FROM meta"))
        assert any(re.fullmatch(r"migrated_v1_to_v\d+", k) for k in meta)
        stored = [json.loads(zlib.decompress(z)) for (z,) in con.execute("SELECT compare_z FROM bundles")]
        assert len(stored) == 2 and all(s["cells"] for s in stored)
    finally:
        con.close()


def test_a_first_schema_index_that_cannot_be_written_is_one_line_naming_the_update(indexes, capsys, monkeypatch, tmp_path):
    """A v1 index this process may not write (a read-only file or mount: here SQLite's query_only, which
    refuses every write as a read-only file does, and holds as root too) is one line, exit 1, and
    stays as it was."""
    from kit.index import db

    old = tmp_path / "v1.sqlite"
    old.write_bytes(indexes["lstm"].read_bytes())
    con = sqlite3.connect(old)
    con.execute("ALTER TABLE bundles DROP COLUMN compare_z")
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()
    before = old.read_bytes()
    connect = db._connect

    def read_only(path):
        c = connect(path)
        c.execute("PRAGMA query_only = 1")
        return c

    monkeypatch.setattr(db, "_connect", read_only)
    code, out, err = run_main(["compare", "--index", str(old), "--json"], capsys, monkeypatch)
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 2
    assert "schema v1" in err and "needs to write it" in err and "kit index list --index" in err
    assert old.read_bytes() == before


def test_a_damaged_copy_in_a_first_schema_index_is_named_after_the_migration_not_a_traceback(indexes, capsys, monkeypatch,
                                                                                           tmp_path):
    old = tmp_path / "v1.sqlite"
    old.write_bytes(indexes["lstm"].read_bytes())
    con = sqlite3.connect(old)
    con.execute("ALTER TABLE bundles DROP COLUMN compare_z")
    con.execute("PRAGMA user_version = 1")
    con.execute("UPDATE bundles SET results_z = ? WHERE id = (SELECT MIN(id) FROM bundles)", (zlib.compress(b"[1, 2]"),))
    con.commit()
    con.close()
    code, out, err = run_main(["compare", "--index", str(old), "--json"], capsys, monkeypatch)
    # the schema error of the results file, naming the run's bundle (exit 4), as from a tarball
    assert code == 4 and "(index)" in err and "not a kit results file" in err and "Traceback" not in err
    con = sqlite3.connect(old)
    try:  # migrated all the same
        from kit.index.db import SCHEMA_VERSION

        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        con.close()
    # a copy that is not even zlib stays without a projection, and compare names it damaged
    con = sqlite3.connect(old)
    con.execute("UPDATE bundles SET compare_z = x'', results_z = ? WHERE id = (SELECT MIN(id) FROM bundles)", (b"not zlib",))
    con.execute("ALTER TABLE bundles DROP COLUMN compare_z")
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()
    code, out, err = run_main(["compare", "--index", str(old), "--json"], capsys, monkeypatch)
    assert code == 4 and "damaged" in err and "Traceback" not in err
