"""`kit bundle show`: the cell table at common terminal widths."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from fixtures.results.factory import make_cell, make_converged_cell, make_env, make_results, make_run_dir
from kit.report.export import export_run
from kit.cli.main import app

IDS = ("cifar/resnet152/fp16-master/fastai", "cifar/resnet152/amp-fp16/fastai", "lstm/tensor-core/amp-bf16/kit")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("show")
    cells = [
        make_cell("resnet152", "fp32", engine="fastai", epoch_s=[40.0, 10.0, 10.1]),
        make_cell("resnet152", "fp16-master", engine="fastai", epoch_s=[9.0, 9.1, 8.9]),
        make_cell("resnet152", "amp-fp16", engine="fastai", status="skipped",
                  reason="a long reason that has to wrap somewhere on a narrow terminal, not cut"),
        make_cell("tensor-core", "fp32", engine="kit", workload="lstm"),
        make_cell("tensor-core", "amp-bf16", engine="kit", workload="lstm", epoch_s=[5.0, 5.1, 4.9]),
    ]
    return export_run(make_run_dir(root / "runs", make_results(cells, make_env())), root / "out")


@pytest.mark.parametrize("columns", [80, 120])
def test_bundle_show_never_cuts_a_cell_id(bundle, columns):
    r = CliRunner().invoke(app, ["bundle", "show", str(bundle)], env={"COLUMNS": str(columns)})
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert max(len(x) for x in lines) <= columns
    for cid in IDS:
        assert any(re.match(rf"\s*{re.escape(cid)}\s", x + " ") for x in lines), (cid, r.output)
    assert "…" not in r.output
    # the numbers are not cut either, and the skipped cell's reason is there in full
    assert "1.12×" in r.output and "skipped" in r.output
    assert "not cut" in re.sub(r"\s+", " ", r.output)
    if columns >= 120:  # (at 80 the headers wrap onto two lines, a word each)
        assert "throughput CV" in r.output and "speedup over fp32" in r.output


def test_cell_patterns_keep_the_matching_cells_with_the_speedup_their_fp32_cell_gives(bundle):
    """--cell (repeatable) trims the table, not the figures: a speedup over an fp32 cell left out is
    still shown; a pattern that matches nothing is a usage error (one line, exit 2 through kit's main),
    raised before any table is printed."""
    from kit.errors import UsageError

    r = CliRunner().invoke(app, ["bundle", "show", str(bundle), "--cell", "*/fp16-master/*", "--cell", "lstm/*/amp-bf16/kit"],
                           env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.output
    rows = [x.split()[0] for x in r.output.splitlines() if x.startswith(("cifar/", "lstm/"))]
    assert rows == ["cifar/resnet152/fp16-master/fastai", "lstm/tensor-core/amp-bf16/kit"]
    assert "1.12×" in r.output  # fp16-master over the fp32 cell the patterns left out
    r = CliRunner().invoke(app, ["bundle", "show", str(bundle), "--cell", "gpt/*"])
    assert isinstance(r.exception, UsageError) and "no cell of" in str(r.exception) and "Cells" not in r.output


def test_bundle_show_names_a_resumed_runs_earlier_sessions(tmp_path):
    env = make_env()
    env["earlier_sessions"] = [{"collected_at": "2026-12-01T23:32:03Z", "host": {"host_id": "h-first"},
                                "nvml": {"gpus": [{"uuid": "GPU-6c95"}]}, "kit": {"git_commit": "009a8187607b"},
                                "cells": ["cifar/resnet18/fp32/torch"]}]
    b = export_run(make_run_dir(tmp_path / "runs", make_results([make_cell()], env)), tmp_path / "out")
    r = CliRunner().invoke(app, ["bundle", "show", str(b)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "earlier session 1" in r.output and "2026-12-01T23:32:03Z: 1 cell(s) on host h-first (GPU-6c95)" in r.output


def _data_parallel_cell(**dp):
    cell = make_cell("resnet50", "amp-bf16", engine="torch")
    cell["params"]["world_size"] = 2
    cell["metrics"] = {"data_parallel": {"world_size": 2, "backend": "nccl", "ranks_in_step": True,
                                         "interconnect": {"kind": "nvlink", "pairs": []},
                                         "allreduce": {"seconds_per_step": 0.00123},
                                         "scaling": {"efficiency": 0.9312}, **dp}}
    return cell


def test_show_and_the_report_give_a_data_parallel_cells_ranks_scaling_and_all_reduce(tmp_path):
    """The figures a data-parallel cell recorded (the scaling efficiency as kit.runner.isolate computed it)
    are on its row in `kit bundle show` and in the run report, the same words in both."""
    from kit.compare.measures import data_parallel_note
    from kit.report.html.run_report import render_run_report
    from kit.results.schema import CellResult, RunResults

    note = data_parallel_note(CellResult.from_dict(_data_parallel_cell()))
    assert note == "2 ranks (nccl, nvlink), scaling 93.1%, all-reduce 1.23 ms a step"
    odd = CellResult.from_dict(_data_parallel_cell(scaling={"efficiency": None, "reason": "baseline failed"},
                                                   ranks_in_step=False, interconnect={"kind": "unknown"}))
    assert data_parallel_note(odd) == "2 ranks (nccl), scaling not measured, all-reduce 1.23 ms a step, ranks out of step"
    assert data_parallel_note(CellResult.from_dict(make_cell())) is None  # a plain cell: nothing
    res = make_results([_data_parallel_cell(), make_cell("resnet50", "fp32", engine="torch")], make_env())
    bundle = export_run(make_run_dir(tmp_path / "runs", res), tmp_path / "out")
    r = CliRunner().invoke(app, ["bundle", "show", str(bundle)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "scaling 93.1%" in r.output and "all-reduce 1.23 ms a step" in r.output
    run = RunResults.from_dict(res)
    html = render_run_report(run, run.environment, interrupted=False, charts={})
    assert f'<span class="note">{note}</span>' in html


def test_show_and_the_report_give_a_convergence_runs_parity_verdicts_the_same_way(tmp_path):
    """A convergence run's verdicts (kit.results.derive.parity: the GPT suite against amp-bf16, the
    LSTM against fp32) are in `kit bundle show` at 80 columns and in the run report, with the same
    figures; a throughput run has no such table."""
    from kit.compare import measures
    from kit.report.html.run_report import render_run_report
    from kit.results.schema import RunResults

    cells = [make_converged_cell("gpt2-small", "amp-bf16", "gpt", "kit", [6.26, 6.25, 6.24]),
             make_converged_cell("gpt2-small", "fp8-tensorwise", "gpt", "kit", [6.24, 6.24, 6.23]),
             make_converged_cell("gpt2-small", "amp-fp16", "gpt", "kit", [6.40, 6.41, 6.39]),
             make_converged_cell("tensor-core", "fp32", "lstm", "kit", [100.0, 101.0, 99.0]),
             make_converged_cell("tensor-core", "amp-bf16", "lstm", "kit", [101.0, 101.5, 100.5])]
    res = make_results(cells, make_env(data="real"), data="real")
    res["config"]["mode"] = "convergence"
    run = RunResults.from_dict(res)
    rows = {(r["workload"], r["precision"]): r for r in measures.parity_rows(run)}
    assert set(rows) == {("gpt", "fp8-tensorwise"), ("gpt", "amp-fp16"), ("lstm", "amp-bf16")}
    fp8, fp16 = rows[("gpt", "fp8-tensorwise")], rows[("gpt", "amp-fp16")]
    assert measures.fmt_parity(fp8) == ("held-out loss 6.24 vs amp-bf16's 6.25 (-0.16%): matches amp-bf16 "
                                        "(held-out loss within 1% of amp-bf16's)")
    assert fp16["verdict"] == "worse than amp-bf16" and measures.fmt_parity_gap(fp16) == "+2.40%"

    bundle = export_run(make_run_dir(tmp_path / "runs", res), tmp_path / "out")
    r = CliRunner().invoke(app, ["bundle", "show", str(bundle)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert max(len(x) for x in r.output.splitlines()) <= 80
    line = next(x for x in r.output.splitlines() if x.startswith("gpt/gpt2-small/amp-fp16/kit") and "worse" in x)
    assert line.split()[1:] == ["6.4", "6.25", "+2.40%", "worse", "than", "amp-bf16"]
    assert "lstm/tensor-core/amp-bf16/kit" in r.output and "+1.00%" in r.output

    html = render_run_report(run, run.environment, interrupted=False, charts={})
    assert "<h2>Convergence parity</h2>" in html and '<span class="flag">worse than amp-bf16</span>' in html
    assert "+2.40%" in html and "perplexity within 2% of fp32" in html

    res["config"]["mode"] = "throughput"
    plain = export_run(make_run_dir(tmp_path / "runs2", res), tmp_path / "out2")
    r = CliRunner().invoke(app, ["bundle", "show", str(plain)], env={"COLUMNS": "120"})
    assert r.exit_code == 0 and "Convergence parity" not in r.output
