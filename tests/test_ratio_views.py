"""One number per ratio: `kit compare`, `kit bundle show`, the HTML report (table,
findings and chart), results.json's `derived` and scripts/perf_table.py print the
same speedup over fp32 for the same cells.

The fixture is built so that the three candidate definitions disagree in the
second decimal: median throughput ratio 1.50 (the definition), mean throughput
ratio 1.31 (one slow repeat pulls the mean) and median epoch-time ratio 1.25
(fp32's epochs carry a warm-up). A view that used either of the others would
print 1.31× or 1.25× and fail here.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fixtures.modules import load_script
from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
from kit.report.export import export_run
from kit.bundle.safe_open import open_bundle
from kit.cli.main import app
from kit.report.charts import run_charts
from kit.report.html.run_report import render_run_report
from kit.results.derive import derive
from kit.results.ratios import fmt_speedup
from kit.results.schema import RunResults
from kit.results.stats import summarise_repeats

CELL = "cifar/resnet50/amp-fp16/torch"
FP32_THR, FP32_EPOCH = [1000.0, 1010.0, 990.0], [10.0, 10.0, 10.1]
FP16_THR, FP16_EPOCH = [1500.0, 900.0, 1520.0], [8.0, 8.0, 25.0]
EXPECTED = "1.50×"


def _cell(precision: str, thr: list[float], epoch: list[float]) -> dict:
    c = make_cell("resnet50", precision, epoch_s=epoch)
    for rep, t in zip(c["repeats"], thr):
        rep["throughput_items_per_s"] = t
    c["summary"] = summarise_repeats(c["repeats"])
    return c


def _cells() -> list[dict]:
    return [_cell("fp32", FP32_THR, FP32_EPOCH), _cell("amp-fp16", FP16_THR, FP16_EPOCH)]


def test_the_fixture_tells_the_three_definitions_apart():
    median_ratio = statistics.median(FP16_THR) / statistics.median(FP32_THR)
    mean_ratio = statistics.mean(FP16_THR) / statistics.mean(FP32_THR)
    epoch_ratio = statistics.median(FP32_EPOCH) / statistics.median(FP16_EPOCH)
    shown = {fmt_speedup(median_ratio), fmt_speedup(mean_ratio), fmt_speedup(epoch_ratio)}
    assert fmt_speedup(median_ratio) == EXPECTED and len(shown) == 3


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("views")
    res = make_results(_cells(), make_env(), run_id="FIXTURE-views-a")
    return export_run(make_run_dir(root / "runs", res), root / "bundles")


def _speedups(text: str) -> set[str]:
    return set(re.findall(r"\d+\.\d+×", text))


def test_derive_gives_the_speedup_and_names_the_epoch_time_ratio(bundle):
    res = open_bundle(bundle).results
    [row] = derive(res.cells, "throughput")["performance_ratios"]
    assert fmt_speedup(row["speedup_over_fp32"]) == EXPECTED
    assert fmt_speedup(row["epoch_time_ratio"]) == "1.25×"


def test_compare_prints_the_same_speedup_in_every_format(bundle, tmp_path):
    other = tmp_path / "b"
    res_b = make_results(_cells(), make_env(host="fixture-host-b"), run_id="FIXTURE-views-b")
    b = export_run(make_run_dir(other, res_b), tmp_path / "bundles")
    runner = CliRunner()
    data = json.loads(runner.invoke(app, ["compare", str(bundle), str(b), "--json", "-"]).stdout)
    row = next(r for r in data["rows"] if r["cell_id"] == CELL)
    for label in ("A", "B"):
        assert fmt_speedup(row["machines"][label]["speedup_vs_fp32"]["ratio"]) == EXPECTED
    for args in ([], ["--markdown", "-"]):
        out = runner.invoke(app, ["compare", str(bundle), str(b), *args], env={"COLUMNS": "200"}).stdout
        section = out[out.index("Speedup over fp32"):out.index("Throughput relative")]
        assert _speedups(section) == {EXPECTED}  # the CI's bounds carry no ×
    page = tmp_path / "c.html"
    assert runner.invoke(app, ["compare", str(bundle), str(b), "--html", str(page)]).exit_code == 0
    html = page.read_text()
    table = html[html.index("<h2>Speedup over fp32 on each machine"):html.index("<h2>Throughput relative")]
    assert set(re.findall(r"(\d+\.\d+×) \[", table)) == {EXPECTED}


def test_bundle_show_prints_the_same_speedup(bundle):
    out = CliRunner().invoke(app, ["bundle", "show", str(bundle)], env={"COLUMNS": "160"}).stdout
    [line] = [x for x in out.splitlines() if CELL in x]
    assert _speedups(line) == {EXPECTED}


def test_the_report_prints_the_same_speedup_in_its_table_findings_and_chart(bundle):
    b = open_bundle(bundle)
    html = b.text("report.html")
    cells_table = html[html.index("<h2>Cells</h2>"):]
    row = next(r for r in cells_table.split("<tr>") if CELL in r)
    assert set(re.findall(r"(\d+\.\d+×) \[", row)) == {EXPECTED}
    findings = html[html.index("What the run shows"):html.index("<h2>Environment")]
    assert set(re.findall(r"amp-fp16 (\d+\.\d+×)", findings)) == {EXPECTED}
    chart = b.text("charts/cifar-torch-speedup.svg")
    assert set(re.findall(r"amp-fp16, resnet50: (\d+\.\d+×)", chart)) == {EXPECTED}
    # the page rendered afresh agrees with the one in the bundle
    res = RunResults.from_dict(b.results.to_dict())
    fresh = render_run_report(res, res.environment, interrupted=False, charts=run_charts(res))
    assert set(re.findall(r"(\d+\.\d+×) \[", next(r for r in fresh.split("<tr>") if CELL in r))) == {EXPECTED}


def test_perf_table_prints_the_same_speedup(bundle):
    perf_table = load_script("perf_table")
    text = perf_table.suite_tables(open_bundle(bundle).results)
    [line] = [x for x in text.splitlines() if x.startswith("| ResNet-50 |") and "1,000" in x]
    assert line.endswith(f"| {EXPECTED} |")


def test_perf_table_judges_the_inductor_step_and_compares_it_with_the_eager_kernel_graph(tmp_path, capsys):
    """bench_h200.sh's two runs of the same cells (default step, --compile off): the targets
    table prints each cell's median, its verdict, the step it ran and the ratio to the other run."""
    perf_table = load_script("perf_table")

    def run(sub, seconds, mode, run_id):
        cell = make_cell("resnet18", "amp-bf16", epoch_s=seconds, steps=1000)  # 256,000 images per epoch
        for r in cell["repeats"]:
            r["compile_mode"] = mode
        make_run_dir(tmp_path / sub, make_results([cell], run_id=run_id))

    run("r18-torch", [1.0, 1.1, 1.2], "cuda-graph-inductor", "FIXTURE-20250101-120000-a")  # median 232,727/s
    run("r18-graph", [1.6, 1.5, 1.7], "cuda-graph", "FIXTURE-20250101-120000-b")  # median 160,000/s
    perf_table.main(tmp_path)
    [line] = [x for x in capsys.readouterr().out.splitlines() if "ResNet-18, amp-bf16 (Inductor" in x]
    assert "| 232,727 images/s | ≥ 185,000 images/s | met |" in line, line
    assert "step cuda-graph-inductor" in line and "1.45× the eager-kernel graph" in line, line


def test_perf_table_prints_a_data_parallel_cells_recorded_scaling(tmp_path):
    """--scaling: the figures a data-parallel cell recorded (efficiency as kit.runner.isolate computed it)."""
    from kit.report.export import export_run

    perf_table = load_script("perf_table")
    cell = make_cell("resnet50", "amp-bf16", epoch_s=[10.0, 10.0, 10.0])  # 256 x 60 / 10 = 1,536 images/s
    cell["params"]["world_size"] = 2
    cell["metrics"] = {"data_parallel": {"world_size": 2, "throughput_per_gpu_items_per_s_median": 768.0,
                                         "scaling": {"baseline_throughput_items_per_s_median": 800.0, "efficiency": 0.96},
                                         "allreduce": {"seconds_per_step": 0.0021}, "interconnect": {"kind": "nvlink"}}}
    plain = make_cell("resnet50", "fp32")
    bundle = export_run(make_run_dir(tmp_path / "runs", make_results([cell, plain])), tmp_path / "out")
    text = perf_table.scaling_table(open_bundle(bundle).results)
    rows = [x for x in text.splitlines() if x.startswith("| cifar/")]
    assert rows == ["| cifar/resnet50/amp-bf16/torch | 2 | 800 images/s | 1,536 images/s | 768 images/s | 96.0% | 2.1 | nvlink |"]


def test_the_gpt_charts_draw_fp8_over_bf16_as_the_bundle_derives_it():
    """The GPT suite's vs-bf16 chart (fp8 ÷ bf16, the suite's question) gives the ratio of medians that
    results.json's derived.bf16_ratios holds, under a GPT title (not the LSTM's)."""
    def gpt(precision: str, thr: list[float]) -> dict:
        c = make_cell("gpt-1b", precision, engine="kit", workload="gpt", epoch_s=[10.0, 10.0, 10.0])
        for rep, t in zip(c["repeats"], thr):
            rep["throughput_items_per_s"] = t
        c["summary"] = summarise_repeats(c["repeats"])
        return c

    cells = [gpt("fp32", [100.0, 101.0, 99.0]), gpt("amp-bf16", FP32_THR), gpt("fp8-tensorwise", FP16_THR)]
    results = RunResults.from_dict(make_results(cells))
    results.derived = derive(results.cells, "throughput", None, None)
    [row] = [r for r in results.derived["bf16_ratios"] if r["precision"] == "fp8-tensorwise"]
    assert fmt_speedup(row["speedup_over_bf16"]) == EXPECTED
    charts = run_charts(results)
    svg = charts["charts/gpt-kit-vs-bf16.svg"]
    assert "GPT decoder" in svg and "LSTM" not in svg and "amp-bf16 = 1" in svg
    assert EXPECTED in svg and "fp8-tensorwise" in svg
    assert "LSTM" not in charts["charts/gpt-kit-speedup.svg"]
    assert not any(name.endswith("vs-bf16.svg") for name in run_charts(RunResults.from_dict(make_results(_cells()))))
