"""`kit explain` at its edges (fixture cells, invented numbers): what the profiled window cost; a cell
whose times are not in order; the device rung where kernels overlap; the tensor-core boundary; a rung
that keeps more than 100% of the one above, explained; the machine named once in `kit bundle show`;
the s/epoch column says it includes warm-up."""

from __future__ import annotations

import pytest

from fixtures.cli import run_main
from fixtures.results.factory import make_cell, make_env, make_profile, make_results, make_run_dir
from kit.report.export import export_run
from kit.results import explain as ex
from kit.results import kernel_classes as kc
from kit.results.schema import CellResult

TC, OTHER_MM, NORM = kc.TENSOR_CORE_MATMUL, kc.OTHER_MATMUL, kc.NORM_ELEMENTWISE


def _cell(precision: str = "amp-fp16", epoch_s=(5.0, 5.05, 4.95), profile: dict | None = None,
          started: float | None = 0.0, finished: float | None = 100.0) -> CellResult:
    cell = CellResult.from_dict(make_cell("resnet18", precision, epoch_s=list(epoch_s), profile=profile))
    cell.started_at, cell.finished_at = started, finished
    return cell


def _windowed(wall_s: float) -> dict:
    return dict(make_profile(10.0, {TC: 6.0, NORM: 3.0}), window_wall_s=wall_s)


def test_a_five_second_window_in_a_hundred_second_cell_costs_five_percent():
    assert ex.window_cost(_cell(profile=_windowed(5.0), started=0.0, finished=100.0)) == (5.0, pytest.approx(0.05))
    assert ex.window_cost(_cell(profile=_windowed(5.0), started=1000.0, finished=1200.0)) == (5.0, pytest.approx(0.025))


@pytest.mark.parametrize("started, finished", [(100.0, 100.0), (200.0, 100.0), (None, 100.0), (0.0, None)])
def test_a_cell_whose_finish_is_not_after_its_start_has_an_unknown_window_cost(started, finished):
    assert ex.window_cost(_cell(profile=_windowed(5.0), started=started, finished=finished)) is None


def test_kit_explain_of_a_bundle_whose_cell_times_are_out_of_order_says_nothing_of_the_cost(tmp_path, capsys, monkeypatch):
    cells = [make_cell("resnet18", p, epoch_s=[s, s * 1.01, s * 0.99], profile=_windowed(5.0))
             for p, s in (("fp32", 10.0), ("amp-fp16", 5.0))]
    cells[1]["started_at"], cells[1]["finished_at"] = 200.0, 100.0  # reversed
    cells[0]["started_at"], cells[0]["finished_at"] = 100.0, 100.0  # zero length
    bundle = export_run(make_run_dir(tmp_path / "runs", make_results(cells, make_env(), run_id="FIXTURE-ORDER")),
                        tmp_path / "b")
    code, out, err = run_main(["explain", str(bundle)], capsys, monkeypatch)
    assert code == 0, err
    assert "Traceback" not in err and "profiled window took" not in out and "-" not in out.split("cell's wall time")[0][-8:]


def test_the_device_rung_divides_the_busy_time_where_kernels_overlap():
    """fp32's kernels add up to 12 ms in 10 ms of busy time (they overlap), amp-fp16's 4 in 4: the
    device-time ratio is 10 / 4 = 2.5 (the busy times), not 12 / 4 = 3."""
    p32 = dict(make_profile(11.0, {TC: 8.0, NORM: 4.0}), busy_s=0.010)
    p16 = dict(make_profile(5.0, {TC: 2.0, NORM: 2.0}), busy_s=0.004)
    rungs = {r["rung"]: r for r in ex.ladder(_cell("amp-fp16", profile=p16), _cell("fp32", (10.0, 10.1, 9.9), p32), {})}
    assert rungs[ex.DEVICE]["ratio"] == pytest.approx(2.5)


@pytest.mark.parametrize("tc_share, short", [(0.55, "compute-bound (TC)"), (0.45, "compute-bound (no TC)"),
                                             (0.5, "compute-bound (TC)")])
def test_the_tensor_core_boundary_sits_at_half_the_matmul_time(tc_share, short):
    prof = make_profile(10.0, {TC: 8.0 * tc_share, OTHER_MM: 8.0 * (1 - tc_share), NORM: 1.5})
    assert ex.bound(_cell(profile=prof)).short == short


def _calibrated_env() -> dict:
    env = make_env()
    env["peak_tflops_measured"] = {"available": True, "fp32": 50.0, "tf32": 400.0, "fp16": 500.0, "bf16": 500.0}
    return env


def test_a_rung_that_keeps_more_than_all_of_the_one_above_says_why(tmp_path, capsys, monkeypatch):
    """The peaks allow 10x; fp32's matmul kernels took 12 ms a step against amp-fp16's 1 ms: 12x, 120%."""
    cells = [make_cell("resnet18", "fp32", epoch_s=[10.0, 10.1, 9.9], profile=make_profile(14.0, {TC: 12.0, NORM: 1.0})),
             make_cell("resnet18", "amp-fp16", epoch_s=[5.0, 5.05, 4.95], profile=make_profile(3.0, {TC: 1.0, NORM: 1.0}))]
    bundle = export_run(make_run_dir(tmp_path / "runs", make_results(cells, _calibrated_env(), run_id="FIXTURE-OVER")),
                        tmp_path / "b")
    code, out, err = run_main(["explain", str(bundle)], capsys, monkeypatch)
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if "keeps 120% of the peak ratio's 10.00×" in ln)
    assert "more than 100%, because the matmul kernels sped up more than the peaks allow" in line
    assert not any("more than 100%" in ln for ln in out.splitlines() if "keeps" in ln and "keeps 120%" not in ln)


def test_bundle_show_names_the_machine_once_with_its_host_id(tmp_path, capsys, monkeypatch):
    env = make_env(host="vm")
    env["host"] = {"name": "vm", "host_id": "h-1234", "anonymized": False}
    env["earlier_sessions"] = [{"collected_at": "2026-12-01T00:00:00Z", "host": {"name": "vm", "host_id": "h-1234"},
                                "cells": ["cifar/resnet18/fp32/torch"]},
                               {"collected_at": "2026-12-01T01:00:00Z", "host": {"name": "gpu7", "host_id": "h-9999"},
                                "cells": []}]
    bundle = export_run(make_run_dir(tmp_path / "runs", make_results([make_cell()], env, run_id="FIXTURE-HOST")),
                        tmp_path / "b")
    code, out, err = run_main(["bundle", "show", str(bundle)], capsys, monkeypatch)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "machine vm (host id h-1234)" in flat
    assert "1 cell(s) on this host" in flat and "0 cell(s) on host gpu7 (host id h-9999)" in flat
    assert "on host h-1234" not in flat


def test_the_s_per_epoch_column_says_it_includes_warm_up(tmp_path, capsys, monkeypatch):
    bundle = export_run(make_run_dir(tmp_path / "runs", make_results([make_cell()], make_env(), run_id="FIXTURE-EPOCH")),
                        tmp_path / "b")
    code, out, err = run_main(["bundle", "show", str(bundle)], capsys, monkeypatch)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "throughput in images/s, steady; s/epoch: wall time, warm-up included" in flat
    header = out[out.index("s/epoch", out.index("warm-up included")):out.index("───")]
    assert "warm-up" in header  # the column's own header says it too (wrapped at its spaces)


def test_a_cpu_cell_s_verdict_cites_no_nvml():
    """A cell that ran on the CPU has no GPU telemetry: its verdict says so, in the run's words, and
    never that NVML "cannot say"; a GPU cell whose NVML did not cover its steps still says NVML."""
    cpu = _cell("fp32", (10.0, 10.1, 9.9))
    cpu.telemetry = {"available": False, "reason": "device 'cpu' is not an NVIDIA GPU"}
    verdict = ex.verdict(cpu)
    assert verdict.startswith("not measured") and "NVML" not in verdict
    assert "no GPU telemetry over the cell (device 'cpu' is not an NVIDIA GPU" in verdict
    gpu = _cell("fp32", (10.0, 10.1, 9.9))
    gpu.telemetry = {"available": True, "util_mean_pct": 20.0, "duration_s": 10.0}
    assert "NVML over the whole cell cannot say" in ex.verdict(gpu)
