"""The results index and its bundles as untrusted input (SYNTHETIC bundles, tests/test_index_fixtures.py).

Each hostile case is built in a temporary folder and run through the kit's command line in a
process of its own, whose peak memory is measured (a child of a child: RUSAGE_CHILDREN of the
wrapper is the kit's peak alone). Each gives one clear line (and its remedy), a documented
non-zero exit code, peak memory under 300 MB, and leaves the index file byte for byte as it was
(and nothing new beside it): a read never writes. The rows of the table of cases in
docs/results-index.md ("What the index refuses"), one test each or more.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from fixtures.results.factory import bundle_members, write_bundle
from test_index_fixtures import ROOT, make_bundle

#: the most memory any of these cases may take (the issue's bound)
PEAK_BYTES = 300 * 1024 * 1024

_WRAPPER = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
            "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr)")


def kit(*args, cwd: Path | None = None) -> tuple[int, int, str, str]:
    """``kit ARGS`` in a process of its own: (exit code, peak RSS in bytes, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    got = subprocess.run([sys.executable, "-c", _WRAPPER, sys.executable, "-m", "kit", *map(str, args)],
                         capture_output=True, text=True, timeout=300, cwd=cwd or ROOT, env=env)
    head, _, out = got.stdout.partition("\n")
    code, peak_kib = map(int, head.split())
    return code, peak_kib * 1024, out, got.stderr


def _files(folder: Path) -> dict:
    """Every file in ``folder``, by name: its sha256 (what a read must leave as it was)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def refused_by_every_read(index: Path, code: int, said: str, commands=None) -> None:
    """Every reading command refuses ``index`` in one line (and its remedy) naming ``said``, exits
    ``code``, stays under PEAK_BYTES, and leaves the folder's files byte for byte as they were."""
    before = _files(index.parent)
    for args in commands or (["compare", "--index", index], ["index", "list", "--index", index],
                             ["index", "history", "--index", index, "--host", "fixture-node000"]):
        got, peak, out, err = kit(*args)
        assert got == code and said in err, (args, got, err)
        assert len(err.strip().splitlines()) == 2 and err.startswith("error:") and "Traceback" not in err, (args, err)
        assert peak < PEAK_BYTES, (args, peak)
    assert _files(index.parent) == before


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    """Three SYNTHETIC bundles and an index of the first two, made once (copied by each test)."""
    root = tmp_path_factory.mktemp("untrusted")
    bundles = [make_bundle(root, f"fixture-node00{i}", i, speed=1.0 + i / 10) for i in range(3)]
    index = root / "index.sqlite"
    from kit.index.db import open_index
    from kit.index.ingest import add_bundles

    con = open_index(index, create=True)
    assert {o.outcome for o in add_bundles(con, bundles[:2])} == {"added"}
    con.close()
    return {"index": index, "bundles": bundles, "root": root}


def _copy(made: dict, tmp_path: Path, *statements, params=()) -> Path:
    """A copy of the clean index in a folder of its own, with ``statements`` run on it."""
    folder = tmp_path / "shared"
    folder.mkdir(exist_ok=True)
    index = folder / "index.sqlite"
    shutil.copyfile(made["index"], index)
    con = sqlite3.connect(index)
    for s in statements:
        con.execute(s, params)
    con.commit()
    con.close()
    return index


def _tampered(made: dict, tmp_path: Path, name: str, edit) -> Path:
    """The third bundle with ``edit`` applied to its results.json (the manifest re-hashed)."""
    files = bundle_members(made["bundles"][2])
    results = json.loads(files["results.json"])
    edit(results)
    files["results.json"] = json.dumps(results).encode()
    return write_bundle(tmp_path / name, files)


# ----------------------------------------------------------------------------- figures no device can measure
def _throughput(value):
    def edit(results):
        results["cells"][0]["repeats"][0]["throughput_items_per_s"] = value
    return edit


@pytest.mark.parametrize("value, said", [(1e300, "1e+300 items/s, above 1e+12 items/s"),
                                         (1e-300, "1e-300 items/s, below 1e-06 items/s")])
def test_a_throughput_no_device_can_measure_is_refused_by_verify_naming_the_field(made, tmp_path, value, said):
    bad = _tampered(made, tmp_path, "bad.tar.gz", _throughput(value))
    code, peak, out, err = kit("bundle", "verify", bad)
    assert code == 4 and "cells[0].repeats[0].throughput_items_per_s" in err and said in err, err
    assert len(err.strip().splitlines()) == 2 and "Traceback" not in err and peak < PEAK_BYTES


@pytest.mark.parametrize("field, value", [("epoch_seconds_median", 1e300), ("energy_j_per_epoch", 1e300),
                                          ("energy_j_per_epoch", -5.0), ("time_to_first_step_s", 1e-30)])
def test_a_time_or_energy_no_device_can_measure_is_refused_by_verify(made, tmp_path, field, value):
    def edit(results):
        results["cells"][0]["repeats"][0][field] = value
    code, peak, out, err = kit("bundle", "verify", _tampered(made, tmp_path, "bad.tar.gz", edit))
    assert code == 4 and f"repeats[0].{field}" in err and "no device can measure" in err, err


def test_index_add_of_a_bad_bundle_first_adds_both_good_ones_and_names_the_bad_one(made, tmp_path):
    bad = _tampered(made, tmp_path, "bad.tar.gz", _throughput(1e300))
    index = tmp_path / "new.sqlite"
    code, peak, out, err = kit("index", "add", "--index", index, bad, *made["bundles"][:2])
    assert code == 4 and peak < PEAK_BYTES and "Traceback" not in err, err
    assert f"refused  {bad}: " in err and "1e+300 items/s" in err
    assert err.count("added    ") == 2 and "2 added, 0 already in the index, 1 refused" in err
    con = sqlite3.connect(index)
    assert sorted(r[0] for r in con.execute("SELECT host FROM bundles")) == ["fixture-node000", "fixture-node001"]
    con.close()


def test_compare_of_many_bundles_refuses_the_bad_one_and_compares_the_rest(made, tmp_path):
    bad = _tampered(made, tmp_path, "bad.tar.gz", _throughput(1e300))
    a, b = made["bundles"][:2]
    code, peak, out, err = kit("compare", a, bad, b, "--json", "-")
    assert code == 4 and "refused" in err and "1e+300 items/s" in err and "Traceback" not in err, err
    assert len(json.loads(out)["sources"]) == 2 and len(json.loads(out)["refused"]) == 1 and peak < PEAK_BYTES
    code, peak, out, err = kit("compare", bad, a)  # the baseline itself refused: one line
    assert code == 4 and len(err.strip().splitlines()) == 2 and "1e+300 items/s" in err


def test_compare_of_a_results_file_checks_the_same_bounds(made, tmp_path):
    results = json.loads(bundle_members(made["bundles"][2])["results.json"])
    _throughput(1e300)(results)
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps(results))
    code, peak, out, err = kit("compare", made["bundles"][0], bad)
    assert code == 4 and "1e+300 items/s, above 1e+12 items/s" in err and "Traceback" not in err, err


def _planted_figures(made: dict, tmp_path: Path, value: float) -> Path:
    """The clean index with the second run's throughputs replaced by ``value`` in its stored figures."""
    import dataclasses

    from kit.compare.stats import Sample
    from kit.index.figures_codec import decode, encode

    index = _copy(made, tmp_path)
    con = sqlite3.connect(index)
    fig = decode(con.execute("SELECT figures_z FROM bundles WHERE id = 2").fetchone()[0])
    for cell in fig.cells:
        cell.throughput_values = [value for _ in cell.throughput_values]
        cell.throughput = dataclasses.replace(cell.throughput, mean=value, median=value, min=value, max=value, sd=0.0)
        cell.throughput_median = value
    con.execute("UPDATE bundles SET figures_z = ? WHERE id = 2", (encode(fig),))
    con.commit()
    con.close()
    assert Sample.of([value]) is not None  # a finite, positive number: only its size is wrong
    return index


@pytest.mark.parametrize("value", [1e300, 1e-300])
def test_figures_no_device_can_measure_planted_in_an_index_are_one_line_in_every_view(made, tmp_path, value):
    index = _planted_figures(made, tmp_path, value)
    refused_by_every_read(index, 4, "outside what any device can measure", commands=(
        ["compare", "--index", index], ["compare", "--index", index, "--group-by", "gpu"],
        ["compare", "--index", index, "--json", "-"]))


def test_a_final_metric_near_a_floats_limit_gives_a_sample_not_an_overflow():
    """A final metric is not bounded (a diverged run's perplexity may be huge): its statistics
    scale instead of raising OverflowError."""
    from kit.compare.stats import Sample

    s = Sample.of([1e300, 1.1e300, 0.9e300])
    assert s.mean == pytest.approx(1e300) and s.sd == pytest.approx(1e299) and s.median == 1e300
    assert Sample.of([1e308, 1.7e308]).mean == pytest.approx(1.35e308)


def test_a_ratio_that_is_no_finite_number_prints_as_unknown():
    from kit.results.ratios import ratio_digits

    assert ratio_digits(float("inf")) == ratio_digits(float("nan")) == "—"


# ----------------------------------------------------------------------------- a read never writes
def _hot_journal(made: dict, tmp_path: Path, *hostile: str) -> Path:
    """The clean index with a hot journal beside it that, rolled back, makes the file the clean
    index with ``hostile`` statements applied: a writer's journal holds the pages as they were
    before its transaction, so it is made by undoing ``hostile`` on a copy, killed mid-transaction."""
    src = tmp_path / "src"
    src.mkdir()
    hostile_copy = src / "index.sqlite"
    shutil.copyfile(made["index"], hostile_copy)
    con = sqlite3.connect(hostile_copy)
    for s in hostile:
        con.execute(s)
    con.commit()
    con.close()
    undo = ["DROP TRIGGER wipe"] if any("TRIGGER" in s for s in hostile) else []
    code = (f"import os, sqlite3; c = sqlite3.connect({str(hostile_copy)!r}, isolation_level=None); "
            "c.execute('PRAGMA cache_size = 1'); c.execute('BEGIN IMMEDIATE'); "
            + "".join(f"c.execute({s!r}); " for s in undo)
            + "c.execute(\"UPDATE bundles SET host = 'fixture-node00' || (id - 1)\"); "
            "[c.execute('INSERT INTO meta VALUES (?, randomblob(4000))', (f'k{i}',)) for i in range(300)]; os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True)
    index = _copy(made, tmp_path)
    shutil.copyfile(f"{hostile_copy}-journal", f"{index}-journal")
    return index


PLANT = ("UPDATE bundles SET host = 'PLANTED'",)
TRIGGER = ("UPDATE bundles SET host = 'PLANTED'", "CREATE TRIGGER wipe AFTER INSERT ON bundles BEGIN DELETE FROM cells; END")


def test_a_hot_journal_beside_the_index_is_never_rolled_back_by_a_read(made, tmp_path):
    index = _hot_journal(made, tmp_path, *TRIGGER)
    refused_by_every_read(index, 2, "a journal lies beside it")
    # it is live: SQLite, opening it to write, would make the planted trigger part of the file
    probe = tmp_path / "probe"
    probe.mkdir()
    shutil.copyfile(index, probe / "i.sqlite")
    shutil.copyfile(f"{index}-journal", probe / "i.sqlite-journal")
    con = sqlite3.connect(probe / "i.sqlite")
    assert con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall() == [("wipe",)]
    con.close()


def test_a_journal_that_would_plant_a_trigger_is_refused_by_the_writer_too_and_left_as_it_was(made, tmp_path):
    index = _hot_journal(made, tmp_path, *TRIGGER)
    before = _files(index.parent)
    code, peak, out, err = kit("index", "add", "--index", index, made["bundles"][2])
    assert code == 2 and "a trigger the kit did not make" in err and "once" in err and "-journal" in err, err
    assert len(err.strip().splitlines()) == 2 and _files(index.parent) == before


def test_a_journal_a_writer_cut_short_left_is_rolled_back_by_the_next_writer_which_says_so(made, tmp_path):
    index = _hot_journal(made, tmp_path, *PLANT)
    refused_by_every_read(index, 2, "a journal lies beside it", commands=(["index", "list", "--index", index],))
    code, peak, out, err = kit("index", "add", "--index", index)
    assert code == 0 and f"rolled back {index}-journal" in err, err
    assert not Path(f"{index}-journal").exists()
    code, peak, out, err = kit("index", "list", "--index", index, "--json", "-")
    assert code == 0 and {r["host"] for r in json.loads(out)["runs"]} == {"PLANTED"}  # as the journal had it


def test_a_wal_file_planted_beside_the_index_is_refused_before_sqlite_opens_it(made, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copyfile(made["index"], src / "i.sqlite")
    subprocess.run([sys.executable, "-c", f"import os, sqlite3; c = sqlite3.connect({str(src / 'i.sqlite')!r}, "
                    "isolation_level=None); c.execute('PRAGMA journal_mode = WAL'); c.execute('PRAGMA wal_autocheckpoint = 0'); "
                    "c.execute(\"UPDATE bundles SET host = 'PLANTED'\"); os._exit(0)"], check=True)
    index = _copy(made, tmp_path)
    shutil.copyfile(src / "i.sqlite-wal", f"{index}-wal")
    refused_by_every_read(index, 2, "a WAL file lies beside it")
    assert not Path(f"{index}-shm").exists()


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_a_lying_user_version_makes_a_read_refuse_and_only_a_writer_migrate(made, tmp_path, version):
    index = _copy(made, tmp_path, f"PRAGMA user_version = {version}")
    refused_by_every_read(index, 2, f"schema v{version}; this kit reads v7, and updates an older index only in a "
                                    "command that writes", commands=(["compare", "--index", index],))
    code, peak, out, err = kit("index", "add", "--index", index)
    assert code == 0 and f"updated from schema v{version} to v7" in err, err


# ----------------------------------------------------------------------------- memory bounded by declared limits
def test_two_million_runs_are_refused_at_once_with_little_memory(made, tmp_path):
    index = _copy(made, tmp_path)
    con = sqlite3.connect(index)
    cols = [r[1] for r in con.execute("PRAGMA table_info(bundles)") if r[1] != "id"]
    picks = ", ".join("n" if c == "sha256" else "x''" if c.endswith("_z") else "0" if c in (
        "size_bytes", "interrupted", "n_cells") else "''" for c in cols)
    con.execute(f"INSERT INTO bundles ({', '.join(cols)}) WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 "
                f"FROM k WHERE n < 2000000) SELECT {picks} FROM k")
    con.commit()
    con.close()
    refused_by_every_read(index, 2, "holds 2,000,002 runs, more than the 100,000")


def test_a_raw_300_mib_blob_is_refused_before_it_is_loaded(made, tmp_path):
    index = _copy(made, tmp_path, "UPDATE bundles SET figures_z = zeroblob(300 * 1024 * 1024) WHERE id = 1")
    refused_by_every_read(index, 4, "a value in its figures_z column that the kit never writes")


@pytest.mark.parametrize("column, blob", [
    ("env_z", zlib.compress(b"[" * 100_000 + b"]" * 100_000)),
    ("env_z", zlib.compress(b"[" + b"[]," * 2_000_000 + b"[]]")),
    ("results_z", zlib.compress(b"{\"a\":" * 50_000 + b"1" + b"}" * 50_000)),
], ids=["deep env.json", "wide env.json", "deep results.json"])
def test_a_json_bomb_in_a_compressed_column_is_one_line(made, tmp_path, column, blob):
    index = _copy(made, tmp_path, f"UPDATE bundles SET {column} = ? WHERE id = 1", params=(blob,))
    if column == "env_z":
        refused_by_every_read(index, 4, "is damaged", commands=(["compare", "--index", index],))
    else:  # results.json is read where a view draws its charts, and by a migration
        from kit.errors import SchemaError
        from kit.index.query import _results_loader

        with pytest.raises(SchemaError, match="nests more than 64 levels"):
            _results_loader(str(index), 1, "run")()


@pytest.mark.parametrize("statement", [
    "UPDATE bundles SET host = x'41' WHERE id = 1",
    "UPDATE bundles SET gpu = zeroblob(10) WHERE id = 1",
    "UPDATE cells SET throughput_json = x'5b315d' WHERE bundle_id = 1",
])
def test_a_blob_in_a_text_column_is_one_line(made, tmp_path, statement):
    index = _copy(made, tmp_path, statement)
    commands = [["index", "history", "--index", index, "--host", "fixture-node000"]]
    if "cells" not in statement:
        commands += [["compare", "--index", index], ["index", "list", "--index", index]]
    refused_by_every_read(index, 4, "that the kit never writes there (text of at most", commands=commands)


@pytest.mark.parametrize("statement, said", [
    ("UPDATE bundles SET size_bytes = -1 WHERE id = 1", "its size_bytes column"),
    ("UPDATE bundles SET n_cells = 'many' WHERE id = 1", "its n_cells column"),
    ("UPDATE bundles SET run_started = 'yesterday' WHERE id = 1", "its run_started column"),
    ("UPDATE bundles SET interrupted = 7 WHERE id = 2", "its interrupted column"),
    ("UPDATE bundles SET gpu_count = -3 WHERE id = 2", "its gpu_count column"),
    ("UPDATE bundles SET sha256 = 'not a digest' WHERE id = 2", "its sha256 column"),
])
def test_a_tampered_number_in_the_runs_is_refused_by_every_read(made, tmp_path, statement, said):
    refused_by_every_read(_copy(made, tmp_path, statement), 4, said)


@pytest.mark.parametrize("statement, said", [
    ("UPDATE cells SET throughput_median = -5 WHERE bundle_id = 1", "its throughput_median column"),
    ("UPDATE cells SET throughput_median = 'fast' WHERE bundle_id = 1", "its throughput_median column"),
    ("UPDATE cells SET throughput_json = '[NaN, 1]' WHERE bundle_id = 1", "not numbers any device can measure"),
    ("UPDATE cells SET throughput_json = '[1e300]' WHERE bundle_id = 1", "not numbers any device can measure"),
    ("UPDATE cells SET throughput_json = '[\"x\"]' WHERE bundle_id = 1", "not numbers any device can measure"),
])
def test_a_tampered_number_in_the_cells_is_refused_by_the_history_that_reads_them(made, tmp_path, statement, said):
    index = _copy(made, tmp_path, statement)
    refused_by_every_read(index, 4, said, commands=(["index", "history", "--index", index, "--host", "fixture-node000"],))


def test_a_damaged_page_found_while_reading_is_one_line(made, tmp_path):
    index = _copy(made, tmp_path)
    con = sqlite3.connect(index)
    try:
        pages = [p for (p,) in con.execute("SELECT pageno FROM dbstat WHERE name = 'bundles' ORDER BY pageno")]
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table to find a page by")
    size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    data = bytearray(index.read_bytes())
    at = (pages[-1] - 1) * size
    data[at:at + 300] = b"\xee" * 300
    index.write_bytes(bytes(data))
    refused_by_every_read(index, 4, "SQLite cannot read it (database disk image is malformed)")


# ----------------------------------------------------------------------------- long strings, files that are not indexes
def test_a_10000_character_host_name_with_escapes_is_refused_not_printed(made, tmp_path):
    index = _copy(made, tmp_path, "UPDATE bundles SET host = ? WHERE id = 1", params=("\x1b[31mX" * 2000,))
    refused_by_every_read(index, 4, "its host column", commands=(["index", "list", "--index", index],))

    files = bundle_members(made["bundles"][2])
    env = json.loads(files["env.json"])
    env["hostname"] = "\x1b]0;x\x07" + "n" * 10_000
    files["env.json"] = json.dumps(env).encode()
    code, peak, out, err = kit("bundle", "verify", write_bundle(tmp_path / "long.tar.gz", files))
    assert code == 4 and "its host name is 10,006 characters" in err and "\x1b" not in err, err


def test_long_strings_are_shortened_in_the_tables_and_kept_whole_in_json(made, tmp_path):
    gpu = "\x1b[2J" + "G" * 200  # a long GPU name, with a sequence that would clear the screen
    index = _copy(made, tmp_path, "UPDATE bundles SET gpu = ?, host = ?", params=(gpu, "h" * 250))
    code, peak, out, err = kit("index", "list", "--index", index)
    assert code == 0 and "G" * 63 + "…" in out and "G" * 64 not in out and "\x1b" not in out, out
    assert len(out.splitlines()) < 12
    code, peak, out, err = kit("index", "list", "--index", index, "--json", "-")
    assert code == 0 and {r["gpu"] for r in json.loads(out)["runs"]} == {gpu}
    code, peak, out, err = kit("index", "history", "--index", index, "--host", "h" * 250)
    assert code == 0 and "h" * 63 + "…" in out and "h" * 64 not in out, out


def test_an_add_whose_every_bundle_is_refused_makes_no_index(made, tmp_path):
    bad = _tampered(made, tmp_path, "bad.tar.gz", _throughput(-1.0))
    index = tmp_path / "none.sqlite"
    code, peak, out, err = kit("index", "add", "--index", index, bad)
    assert code == 4 and "0 added, 0 already in the index, 1 refused (no index made: nothing was added)" in err
    assert not index.exists() and list(tmp_path.glob(".none.sqlite*")) == []


def test_a_zero_byte_file_is_named_and_never_becomes_an_index(made, tmp_path):
    index = tmp_path / "shared" / "empty.sqlite"
    index.parent.mkdir()
    index.write_bytes(b"")
    refused_by_every_read(index, 2, "an empty file (0 bytes), not a results index", commands=(
        ["compare", "--index", index], ["index", "list", "--index", index],
        ["index", "add", "--index", index, made["bundles"][0]]))
    assert index.stat().st_size == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_or_a_device_is_named_as_what_it_is(made, tmp_path):
    fifo = tmp_path / "shared" / "fifo.sqlite"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    refused_by_every_read(fifo, 2, "a FIFO (named pipe), not a results index file", commands=(
        ["compare", "--index", fifo], ["index", "list", "--index", fifo],
        ["index", "add", "--index", fifo, made["bundles"][0]]))
    if Path("/dev/null").exists():
        code, peak, out, err = kit("index", "list", "--index", "/dev/null")
        assert code == 2 and "a character device, not a results index file" in err, err
