"""`kit index add` and `kit index list` on SYNTHETIC bundles (tests/test_index_fixtures.py): recorded once
by sha256, a refused bundle listed with its reason and changing nothing, files that are not the kit's
index refused with one line, and a stranger's strings made inert."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from fixtures.cli import run_main
from fixtures.results.factory import bundle_members, write_bundle
from test_index_fixtures import fleet, make_bundle
from kit.index.db import SCHEMA_VERSION


def _rows(index: Path) -> list[tuple]:
    con = sqlite3.connect(index)
    try:
        return con.execute("SELECT file_name, host, n_cells, (SELECT COUNT(*) FROM cells WHERE bundle_id = bundles.id) "
                           "FROM bundles ORDER BY id").fetchall()
    finally:
        con.close()


def test_bundles_are_added_once_and_re_adding_is_a_no_op(tmp_path, capsys, monkeypatch):
    bundles = fleet(tmp_path, 3)
    index = tmp_path / "index.sqlite"
    code, out, err = run_main(["index", "add", "--index", str(index), str(tmp_path / "bundles")], capsys, monkeypatch)
    assert code == 0, err
    assert err.count("added    ") == 3 and "3 added, 0 already in the index, 0 refused" in err
    rows = _rows(index)
    assert sorted(r[0] for r in rows) == sorted(b.name for b in bundles)
    assert all(r[2] == r[3] == 3 for r in rows)  # every cell of every bundle recorded
    code, out, err = run_main(["index", "add", "--index", str(index), *map(str, bundles)], capsys, monkeypatch)
    assert code == 0, err
    assert "0 added, 3 already in the index, 0 refused" in err and err.count("no-op") == 3
    assert len(_rows(index)) == 3
    # a copy under another name is the same bundle (same sha256)
    copy = tmp_path / "copy.tar.gz"
    copy.write_bytes(bundles[0].read_bytes())
    code, out, err = run_main(["index", "add", "--index", str(index), str(copy)], capsys, monkeypatch)
    assert code == 0 and "already in the index" in err and len(_rows(index)) == 3


def test_a_refused_bundle_is_listed_with_its_reason_and_the_others_are_added(tmp_path, capsys, monkeypatch):
    good = fleet(tmp_path, 2)
    bad = make_bundle(tmp_path, "fixture-tampered", 9)
    files = bundle_members(bad)
    files["results.json"] = files["results.json"].replace(b'"ok"', b'"OK"', 1)  # changed after hashing
    write_bundle(bad, files, rehash=False)
    index = tmp_path / "index.sqlite"
    code, out, err = run_main(["index", "add", "--index", str(index), str(good[0]), str(bad), str(good[1])],
                              capsys, monkeypatch)
    assert code == 5  # what `kit bundle verify` exits with for it
    assert f"refused  {bad}" in err and "sha256 does not match the manifest" in err
    assert "2 added, 0 already in the index, 1 refused" in err and "Traceback" not in err
    assert sorted(r[1] for r in _rows(index)) == ["fixture-node000", "fixture-node001"]
    code, out, err = run_main(["index", "add", "--index", str(index), str(tmp_path / "nope.tar.gz")], capsys, monkeypatch)
    assert code == 2 and "no such file" in err and len(_rows(index)) == 2


@pytest.mark.parametrize("kind", ["other-sqlite", "text", "newer-schema"])
def test_a_file_that_is_not_the_kits_index_is_refused_in_one_line_and_left_as_it_was(tmp_path, capsys, monkeypatch, kind):
    index = tmp_path / "x.sqlite"
    if kind == "other-sqlite":
        con = sqlite3.connect(index)
        con.execute("CREATE TABLE notes (t TEXT)")
        con.commit()
        con.close()
    elif kind == "text":
        index.write_text("not a database\n")
    else:
        b = make_bundle(tmp_path, "fixture-node000", 0)
        assert run_main(["index", "add", "--index", str(index), str(b)], capsys, monkeypatch)[0] == 0
        con = sqlite3.connect(index)
        con.execute("PRAGMA user_version = 99")
        con.close()
    before = index.read_bytes()
    b2 = make_bundle(tmp_path, "fixture-node001", 1)
    for args in (["index", "add", "--index", str(index), str(b2)], ["index", "list", "--index", str(index)],
                 ["compare", "--index", str(index)]):
        code, out, err = run_main(args, capsys, monkeypatch)
        assert code == 2, (args, err)
        assert len(err.strip().splitlines()) == 2 and err.startswith("error:") and "Traceback" not in err
        assert (f"newer than this kit reads (v{SCHEMA_VERSION})" in err) if kind == "newer-schema" else ("not a results index" in err)
        if kind == "newer-schema":  # no package index has the kit: the remedy names what works
            assert err.splitlines()[1] == ("what to do: Read it with a newer kit: in the kit's clone, git pull and "
                                           "pip install . (make run rebuilds its image after the pull by itself).")
    assert index.read_bytes() == before


def test_an_unknown_where_field_is_one_line_naming_the_fields(tmp_path, capsys, monkeypatch):
    b = make_bundle(tmp_path, "fixture-node000", 0)
    index = tmp_path / "i.sqlite"
    assert run_main(["index", "add", "--index", str(index), str(b)], capsys, monkeypatch)[0] == 0
    for cmd in (["compare", "--index", str(index)], ["index", "list", "--index", str(index)]):
        code, out, err = run_main([*cmd, "--where", "gpus=H200"], capsys, monkeypatch)
        assert code == 2 and out == ""
        assert err.strip() == "error: --where gpus: no such field; the fields are gpu, host, driver, stack, torch, kit."
    code, out, err = run_main(["compare", "--where", "gpu=H200", str(b), str(b)], capsys, monkeypatch)
    assert code == 2 and "go with --index" in err


def test_list_shows_the_runs_in_run_date_order_with_a_strangers_strings_inert(tmp_path, capsys, monkeypatch):
    late = make_bundle(tmp_path, "fixture-late", 5)
    hostile = make_bundle(tmp_path, "vm\x1b]0;owned\x07\x1b[2J[bold]x", 1)
    index = tmp_path / "i.sqlite"
    code, out, err = run_main(["index", "add", "--index", str(index), str(late), str(hostile)], capsys, monkeypatch)
    assert code == 0, err
    assert "\x1b" not in err and "\x07" not in err
    code, out, err = run_main(["index", "list", "--index", str(index), "--files"], capsys, monkeypatch)
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "vm[bold]x" in out  # no control left, and no rich markup read from it
    assert out.index("vm[bold]x") < out.index("fixture-late")  # run date order, not the order added
    code, out, err = run_main(["index", "list", "--index", str(index), "--json", "-", "--since", "2026-11-03"], capsys, monkeypatch)
    assert code == 0, err
    runs = json.loads(out)["runs"]
    assert [r["host"] for r in runs] == ["fixture-late"] and runs[0]["run_date"] == "2026-11-06T00:00:00Z"


def test_fleet_slurm_collect_adds_the_verified_task_bundles_to_an_index(tmp_path, capsys, monkeypatch):
    from test_fleet_slurm import FAKES, _bundle_in, _finished, _submit  # the fake Slurm of the fleet tests
    import stat

    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    for name, text in FAKES.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755 | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:/bin")
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    sweep = tmp_path / "sweep"
    assert _submit(sweep, capsys, monkeypatch, "--suites", "cifar,lstm", "--gpus-per-task", "0")[0] == 0
    kept = [_bundle_in(sweep, 0, "resnet18"), _bundle_in(sweep, 1, "resnet50")]
    for i in (0, 1):
        _finished(sweep, i)
    index = tmp_path / "fleet.sqlite"
    code, out, err = run_main(["fleet", "slurm", "collect", str(sweep), "--index", str(index)], capsys, monkeypatch)
    assert code == 0, err
    assert "index: 2 added, 0 already in the index, 0 refused" in err
    assert sorted(r[0] for r in _rows(index)) == sorted(p.name for p in kept)
    code, out, err = run_main(["fleet", "slurm", "collect", str(sweep), "--index", str(index)], capsys, monkeypatch)
    assert code == 0 and "index: 0 added, 2 already in the index" in err


def test_wal_mode_is_refused_on_a_network_file_system_and_the_kit_keeps_the_rollback_journal(tmp_path, capsys, monkeypatch):
    b = make_bundle(tmp_path, "fixture-node000", 0)
    index = tmp_path / "i.sqlite"
    assert run_main(["index", "add", "--index", str(index), str(b)], capsys, monkeypatch)[0] == 0
    con = sqlite3.connect(index)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert con.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"  # someone switched it
    con.close()
    import kit.index.db as db

    monkeypatch.setattr(db, "filesystem_type", lambda path: "nfs4")
    code, out, err = run_main(["index", "list", "--index", str(index)], capsys, monkeypatch)
    assert code == 2 and "WAL mode on a nfs4 file system" in err and "PRAGMA journal_mode=DELETE" in err
    monkeypatch.setattr(db, "filesystem_type", lambda path: "ext4")  # on a local disk WAL works
    assert run_main(["index", "list", "--index", str(index)], capsys, monkeypatch)[0] == 0


def test_an_nfs_mount_with_node_local_locks_is_warned_about(tmp_path):
    from kit.index.files import is_network_fs, lock_warning

    info = tmp_path / "mountinfo"
    share = tmp_path / "share"
    share.mkdir()
    info.write_text(f"22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
                    f"40 22 0:50 / {share} rw,relatime - nfs 10.0.0.1:/share rw,vers=3,nolock,addr=10.0.0.1\n")
    assert "locks are local to this node" in lock_warning(share / "index.sqlite", str(info))
    assert lock_warning(tmp_path / "index.sqlite", str(info)) is None  # the local disk
    assert is_network_fs("nfs4") and is_network_fs("fuse.sshfs") and is_network_fs("cifs") and not is_network_fs("ext4")


def test_a_re_add_does_not_open_the_bundle_again(tmp_path, capsys, monkeypatch):
    """A bundle already in the index (by its sha256, under any name) is not opened or verified again:
    the verifier is counted, in this process (fewer bundles than the verifier pool starts for)."""
    from kit.index import ingest

    bundles = fleet(tmp_path, 2)
    index = tmp_path / "index.sqlite"
    opened: list = []
    real = ingest.open_bundle
    monkeypatch.setattr(ingest, "open_bundle", lambda path, *a, **k: opened.append(Path(path).name) or real(path, *a, **k))
    assert run_main(["index", "add", "--index", str(index), *map(str, bundles)], capsys, monkeypatch)[0] == 0
    assert sorted(opened) == sorted(b.name for b in bundles)
    opened.clear()
    copy = tmp_path / "renamed.tar.gz"
    copy.write_bytes(bundles[0].read_bytes())
    code, out, err = run_main(["index", "add", "--index", str(index), *map(str, bundles), str(copy)], capsys, monkeypatch)
    assert code == 0 and "0 added, 3 already in the index, 0 refused" in err, err
    assert opened == []
