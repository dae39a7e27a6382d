"""`kit explain BUNDLE [--cell PATTERN]`: on the shipped H200 reference, its output formats, and one-line
errors for a bad bundle or a pattern that matches nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.cli.main import main

REF = Path(__file__).resolve().parents[1] / "references" / "h200" / "vm_NVIDIA-H200_native_20261130-141944.tar.gz"


def _kit(capsys, *args) -> tuple:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_shipped_reference_gets_verdicts_and_ladders_with_the_missing_rungs_said(capsys):
    code, out, err = _kit(capsys, "explain", str(REF), "--cell", "cifar/resnet18/*/fastai")
    assert code == 0, err
    assert "matmul peaks (TFLOP/s, calibrated on this GPU): fp32 51.3, tf32 398.7, fp16 741.8, bf16 773.5" in out
    assert "memory bandwidth: not measured (the run was made before the kit measured it)" in out
    assert out.count("verdict: loader-bound") == 5  # the fastai ResNet-18 cells waited ~40% for data
    assert "peak ratio: 14.46×" in out  # 741.8 / 51.3
    assert "matmul kernels' time ratio, device-time ratio, step-time ratio:" in out
    assert "not measured: no profiled window" in out
    assert "measured speedup: 0.81×" in out  # the bundle's own speedup (kit.results.ratios)


def test_json_to_stdout_carries_the_same_rows(capsys):
    code, out, err = _kit(capsys, "explain", str(REF), "--cell", "lstm/tensor-core/*", "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["bundle"] == REF.name and doc["peak_tflops_measured"]["fp16"] == 741.8
    assert [c["cell_id"].split("/")[2] for c in doc["cells"]] == ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master"]
    assert doc["cells"][2]["ladder"][-1]["rung"] == "measured speedup"


def test_a_pattern_matching_no_cell_is_one_line_exit_2(capsys):
    code, out, err = _kit(capsys, "explain", str(REF), "--cell", "nothing/*")
    assert code == 2 and "--cell nothing/*: no measured cell" in err and "Traceback" not in err


@pytest.mark.parametrize("content", [b"not a tarball", None])
def test_a_bad_bundle_is_one_line_not_a_traceback(capsys, tmp_path, content):
    path = tmp_path / "bad.tar.gz"
    if content is not None:
        path.write_bytes(content)
    code, out, err = _kit(capsys, "explain", str(path))
    assert code not in (0, None) and "error:" in err and "Traceback" not in err


def test_a_profiled_bundles_json_carries_each_steps_parts_and_the_text_every_rung(capsys, tmp_path):
    """Fixture profiles (invented numbers in CellResult.profile's shape), through a real bundle."""
    from fixtures.results.factory import make_cell, make_env, make_profile, make_results, make_run_dir
    from kit.report.export import export_run
    from kit.results import kernel_classes as kc

    env = dict(make_env(), peak_tflops_measured={"available": True, "fp32": 50.0, "fp16": 700.0, "bf16": 700.0})
    cells = [make_cell("resnet18", "fp32", profile=make_profile(10.0, {kc.OTHER_MATMUL: 8.0})),
             make_cell("resnet18", "amp-fp16", epoch_s=[5.0, 5.1, 4.9],
                       profile=make_profile(5.0, {kc.TENSOR_CORE_MATMUL: 2.0, kc.NORM_ELEMENTWISE: 1.0}))]
    bundle = export_run(make_run_dir(tmp_path / "runs", make_results(cells, env)), tmp_path / "out")
    code, out, err = _kit(capsys, "explain", str(bundle), "--json", "-")
    assert code == 0, err
    fp32, fp16 = json.loads(out)["cells"]
    assert fp16["verdict_short"] == "host-bound 40% idle" and fp32["verdict_kind"] == "compute-bound off the tensor cores"
    assert fp16["step_parts_s"] == [[kc.TENSOR_CORE_MATMUL, pytest.approx(0.002)],
                                    [kc.NORM_ELEMENTWISE, pytest.approx(0.001)], ["host gap (GPU idle)", pytest.approx(0.002)]]
    code, out, err = _kit(capsys, "explain", str(bundle))
    assert "  matmul kernels' time ratio: 4.00×" in out and "  step-time ratio: 2.00×" in out
    assert "not measured" not in out.split("amp-fp16/torch", 1)[1]  # every rung of the ladder measured
    assert "\n  in short: amp-fp16 2.00× over fp32: the matmul kernels ran 4.00× faster" in out


def test_the_text_names_each_profiled_steps_parts_its_rate_against_the_peak_and_its_largest_kernels(capsys, tmp_path):
    """A step profiled from invented kernel events (kit.results.step_profile.device_profile), one of
    them named with a terminal escape as a stranger's bundle could."""
    from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
    from kit.report.export import export_run
    from kit.results import step_profile as sp

    env = dict(make_env(), peak_tflops_measured={"available": True, "fp32": 50.0, "fp16": 700.0, "bf16": 700.0})
    kernels = [("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64", 6e-3), ("elementwise\x1b[31m_add", 2e-3),
               ("Memcpy DtoD (Device -> Device)", 1e-3), ("reduce_kernel", 0.5e-3)]
    cells = [make_cell("resnet18", "fp32"), make_cell("resnet18", "amp-fp16", epoch_s=[5.0, 5.1, 4.9])]
    cells[1]["profile"] = sp.device_profile(kernels * 2, wall_s=2 * 10e-3, steps=2, source="test")
    for rep in cells[1]["repeats"]:
        rep["achieved_tflops"] = 35.0
    from kit.results.stats import summarise_repeats

    cells[1]["summary"] = summarise_repeats(cells[1]["repeats"])
    bundle = export_run(make_run_dir(tmp_path / "runs", make_results(cells, env)), tmp_path / "out")
    code, out, err = _kit(capsys, "explain", str(bundle), "--cell", "*amp-fp16*")
    assert code == 0, err
    assert ("  profiled step 10.000 ms: tensor-core matmul/convolution 6.000 + normalisation and elementwise 2.500 + "
            "casts and copies 1.000 + host gap (GPU idle) 0.500") in out
    assert "  achieved 35 TFLOP/s: 5.0% of this GPU's calibrated fp16 matmul peak (700)" in out
    lines = out.splitlines()
    at = lines.index("  largest kernels (share of device time, ms per step):")
    assert lines[at + 1].split()[:2] == ["63%", "6.000"] and "[tensor-core matmul/convolution]" in lines[at + 1]
    assert len([ln for ln in lines[at + 1:] if ln.startswith("      ") and "[" in ln]) == 3  # the text names three
    assert "\x1b" not in out and "elementwise" in lines[at + 2]
    code, out, err = _kit(capsys, "explain", str(bundle), "--json", "-")
    fp16 = json.loads(out)["cells"][1]
    assert len(fp16["largest_kernels"]) == 4 and fp16["efficiency"]["peak_dtype"] == "fp16"
    assert fp16["profiled_step_s"] == pytest.approx(10e-3)


def test_the_same_precision_through_two_engines_is_set_side_by_side_fastest_first(capsys, tmp_path):
    """Fixture cells (invented numbers): ResNet-18 through fastai and torch, fp32 and amp-fp16; a
    ResNet-34 measured by one engine only gets no line."""
    from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
    from kit.report.export import export_run

    cells = [make_cell("resnet18", "fp32", engine="fastai", epoch_s=[10.0, 10.1, 9.9]),
             make_cell("resnet18", "amp-fp16", engine="fastai", epoch_s=[11.0, 11.1, 10.9], data_wait_frac=0.5),
             make_cell("resnet18", "fp32", engine="torch", epoch_s=[3.0, 3.1, 2.9]),
             make_cell("resnet18", "amp-fp16", engine="torch", epoch_s=[1.0, 1.02, 0.98]),
             make_cell("resnet34", "fp32"), make_cell("resnet34", "amp-fp16", epoch_s=[5.0, 5.1, 4.9])]
    bundle = export_run(make_run_dir(tmp_path / "runs", make_results(cells, make_env())), tmp_path / "out")
    code, out, err = _kit(capsys, "explain", str(bundle))
    assert code == 0, err
    section = out.split("Across engines", 1)[1].splitlines()[1:]
    assert section == ["  cifar/resnet18 amp-fp16: torch 3.00× (bound not measured) · fastai 0.91× (loader-bound 50% wait)"]
    code, out, err = _kit(capsys, "explain", str(bundle), "--json", "-")
    [group] = json.loads(out)["across_engines"]
    assert [m["engine"] for m in group["engines"]] == ["torch", "fastai"] and group["cells"] == "cifar/resnet18 amp-fp16"
    code, out, err = _kit(capsys, "explain", str(bundle), "--cell", "*/torch")
    assert "Across engines" not in out  # one engine left: nothing to set beside it
    code, out, err = _kit(capsys, "explain", str(bundle), "--short")
    lines = [ln for ln in out.splitlines() if ln.startswith("cifar/")]
    assert lines[0] == ("cifar/resnet18/amp-fp16/fastai (loader-bound 50% wait): amp-fp16 0.91× over fp32; where it "
                        "lost against the ceiling is not measured (no calibrated peak, no profiled window)")
    assert len(lines) == 3 and "  verdict:" not in out and "\nAcross engines" in out  # one line a reduced precision
    code, out, err = _kit(capsys, "explain", str(bundle), "--cell", "*/fastai", "--cell", "cifar/resnet18/amp-fp16/torch")
    cells = [ln for ln in out.splitlines() if ln.startswith("cifar/")]
    assert cells == ["cifar/resnet18/fp32/fastai", "cifar/resnet18/amp-fp16/fastai", "cifar/resnet18/amp-fp16/torch"]
    assert "  cifar/resnet18 amp-fp16: torch 3.00×" in out  # its fp32 cell not shown, still its base


def test_kernels_an_older_kit_classed_otherwise_are_named_with_todays_class(capsys):
    """The H100 GPT run of references/h100/window-cost/ was classed by rules that put cuBLAS's bf16 GEMMs
    (nvjet_sm90_tst) off the tensor cores: its step's parts stay as measured, and the kernels today's
    rules class otherwise say so, in the text and in the JSON; amp-fp16's (hsh) are unchanged."""
    (bundle,) = (REF.parents[1] / "h100" / "window-cost" / "gpt").glob("*.tar.gz")
    code, out, err = _kit(capsys, "explain", str(bundle), "--cell", "*/amp-bf16/*")
    assert code == 0, err
    assert "[other matmul/convolution; today: tensor-core matmul/convolution]" in out
    assert "shown above) in another class than the run's kit did; the step's parts above are as measured" in out
    code, out, err = _kit(capsys, "explain", str(bundle), "--json", "-")
    assert code == 0, err
    cells = {c["cell_id"]: c for c in json.loads(out)["cells"]}
    bf16 = [k for k in cells["gpt/gpt2-small/amp-bf16/kit"]["largest_kernels"] if k["name"].startswith("nvjet_sm90_tst")]
    assert bf16 and {k.get("class_today") for k in bf16} == {"tensor-core matmul/convolution"}
    assert not [k for k in cells["gpt/gpt2-small/amp-fp16/kit"]["largest_kernels"] if "class_today" in k]


def test_a_bundle_classed_by_todays_rules_names_no_kernel_otherwise(capsys):
    """The H200 part of references/h200/remeasure/torch-a/ was classed by today's rules: no kernel moves,
    not even a GradScaler kernel whose stored name was cut before the template argument that names it."""
    (bundle,) = (REF.parent / "remeasure" / "torch-a").glob("*.tar.gz")
    code, out, err = _kit(capsys, "explain", str(bundle), "--json", "-")
    assert code == 0, err
    kernels = [k for c in json.loads(out)["cells"] for k in c.get("largest_kernels") or []]
    assert any(len(k["name"]) >= 160 and k["class"] == "loss scaling" for k in kernels)  # cut, yet not "moved"
    assert kernels and not [k["name"][:60] for k in kernels if "class_today" in k]
