"""How each cell was measured (kit.results.method, kit.bench.methods): what the engines record, the one
rule that says two cells may be divided, and every view that asks it: kit compare (rows, warnings,
--fail-if-slower, --allow-method-change, fleets), the index's stored figures, kit index history;
and the engine revisions against the kit's version, the CHANGELOG and the shipped reference."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.cli import run_main
from fixtures.results.factory import make_env, make_results, make_run_dir, standard_cells
from kit import __version__
from kit.bench import methods as engine_methods
from kit.compare.engine import METHOD_FLAG, OTHER_METHOD, compare_paths
from kit.compare.gate import check_gate
from kit.errors import NothingTested, RegressionDetected
from kit.results.method import UNKNOWN, describe, differences, method_change

ROOT = Path(__file__).resolve().parents[1]

TORCH_R6 = {"engine": "cifar/torch", "revision": 6,
            "settings": {"step": "cuda-graph-inductor", "optimizer": "fused", "loss_scale": "none",
                         "data": "device-resident uint8, one augmentation gather per epoch",
                         "untimed_warmup_steps": 12, "excluded_steps": 11, "timed_steps": 60,
                         "batch_size": 256, "image_size": 32}}


def _with(method: dict, revision: int | None = None, **settings) -> dict:
    m = json.loads(json.dumps(method))
    if revision is not None:
        m["revision"] = revision
    m["settings"].update(settings)
    return m


# ------------------------------------------------------------------ the rule
def test_the_same_method_and_unknown_beside_unknown_compare():
    assert method_change([("A", TORCH_R6), ("B", _with(TORCH_R6))]) is None
    assert method_change([("A", None), ("B", None)]) is None  # nothing says they differ
    assert differences(TORCH_R6, _with(TORCH_R6)) == []


def test_a_revision_a_setting_or_an_unknown_method_is_a_method_change_named_in_words():
    text = method_change([("A", _with(TORCH_R6, 2, step="cuda-graph", optimizer="foreach")), ("B", TORCH_R6)])
    assert text == ("A: cifar/torch r2 (step cuda-graph, optimizer foreach); B: cifar/torch r6 (step "
                    "cuda-graph-inductor, optimizer fused): this ratio compares methods, not machines")
    assert differences(TORCH_R6, _with(TORCH_R6, batch_size=512)) == ["batch_size"]
    assert method_change([("A", None), ("B", TORCH_R6)]) == (
        f"A: {UNKNOWN}; B: cifar/torch r6: this ratio compares methods, not machines")
    # details are shown, never compared: the same fallback may be worded differently on two machines
    a, b = _with(TORCH_R6), _with(TORCH_R6)
    a["details"], b["details"] = {"inductor": "fell back: X"}, {"inductor": "fell back: Y"}
    assert method_change([("A", a), ("B", b)]) is None
    assert describe(TORCH_R6, ["step"]) == "cifar/torch r6 (step cuda-graph-inductor)"


# ------------------------------------------------------------------ bundles that differ only in a revision
def _cells(method: dict | None, speed: float = 1.0) -> list[dict]:
    cells = standard_cells(speed=speed, steps=60)
    for c in cells:
        c["method"] = method
    return cells


def _bundle(root: Path, name: str, cells: list[dict], host: str, started_at: float = 1735732800.0) -> Path:
    from kit.report.export import export_run

    res = make_results(cells, make_env(host=host), run_id=f"FIXTURE-{name}", started_at=started_at)
    return export_run(make_run_dir(root / "runs", res), root / "bundles")


@pytest.fixture(scope="module")
def revisions(tmp_path_factory) -> dict[str, Path]:
    """Four bundles of one fixture host: r6 twice (the second 30% slower), r5 30% slower, and a bundle
    of a kit that recorded no method."""
    root = tmp_path_factory.mktemp("methods")
    return {
        "r6": _bundle(root, "r6", _cells(TORCH_R6), "fixture-host-a"),
        "r6-slow": _bundle(root, "r6-slow", _cells(TORCH_R6, speed=0.7), "fixture-host-b"),
        "r5-slow": _bundle(root, "r5-slow", _cells(_with(TORCH_R6, 5), speed=0.7), "fixture-host-b"),
        "unknown": _bundle(root, "unknown", _cells(None), "fixture-host-c"),
        "unknown-2": _bundle(root, "unknown-2", _cells(None), "fixture-host-d"),
    }


def test_the_same_method_compares_as_ever(revisions):
    cmp = compare_paths([revisions["r6"], revisions["r6-slow"]])
    assert len(cmp.rows) == 6 and not cmp.method_changes
    assert "method" not in [w.kind for w in cmp.warnings]
    with pytest.raises(RegressionDetected):
        check_gate(cmp, 5.0)


def test_bundles_that_differ_only_in_an_engine_revision_are_not_divided(revisions):
    cmp = compare_paths([revisions["r6"], revisions["r5-slow"]])
    assert cmp.rows == []  # every cell: left out of the ratios
    (w,) = [w for w in cmp.warnings if w.kind == "method"]
    assert w.severity == "high"
    assert "different method in 6 cell(s)" in w.message and "A: cifar/torch r6; B: cifar/torch r5" in w.message
    assert "this ratio compares methods, not machines" in w.message and "--allow-method-change" in w.message
    assert cmp.warnings[0] is w  # the most severe first
    assert {n.reason for n in cmp.not_compared} == {f"{OTHER_METHOD} in B"}
    with pytest.raises(NothingTested):  # a 30% slowdown across methods is no regression, and no pass either
        check_gate(cmp, 5.0)


def test_allow_method_change_compares_them_each_ratio_marked(revisions):
    cmp = compare_paths([revisions["r6"], revisions["r5-slow"]], allow_method_change=True)
    assert len(cmp.rows) == 6
    for row in cmp.rows:
        assert row.method_change and "r5" in row.method_change
        assert METHOD_FLAG in row.machines[1].flags and METHOD_FLAG not in row.machines[0].flags
        assert 0.65 < row.machines[1].vs_baseline.ratio < 0.75
    (w,) = [w for w in cmp.warnings if w.kind == "method"]
    assert "kept by --allow-method-change" in w.message
    with pytest.raises(RegressionDetected) as err:
        check_gate(cmp, 5.0)
    assert f"[{METHOD_FLAG}: compares methods, not machines]" in err.value.message


def test_a_bundle_without_methods_beside_one_with_them_is_a_method_change(revisions):
    cmp = compare_paths([revisions["unknown"], revisions["r6"]])
    assert cmp.rows == []
    (w,) = [w for w in cmp.warnings if w.kind == "method"]
    assert f"A: {UNKNOWN}; B: cifar/torch r6" in w.message
    # two bundles without methods: nothing says they differ
    assert not compare_paths([revisions["unknown"], revisions["unknown-2"]]).method_changes


def test_the_cli_says_it_and_a_gate_across_methods_tested_nothing_unless_allowed(revisions, capsys, monkeypatch):
    a, b = str(revisions["r6"]), str(revisions["r5-slow"])
    code, out, err = run_main(["compare", a, b, "--fail-if-slower", "5"], capsys, monkeypatch)
    assert code == 11, err  # no cell measured the same way: the gate tested nothing (never a pass)
    assert "not tested: 6 measured otherwise than the baseline" in " ".join(err.split())
    text = " ".join(out.split())
    assert "HIGH different method in 6 cell(s)" in text
    assert "No cell was measured, the same way, by two inputs" in text
    assert "6 cells: measured otherwise in B" in text
    code, out, err = run_main(["compare", a, b, "--fail-if-slower", "5", "--allow-method-change"], capsys, monkeypatch)
    assert code == 9
    code, out, err = run_main(["compare", a, b, "--json", "-", "--allow-method-change"], capsys, monkeypatch)
    doc = json.loads(out)
    row = doc["rows"][0]
    assert "r5" in row["method_change"] and METHOD_FLAG in row["machines"]["B"]["flags"]
    assert row["machines"]["B"]["method"]["revision"] == 5


def test_a_fleet_leaves_a_machine_of_another_method_out_of_its_findings(tmp_path):
    from kit.compare.engine import build_comparison
    from kit.compare.fleet.grouped import summarise_fleet
    from kit.compare.load import load_sources

    paths = [_bundle(tmp_path, f"n{i}", _cells(TORCH_R6), f"fixture-node{i:02d}") for i in range(4)]
    paths.append(_bundle(tmp_path, "odd", _cells(_with(TORCH_R6, 5), speed=0.5), "fixture-node99"))
    sources = load_sources([str(p) for p in paths])
    named = [f.source.label for f in summarise_fleet(build_comparison(sources), "gpu").findings]
    assert named == []  # the half-speed machine measured by r5 is not named slow
    allowed = summarise_fleet(build_comparison(sources, allow_method_change=True), "gpu").findings
    assert [f.name for f in allowed] == ["fixture-node99"]


# ------------------------------------------------------------------ the index
def test_the_index_keeps_methods_and_history_breaks_where_the_method_changed(revisions, tmp_path, capsys, monkeypatch):
    index = tmp_path / "index.sqlite"
    root = tmp_path / "host-b"
    old = _bundle(root, "b-r5", _cells(_with(TORCH_R6, 5)), "fixture-host-b", started_at=1735732800.0)
    new = _bundle(root, "b-r6", _cells(TORCH_R6, speed=0.7), "fixture-host-b", started_at=1735819200.0)
    again = _bundle(root, "b-r6-again", _cells(TORCH_R6, speed=0.5), "fixture-host-b", started_at=1735905600.0)
    code, _, err = run_main(["index", "add", str(old), str(new), str(again), "--index", str(index)], capsys, monkeypatch)
    assert code == 0, err
    code, out, err = run_main(["index", "history", "--index", str(index), "--host", "fixture-host-b", "--json", "-"],
                              capsys, monkeypatch)
    assert code == 0, err
    cell = json.loads(out)["cells"][0]
    first, second, third = cell["points"]
    assert second["method_break"] and "r5" in second["method_break"] and "r6" in second["method_break"]
    assert second["vs_previous"] is None and not second["flagged"]  # 30% slower across the break: no change
    assert third["method_break"] is None and third["flagged"]  # the same method again: a real change
    code, out, err = run_main(["index", "history", "--index", str(index), "--host", "fixture-host-b"], capsys, monkeypatch)
    assert "6 break(s) in the series" in " ".join(out.split()) and "method changed: no ratio" not in out
    # the summary: the break is what changed in run 2 (no ratio, nothing flagged); run 3's slowdown is flagged
    run2 = next(x for x in out.splitlines() if x.startswith(" 2 "))
    assert "method of 6 cell(s): no ratio there" in run2 and "!" not in run2 and "×" not in run2
    assert "!)" in next(x for x in out.splitlines() if x.startswith(" 3 "))
    code, out, err = run_main(["index", "history", "--index", str(index), "--host", "fixture-host-b", "--cells", "*"],
                              capsys, monkeypatch)
    assert "method changed: no ratio" in out
    # compare --index decides as compare of the tarballs does
    from kit.index.query import comparison

    cmp = comparison(index, None, None, None, None)
    assert [r.cell_id for r in cmp.rows] == [r.cell_id for r in compare_paths([old, new, again]).rows]
    assert len(cmp.method_changes) == 6


def test_the_stored_figures_keep_each_cells_method_and_refuse_a_damaged_table(revisions):
    import zlib

    from kit.compare.load import load_source
    from kit.index.figures_codec import Damaged, decode, encode

    fig = load_source(str(revisions["r5-slow"])).figures
    back = decode(encode(fig))
    assert [c.method for c in back.cells] == [c.method for c in fig.cells]
    assert back.cells[0].method["revision"] == 5
    raw = zlib.decompress(encode(fig))
    size = int.from_bytes(raw[:4], "little")
    doc = json.loads(raw[4:4 + size])
    doc["methods"] = [{"engine": "cifar/torch"}]  # no revision: not a method record
    text = json.dumps(doc).encode()
    with pytest.raises(Damaged, match="methods"):
        decode(zlib.compress(len(text).to_bytes(4, "little") + text + raw[4 + size:]))


# ------------------------------------------------------------------ what the engines record
@pytest.fixture(scope="module")
def smoke_cells(tmp_path_factory) -> list[dict]:
    """A CPU smoke run of each engine that runs here (torch, fastai, both LSTM engines), fp32."""
    cells = []
    for args in (["--suite", "cifar"], ["--suite", "lstm", "--engines", "kit,graphed"]):
        out = tmp_path_factory.mktemp("smoke")
        done = subprocess.run([sys.executable, "-m", "kit", "run", "--smoke", *args, "-p", "fp32", "--device", "cpu",
                               "--results-dir", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=600)
        assert done.returncode == 0, done.stderr
        (results,) = out.glob("*/results.json")
        cells += json.loads(results.read_text())["cells"]
    return cells


def test_every_engine_records_its_revision_and_the_settings_as_they_ran(smoke_cells):
    by_engine = {c["method"]["engine"]: c for c in smoke_cells if c["status"] == "ok"}
    assert sorted(by_engine) == ["cifar/fastai", "cifar/torch", "lstm/graphed", "lstm/kit"]
    for engine, cell in by_engine.items():
        m = cell["method"]
        assert m["revision"] == engine_methods.revisions()[engine][0]
        assert m["settings"]["batch_size"] == cell["params"].get("batch_size", m["settings"]["batch_size"])
    torch_cell = by_engine["cifar/torch"]["method"]
    assert torch_cell["settings"]["step"] == "eager"  # the CPU: no graph, no compile under --smoke
    assert torch_cell["settings"]["timed_steps"] == by_engine["cifar/torch"]["repeats"][0]["steps"]
    assert by_engine["lstm/graphed"]["method"]["settings"]["step"] == "eager (no CUDA graphs on the CPU)"
    assert by_engine["lstm/kit"]["method"]["settings"]["optimizer"] == "per-parameter"
    assert {e for e, c in by_engine.items() if c["method"].get("paced_by") == "host"} == {"cifar/fastai", "lstm/kit"}


def test_host_paced_cells_are_labelled_in_a_comparison(smoke_cells, tmp_path):
    from kit.report.export import export_run

    ok = [c for c in smoke_cells if c["status"] == "ok"]
    a, b = (export_run(make_run_dir(tmp_path / f"runs-{host}", make_results(ok, make_env(host=host), run_id=f"FIXTURE-{host}")),
                       tmp_path / f"bundles-{host}") for host in ("fixture-host-a", "fixture-host-b"))
    cmp = compare_paths([a, b])
    labelled = {r.cell_id for r in cmp.rows if "host-paced" in r.machines[0].flags}
    assert labelled == {r.cell_id for r in cmp.rows if r.engine in ("fastai", "kit")} != set()
    from kit.compare.render import HOST_PACED_NOTE, to_markdown

    assert HOST_PACED_NOTE in to_markdown(cmp)


# ------------------------------------------------------------------ revisions, the version, the reference
def _changelog_revisions() -> tuple[str, dict[str, int]]:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    m = re.search(r"^## \[(\d+\.\d+\.\d+)\][^\n]*\n\nEngine revisions: ([^\n]+)", text, re.M)
    assert m, "CHANGELOG.md: the newest version has no 'Engine revisions:' line"
    revs = dict((name, int(rev)) for name, rev in re.findall(r"([\w/-]+) r(\d+)", m.group(2)))
    return m.group(1), revs


def test_the_newest_changelog_entry_is_this_version_with_todays_engine_revisions():
    version, revs = _changelog_revisions()
    assert version == __version__, "a new engine revision needs a new version: kit/__init__.py and CHANGELOG.md"
    assert revs == {engine: rev for engine, (rev, _) in engine_methods.revisions().items()}, (
        "the suites' engine revisions (kit/bench/*/__init__.py) differ from CHANGELOG.md's newest entry: bump the version and add an entry")


def test_each_engines_changelog_ends_at_its_revision():
    for engine, (rev, log) in engine_methods.revisions().items():
        assert [r for r, _ in log] == list(range(1, rev + 1)), engine


def _reference_revisions(bundle: Path) -> dict[str, set]:
    """Each engine's revisions in a bundle, or in a run folder (a part still being measured)."""
    import tarfile

    if bundle.is_dir():
        cells = json.loads((bundle / "results.json").read_text())["cells"]
    else:
        with tarfile.open(bundle) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("/results.json"))
            cells = json.load(tar.extractfile(member))["cells"]
    out: dict[str, set] = {}
    for c in cells:
        if c["status"] != "ok":
            continue
        m = c.get("method") or {}
        engine = m.get("engine") or f"{c['workload']}/{c['engine']} ({UNKNOWN})"
        out.setdefault(engine, set()).add(m.get("revision"))
    return out


@pytest.mark.parametrize("name", ["h100", pytest.param("h200", marks=pytest.mark.xfail(strict=True, reason=(
    "the shipped H200 reference is kept as an older measurement: measured on 2026-11-30 by kit 0.1.0, before "
    "cells recorded their method, its cells are method unknown; its re-measure is dropped (the H100 reference "
    "stands in for it). Strict: a change that makes its cells pass for today's must fail here")))])
def test_the_shipped_reference_was_measured_by_todays_engine_revisions(name):
    """Each shipped reference's cells carry today's revision of their engine, and every engine of
    `kit run --suite all` has cells there: else the reference is re-measured (scripts/reference_run.sh)."""
    from kit.bundle.merge import reference_bundles

    (bundle,) = reference_bundles(name)
    recorded = _reference_revisions(Path(bundle))
    stale = [f"{engine}: the reference has {sorted(map(str, revs))}, the code r{engine_methods.revisions().get(engine, (None,))[0]}"
             for engine, revs in sorted(recorded.items()) if revs != {engine_methods.revisions().get(engine, (None,))[0]}]
    missing = sorted(set(engine_methods.revisions()) - set(recorded) - {"cifar/fastai-v1", "gpt/kit"})
    assert not stale and not missing, (
        f"re-measure {Path(bundle).name} with scripts/reference_run.sh on an {name.upper()}: "
        + "; ".join(stale + [f"{e}: no cell in the reference" for e in missing]))


def test_against_the_h200_reference_says_it_is_an_older_measurement_and_names_todays(revisions, capsys, monkeypatch):
    """`kit compare --against h200` says, before anything else, that the H200 reference was measured by an older
    method (kit 0.1.0, its cells method unknown) and names the reference that records its method; against
    the H100 reference no such line."""
    code, out, err = run_main(["compare", str(revisions["r6"]), "--against", "h200"], capsys, monkeypatch)
    assert code == 0, err
    said = " ".join(err.split())
    assert said.startswith("The h200 reference is an older measurement, made by an older method: kit 0.1.0 on "
                           "2026-11-30, before cells recorded how they were measured (131 of its 131 measured cells "
                           "are method unknown)"), said
    assert "Measured by a kit that records its method: --against h100." in said
    code, out, err = run_main(["compare", str(revisions["r6"]), "--against", "h100"], capsys, monkeypatch)
    assert code == 0 and "older measurement" not in err


def test_bundle_show_names_the_engines_and_revisions_that_measured_the_run(revisions, capsys, monkeypatch):
    code, out, err = run_main(["bundle", "show", str(revisions["r5-slow"])], capsys, monkeypatch)
    assert code == 0, err
    assert re.search(r"^engines\s+cifar/torch r5 \(each cell's settings: results.json, method\)", out, re.M), out
    code, out, err = run_main(["bundle", "show", str(revisions["unknown"])], capsys, monkeypatch)
    assert re.search(rf"^engines\s+{re.escape(UNKNOWN)}", out, re.M), out


def _reference_script_runs(tmp_path: Path) -> list[list[str]]:
    """The `kit run` argument lists of every part of scripts/reference_run.sh, as the script forms them."""
    import os

    done = subprocess.run(["bash", str(ROOT / "scripts" / "reference_run.sh"), str(tmp_path / "out")],
                          env={**os.environ, "KIT": "echo kit"}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    runs = [line.split()[2:] for line in done.stdout.splitlines() if line.startswith("kit run ")]
    assert runs and any(line.startswith("kit bundle merge") for line in done.stdout.splitlines()), done.stdout
    return runs


def test_the_reference_scripts_parts_are_what_kit_run_suite_all_measures_each_cell_once(tmp_path):
    from kit.runner.option_checks import config_from_options
    from kit.runner.options import parse_args
    from kit.runner.plan import build_plan

    def cells(argv):
        return build_plan(config_from_options(parse_args(argv), argv)).cell_ids

    parts = _reference_script_runs(tmp_path)
    measured = [cell for argv in parts for cell in cells(argv)]
    everything = cells(["--suite", "all", "--data", "synthetic", "--skip-checks", "--device", "cuda:0"])
    assert sorted(measured) == sorted(everything), (
        "scripts/reference_run.sh's parts differ from `kit run --suite all`: "
        f"missing {sorted(set(everything) - set(measured))}, extra or twice "
        f"{sorted(c for c in set(measured) if measured.count(c) > 1 or c not in everything)}")
    for argv in parts:  # the reference carries the torch cells' batch search; nothing else differs from the defaults
        assert ("--find-max-batch" in argv) == ("torch" in argv), argv


#: the parts of a reference, kept as its record (the folder's README says so): the H100 reference's
PARTS_FOLDERS = (ROOT / "references" / "h100" / "parts",)


def test_the_parts_of_the_references_carry_todays_engine_revisions():
    """references/h100/parts/ holds the parts of the H100 reference, as bundles and run folders (a part
    still going); a part measured by an engine revision that is no longer today's must be measured again
    before it joins, or stays in, its reference."""
    parts = sorted(p for folder in PARTS_FOLDERS for p in [*folder.glob("*-*/*.tar.gz"),
                                                          *(r.parent for r in folder.glob("*-*/*/results.json"))])
    if not parts:
        pytest.skip("no reference being measured")
    for bundle in parts:
        for engine, revs in _reference_revisions(bundle).items():
            assert revs == {engine_methods.revisions()[engine][0]}, (
                f"{bundle.relative_to(ROOT)}: {engine} r{sorted(revs)} is not today's "
                f"r{engine_methods.revisions()[engine][0]}: measure that part again")
