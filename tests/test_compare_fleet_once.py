"""Each run counted once in `kit compare` (fixture bundles, invented numbers): a copy of an input is
one input, a completed resume supersedes its interrupted bundle, a cell a machine did not measure is
never an outlier there, and a warning that holds for many inputs is one line naming them."""

from __future__ import annotations

import io
import json
import re

from rich.console import Console

from fixtures.cli import run_main
from fixtures.fleet import machine_cells, source
from fixtures.results.factory import bundle_members, make_env, make_results, make_run_dir, write_bundle
from kit.compare import render
from kit.compare.engine import build_comparison
from kit.compare.fleet.grouped import View
from kit.report.export import export_run


def _bundle(root, name: str, speed: float = 1.0, status: str = "complete", cells=None):
    res = make_results(cells if cells is not None else machine_cells(speed), make_env(host=f"fixture-{name}"),
                       status=status, run_id=f"FIXTURE-ONCE-{name}")
    return export_run(make_run_dir(root / f"runs-{status}", res, finish_journal=status == "complete"), root / "b")


def test_the_same_bundle_under_two_names_is_one_input(tmp_path, capsys, monkeypatch):
    a, b = _bundle(tmp_path, "a"), _bundle(tmp_path, "b", 1.1)
    copy = tmp_path / "copy-of-a.tar.gz"
    copy.write_bytes(a.read_bytes())
    code, out, err = run_main(["compare", str(a), str(b), str(copy), "--json", "-"], capsys, monkeypatch)
    assert code == 0, err
    data = json.loads(out)
    assert [s["machine"] for s in data["sources"]] == ["fixture-a", "fixture-b"]
    [line] = data["counted_once"]
    assert line.startswith("copy-of-a.tar.gz is the same input as ") and "identical content): counted once." in line
    assert not [w for w in data["warnings"] if w["kind"] == "same run"]
    code, out, err = run_main(["compare", str(a), str(b), str(copy)], capsys, monkeypatch)
    assert code == 0 and out.count("Counted once: copy-of-a.tar.gz is the same input as") == 1


def test_two_names_of_one_bundle_alone_are_nothing_to_compare_in_one_line(tmp_path, capsys, monkeypatch):
    a = _bundle(tmp_path, "a")
    copy = tmp_path / "copy.tar.gz"
    copy.write_bytes(a.read_bytes())
    code, out, err = run_main(["compare", str(a), str(copy)], capsys, monkeypatch)
    assert code == 2 and out == "" and "Traceback" not in err
    assert "Fewer than two different runs remain: nothing to compare." in " ".join(err.split())


def test_a_completed_resume_supersedes_its_interrupted_bundle(tmp_path, capsys, monkeypatch):
    done = _bundle(tmp_path, "a")
    half = _bundle(tmp_path, "a", status="interrupted", cells=machine_cells(1.0)[:3])
    assert half.name.endswith(".interrupted.tar.gz") and half.parent == done.parent
    other = _bundle(tmp_path, "b", 1.05)
    code, out, err = run_main(["compare", str(half), str(other), str(done), "--json", "-"], capsys, monkeypatch)
    assert code == 0, err
    data = json.loads(out)
    # the completed run takes the interrupted one's place as the baseline; the other run follows
    assert [(s["label"], s["machine"], s["interrupted"]) for s in data["sources"]] == [
        ("A", "fixture-a", False), ("B", "fixture-b", False)]
    assert data["counted_once"] == [f"{half.name} is superseded by {done.name}: the same run (run id FIXTURE-ONCE-a), "
                                    "resumed to completion; left out."]
    assert not [w for w in data["warnings"] if w["kind"] in ("same run", "interrupted")]


def test_the_same_run_id_with_different_content_stays_and_is_flagged(tmp_path):
    a = _bundle(tmp_path, "a")
    files = bundle_members(a)
    res = json.loads(files["results.json"])
    res["cells"] = res["cells"][:5]  # the same run, one cell fewer: not the same content
    files["results.json"] = json.dumps(res).encode()
    other = write_bundle(tmp_path / "edited.tar.gz", files)
    from kit.compare.engine import compare_paths

    cmp = compare_paths([a, other])
    assert len(cmp.sources) == 2 and cmp.counted_once == []
    [same] = [w for w in cmp.warnings if w.kind == "same run"]
    assert same.severity == "high" and "FIXTURE-ONCE-a" in same.message


def test_a_cell_a_machine_did_not_measure_is_not_measured_there_never_an_outlier():
    """node017 is slow everywhere it measured; it did not measure resnet50/amp-bf16: there it reads
    "missing: not measured", with no "outlier" and no stray comma."""
    from pathlib import Path

    from kit.bundle.envinfo import summarise_environment
    from kit.compare.load import Source, _label
    from kit.results.schema import RunResults

    sources = [source(i, f"node{i:03d}", 1.0 + 0.002 * (i % 5)) for i in range(12)]
    cells = [c for c in machine_cells(0.6) if c["cell_id"] != "cifar/resnet50/amp-bf16/torch"]
    res = RunResults.from_dict(make_results(cells, make_env(host="node017", gpu="NVIDIA H200"), run_id="FIXTURE-17"))
    res.environment["driver"] = "580.159.04"
    sources.append(Source(12, _label(12), Path("node017.tar.gz"), "bundle", res, res.environment,
                          summarise_environment(res.environment, res.config, res.cells), False))
    cmp = build_comparison(sources)
    buf = io.StringIO()
    render.print_rich(cmp, Console(file=buf, width=120, color_system=None), False, View(group_by="gpu", verbose=True))
    out = buf.getvalue()
    assert "node017: 40% below the other 12 NVIDIA H200 machines: everywhere, 5 of 5 cells" in " ".join(out.split())
    rows = [ln for ln in out[out.index("One table per cell"):].splitlines() if re.search(r"\bnode017\b", ln)]
    assert len(rows) == 6
    [missing] = [ln for ln in rows if "not measured" in ln]
    assert "outlier" not in missing and not re.search(r"\s,", missing) and missing.rstrip().endswith("not measured")
    assert sum(ln.rstrip().endswith("slower, outlier") for ln in rows) == 5


def test_a_warning_that_holds_for_many_inputs_is_one_line_naming_them():
    sources = [source(i, f"fixture-node{i:03d}") for i in range(30)]
    for s in sources[3:]:  # 27 inputs measured on a busy host
        for c in s.results.cells:
            c.host = {"cores": 2, "load_1m_start": 9.0, "load_1m_end": 9.5, "steal_pct": 0.0, "busy": None,
                      "source": "fixture: a busy host"}
    cmp = build_comparison(sources)
    busy = [w for w in cmp.warnings if w.kind == "busy"]
    assert len(busy) == 1 and busy[0].severity == "high"
    labels = "+".join(s.label for s in cmp.sources[3:])
    assert busy[0].message.startswith(f"27 inputs ({labels}): the host was busy during 162 cells in all")
