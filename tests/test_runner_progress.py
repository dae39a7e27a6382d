"""What a user sees while `kit run` goes: the plan's estimate, the bars, the ETA, each cell's line.

The clock is a fake one the test moves; the cells' results are fixtures (numbers made up).
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from kit.results.schema import CellResult, CellSpec, RunConfig
from kit.env import record as record_mod
from kit.env.record import device_kind
from kit.runner.plan import Plan, build_plan, estimate_seconds
from kit.runner.progress import RichUI, RunEta, describe_result, print_plan


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def _result(spec: CellSpec, status: str, started: float, finished: float, repeats: int = 1) -> CellResult:
    summary = {}
    if status == "ok":
        summary = {"throughput_items_per_s": {"n": repeats, "median": 343.0, "mean": 343.0, "min": 340.0, "max": 346.0,
                                              "stdev": 0.0 if repeats == 1 else 3.0, "cv": 0.0 if repeats == 1 else 0.012}}
    r = CellResult(spec.workload, spec.model, spec.precision, spec.engine, status, params=spec.params,
                   summary=summary, throughput_unit="images", reason=None if status == "ok" else "fixture: cannot run here")
    r.started_at, r.finished_at = started, finished
    return r


def _render(ui: RichUI) -> str:
    out = Console(file=io.StringIO(), width=160, record=True, color_system=None)
    out.print(ui.progress.get_renderable())
    return out.export_text()


def _smoke_plan(device="cpu") -> Plan:
    config = RunConfig.of(suite="cifar", data="synthetic", device=device, models=["resnet18", "resnet34"],
                       precisions=["fp32", "amp-bf16", "fp16-master"], engines=["torch"], repeats=1, steps=4, batch_size=32)
    return build_plan(config)


# -- the run's ETA: measured cells only ------------------------------------------


def _eta(cells: list[str], est: float = 10.0, kinds=None) -> RunEta:
    return RunEta({c: est for c in cells}, kinds or {c: (c,) for c in cells})


def test_cells_skipped_at_once_do_not_shorten_the_eta():
    # the case: quick skips made a cells-per-second rate promise "1 s left"
    cells = [f"c{i}" for i in range(14)]
    eta = _eta(cells)
    for c in cells[:2]:
        eta.start(c, 0.0)
        eta.done(c, "skipped", 0.01)
    eta.start("c2", 0.0)
    eta.done("c2", "ok", 10.0)
    assert eta.seconds_left(10.0) == pytest.approx(11 * 10.0)


def test_the_eta_is_unknown_until_a_cell_has_been_measured():
    eta = _eta(["a", "b", "c"])
    eta.done("a", "skipped", 0.0)
    assert eta.seconds_left(5.0) is None


def test_a_precision_skipped_once_is_expected_to_be_skipped_again():
    kinds = {"r18/fp32": ("cifar", "fp32"), "r18/fp16": ("cifar", "fp16-master"),
             "r34/fp32": ("cifar", "fp32"), "r34/fp16": ("cifar", "fp16-master")}
    eta = RunEta({c: 10.0 for c in kinds}, kinds)
    eta.done("r18/fp32", "ok", 20.0)
    eta.done("r18/fp16", "skipped", 0.0)
    assert eta.seconds_left(0.0) == pytest.approx(20.0)  # r34/fp32 only


def test_a_batch_curve_point_past_the_memory_predicts_only_larger_batches_of_its_cell():
    """ResNet-50 amp-bf16 at batch 2048 skipped (out of memory): its batch 4096 will be too, but
    ResNet-18 amp-bf16 at 2048 and 4096 still run (counting them skipped made the ETA too short)."""
    from kit.results.schema import CellSpec
    from kit.runner.progress import skip_kind

    specs = [CellSpec("cifar", m, "amp-bf16", "torch", {"batch_size": b, "batch_curve": True})
             for m in ("resnet50", "resnet18") for b in (2048, 4096)]
    kinds = {s.cell_id: skip_kind(s) for s in specs}
    assert len(set(kinds.values())) == 4, kinds
    ids = [s.cell_id for s in specs]
    eta = RunEta({c: 10.0 for c in ids}, kinds)
    eta.done(ids[0], "skipped", 0.0)  # resnet50 bs2048: out of memory
    eta.start(ids[2], 0.0)
    eta.done(ids[2], "ok", 10.0)  # resnet18 bs2048 measured
    assert eta.seconds_left(10.0) == pytest.approx(10.0)  # resnet18 bs4096 only
    assert skip_kind(CellSpec("cifar", "resnet18", "fp16-master", "torch", {"batch_size": 256})) == ("cifar", "fp16-master")


def test_cells_weigh_what_the_plan_estimates_for_them_and_the_running_cell_counts_down():
    eta = RunEta({"small": 10.0, "big": 40.0, "last": 10.0}, {"small": (1,), "big": (2,), "last": (3,)})
    eta.done("small", "ok", 5.0)  # this machine runs at half the estimate
    assert eta.seconds_left(0.0) == pytest.approx(20.0 + 5.0)
    eta.start("big", 100.0)
    assert eta.seconds_left(108.0) == pytest.approx(12.0 + 5.0)
    assert eta.seconds_left(500.0) == pytest.approx(5.0)  # a cell past its estimate adds nothing, never negative


def test_a_resumed_run_counts_only_the_cells_left():
    eta = RunEta({"a": 10.0, "b": 10.0, "c": 10.0}, {"a": (1,), "b": (2,), "c": (3,)}, done={"a"})
    eta.done("b", "ok", 10.0)
    assert eta.seconds_left(0.0) == pytest.approx(10.0)


# -- the bars ------------------------------------------------------------------------


def test_the_progress_shows_warming_up_then_steps_and_an_eta_from_measured_cells():
    clock = Clock()
    ui = RichUI(console=Console(file=io.StringIO(), width=160), clock=clock)
    plan = _smoke_plan()
    specs = plan.cells
    ui.plan(plan, {})
    try:
        ui.cell_start(specs[0])
        text = _render(ui)
        assert "warming up" in text and "0/?" not in text
        assert "ETA after a measured cell" in text
        clock.t += 10
        ui.cell_progress(specs[0], 2, 4)
        assert "2/4" in _render(ui)
        clock.t += 10
        ui.cell_done(specs[0], _result(specs[0], "ok", clock.t - 20, clock.t))
        for spec in specs[1:3]:  # two cells skipped in no time
            ui.cell_start(spec)
            ui.cell_done(spec, _result(spec, "skipped", clock.t, clock.t))
        text = _render(ui)
        assert "3/6" in text
        # left: resnet34 fp32 only (its amp-bf16 and fp16-master are expected to be skipped
        # like resnet18's), at the pace of the one measured cell (20 s for its estimate)
        r34 = estimate_seconds(specs[3], 1, device="cpu")
        expected = round(20.0 * r34 / estimate_seconds(specs[0], 1, device="cpu"))
        assert 20 < expected < 60
        left = [line for line in text.splitlines() if "all cells" in line][0]
        assert f"ETA 0:00:{expected:02d}" in left, left
    finally:
        ui.close()


def test_a_finished_cell_keeps_its_name_and_one_repeat_says_so():
    buf = io.StringIO()
    console = Console(file=buf, width=120, force_terminal=True, color_system=None)
    clock = Clock()
    ui = RichUI(console=console, clock=clock)
    plan = _smoke_plan()
    ui.plan(plan, {})
    ui.cell_start(plan.cells[0])
    ui.cell_done(plan.cells[0], _result(plan.cells[0], "ok", 0.0, 12.0))
    ui.close()
    screen = buf.getvalue()
    assert "cifar/resnet18/fp32/torch: 343 images/s (1 repeat)" in screen
    assert "cv 0.0%" not in screen


def test_the_spread_of_several_repeats_is_a_cv_over_n_repeats():
    spec = _smoke_plan().cells[0]
    assert "343 images/s (cv 1.2% over 3 repeats)" in describe_result(_result(spec, "ok", 0, 1, repeats=3))
    assert "(1 repeat)" in describe_result(_result(spec, "ok", 0, 1, repeats=1))


# -- the plan's estimate: from the device ---------------------------------------------


def test_the_estimate_uses_the_rates_of_the_runs_device():
    spec = _smoke_plan().cells[0]
    cpu = estimate_seconds(spec, 1, device="cpu")
    gpu = estimate_seconds(spec, 1, device="cuda")
    # a CPU cell of 4 steps of 32 images took 5.35 s at the least on the development VM
    # (kit/facts/estimates.py, [VM 2026-12-03]); so small a cell is nearly all fixed cost on either device
    assert 2 < cpu < 20 and cpu != gpu
    big = CellSpec("cifar", "resnet50", "fp32", "torch", dict(spec.params, steps=100, batch_size=256))
    # a large cell is work on a 2-core CPU (about 0.06 effective TFLOP/s), mostly fixed cost (Inductor's
    # compile, 25 s) on an H200 or H100
    assert estimate_seconds(big, 3, device="cpu") > 10 * estimate_seconds(big, 3, device="cuda")


def test_the_plan_says_which_rates_its_estimate_rests_on():
    out = Console(file=io.StringIO(), width=400, color_system=None)
    print_plan(out, _smoke_plan("cpu"), {})
    text = out.file.getvalue()
    assert "CPU" in text and "TFLOP/s" not in text.split("rough estimate")[1].split(";")[0]
    out = Console(file=io.StringIO(), width=400, color_system=None)
    print_plan(out, _smoke_plan("cuda:0"), {})
    assert "H200" in out.file.getvalue()


def test_auto_estimates_for_a_gpu_only_where_an_nvidia_driver_is_loaded(monkeypatch):
    monkeypatch.setattr(record_mod.os.path, "exists", lambda p: p == "/proc/driver/nvidia/version")
    assert device_kind("auto") == "cuda"
    monkeypatch.setattr(record_mod.os.path, "exists", lambda p: False)
    assert device_kind("auto") == "cpu"
    assert device_kind("cuda:1") == "cuda" and device_kind("cpu") == "cpu"


def test_every_workload_and_engine_has_a_rate_for_each_device_kind():
    from kit.facts import estimates
    from kit.results import suites

    for kind in estimates.SOURCES:
        for name in [f"cifar/{e}" for e in suites.suite("cifar").engines] + ["lstm/kit", "gpt/kit"]:
            rate = estimates.RATES[(kind, name)]
            assert rate.cell_s > 0 and rate.tflops > 0
