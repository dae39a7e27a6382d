"""The copy bandwidth measured beside the matmul peaks (kit.bench.calibrate.memory_bandwidth), and
that a run stores it in env.json and results.json's environment, next to the peaks."""

from __future__ import annotations

import json
import sys
import types

import pytest

from kit.results.schema import CellResult, RunConfig


def test_a_cpu_memcpy_gives_a_positive_bandwidth_with_its_method():
    pytest.importorskip("torch")
    from kit.bench.calibrate import memory_bandwidth

    out = memory_bandwidth("cpu", mib=16, tries=2)
    assert out["available"] is True and out["gb_per_s"] > 0
    assert "memcpy" in out["method"] and "best of 2" in out["method"] and out["device"] == "cpu"


def test_a_failed_copy_is_recorded_with_its_reason_not_a_number(monkeypatch):
    pytest.importorskip("torch")
    from kit.bench import calibrate

    def no_memory(*a, **k):
        raise RuntimeError("out of memory (simulated)\nmore detail")

    monkeypatch.setattr(calibrate.torch, "empty", no_memory)
    out = calibrate.memory_bandwidth("cpu", mib=1, tries=1)
    assert out == {"available": False, "reason": "out of memory (simulated)"}


@pytest.mark.gpu
def test_a_gpu_device_to_device_copy_is_timed_with_cuda_events():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from kit.bench.calibrate import memory_bandwidth

    out = memory_bandwidth("cuda:0", tries=3)
    assert out["available"] and out["gb_per_s"] > 0 and "CUDA events" in out["method"]


def test_a_run_stores_the_bandwidth_beside_the_peaks(tmp_path, monkeypatch):
    from kit.runner.execute import execute

    fake = types.ModuleType("kit.bench.api")
    fake.resolve_device = lambda requested: "cpu"
    fake.calibrate = lambda device: {"available": False, "reason": "fake bench"}
    # fixture numbers, not a measurement: where the record goes is under test
    fake.memory_bandwidth = lambda device: {"available": True, "gb_per_s": 12.5, "device": device, "method": "fake"}

    def run_cell(spec, ctx):
        reps = [{"epoch_seconds": [1.0], "epoch_seconds_median": 1.0, "throughput_items_per_s": 100.0}]
        return CellResult(spec.workload, spec.model, spec.precision, spec.engine, "ok", params=spec.params,
                          repeats=reps, throughput_unit="images")

    fake.run_cell = run_cell
    monkeypatch.setitem(sys.modules, "kit.bench.api", fake)
    import kit.bench

    monkeypatch.setattr(kit.bench, "api", fake, raising=False)
    config = RunConfig.of(suite="cifar", data="synthetic", device="cpu", models=["resnet18"], precisions=["fp32"],
                       engines=["torch"], repeats=1, steps=1)
    out = execute(config, tmp_path / "results", make_bundle=False)
    for name in ("results.json", "env.json"):
        doc = json.loads((out.run_dir / name).read_text())
        env = doc.get("environment", doc)
        assert env["memory_bandwidth_measured"]["gb_per_s"] == 12.5
        assert env["peak_tflops_measured"]["reason"] == "fake bench"


def test_the_peak_is_the_best_of_the_swept_shapes_and_a_shape_that_fails_says_why():
    """kit.bench.calibrate.sweep and its record, with a rate function of fixture numbers (not a GPU's):
    the best shape wins wherever it falls in the sweep; the typical shape's rate is kept beside it."""
    pytest.importorskip("torch")
    from kit.bench import calibrate

    rates = {4096: 600.0, 6144: 770.4, 8192: 741.8}

    def rate_at(n):
        if n not in rates:
            raise RuntimeError(f"CUDA out of memory at {n} (simulated)\ndetail")
        return rates[n]

    swept = calibrate.sweep(rate_at)
    assert swept["best"] == 770.4 and swept["by_n"] == rates
    assert swept["errors"] == {12288: "CUDA out of memory at 12288 (simulated)"}
    out = {}
    calibrate._record(out, "fp16", swept)
    assert out["fp16"] == 770.4 and out["typical"] == {"fp16": 600.0}
    assert out["by_shape"]["fp16"] == {"4096^3": 600.0, "6144^3": 770.4, "8192^3": 741.8} and "errors" not in out
    assert out["shape_errors"] == {"fp16": {"12288^3": "CUDA out of memory at 12288 (simulated)"}}
    calibrate._record(out, "bf16", calibrate.sweep(lambda n: rate_at(-n)))  # every shape fails
    assert out["bf16"] is None and out["errors"]["bf16"].startswith("CUDA out of memory")
    assert calibrate.TYPICAL in calibrate.SHAPES


def test_kit_explain_prints_the_peaks_and_the_typical_shapes_rates():
    from kit.report.explain_text import _ceiling_lines

    peaks = {"available": True, "fp32": 51.3, "fp16": 770.4, "typical": {"fp32": 48.0, "fp16": 600.0},
             "typical_shape": "4096^3", "by_shape": {"fp16": {"4096^3": 600.0}}}  # fixture numbers
    line = _ceiling_lines({"peak_tflops_measured": peaks})[0]
    assert line == "matmul peaks (TFLOP/s, calibrated on this GPU): fp32 51.3, fp16 770.4; at 4096^3: fp32 48, fp16 600"


@pytest.mark.gpu
def test_a_gpus_calibration_sweeps_the_shapes_and_takes_the_best():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from kit.bench.calibrate import SHAPES, TYPICAL, calibrate

    out = calibrate("cuda:0")
    for name in ("fp32", "fp16"):
        by = out["by_shape"][name]
        assert set(by) == {f"{n}^3" for n in SHAPES}, out
        assert out[name] == max(by.values()) and out["typical"][name] == by[f"{TYPICAL}^3"], out
    if torch.cuda.get_device_capability(0) >= (7, 0):
        assert out["fp16"] > 4 * out["fp32"], out  # tensor cores against strict fp32, on a GPU that has them
