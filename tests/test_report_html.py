"""report.html and the SVG charts: content, badges, plain-language findings,
escaping of untrusted text, self-containment, and a real headless-browser
render. Results are fixture data (invented numbers)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from fixtures.results.factory import make_cell, make_env, make_profile, make_results, make_run_dir, standard_cells
from kit.report.export import export_run
from kit.bundle.safe_open import open_bundle
from kit.report.charts import run_charts
from kit.report.html.run_report import render_run_report
from kit.report.svg.plots import bar_chart
from kit.report.svg.primitives import Series
from kit.results import kernel_classes as kc
from kit.results.schema import RunResults


def _report(cells, status="complete", env=None) -> str:
    res = RunResults.from_dict(make_results(cells, env or make_env(), status=status))
    return render_run_report(res, res.environment, interrupted=status != "complete", charts=run_charts(res))


def _visible_text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _findings(html: str) -> str:
    """The "What the run shows" list as text, one finding per line."""
    part = html[html.index("What the run shows"):html.index("<h2>Environment")]
    return "\n".join(re.sub(r"<[^>]+>", "", li) for li in re.findall(r"<li>(.*?)</li>", part))


def test_report_shows_environment_cells_and_charts():
    html = _report(standard_cells())
    text = _visible_text(html)
    for needle in ("fixture-host-a", "Fixture GPU A", "580.159", "cuda12", "2.11.0", "cifar/resnet50/amp-bf16/torch"):
        assert needle in text
    assert html.count("<svg") == 3 and html.count('class="bar"') == 6 + 6 + 4  # time, throughput, speedup bars
    assert "1.60× [" in text and "significant" in text


def test_a_resumed_run_names_its_earlier_sessions_escaped():
    """A run resumed elsewhere lists each earlier session (when, how many cells, host, GPU, kit
    commit) in the environment table; a stranger's text there is escaped."""
    env = make_env()
    env["earlier_sessions"] = [
        {"collected_at": "2026-12-01T23:32:03Z", "host": {"host_id": "h-first"}, "nvml": {"gpus": [{"uuid": "GPU-6c95"}]},
         "kit": {"git_commit": "009a8187607b378a"}, "cells": ["a", "b"]},
        {"collected_at": "<script>alert(1)</script>", "cells": "not a list", "kit": "odd"},
        "not a session",
    ]
    html = _report(standard_cells(), env=env)
    text = _visible_text(html)
    assert "earlier session 1 2026-12-01T23:32:03Z: 2 cell(s) on host h-first (GPU-6c95), kit commit 009a8187607b" in text
    assert "earlier session 2" in text and "<script>alert" not in html and "&lt;script&gt;" in html
    assert "earlier session 3" not in text


def test_synthetic_and_interrupted_badges():
    html = _report(standard_cells(), status="interrupted")
    assert 'class="badge synthetic"' in html and "SYNTHETIC DATA" in html
    assert 'class="badge interrupted"' in html
    real = _report(standard_cells(source="real"), env=make_env(data="real"))
    assert "SYNTHETIC DATA" not in real and "INTERRUPTED" not in real and "COMPLETE" in real


def test_loader_bound_run_is_explained():
    cells = [
        make_cell("resnet18", "fp32", epoch_s=[10.0, 10.1, 9.9], data_wait_frac=0.5),
        make_cell("resnet18", "amp-fp16", epoch_s=[9.9, 10.0, 9.8], data_wait_frac=0.6),
    ]
    text = _findings(_report(cells))
    assert "No speedup (speedup over fp32 1.00×–1.10×): resnet18 · torch: amp-fp16 1.01× (not significant)." in text
    assert "Limited by the data loader: waiting for data 30% or more of the step time: resnet18 · torch: amp-fp16 60%." in text


def test_low_gpu_utilisation_is_reported():
    cells = [
        make_cell("resnet34", "fp32", epoch_s=[10.0, 10.1, 9.9], util_pct=35.0),
        make_cell("resnet34", "amp-bf16", epoch_s=[9.8, 10.0, 9.9], util_pct=33.0),
    ]
    text = _findings(_report(cells))
    assert ("GPU busy under 70% of the time: Python, kernel launches or the input pipeline bound the run, "
            "not GPU math: resnet34 · torch: fp32 35%, amp-bf16 33%.") in text


def test_speedup_is_stated_and_synthetic_means_throughput_only():
    text = _findings(_report(standard_cells(models=("resnet50",))))
    assert "Faster than fp32 (speedup over fp32 ≥ 1.10×): resnet50 · torch: amp-fp16 1.60×, amp-bf16 1.68×." in text
    assert "Synthetic data: throughput only" in text


def test_each_finding_is_one_line_listing_its_cells():
    """Five models that all speed up and all use synthetic data give one "faster" line and one
    "synthetic" line, not one sentence per model."""
    html = _report(standard_cells(models=("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")))
    items = re.findall(r"<li><strong>(.*?)</strong>", html[html.index("What the run shows"):html.index("<h2>Environment")])
    assert items == ["Faster than fp32 (speedup over fp32 ≥ 1.10×)", "Synthetic data"]
    text = _findings(html)
    assert text.count("Synthetic data") == 1
    for model in ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152"):
        assert f"{model} · torch: amp-fp16 1.60×, amp-bf16 1.68×" in text


def test_no_claim_without_the_data_to_support_it():
    # fp16 is not faster, but nothing says why: no "limited by" sentence is invented.
    cells = [make_cell("resnet18", "fp32", epoch_s=[10.0, 10.1, 9.9]), make_cell("resnet18", "amp-fp16", epoch_s=[9.9, 10.0, 9.8])]
    text = _findings(_report(cells))
    assert "resnet18 · torch: amp-fp16 1.01× (not significant)." in text
    assert "limited by" not in text.lower() and "busy" not in text and "not the limit" not in text


def test_a_slower_precision_with_a_fast_loader_is_called_slower_not_explained():
    cells = [make_cell("resnet18", "fp32", epoch_s=[10.0], data_wait_frac=0.02),
             make_cell("resnet18", "amp-bf16", epoch_s=[13.7], data_wait_frac=0.01)]
    text = _findings(_report(cells))
    assert "Slower than fp32 (speedup over fp32 under 1.00×): resnet18 · torch: amp-bf16 0.73× (1 repeat)." in text
    assert "The data loader was not the limit: waiting for data: resnet18 · torch: amp-bf16 1%." in text


def test_untrusted_text_is_escaped_and_the_page_is_self_contained():
    cells = standard_cells(models=("resnet18",)) + [
        make_cell("resnet18", "apex-o1", status="skipped", reason='<script>alert("x")</script><img src="http://evil.example/x">')
    ]
    env = make_env(host='<b onmouseover="x()">host</b>')
    html = _report(cells, env=env)
    assert "<script" not in html and "<img" not in html and "<b onmouseover" not in html
    assert "&lt;script&gt;" in html
    without_ns = html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "evil.example" in without_ns  # shown as text...
    assert not re.search(r'(src|href)\s*=\s*"https?:', without_ns)  # ...never fetched
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert "Content-Security-Policy" in html


def test_bar_chart_draws_bars_error_bars_reference_and_axis_labels():
    svg = bar_chart(
        "Speedup — fixture", ["resnet18", "resnet50"],
        [Series("amp-fp16", [1.5, None], [1.4, None], [1.6, None]), Series("amp-bf16", [1.7, 1.2])],
        y_label="fp32 time ÷ precision time (×)", x_label="model", reference=1.0, reference_label="fp32 = 1",
    )
    assert svg.count('class="bar"') == 3  # the None value draws no bar
    assert svg.count('class="errorbar"') == 1
    assert 'class="reference"' in svg and "fp32 = 1" in svg
    assert "fp32 time ÷ precision time (×)" in svg and ">model<" in svg
    assert "amp-fp16, resnet50: no data" in svg


def test_bundle_report_matches_the_bundle_charts(tmp_path):
    run = make_run_dir(tmp_path / "runs", make_results(standard_cells(), make_env()))
    b = open_bundle(export_run(run, tmp_path / "out"))
    report = b.text("report.html")
    for name, data in b.files.items():
        if name.endswith(".svg"):
            assert data.decode() in report  # the report inlines exactly the charts it ships


# --- why this speedup (fixture profiles: invented numbers in CellResult.profile's shape) -------------

FP32_PROFILE = make_profile(30.0, {kc.OTHER_MATMUL: 12.0, kc.NORM_ELEMENTWISE: 4.0, kc.OPTIMIZER: 1.0})
FP16_PROFILE = make_profile(24.0, {kc.TENSOR_CORE_MATMUL: 2.0, kc.NORM_ELEMENTWISE: 2.5, kc.OPTIMIZER: 1.0},
                            kernels=[("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n", 2.0), ("<img src=x onerror=alert(1)>_relu", 2.5),
                                     ("multi_tensor_apply_kernel", 1.0)])
PEAKS = {"available": True, "fp32": 50.0, "tf32": 400.0, "fp16": 700.0, "bf16": 700.0}


def _why(html: str) -> str:
    return html[html.index('<h2 id="why">'):html.index("<h2>", html.index('<h2 id="why">') + 1)]


def test_the_why_section_draws_each_profiled_precisions_step_and_its_ladder():
    env = dict(make_env(), peak_tflops_measured=PEAKS)
    cells = [make_cell("resnet18", "fp32", engine="fastai", epoch_s=[10.0, 10.1, 9.9], profile=FP32_PROFILE),
             make_cell("resnet18", "amp-fp16", engine="fastai", epoch_s=[9.8, 9.9, 9.7], profile=FP16_PROFILE),
             make_cell("resnet18", "amp-bf16", engine="fastai", epoch_s=[9.9, 9.9, 9.8])]
    why = _why(_report(cells, env=env))
    assert "<h3>cifar/resnet18/fastai</h3>" in why and "Ladders partial" not in why
    [svg] = re.findall(r"<svg.*?</svg>", why, flags=re.S)
    assert '<title id="why-cifar-resnet18-fastai-title">Where a step' in svg  # the accessible title
    # a segment per kernel class with time, and the host gap: fp32 3 + 1, amp-fp16 3 + 1
    assert svg.count('class="segment"') == 8 and svg.count('class="legend"') == 5
    assert "fp32, host gap (GPU idle): 13.00 ms (43% of 30.00 ms)" in svg
    assert "amp-fp16, tensor-core matmul/convolution: 2.00 ms" in svg
    assert "amp-bf16: not profiled" in svg and ">30.00 ms<" in svg and ">24.00 ms<" in svg
    text = _visible_text(why)
    for rung in ("peak ratio 14.00×", "matmul kernels' time ratio 6.00×", "device-time ratio 3.09×",
                 "step-time ratio 1.25×", "keeps 43% of the peak ratio's 14.00×"):
        assert rung in text.replace("&#x27;", "'")
    assert "host-bound 43% idle" in text and "host-bound 77% idle" in text  # each cell's verdict
    # amp-bf16 has no profile: its middle rungs are one "not measured" line
    assert "step-time ratio not measured not measured: no profiled window" in text
    # amp-fp16's largest kernels, folded, its share of device time each, the stranger's name inert
    kernels = why[why.index('<details class="why-kernels">'):]
    assert "<img" not in why and "&lt;img src=x onerror=alert(1)&gt;_relu" in kernels
    assert "amp-fp16 45% 2.500 &lt;img" in _visible_text(kernels) and kernels.count("<tr>") == 3 + 1


def test_the_why_section_and_kit_explain_give_the_same_figures():
    from kit.results.explain import explain

    env = dict(make_env(), peak_tflops_measured=PEAKS)
    cells = [make_cell("resnet18", "fp32", profile=FP32_PROFILE), make_cell("resnet18", "amp-fp16", profile=FP16_PROFILE,
                                                                            epoch_s=[5.0, 5.1, 4.9])]
    res = RunResults.from_dict(make_results(cells, env))
    text = _visible_text(_why(render_run_report(res, res.environment, interrupted=False, charts={})))
    rows = explain(res)
    assert [r["precision"] for r in rows if r.get("answer")] == ["amp-fp16"]
    for row in rows:
        assert row["verdict"] in text
        assert row.get("answer", "").replace("'", "&#x27;") in text
        for r in row.get("ladder", []):
            assert r["how"].replace("'", "&#x27;") in text and (r.get("lost") or "").replace("'", "&#x27;") in text


def test_the_why_section_sets_the_engines_of_one_model_and_precision_side_by_side():
    """Fixture cells: ResNet-18 through fastai (loader-bound) and torch, fp32 and amp-fp16; the same rows
    as kit explain's Across engines."""
    from kit.results.explain import across_engines, explain

    cells = [make_cell("resnet18", "fp32", engine="fastai", epoch_s=[10.0, 10.1, 9.9]),
             make_cell("resnet18", "amp-fp16", engine="fastai", epoch_s=[11.0, 11.1, 10.9], data_wait_frac=0.5),
             make_cell("resnet18", "fp32", engine="torch", epoch_s=[3.0, 3.1, 2.9]),
             make_cell("resnet18", "amp-fp16", engine="torch", epoch_s=[1.0, 1.02, 0.98])]
    why = _why(_report(cells))
    part = _visible_text(why[why.index("<h3>Across engines</h3>"):])
    assert "cifar/resnet18 amp-fp16 torch 3.00× bound not measured fastai 0.91× loader-bound 50% wait" in part
    res = RunResults.from_dict(make_results(cells, make_env()))
    [group] = across_engines(res, explain(res))
    assert [m["engine"] for m in group["engines"]] == ["torch", "fastai"]
    assert "Across engines" not in _why(_report(cells[:2]))  # one engine: nothing to set beside it


def test_without_any_profile_the_why_section_says_in_one_line_why_the_ladders_are_partial():
    why = _why(_report(standard_cells(models=("resnet18",))))
    assert len(re.findall(r"Ladders partial", why)) == 1 and "<svg" not in why
    assert "Ladders partial: not measured in this run: no profiled window" in why
    assert "are not measured" in _visible_text(why) and "measured speedup" in why
    unavailable = standard_cells(models=("resnet18",))
    for c in unavailable:
        c["profile"] = {"available": False, "reason": "fixture: the profiler is off"}
    assert "the run says: fixture: the profiler is off" in _why(_report(unavailable))


# --- a real browser ---------------------------------------------------------------------------------

def _chromium() -> str:
    return shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"


def _browser(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    return subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *extra, url],
        capture_output=True, text=True, timeout=120,
    )


def _console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]


@pytest.mark.browser
def test_report_renders_in_headless_chromium_without_console_errors(tmp_path):
    cells = standard_cells() + [
        make_cell("resnet34", "fp32", epoch_s=[12.0, 12.2, 11.8], data_wait_frac=0.5, util_pct=35, profile=FP32_PROFILE),
        make_cell("resnet34", "amp-fp16", epoch_s=[11.8, 12.3, 11.6], data_wait_frac=0.55, util_pct=30,
                  profile=FP16_PROFILE),
        make_cell("resnet50", "apex-o1", status="skipped", reason="Apex not installed (fixture)"),
    ]
    run = make_run_dir(tmp_path / "runs", make_results(cells, make_env(), status="interrupted"))
    page = tmp_path / "report.html"
    page.write_bytes(open_bundle(export_run(run, tmp_path / "out")).files["report.html"])

    dom = _browser(tmp_path, page.as_uri(), "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<table" in dom.stdout and dom.stdout.count("<svg") == 4  # three charts, and the why section's bars
    assert dom.stdout.count('class="bar"') >= 20
    assert "Why this speedup" in dom.stdout and dom.stdout.count('class="segment"') == 8
    assert dom.stdout.count('<details class="why-kernels">') == 1 and "<img src=" not in dom.stdout
    assert "SYNTHETIC DATA" in dom.stdout and "INTERRUPTED" in dom.stdout
    assert "Limited by the data loader" in dom.stdout
    assert _console_errors(dom.stderr) == []

    shot = tmp_path / "report.png"
    r = _browser(tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1200,2400")
    assert r.returncode == 0 and shot.exists()
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1200, 2400)
    assert len(png) > 50_000  # a real page with charts, not a blank canvas


H100_REFERENCE = (Path(__file__).resolve().parents[1] / "references" / "h100"
                  / "vm_NVIDIA-H100-80GB-HBM3_native_20261206-062040.tar.gz")


@pytest.mark.browser
def test_a_shipped_bundles_report_rendered_by_kit_bundle_report_opens_in_headless_chromium(tmp_path):
    """The H100 reference's report as `kit bundle report` writes it from the bundle (today's figures): the
    page opens without a console error, with its charts and tables, and its telemetry shows each cell's
    measured energy per epoch (ResNet-18 fp32: 116 J, where the report inside the bundle's parts said
    4,010, the whole cell's energy over its repeats)."""
    from kit.report.export import write_report

    page = write_report(H100_REFERENCE, tmp_path / "out")
    assert page == tmp_path / "out" / "vm_NVIDIA-H100-80GB-HBM3_native_20261206-062040.report.html"
    dom = _browser(tmp_path, page.as_uri(), "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") >= 12 and "Why this speedup" in dom.stdout and "<script" not in dom.stdout
    row = re.search(r"<tr><td>cifar/resnet18/fp32/torch</td>(.*?)</tr>", dom.stdout[dom.stdout.index("J/epoch"):])
    assert row and re.findall(r'<td class="num">([^<]*)</td>', row.group(1))[2] == "116", row
    assert _console_errors(dom.stderr) == []
    shot = tmp_path / "report.png"
    r = _browser(tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1200,2400")
    assert r.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and len(shot.read_bytes()) > 50_000


H100_CIFAR = (Path(__file__).resolve().parents[1] / "references" / "h100" / "explain" / "cifar"
              / "vm_NVIDIA-H100-80GB-HBM3_native_20261205-104634.tar.gz")


@pytest.mark.browser
def test_the_why_section_of_a_real_profiled_run_renders_in_headless_chromium(tmp_path):
    """The H100's profiled CIFAR run (references/h100/explain/), its report drawn by today's kit: one
    stacked bar chart per model and engine (ResNet-18/50, torch and fastai), three bars each, with the
    host gap, the ladders, and no console error."""
    res = open_bundle(H100_CIFAR).results
    html = render_run_report(res, res.environment, False, run_charts(res), H100_CIFAR.name)
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    dom = _browser(tmp_path, page.as_uri(), "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    why = dom.stdout[dom.stdout.index("Why this speedup"):]
    for group in ("cifar/resnet18/torch", "cifar/resnet18/fastai", "cifar/resnet50/torch", "cifar/resnet50/fastai"):
        assert f"Where a step's time goes — {group}" in why, group
    assert why.count("host gap (GPU idle)") >= 12 and "milliseconds per timed step" in why
    assert "host-bound 89% idle" in why and "compute-bound (TC)" in why
    assert why.count('<details class="why-kernels">') == 4
    assert _console_errors(dom.stderr) == []


@pytest.mark.browser
def test_console_error_detection_works(tmp_path):
    # Control: the check above would see a console error if the page made one.
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><body><script>console.error('fixture error')</script></body></html>")
    r = _browser(tmp_path, page.as_uri(), "--dump-dom")
    assert any("fixture error" in line for line in _console_errors(r.stderr))


def test_max_batch_search_is_a_table_with_ratios_and_bounds():
    cells = [make_cell(precision="fp32"), make_cell(precision="amp-fp16"), make_cell(model="resnet50", precision="fp32"),
             make_cell(model="resnet50", precision="amp-fp16")]
    found = {("resnet18", "fp32"): (50_000, True), ("resnet18", "amp-fp16"): (50_000, True),
             ("resnet50", "fp32"): (1_000, False), ("resnet50", "amp-fp16"): (1_800, False)}
    for c in cells:
        mb, at_limit = found[(c["model"], c["precision"])]
        c["metrics"].update(max_batch=mb, max_batch_at_limit=at_limit)
    text = _visible_text(_report(cells))
    assert "Largest batch that fits" in text
    assert "cifar/resnet50 amp-fp16 1,800 1.80×" in text
    assert "cifar/resnet18 amp-fp16 ≥ 50,000 ≈ 1.00×" in text
    assert "Largest batch" not in _visible_text(_report(standard_cells()))


# --- charts: axis, outliers, legend; the environment of a CPU run --------------------------------

def _warm_first_cells():
    """fp32 and amp-bf16 whose first repeat took 125 s (warm-up); medians 0.2–15 s."""
    return [make_cell("resnet18", "fp32", epoch_s=[125.0, 3.0, 3.1]), make_cell("resnet18", "amp-bf16", epoch_s=[60.0, 2.5, 2.4]),
            make_cell("resnet50", "fp32", epoch_s=[40.0, 15.0, 15.1]), make_cell("resnet50", "amp-bf16", epoch_s=[20.0, 0.2, 0.21])]


def _y_ticks(svg: str) -> list[float]:
    return [float(t.replace(",", "")) for t in re.findall(r'<g class="ytick"><text [^>]*>([\d.,]+)</text>', svg)]


def test_epoch_time_axis_is_scaled_to_the_medians_and_marks_the_warm_up_repeats():
    res = RunResults.from_dict(make_results(_warm_first_cells(), make_env()))
    svg = run_charts(res)["charts/cifar-torch-epoch-time.svg"]
    assert max(_y_ticks(svg)) <= 20  # the largest median is 15.1 s, not the 125 s warm-up
    marks = re.findall(r'<g class="offscale">.*?</g>', svg)
    assert len(marks) == 3  # 125, 60 and 40 s reach beyond the axis; 20 s sits on it
    assert any(">125.0</text>" in m and "beyond the axis" in m for m in marks)
    assert "a repeat beyond the axis" in svg  # the chart says what the marks are


def test_without_outliers_the_axis_still_covers_every_error_bar():
    svg = bar_chart("Speedup — fixture", ["a"], [Series("x", [1.0], [0.9], [1.1])], y_label="×",
                    scale_to_values=True)
    assert max(_y_ticks(svg)) >= 1.1 and 'class="offscale"' not in svg


def test_a_chart_with_one_series_has_a_legend():
    cells = [make_cell("resnet18", "fp32", engine="fastai"),
             make_cell("resnet18", "amp-bf16", engine="fastai", status="skipped", reason="no GPU")]
    charts = run_charts(RunResults.from_dict(make_results(cells, make_env())))
    for name in ("charts/cifar-fastai-epoch-time.svg", "charts/cifar-fastai-throughput.svg"):
        legend = re.findall(r'<g class="legend">.*?</g>', charts[name])
        assert len(legend) == 1 and ">fp32</text>" in legend[0]


def _cpu_env() -> dict:
    env = make_env()
    env.update(gpus=[], run_device="cpu", driver="unknown", cuda_runtime={"cuda": "13.0", "cudnn": "91900"})
    env.pop("cudnn")
    return env


def test_a_cpu_run_does_not_claim_cuda_or_cudnn_were_used():
    html = _report(standard_cells(models=("resnet18",)), env=_cpu_env())
    env_table = html[html.index("<h2>Environment</h2>"):html.index("</table>", html.index("<h2>Environment</h2>"))]
    rows = dict(re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", env_table))
    assert rows["GPU"] == "CPU only"
    assert rows["CUDA"] == "not used (CPU run); torch built with 13.0"
    assert rows["cuDNN"] == "not used (CPU run); torch built with 9.19.0"
    assert rows["driver"] == "none (CPU run)"
    gpu_env = _report(standard_cells(models=("resnet18",)))
    assert "not used (CPU run)" not in gpu_env


# --- the kit's own pages forbid scripts and network loads ---------------------------------------

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _compare_page(tmp_path: Path) -> str:
    from kit.compare.engine import compare_paths
    from kit.report.html.compare import render_compare_page

    a = make_run_dir(tmp_path / "a", make_results(standard_cells(), make_env(), run_id="FIXTURE-csp-a"))
    b = make_run_dir(tmp_path / "b", make_results(standard_cells(speed=1.2), make_env(host="fixture-host-b"), run_id="FIXTURE-csp-b"))
    return render_compare_page(compare_paths([a, b]))


def _assert_inert(html: str) -> None:
    head = html[:html.index("</head>")]
    metas = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', head)
    assert metas == [CSP]
    assert head.index("Content-Security-Policy") < head.index("<style>")  # in force before anything else loads
    assert "<script" not in html.lower() and "javascript:" not in html.lower()
    assert not re.search(r"<[^>]+\son[a-z]+\s*=", html)  # no event-handler attributes
    outside = html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert not re.search(r'(src|href|action|data)\s*=\s*"', outside)
    assert "url(" not in outside and "@import" not in outside and "<link" not in outside


def test_the_report_and_the_compare_page_carry_a_csp_and_nothing_active(tmp_path):
    _assert_inert(_report(standard_cells()))
    _assert_inert(_compare_page(tmp_path))


def test_the_inertness_check_catches_a_script_or_a_missing_csp():
    good = _report(standard_cells(models=("resnet18",)))
    for bad in (good.replace("</body>", "<script>1</script></body>"),
                good.replace(CSP, "default-src *"),
                good.replace("<h2>", '<h2 onclick="x()">', 1)):
        with pytest.raises(AssertionError):
            _assert_inert(bad)


def _png_pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) into rows of raw pixels."""
    import zlib

    pos, idat, width = 8, b"", 0
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        data = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", data[:10])
            assert depth == 8 and colour in (2, 6)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    raw, rows, prev, stride = zlib.decompress(idat), [], bytearray(width * bpp), width * bpp
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


@pytest.mark.browser
def test_under_its_csp_the_page_still_renders_its_styles_and_charts_and_no_script_runs(tmp_path):
    page = tmp_path / "cmp.html"
    page.write_text(_compare_page(tmp_path))
    shot = tmp_path / "cmp.png"
    r = _browser(tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1200,2400")
    assert r.returncode == 0 and shot.exists()
    width, bpp, rows = _png_pixels(shot.read_bytes())
    colours = {row[i:i + 3] for row in rows for i in range(0, len(row), bpp)}
    assert bytes((0xF0, 0xF2, 0xF5)) in colours  # the stylesheet's table-header background: styles applied
    assert bytes((0xFF, 0xF3, 0xCD)) in colours  # the SYNTHETIC badge's background
    assert bytes((0x00, 0x72, 0xB2)) in colours  # the first series' colour: the SVG bars were drawn
    # control: the same policy stops an inline script that would change the page
    probe = tmp_path / "probe.html"
    html = page.read_text().replace("</main>", "<script>document.body.setAttribute('data-ran','yes')</script></main>")
    probe.write_text(html)
    dom = _browser(tmp_path, probe.as_uri(), "--dump-dom")
    assert dom.returncode == 0 and "<svg" in dom.stdout and 'data-ran="yes"' not in dom.stdout
    unprotected = tmp_path / "unprotected.html"
    unprotected.write_text(html.replace(CSP, "default-src 'unsafe-inline'"))
    assert 'data-ran="yes"' in _browser(tmp_path, unprotected.as_uri(), "--dump-dom").stdout


# --- the charts are drawn by matplotlib: inert, deterministic, readable -----------------------------

def _chart_of_everything(**kw) -> str:
    """One chart with bars, a missing value, error bars, an off-scale error bar, a reference and a note."""
    return bar_chart(
        "Speedup over fp32 — fixture", ["resnet18", "resnet50"],
        [Series("amp-fp16", [1.5, None], [1.4, None], [1.6, None]), Series("amp-bf16", [1.7, 1.2], [1.0, 1.1], [9.0, 1.3])],
        y_label="speedup over fp32 (×)", x_label="model", reference=1.0, reference_label="fp32 = 1",
        scale_to_values=True, note="error bars: 95% CI; ▲ beyond the axis", chart_id=kw.pop("chart_id", "fixture"), **kw,
    )


def test_a_chart_is_the_same_bytes_every_time_it_is_drawn():
    """Bundles are hashed: no date, no random ids, no state carried from one chart to the next."""
    first = _chart_of_everything()
    run_charts(RunResults.from_dict(make_results(standard_cells(), make_env())))  # other charts in between
    assert _chart_of_everything() == first


def test_a_chart_is_one_inert_svg_element_the_bundle_checker_accepts():
    from kit.bundle.active_content import svg_problem

    svg = _chart_of_everything(chart_id="c1")
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" ') and svg.endswith("</svg>")
    assert svg_problem(svg.encode()) is None
    for absent in ("<?xml", "<!DOCTYPE", "<!--", "<metadata", "<defs", "<style", "<script", "clip-path", "url(",
                   "href", "xlink", "http://purl", "matplotlib"):
        assert absent not in svg, absent
    # the only ids are the chart's and its title's: several charts inline in one page never clash
    assert re.findall(r'\sid="([^"]*)"', svg) == ["c1", "c1-title"]
    assert '<title id="c1-title">Speedup over fp32 — fixture</title>' in svg and 'aria-labelledby="c1-title"' in svg


def test_a_chart_keeps_text_as_text_with_the_values_on_hover():
    svg = _chart_of_everything()
    assert re.search(r"<text [^>]*>speedup over fp32 \(×\)</text>", svg)  # the axis title, with its unit
    assert re.search(r"<text [^>]*>fp32 = 1</text>", svg) and re.search(r"<text [^>]*>resnet50</text>", svg)
    assert "<title>amp-bf16, resnet18: 1.7</title>" in svg and "<title>amp-fp16, resnet50: no data</title>" in svg
    [mark] = re.findall(r'<g class="offscale">.*?</g>', svg)
    assert "error bar reaches 9, beyond the axis" in mark and re.search(r">9</text>", mark)
    assert svg.count('class="errorbar"') == 3 and svg.count('class="bar"') == 3


def test_the_bar_axis_starts_at_zero_with_round_readable_ticks():
    svg = bar_chart("Throughput — fixture", ["resnet18", "resnet50"],
                    [Series("fp32", [52_000.0, 11_800.0]), Series("amp-bf16", [98_500.0, 30_100.0])],
                    y_label="images per second (median)", x_label="model")
    ticks = re.findall(r'<g class="ytick"><text [^>]*>([\d.,]+)</text>', svg)
    assert ticks[0] == "0" and len(ticks) >= 3
    values = [float(t.replace(",", "")) for t in ticks]
    steps = {b - a for a, b in zip(values, values[1:])}
    assert len(steps) == 1 and values[-1] >= 98_500  # evenly spaced, the tallest bar inside the axis
    assert all("," in t for t in ticks if float(t.replace(",", "")) >= 1000)  # 20,000, not 20000 or 2e4
    assert "e+" not in svg and "1e4" not in svg


def test_long_category_labels_are_turned_and_shortened_but_whole_on_hover():
    cats = [f"a-rather-long-model-name-{i}-amp-bf16-fastai" for i in range(8)]
    svg = bar_chart("Relative — fixture", cats, [Series("B: host", [1.0] * 8)], y_label="throughput ÷ A's (×)")
    labels = re.findall(r'<text [^>]*transform="rotate\(-35[^"]*"[^>]*>([^<]*)</text>', svg)
    assert len(labels) == 8 and all(len(label) <= 28 and label.endswith("…") for label in labels)
    assert f"<title>B: host, {cats[3]}: 1</title>" in svg


def test_dollar_signs_in_names_are_drawn_as_typed_not_as_math():
    svg = bar_chart("Odd names — fixture", ["net$1$"], [Series("$fp16$", [2.0])], y_label="$ per epoch")
    assert re.search(r"<text [^>]*>net\$1\$</text>", svg) and re.search(r"<text [^>]*>\$fp16\$</text>", svg)
    assert re.search(r"<text [^>]*>\$ per epoch</text>", svg)


def test_the_report_inlines_each_chart_with_ids_that_do_not_clash():
    html = _report(standard_cells())
    ids = re.findall(r'\sid="([^"]*)"', html)
    assert len(ids) == len(set(ids)) and "cifar-torch-speedup" in ids


def test_every_image_lock_pins_what_the_report_and_its_statistics_need():
    """The images install the kit with --no-deps over their lock and write the bundle's report
    inside the container (the cuda10 one on Python 3.7): each lock must hold scipy and matplotlib
    at or above the lower bounds pyproject.toml declares."""
    root = Path(__file__).resolve().parents[1]
    deps = re.findall(r'"(scipy|matplotlib)>=([\d.]+)"', (root / "pyproject.toml").read_text())
    assert {name for name, _ in deps} == {"scipy", "matplotlib"}
    locks = sorted((root / "docker" / "locks").glob("*.txt"))
    assert locks
    for lock in locks:
        pins = dict(re.findall(r"^(scipy|matplotlib)==([\d.]+)$", lock.read_text(), re.M))
        for name, low in deps:
            assert name in pins, f"{lock.name} lacks {name}"
            version = tuple(int(x) for x in pins[name].split("."))
            assert version >= tuple(int(x) for x in low.split(".")), f"{lock.name}: {name} {pins[name]} < {low}"


def test_a_batch_curve_is_one_range_per_precision_in_the_findings():
    """Each point of a curve is a cell with its own speedup; the findings give each curve's points in a
    finding as one range of batch sizes and speedups, not a dozen items."""
    from kit.results.cell_ids import CURVE_PARAM

    def point(precision, batch, seconds):
        d = make_cell("resnet50", precision, batch_size=batch, epoch_s=[seconds] * 3)
        d["params"][CURVE_PARAM] = [256, 512, 1024]
        d.pop("cell_id", None)
        return d

    cells = [point("fp32", b, 10.0) for b in (256, 512, 1024)]
    cells += [point("amp-fp16", 256, 5.0), point("amp-fp16", 512, 4.0), point("amp-fp16", 1024, 2.5)]
    cells += [point("amp-bf16", 256, 9.8), point("amp-bf16", 512, 5.0), point("amp-bf16", 1024, 4.0)]
    text = _findings(_report(cells))
    assert "resnet50 · torch: amp-fp16 bs256–1024 2.00×–4.00×, amp-bf16 bs512–1024 2.00×–2.50×." in text
    assert "No speedup (speedup over fp32 1.00×–1.10×): resnet50 · torch: amp-bf16 bs256 1.02×" in text


def test_a_precision_without_its_fp32_cell_says_why_fp32_has_none():
    cells = [make_cell("resnet50", "fp32", status="skipped", reason="out of memory at batch 256"),
             make_cell("resnet50", "amp-fp16", epoch_s=[5.0, 5.0, 5.0]), make_cell("resnet18", "amp-bf16")]
    text = _findings(_report(cells))
    assert ("No fp32 cell to compare against: resnet18 · torch: amp-bf16; "
            "resnet50 · torch: amp-fp16 (fp32: out of memory at batch 256).") in text


def test_the_why_kernels_table_names_a_class_todays_rules_would_give_otherwise():
    """A profile classed by an older kit (a bf16 nvjet GEMM stored as off the tensor cores, as the
    H100 GPT run of references/h100/window-cost/ was): the table keeps the stored class and adds today's."""
    profile = make_profile(24.0, {kc.OTHER_MATMUL: 2.0, kc.NORM_ELEMENTWISE: 2.5},
                           kernels=[("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 2.0), ("elementwise_add", 2.5)])
    profile["largest_kernels"][1]["class"] = kc.OTHER_MATMUL  # as the older rules stored it
    assert profile["largest_kernels"][1]["name"].startswith("nvjet")
    env = dict(make_env(), peak_tflops_measured=PEAKS)
    cells = [make_cell("resnet18", "fp32", profile=FP32_PROFILE), make_cell("resnet18", "amp-bf16", profile=profile)]
    why = _why(_report(cells, env=env))
    kernels = why[why.index('<details class="why-kernels">'):]
    assert "other matmul/convolution (today: tensor-core matmul/convolution)" in kernels
    assert kernels.count("(today:") == 1
