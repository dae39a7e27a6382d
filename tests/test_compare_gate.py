"""`kit compare --fail-if-slower`: a CI gate says what it tested, and never reads green on nothing.
Fixture bundles (invented numbers, made by the kit's own export)."""

from __future__ import annotations

import json

import pytest

from fixtures.cli import run_main
from fixtures.results.factory import make_cell, make_env, make_results, make_run_dir
from kit.compare.engine import compare_paths
from kit.compare.gate import check_gate, gate
from kit.errors import EXIT_CODES, NothingTested, RegressionDetected
from kit.report.export import export_run

MODELS = ("resnet18", "resnet50")
PRECISIONS = ("fp32", "amp-fp16", "amp-bf16")


def _bundle(tmp_path, name: str, speed: float, repeats: int, host: str, models=MODELS):
    jitter = [1.0, 1.01, 0.99][:repeats]
    cells = [make_cell(m, p, epoch_s=[(10.0 + 5 * i) / (1 + 0.6 * j) / speed * x for x in jitter])
             for i, m in enumerate(models) for j, p in enumerate(PRECISIONS)]
    res = make_results(cells, make_env(host=host), run_id=f"FIXTURE-GATE-{name}")
    return export_run(make_run_dir(tmp_path / name, res), tmp_path / "bundles")


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """Two single-repeat bundles: B is 35-51% slower than A in every cell (epoch times x 1.55 to 2.05)."""
    root = tmp_path_factory.mktemp("single")
    a = _bundle(root, "a", 1.0, 1, "fixture-host-a")
    cells = [make_cell(m, p, epoch_s=[(10.0 + 5 * i) / (1 + 0.6 * j) * (1.55 + 0.1 * (3 * i + j))])
             for i, m in enumerate(MODELS) for j, p in enumerate(PRECISIONS)]
    b = export_run(make_run_dir(root / "b", make_results(cells, make_env(host="fixture-host-b"), run_id="FIXTURE-GATE-b1")),
                   root / "bundles")
    return a, b


def test_a_gate_on_two_single_repeat_bundles_tested_nothing_and_says_so(single, capsys, monkeypatch):
    a, b = single
    code, _, err = run_main(["compare", str(a), str(b), "--fail-if-slower", "5"], capsys, monkeypatch)
    assert code == NothingTested.exit_code == 11 and 11 in EXIT_CODES
    flat = " ".join(err.split())
    assert "--fail-if-slower 5%: tested 0 of the 6 cells measured by B or the baseline A" in flat
    assert "not tested: 6 with 1 repeat (Welch's test needs 2 or more on each side)" in flat
    assert "tested no cell" in flat and "Traceback" not in err


def test_a_gate_that_tested_every_cell_says_so_and_passes_or_fails(tmp_path, capsys, monkeypatch):
    a = _bundle(tmp_path, "a", 1.0, 3, "fixture-host-a")
    same = _bundle(tmp_path, "same", 1.0, 3, "fixture-host-s")
    slow = _bundle(tmp_path, "slow", 0.8, 3, "fixture-host-b")
    code, _, err = run_main(["compare", str(a), str(same), "--fail-if-slower", "5"], capsys, monkeypatch)
    assert code == 0 and "--fail-if-slower 5%: tested all 6 cells measured by B or the baseline A; no significant slowdown" \
        in " ".join(err.split())
    code, _, err = run_main(["compare", str(a), str(slow), "--fail-if-slower", "5"], capsys, monkeypatch)
    assert code == 9 and "6 cell(s) slower than the baseline by more than 5%" in err
    assert "tested all 6 cells measured by B or the baseline A" in " ".join(err.split())


def test_a_gate_that_could_test_some_cells_tests_those_and_names_the_rest(tmp_path):
    """B measured resnet18 with three repeats and resnet50 with one: the three resnet18 cells are
    tested (the gate passes or fails on them); the resnet50 ones are named as not tested."""
    a = _bundle(tmp_path, "a", 1.0, 3, "fixture-host-a")
    cells = [make_cell(m, p, epoch_s=[(10.0 + 5 * i) / (1 + 0.6 * j) * x for x in ([1.0, 1.01, 0.99] if i == 0 else [1.0])])
             for i, m in enumerate(MODELS) for j, p in enumerate(PRECISIONS)]
    b = export_run(make_run_dir(tmp_path / "b", make_results(cells, make_env(host="fixture-host-b"), run_id="FIXTURE-GATE-mix")),
                   tmp_path / "bundles")
    cmp = compare_paths([a, b])
    g = gate(cmp, 5.0)
    assert (g.tested, g.total, g.regressions) == (3, 6, [])
    assert g.untested == [("with 1 repeat (Welch's test needs 2 or more on each side)", 3)]
    assert check_gate(cmp, 5.0) == [
        "--fail-if-slower 5%: tested 3 of the 6 cells measured by B or the baseline A; not tested: 3 with 1 repeat "
        "(Welch's test needs 2 or more on each side); no significant slowdown in the cells tested"]


def test_cells_one_side_lacks_are_not_tested_and_counted(tmp_path):
    a = _bundle(tmp_path, "a", 1.0, 3, "fixture-host-a")
    b = _bundle(tmp_path, "b", 1.0, 3, "fixture-host-b", models=("resnet18",))
    g = gate(compare_paths([a, b]), 5.0)
    assert (g.tested, g.total) == (3, 6) and g.untested == [("not measured by B", 3)]


def test_a_gate_across_methods_only_tested_nothing(tmp_path):
    """Every cell measured by another engine revision than the baseline's: nothing to test."""
    from kit.results.schema import RunResults

    a = _bundle(tmp_path, "a", 1.0, 3, "fixture-host-a")
    res = RunResults.from_dict(json.loads((tmp_path / "a" / "FIXTURE-GATE-a" / "results.json").read_text()))
    for c in res.cells:
        c.method = {"engine": "cifar/torch", "revision": 6, "settings": {}}
    d = res.to_dict()
    d["run_id"] = "FIXTURE-GATE-r6"
    b = export_run(make_run_dir(tmp_path / "r6", d), tmp_path / "bundles")
    cmp = compare_paths([a, b])
    with pytest.raises(NothingTested) as err:
        check_gate(cmp, 5.0)
    assert "not tested: 6 measured otherwise than the baseline" in err.value.message
    with pytest.raises(RegressionDetected):  # the slowdown itself, where compared anyway, still fails
        check_gate(compare_paths([a, _bundle(tmp_path, "slow", 0.7, 3, "fixture-host-c")]), 5.0)
