"""Derived figures: the seed's performance ratios, max-batch ratios, parity verdicts.

The cell numbers below are fixtures chosen so the answers can be checked by hand.
"""

from __future__ import annotations

import pytest

from kit.results.derive import derive
from kit.results.schema import CellResult
from kit.results.stats import summarise_repeats


def cell(workload, model, precision, epoch_s, thr, metric=None, max_batch=None, status="ok", engine="torch"):
    reps = [{"epoch_seconds_median": epoch_s, "throughput_items_per_s": thr, "final_metric": metric,
             "achieved_tflops": thr / 1000}]
    c = CellResult(workload, model, precision, engine, status, repeats=reps)
    c.summary = summarise_repeats(reps)
    if max_batch:
        c.metrics["max_batch"] = max_batch
    return c


def test_speedup_over_fp32_is_the_throughput_ratio_and_the_epoch_time_ratio_has_its_own_name():
    cells = [cell("cifar", "resnet50", "fp32", 10.0, 1000), cell("cifar", "resnet50", "amp-fp16", 5.0, 2100)]
    [row] = derive(cells, "throughput")["performance_ratios"]
    assert row["precision"] == "amp-fp16"
    assert row["speedup_over_fp32"] == pytest.approx(2.1)
    assert row["epoch_time_ratio"] == pytest.approx(2.0)
    assert not {"epoch_time_ratio_fp32_over_mode", "throughput_ratio_mode_over_fp32"} & set(row)


def test_no_ratio_without_a_measured_fp32_cell():
    cells = [cell("cifar", "resnet50", "fp32", 10.0, 1000, status="failed"), cell("cifar", "resnet50", "amp-fp16", 5.0, 2000)]
    assert derive(cells, "throughput")["performance_ratios"] == []


def test_max_batch_ratio():
    cells = [cell("cifar", "resnet18", "fp32", 1, 1, max_batch=1000), cell("cifar", "resnet18", "amp-fp16", 1, 1, max_batch=1800)]
    [row] = derive(cells, "throughput")["max_batch_ratios"]
    assert row["ratio"] == pytest.approx(1.8)


def test_cifar_parity_uses_accuracy_points():
    cells = [cell("cifar", "resnet18", "fp32", 1, 1, metric=0.700),
             cell("cifar", "resnet18", "amp-fp16", 1, 1, metric=0.695),
             cell("cifar", "resnet18", "amp-bf16", 1, 1, metric=0.650)]
    verdicts = {r["precision"]: r["verdict"] for r in derive(cells, "convergence")["parity"]}
    assert verdicts == {"amp-fp16": "matches fp32", "amp-bf16": "worse than fp32"}


def test_lstm_parity_uses_relative_perplexity():
    cells = [cell("lstm", "apex-2018", "fp32", 1, 1, metric=100.0, engine="kit"),
             cell("lstm", "apex-2018", "fp16-master", 1, 1, metric=101.5, engine="kit"),
             cell("lstm", "apex-2018", "amp-fp16", 1, 1, metric=103.0, engine="kit")]
    verdicts = {r["precision"]: r["verdict"] for r in derive(cells, "convergence")["parity"]}
    assert verdicts == {"fp16-master": "matches fp32", "amp-fp16": "worse than fp32"}
    # a tolerance given by the user wins
    verdicts = {r["precision"]: r["verdict"] for r in derive(cells, "convergence", tolerance=0.05)["parity"]}
    assert set(verdicts.values()) == {"matches fp32"}


def test_efficiency_is_a_fraction_of_the_measured_peak_for_the_modes_dtype():
    cells = [cell("cifar", "resnet18", "amp-bf16", 1, 100_000)]
    peaks = {"available": True, "fp32": 50.0, "tf32": 400.0, "fp16": 750.0, "bf16": 800.0}
    [row] = derive(cells, "throughput", environment={"peak_tflops_measured": peaks})["efficiency"]
    assert row["peak_dtype"] == "bf16"
    assert row["fraction_of_peak"] == pytest.approx(100.0 / 800.0)
    assert derive(cells, "throughput", environment={"peak_tflops_measured": {"available": False}})["efficiency"] == []
