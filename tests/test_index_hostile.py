"""A shared index file is untrusted input (SYNTHETIC bundles, tests/test_index_fixtures.py): an index
whose schema is not exactly the kit's (a planted trigger, a view in place of a table, an extra index
or column) is refused in one line by every command, exit 2, with the file's bytes unchanged; a stored
blob that decompresses past the bundle's own cap is refused before it fills the memory."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from fixtures.cli import run_main
from test_index_fixtures import ROOT, kit_cli, make_bundle


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[Path, Path, Path]:
    """An index of two runs (the kit's own), and a third bundle not yet in it."""
    root = tmp_path_factory.mktemp("hostile")
    a, b, c = (make_bundle(root, f"fixture-node00{i}", i, speed=1.0 + i / 10) for i in range(3))
    index = root / "index.sqlite"
    from kit.index.db import open_index
    from kit.index.ingest import add_bundles

    con = open_index(index, create=True)
    assert {o.outcome for o in add_bundles(con, [a, b])} == {"added"}
    con.close()
    return index, c, root


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _planted(clean, tmp_path: Path, *statements: str) -> Path:
    index = tmp_path / "shared.sqlite"
    index.write_bytes(clean[0].read_bytes())
    con = sqlite3.connect(index)
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()
    return index


HOSTILE = {
    "a trigger that deletes cells": (
        ["CREATE TRIGGER wipe AFTER INSERT ON bundles BEGIN DELETE FROM cells; END"],
        "it holds a trigger the kit did not make ('wipe' on 'bundles')"),
    "a view in place of a table": (
        ["ALTER TABLE cells RENAME TO cells_kept", "CREATE VIEW cells AS SELECT * FROM cells_kept"],
        "'cells' is a view in place of the kit's table"),
    "a view in place of the meta table": (
        ["ALTER TABLE meta RENAME TO meta_kept", "CREATE VIEW meta AS SELECT * FROM meta_kept"],
        "'meta' is a view in place of the kit's table"),
    "an index the kit did not make": (
        ["CREATE INDEX extra ON bundles(file_name)"], "it holds an index the kit did not make ('extra' on 'bundles')"),
    "a column the kit did not make": (
        ["ALTER TABLE bundles ADD COLUMN note TEXT"], "its table 'bundles' is not the one this kit makes"),
    "one of the kit's indexes dropped": (
        ["DROP INDEX bundles_gpu"], "the kit's index 'bundles_gpu' is missing"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_an_index_whose_schema_is_not_the_kits_is_refused_by_every_command_and_left_as_it_was(
        clean, tmp_path, capsys, monkeypatch, kind):
    statements, said = HOSTILE[kind]
    index = _planted(clean, tmp_path, *statements)
    before = _sha(index)
    # the writer on the command line, as a user runs it
    got = kit_cli("index", "add", "--index", str(index), str(clean[1]))
    assert got.returncode == 2, got.stderr
    assert got.stderr.startswith("error:") and said in got.stderr and "refused (nothing was written to it)" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 2 and "Traceback" not in got.stderr  # the line and its remedy
    for args in (["compare", "--index", str(index)], ["index", "list", "--index", str(index)],
                 ["index", "history", "--index", str(index), "--host", "fixture-node000"]):
        code, out, err = run_main(args, capsys, monkeypatch)
        assert code == 2 and said in err and len(err.strip().splitlines()) == 2, (args, err)
    assert _sha(index) == before


def test_the_planted_trigger_would_have_deleted_the_cells(clean, tmp_path):
    """The trigger of the test above is live: SQLite runs it on an insert into bundles."""
    index = _planted(clean, tmp_path, HOSTILE["a trigger that deletes cells"][0][0])
    con = sqlite3.connect(index)
    assert con.execute("SELECT COUNT(*) FROM cells").fetchone()[0] > 0
    con.execute("INSERT INTO bundles SELECT * FROM bundles LIMIT 0")  # no row: the trigger does not run
    con.execute("INSERT INTO bundles (sha256, file_name, path, size_bytes, added_at, run_id, run_date, status, "
                "interrupted, host, gpu, driver, stack, torch, kit, n_cells, results_z, env_z) "
                "VALUES ('x', 'x', 'x', 0, 'x', 'x', 'x', 'x', 0, 'x', 'x', 'x', 'x', 'x', 'x', 0, x'', x'')")
    assert con.execute("SELECT COUNT(*) FROM cells").fetchone()[0] == 0
    con.close()


def test_a_trigger_planted_after_the_index_was_opened_is_refused_before_the_write(clean, tmp_path):
    """Another process may change the schema while `kit index add` verifies bundles: the writer checks
    it again inside its transaction, and writes nothing."""
    from kit.errors import UsageError
    from kit.index.db import open_index
    from kit.index.ingest import add_bundles

    index = _planted(clean, tmp_path)
    con = open_index(index)
    other = sqlite3.connect(index)
    other.execute("CREATE TRIGGER wipe AFTER INSERT ON bundles BEGIN DELETE FROM cells; END")
    other.commit()
    other.close()
    before = _sha(index)
    with pytest.raises(UsageError, match="trigger the kit did not make"):
        add_bundles(con, [clean[1]])
    con.close()
    assert _sha(index) == before


def _bomb(size: int) -> bytes:
    """zlib of ``size`` zero bytes, made a MiB at a time (the test never holds the whole)."""
    c = zlib.compressobj(9)
    chunk = bytes(1 << 20)
    return b"".join(c.compress(chunk) for _ in range(size >> 20)) + c.flush()


def test_a_decompression_bomb_in_a_stored_blob_is_refused_before_it_fills_the_memory(clean, tmp_path):
    """1 GiB of zeros stored as 1 MB of figures: `kit compare --index` stops at the cap (what a bundle's
    file may hold, 64 MiB), exit 4 naming the damaged run, with its peak memory far below the 1 GiB a
    plain zlib.decompress takes; the file is left as it was."""
    from kit.index.figures_codec import MAX_INFLATED

    index = _planted(clean, tmp_path)
    con = sqlite3.connect(index)
    con.execute("UPDATE bundles SET figures_z = ? WHERE id = (SELECT MIN(id) FROM bundles)", (_bomb(1 << 30),))
    con.commit()
    con.close()
    before = _sha(index)
    # the kit in a child of a child: RUSAGE_CHILDREN of this wrapper is the kit's peak alone
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); print(r.stderr)")
    got = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "kit", "compare", "--index", str(index)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    code, peak_kib = map(int, got.stdout.split("\n", 1)[0].split())
    err = got.stdout.split("\n", 1)[1]
    assert code == 4 and "is damaged" in err and "decompression bomb" in err and "Traceback" not in err, got.stdout
    assert peak_kib * 1024 < 4 * MAX_INFLATED < (1 << 30), peak_kib
    assert _sha(index) == before


@pytest.mark.parametrize("column", ["env_z", "results_z"])
def test_a_bomb_in_the_stored_environment_or_results_is_refused_in_one_line(clean, tmp_path, capsys, monkeypatch, column):
    """env.json is read on every compare; results.json when an older index is migrated or a view draws it."""
    from kit.index.figures_codec import MAX_INFLATED

    index = _planted(clean, tmp_path)
    con = sqlite3.connect(index)
    con.execute(f"UPDATE bundles SET {column} = ? WHERE id = (SELECT MIN(id) FROM bundles)",
                (_bomb(MAX_INFLATED + (1 << 20)),))
    con.commit()
    con.close()
    before = _sha(index)
    if column == "env_z":
        code, out, err = run_main(["compare", "--index", str(index), "--json", "-"], capsys, monkeypatch)
        assert code == 4 and "decompression bomb" in err and len(err.strip().splitlines()) == 2, err
    else:
        from kit.index.query import _results_loader

        with pytest.raises(Exception, match="decompression bomb"):
            _results_loader(str(index), 1, "run")()
    assert _sha(index) == before


def test_a_blob_exactly_at_the_cap_is_read_and_one_byte_more_is_not():
    from kit.index.figures_codec import Damaged, inflate

    blob = zlib.compress(b"x" * 1000)
    assert inflate(blob, cap=1000) == b"x" * 1000
    with pytest.raises(Damaged, match="decompression bomb"):
        inflate(blob, cap=999)
    with pytest.raises(Damaged, match="cut short"):
        inflate(blob[:-4], cap=2000)
    with pytest.raises(Damaged, match="after its end"):
        inflate(blob + b"junk", cap=2000)


def test_the_index_is_opened_with_sqlites_defensive_settings(clean):
    from kit.index.db import open_index

    con = open_index(clean[0])
    try:
        assert con.execute("PRAGMA trusted_schema").fetchone()[0] == 0
        if hasattr(con, "getconfig"):  # Python 3.12+
            assert con.getconfig(sqlite3.SQLITE_DBCONFIG_DEFENSIVE)
    finally:
        con.close()
