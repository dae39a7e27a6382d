"""`kit compare --index` and `kit index history` on SYNTHETIC bundles (tests/test_index_fixtures.py):
the comparison from the index is the comparison of the same tarballs; the filters pick runs; a
machine's history marks software changes and flags only the significant change planted in it."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from fixtures.cli import run_main
from test_index_fixtures import make_bundle


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> tuple[Path, list[Path]]:
    """Four runs on consecutive days: two GPU models; node001 ran twice (slower the second time)."""
    root = tmp_path_factory.mktemp("idx")
    bundles = [
        make_bundle(root, "fixture-node000", 0, speed=1.0, gpu="Fixture GPU A", models=("resnet18", "resnet50")),
        make_bundle(root, "fixture-node001", 1, speed=1.2, gpu="Fixture GPU A", models=("resnet18", "resnet50")),
        make_bundle(root, "fixture-node002", 2, speed=0.9, gpu="Fixture GPU B", models=("resnet18", "resnet50")),
        make_bundle(root, "fixture-node001", 3, speed=0.9, gpu="Fixture GPU A", models=("resnet18", "resnet50"),
                    driver="590.10"),
    ]
    index = root / "index.sqlite"
    from kit.index.db import open_index
    from kit.index.ingest import add_bundles

    con = open_index(index, create=True)
    # added out of run-date order: the index orders by the runs' start
    assert {o.outcome for o in add_bundles(con, [bundles[i] for i in (3, 1, 0, 2)])} == {"added"}
    con.close()
    return index, [b.resolve() for b in bundles]


def _json(args, capsys, monkeypatch) -> dict:
    code, out, err = run_main(args, capsys, monkeypatch)
    assert code == 0, err
    return json.loads(out)


def test_compare_from_the_index_equals_compare_of_the_same_tarballs(indexed, capsys, monkeypatch):
    index, bundles = indexed
    from_files = _json(["compare", *map(str, bundles), "--json", "-"], capsys, monkeypatch)
    from_index = _json(["compare", "--index", str(index), "--json", "-"], capsys, monkeypatch)
    assert from_index["rows"] == from_files["rows"] and len(from_index["rows"]) == 6
    assert from_index["warnings"] == from_files["warnings"]
    assert from_index["not_compared_by_reason"] == from_files["not_compared_by_reason"]
    for a, b in zip(from_index["sources"], from_files["sources"]):
        assert a.pop("kind") == "index" and b.pop("kind") == "bundle"
        assert a == b
    # the same with another baseline, by position in run-date order
    from_files = _json(["compare", *map(str, bundles), "--json", "-", "--baseline", "3"], capsys, monkeypatch)
    from_index = _json(["compare", "--index", str(index), "--json", "-", "--baseline", "3"], capsys, monkeypatch)
    assert from_index["rows"] == from_files["rows"]
    assert from_index["sources"][0]["machine"] == "fixture-node002"


def test_compare_from_the_index_never_reopens_the_tarballs(indexed, capsys, monkeypatch, tmp_path):
    index, bundles = indexed
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(index.read_bytes())
    import kit.bundle.safe_open as safe_open

    def refuse(*a, **k):
        raise AssertionError("a tarball was opened")

    monkeypatch.setattr(safe_open, "open_bundle", refuse)
    monkeypatch.setattr(safe_open, "read_members", refuse)
    cmp = _json(["compare", "--index", str(copy), "--json", "-"], capsys, monkeypatch)
    assert len(cmp["sources"]) == 4


def test_where_since_and_host_pick_the_runs(indexed, capsys, monkeypatch):
    index, _ = indexed
    cmp = _json(["compare", "--index", str(index), "--where", "gpu=Fixture GPU A", "--json", "-"], capsys, monkeypatch)
    assert [s["machine"] for s in cmp["sources"]] == ["fixture-node000", "fixture-node001", "fixture-node001"]
    cmp = _json(["compare", "--index", str(index), "--since", "2026-11-02", "--json", "-"], capsys, monkeypatch)
    assert [s["run_id"] for s in cmp["sources"]] == ["FIXTURE-fixture-node001-1", "FIXTURE-fixture-node002-2",
                                                     "FIXTURE-fixture-node001-3"]
    cmp = _json(["compare", "--index", str(index), "--host", "fixture-node001", "--where", "gpu=Fixture GPU A",
                 "--since", "2026-11-01", "--json", "-"], capsys, monkeypatch)
    assert [s["run_id"] for s in cmp["sources"]] == ["FIXTURE-fixture-node001-1", "FIXTURE-fixture-node001-3"]


def test_too_few_matching_runs_and_a_bad_date_are_one_line(indexed, capsys, monkeypatch):
    index, _ = indexed
    code, out, err = run_main(["compare", "--index", str(index), "--where", "driver=590.10"], capsys, monkeypatch)
    assert code == 2 and "at least two runs; the index has 1 matching" in err
    code, out, err = run_main(["compare", "--index", str(index), "--since", "November"], capsys, monkeypatch)
    assert code == 2 and "not a date" in err


def test_history_marks_the_driver_change_and_flags_the_planted_slowdown(indexed, capsys, monkeypatch):
    index, _ = indexed
    h = _json(["index", "history", "--index", str(index), "--host", "fixture-node001", "--json", "-"], capsys, monkeypatch)
    assert [r["driver"] for r in h["runs"]] == ["580.159", "590.10"]
    assert len(h["cells"]) == 6
    for cell in h["cells"]:
        first, second = cell["points"]
        assert first["changed"] == [] and not first["flagged"] and first["vs_previous"] is None
        assert second["changed"] == ["driver"]
        assert second["flagged"] and second["vs_previous"]["verdict"] == "significant"
        assert second["vs_previous"]["ratio"] == pytest.approx(0.9 / 1.2)
    code, out, err = run_main(["index", "history", "--index", str(index), "--host", "fixture-node001",
                               "--cells", "cifar/resnet18/fp32/torch"], capsys, monkeypatch)
    assert code == 0, err
    assert "590.10 *" in out and "0.750×" in out and "6 significant change(s) of 5% or more, over the 6 cells" in out
    assert out.count("(images/s, median over repeats)") == 1  # the one cell's table
    # an unchanged machine: nothing flagged (node000 ran once)
    code, out, err = run_main(["index", "history", "--index", str(index), "--host", "fixture-node000"], capsys, monkeypatch)
    assert code == 0 and "No significant change" in out


def test_history_leads_with_one_table_of_runs_with_each_precisions_geometric_mean_change(indexed, capsys, monkeypatch):
    """Without --cells: one table, a row per run, no per-cell table. Per precision the geometric mean
    of its cells' ratios to the previous run (kit.results.ratios.geometric_mean of the ratios --json
    gives per cell), and what changed (the driver)."""
    import math

    index, _ = indexed
    args = ["index", "history", "--index", str(index), "--host", "fixture-node001"]
    h = _json(args + ["--json", "-"], capsys, monkeypatch)
    assert h["summary"]["precisions"] == ["fp32", "amp-fp16", "amp-bf16"]
    first, second = h["summary"]["runs"]
    assert first["changed"] == [] and first["vs_previous"] == {
        p: {"geomean_ratio": None, "cells": 0, "flagged": 0, "method_breaks": 0, "gpu_breaks": 0}
        for p in ("fp32", "amp-fp16", "amp-bf16")}
    assert second["changed"] == [{"field": "driver", "before": "580.159", "now": "590.10"}]
    for precision, got in second["vs_previous"].items():
        cells = [c["points"][1]["vs_previous"]["ratio"] for c in h["cells"] if c["cell_id"].split("/")[2] == precision]
        assert got["cells"] == len(cells) == 2 and got["flagged"] == 2 and got["method_breaks"] == got["gpu_breaks"] == 0
        assert got["geomean_ratio"] == pytest.approx(math.exp(sum(map(math.log, cells)) / len(cells)), rel=1e-12)
    code, out, err = run_main(args, capsys, monkeypatch)
    assert code == 0, err
    assert "median over repeats" not in out and out.count("run date (UTC)") == 1  # the one table
    row = next(x for x in out.splitlines() if x.startswith(" 2 "))
    assert "driver 580.159 -> 590.10" in row and row.count("0.750× (2!)") == 3
    assert "Per-cell tables: --cells PATTERN" in out
    code, out, err = run_main(args + ["--cells", "amp-fp16"], capsys, monkeypatch)  # text the ids hold
    assert code == 0 and out.count("median over repeats") == 2 and "amp-bf16 (images/s" not in out


def test_the_geometric_mean_of_ratios():
    from kit.results.ratios import geometric_mean

    assert geometric_mean([2.0, 0.5]) == pytest.approx(1.0)
    assert geometric_mean([0.9, 0.9, 0.9]) == pytest.approx(0.9)
    assert geometric_mean([4.0, float("nan"), None, -1.0, 0.0, 1.0]) == pytest.approx(2.0)  # what is no ratio, left out
    assert geometric_mean([]) is None


def test_history_of_an_unknown_host_or_cell_is_one_line(indexed, capsys, monkeypatch):
    index, _ = indexed
    code, out, err = run_main(["index", "history", "--index", str(index), "--host", "nobody"], capsys, monkeypatch)
    assert code == 2 and "no run of that host" in err and "fixture-node000" in err
    code, out, err = run_main(["index", "history", "--index", str(index), "--host", "fixture-node001", "--cells", "x/y"],
                              capsys, monkeypatch)
    assert code == 2 and "has no such cell" in err and "cifar/resnet18/fp32/torch" in err


def _edited_figures(index, edit, trim: int = 0) -> bytes:
    """The first run's stored figures (kit.index.figures_codec: the JSON part's length, the JSON
    part, the packed numbers) with ``edit(doc, numbers)`` applied to them and ``trim`` bytes cut off
    the end (the damage under test)."""
    import sqlite3
    import struct
    import zlib
    from array import array

    con = sqlite3.connect(index)
    (blob,) = con.execute("SELECT figures_z FROM bundles WHERE id = (SELECT MIN(id) FROM bundles)").fetchone()
    con.close()
    raw = zlib.decompress(blob)
    (size,) = struct.unpack_from("<I", raw)
    doc, nums = json.loads(raw[4:4 + size]), array("d", raw[4 + size:]).tolist()
    edit(doc, nums)
    text = json.dumps(doc).encode()
    raw = struct.pack("<I", len(text)) + text + array("d", nums).tobytes()
    return zlib.compress(raw[:len(raw) - trim])


def _ok_row(doc) -> list:
    return next(c for c in doc["cells"] if c[1] == "ok")


def _first_value(value: float):
    """An edit: the first ok cell's first throughput value (after its samples and energy) made ``value``."""
    def edit(doc, nums) -> None:
        for row in doc["cells"]:
            if row[1] == "ok":
                tp_n, ep_n, fm_n, n_tp, n_ep, bits = row[10]
                assert n_tp, "the fixture's first ok cell has throughput values"
                nums[5 * sum(1 for n in (tp_n, ep_n, fm_n) if n) + (bits & 1)] = value
                return
            # the cells before it store no numbers
    return edit


def _throughput_sample(field: int, value: float):
    """An edit: the first ok cell's throughput sample's ``field`` (0 mean, 1 sd, 2 median, 3 min, 4 max)
    made ``value`` (its numbers start with that sample)."""
    def edit(doc, nums) -> None:
        assert _ok_row(doc)[10][0], "the fixture's first ok cell has a throughput sample"
        nums[field] = value
    return edit


def _speedup_nan(doc, nums) -> None:
    """The last number of the run made NaN: the last ok cell's last stored figure (its speedup's or a median)."""
    nums[-1] = float("nan")


def _shape(i, value):
    return lambda d, n: _ok_row(d)[10].__setitem__(i, value)


DAMAGES = {
    "not zlib": lambda index: b"not zlib",
    "empty": lambda index: b"",
    "not the form": lambda index: zlib.compress(b'{"cells": 3}'),
    "another format": lambda index: _edited_figures(index, lambda d, n: d.update(format=99)),
    "a cell cut short": lambda index: _edited_figures(index, lambda d, n: _ok_row(d).pop()),
    "text for a count": lambda index: _edited_figures(index, _shape(0, "3")),
    "a count that is not one": lambda index: _edited_figures(index, _shape(0, 2.5)),
    "a negative count": lambda index: _edited_figures(index, _shape(3, -1)),
    "a shape of five": lambda index: _edited_figures(index, lambda d, n: _ok_row(d)[10].pop()),
    "unknown presence bits": lambda index: _edited_figures(index, _shape(5, 4096)),
    "an unknown verdict": lambda index: _edited_figures(
        index, lambda d, n: next(c for c in d["cells"] if len(c) > 4 and c[8]).__setitem__(8, "<b>sure</b>")),
    "params out of the table": lambda index: _edited_figures(index, lambda d, n: _ok_row(d).__setitem__(5, 99)),
    "numbers missing": lambda index: _edited_figures(index, lambda d, n: n.pop()),
    "numbers left over": lambda index: _edited_figures(index, lambda d, n: n.append(1.0)),
    "numbers cut mid-way": lambda index: _edited_figures(index, lambda d, n: None, trim=3),
    "a value that is not finite": lambda index: _edited_figures(index, _first_value(float("inf"))),
    "a throughput that is NaN": lambda index: _edited_figures(index, _first_value(float("nan"))),
    "a negative throughput": lambda index: _edited_figures(index, _first_value(-86.4)),
    "a throughput of zero": lambda index: _edited_figures(index, _first_value(0.0)),
    "a negative median over the repeats": lambda index: _edited_figures(index, _throughput_sample(2, -1.0)),
    "an infinite mean over the repeats": lambda index: _edited_figures(index, _throughput_sample(0, float("inf"))),
    "a negative spread": lambda index: _edited_figures(index, _throughput_sample(1, -0.5)),
    "a speedup over fp32 that is NaN": lambda index: _edited_figures(index, _speedup_nan),
    "a decompression bomb": lambda index: zlib.compress(bytes(65 << 20), 9),
    "a key of one part": lambda index: _edited_figures(index, lambda d, n: _ok_row(d).__setitem__(0, ["cifar"])),
    "flags that are not text": lambda index: _edited_figures(index, lambda d, n: _ok_row(d).__setitem__(7, [1])),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_copy_in_the_index_is_a_schema_error_not_a_traceback(indexed, capsys, monkeypatch, tmp_path, damage):
    """The stored figures are checked as they are read (kit.index.figures_codec.decode): each kind of
    damage (values no run can produce and a decompression bomb included) is named in one line, exit 4,
    never a traceback, in every view, and the file is left as it was."""
    import sqlite3

    index, _ = indexed
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(index.read_bytes())
    blob = DAMAGES[damage](index)
    con = sqlite3.connect(copy)
    con.execute("UPDATE bundles SET figures_z = ? WHERE id = (SELECT MIN(id) FROM bundles)", (blob,))
    con.commit()
    con.close()
    before = copy.read_bytes()
    for view in ([], ["--json", "-"], ["--group-by", "gpu"]):
        code, out, err = run_main(["compare", "--index", str(copy), *view], capsys, monkeypatch)
        assert code == 4 and "is damaged" in err and "Traceback" not in err, (damage, view, err)
        assert len(err.strip().splitlines()) == 2, err  # the line and its remedy
    assert copy.read_bytes() == before


def test_where_matches_a_whole_word_of_the_field_and_host_the_exact_name():
    from kit.index.query import make_filter, word_match

    assert word_match("H200", "NVIDIA H200") and word_match("h200", "NVIDIA H200 NVL")
    assert word_match("580", "580.159.04") and word_match("2.1", "2.1.0") and not word_match("2.1", "2.11.0")
    assert not word_match("H20", "NVIDIA H200") and not word_match("node01", "node017")
    flt = make_filter(["gpu=H200", "torch=2.11"], None, "node017")
    assert flt.equals == {"host": "node017"}
    assert flt.keep({"gpu": "NVIDIA H200", "torch": "2.11.0"}) and not flt.keep({"gpu": "NVIDIA H100", "torch": "2.11.0"})


def test_where_gpu_by_its_model_name_alone(indexed, capsys, monkeypatch):
    index, _ = indexed
    cmp = _json(["compare", "--index", str(index), "--where", "gpu=gpu a", "--json", "-"], capsys, monkeypatch)
    assert [s["gpu"] for s in cmp["sources"]] == ["Fixture GPU A"] * 3


def test_the_command_line_ends_at_once_with_its_output_whole_and_its_exit_code(indexed, capsys, monkeypatch, tmp_path):
    """`kit compare` on the command line ends without freeing the comparison (kit.cli.fast_exit.exit_now):
    its output is all there, flushed, the same as in-process, and its exit code is kept (5 here: one
    input failed verification; the others were compared)."""
    from test_index_fixtures import kit_cli

    index, bundles = indexed
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not a gzip file")
    got = kit_cli("compare", *map(str, bundles), str(broken), "--json", "-")
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_main(["compare", *map(str, bundles), str(broken), "--json", "-"], capsys)
    assert (got.returncode, code) == (5, 5), got.stderr
    assert json.loads(got.stdout) == json.loads(out) and got.stdout == out
    assert "refused" in got.stderr and "Traceback" not in got.stderr
    tables = kit_cli("compare", "--index", str(index))
    assert tables.returncode == 0 and tables.stdout.rstrip().endswith(
        run_main(["compare", "--index", str(index)], capsys)[1].rstrip().splitlines()[-1])


def test_the_collector_is_back_on_after_a_compare_in_process_and_left_off_when_the_command_line_ends(indexed, capsys,
                                                                                                     monkeypatch):
    """`kit compare` pauses the garbage collector while it builds a fleet's million objects. Called
    in-process (main(argv), as here), it switches it back on; on the command line it leaves it off
    until the process ends at once (kit.cli.fast_exit.exit_now): switched on, its first pass would walk
    every object of the comparison just before the end."""
    import gc
    import sys

    from kit.cli import fast_exit
    from kit.cli import main as cli_main

    index, _ = indexed
    assert gc.isenabled()
    code, out, _ = run_main(["compare", "--index", str(index), "--json", "-"], capsys)
    assert code == 0 and json.loads(out)["rows"]
    assert gc.isenabled()

    seen = {}

    class Ended(BaseException):  # as os._exit, it ends the command whatever handler it passes
        pass

    def exit_now(code):
        seen.update(code=code, collector=gc.isenabled())
        raise Ended

    monkeypatch.setattr(fast_exit, "exit_now", exit_now)
    monkeypatch.setattr(sys, "argv", ["kit", "compare", "--index", str(index), "--json", "-"])
    try:
        with pytest.raises(Ended):
            cli_main.main()
        assert seen == {"code": 0, "collector": False}
        assert not fast_exit.ends_now() and fast_exit._COMMAND_LINE is False
    finally:
        gc.enable()
    capsys.readouterr()
