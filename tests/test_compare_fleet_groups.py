"""Every group of a fleet is compared within itself, and a group (or cells of it) left out of a view is
named there with the reason. SYNTHETIC fleets (invented numbers): a set of bundles that recorded no
method (as kit 0.1.0 wrote them) of one GPU model, beside today's bundles of another; the shipped
reference bundles (real measurements) recorded in one index."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from rich.console import Console

from fixtures.cli import run_main
from fixtures.fleet_grid import CELLS, machine
from kit.bundle.export import RunFolder, build_bundle
from kit.compare import render
from kit.compare.engine import OTHER_METHOD, build_comparison
from kit.compare.fleet.grouped import View, summarise_fleet
from kit.compare.fleet.summary import summary_tables
from kit.report.html.compare import render_compare_page

ROOT = Path(__file__).resolve().parents[1]


def mixed(n_old: int = 6, n_new: int = 6, seed: int = 0, **special) -> list:
    """``n_old`` H200s whose cells record no method (the baseline among them), then ``n_new`` H100s of
    today's kit; ``special``: index -> more keyword arguments of fixtures.fleet_grid.machine."""
    rng = random.Random(seed)
    out = []
    for i in range(n_old + n_new):
        old = i < n_old
        kw = {"gpu": "NVIDIA H200" if old else "NVIDIA H100", "revision": None if old else 7,
              "speed": (1.0 if old else 0.62) * rng.uniform(0.99, 1.01), **special.get(f"m{i}", {})}
        out.append(machine(i, rng, **kw))
    return out


def test_each_gpu_group_judges_methods_within_itself():
    cmp = build_comparison(mixed(), group_by="gpu")
    summary = summarise_fleet(cmp, "gpu", 5.0)
    tables = {t.group: len(t.rows) for t in summary_tables(summary)}
    assert tables == {"NVIDIA H200": 6, "NVIDIA H100": 6}
    per_group = {g: len(summary.cells_of(g)) for g in summary.groups}
    assert per_group == {"NVIDIA H200": len(CELLS), "NVIDIA H100": len(CELLS)}
    assert [x.line for x in summary.left_out] == []
    # the groups measured every cell by different methods: said once, and no ratio to the baseline across them
    [w] = [w.message for w in cmp.warnings if w.kind == "group methods"]
    assert w.startswith(f"the gpu groups measured {len(CELLS)} cell(s) by different methods")
    assert not [w for w in cmp.warnings if w.kind == "method"]
    h100 = [mc for r in cmp.rows for mc in r.machines[6:]]
    assert all(mc.status == "ok" and mc.vs_baseline is None and mc.baseline_method_differs for mc in h100)


def test_without_groups_the_baseline_judges_every_cell_and_the_fleet_page_names_the_group_left_out():
    """Compared against the method-less baseline, the H100s' cells are measured otherwise; the fleet
    page (grouped by GPU model) names the group it cannot compare, and why."""
    cmp = build_comparison(mixed())
    assert all(mc.status == OTHER_METHOD for r in cmp.rows for mc in r.machines[6:])
    summary = summarise_fleet(cmp, "gpu", 5.0)
    assert [x.line for x in summary.left_out] == [
        f"gpu NVIDIA H100 (6 machines): left out entirely: none of its {len(CELLS)} cells compared: "
        f"{len(CELLS)} measured by different methods on its machines"]
    page = render_compare_page(cmp, View())
    assert "Left out of the groups&#x27; comparisons" in page and "gpu NVIDIA H100 (6 machines): left out entirely" in page


def test_a_machine_measured_otherwise_than_its_group_is_left_out_of_its_cells_and_said_in_every_view():
    """One H100 measured by revision 6 among five of revision 7; one A100 alone."""
    sources = mixed(n_new=6, m11={"revision": 6})
    sources.append(machine(12, random.Random(1), gpu="NVIDIA A100"))
    cmp = build_comparison(sources, group_by="gpu")
    summary = summarise_fleet(cmp, "gpu", 5.0)
    n = len(CELLS)
    want = [f"gpu NVIDIA H100 ({6} machines): {n} of its {n} cells compared; {n} machine cells measured otherwise "
            "than the rest of the group left out of cells it compares",
            f"gpu NVIDIA A100 (1 machine): left out entirely: one machine, nothing to compare it against ({n} cells)"]
    assert [x.line for x in summary.left_out] == want
    view = View(group_by="gpu")
    out = io.StringIO()
    render.print_rich(cmp, Console(file=out, width=400, color_system=None), False, view)
    text = out.getvalue()
    assert all(line in text for line in want), text[:2000]
    markdown = render.to_markdown(cmp, False, view)
    assert all(line in markdown for line in want)
    data = json.loads(render.to_json(cmp, view))
    assert [x["line"] for x in data["fleet"]["left_out"]] == want
    assert data["fleet"]["left_out"][1]["entirely"] is True
    page = render_compare_page(cmp, view)
    assert all(line in page for line in want)


def _bundle(folder: Path, src) -> Path:
    stem = f"{src.env.machine}_{src.env.gpu.replace(' ', '-')}"
    path = folder / f"{stem}.tar.gz"
    path.write_bytes(build_bundle(RunFolder(folder, src.results, src.environment), stem,
                                  lambda rf, name: {"report.html": b"<html>synthetic</html>"},
                                  created_at=src.results.started_at))
    return path


def test_kit_compare_index_group_by_gpu_shows_both_groups(tmp_path, capsys, monkeypatch):
    """Through the command line: four method-less H200 bundles and four of today's H100s in one index."""
    paths = [str(_bundle(tmp_path, s)) for s in mixed(4, 4)]
    index = str(tmp_path / "index.sqlite")
    code, _, err = run_main(["index", "add", "--index", index, *paths], capsys, monkeypatch)
    assert code == 0, err
    code, out, err = run_main(["compare", "--index", index, "--group-by", "gpu", "--json", "-"], capsys, monkeypatch)
    assert code == 0, err
    fleet = json.loads(out)["fleet"]
    assert [t["group"] for t in fleet["summary"]] == ["NVIDIA H200", "NVIDIA H100"]
    assert fleet["left_out"] == []
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_main(["compare", "--index", index, "--group-by", "gpu"], capsys, monkeypatch)
    assert code == 0 and "gpu NVIDIA H200: 4 NVIDIA H200 machines" in out and "gpu NVIDIA H100: 4 NVIDIA H100 machines" in out


def test_an_index_of_every_shipped_reference_shows_both_gpu_groups(tmp_path, capsys, monkeypatch):
    refs = sorted(str(p) for d in ("h100", "h200") for p in (ROOT / "references" / d).rglob("*.tar.gz"))
    if not refs:
        pytest.skip("no shipped reference bundles in this checkout")
    index = str(tmp_path / "refs.sqlite")
    code, _, err = run_main(["index", "add", "--index", index, *refs], capsys, monkeypatch)
    assert code == 0, err
    code, out, err = run_main(["compare", "--index", index, "--group-by", "gpu", "--json", "-"], capsys, monkeypatch)
    assert code == 0, err
    fleet = json.loads(out)["fleet"]
    groups = {t["group"]: len(t["machines"]) for t in fleet["summary"]}
    assert groups == {"NVIDIA H200": 36, "NVIDIA H100 80GB HBM3": 26}
    # what each group leaves out is said, never a group dropped without a word
    said = {x["group"] for x in fleet["left_out"]}
    compared = {g for g in groups}
    assert said <= compared and all(not x["entirely"] for x in fleet["left_out"])


def test_group_by_host_keeps_two_machines_of_one_name_apart():
    """Clouds call every machine vm: grouped by host, two machines named vm with their own host ids
    are two groups, each named with its id."""
    rng = random.Random(3)
    sources = []
    for i in range(6):
        src = machine(i, rng, env_extra={"host": {"name": "vm", "host_id": f"h-{i % 2:04d}"}})
        sources.append(src)
    from kit.bundle.envinfo import summarise_environment

    for s in sources:  # the summary read from the record, as a bundle's is
        s.env = summarise_environment(s.environment, s.results.config, s.results.cells)
    summary = summarise_fleet(build_comparison(sources, group_by="host"), "host", 5.0)
    assert sorted(summary.groups) == ["vm (host id h-0000)", "vm (host id h-0001)"]
    assert [len(m) for m in summary.groups.values()] == [3, 3]
