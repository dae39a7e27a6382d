"""`kit compare` puts each cell's verdict (kit explain's, short) beside its ratios in every format, and a
fleet finding whose slow cells share a verdict says so. The profiles here are fixture data in
CellResult.profile's shape (invented numbers, not profiler traces)."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

import pytest
from rich.console import Console

from fixtures.fleet import MODELS, PRECISIONS
from fixtures.results.factory import make_cell, make_env, make_profile, make_results
from kit.bundle.envinfo import summarise_environment
from kit.compare import render
from kit.compare.engine import build_comparison
from kit.compare.figures import run_figures
from kit.compare.fleet.grouped import View, summarise_fleet
from kit.compare.load import Source, _label
from kit.index import figures_codec
from kit.results import kernel_classes as kc
from kit.results.schema import RunResults

#: fixture profiles (ms per step): a step whose GPU idles 70% of it, and two that keep the GPU busy
HOST_BOUND = make_profile(10.0, {kc.TENSOR_CORE_MATMUL: 2.5, kc.NORM_ELEMENTWISE: 0.5})
ON_TENSOR_CORES = make_profile(3.2, {kc.TENSOR_CORE_MATMUL: 2.5, kc.NORM_ELEMENTWISE: 0.5})
OFF_TENSOR_CORES = make_profile(10.0, {kc.OTHER_MATMUL: 9.0, kc.NORM_ELEMENTWISE: 0.8})


def _source(i: int, host: str, amp_speed: float = 1.0, amp_profile: dict | None = ON_TENSOR_CORES,
            fp32_profile: dict | None = OFF_TENSOR_CORES, seed: int = 0) -> Source:
    """One machine's six CIFAR cells (as kit's fixture fleets), its reduced-precision cells' epoch times
    divided by ``amp_speed``, each cell with the given fixture profile."""
    rng = random.Random(seed * 1000 + i)
    cells = []
    for m, model in enumerate(MODELS):
        for j, precision in enumerate(PRECISIONS):
            base = (10.0 + 5 * m) / (1.0 + 0.6 * j) / (amp_speed if j else 1.0)
            jitter = [1.0 + rng.uniform(-0.004, 0.004) for _ in range(3)]
            cells.append(make_cell(model, precision, epoch_s=[base * x for x in jitter],
                                   profile=amp_profile if j else fp32_profile))
    res = RunResults.from_dict(make_results(cells, make_env(host=host, gpu="NVIDIA H200"), run_id=f"FIXTURE-V-{i:04d}"))
    return Source(i, _label(i), Path(f"{host}.tar.gz"), "bundle", res, res.environment,
                  summarise_environment(res.environment, res.config, res.cells), False)


def _rich(cmp, width: int = 200, view: View | None = None) -> str:
    buf = io.StringIO()
    render.print_rich(cmp, Console(file=buf, width=width, color_system=None, force_terminal=False), False, view)
    return buf.getvalue()


def test_each_cells_verdict_stands_beside_its_ratios_in_every_format():
    cmp = build_comparison([_source(0, "fixture-a"), _source(1, "fixture-b", amp_profile=HOST_BOUND)])
    out = _rich(cmp)
    speedups = out[out.index("Speedup over fp32 on each machine"):out.index("Throughput relative to")]
    assert "kit explain's verdict" in speedups
    assert speedups.count("compute-bound (TC)") == 4 and speedups.count("host-bound 70% idle") == 4

    md = render.to_markdown(cmp)
    assert "significant<br>compute-bound (TC)" in md and "<br>host-bound 70% idle" in md

    doc = json.loads(render.to_json(cmp))
    by_cell = {r["cell_id"]: r["machines"] for r in doc["rows"]}
    assert by_cell["cifar/resnet18/amp-fp16/torch"]["B"]["explain_verdict"] == "host-bound 70% idle"
    assert by_cell["cifar/resnet18/amp-fp16/torch"]["B"]["explain_verdict_kind"] == "host-bound"
    assert by_cell["cifar/resnet18/fp32/torch"]["A"]["explain_verdict"] == "compute-bound (no TC)"

    rows = list(csv.DictReader(io.StringIO(render.to_csv(cmp))))
    [b16] = [r for r in rows if r["cell_id"] == "cifar/resnet50/amp-bf16/torch" and r["machine"] == "B"]
    assert (b16["explain_verdict"], b16["explain_verdict_kind"]) == ("host-bound 70% idle", "host-bound")

    rows_view = _rich(cmp, view=View(rows=True))  # machines as rows: a column of its own
    assert "bound: what bound the machine's cell" in " ".join(rows_view.split()) and "host-bound 70% idle" in rows_view


def test_runs_without_a_measured_verdict_keep_their_tables_and_the_json_says_not_measured():
    cmp = build_comparison([_source(0, "fixture-a", amp_profile=None, fp32_profile=None),
                            _source(1, "fixture-b", amp_profile=None, fp32_profile=None)])
    assert "kit explain" not in _rich(cmp) and "kit explain" not in render.to_markdown(cmp)
    assert "bound" not in _rich(cmp, view=View(rows=True)).split("One table per cell")[1].splitlines()[3]
    doc = json.loads(render.to_json(cmp))
    assert {m["explain_verdict"] for r in doc["rows"] for m in r["machines"].values()} == {"not measured"}


def _fleet(slow_amp_profile: dict, n: int = 12) -> list[Source]:
    """``n`` machines alike but node007, whose reduced-precision cells are 30% slower, with ``slow_amp_profile``."""
    return [_source(i, f"fixture-node{i:03d}", *((0.7, slow_amp_profile) if i == 7 else (1.0, ON_TENSOR_CORES)))
            for i in range(n)]


def test_a_finding_whose_slow_cells_are_all_host_bound_says_host_bound_cells_only():
    cmp = build_comparison(_fleet(HOST_BOUND))
    fleet = summarise_fleet(cmp, "gpu", 5.0)
    [finding] = fleet.slow
    assert finding.source.env.machine == "fixture-node007"
    assert finding.shared is not None and finding.shared.kind == "host-bound"
    assert ("host-bound cells only: every slow cell host-bound (kit explain's verdict), 4 of the machine's 4 "
            "host-bound cells") in finding.line
    assert finding.short.endswith(", host-bound cells only")  # the summary table's finding column
    doc = json.loads(render.to_json(cmp, View(group_by="gpu")))
    [found] = doc["fleet"]["findings"]
    assert found["shared_verdict"]["kind"] == "host-bound" and found["shared_verdict"]["flagged_cells"] == 4
    md = render.to_markdown(cmp, view=View(group_by="gpu"))
    assert "host-bound cells only" in md


def test_a_finding_on_a_machine_whose_every_cell_is_host_bound_says_every_cell():
    sources = _fleet(HOST_BOUND)
    sources[7] = _source(7, "fixture-node007", 0.7, HOST_BOUND, HOST_BOUND)  # its fp32 cells host-bound too
    [finding] = summarise_fleet(build_comparison(sources), "gpu", 5.0).slow
    assert finding.shared is not None and finding.shared.every_cell
    assert finding.short.endswith(", every cell host-bound") and "cells only" not in finding.line


def test_a_finding_says_a_verdict_only_where_every_slow_cell_has_the_same_measured_one():
    from kit.compare.fleet.findings import CellMark, shared_verdict

    def marks(*kinds):
        return [CellMark(None, 0.7, 0.001, False, None, None, k) for k in kinds]

    assert shared_verdict(marks("host-bound", "host-bound", "compute-bound on the tensor cores"),
                          [True, True, False]).text.startswith("host-bound cells only")
    # every cell of the machine host-bound: nothing to contrast "host-bound cells only" with
    every = shared_verdict(marks("host-bound", "host-bound", "host-bound"), [True, True, False])
    assert every.short == "every cell host-bound" and "cells only" not in every.text
    assert every.text.startswith("every cell host-bound (kit explain's verdict), the 2 slow ones among the machine's 3")
    assert shared_verdict(marks("host-bound", "host-bound"), [True, False]).text.endswith("the 1 slow one among the machine's 2")
    assert shared_verdict(marks("host-bound", "loader-bound"), [True, True]) is None  # they differ
    assert shared_verdict(marks("not measured", "not measured"), [True, True]) is None  # nothing measured
    # end to end: node007's verdicts not measured, so its finding says nothing of them
    sources = _fleet(ON_TENSOR_CORES)
    sources[7] = _source(7, "fixture-node007", 0.7, None, None)
    [finding] = summarise_fleet(build_comparison(sources), "gpu", 5.0).slow
    assert finding.shared is None and "cells only" not in finding.line and finding.short == "slow: everywhere"


def test_the_index_keeps_each_cells_verdict_and_refuses_a_forged_one():
    res = _source(0, "fixture-a", amp_profile=HOST_BOUND).run_results()
    figures = run_figures(res)
    back = figures_codec.decode(figures_codec.encode(figures))
    assert [(c.explain_kind, c.explain_verdict) for c in back.cells] == [
        (c.explain_kind, c.explain_verdict) for c in figures.cells]
    assert ("host-bound", "host-bound 70% idle") in {(c.explain_kind, c.explain_verdict) for c in back.cells}
    for c in figures.cells:
        c.explain_kind = "fast-bound"
    with pytest.raises(figures_codec.Damaged, match="its verdict is not one of the kit's"):
        figures_codec.decode(figures_codec.encode(figures))


def test_the_compare_page_puts_the_verdict_under_each_speedup():
    from kit.report.html.compare import render_compare_page

    page = render_compare_page(build_comparison([_source(0, "fixture-a"), _source(1, "fixture-b", amp_profile=HOST_BOUND)]))
    speedups = page[page.index("Speedup over fp32 on each machine"):]
    assert speedups.count('<span class="note">host-bound 70% idle</span>') == 4
