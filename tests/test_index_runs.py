"""Each run counted once in the results index (SYNTHETIC bundles, tests/test_index_fixtures.py): the same
run under another tarball is not added again; an interrupted bundle and its completed resume are both
kept, the interrupted one marked superseded and left out of `kit compare --index` and
`kit index history`, whichever was added first; a copy already in an index is left out too."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from fixtures.cli import run_main
from fixtures.results.factory import bundle_members, make_env, make_results, make_run_dir, standard_cells, write_bundle
from kit.bundle import export as bundle_export
from test_index_fixtures import START, make_bundle


def _no_report(folder, name):
    return {}


def _resumed(root: Path) -> tuple[Path, Path]:
    """``X.interrupted.tar.gz`` (two of six cells) and ``X.tar.gz`` (all six) of one run of fixture-node001."""
    env = make_env(host="fixture-node001")
    cells = standard_cells(speed=1.1)
    out = []
    for status, part in (("interrupted", cells[:2]), ("complete", cells)):
        res = make_results(part, env, status=status, run_id="FIXTURE-fixture-node001-resumed", started_at=START + 86400)
        run_dir = make_run_dir(root / f"runs-{status}", res, finish_journal=status == "complete")
        out.append(bundle_export.export_run(run_dir, root / "bundles", _no_report))
    assert out[0].name == out[1].name.replace(".tar.gz", ".interrupted.tar.gz"), [p.name for p in out]
    return out[0], out[1]


def _bundles(index: Path) -> list[str]:
    con = sqlite3.connect(index)
    try:
        return [r[0] for r in con.execute("SELECT file_name FROM bundles ORDER BY id")]
    finally:
        con.close()


def _json(args, capsys, monkeypatch) -> dict:
    code, out, err = run_main(args, capsys, monkeypatch)
    assert code == 0, err
    return json.loads(out)


def test_the_same_run_under_another_tarball_is_not_added_again(tmp_path, capsys, monkeypatch):
    first = make_bundle(tmp_path, "fixture-node000", 0)
    files = bundle_members(first)
    manifest = json.loads(files["manifest.json"])
    manifest["created_at"] = "2030-01-01T00:00:00Z"  # another tarball (another sha256), the same run
    files["manifest.json"] = json.dumps(manifest).encode()
    again = write_bundle(tmp_path / "again.tar.gz", files)
    assert again.read_bytes() != first.read_bytes()
    index = tmp_path / "index.sqlite"
    code, out, err = run_main(["index", "add", "--index", str(index), str(first), str(again)], capsys, monkeypatch)
    assert code == 0, err
    assert f"no-op    {again}: the same run as {first.name} (same run id and results)" in err
    assert "1 added, 1 already in the index, 0 refused" in err and _bundles(index) == [first.name]


def test_a_run_with_the_same_id_but_other_results_is_another_input(tmp_path, capsys, monkeypatch):
    """Only identical content makes a copy: the same run id with other figures is recorded (and counted)."""
    first = make_bundle(tmp_path, "fixture-node000", 0)
    other = make_bundle(tmp_path / "other", "fixture-node000", 0, speed=1.3)
    index = tmp_path / "index.sqlite"
    code, out, err = run_main(["index", "add", "--index", str(index), str(first), str(other)], capsys, monkeypatch)
    assert code == 0 and "2 added" in err, err
    assert len(_json(["index", "list", "--index", str(index), "--json", "-"], capsys, monkeypatch)["runs"]) == 2


@pytest.mark.parametrize("order", ["interrupted first", "complete first"])
def test_a_completed_resume_supersedes_its_interrupted_bundle_in_compare_and_history(tmp_path, capsys, monkeypatch,
                                                                                    order):
    interrupted, complete = _resumed(tmp_path)
    other = make_bundle(tmp_path, "fixture-node000", 0)
    later = make_bundle(tmp_path, "fixture-node001", 5, speed=1.0, models=("resnet18", "resnet50"))
    index = tmp_path / "index.sqlite"
    pair = [interrupted, complete] if order == "interrupted first" else [complete, interrupted]
    code, out, err = run_main(["index", "add", "--index", str(index), *map(str, [other, *pair, later])], capsys, monkeypatch)
    assert code == 0 and "4 added" in err, err
    assert sorted(_bundles(index)) == sorted(p.name for p in (other, interrupted, complete, later))  # both kept

    listed = _json(["index", "list", "--index", str(index), "--json", "-"], capsys, monkeypatch)["runs"]
    assert [r["left_out"] for r in listed if r["file_name"] == interrupted.name] == [f"superseded by {complete.name}"]
    assert [r["left_out"] for r in listed if r["file_name"] != interrupted.name] == [None] * 3
    code, out, err = run_main(["index", "list", "--index", str(index), "--files"], capsys, monkeypatch)
    marked = [x for x in out.splitlines() if x.lstrip().startswith("- ")]  # not numbered: --baseline N skips it
    assert len(marked) == 1 and "2 (interrupted)" in marked[0] and "superseded by" in marked[0]
    assert "4 bundles of 2 hosts (4 shown, by run date; 1 left out of compare and history" in out
    assert [x.split()[0] for x in out.splitlines() if "2026-11-0" in x] == (
        ["1", "-", "2", "3"] if order == "interrupted first" else ["1", "2", "-", "3"])

    cmp = _json(["compare", "--index", str(index), "--json", "-"], capsys, monkeypatch)
    assert [s["run_id"] for s in cmp["sources"]] == ["FIXTURE-fixture-node000-0", "FIXTURE-fixture-node001-resumed",
                                                     "FIXTURE-fixture-node001-5"]
    h = _json(["index", "history", "--index", str(index), "--host", "fixture-node001", "--json", "-"], capsys, monkeypatch)
    assert [r["file_name"] for r in h["runs"]] == [complete.name, later.name]  # the run once, its complete bundle
    assert [len(c["points"]) for c in h["cells"]] == [2] * 6, h["cells"]
    # the first point of every cell is the complete bundle's: 1.1x faster than the later run
    ratios = [c["points"][1]["vs_previous"]["ratio"] for c in h["cells"]]
    assert all(abs(r - 1 / 1.1) < 0.02 for r in ratios), ratios


def test_a_copy_already_in_an_index_is_left_out_of_history(tmp_path, capsys, monkeypatch):
    """An index that holds one run twice (an older kit added both tarballs) shows it once."""
    a = make_bundle(tmp_path, "fixture-node001", 0)
    b = make_bundle(tmp_path, "fixture-node001", 1, speed=0.8)
    index = tmp_path / "index.sqlite"
    assert run_main(["index", "add", "--index", str(index), str(a), str(b)], capsys, monkeypatch)[0] == 0
    con = sqlite3.connect(index)
    cols = [r[1] for r in con.execute("PRAGMA table_info(bundles)") if r[1] != "id"]
    # another tarball of the same run: another sha256 (64 hex digits, as every bundle's), another name
    con.execute(f"INSERT INTO bundles ({', '.join(cols)}) SELECT {', '.join('printf(' + repr('%064x') + ', 12345)' if c == 'sha256' else 'file_name || ' + repr('.copy') if c == 'file_name' else c for c in cols)} "
                "FROM bundles WHERE file_name = ?", (a.name,))
    con.execute("INSERT INTO cells SELECT (SELECT MAX(id) FROM bundles), cell_id, status, unit, throughput_median, "
                "throughput_json FROM cells WHERE bundle_id = 1")
    con.commit()
    con.close()
    h = _json(["index", "history", "--index", str(index), "--host", "fixture-node001", "--json", "-"], capsys, monkeypatch)
    assert [r["file_name"] for r in h["runs"]] == [a.name, b.name]
    assert all(len(c["points"]) == 2 and c["points"][1]["vs_previous"]["ratio"] < 0.9 for c in h["cells"])
    listed = _json(["index", "list", "--index", str(index), "--json", "-"], capsys, monkeypatch)["runs"]
    assert [r["left_out"] for r in listed] == [None, f"the same run as {a.name}", None]
