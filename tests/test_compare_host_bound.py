"""`kit compare` marks, under a machine's ratio to the baseline, the cells that `kit explain` rates host-bound
on either machine (kit.results.explain.bound): such a ratio compares the hosts as much as the GPUs. On
the shipped H100 reference and its check (real measurements), and on fixture bundles (invented numbers)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from fixtures.cli import run_main
from fixtures.results.factory import make_cell, make_env, make_profile, make_results, make_run_dir
from kit.compare import render
from kit.compare.engine import compare_paths
from kit.report.export import export_run
from kit.report.html.compare import render_compare_page
from kit.results import kernel_classes as kc

REPO = Path(__file__).resolve().parents[1]
H100 = REPO / "references" / "h100"
REFERENCE = H100 / "vm_NVIDIA-H100-80GB-HBM3_native_20261206-062040.tar.gz"
CHECK = H100 / "check" / "cifar" / "vm_NVIDIA-H100-80GB-HBM3_native_20261206-190004.tar.gz"


def _ratio_table(out: str) -> str:
    rest = out[out.index("Throughput relative to A"):]
    return rest[:rest.index("Not compared")] if "Not compared" in rest else rest


def test_the_h100_checks_ratio_table_marks_the_host_bound_fp16_master_cells(capsys, monkeypatch):
    """The check against the H100 reference: the `torch` fp16-master cells read 1.46x and 1.14x and are
    host-bound on both machines; their ratios carry the mark, the GPU-bound cells' do not."""
    code, out, err = run_main(["compare", str(REFERENCE), str(CHECK)], capsys, monkeypatch)
    assert code == 0, err
    table = _ratio_table(out)
    for line in table.splitlines():
        if "cifar/" in line and "fp16-master" not in line:
            assert "host-bound" not in line
    marked = re.findall(r"│ (cifar/\S+)\s+│ ([0-9.]+)×.*\n.*\n│\s+│ ⚠ host-bound in A, B\s+│", table)
    assert marked == [("cifar/resnet18/fp16-master/torch", "1.464"), ("cifar/resnet50/fp16-master/torch", "1.136")]
    assert table.count("⚠ host-bound in A, B") == 2
    assert "kit explain rates that machine's cell host-bound" in " ".join(out.split())


def _bundle(root: Path, name: str, idle_ms: float, speed: float = 1.0) -> Path:
    """A fixture run of one model: fp32 and amp-fp16, each profiled with ``idle_ms`` of a 20 ms step idle."""
    cells = [make_cell(precision=p, epoch_s=[x / speed for x in (10.0, 10.1, 9.9)],
                       profile=make_profile(20.0, {kc.TENSOR_CORE_MATMUL: 20.0 - idle_ms}))
             for p in ("fp32", "amp-fp16")]
    res = make_results(cells, make_env(host=f"fixture-{name}"), run_id=f"FIXTURE-{name}")
    return export_run(make_run_dir(root / "runs" / name, res), root / "bundles" / name)


@pytest.fixture(scope="module")
def one_host_bound(tmp_path_factory) -> list:
    """A baseline whose step is busy (2 ms of 20 idle) and a machine whose step is idle 10 ms of 20."""
    root = tmp_path_factory.mktemp("host-bound")
    return [_bundle(root, "a", idle_ms=2.0), _bundle(root, "b", idle_ms=10.0, speed=0.8)]


def test_only_the_machine_whose_cell_is_host_bound_is_named_in_every_view(one_host_bound):
    cmp = compare_paths(one_host_bound)
    buf = io.StringIO()
    render.print_rich(cmp, Console(file=buf, width=160, color_system=None))
    table = _ratio_table(buf.getvalue())
    marks = [line.strip("│ ") for line in table.splitlines() if "│" in line and "host-bound" in line]
    assert marks == ["⚠ host-bound in B", "⚠ host-bound in B"]
    md = render.to_markdown(cmp)
    ratios = md[md.index("## Throughput relative to A"):]
    assert ratios.count("⚠ host-bound in B") == 2 and "kit explain rates that machine's cell host-bound" in ratios
    page = render_compare_page(cmp)
    assert page.count("⚠ host-bound in B") == 2


def test_no_mark_where_neither_machine_is_host_bound(tmp_path):
    cmp = compare_paths([_bundle(tmp_path, "a", idle_ms=2.0), _bundle(tmp_path, "b", idle_ms=1.0, speed=0.9)])
    buf = io.StringIO()
    render.print_rich(cmp, Console(file=buf, width=160, color_system=None))
    assert "host-bound" not in buf.getvalue() and "host-bound" not in render.to_markdown(cmp)
