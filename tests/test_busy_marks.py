"""A cell measured on a busy host is marked wherever its figures are shown: the end of `kit run`,
`kit bundle show`, report.html (per cell, a banner, the findings and the charts), `kit explain` and
`kit compare`; no finding is drawn from it without saying so. Fixture bundles (invented numbers)."""

from __future__ import annotations

import json
import tarfile

import pytest

from fixtures.cli import run_main
from fixtures.results.factory import make_cell, make_env, make_profile, make_results, make_run_dir
from kit.report.export import export_run
from kit.results.schema import CellResult

BUSY_HOST = {"cores": 2, "load_1m_start": 7.2, "load_1m_end": 7.9, "steal_pct": 0.0,
             "busy": "load average 7.9 on 2 cores", "source": "fixture: a loaded host"}


def _cells() -> list[dict]:
    """resnet18 fp32, amp-fp16 (quiet) and amp-bf16 (busy: 0.71x fp32), each profiled."""
    prof = make_profile(10.0, {"tensor-core matmul/convolution": 6.0, "normalisation and elementwise": 3.0})
    fp32 = make_cell("resnet18", "fp32", epoch_s=[10.0, 10.1, 9.9], profile=prof)
    fp16 = make_cell("resnet18", "amp-fp16", epoch_s=[5.0, 5.05, 4.95], profile=prof)
    bf16 = make_cell("resnet18", "amp-bf16", epoch_s=[14.1, 14.2, 14.0], profile=prof)
    bf16["host"] = dict(BUSY_HOST)
    return [fp32, fp16, bf16]


@pytest.fixture(scope="module")
def busy_bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("busy")
    res = make_results(_cells(), make_env(), run_id="FIXTURE-BUSY")
    return export_run(make_run_dir(root / "runs", res), root / "bundles")


def _report(bundle) -> str:
    with tarfile.open(bundle) as tf:
        member = next(m for m in tf.getmembers() if m.name.endswith("/report.html"))
        return tf.extractfile(member).read().decode()


def test_bundle_show_marks_the_busy_cell_and_says_how_many(busy_bundle, capsys, monkeypatch):
    code, out, err = run_main(["bundle", "show", str(busy_bundle)], capsys, monkeypatch)
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if "cifar/resnet18/amp-bf16/torch" in ln)
    assert "host busy (load average 7.9 on 2 cores)" in line
    quiet = next(ln for ln in out.splitlines() if "cifar/resnet18/amp-fp16/torch" in ln)
    assert "host busy" not in quiet
    assert "host busy in 1 of 3 cells" in " ".join(out.split())


def test_the_report_has_a_banner_marks_the_cell_and_no_unmarked_finding_from_it(busy_bundle):
    page = _report(busy_bundle)
    assert "HOST BUSY" in page and "1 of 3 cells were measured while the host was busy" in page
    cells = page[page.index("<h2>Cells</h2>"):]
    row = cells[cells.index("cifar/resnet18/amp-bf16/torch"):]
    assert "host busy (load average 7.9 on 2 cores)" in row[:row.index("</tr>")]
    findings = page[page.index("What the run shows"):page.index("<h2>Environment</h2>")]
    slower = findings[findings.index("Slower than fp32"):]
    slower = slower[:slower.index("</li>")]
    assert "amp-bf16 0.71×" in slower and "host busy" in slower
    assert "amp-fp16 2.00×" in findings and "amp-fp16 2.00× (host busy" not in findings


def test_the_speedup_chart_marks_the_bar_from_a_busy_cell(busy_bundle):
    with tarfile.open(busy_bundle) as tf:
        member = next(m for m in tf.getmembers() if m.name.endswith("speedup.svg"))
        svg = tf.extractfile(member).read().decode()
    assert "host busy" in svg


def test_kit_explain_marks_the_busy_cell(busy_bundle, capsys, monkeypatch):
    code, out, err = run_main(["explain", str(busy_bundle), "--short"], capsys, monkeypatch)
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("cifar/resnet18/amp-bf16/torch"))
    assert "host busy (load average 7.9 on 2 cores)" in line
    quiet = next(ln for ln in out.splitlines() if ln.startswith("cifar/resnet18/amp-fp16/torch"))
    assert "host busy" not in quiet
    code, out, _ = run_main(["explain", str(busy_bundle)], capsys, monkeypatch)
    block = out[out.index("\ncifar/resnet18/amp-bf16/torch"):]
    assert "host busy: load average 7.9 on 2 cores" in block[:block.index("\n\n", 1) if "\n\n" in block[1:] else None]
    code, out, _ = run_main(["explain", str(busy_bundle), "--json", "-"], capsys, monkeypatch)
    rows = {r["cell_id"]: r for r in json.loads(out)["cells"]}
    assert rows["cifar/resnet18/amp-bf16/torch"]["host_busy"] == "load average 7.9 on 2 cores"
    assert rows["cifar/resnet18/amp-fp16/torch"]["host_busy"] is None


def test_the_end_of_a_run_marks_the_busy_cell_and_counts_them():
    from kit.runner.progress import describe_result
    from kit.runner.service import outcome_summary

    cells = [CellResult.from_dict(c) for c in _cells()]
    assert "host busy (load average 7.9 on 2 cores)" in describe_result(cells[2])
    assert "host busy" not in describe_result(cells[1])

    class Outcome:
        results = type("R", (), {"cells": cells})()
        run_dir = "results/FIXTURE-BUSY"

    text = outcome_summary(Outcome())
    assert text.startswith("3 cell(s) measured, 0 skipped, 0 failed.")
    assert "1 of them measured while the host was busy (cifar/resnet18/amp-bf16/torch: load average 7.9 on 2 cores)" in text


def test_kit_compare_marks_the_busy_cell_beside_its_figures(busy_bundle, tmp_path, capsys, monkeypatch):
    other = export_run(make_run_dir(tmp_path / "runs", make_results(
        [make_cell("resnet18", p, epoch_s=[10.0, 10.1, 9.9]) for p in ("fp32", "amp-fp16", "amp-bf16")],
        make_env(host="fixture-host-b"), run_id="FIXTURE-QUIET")), tmp_path / "bundles")
    code, out, err = run_main(["compare", str(other), str(busy_bundle)], capsys, monkeypatch)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "HIGH B: the host was busy during 1 cell(s)" in flat
    assert "⚠ host busy (load average 7.9 on 2 cores)" in flat
