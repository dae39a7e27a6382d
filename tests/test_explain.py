"""Verdicts and speedup ladders (kit.results.explain) on cells built here (label: synthetic: fixture
numbers, not measurements), two of them carrying the device time by class of the H200's recorded
LSTM profiler tables (references/h200/lstm/probe/prof/), and the optional profile in results.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.results import ceilings as cl
from kit.results import explain as ex
from kit.results import kernel_classes as kc
from kit.results.schema import CellResult, RunConfig, RunResults

PROF = Path(__file__).resolve().parents[1] / "references" / "h200" / "lstm" / "probe" / "prof"
#: synthetic calibration record (fixture numbers of the shape kit.bench.calibrate writes)
PEAKS = {"available": True, "fp32": 50.0, "tf32": 400.0, "fp16": 750.0, "bf16": 750.0}
#: each H200 table holds 40 graph replays, one step each
REPLAYS = 40


def cell(precision, throughput, profile=None, engine="kit", workload="lstm", model="tensor-core", **rep):
    reps = [{"throughput_items_per_s": throughput, **rep}]
    return CellResult(workload, model, precision, engine, "ok", repeats=reps, profile=profile,
                      params={"steps": 10})


def h200_profile(name: str, idle_s: float) -> dict:
    """A profile whose device time by class is the H200 table's, per replay; the idle gap is synthetic."""
    rows = kc.parse_table((PROF / name).read_text(encoding="utf-8"))
    by = {k: v / REPLAYS for k, v in kc.device_time_by_class(rows).items()}
    device = sum(by.values())
    return {"available": True, "steps": REPLAYS, "step_s": device + idle_s, "device_s": device, "idle_s": idle_s,
            "device_s_by_class": by, "source": "H200 table " + name}


FP32_PROF = h200_profile("profile-tensor-core-fp32.txt", idle_s=0.0005)
FP16_PROF = h200_profile("profile-tensor-core-amp-fp16.txt", idle_s=0.0005)


def test_the_ceilings_are_the_peak_ratio_and_the_bytes_ratio():
    c = cl.ceilings({"peak_tflops_measured": PEAKS}, "amp-fp16")
    assert c["compute"] == pytest.approx(15.0) and c["memory"] == 2.0
    assert cl.ceilings({"peak_tflops_measured": PEAKS}, "tf32")["memory"] == 1.0  # TF32 stores fp32
    assert cl.storage_dtype("fp8-rowwise") == "bf16"  # fp8 GEMMs, bf16 activations
    missing = cl.ceilings({"peak_tflops_measured": {"available": False, "reason": "CPU device"}}, "amp-bf16")
    assert missing["compute"] is None and "not measured" in missing["compute_why"] and "CPU device" in missing["compute_why"]


def test_a_runs_derived_figures_hold_the_ceilings_of_its_precisions():
    from kit.results.derive import derive

    cells = [cell("fp32", 100.0), cell("amp-fp16", 300.0), cell("tf32", 200.0)]
    rows = {r["precision"]: r for r in derive(cells, "throughput", environment={"peak_tflops_measured": PEAKS})["ceilings"]}
    assert set(rows) == {"tf32", "amp-fp16"}
    assert rows["amp-fp16"]["compute_bound"] == pytest.approx(15.0) and rows["amp-fp16"]["memory_bound"] == 2.0
    assert rows["tf32"]["peak_dtype"] == "tf32" and rows["tf32"]["memory_bound"] == 1.0
    [none] = derive(cells[:2], "throughput", environment={"peak_tflops_measured": {"available": False}})["ceilings"]
    assert none["compute_bound"] is None and none["memory_bound"] == 2.0  # bytes need no calibration


def test_a_ladder_without_profiles_says_which_rungs_are_not_measured():
    rungs = ex.ladder(cell("amp-fp16", 300.0), cell("fp32", 100.0), {"peak_tflops_measured": PEAKS})
    names = [r["rung"] for r in rungs]
    assert names == ["peak ratio", "matmul kernels' time ratio", "device-time ratio", "step-time ratio", "measured speedup"]
    assert [r["ratio"] is None for r in rungs] == [False, True, True, True, False]
    assert all("not measured: no profiled window" in r["how"] and "fp32 and amp-fp16" in r["how"] for r in rungs[1:4])
    assert rungs[4]["ratio"] == pytest.approx(3.0)
    assert rungs[4]["kept"] == pytest.approx(0.2) and "rungs between are not measured" in rungs[4]["lost"]


def test_a_ladder_from_the_h200_breakdowns_reads_each_rung_from_the_profiles():
    rungs = {r["rung"]: r for r in ex.ladder(cell("amp-fp16", 366.0, FP16_PROF), cell("fp32", 100.0, FP32_PROF),
                                             {"peak_tflops_measured": PEAKS})}
    mm32 = FP32_PROF["device_s_by_class"][kc.OTHER_MATMUL] + FP32_PROF["device_s_by_class"][kc.TENSOR_CORE_MATMUL]
    mm16 = FP16_PROF["device_s_by_class"][kc.OTHER_MATMUL] + FP16_PROF["device_s_by_class"][kc.TENSOR_CORE_MATMUL]
    assert rungs["matmul kernels' time ratio"]["ratio"] == pytest.approx(mm32 / mm16)
    assert 8 < mm32 / mm16 < 9  # the H200 tables: 832.6 ms of fp32 matmuls against 95.9 ms in amp-fp16
    assert rungs["device-time ratio"]["ratio"] == pytest.approx(FP32_PROF["device_s"] / FP16_PROF["device_s"])
    assert rungs["step-time ratio"]["ratio"] == pytest.approx(FP32_PROF["step_s"] / FP16_PROF["step_s"])
    assert rungs["measured speedup"]["ratio"] == pytest.approx(3.66)
    # each measured rung says what it kept of the one above
    assert rungs["device-time ratio"]["kept"] == pytest.approx(rungs["device-time ratio"]["ratio"]
                                                              / rungs["matmul kernels' time ratio"]["ratio"])
    assert "rungs between" not in rungs["device-time ratio"]["lost"]


def test_verdicts_from_a_profile_tell_tensor_cores_from_none_and_host_gaps():
    assert ex.verdict(cell("amp-fp16", 1.0, FP16_PROF)).startswith("compute-bound on the tensor cores")
    assert ex.verdict(cell("fp32", 1.0, FP32_PROF)).startswith("compute-bound off the tensor cores")
    idle = dict(FP16_PROF, step_s=FP16_PROF["device_s"] * 2)
    assert ex.verdict(cell("amp-fp16", 1.0, idle)).startswith("host-bound: the GPU idle 50% of the step")
    memory = dict(FP16_PROF, device_s_by_class={kc.NORM_ELEMENTWISE: 0.004, kc.TENSOR_CORE_MATMUL: 0.001})
    assert ex.verdict(cell("amp-fp16", 1.0, dict(memory, device_s=0.005, step_s=0.0055))).startswith("memory-bound")


def test_verdicts_without_a_profile_use_data_wait_and_nvml_only_where_they_speak():
    loader = cell("fp32", 1.0, data_wait_s=4.0, compute_s=6.0)
    assert ex.verdict(loader).startswith("loader-bound: waited for data 40%")
    # NVML 20% over a cell whose timed steps were 80% of it: at least (0.8 - 0.2) / 0.8 = 75% idle in them
    host = cell("fp32", 1.0, steady_seconds=8.0, data_wait_s=0.1, compute_s=9.9)
    host.telemetry = {"available": True, "util_mean_pct": 20.0, "duration_s": 10.0}
    assert ex.verdict(host).startswith("host-bound: the GPU idle at least 75% of the timed steps")
    # the same NVML figure over a cell whose timed steps were 10% of it says nothing about them
    diluted = cell("fp32", 1.0, steady_seconds=1.0)
    diluted.telemetry = {"available": True, "util_mean_pct": 20.0, "duration_s": 10.0}
    assert ex.verdict(diluted).startswith("not measured: no profiled window")
    assert ex.verdict(cell("fp32", 1.0)).startswith("not measured") and "no NVML utilisation" in ex.verdict(cell("fp32", 1.0))
    # timed steps too short for NVML's sample period (an H200's captured ResNet-18: 0.34 s of steps in a
    # 3.9 s cell read 0.1% utilisation): nothing is inferred from NVML
    burst = cell("amp-bf16", 1.0, steady_seconds=0.34, data_wait_s=0.0, compute_s=0.34)
    burst.telemetry = {"available": True, "util_mean_pct": 0.1, "duration_s": 3.9}
    assert ex.bound(burst).kind == ex.NOT_MEASURED, ex.verdict(burst)
    assert "the timed steps 0.3 s in all, under the 5 s NVML's utilisation needs" in ex.verdict(burst)


def test_a_strangers_malformed_profile_counts_as_none():
    for bad in ({"step_s": "fast", "device_s": 1.0}, {"step_s": -1.0, "device_s": 1.0}, {"available": False},
                [1, 2], {"step_s": float("nan"), "device_s": 1.0}):
        c = cell("amp-fp16", 1.0, bad)
        assert ex.profile_of(c) is None and ex.verdict(c).startswith("not measured")


def test_explain_pairs_each_cell_with_its_fp32_cell_and_filters_by_pattern():
    run = RunResults("r", RunConfig.of(suite="lstm"), environment={"peak_tflops_measured": PEAKS},
                     cells=[cell("fp32", 100.0), cell("amp-fp16", 250.0), cell("amp-bf16", 200.0, model="apex-2018")])
    rows = {r["cell_id"]: r for r in ex.explain(run)}
    assert "ladder" not in rows["lstm/tensor-core/fp32/kit"]
    assert rows["lstm/tensor-core/amp-fp16/kit"]["ladder"][-1]["ratio"] == pytest.approx(2.5)
    assert rows["lstm/apex-2018/amp-bf16/kit"]["ladder"][0]["how"] == "not measured: no fp32 cell of these settings"
    assert [r["cell_id"] for r in ex.explain(run, ["lstm/tensor-core/*"])] == ["lstm/tensor-core/fp32/kit",
                                                                          "lstm/tensor-core/amp-fp16/kit"]


def test_the_profile_is_optional_in_results_json_and_round_trips():
    plain = cell("fp32", 100.0)
    assert "profile" not in plain.to_dict()  # a cell without one is written as before
    run = RunResults("r", RunConfig.of(suite="lstm"), cells=[plain, cell("amp-fp16", 366.0, FP16_PROF)])
    back = RunResults.from_dict(json.loads(json.dumps(run.to_dict())))
    assert back.cells[0].profile is None and back.cells[1].profile == FP16_PROF


def test_each_verdict_has_a_kind_and_a_short_form_from_the_same_rules():
    host = ex.bound(cell("amp-fp16", 1.0, dict(FP16_PROF, step_s=FP16_PROF["device_s"] * 2)))
    assert host.kind == ex.HOST_BOUND and host.short == "host-bound 50% idle" and host.text == ex.verdict(
        cell("amp-fp16", 1.0, dict(FP16_PROF, step_s=FP16_PROF["device_s"] * 2)))
    assert ex.bound(cell("amp-fp16", 1.0, FP16_PROF)).short == "compute-bound (TC)"
    assert ex.bound(cell("fp32", 1.0, FP32_PROF)).short == "compute-bound (no TC)"
    assert ex.bound(cell("fp32", 1.0, data_wait_s=4.0, compute_s=6.0)).short == "loader-bound 40% wait"
    nvml = cell("fp32", 1.0, steady_seconds=8.0)
    nvml.telemetry = {"available": True, "util_mean_pct": 20.0, "duration_s": 10.0}
    assert ex.bound(nvml).short == "host-bound ≥75% idle"  # NVML gives only a least share
    assert ex.bound(cell("fp32", 1.0))[:2] == (ex.NOT_MEASURED, "not measured")


def test_a_profiled_steps_parts_add_up_to_the_step_with_the_host_gap_last():
    prof = {"available": True, "steps": 5, "step_s": 0.010, "device_s": 0.006, "idle_s": 0.004,
            "device_s_by_class": {kc.TENSOR_CORE_MATMUL: 0.004, kc.NORM_ELEMENTWISE: 0.001}}
    parts = ex.step_parts(cell("amp-fp16", 1.0, prof))
    assert [n for n, _ in parts] == [kc.TENSOR_CORE_MATMUL, kc.NORM_ELEMENTWISE, kc.OTHER, ex.HOST_GAP]
    assert sum(t for _, t in parts) == pytest.approx(0.010) and parts[-1][1] == pytest.approx(0.004)
    assert ex.step_parts(cell("fp32", 1.0)) is None


def test_rungs_missing_for_one_reason_are_one_line():
    rungs = ex.ladder(cell("amp-fp16", 300.0), cell("fp32", 100.0), {"peak_tflops_measured": PEAKS})
    lines = ex.ladder_lines(rungs)
    assert [x["name"] for x in lines] == ["peak ratio", "matmul kernels' time ratio, device-time ratio, step-time ratio",
                                          "measured speedup"]
    assert lines[1]["ratio"] is None and lines[1]["how"].startswith("not measured")
    assert lines[2]["lost"].startswith("keeps 20% of the peak ratio's")


def test_a_profile_recorded_as_unavailable_gives_its_reason_on_the_missing_rungs():
    off = {"available": False, "reason": "CPU device: no kernels to time"}
    rungs = ex.ladder(cell("amp-fp16", 300.0, off), cell("fp32", 100.0, off), {"peak_tflops_measured": PEAKS})
    assert rungs[1]["how"] == ("not measured: " + ex.NO_PROFILE + " for fp32 and amp-fp16; a window ran but measured "
                               "no device time: CPU device: no kernels to time")  # one reason, said once


def test_a_cells_largest_kernels_carry_their_share_of_device_time_and_drop_a_strangers_junk():
    from kit.results import step_profile as sp

    kernels = [("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64", 3e-3), ("elementwise_kernel<add>", 1e-3)]
    p = sp.device_profile(kernels, wall_s=5e-3, steps=1, source="test")
    rows = ex.largest_kernels(cell("amp-fp16", 1.0, p))
    assert [(r["class"], r["share"]) for r in rows] == [(kc.TENSOR_CORE_MATMUL, pytest.approx(0.75)),
                                                       (kc.NORM_ELEMENTWISE, pytest.approx(0.25))]
    p["largest_kernels"] = ([{"name": 7, "class": kc.OTHER, "s": 1e-3}, {"name": "x", "class": "made-up", "s": 1e-3},
                             {"name": "y", "class": kc.OTHER, "s": float("nan")}, "junk"]
                            + [{"name": "z" * 10_000, "class": kc.OTHER, "s": 1e-3}] * 100)
    junk = ex.largest_kernels(cell("amp-fp16", 1.0, p))
    assert len(junk) == sp.LARGEST - 4 and all(len(r["name"]) == sp.NAME_CHARS for r in junk)
    assert ex.largest_kernels(cell("amp-fp16", 1.0)) == []  # no profile


def test_efficiency_is_the_achieved_rate_over_the_precisions_calibrated_peak_where_both_were_measured():
    c = CellResult("cifar", "resnet18", "amp-fp16", "torch", "ok", summary={"achieved_tflops": {"median": 70.0}})
    e = cl.efficiency(c, PEAKS)
    assert e == {"achieved_tflops": 70.0, "peak_tflops": 750.0, "peak_dtype": "fp16",
                 "fraction_of_peak": pytest.approx(70.0 / 750.0)}
    assert cl.efficiency(c, {"available": False, "reason": "CPU"}) is None
    assert cl.efficiency(CellResult("cifar", "resnet18", "amp-fp16", "torch", "ok"), PEAKS) is None
    from kit.results.derive import efficiency

    assert efficiency([c], {"peak_tflops_measured": PEAKS}) == [{"cell_id": c.cell_id, **e}]  # the report's rows: the same figure


def _answer(c, base):
    return ex.answer(c, base, ex.ladder(c, base, {"peak_tflops_measured": PEAKS}))


def test_the_answer_names_each_rung_that_lost_with_the_pieces_it_is_made_of():
    """A host-paced step (fixture numbers): the kernels run 4× faster in fp16, the host's 8 ms per
    step does not change, so the step is 1.2× and the answer says where the rest went."""
    def prof(mm_ms, other_ms, idle_ms, tc):
        by = {kc.TENSOR_CORE_MATMUL if tc else kc.OTHER_MATMUL: mm_ms / 1e3, kc.NORM_ELEMENTWISE: other_ms / 1e3}
        d = (mm_ms + other_ms) / 1e3
        return {"available": True, "steps": 5, "step_s": d + idle_ms / 1e3, "device_s": d, "idle_s": idle_ms / 1e3,
                "device_s_by_class": by}

    fp32, fp16 = cell("fp32", 100.0, prof(4.0, 1.0, 8.0, False)), cell("amp-fp16", 118.0, prof(1.0, 0.5, 8.0, True))
    text = _answer(fp16, fp32)
    assert text.startswith("amp-fp16 1.18× over fp32: the matmul kernels ran 4.00× faster, 27% of the peak ratio's 15.00×")
    assert ("the step 1.37× (41% of the device-time ratio's 3.33×): the GPU sat idle 8.00 of its 9.50 ms (fp32: 8.00 of "
            "13.00), time in which no kernel ran") in text
    # the device-time rung kept 83% of the kernels' and the timed steps 86% of the profiled: under 90%, named
    assert "; the kernels' busy time 3.33× (83% of the matmul kernels' time ratio's 4.00×): those outside the matmuls took 0.50 ms" in text
    assert text.endswith("; the timed steps 1.18× (86% of the step-time ratio's 1.37×)")
    fp16_fast = cell("amp-fp16", 136.0, prof(1.0, 0.5, 8.0, True))
    assert "the timed steps" not in _answer(fp16_fast, fp32)  # 1.36 of 1.37: kept


def test_the_answer_of_a_ladder_without_profiles_says_where_the_rest_went_is_not_measured():
    text = _answer(cell("amp-fp16", 300.0), cell("fp32", 100.0))
    assert text == ("amp-fp16 3.00× over fp32: 20% of the peak ratio's 15.00×; where the rest went is not measured "
                    f"({ex.NO_WINDOW})")
    assert _answer(cell("amp-fp16", 300.0), cell("amp-fp16", 300.0)).startswith("amp-fp16 1.00× over fp32")
    assert ex.answer(cell("amp-fp16", 1.0), None, [ex._rung(ex.MEASURED, None, "not measured: no fp32 cell")]) == \
        "not measured: no fp32 cell"


def test_explain_rows_carry_the_answer_for_every_reduced_precision():
    res = RunResults("r", RunConfig.of(suite="lstm"), cells=[cell("fp32", 100.0, FP32_PROF), cell("amp-fp16", 366.0, FP16_PROF)],
                     environment={"peak_tflops_measured": PEAKS})
    fp32, fp16 = ex.explain(res)
    assert "answer" not in fp32 and fp16["answer"].startswith("amp-fp16 3.66× over fp32: ")


def test_numbers_too_large_for_a_float_are_no_number_anywhere_a_bundle_is_read():
    """JSON allows integers of thousands of digits; math.isfinite(10 ** 400) raises. A stranger's
    bundle with one in a summary, a profile or a calibration is read as if the figure were absent."""
    from kit.report.explain_text import _ceiling_lines
    from kit.results import ratios
    from kit.results import step_profile as sp

    huge = 10 ** 400
    assert ratios.finite_number(huge) is None and ratios.finite_values([1, huge, 2.5]) == [1.0, 2.5]
    c = CellResult("cifar", "resnet18", "amp-fp16", "torch", "ok", summary={"achieved_tflops": {"median": huge}})
    assert cl.efficiency(c, PEAKS) is None and cl.efficiency(c, dict(PEAKS, fp16=huge)) is None
    p = sp.device_profile([("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n", 1e-3)], wall_s=2e-3, steps=1, source="test")
    p["largest_kernels"][0]["s"] = huge
    assert ex.largest_kernels(cell("amp-fp16", 1.0, p)) == []
    assert ex.profile_of(cell("amp-fp16", 1.0, dict(p, step_s=huge))) is None
    line = _ceiling_lines({"peak_tflops_measured": dict(PEAKS, fp32=huge), "merged_from": [
        {"cells": ["x"], "peak_tflops_measured": {"available": True, "fp16": huge}}]})[0]
    assert "fp16 750" in line and "fp32" not in line
    bw = _ceiling_lines({"memory_bandwidth_measured": {"available": True, "gb_per_s": huge, "reason": "x"}})[1]
    assert bw.startswith("memory bandwidth: not measured")
    for junk in (True, float("nan"), -3.0):
        assert "not measured" in _ceiling_lines({"memory_bandwidth_measured": {"available": True, "gb_per_s": junk}})[1]


def test_figures_a_division_makes_infinite_are_no_number_and_the_json_stays_json(tmp_path):
    """A stranger's 5e-324 seconds of kernels (positive, finite) divides fp32's into infinity: the rung
    reads as not measured, no "inf%" is kept, and `--json` stays standard JSON (no Infinity or NaN)."""
    import json as _json

    from fixtures.results.factory import make_env, make_results, make_run_dir

    from kit.bundle.safe_open import open_bundle
    from kit.report.explain_text import explain_json
    from kit.report.export import export_run

    def prof(device):
        return {"available": True, "steps": 5, "step_s": 5e-3, "device_s": device, "busy_s": device,
                "device_s_by_class": {kc.TENSOR_CORE_MATMUL: device}}

    fp32, fp16 = cell("fp32", 100.0, prof(4e-3)), cell("amp-fp16", 150.0, prof(5e-324))
    rungs = ex.ladder(fp16, fp32, {"peak_tflops_measured": PEAKS})
    assert all(r["ratio"] is None or r["ratio"] < 1e300 for r in rungs)
    assert all(r.get("kept") is None or r["kept"] < 1e300 for r in rungs)
    assert "inf" not in ex.answer(fp16, fp32, rungs)
    res = make_results([c.to_dict() for c in (fp32, fp16)], make_env())
    b = export_run(make_run_dir(tmp_path / "runs", res), tmp_path / "out")
    doc = _json.loads(explain_json(open_bundle(b)), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert doc["cells"]


def test_matmul_kernels_that_got_slower_are_said_to_be_slower():
    def prof(mm_ms):
        return {"available": True, "steps": 5, "step_s": 10e-3, "device_s": mm_ms / 1e3, "busy_s": mm_ms / 1e3,
                "device_s_by_class": {kc.OTHER_MATMUL: mm_ms / 1e3}}

    fp32, slow = cell("fp32", 100.0, prof(2.0)), cell("fp16-master", 50.0, prof(4.0))
    text = ex.answer(slow, fp32, ex.ladder(slow, fp32, {"peak_tflops_measured": PEAKS}))
    assert "the matmul kernels ran 2.00× slower" in text and "0.50× faster" not in text


def test_the_text_counts_the_calibrations_and_names_merged_runs_that_kept_none():
    from kit.report.explain_text import _ceiling_lines

    env = {"peak_tflops_measured": {"available": True, "fp32": 50.0},  # fixture numbers
           "merged_from": [{"cells": ["a"], "peak_tflops_measured": {"available": True, "fp32": 50.0}},
                           {"cells": ["b"], "peak_tflops_measured": {"available": True, "fp32": 55.0}},
                           {"cells": ["c"]}]}
    line = _ceiling_lines(env)[-1]
    assert line.startswith("2 calibrations, one per session that measured cells")  # the first's is the env's: once
    assert "fp32 10.0%" in line and line.endswith("1 merged run(s) kept no calibration of their own (merged by an older "
                                                  "kit): their cells read the first run's")
    assert len(_ceiling_lines({"peak_tflops_measured": {"available": True, "fp32": 50.0}})) == 2  # one: no such line


def test_a_step_rung_compares_timed_steps_only_where_both_cells_have_them():
    """A merged bundle: the fp32 cell's profile predates timed_step_s, the amp one's has it. The rung
    compares the windows' own steps then, one kind of step for both."""
    def prof(step_ms, timed_ms=None):
        p = {"available": True, "steps": 5, "step_s": step_ms / 1e3, "device_s": 1e-3, "busy_s": 1e-3,
             "device_s_by_class": {kc.TENSOR_CORE_MATMUL: 1e-3}}
        if timed_ms:
            p["timed_step_s"] = timed_ms / 1e3
        return p

    fp32, amp = cell("fp32", 100.0, prof(8.0)), cell("amp-fp16", 150.0, prof(6.0, timed_ms=4.0))
    step = next(r for r in ex.ladder(amp, fp32, {"peak_tflops_measured": PEAKS}) if r["rung"] == ex.STEP)
    assert step["ratio"] == pytest.approx(8.0 / 6.0) and "profiled step" in step["how"]
    fp32 = cell("fp32", 100.0, prof(8.0, timed_ms=6.0))
    step = next(r for r in ex.ladder(amp, fp32, {"peak_tflops_measured": PEAKS}) if r["rung"] == ex.STEP)
    assert step["ratio"] == pytest.approx(6.0 / 4.0) and "timed step" in step["how"]
