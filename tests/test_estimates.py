"""The plan's rough estimate against the README's CPU commands as measured on the 2-core VM
(kit.facts.estimates.MEASURED, from references/cpu-vm/estimates/measurements.json): within 3x.
No timing here: the measurements are data, recorded with their source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.facts import estimates
from kit.facts import models
from kit.runner.option_checks import config_from_options
from kit.runner.options import parse_args
from kit.runner.plan import build_plan, estimate_plan_seconds, runs_on_cpu

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "references" / "cpu-vm" / "estimates" / "measurements.json"


def _estimate(argv) -> float:
    config = config_from_options(parse_args(list(argv)), list(argv))
    return estimate_plan_seconds(build_plan(config))


@pytest.mark.parametrize("measured", estimates.MEASURED, ids=lambda m: " ".join(m.argv[:4]))
def test_the_estimate_of_a_readme_cpu_command_is_within_3x_of_its_measurement(monkeypatch, measured):
    import kit.env.record

    monkeypatch.setattr(kit.env.record, "cpu_has_native_bf16", lambda: False)  # the VM's CPU has no bf16
    est = _estimate(measured.argv)
    assert measured.cells_s / 3 <= est <= measured.cells_s * 3, (est, measured)
    assert measured.wall_s / 3 <= est <= measured.wall_s * 3, (est, measured)


def test_the_recorded_figures_are_the_minimum_of_the_committed_measurements():
    record = json.loads(RECORD.read_text())
    by_command = {}
    for rnd in record["rounds"]:
        for run in rnd.values():
            assert run["exit_code"] == 0
            by_command.setdefault(run["command"], []).append(run)
    assert len(record["rounds"]) >= 2
    for m in estimates.MEASURED:
        runs = by_command["kit " + " ".join(m.argv)]
        assert m.wall_s == min(r["wall_s"] for r in runs)
        assert m.cells_s == pytest.approx(min(sum(c["seconds"] for c in r["cells"]) for r in runs), abs=0.01)


def test_a_cpu_counts_the_cells_it_skips_at_a_fraction_of_a_second(monkeypatch):
    import kit.env.record

    monkeypatch.setattr(kit.env.record, "cpu_has_native_bf16", lambda: False)
    argv = ["run", "--suite", "cifar", "--data", "synthetic", "--device", "cpu", "--models", "resnet18"]
    all_precisions = _estimate(argv + ["--precisions", "fp32,tf32,amp-fp16,amp-bf16,fp16-master"])
    fp32_only = _estimate(argv + ["--precisions", "fp32"])
    assert all_precisions == pytest.approx(fp32_only + 2 * 4 * estimates.SKIPPED_CELL_S)
    monkeypatch.setattr(kit.env.record, "cpu_has_native_bf16", lambda: True)
    assert _estimate(argv + ["--precisions", "fp32,amp-bf16"]) > 1.9 * fp32_only


def test_the_cpu_precisions_are_those_the_benchmark_runs_on_a_cpu():
    pytest.importorskip("torch")
    from kit.bench.precision import unavailable_reason
    from kit.results.precisions import PRECISIONS

    for precision in PRECISIONS:
        runs = unavailable_reason(precision, "cpu") is None
        assert runs == (precision in ("fp32", "amp-bf16")), precision
    assert not runs_on_cpu("tf32") and runs_on_cpu("fp32")


GPU_RECORDS = REPO / "references" / "gpu-estimates" / "cells.json"


def test_the_gpu_rates_are_the_fit_of_the_committed_cells():
    """kit/facts/estimates.py's GPU rates for the engines of today's reference parts, and the batch
    search's seconds per GFLOP per image, are what scripts/fit_estimates.py fits to references/gpu-estimates/cells.json."""
    from fixtures.modules import load_script

    script = load_script("fit_estimates")
    rates, search_per_gflop = script.fit(json.loads(GPU_RECORDS.read_text())["records"])
    assert set(rates) == {"cifar/torch", "cifar/fastai", "lstm/graphed", "lstm/kit"}
    for key, rate in rates.items():
        assert estimates.RATES[("cuda", key)] == rate, key
    assert estimates.SEARCH_S_PER_GFLOP == search_per_gflop


def test_an_engine_measured_at_one_model_size_gets_no_rate_and_a_message(tmp_path, monkeypatch, capsys):
    """Cells of one model size give a constant x: the fit leaves that engine out and says why,
    instead of stopping on statistics' "x is constant"."""
    from fixtures.modules import load_script

    script = load_script("fit_estimates")
    recs = json.loads(GPU_RECORDS.read_text())["records"]
    one_size = [{"run": "r1", "gpu": "NVIDIA H100 80GB HBM3", "cell_id": f"gpt/gpt2-small/{p}/kit",
                 "params": {"preset": "gpt2-small"}, "repeats": 3, "wall_s": wall, "search_s": 0.0}
                for p, wall in (("fp32", 60.0), ("amp-bf16", 28.0))]
    rates, _ = script.fit(recs + one_size)
    assert "gpt/kit" not in rates and "lstm/graphed" in rates
    records = tmp_path / "cells.json"
    records.write_text(json.dumps({"records": recs + one_size}))
    monkeypatch.setattr("sys.argv", ["fit_estimates.py", str(records)])
    script.main()
    out = capsys.readouterr().out
    assert "gpt/kit: 2 cells, all of one model size: no line to fit" in out
    assert "cifar/torch: " in out and "tflops" in out


def test_an_engine_whose_time_does_not_grow_with_its_flops_gets_no_rate_and_a_message(tmp_path, monkeypatch, capsys):
    """The H100 reference's `kit` LSTM cells alone: the 200-unit model's took longer than most of the
    1504-unit model's (the host paces each step), so a least-squares line has a negative slope, and with
    no GPU-paced engine of the workload beside them no host-paced rate either: no rate is written."""
    from fixtures.modules import load_script

    script = load_script("fit_estimates")
    parts = REPO / "references" / "h100" / "parts"
    recs = [r for part in ("lstm-kit-a", "lstm-kit-b") for run in parts.glob(f"{part}/2*/") for r in script.records(run)]
    assert len(recs) == 10
    rates, _ = script.fit(recs)
    assert "lstm/kit" not in rates
    monkeypatch.setattr("sys.argv", ["fit_estimates.py", "--out", str(tmp_path / "cells.json"),
                                     *map(str, parts.glob("lstm-kit-?/2*/"))])
    script.main()
    assert "lstm/kit: 10 cells whose time does not grow with their FLOPs: no rate of this form fits" in capsys.readouterr().out


def test_the_gpu_estimate_of_each_measured_run_is_within_a_third_of_its_seconds():
    """Each run behind the GPU rates, estimated as the plan estimates it (its measured cells, their
    batch search included), within 0.67-1.5x of its cells' measured seconds. The rates fitted to the
    reference of 2026-11-30 estimated these runs at 0.25-0.80x."""
    from fixtures.modules import load_script

    ratios = load_script("fit_estimates").estimate_ratio(json.loads(GPU_RECORDS.read_text())["records"])
    assert len(ratios) >= 4
    for run, ratio in ratios.items():
        assert 0.67 <= ratio <= 1.5, (run, ratio)


def test_a_cell_with_the_batch_search_costs_the_search_on_a_gpu_only():
    from kit.results.schema import CellSpec
    from kit.runner.plan import estimate_seconds

    params = {"batch_size": 256, "image_size": 32, "epochs": 1, "steps": 100}

    def search_s(model, device="cuda", mode="throughput", **changed):
        plain = CellSpec("cifar", model, "fp32", "torch", {**params, **changed})
        search = CellSpec("cifar", model, "fp32", "torch", {**params, **changed, "find_max_batch": True})
        return (estimate_seconds(search, 3, device=device, mode=mode)
                - estimate_seconds(plain, 3, device=device, mode=mode))

    assert search_s("resnet18", device="cpu") == 0
    # the search grows with the model, as measured (7-19 s for ResNet-18, 30-116 s for ResNet-152)
    assert 5 < search_s("resnet18") < 20 and 40 < search_s("resnet152") < 100
    assert search_s("resnet152") / search_s("resnet18") == pytest.approx(
        models.train_flops_per_image("resnet152", 32) / models.train_flops_per_image("resnet18", 32))
    # and not with what the run trains: its tries are its own steps, up to the data set's size
    for changed in ({"steps": 4}, {"steps": 1000}, {"batch_size": 32}, {"epochs": 10}):
        assert search_s("resnet50", **changed) == pytest.approx(search_s("resnet50")), changed
    assert search_s("resnet50", mode="convergence", epochs=10) == pytest.approx(search_s("resnet50"))


def test_a_mode_whose_package_is_missing_here_counts_as_skipped_on_a_gpu(monkeypatch):
    """Apex's cells are skipped in a fraction of a second where Apex is not installed (as on the
    reference parts' machines), so the plan counts them so; where it is, they count as whole cells."""
    import kit.runner.plan as plan
    from kit.results.schema import CellSpec

    params = {"batch_size": 256, "image_size": 32, "epochs": 1, "steps": 100}
    apex = CellSpec("cifar", "resnet18", "apex-o1", "torch", params)
    amp = CellSpec("cifar", "resnet18", "amp-fp16", "torch", params)
    monkeypatch.setattr(plan, "installed", lambda package: package != "apex")
    assert plan.estimate_seconds(apex, 3, device="cuda") == estimates.SKIPPED_CELL_S
    assert plan.estimate_seconds(amp, 3, device="cuda") > 20
    monkeypatch.setattr(plan, "installed", lambda package: True)
    assert plan.estimate_seconds(apex, 3, device="cuda") == plan.estimate_seconds(amp, 3, device="cuda")


def test_installed_finds_a_package_without_importing_it(monkeypatch):
    import sys

    from kit.env.record import installed

    monkeypatch.delitem(sys.modules, "tabnanny", raising=False)  # a standard module nothing here imports
    assert installed("tabnanny") and "tabnanny" not in sys.modules
    assert not installed("no_such_package_kit_test")


def _parts_records(*parts: str) -> list:
    from fixtures.modules import load_script

    script = load_script("fit_estimates")
    runs = REPO / "references" / "h100" / "parts"
    return [r for part in parts for run in runs.glob(f"{part}/2*/") for r in script.records(run)]


def test_the_kit_lstm_engine_is_estimated_at_its_hosts_pace_per_step():
    """Its host sets the pace of each step: the rate the fit gives it is the graphed engine's device rate and
    a time per step, and a repeat of the smaller model, with more steps, is estimated longer than one of the
    larger model, as the H100 parts measured (the FLOPs alone said the opposite, by 12x)."""
    from kit.results.schema import CellSpec
    from kit.runner.plan import estimate_seconds

    rate = estimates.RATES[("cuda", "lstm/kit")]
    assert rate.step_s > 0 and rate[:2] == estimates.RATES[("cuda", "lstm/graphed")][:2]
    small, large = (CellSpec("lstm", p, "amp-fp16", "kit", {"preset": p, "epochs": 1}) for p in ("apex-2018", "tensor-core"))
    assert estimate_seconds(small, 3) > estimate_seconds(large, 3)
    measured = {r["cell_id"]: r["wall_s"] for r in _parts_records("lstm-kit-a", "lstm-kit-b")}
    assert measured["lstm/apex-2018/amp-fp16/kit"] > measured["lstm/tensor-core/amp-fp16/kit"]
    # a host-paced step costs the same on the CPU's estimate as before: no rate there counts steps
    assert estimates.RATES[("cpu", "lstm/kit")].step_s == 0


def test_the_time_limit_would_not_start_the_kit_lstm_cell_it_cut_in_the_h100_parts():
    """The H100 part lstm-kit-a ran under --time-limit 356 (its console log, references/h100/parts/logs/
    console-20261206-152446.log): four cells finished, and the fifth (fp16-master) started 318.5 s after the
    run did, with at most 37.5 s left, on an estimate of 15 s; the limit cut it. Replayed with today's
    estimates (kit.runner.execute starts a cell only if its estimate fits the time left), the four cells
    still start and the fifth does not."""
    from kit.runner.plan import estimate_seconds

    from fixtures.modules import load_script

    script = load_script("fit_estimates")
    run = next((REPO / "references" / "h100" / "parts" / "lstm-kit-a").glob("2*/"))
    events = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines() if line.strip()]
    t0 = next(e["time"] for e in events if e["event"] == "run_start")
    first_session = events[:next(i for i, e in enumerate(events) if e["event"] == "run_end")]
    starts = [(e["cell_id"], e["time"] - t0) for e in first_session if e["event"] == "cell_start"]
    specs = {script.spec_of(r).precision: script.spec_of(r) for r in script.records(run)}
    assert [c.split("/")[2] for c, _ in starts] == ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16-master"]
    for cell, at in starts:
        fits = estimate_seconds(specs[cell.split("/")[2]], 3, device="cuda") <= 356 - at
        assert fits == (cell != "lstm/apex-2018/fp16-master/kit"), (cell, at)

