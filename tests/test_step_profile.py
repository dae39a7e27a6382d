"""A cell's profile derived from its window's events (kit.results.step_profile, torch-free): the parts
add up to the step, overlapping kernels are flagged rather than turned into a negative idle time,
the CPU's window never reports device time, and kit explain reads what comes out."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kit.results import explain
from kit.results import kernel_classes as kc
from kit.results import step_profile as sp
from kit.results.schema import CellResult

ROOT = Path(__file__).resolve().parents[1]
PROF = ROOT / "references" / "h200" / "lstm" / "probe" / "prof"

#: a constructed captured step of a convolutional net in fp16 (names as CUPTI reports them)
STEP = [
    ("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64", 3.0e-3),
    ("sm90_xmma_dgrad_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize64x64x64", 2.5e-3),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<__half, float, 512, true, 1>", 0.6e-3),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>>", 0.3e-3),
    ("Memcpy DtoD (Device -> Device)", 0.1e-3),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...>", 0.5e-3),
]


def _cell(profile, precision="amp-fp16") -> CellResult:
    return CellResult("cifar", "resnet18", precision, "torch", "ok", profile=profile)


def test_device_and_idle_time_add_up_to_the_step_and_the_classes_to_the_device_time():
    steps = 4
    kernels = STEP * steps
    p = sp.device_profile(kernels, wall_s=steps * 8e-3, steps=steps, source="test")
    assert p["available"] is True and p["steps"] == steps
    assert p["step_s"] == pytest.approx(8e-3)
    assert p["device_s"] == pytest.approx(7e-3)
    assert p["idle_s"] == pytest.approx(1e-3)
    assert p["device_s"] + p["idle_s"] == pytest.approx(p["step_s"])
    assert sp.adds_up(p) and p["device_exceeds_step"] is False and "note" not in p
    assert set(p["device_s_by_class"]) == set(kc.CLASSES)
    assert sum(p["device_s_by_class"].values()) == pytest.approx(p["device_s"])
    assert p["device_s_by_class"][kc.TENSOR_CORE_MATMUL] == pytest.approx(5.5e-3)
    assert p["device_s_by_class"][kc.OPTIMIZER] == pytest.approx(0.5e-3)


def test_the_largest_kernels_are_each_names_calls_together_ranked_by_time_per_step():
    steps = 4
    p = sp.device_profile(STEP * steps, wall_s=steps * 8e-3, steps=steps, source="test")
    top = p["largest_kernels"]
    assert [k["name"][:20] for k in top[:2]] == ["sm90_xmma_fprop_impl", "sm90_xmma_dgrad_impl"]
    assert top[0]["s"] == pytest.approx(3.0e-3) and top[0]["calls"] == 1.0  # four calls over four steps
    assert top[0]["class"] == kc.TENSOR_CORE_MATMUL and top[-1]["class"] == kc.CASTS_COPIES
    assert len(top) == len(STEP) and [k["s"] for k in top] == sorted((k["s"] for k in top), reverse=True)
    many = [(f"kernel_{i:02d}", 1e-3 * (i + 1)) for i in range(20)] + [("kernel_00", 0.5e-3)]
    kept = sp.largest(many, steps=1)
    assert len(kept) == sp.LARGEST and kept[0]["name"] == "kernel_19"
    assert sp.largest(many, steps=1, n=30)[-1] == {"name": "kernel_00", "class": kc.OTHER, "s": pytest.approx(1.5e-3),
                                                    "calls": 2.0}  # its two calls summed


def test_a_kernel_name_is_cut_for_the_bundle_but_classified_whole():
    """A templated name runs to thousands of characters; what marks its class may come late."""
    name = "void cutlass::Kernel<" + "Params, " * 40 + "cutlass_80_tensorop_f16_s16816gemm_f16_256x128_32x3_nn>"
    assert kc.classify(name[:sp.NAME_CHARS]) == kc.OTHER  # the cut name alone would lose it
    [k] = sp.largest([(name, 1e-3)], steps=1)
    assert len(k["name"]) == sp.NAME_CHARS and k["class"] == kc.TENSOR_CORE_MATMUL


def test_a_host_window_names_its_largest_operators_as_host_time():
    p = sp.host_profile([("aten::convolution", 4e-3), ("aten::add_", 1e-3)], wall_s=10e-3, steps=2, source="test",
                        reason="CPU")
    assert p["available"] is False and "largest_kernels" not in p
    assert [(o["name"], o["s"]) for o in p["largest_host_ops"]] == [("aten::convolution", pytest.approx(2e-3)),
                                                                   ("aten::add_", pytest.approx(0.5e-3))]


def test_kernels_that_add_up_past_the_step_are_flagged_never_a_negative_idle_time():
    # two streams: the same kernels side by side, so their sum (14 ms) exceeds the 8 ms step
    starts = [0.0, 0.0, 3.0e-3, 3.0e-3]
    p = sp.device_profile(STEP * 2, wall_s=8e-3, steps=1, source="test",
                          intervals=[(a, a + 3.5e-3) for a in starts])
    assert p["device_s"] == pytest.approx(14e-3) and p["device_s"] > p["step_s"]
    assert p["idle_s"] == 0.0
    assert p["device_exceeds_step"] is True
    assert "overlapped" in p["note"] and "do not add up" in p["note"]
    assert p["busy_s"] == pytest.approx(6.5e-3)  # the union of the intervals: at most the step
    # the step's parts are the busy time and the gap: they add up, the gap 1.5 ms
    assert sp.adds_up(p) and sp.host_gap_s(p) == pytest.approx(1.5e-3)


def test_the_parts_decompose_the_timed_step_not_the_windows_own():
    """The window's step carries the profiler's host cost (an H100's fastai ResNet-18 amp-fp16 cell:
    41.9 ms profiled against 22.1 timed, references/h100/explain/): the host gap is the timed step less
    the time a kernel ran; the profiler's cost is the window's step against the timed one."""
    p = sp.device_profile(STEP, wall_s=2 * 41.9e-3, steps=2, source="test", intervals=[(0.0, 2.4e-3)])
    assert sp.step_of(p) == pytest.approx(41.9e-3) and sp.profiler_cost(p) is None  # no timed step: the window's
    p["timed_step_s"] = 22.1e-3
    assert sp.step_of(p) == pytest.approx(22.1e-3)
    assert sp.busy_of(p) == pytest.approx(1.2e-3)  # the union, per step
    assert sp.host_gap_s(p) == pytest.approx(22.1e-3 - 1.2e-3)
    assert sp.profiler_cost(p) == pytest.approx(41.9 / 22.1 - 1)
    assert sp.adds_up(p)
    # kernels that take longer than the timed step: the window is not the step that was timed
    p["timed_step_s"] = 1.0e-3
    assert not sp.adds_up(p, 0.05) and sp.host_gap_s(p) == 0.0
    assert sp.adds_up(p, 0.25)
    for junk in ({}, {"timed_step_s": 1e-3}, {"busy_s": "x", "step_s": -1}):
        assert sp.step_of(junk) is None or sp.busy_of(junk) is None
        assert sp.host_gap_s(junk) is None and not sp.adds_up(junk)


def test_busy_time_is_the_union_of_the_kernels_intervals():
    assert sp.busy_seconds([]) == 0.0
    assert sp.busy_seconds([(0, 1), (2, 3)]) == pytest.approx(2.0)
    assert sp.busy_seconds([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == pytest.approx(4.0)
    assert sp.busy_seconds([(4, 4), (1, 0)]) == 0.0  # empty and reversed spans count nothing


def test_the_recorded_h200_graphed_lstm_kernels_exceed_the_unprofiled_step_and_are_flagged():
    """The H200's table of 40 replays of the graphed LSTM step (amp-fp16): its 25 largest kernel rows
    alone sum to 5.29 ms per replay against 4.085 ms per unprofiled step: the parts cannot add up,
    and the profile says so."""
    text = (PROF / "profile-tensor-core-amp-fp16.txt").read_text(encoding="utf-8")
    rows = kc.parse_table(text)
    assert len(rows) == 25
    p = sp.device_profile(rows, wall_s=40 * 4.085e-3, steps=40, source="references/h200/lstm/probe/prof")
    assert p["device_s"] == pytest.approx(5.287e-3, rel=1e-3)
    assert p["device_exceeds_step"] is True and p["idle_s"] == 0.0 and "note" in p
    assert p["device_s_by_class"][kc.TENSOR_CORE_MATMUL] > p["device_s_by_class"][kc.OTHER_MATMUL]


def test_a_window_with_no_device_event_or_no_step_is_not_available_with_its_reason():
    p = sp.device_profile([], wall_s=0.01, steps=5, source="test")
    assert p["available"] is False and "no device event" in p["reason"]
    assert "device_s" not in p and p["step_s"] == pytest.approx(0.002)
    q = sp.device_profile(STEP, wall_s=0.0, steps=0, source="test")
    assert q["available"] is False and "timed no step" in q["reason"]
    assert explain.profile_of(_cell(p)) is None and explain.profile_of(_cell(q)) is None


def test_a_cpu_window_keeps_host_time_under_its_own_names_and_never_device_time():
    ops = [("aten::convolution", 0.02), ("aten::add_", 0.001), ("aten::addmm", 0.004)]
    p = sp.host_profile(ops * 3, wall_s=0.09, steps=3, source="test", reason="the device is the CPU")
    assert p["available"] is False and p["reason"] == "the device is the CPU"
    assert not any(k.startswith("device") or k in ("idle_s", "busy_s") for k in p)
    assert p["step_s"] == pytest.approx(0.03) and p["host_op_s"] == pytest.approx(0.025)
    assert p["host_op_s_by_class"][kc.OTHER_MATMUL] == pytest.approx(0.024)
    cell = _cell(p)
    assert explain.profile_of(cell) is None
    assert not explain.verdict(cell).startswith(("host-bound", "compute-bound", "memory-bound"))


def test_explain_reads_a_derived_profile_captured_step_compute_bound_host_paced_step_host_bound():
    captured = sp.device_profile(STEP * 5, wall_s=5 * 7.4e-3, steps=5, source="test")
    assert explain.verdict(_cell(captured)).startswith("compute-bound on the tensor cores")
    paced = sp.device_profile(STEP * 5, wall_s=5 * 20e-3, steps=5, source="test")
    assert explain.verdict(_cell(paced)).startswith("host-bound: the GPU idle 65% of the step")
    base = sp.device_profile([(n.replace("f16f16", "f32f32"), t * 4) for n, t in STEP] * 5, wall_s=5 * 30e-3,
                             steps=5, source="test")
    rungs = {r["rung"]: r for r in explain.ladder(_cell(captured), _cell(base, "fp32"), {})}
    assert rungs["device-time ratio"]["ratio"] == pytest.approx(4.0)
    assert rungs["step-time ratio"]["ratio"] == pytest.approx(30 / 7.4)


def test_the_timed_step_is_the_median_over_repeats_of_steady_seconds_per_steady_step():
    repeats = [{"steady_seconds": 0.9, "steps": 100, "warmup_steps": 10},
               {"steady_seconds": 1.8, "steps": 100, "warmup_steps": 10},
               {"steady_seconds": 0.45, "steps": 55, "warmup_batches": 10}]
    assert sp.timed_step_s(repeats) == pytest.approx(0.01)
    assert sp.timed_step_s([{"steady_seconds": None, "steps": 4, "warmup_steps": 2}]) is None
    assert sp.with_timed_step({}, repeats) is None
    assert sp.with_timed_step({"available": True}, repeats)["timed_step_s"] == pytest.approx(0.01)


def test_the_derivation_reads_in_python_3_7_for_the_cuda10_image():
    source = (ROOT / "kit" / "results" / "step_profile.py").read_text(encoding="utf-8")
    ast.parse(source, feature_version=(3, 7))
    assert "import torch" not in source


def test_explain_says_why_a_window_that_ran_measured_no_device_time():
    cpu = sp.host_profile([("aten::addmm", 0.01)], wall_s=0.03, steps=3, source="test",
                          reason="the device is the CPU: no device kernels to time")
    cell, base = _cell(cpu), _cell(cpu, "fp32")
    assert explain.verdict(cell).startswith(
        "not measured: the profiled window measured no device time (the device is the CPU: no device kernels to time)")
    rungs = {r["rung"]: r for r in explain.ladder(cell, base, {})}
    assert rungs["device-time ratio"]["ratio"] is None
    assert "a window ran but measured no device time: the device is the CPU" in rungs["device-time ratio"]["how"]
    assert explain.profile_reason(_cell(None)) is None
