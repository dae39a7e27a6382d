"""`kit fidelity apex` runs the original and the kit in interleaved rounds, so that a drift of the machine
reaches both alike; each side's figure is the median over rounds. The runs themselves need a GPU: here
they are stand-ins that record when they ran and return set rates (the bookkeeping is under test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.originals import apex_archive, missing_apex
from kit.runner import fidelity

ROOT = Path(__file__).resolve().parents[1]
APEX = apex_archive("241dd6c4")


def test_rounds_alternate_which_side_runs_first():
    calls = []

    def original(label, r):
        calls.append(("original", label, r))
        return {"tokens_per_s": 100.0}

    def kit(r):
        calls.append(("kit", None, r))
        return {"fp32": 100.0}

    got = fidelity.measure_rounds(4, ["a", "b"], original, kit)
    assert calls == [("original", "a", 0), ("original", "b", 0), ("kit", None, 0),
                     ("kit", None, 1), ("original", "a", 1), ("original", "b", 1),
                     ("original", "a", 2), ("original", "b", 2), ("kit", None, 2),
                     ("kit", None, 3), ("original", "a", 3), ("original", "b", 3)]
    assert [tuple(x) for x in got["order"]] == calls
    assert len(got["original"]["a"]) == 4 and got["kit"]["fp32"] == [100.0] * 4


def test_a_drift_during_the_measurement_reaches_both_sides_alike():
    """The machine slows down by 3% per run: back to back (all originals, then the kit) the kit would look
    9% slower than the same code; interleaved, the two medians stay within the 5% of the fidelity check."""
    step = {"n": 0}

    def speed():
        step["n"] += 1
        return 1000.0 * (0.97 ** step["n"])

    got = fidelity.measure_rounds(3, ["x"], lambda label, r: {"tokens_per_s": speed()}, lambda r: {"fp32": speed()})
    o = fidelity.median_or_none([x["tokens_per_s"] for x in got["original"]["x"]])
    k = fidelity.median_or_none(got["kit"]["fp32"])
    assert 0.95 <= k / o <= 1.05
    step["n"] = 0
    back_to_back_orig = [speed() for _ in range(3)]
    back_to_back_kit = [speed() for _ in range(3)]
    assert fidelity.median_or_none(back_to_back_kit) / fidelity.median_or_none(back_to_back_orig) < 0.95


@pytest.mark.skipif(not APEX.is_file(), reason=missing_apex("241dd6c4"))
def test_the_report_has_each_sides_median_over_rounds_and_each_rounds_ratio(tmp_path, monkeypatch):
    utils = tmp_path / "apex-25.01"
    (utils / "apex" / "fp16_utils").mkdir(parents=True)
    orig_rates = {"fp32 (TF32 off)": iter([100.0, 90.0, 110.0]), "--fp16": iter([200.0, 210.0, 190.0])}
    kit_rates = iter([{"fp32": 101.0, "fp16-master": 205.0}, {"fp32": 92.0, "fp16-master": 200.0},
                      {"fp32": 108.0, "fp16-master": 195.0}])
    seen = []

    def original_once(script, corpus, preset, fp16, log, max_batches):
        label = "--fp16" if fp16 else "fp32 (TF32 off)"
        seen.append(("original", label, log.name))
        return {"tokens_per_s": next(orig_rates[label]), "ms_per_batch_windows": [1.0, 1.0], "command": ["main.py"]}

    def run_kit(preset, precisions, results, repeats, max_batches, data, log, engine="kit"):
        seen.append((engine, tuple(precisions), log.name, repeats))
        # the graphed engine's cells, once: fp32 10x the kit's (host-bound), fp16-master about the same
        rates = {"fp32": 1000.0, "fp16-master": 210.0} if engine == "graphed" else next(kit_rates)
        cells = {m: {"status": "ok", "summary": {"throughput_items_per_s": {"median": rates[m]}}} for m in precisions}
        return cells, {"device": "Test GPU", "torch": "0.0"}

    monkeypatch.setattr(fidelity, "_run_original_once", original_once)
    monkeypatch.setattr(fidelity, "run_kit", run_kit)
    made = []
    real_mkdtemp = fidelity.tempfile.mkdtemp
    monkeypatch.setattr(fidelity.tempfile, "mkdtemp", lambda **kw: made.append(real_mkdtemp(dir=tmp_path, **kw)) or made[-1])
    report = fidelity.run_apex_fidelity(APEX, utils, presets=["apex-2018"], settings=["strict", "fp16"], runs=3,
                                        max_runs=3, repeats=1, out=tmp_path / "out", progress=lambda text: None)
    assert [s[0] for s in seen] == ["original", "original", "kit", "kit", "original", "original", "original", "original",
                                    "kit", "graphed"]
    assert seen[2] == ("kit", ("fp32", "fp16-master"), "kit-apex-2018.round0.log", 1)
    assert seen[0][2] == "original-apex-2018-fp32-False.run0.log"
    strict, fp16 = report["rows"]
    assert strict["original_tokens_per_s"] == 100.0 and strict["kit_tokens_per_s"] == 101.0
    assert strict["kit_over_original"] == pytest.approx(1.01)
    assert strict["kit_over_original_by_round"] == pytest.approx([1.01, 92 / 90, 108 / 110])
    assert fp16["original_tokens_per_s"] == 200.0 and fp16["kit_tokens_per_s"] == 200.0
    saved = json.loads((tmp_path / "out" / "fidelity.json").read_text())
    assert saved["rows"] == json.loads(json.dumps(report["rows"])) and "round" in saved["method"]
    assert len(made) == 1 and not Path(made[0]).exists(), "the work folder (example copy, corpus) is removed"
    # three rounds were the limit here; fp32's rounds spread more than ±3% allows: the CI says so
    assert strict["rounds"] == 3 and strict["stopped"] == "round limit"
    assert strict["ci_within_target"] is False and strict["ci_half_width_rel"] > 0.03
    low, high = strict["kit_over_original_ci95"]
    assert low < 1.0 < high
    assert strict["host_bound"] is True and strict["gpu_busy_estimate"] == pytest.approx(0.101)
    assert fp16["host_bound"] is False
    table = fidelity.format_table(report)
    assert "apex-2018: 3 rounds: the round limit, a CI still wider than ±3%" in table
    assert (f"| apex-2018 | fp32 (TF32 off) | fp32 | 100 | 101 | 1.010 | [{low:.3f}, {high:.3f}] | 1.010, 1.022, 0.982 "
            "| host-bound (GPU busy ~10%)") in table


def test_the_kit_runs_results_and_bundle_are_kept_beside_its_log(tmp_path, monkeypatch):
    """run_kit copies the run's results.json and bundle out of the work folder, which is removed later."""
    import subprocess

    results = tmp_path / "work" / "kit-apex-2018-round0"

    def fake_kit_run(cmd, **kw):
        run = results / "20261201-000000-vm-lstm-0000"
        run.mkdir(parents=True)
        cell = {"model": "apex-2018", "precision": "fp32", "status": "ok",
                "summary": {"throughput_items_per_s": {"median": 123.0}}}
        (run / "results.json").write_text(json.dumps({"cells": [cell], "environment": {"packages": {"torch": "x"}}}))
        (results / "vm_Test_native_20261201-000000.tar.gz").write_bytes(b"bundle")
        return subprocess.CompletedProcess(cmd, 0, "ok\n", "")

    monkeypatch.setattr(fidelity.subprocess, "run", fake_kit_run)
    out = tmp_path / "out"
    out.mkdir()
    cells, facts = fidelity.run_kit("apex-2018", ["fp32"], results, 1, 10, "synthetic", out / "kit-apex-2018.round0.log")
    assert fidelity.kit_rate(cells["fp32"]) == 123.0 and facts["torch"] == "x"
    assert (out / "kit-apex-2018.round0.results.json").is_file()
    assert (out / "kit-apex-2018.round0.tar.gz").read_bytes() == b"bundle"
    assert "--repeats 1" in (out / "kit-apex-2018.round0.log").read_text()


# ---------------------------------------------------------------- the stopping rule (injected round timings)
def _rounds(original_rates: list, kit_rates: list, runs: int = 3, max_runs: int = 8):
    """measure_rounds over set per-round rates (no timing: the stand-ins return the given figures)."""
    o, k = iter(original_rates), iter(kit_rates)
    return fidelity.measure_rounds(runs, ["x"], lambda label, r: {"tokens_per_s": next(o)},
                                   lambda r: {"fp32": next(k)}, max_runs=max_runs,
                                   stop=fidelity.ci_stop([("x", "fp32")], 0.03))


def test_steady_rounds_stop_at_the_minimum_once_the_ci_is_within_3_percent():
    got = _rounds([100.0, 100.5, 99.5, 100.0], [101.0, 100.8, 101.2, 101.0])
    assert got["rounds"] == 3 and got["stopped"] == "ci"
    est = fidelity.ratio_with_ci(got["kit"]["fp32"], [x["tokens_per_s"] for x in got["original"]["x"]])
    assert est["ci_half_width_rel"] <= 0.03 and est["ci_low"] < est["ratio"] < est["ci_high"]


def test_noisy_rounds_go_on_until_the_round_limit_and_say_so():
    noisy = [70.0, 117.0, 90.0, 110.0, 75.0, 120.0, 85.0, 105.0, 999.0]
    got = _rounds(noisy, [100.0] * 9, max_runs=6)
    assert got["rounds"] == 6 and got["stopped"] == "round limit"
    assert len(got["original"]["x"]) == len(got["kit"]["fp32"]) == 6


def test_rounds_stop_at_the_first_round_whose_ci_is_within_the_target():
    """Two noisy rounds, then steady ones: the rule stops at the first round where the CI (of all rounds so
    far) is within ±3%, not before and not after."""
    original = [90.0, 110.0] + [100.0] * 20
    kit = [100.0] * 22
    got = _rounds(original, kit, max_runs=20)
    n = got["rounds"]
    assert got["stopped"] == "ci" and 3 < n < 20
    half = lambda m: fidelity.ratio_with_ci(kit[:m], original[:m])["ci_half_width_rel"]  # noqa: E731
    assert half(n) <= 0.03 < half(n - 1)


def test_without_a_rule_the_rounds_are_exactly_the_given_number():
    o, k = iter([1.0] * 5), iter([1.0] * 5)
    got = fidelity.measure_rounds(2, ["x"], lambda label, r: {"tokens_per_s": next(o)}, lambda r: {"fp32": next(k)})
    assert got["rounds"] == 2 and got["stopped"] is None


def test_one_round_has_no_ci_and_an_unbounded_one_is_not_within_the_target():
    assert fidelity.ratio_with_ci([100.0], [100.0])["ci_half_width_rel"] is None
    stop = fidelity.ci_stop([("x", "fp32")], 0.03)
    assert stop({"x": [{"tokens_per_s": 100.0}]}, {"fp32": [100.0]}) is False


def test_a_kit_cell_far_below_the_graphed_engines_rate_is_named_host_bound():
    assert fidelity.host_bound(100_000.0, 320_000.0) == {"gpu_busy_estimate": pytest.approx(0.3125), "host_bound": True}
    assert fidelity.host_bound(54_000.0, 56_000.0)["host_bound"] is False
    assert fidelity.host_bound(None, 56_000.0) == {"gpu_busy_estimate": None, "host_bound": None}
    row = {"host_bound": True, "gpu_busy_estimate": 0.31}
    assert fidelity.verdict_text(row).startswith("host-bound (GPU busy ~31%)")


@pytest.mark.parametrize("rounds, cell", [(1, "n/a (1 round)"),
                                          (3, "[CI unbounded: the original's repeats vary too much]")])
def test_a_kit_cell_without_an_interval_says_why_in_the_table(rounds, cell):
    row = {"preset": "apex-2018", "original": "fp32 (TF32 off)", "kit_cell": "fp32", "original_tokens_per_s": 100.0,
           "kit_tokens_per_s": 101.0, "kit_over_original": 1.01, "kit_over_original_ci95": [None, None],
           "kit_over_original_by_round": [1.01] * rounds, "rounds": rounds}
    table = fidelity.format_table({"device": "Test GPU", "torch": "0.0", "corpus": {"source": "fixture"}, "rows": [row]})
    assert f"| 1.010 | {cell} |" in table and "| unbounded |" not in table
