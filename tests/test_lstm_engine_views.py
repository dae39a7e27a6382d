"""Both LSTM engines in the views: `kit compare`, `kit bundle show` and the run report show the faithful
(kit) and the graphed engine's cells side by side, labelled, each engine's speedup over its own fp32 cell
by the one definition (kit.results.ratios.speedup_over_fp32). Synthetic fixture cells (labelled so)."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
from kit.bundle.safe_open import open_bundle
from kit.cli.main import app
from kit.bench.lstm import SUITE as LSTM
from kit.report.export import export_run
from kit.results.ratios import fmt_speedup, speedup_over_fp32
from kit.results.schema import CellResult
from kit.results.stats import summarise_repeats

#: tokens/s per repeat: the faithful engine host-paced (amp-fp16 2.44x fp32), the graphed one 3.7x
RATES = {("kit", "fp32"): [54_000.0, 54_300.0, 53_900.0], ("kit", "amp-fp16"): [132_000.0, 133_000.0, 131_000.0],
         ("graphed", "fp32"): [55_700.0, 55_800.0, 55_600.0], ("graphed", "amp-fp16"): [205_000.0, 206_000.0, 204_000.0]}


def _cells() -> list[dict]:
    out = []
    for (engine, precision), rates in RATES.items():
        c = make_cell("tensor-core", precision, engine=engine, workload="lstm")
        for rep, t in zip(c["repeats"], rates):
            rep["throughput_items_per_s"] = t
        c["summary"] = summarise_repeats(c["repeats"])
        out.append(c)
    return out


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("lstm-views")
    a = export_run(make_run_dir(root / "a", make_results(_cells(), make_env(), run_id="FIXTURE-lstm-a")), root / "ba")
    b = export_run(make_run_dir(root / "b", make_results(_cells(), make_env(host="fixture-host-b"), run_id="FIXTURE-lstm-b")),
                   root / "bb")
    return a, b


def _expected(engine: str) -> str:
    cells = {(c["engine"], c["precision"]): CellResult.from_dict(c) for c in _cells()}
    return fmt_speedup(speedup_over_fp32(cells[(engine, "amp-fp16")], cells[(engine, "fp32")]))


def test_the_fixture_gives_the_two_engines_different_speedups():
    assert _expected("kit") == "2.44×" and _expected("graphed") == "3.68×"


def test_compare_shows_both_engines_each_with_its_own_speedup(bundles):
    a, b = bundles
    data = json.loads(CliRunner().invoke(app, ["compare", str(a), str(b), "--json", "-"]).stdout)
    rows = {r["cell_id"]: r for r in data["rows"]}
    for engine in ("kit", "graphed"):
        row = rows[f"lstm/tensor-core/amp-fp16/{engine}"]
        assert fmt_speedup(row["machines"]["A"]["speedup_vs_fp32"]["ratio"]) == _expected(engine)
    out = CliRunner().invoke(app, ["compare", str(a), str(b)], env={"COLUMNS": "220"}).stdout
    assert "lstm/tensor-core/amp-fp16/kit" in out and "lstm/tensor-core/amp-fp16/graphed" in out


def test_bundle_show_lists_both_engines_with_their_speedups(bundles):
    out = CliRunner().invoke(app, ["bundle", "show", str(bundles[0])], env={"COLUMNS": "160"}).stdout
    for engine in ("kit", "graphed"):
        [line] = [x for x in out.splitlines() if f"lstm/tensor-core/amp-fp16/{engine}" in x]
        assert _expected(engine) in line


def test_the_report_labels_each_engine_and_charts_each_speedup(bundles):
    b = open_bundle(bundles[0])
    html = b.text("report.html")
    for engine in ("kit", "graphed"):
        chart = b.text(f"charts/lstm-{engine}-speedup.svg")
        assert LSTM.engine_labels[engine] in chart
        assert set(re.findall(r"amp-fp16, tensor-core: (\d+\.\d+×)", chart)) == {_expected(engine)}
        assert f"lstm/tensor-core/amp-fp16/{engine}" in html
