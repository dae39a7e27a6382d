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
    config = RunConfig(suite="cifar", data="synthetic", device="cpu", models=["resnet18"], precisions=["fp32"],
                       engines=["torch"], repeats=1, steps=1)
    out = execute(config, tmp_path / "results", make_bundle=False)
    for name in ("results.json", "env.json"):
        doc = json.loads((out.run_dir / name).read_text())
        env = doc.get("environment", doc)
        assert env["memory_bandwidth_measured"]["gb_per_s"] == 12.5
        assert env["peak_tflops_measured"]["reason"] == "fake bench"
