"""`kit index list`, `kit index history` and a fleet's summary (`kit compare --group-by`) on an 80-column
terminal: no line wider than the terminal, and no figure or word broken mid-way; a column that does not
fit goes (a line says which) or its text moves under the table. FIXTURE and SYNTHETIC bundles (invented
numbers, made by the kit's own writer), named and sized like real ones (an H100 80GB HBM3's name, full
GPU UUIDs, every precision)."""

from __future__ import annotations

import io
import random
import re

import pytest
from rich.cells import cell_len
from rich.console import Console

from fixtures.cli import run_main
from fixtures.fleet_grid import machine
from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
from kit.bundle.export import export_run
from kit.compare import render
from kit.compare.engine import build_comparison
from kit.compare.fleet.grouped import View
from kit.index.db import open_index
from kit.index.ingest import add_bundles

WIDTH = 80
DAY = 86400.0
START = 1796083200.0  # 2026-12-01 00:00 UTC
GPU = "NVIDIA H100 80GB HBM3"
UUIDS = ["GPU-2f896ee4-a54e-99cd-486f-879ff430d528", "GPU-0ee8b1b8-813c-a159-aa0c-e73380fcf9a0"]
PRECISIONS = ("fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master", "apex-o1", "apex-o2")


def _no_report(folder, name):
    return {}


def _bundle(root, run: int, uuid: str, kit: str, speed: float = 1.0):
    env = make_env(host="vm", gpu=GPU)
    env["host"] = {"name": "vm", "host_id": "h-eb84660102b93f88", "anonymized": False}
    env["nvml"] = {"available": True, "driver_version": "580.159.04", "gpus": [{"name": GPU, "uuid": uuid}]}
    env["kit_version"] = kit
    cells = [make_cell(model=m, precision=p, epoch_s=[x / speed / (1 + i) for x in (10.0, 10.1, 9.9)])
             for m in ("resnet18", "resnet50") for i, p in enumerate(PRECISIONS)]
    res = make_results(cells, env, run_id=f"FIXTURE-VM-{run}", started_at=START + run * DAY)
    return export_run(make_run_dir(root / "runs" / str(run), res), root / "bundles", _no_report)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """Four runs of one machine: the second 8% slower, the third on another GPU (its UUID) and a newer kit."""
    root = tmp_path_factory.mktemp("narrow")
    bundles = [_bundle(root, 0, UUIDS[0], "0.2.0"), _bundle(root, 1, UUIDS[0], "0.2.0", 0.92),
               _bundle(root, 2, UUIDS[1], "0.3.0"), _bundle(root, 3, UUIDS[1], "0.3.0")]
    path = root / "index.sqlite"
    con = open_index(path, create=True)
    assert {o.outcome for o in add_bundles(con, bundles)} == {"added"}
    con.close()
    return str(path), [b.name for b in bundles]


def _narrow(args, capsys, monkeypatch) -> str:
    code, out, err = run_main(args, capsys, monkeypatch)
    assert code == 0, err
    return out


def assert_fits_unbroken(out: str, words) -> None:
    """Every line within WIDTH columns, and every one of ``words`` whole on some line."""
    wide = [line for line in out.splitlines() if cell_len(line.rstrip()) > WIDTH]
    assert not wide, f"lines wider than {WIDTH} columns: {wide}"
    broken = [w for w in words if not re.search(r"(?<![\w.-])" + re.escape(w) + r"(?![\w.-])", out)]
    assert not broken, f"broken or missing: {broken}\n{out}"


@pytest.fixture
def eighty(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))


def test_index_list_fits_80_columns_with_every_figure_and_file_whole(index, eighty, capsys, monkeypatch):
    path, names = index
    out = _narrow(["index", "list", "--index", path, "--files"], capsys, None)
    assert_fits_unbroken(out, [*names, "2026-12-01 00:00", "2026-12-04 00:00", "580.159.04", "0.2.0", "0.3.0",
                               "H100", "80GB", "HBM3", "14", "4 bundles of 1 host"])
    assert "Files:" in out  # the file names, one long word each, under the table


def test_index_history_fits_80_columns_moving_what_changed_under_the_summary(index, eighty, capsys, monkeypatch):
    path, _ = index
    out = _narrow(["index", "history", "--index", path, "--host", "vm", "--cells", "cifar/resnet18/fp32/*"], capsys, None)
    assert_fits_unbroken(out, [*UUIDS, "0.920×", "(2!)", "fp32", "amp-fp16", "580.159.04", "2026-12-03 00:00"])
    summary = out[out.index("each run against the run before"):out.index("cifar/resnet18/fp32/torch (")]
    assert "changed since the run before:" in summary and f"3: kit 0.2.0 -> 0.3.0; GPUs {UUIDS[0]} ->" in " ".join(summary.split())
    assert "[1] other GPUs" in out  # the cell table's reason for no ratio, under it


def test_a_wide_terminal_keeps_history_and_list_in_their_columns(index, capsys, monkeypatch):
    path, names = index
    monkeypatch.setenv("COLUMNS", "240")
    out = _narrow(["index", "history", "--index", path, "--host", "vm"], capsys, None)
    assert "changed since the run before:" not in out and "changed since the run before" in out
    out = _narrow(["index", "list", "--index", path, "--files"], capsys, None)
    assert "Files:" not in out and "Not shown" not in out and all(n in out for n in names)


def test_a_fleet_summary_fits_80_columns_each_worst_cell_on_its_own_line():
    rng = random.Random(1)
    sources = [machine(i, rng, speed=0.8 if i == 3 else 1.0) for i in range(8)]
    cmp = build_comparison(sources)
    buf = io.StringIO()
    render.print_rich(cmp, Console(file=buf, width=WIDTH, color_system=None), False, View(group_by="gpu"))
    out = buf.getvalue()
    worst = re.findall(r"^\s+worst cell (\S+) (\S+)", out, re.M)
    assert len(worst) == 8 and all(c.startswith("cifar/") for _, c in worst)
    assert_fits_unbroken(out, [c for _, c in worst] + [f"synthetic-node00{i}" for i in range(8)] + ["slow: everywhere"])
    assert "Not shown at 80 columns:" in out and "--json and --markdown have every column" in " ".join(out.split())
    wide = io.StringIO()
    render.print_rich(cmp, Console(file=wide, width=200, color_system=None), False, View(group_by="gpu"))
    assert "worst cell " not in wide.getvalue() and "Not shown" not in wide.getvalue()
