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
