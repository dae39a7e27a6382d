"""`kit bundle show`: the cell table at common terminal widths."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
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
    from kit.report.html import render_run_report
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
