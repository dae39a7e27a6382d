"""The batch curve (`kit run --batch-sizes`): the plan's cells, the knee, the speedup over fp32 and
images per joule at each batch size, the derived figures, compare, and the report and
`kit bundle show` views. Results are fixture data (invented numbers)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from fixtures.modules import load_script
from fixtures.results.factory import make_cell, make_env, make_results, set_config
from kit.bundle.envinfo import summarise_environment
from kit.compare.engine import build_comparison
from kit.compare.load import Source
from kit.errors import UsageError
from kit.report.charts import run_charts
from kit.report.html.run_report import render_run_report
from kit.report.svg.plots import line_chart
from kit.report.svg.primitives import Series
from kit.results import ratios
from kit.results.curve import KNEE_GAIN, curves, fmt_knee, knee
from kit.results.derive import derive
from kit.results.cell_ids import CURVE_PARAM
from kit.results.schema import CellResult, RunResults
from kit.runner.option_checks import config_from_options
from kit.runner.options import parse_args, to_args
from kit.runner.plan import build_plan


# --- the knee: one definition ----------------------------------------------------------------


def test_the_knee_is_the_first_batch_past_which_doubling_gains_under_ten_percent():
    # 256 -> 512: +60%; 512 -> 1024: +20%; 1024 -> 2048: +5%; 2048 -> 4096: +2%
    points = [(256, 100.0), (512, 160.0), (1024, 192.0), (2048, 201.6), (4096, 205.6)]
    assert knee(points) == 1024
    assert knee(list(reversed(points))) == 1024  # any order


def test_a_curve_still_gaining_at_its_largest_batch_has_no_knee_yet():
    assert knee([(256, 100.0), (512, 105.0), (1024, 150.0)]) is None  # flat, then gains again
    assert knee([(256, 100.0), (512, 200.0)]) is None
    assert fmt_knee(_curve([(256, 100.0), (512, 200.0)])) == "not reached (> 512)"


def test_a_gain_of_exactly_ten_percent_is_not_under_it():
    assert knee([(256, 100.0), (512, 100.0 * (1 + KNEE_GAIN))]) is None
    assert knee([(256, 100.0), (512, 109.9)]) == 256


def test_the_gain_is_counted_per_doubling_when_the_sizes_do_not_double():
    # 256 -> 1024 is two doublings: +21% in all is 10% per doubling (not under); +20% is under
    assert knee([(256, 100.0), (1024, 121.0001)]) is None
    assert knee([(256, 100.0), (1024, 120.0)]) == 256
    # 256 -> 384 (+12%) is 0.58 doublings: 21.6% per doubling
    assert knee([(256, 100.0), (384, 112.0)]) is None


def test_points_without_a_throughput_end_the_curve_and_one_point_has_no_knee():
    assert knee([(256, 100.0), (512, 105.0), (1024, None)]) == 256  # out of memory at 1024
    assert knee([(256, 100.0), (512, None)]) is None
    assert knee([]) is None
    assert fmt_knee(_curve([(256, 100.0), (512, None)])) == "— (fewer than 2 sizes measured)"


def test_a_throughput_that_falls_with_the_batch_is_past_the_knee():
    assert knee([(256, 100.0), (512, 180.0), (1024, 170.0)]) == 512


# --- the options and the plan ----------------------------------------------------------------


def test_batch_sizes_become_one_cell_per_size_smallest_first_with_the_batch_in_the_id():
    config = config_from_options(parse_args(["--data", "synthetic", "-m", "resnet18", "-p", "fp32,amp-bf16",
                                             "-e", "torch", "--batch-sizes", "1024,256", "--batch-sizes", "512"]))
    assert config.options_of("cifar").batch_sizes == [1024, 256, 512] and config.batch_size is None
    plan = build_plan(config)
    assert plan.cell_ids == [f"cifar/resnet18/{p}/torch/bs{b}" for p in ("fp32", "amp-bf16") for b in (256, 512, 1024)]
    assert len(set(plan.cell_ids)) == len(plan.cell_ids)
    for spec in plan.cells:
        assert spec.params[CURVE_PARAM] == [256, 512, 1024]
        assert spec.params["batch_size"] == int(spec.cell_id.rsplit("/bs", 1)[1])


def test_without_batch_sizes_the_cells_keep_the_ids_they_always_had():
    plan = build_plan(config_from_options(parse_args(["--data", "synthetic", "-m", "resnet18", "-p", "fp32", "-e", "torch"])))
    assert plan.cell_ids == ["cifar/resnet18/fp32/torch"]
    assert CURVE_PARAM not in plan.cells[0].params


def test_an_old_results_file_without_the_option_reads_with_the_ids_it_had():
    d = make_results([make_cell(), make_cell(precision="amp-bf16")], make_env())
    d["config"].pop("suite_options")  # as a kit before suites owned their options wrote it: no batch_sizes
    d["config"].update(models=["resnet18"], image_size=32)
    res = RunResults.from_dict(d)
    assert res.config.options_of("cifar").batch_sizes is None
    assert [c.cell_id for c in res.cells] == ["cifar/resnet18/fp32/torch", "cifar/resnet18/amp-bf16/torch"]


def test_the_lstm_cells_of_suite_all_keep_their_batch_size():
    config = config_from_options(parse_args(["--suite", "all", "--data", "synthetic", "-m", "resnet18", "-p", "fp32",
                                             "-e", "torch", "--preset", "apex-2018", "--batch-sizes", "2,4"]))
    ids = build_plan(config).cell_ids
    assert ids == ["cifar/resnet18/fp32/torch/bs2", "cifar/resnet18/fp32/torch/bs4", "lstm/apex-2018/fp32/kit"]


@pytest.mark.parametrize("args, words", [
    (["--batch-sizes", "256,0"], "0 is not a batch size"),
    (["--batch-sizes=-8"], "-8 is not a batch size"),
    (["--batch-sizes", "256,256"], "names 256 more than once"),
    (["--batch-sizes", "256", "--batch-sizes", "256"], "names 256 more than once"),
    (["--batch-sizes", "256,big"], "'big' is not a whole number"),
    (["--batch-sizes", "2.5"], "'2.5' is not a whole number"),
    (["--batch-sizes", ","], "--batch-sizes is empty"),
    (["--batch-sizes", "4", "--batch-size", "8"], "--batch-size and --batch-sizes both given"),
    (["--batch-sizes", "4", "--suite", "lstm"], "--suite lstm has no cell that reads it"),
])
def test_a_bad_batch_list_is_a_usage_error(args, words):
    with pytest.raises(UsageError) as err:
        config_from_options(parse_args(["--data", "synthetic", *args]))
    assert words in err.value.message


def test_the_option_travels_to_the_container_command_line_and_back():
    options = parse_args(["--batch-sizes", "256,512", "--data", "synthetic"])
    assert to_args(options) == ["--batch-sizes", "256,512", "--data", "synthetic"]
    assert parse_args(to_args(options)) == options


def test_smoke_with_a_batch_curve_keeps_the_curve():
    config = config_from_options(parse_args(["--smoke", "--batch-sizes", "2,4"]))
    assert config.batch_size is None and config.options_of("cifar").batch_sizes == [2, 4]


# --- the curve from the cells ----------------------------------------------------------------


def _point(precision: str, batch: int, epoch_s=(10.0, 10.2, 9.8), status: str = "ok", reason: str | None = None,
           items_per_j: float | None = None, basis: str = "steady", **kw) -> dict:
    d = make_cell(precision=precision, batch_size=batch, epoch_s=list(epoch_s), status=status, reason=reason, **kw)
    d["params"][CURVE_PARAM] = [256, 512, 1024]
    if status != "ok" and reason and reason.startswith("out of memory"):
        d["metrics"] = {"out_of_memory": True}
    if items_per_j is not None:
        d["telemetry"] = {"available": True, "power_mean_w": 400.0, "energy_j": 4000.0, "items_per_j": items_per_j,
                          "items_per_j_unit": "images per joule", "other_processes": [], "throttled": False,
                          "energy_basis": basis}
    d.pop("cell_id", None)
    return d


def _curve_cells() -> list[dict]:
    # fixture: fp32 flattens early; amp-bf16 keeps gaining and runs out of memory at 1024
    return [
        _point("fp32", 256, (10.0, 10.0, 10.0), items_per_j=3.0),
        _point("fp32", 512, (12.0, 12.0, 12.0), items_per_j=3.2, basis="cell"),  # over the whole cell
        _point("fp32", 1024, (23.0, 23.0, 23.0)),
        _point("amp-bf16", 256, (5.0, 5.0, 5.0), items_per_j=9.0),
        _point("amp-bf16", 512, (6.0, 6.0, 6.0)),
        _point("amp-bf16", 1024, status="skipped", reason="out of memory at batch 1024"),
    ]


def _results(cells: list[dict] | None = None, env=None) -> RunResults:
    d = make_results(cells or _curve_cells(), env or make_env())
    set_config(d, batch_sizes=[256, 512, 1024])
    return RunResults.from_dict(d)


def _curve(points):
    from kit.results.curve import Curve, Point

    return Curve("cifar", "resnet18", "torch", "fp32", "images",
                 [Point(b, "ok" if t is not None else "skipped", None, t) for b, t in points])


def test_each_size_has_its_throughput_speedup_over_fp32_and_images_per_joule():
    res = _results()
    by = {c.precision: c for c in curves(res.cells)}
    fp32, bf16 = by["fp32"], by["amp-bf16"]
    assert [p.batch_size for p in fp32.points] == [256, 512, 1024]
    # throughput = batch x 60 steps / epoch seconds (fixture)
    assert fp32.points[0].throughput == pytest.approx(256 * 60 / 10.0)
    assert fp32.knee == 512  # 256 -> 512 gains 67%, 512 -> 1024 4.3%
    assert bf16.knee is None  # 256 -> 512 gains 67%, and 1024 did not fit
    cells = {c.cell_id: c for c in res.cells}
    for b, p in zip((256, 512), bf16.points):
        # the one ratio function, fp32 at the same batch size
        expected = ratios.speedup_over_fp32(cells[f"cifar/resnet18/amp-bf16/torch/bs{b}"],
                                            cells[f"cifar/resnet18/fp32/torch/bs{b}"])
        assert p.speedup_over_fp32 == expected and expected is not None
    assert bf16.points[0].speedup_over_fp32 == pytest.approx(2.0)
    assert bf16.points[2].status == "skipped" and bf16.points[2].reason == "out of memory at batch 1024"
    assert bf16.points[2].out_of_memory and bf16.points[2].throughput is None
    assert fp32.points[0].images_per_j == 3.0 and fp32.points[0].joules_per_image == pytest.approx(1 / 3)
    assert fp32.points[2].images_per_j is None  # no telemetry: not measured, never a guess
    assert fp32.points[0].energy_basis == "steady" and fp32.points[1].energy_basis == "cell"
    assert fp32.points[1].images_per_j == 3.2 and fp32.points[1].steady_images_per_j is None


def test_derived_figures_are_per_batch_size_and_name_the_knee():
    res = _results()
    d = derive(res.cells, "throughput")
    speedups = [(r["precision"], r["batch_size"]) for r in d["performance_ratios"]]
    assert speedups == [("amp-bf16", 256), ("amp-bf16", 512)]
    (bf16,) = [c for c in d["batch_curves"] if c["precision"] == "amp-bf16"]
    assert bf16["knee_batch_size"] is None and "10%" in bf16["knee_rule"]
    assert bf16["points"][2] == {"batch_size": 1024, "status": "skipped", "reason": "out of memory at batch 1024",
                                 "throughput_items_per_s": None, "speedup_over_fp32": None, "items_per_j": None,
                                 "j_per_item": None, "energy_basis": None, "out_of_memory": True}
    assert "batch_curves" not in derive([CellResult.from_dict(make_cell())], "throughput")


def test_curves_come_in_one_order_whatever_order_a_merged_bundle_lists_its_cells():
    """A merge lists its parts' cells in the order of its inputs (ResNet-50's amp points from a run of
    their own, before the run with its fp32 points): the curves still come by image size, model
    (resnet18 before resnet50 before resnet101) and precision (fp32 first, the ratios' base)."""
    cells = [_point("amp-bf16", 256, model="resnet50"), _point("amp-fp16", 256, model="resnet101"),
             _point("fp32", 256, model="resnet50"), _point("amp-fp16", 256, model="resnet50"),
             _point("fp32", 512, model="resnet18")]
    got = [(c.model, c.precision) for c in curves(_results(cells).cells)]
    assert got == [("resnet18", "fp32"), ("resnet50", "fp32"), ("resnet50", "amp-fp16"), ("resnet50", "amp-bf16"),
                   ("resnet101", "amp-fp16")]


def test_compare_lines_up_two_curves_point_by_point():
    a = _results(env=make_env(host="fixture-host-a"))
    slower = [_point("fp32", 256, (20.0, 20.0, 20.0)), _point("fp32", 512, (38.0, 38.0, 38.0)),
              _point("amp-bf16", 256, (10.0, 10.0, 10.0))]
    b = _results(slower, env=make_env(host="fixture-host-b", gpu="Fixture GPU B"))
    sources = [Source(index=i, label=label, path=Path(f"/fixture/{label}"), kind="results file", results=r,
                      environment=r.environment, env=summarise_environment(r.environment, r.config, r.cells),
                      interrupted=False)
               for i, (label, r) in enumerate((("A", a), ("B", b)))]
    cmp = build_comparison(sources)
    rows = {r.cell_id: r for r in cmp.rows}
    assert set(rows) == {"cifar/resnet18/fp32/torch/bs256", "cifar/resnet18/fp32/torch/bs512",
                         "cifar/resnet18/amp-bf16/torch/bs256"}
    vs = rows["cifar/resnet18/fp32/torch/bs512"].machines[1].vs_baseline
    assert vs.ratio == pytest.approx(12.0 / 38.0)
    # each machine's speedup over fp32 is at the same batch size
    assert rows["cifar/resnet18/amp-bf16/torch/bs256"].machines[1].vs_fp32.ratio == pytest.approx(2.0)


# --- the views ---------------------------------------------------------------------------------


def test_the_report_draws_throughput_against_batch_size_one_line_per_precision():
    from kit.bundle.active_content import svg_problem

    charts = run_charts(_results())
    svg = charts["charts/cifar-torch-resnet18-batch-curve.svg"]
    assert svg_problem(svg.encode()) is None
    assert svg.count('class="line"') == 2  # fp32 and amp-bf16
    assert "<title>fp32, 512: 2,560</title>" in svg
    assert "<title>amp-bf16, 1,024: out of memory at batch 1024</title>" in svg
    assert "<title>fp32: knee at 512</title>" in svg
    assert re.search(r"<text [^>]*>batch size \(log scale\)</text>", svg)
    per_j = charts["charts/cifar-torch-resnet18-batch-curve-per-joule.svg"]
    # one basis per line: the whole-cell figure (warm-up included, reads high) is left out of it
    assert "<title>fp32, 256: 3</title>" in per_j and "<title>fp32, 512: 3.2</title>" not in per_j
    assert "<title>fp32, 512: timed steps too short to measure energy over</title>" in per_j
    assert "<title>fp32, 1,024: not measured</title>" in per_j
    # the points are no bars of the per-model charts (one model, several cells per precision)
    assert not any(name.endswith("-throughput.svg") for name in charts)


def test_a_line_with_a_gap_is_two_lines_and_the_chart_is_inert():
    svg = line_chart("Curve — fixture", [2, 4, 8, 16], [Series("fp32", [1.0, 2.0, None, 3.0], notes=[None, None, "failed", None])],
                     y_label="images per second", chart_id="c1")
    assert svg.count('class="line"') == 1 and svg.count('class="point"') == 3  # 2-4 joined; 16 alone
    assert "<title>fp32, 8: failed</title>" in svg
    for absent in ("<defs", "<use", "href", "clip-path", "<script"):
        assert absent not in svg
    assert re.findall(r'\sid="([^"]*)"', svg) == ["c1", "c1-title"]


def test_the_report_tables_show_the_curve_and_its_knee():
    res = _results()
    html = render_run_report(res, res.environment, interrupted=False, charts=run_charts(res))
    part = html[html.index("<h2>Batch curve</h2>"):]
    part = part[:part.index("</table>")]
    text = re.sub(r"<[^>]+>", " ", part)
    assert "knee (batch)" in text and "batch 1,024" in text
    assert "out of memory at batch 1024" in text and "not reached (&gt; 512)" in text
    assert "2.00×" in text and "9 images/J" in text


def test_bundle_show_prints_the_curve_and_the_knee(tmp_path):
    from rich.console import Console

    from kit.report.show import print_batch_curve

    buf = io.StringIO()
    print_batch_curve(_results(), Console(file=buf, width=200, color_system=None))
    out = buf.getvalue()
    assert "Batch curve" in out and "knee" in out
    fp32 = next(line for line in out.splitlines() if "cifar/resnet18/fp32/torch" in line)
    assert " 512 " in fp32 and "1,536 images/s" in fp32 and "3 images/J" in fp32
    bf16 = next(line for line in out.splitlines() if "amp-bf16" in line)
    assert "2.00×" in bf16 and "out of memory at batch 1024" in bf16 and "not reached (> 512)" in bf16


def test_a_cell_pattern_naming_one_point_shows_that_points_whole_curve():
    """`kit bundle show --cell 'cifar/resnet18/fp32/torch/bs512'` keeps that cell in the table and its
    curve (every point: a curve is read whole), not the other precision's."""
    from rich.console import Console

    from kit.report.show import print_batch_curve

    for pattern in ("cifar/resnet18/fp32/torch/bs512", "cifar/resnet18/fp32/torch"):
        buf = io.StringIO()
        print_batch_curve(_results(), Console(file=buf, width=200, color_system=None), [pattern])
        out = buf.getvalue()
        assert "cifar/resnet18/fp32/torch" in out and "1,536 images/s" in out, (pattern, out)
        assert "amp-bf16" not in out, (pattern, out)
    buf = io.StringIO()
    print_batch_curve(_results(), Console(file=buf, width=200, color_system=None), ["cifar/resnet18/fp32/torch/bs2048"])
    assert buf.getvalue() == ""


def test_bundle_show_prints_a_curve_too_wide_for_the_console_one_point_a_row():
    from rich.console import Console

    from kit.report.show import print_batch_curve

    buf = io.StringIO()
    print_batch_curve(_results(), Console(file=buf, width=80, color_system=None))
    lines = buf.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "batch 256" not in buf.getvalue()  # not the wide layout, cut to fit
    fp32 = [line for line in lines if "cifar/resnet18/fp32/torch" in line]
    assert len(fp32) == 1 and " 512 " in fp32[0] and "256" in fp32[0] and "images/s" in fp32[0]
    oom = next(line for line in lines if "out of memory" in line)
    assert "1,024" in oom


def test_perf_table_prints_the_curve_as_bundle_show_does():
    """scripts/perf_table.py --curve (docs/performance.md's tables): the same knee, speedups and images per joule."""
    perf_table = load_script("perf_table")
    text = perf_table.curve_tables(_results())
    head, _, *rows = text.strip().splitlines()
    assert head.startswith("| resnet18, ") and "| knee | batch 256 | batch 512 | batch 1,024 |" in head
    fp32 = next(r for r in rows if r.startswith("| fp32 |"))
    bf16 = next(r for r in rows if r.startswith("| amp-bf16 |"))
    assert "| 512 |" in fp32 and "1,536 images/s<br>3 images/J" in fp32
    assert "3.2 images/J (whole cell, reads high)" in fp32
    assert "not reached (> 512)" in bf16 and "2.00×" in bf16 and "out of memory at batch 1024" in bf16


def test_a_curve_at_224_px_is_another_curve_with_its_own_ids_and_merges_beside_the_32_px_one(tmp_path):
    """The same model, precision and batch at 32 and 224 px are two measurements: their ids differ
    (``.../torch/224px/bs256``), the views draw two curves (each point's speedup against fp32 at its own
    size), and two runs' bundles merge into one (the H200 reference holds both sizes)."""
    from fixtures.results.factory import make_run_dir
    from kit.bundle.safe_open import open_bundle
    from kit.report.export import export_run, merge_bundles
    from kit.results.cell_ids import cell_id

    assert cell_id("cifar", "resnet50", "fp32", "torch", {"image_size": 32}) == "cifar/resnet50/fp32/torch"
    assert cell_id("cifar", "resnet50", "fp32", "torch", {"image_size": 224, CURVE_PARAM: [64], "batch_size": 64}) \
        == "cifar/resnet50/fp32/torch/224px/bs64"
    assert cell_id("lstm", "tensor-core", "fp32", "kit", {"image_size": 224}) == "lstm/tensor-core/fp32/kit"
    small = [_point("fp32", 256), _point("amp-bf16", 256, epoch_s=(5.0, 5.0, 5.0))]
    large = [_point("fp32", 256, image_size=224, epoch_s=(40.0, 40.0, 40.0)),
             _point("amp-bf16", 256, image_size=224, epoch_s=(10.0, 10.0, 10.0))]
    res = _results(small + large)
    cs = {(c.precision, c.image_size): c for c in curves(res.cells)}
    assert set(cs) == {("fp32", 32), ("amp-bf16", 32), ("fp32", 224), ("amp-bf16", 224)}
    assert cs[("amp-bf16", 32)].points[0].speedup_over_fp32 == pytest.approx(2.0)
    assert cs[("amp-bf16", 224)].points[0].speedup_over_fp32 == pytest.approx(4.0)
    assert cs[("fp32", 224)].name == "cifar/resnet18/fp32/torch/224px"
    bundles = []
    for name, cells in (("a", small), ("b", large)):
        cells = [dict(c, cell_id=cell_id(c["workload"], c["model"], c["precision"], c["engine"], c["params"])) for c in cells]
        d = make_results(cells, make_env(), run_id=f"FIXTURE-20250101-12000{len(bundles)}-{name}")
        set_config(d, batch_sizes=[256])
        bundles.append(export_run(make_run_dir(tmp_path / name, d), tmp_path / f"out-{name}"))
    merged = open_bundle(merge_bundles(bundles, tmp_path / "m"))
    assert sorted(c.cell_id for c in merged.results.cells) == [
        "cifar/resnet18/amp-bf16/torch/224px/bs256", "cifar/resnet18/amp-bf16/torch/bs256",
        "cifar/resnet18/fp32/torch/224px/bs256", "cifar/resnet18/fp32/torch/bs256"]
    assert "resnet18/224px · torch" in merged.files["report.html"].decode()


def test_cells_at_two_image_sizes_are_never_compared_with_each_other():
    """A bundle holding 32 px and 224 px cells (a merged reference): the speedups over fp32 pair each
    cell with fp32 at its own size, and a run at 224 px without a curve keeps its bar charts."""
    from kit.results.derive import performance_ratios

    small = [make_cell("resnet18", "fp32", epoch_s=[10.0] * 3), make_cell("resnet18", "amp-fp16", epoch_s=[5.0] * 3)]
    large = [make_cell("resnet18", "fp32", image_size=224, epoch_s=[40.0] * 3),
             make_cell("resnet18", "amp-fp16", image_size=224, epoch_s=[10.0] * 3)]
    res = _results(small + large)
    rows = {(r.get("image_size"), r["precision"]): r["speedup_over_fp32"] for r in performance_ratios(res.cells)}
    assert rows == {(None, "amp-fp16"): pytest.approx(2.0), (224, "amp-fp16"): pytest.approx(4.0)}
    charts = run_charts(_results(large))
    assert "charts/cifar-torch-224px-throughput.svg" in charts and "at 224 px" in charts["charts/cifar-torch-224px-throughput.svg"]
