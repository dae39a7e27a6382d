"""`kit compare` end to end on bundles "from two machines" (fixture data):
every output format, the baseline, missing and skipped cells, comparability
warnings and the --fail-if-slower guard."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from fixtures.cli import run_main
from fixtures.results.factory import make_cell, make_converged_cell, make_env, make_results, make_run_dir, standard_cells
from kit.report.export import export_run
from kit.compare.engine import compare_paths
from kit.compare.gate import check_gate
from kit.errors import RegressionDetected
from kit.results.schema import CellResult
from kit.results.stats import summarise_repeats


def _bundle(root: Path, name: str, cells: list[dict], **env) -> Path:
    res = make_results(cells, make_env(**env), run_id=f"FIXTURE-{name}")
    return export_run(make_run_dir(root / "runs", res), root / "bundles")


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> tuple[Path, Path]:
    """A: the baseline. B: 25% faster everywhere, resnet50/amp-bf16 not run,
    apex-o1 skipped on A but measured on B."""
    root = tmp_path_factory.mktemp("cmp")
    a_cells = standard_cells() + [make_cell("resnet18", "apex-o1", status="skipped", reason="Apex not installed (fixture)")]
    b_cells = [c for c in standard_cells(speed=1.25) if c["cell_id"] != "cifar/resnet50/amp-bf16/torch"]
    b_cells.append(make_cell("resnet18", "apex-o1", epoch_s=[6.0, 6.1, 5.9]))
    a = _bundle(root, "a", a_cells)
    b = _bundle(root, "b", b_cells, host="fixture-host-b", gpu="Fixture GPU B")
    return a, b


def _run_cli(args: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    return run_main(args, capsys, monkeypatch)


def test_two_bundles_compare_as_rich_tables(two, capsys, monkeypatch):
    a, b = two
    code, out, err = _run_cli(["compare", str(a), str(b)], capsys, monkeypatch)
    assert code == 0, err
    assert "fixture-host-a" in out and "fixture-host-b" in out and "(baseline)" in out
    assert "cifar/resnet18/amp-fp16/torch" in out
    assert "Fieller" in out and "Welch" in out
    assert "1.250×" in out and "faster" in out
    # cells not compared are counted by reason; --verbose lists each
    assert "Not compared: 2 cells" in out and "--verbose" in out
    assert "1 cell: missing in B" in out and "1 cell: skipped in A (Apex not installed (fixture))" in out
    assert "cannot compare cifar/resnet50/amp-bf16/torch" not in out
    code, out, err = _run_cli(["compare", str(a), str(b), "--verbose"], capsys, monkeypatch)
    assert code == 0, err
    assert "cannot compare cifar/resnet50/amp-bf16/torch: missing in B" in out
    assert "cannot compare cifar/resnet18/apex-o1/torch: skipped in A (Apex not installed (fixture))" in out


def test_not_compared_list_is_summarised_by_reason(tmp_path, capsys, monkeypatch):
    a = _bundle(tmp_path, "a", standard_cells())
    b = _bundle(tmp_path, "b", standard_cells(models=("resnet18",)), host="fixture-host-b")
    code, out, _ = _run_cli(["compare", str(a), str(b), "--markdown", "-"], capsys, monkeypatch)
    assert code == 0
    lines = out[out.index("## Not compared"):].splitlines()
    assert lines[0].startswith("## Not compared: 3 cells") and "- 3 cells: missing in B" in lines
    assert not any(line.startswith("- cannot compare") for line in lines)
    data = json.loads(_run_cli(["compare", str(a), str(b), "--json", "-"], capsys, monkeypatch)[1])
    assert data["not_compared_by_reason"] == [{"reason": "missing in B", "cells": 3}]
    assert len(data["not_comparable"]) == 3


def test_two_copies_of_one_run_are_one_input_and_a_changed_copy_is_flagged_as_the_same_run(two, tmp_path, capsys, monkeypatch):
    import json as _json

    from fixtures.results.factory import bundle_members, write_bundle
    from kit.errors import UsageError

    a, _ = two
    copy = tmp_path / ("copy-" + a.name)
    copy.write_bytes(a.read_bytes())
    with pytest.raises(UsageError, match="counted once. Fewer than two different runs remain"):
        compare_paths([a, copy])
    files = bundle_members(a)
    res = _json.loads(files["results.json"])
    res["cells"] = res["cells"][:-1]
    files["results.json"] = _json.dumps(res).encode()
    changed = write_bundle(tmp_path / ("changed-" + a.name), files)
    cmp = compare_paths([a, changed])
    [same] = [w for w in cmp.warnings if w.kind == "same run"]
    assert same is cmp.warnings[0] and same.severity == "high"
    assert "A (" in same.message and "B (changed-" in same.message and "FIXTURE-a" in same.message
    code, out, _ = _run_cli(["compare", str(a), str(changed)], capsys, monkeypatch)
    assert code == 0 and "are the same run" in out
    # two different runs get no such warning
    assert not [w for w in compare_paths(list(two)).warnings if w.kind == "same run"]


def test_csv_has_one_line_per_cell_and_machine_with_ratios(two, capsys, monkeypatch):
    a, b = two
    code, out, err = _run_cli(["compare", str(a), str(b), "--csv", "-"], capsys, monkeypatch)
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    cells = {r["cell_id"] for r in rows}
    assert len(cells) == 5 and "cifar/resnet50/amp-bf16/torch" not in cells
    assert len(rows) == 10
    b18 = next(r for r in rows if r["cell_id"] == "cifar/resnet18/fp32/torch" and r["machine"] == "B")
    assert float(b18["vs_baseline"]) == pytest.approx(1.25, rel=1e-3)
    assert b18["vs_baseline_verdict"] == "significant"
    assert float(b18["vs_baseline_mean_ratio_ci95_low"]) < 1.25 < float(b18["vs_baseline_mean_ratio_ci95_high"])
    assert b18["vs_baseline_median_outside_ci"] == "no"
    assert {"epoch_time_cv", "throughput_cv"} <= set(b18) and "epoch_s_cv" not in b18
    a16 = next(r for r in rows if r["cell_id"] == "cifar/resnet18/amp-fp16/torch" and r["machine"] == "A")
    assert float(a16["speedup_vs_fp32"]) == pytest.approx(1.6, rel=1e-3)
    assert a16["vs_baseline"] == "" and a16["baseline"] == "yes"
    # warnings and the not-compared list go to stderr, keeping stdout pure CSV
    assert "missing in B" in err


def test_json_output_is_complete(two, capsys, monkeypatch):
    a, b = two
    code, out, _ = _run_cli(["compare", str(a), str(b), "--json", "-"], capsys, monkeypatch)
    assert code == 0
    data = json.loads(out)
    assert "Fieller" in data["method"] and data["baseline"] == "A"
    assert [s["machine"] for s in data["sources"]] == ["fixture-host-a", "fixture-host-b"]
    row = next(r for r in data["rows"] if r["cell_id"] == "cifar/resnet50/amp-fp16/torch")
    est = row["machines"]["B"]["throughput_vs_baseline"]
    assert est["ratio"] == pytest.approx(1.25, rel=1e-3) and est["verdict"] == "significant"
    assert any("missing in B" in x for x in data["not_comparable"])
    machine = row["machines"]["B"]
    assert machine["throughput_cv"] == pytest.approx(machine["throughput_items_per_s"]["cv"])
    assert machine["epoch_time_cv"] == pytest.approx(machine["epoch_seconds"]["cv"])


def test_markdown_output_has_the_three_tables(two, capsys, monkeypatch):
    a, b = two
    code, out, _ = _run_cli(["compare", str(a), str(b), "--markdown", "-"], capsys, monkeypatch)
    assert code == 0
    assert "## Time per epoch and throughput" in out
    assert "## Speedup over fp32 on each machine" in out
    assert "## Throughput relative to A (baseline" in out
    assert "| cifar/resnet18/fp32/torch |" in out


def test_html_page_is_self_contained_with_charts(two, tmp_path, capsys, monkeypatch):
    a, b = two
    page = tmp_path / "cmp.html"
    code, _, _ = _run_cli(["compare", str(a), str(b), "--html", str(page)], capsys, monkeypatch)
    assert code == 0
    html = page.read_text()
    assert html.count("<svg") >= 3 and 'class="bar"' in html and 'class="errorbar"' in html
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "Throughput relative to A" in html


@pytest.mark.parametrize("inputs, said", [(1, "there is only 1 input"), (2, "there are only 2 inputs")])
def test_a_baseline_past_the_last_input_counts_them_in_words(two, capsys, monkeypatch, inputs, said):
    paths = [str(p) for p in two][:inputs]
    code, out, err = _run_cli(["compare", *paths, "--baseline", "3"], capsys, monkeypatch)
    assert code == 2 and out == ""
    assert err.strip() == f"error: --baseline 3: {said} (count from 1)."


def test_baseline_option_reorders_and_fail_if_slower_exits_9(two, capsys, monkeypatch):
    a, b = two
    # With B as the baseline, A is 20% slower (1/1.25) on every shared cell.
    code, _, err = _run_cli(["compare", str(a), str(b), "--baseline", "2", "--fail-if-slower", "10"], capsys, monkeypatch)
    assert code == 9
    assert "slower than the baseline by more than 10%" in err and "20.0% slower" in err
    code, _, _ = _run_cli(["compare", str(a), str(b), "--baseline", str(b), "--fail-if-slower", "25"], capsys, monkeypatch)
    assert code == 0
    code, _, _ = _run_cli(["compare", str(a), str(b), "--fail-if-slower", "0"], capsys, monkeypatch)
    assert code == 0  # B is faster than the baseline A


def test_noise_is_not_a_regression(tmp_path):
    # C is 3% slower on average but its repeats overlap A's: not significant, so no failure.
    a = _bundle(tmp_path, "a", [make_cell("resnet18", "fp32", epoch_s=[10.0, 10.8, 9.3])])
    c = _bundle(tmp_path, "c", [make_cell("resnet18", "fp32", epoch_s=[10.6, 9.6, 10.7])], host="fixture-host-c")
    cmp = compare_paths([a, c])
    est = cmp.rows[0].machines[1].vs_baseline
    assert est.ratio < 0.99 and est.verdict == "not significant"
    check_gate(cmp, 1.0)  # does not raise
    slow = _bundle(tmp_path, "s", [make_cell("resnet18", "fp32", epoch_s=[13.0, 13.1, 12.9])], host="fixture-host-s")
    with pytest.raises(RegressionDetected):
        check_gate(compare_paths([a, slow]), 10.0)


def test_comparability_warnings_are_ranked_by_severity(tmp_path):
    a = _bundle(tmp_path, "a", standard_cells(models=("resnet18",)))
    b_cells = standard_cells(models=("resnet18",), batch_size=512, source="real")
    b_cells[0] = make_cell("resnet18", "fp32", epoch_s=[10.0, 10.1, 9.9], batch_size=512, source="real", throttled=True)
    b = _bundle(tmp_path, "b", b_cells, host="fixture-host-b", stack="cuda10", torch="1.4.0", data="real")
    cmp = compare_paths([a, b])
    kinds = [w.kind for w in cmp.warnings]
    assert kinds[0] == "stack"
    for kind in ("libraries", "data", "params", "throttled"):
        assert kind in kinds
    assert kinds.index("libraries") < kinds.index("data") < kinds.index("params") < kinds.index("throttled")
    text = " ".join(w.message for w in cmp.warnings)
    assert "A cuda12, B cuda10" in text and "2.11.0" in text and "1.4.0" in text and "batch_size" in text
    flags = cmp.rows[0].machines[1].flags
    assert "throttled" in flags


def test_high_cv_and_single_repeat_are_marked(tmp_path, capsys, monkeypatch):
    a = _bundle(tmp_path, "a", [make_cell("resnet18", "fp32", epoch_s=[10.0, 13.0, 8.0])])
    b = _bundle(tmp_path, "b", [make_cell("resnet18", "fp32", epoch_s=[9.0])], host="fixture-host-b")
    cmp = compare_paths([a, b])
    assert any(f.startswith("high epoch-time CV") for f in cmp.rows[0].machines[0].flags)
    assert cmp.rows[0].machines[1].vs_baseline.verdict == "n/a (1 repeat)"
    code, out, _ = _run_cli(["compare", str(a), str(b)], capsys, monkeypatch)
    assert code == 0 and "n/a (1 repeat)" in out and "high epoch-time CV" in out


def test_every_cv_in_a_compare_cell_says_whose_it_is(tmp_path, capsys, monkeypatch):
    """A cell with steady throughput but one slow first epoch shows two CVs: each is named."""
    slow_first = make_cell("resnet18", "fp32", epoch_s=[30.0, 10.0, 10.1])
    for rep_, thr in zip(slow_first["repeats"], (5000.0, 5001.0, 4999.0)):
        rep_["throughput_items_per_s"] = thr
    slow_first["summary"] = summarise_repeats(slow_first["repeats"])
    a = _bundle(tmp_path, "a", [slow_first])
    b = _bundle(tmp_path, "b", [make_cell("resnet18", "fp32", epoch_s=[10.0, 10.1, 9.9])], host="fixture-host-b")
    for args in ([], ["--markdown", "-"]):
        code, out, _ = _run_cli(["compare", str(a), str(b), *args], capsys, monkeypatch)
        assert code == 0
        assert "throughput CV 0.0%" in out and "high epoch-time CV" in out
        assert " cv " not in out.lower().replace("throughput cv", "").replace("epoch-time cv", "")
    page = tmp_path / "c.html"
    assert _run_cli(["compare", str(a), str(b), "--html", str(page)], capsys, monkeypatch)[0] == 0
    html = page.read_text()
    assert "throughput CV 0.0%" in html and "high epoch-time CV" in html


def test_epoch_times_of_repeats_that_warmed_up_differently_are_not_flagged_as_noise():
    """The GPT suite's first repeat warms up (and compiles) for the preset's warm-up steps, the
    later ones for one step: their epoch times differ by design (the H200 trial: 10.4 s, 8.2 s,
    8.2 s at 62,283 / 62,281 / 62,287 tokens/s). Only the steady throughput's CV may flag
    them; the same epoch times after the same warm-up still do."""
    from kit.compare.measures import high_cv_flags

    def cell(warmups, throughputs):
        c = make_cell("gpt2-small", "fp32", engine="kit", workload="gpt", epoch_s=[10.43, 8.16, 8.16])
        for rep_, w, thr in zip(c["repeats"], warmups, throughputs):
            rep_["warmup_steps"], rep_["throughput_items_per_s"] = w, thr
        c["summary"] = summarise_repeats(c["repeats"])
        return CellResult.from_dict(c)

    assert high_cv_flags(cell([20, 1, 1], [62283.0, 62281.0, 62287.0])) == []
    assert high_cv_flags(cell([20, 20, 20], [62283.0, 62281.0, 62287.0])) == ["high epoch-time CV 15%"]
    assert high_cv_flags(cell([20, 1, 1], [80000.0, 62281.0, 50000.0])) == ["high throughput CV 24%"]


def test_run_folders_and_results_files_compare_too(tmp_path):
    res_a = make_results(standard_cells(), make_env(), run_id="FIXTURE-rf-a")
    run_a = make_run_dir(tmp_path / "runs", res_a)
    res_b = make_results(standard_cells(speed=0.5), make_env(host="fixture-host-b"), run_id="FIXTURE-rf-b")
    results_b = tmp_path / "b.results.json"
    results_b.write_text(json.dumps(res_b))
    cmp = compare_paths([run_a, results_b])
    assert [s.kind for s in cmp.sources] == ["run folder", "results file"]
    assert cmp.rows[0].machines[1].vs_baseline.ratio == pytest.approx(0.5, rel=1e-3)


def test_the_stored_fixture_results_file_loads():
    path = Path(__file__).parent / "fixtures" / "results" / "fixture-host-a.results.json"
    cmp = compare_paths([path, path.with_name("fixture-host-b.results.json")])
    assert cmp.rows and cmp.sources[0].results.run_id.startswith("FIXTURE")


def test_ten_bundles_compare(tmp_path):
    # Not a timing test; `docs/bundles.md` records how long this takes.
    bundles = [
        _bundle(tmp_path, f"m{i}", standard_cells(speed=1 + i / 10, models=("resnet18", "resnet50", "resnet101")),
                host=f"fixture-host-{i}")
        for i in range(10)
    ]
    cmp = compare_paths(bundles)
    assert [s.label for s in cmp.sources] == list("ABCDEFGHIJ")
    assert len(cmp.rows) == 9 and all(len(r.machines) == 10 for r in cmp.rows)


def test_compare_needs_two_inputs(two, capsys, monkeypatch):
    code, _, err = _run_cli(["compare", str(two[0])], capsys, monkeypatch)
    assert code == 2 and "at least two inputs" in err


def test_bad_bundle_in_compare_exits_5(two, tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.tar.gz"
    bad.write_text("not a bundle")
    code, _, err = _run_cli(["compare", str(two[0]), str(bad)], capsys, monkeypatch)
    assert code == 5 and "not a gzip file" in err


@pytest.mark.parametrize("where", ["under-a-file", "a-folder", "proc"])
def test_an_unusable_html_path_is_a_one_line_usage_error_and_writes_nothing(two, tmp_path, capsys, monkeypatch, where):
    a, b = two
    plain = tmp_path / "hostname"
    plain.write_text("x\n")
    target = {"under-a-file": plain / "x.html", "a-folder": tmp_path, "proc": Path("/proc/x.html")}[where]
    if where == "proc" and not Path("/proc/self").exists():
        pytest.skip("no /proc here")
    before = sorted(tmp_path.rglob("*"))
    code, out, err = _run_cli(["compare", str(a), str(b), "--html", str(target)], capsys, monkeypatch)
    assert code == 2
    assert "Traceback" not in err and err.startswith(f"error: --html {target}:")
    assert out == ""  # checked before any work: no tables printed for a run that then fails
    assert sorted(tmp_path.rglob("*")) == before and plain.read_text() == "x\n"


def test_html_into_a_new_folder_is_written_whole(two, tmp_path, capsys, monkeypatch):
    a, b = two
    page = tmp_path / "new" / "cmp.html"
    code, _, err = _run_cli(["compare", str(a), str(b), "--html", str(page)], capsys, monkeypatch)
    assert code == 0, err
    assert page.read_text().rstrip().endswith("</html>")
    assert [p.name for p in page.parent.iterdir()] == ["cmp.html"]  # no temporary file left


def test_a_speedup_outside_its_printed_interval_is_marked_and_explained(tmp_path, capsys, monkeypatch):
    skewed = [make_cell("resnet18", "fp32", epoch_s=[20.0, 20.02, 19.98] * 7),
              make_cell("resnet18", "amp-fp16", epoch_s=[10.0] * 15 + [14.0] * 6)]
    a = _bundle(tmp_path, "a", skewed)
    b = _bundle(tmp_path, "b", skewed, host="fixture-host-b")
    est = compare_paths([a, b]).rows[1].machines[0].vs_fp32
    assert est.ratio == pytest.approx(2.0, rel=1e-3) and est.outside_ci
    for args in ([], ["--markdown", "-"]):
        code, out, _ = _run_cli(["compare", str(a), str(b), *args], capsys, monkeypatch)
        assert code == 0 and "2.00×† [" in out
        assert "the ratio of medians lies outside the 95% CI of the ratio of means" in re.sub(r"\s+", " ", out)
    data = json.loads(_run_cli(["compare", str(a), str(b), "--json", "-"], capsys, monkeypatch)[1])
    assert data["rows"][1]["machines"]["A"]["speedup_vs_fp32"]["median_outside_ci"] is True


def _converged_bundle(root: Path, name: str, finals: dict, **env) -> Path:
    cells = [make_converged_cell(model, precision, workload, engine, values)
             for (workload, model, precision, engine), values in finals.items()]
    res = make_results(cells, make_env(data="real", **env), run_id=f"FIXTURE-{name}", data="real")
    res["config"]["mode"] = "convergence"
    return export_run(make_run_dir(root / "runs", res), root / "bundles")


def test_convergence_runs_compare_their_final_quality_and_parity_verdicts(tmp_path, capsys, monkeypatch):
    """Two machines' convergence runs: each cell's final metric, this machine's parity verdict (from
    kit.results.derive.parity, as `kit bundle show` prints it) and the gap to the baseline machine's
    same cell, in every output; a throughput comparison has no such table."""
    gpt, cifar = ("gpt", "gpt2-small"), ("cifar", "resnet18")
    a = _converged_bundle(tmp_path / "a", "a", {
        (*gpt, "amp-bf16", "kit"): [6.25, 6.26, 6.24], (*gpt, "fp8-tensorwise", "kit"): [6.24, 6.23, 6.25],
        (*cifar, "fp32", "torch"): [0.60, 0.61, 0.59], (*cifar, "amp-fp16", "torch"): [0.60, 0.60, 0.60]})
    b = _converged_bundle(tmp_path / "b", "b", {
        (*gpt, "amp-bf16", "kit"): [6.25, 6.25, 6.25], (*gpt, "fp8-tensorwise", "kit"): [6.40, 6.41, 6.39],
        (*cifar, "fp32", "torch"): [0.60, 0.60, 0.60], (*cifar, "amp-fp16", "torch"): [0.57, 0.58, 0.56]},
        host="fixture-host-b", gpu="Fixture GPU B")
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = _run_cli(["compare", str(a), str(b)], capsys, monkeypatch)
    assert code == 0, err
    assert "Final quality (convergence runs" in out
    assert "held-out loss 6.24 (n=3)" in out and "-0.16% vs amp-bf16: matches amp-bf16" in out      # A's fp8
    assert "held-out loss 6.4 (n=3)" in out and "+2.40% vs amp-bf16: worse than amp-bf16" in out    # B's fp8
    assert "+2.56% vs A" in out                                                                     # 6.40 vs 6.24
    assert "test accuracy 0.57 (n=3)" in out and "-3.00 points vs fp32: worse than fp32" in out      # B's fp16
    assert "-3.00 points vs A" in out

    code, md, err = _run_cli(["compare", str(a), str(b), "--markdown", "-"], capsys, monkeypatch)
    assert code == 0 and "## Final quality (convergence runs" in md
    assert "held-out loss 6.4 (n=3)<br>+2.40% vs amp-bf16: worse than amp-bf16<br>+2.56% vs A" in md

    code, text, err = _run_cli(["compare", str(a), str(b), "--csv", "-"], capsys, monkeypatch)
    rows = {(r["cell_id"], r["machine"]): r for r in csv.DictReader(io.StringIO(text))}
    fp8_b = rows[("gpt/gpt2-small/fp8-tensorwise/kit", "B")]
    assert fp8_b["final_metric_name"] == "held-out loss" and float(fp8_b["final_metric_median"]) == 6.40
    assert fp8_b["parity_base"] == "amp-bf16" and fp8_b["parity_verdict"] == "worse than amp-bf16"
    assert float(fp8_b["parity_gap"]) == pytest.approx(0.024)
    assert float(fp8_b["final_metric_gap_vs_baseline"]) == pytest.approx(0.16 / 6.24)
    base_a = rows[("gpt/gpt2-small/amp-bf16/kit", "A")]
    assert base_a["parity_verdict"] == "" and base_a["final_metric_gap_vs_baseline"] == ""

    page = tmp_path / "cmp.html"
    code, out, err = _run_cli(["compare", str(a), str(b), "--html", str(page)], capsys, monkeypatch)
    html = page.read_text()
    assert code == 0 and "<h2>Final quality</h2>" in html
    assert "held-out loss 6.4 (n=3)<br>+2.40% vs amp-bf16: worse than amp-bf16<br>+2.56% vs A" in html

    code, text, err = _run_cli(["compare", str(a), str(b), "--json", "-"], capsys, monkeypatch)
    fp16 = next(r for r in json.loads(text)["rows"] if r["cell_id"] == "cifar/resnet18/amp-fp16/torch")["machines"]
    assert fp16["B"]["parity"]["verdict"] == "worse than fp32" and fp16["A"]["parity"]["verdict"] == "matches fp32"
    assert fp16["B"]["final_metric_gap_vs_baseline"] == pytest.approx(0.03)


def test_a_throughput_comparison_shows_no_final_quality(two, capsys, monkeypatch):
    a, b = two
    code, out, err = _run_cli(["compare", str(a), str(b), "--markdown", "-"], capsys, monkeypatch)
    assert code == 0 and "Final quality" not in out
    code, text, err = _run_cli(["compare", str(a), str(b), "--csv", "-"], capsys, monkeypatch)
    assert all(r["final_metric_median"] == "" for r in csv.DictReader(io.StringIO(text)))


def test_a_fastai_version_difference_is_named_only_where_both_inputs_measured_fastai_cells(tmp_path):
    torch_cells = [make_cell("resnet18", p, epoch_s=[10.0, 10.1, 9.9], engine="torch") for p in ("fp32", "amp-fp16")]
    fastai_cells = [make_cell("resnet18", p, epoch_s=[10.0, 10.1, 9.9], engine="fastai") for p in ("fp32", "amp-fp16")]
    a = _bundle(tmp_path, "a", torch_cells + fastai_cells, fastai="2.8.12")
    b = _bundle(tmp_path, "b", torch_cells, host="fixture-host-b", fastai="not installed")
    text = " ".join(w.message for w in compare_paths([a, b]).warnings)
    assert "fastai" not in text, text  # B measured no fastai cell: its fastai cannot have shaped a figure
    c = _bundle(tmp_path, "c", torch_cells + fastai_cells, host="fixture-host-c", fastai="2.7.19")
    text = " ".join(w.message for w in compare_paths([a, c]).warnings)
    assert "different fastai versions: A 2.8.12, B 2.7.19" in text, text
