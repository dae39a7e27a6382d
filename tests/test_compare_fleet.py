"""`kit compare` for many machines (fixture fleets, invented numbers): the layout that fits any
number of machines, --cells and --metric, groups and outliers, the fleet page, and bad inputs among
many."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from fixtures.cli import run_main
from fixtures.fleet import fleet, machine_cells, source
from fixtures.results.factory import bundle_members, make_env, make_results, make_run_dir, write_bundle
from kit.compare import render
from kit.compare.engine import build_comparison
from kit.compare.fleet.grouped import View, narrow_cells, summarise_fleet
from kit.compare.fmt import fmt_speedup_estimate, fmt_throughput, fmt_vs_baseline
from kit.compare.stats import Sample, ratio_estimate
from kit.errors import UsageError
from kit.report.export import export_run
from kit.results import ratios

_FLEETS: dict = {}


def _cmp(n: int):
    if n not in _FLEETS:
        _FLEETS[n] = build_comparison(fleet(n))
    return _FLEETS[n]


def _rich(cmp, width: int, view: View | None = None) -> str:
    buf = io.StringIO()
    render.print_rich(cmp, Console(file=buf, width=width, color_system=None, force_terminal=False), False, view)
    return buf.getvalue()


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("n", [2, 8, 64, 500])
def test_cell_ids_and_figures_are_never_cut(n, width):
    cmp = _cmp(n)
    out = _rich(cmp, width)
    assert "…" not in out
    lines = out.splitlines()
    assert all(len(line) <= width for line in lines)
    for row in cmp.rows:
        assert row.label in out  # whole, on one line
        for s, mc in zip(cmp.sources, row.machines):
            assert fmt_throughput(mc.throughput, row.unit) in out
            if mc.vs_baseline is not None:
                assert fmt_vs_baseline(mc.vs_baseline) in out
    # the Inputs table: one line per machine, its label then its name
    for s in cmp.sources:
        mark = r"(?: \(baseline\))?"
        assert any(re.match(rf"^[\s│┃]*{s.label}{mark}\s+(?:[│┃]\s*)?{re.escape(s.env.machine)}\b", line) for line in lines), s.label


def test_few_machines_keep_one_column_each_and_a_fleet_gets_one_row_each():
    wide = _rich(_cmp(2), 220)
    assert "Time per epoch and throughput (median over repeats)" in wide and "One table per cell" not in wide
    narrow = _rich(_cmp(64), 120)
    assert "One table per cell, one row per machine, fastest first" in narrow
    assert "Time per epoch and throughput (median over repeats)" not in narrow
    # sorted fastest first: the rank-1 machine of a cell has the highest median throughput
    row = _cmp(64).rows[0]
    fastest = max(_cmp(64).sources, key=lambda s: row.machines[s.index].throughput.median)
    table = narrow[re.search(rf"^{re.escape(row.label)} *$", narrow, re.M).start():]
    first = next(line for line in table.splitlines() if re.match(r"^\s*1\s", line))
    assert f"{fastest.label} {fastest.env.machine}" in first


def test_cells_pattern_narrows_and_a_pattern_matching_nothing_is_a_usage_error():
    cmp = _cmp(8)
    only = narrow_cells(cmp, "cifar/resnet50/*")
    assert {r.cell_id for r in only.rows} == {"cifar/resnet50/fp32/torch", "cifar/resnet50/amp-fp16/torch",
                                              "cifar/resnet50/amp-bf16/torch"}
    out = _rich(only, 120)
    assert "cifar/resnet50/fp32/torch" in out and "cifar/resnet18" not in out
    with pytest.raises(UsageError, match="matches none"):
        narrow_cells(cmp, "lstm/*")


@pytest.mark.parametrize("metric,needle", [("speedup", "speedup over fp32 [95% CI]"), ("epoch-time", "s/epoch"),
                                           ("energy", "No cell has a energy figure")])
def test_metric_chooses_what_the_rows_show(metric, needle):
    cmp = _cmp(8)
    out = _rich(cmp, 80, View(metric=metric, rows=True))
    assert "…" not in out
    if metric == "energy":  # the fixture records no energy: no tables, and no invented figure
        assert "J/epoch" not in out and "No cell has an energy figure on any machine." in out
        return
    assert needle in out
    if metric == "speedup":
        row = next(r for r in cmp.rows if r.precision == "amp-fp16")
        assert fmt_speedup_estimate(row.machines[3].vs_fp32) in out


def test_energy_rows_are_lowest_first():
    cmp = build_comparison([source(i, f"fixture-node{i:03d}", 1.0, energy=1000.0 + 37 * ((i * 5) % 8)) for i in range(8)])
    out = _rich(cmp, 80, View(metric="energy", rows=True))
    table = out[out.index("cifar/resnet18/fp32/torch"):out.index("cifar/resnet18/amp-fp16/torch")]
    figures = [int(m.replace(",", "")) for m in re.findall(r"([\d,]+) J/epoch", table)]
    assert figures == sorted(figures) and len(figures) == 8 and figures[0] == 1000


def _planted_fleet():
    """24 H200s within ±1%, node017 38% slower, node005 noisy (same median, repeats ±30%), and
    8 H100s 40% slower than the H200s (a group of their own: slower, but not outliers)."""
    out = []
    for i in range(24):
        host = f"node{i:03d}"
        speed = 0.62 if host == "node017" else 1.0 + 0.01 * ((i % 5) - 2) / 2
        jitter = (1.0, 1.3, 0.7) if host == "node005" else (1.0, 1.01, 0.99)
        out.append(source(len(out), host, speed, jitter=jitter))
    for i in range(8):
        out.append(source(len(out), f"h100-{i}", 0.6 + 0.002 * i, gpu="NVIDIA H100"))
    return out


def test_group_by_gpu_names_exactly_the_slow_node_not_the_noisy_one():
    cmp = build_comparison(_planted_fleet())
    summary = summarise_fleet(cmp, "gpu", 5.0)
    assert set(summary.groups) == {"NVIDIA H200", "NVIDIA H100"}
    assert [f.name for f in summary.slow] == ["node017"]
    assert summary.findings[0].line == "node017: 38% below the other 23 NVIDIA H200 machines: everywhere, 6 of 6 cells"
    # the noisy node is a finding of its own, unstable, never slow
    assert [(f.name, f.kind) for f in summary.findings[1:]] == [("node005", "unstable")]
    # the noisy node: same median, so its ratio is near 1 and no cell calls it slower
    noisy = [m for gc in summary.cells for m in gc.members if m.source.env.machine == "node005"]
    assert len(noisy) == 6 and all(abs(m.vs_rest.ratio - 1) < 0.03 and not (m.vs_rest.significant and m.vs_rest.ratio < 0.95)
                                   for m in noisy)
    # each ratio is the two-machine estimate: this machine's repeats against the rest's pooled repeats
    gc = next(c for c in summary.cells if c.group == "NVIDIA H200")
    slow = next(m for m in gc.members if m.source.env.machine == "node017")
    cells = {s.env.machine: next(c for c in s.results.cells if c.cell_id == gc.row.cell_id) for s in summary.groups["NVIDIA H200"]}
    mine = ratios.metric_values(cells["node017"], "throughput_items_per_s")
    rest = [x for h, c in cells.items() if h != "node017" for x in ratios.metric_values(c, "throughput_items_per_s")]
    # (the rest's mean and spread come from the pool's sums less the machine's own: equal to the last digits)
    expected = ratio_estimate(Sample.of(mine), Sample.of(rest), ratios.ratio_of_medians(mine, rest))
    assert slow.vs_rest.ratio == expected.ratio and slow.vs_rest.verdict == expected.verdict
    for name in ("ci_low", "ci_high", "p_value", "df", "mean_ratio"):
        assert getattr(slow.vs_rest, name) == pytest.approx(getattr(expected, name), rel=1e-9), name
    assert gc.members[-1] is slow and gc.low <= gc.q1 <= gc.median <= gc.q3 <= gc.high
    # a higher threshold than the slowdown names nobody slow
    assert summarise_fleet(cmp, "gpu", 40.0).slow == []


def test_group_view_prints_the_finding_and_each_groups_spread():
    cmp = build_comparison(_planted_fleet())
    out = _rich(cmp, 120, View(group_by="gpu"))
    flat = " ".join(out.split())
    assert "node017: 38% below the other 23 NVIDIA H200 machines: everywhere, 6 of 6 cells" in flat
    out = _rich(cmp, 120, View(group_by="gpu", verbose=True))  # the per-cell tables too
    cells = out[out.index("One table per cell"):]
    rows = [line for line in cells.splitlines() if re.match(r"^\s*\d+\s+\S+ node017 ", line)]
    assert len(rows) == 6 and all(line.rstrip().endswith("slower, outlier") for line in rows)
    assert cells.count(", outlier") == 6  # node017's six rows, and no other machine's
    flat = " ".join(out.split())
    assert "cifar/resnet18/fp32/torch · gpu NVIDIA H100: 8 NVIDIA H100 machines; median" in flat and "IQR" in flat
    assert "÷ group [95% CI]" in out and "…" not in out
    md = render.to_markdown(cmp, False, View(group_by="gpu", verbose=True))
    assert "- node017: 38% below" in md and "### cifar/resnet50/amp-bf16/torch · gpu NVIDIA H200" in md
    data = json.loads(render.to_json(cmp, View(group_by="gpu")))
    assert [(f["machine"], f["kind"]) for f in data["fleet"]["findings"]] == [("node017", "slow"), ("node005", "unstable")]
    assert data["fleet"]["rule"].startswith("a machine is slow when") and data["fleet"]["summary"][0]["machines"][0]["machine"] == "node017"


def test_bad_options_are_usage_errors():
    for kw in ({"metric": "speed"}, {"group_by": "rack"}, {"outlier_pct": 120}):
        with pytest.raises(UsageError):
            View(**kw)


# --- the fleet page -----------------------------------------------------------------------------------

def test_fleet_page_is_ranked_bars_at_a_fixed_width_and_small():
    from kit.report.html.compare import render_compare_page

    cmp = build_comparison(_planted_fleet())
    page = render_compare_page(cmp, View(verbose=True))
    assert "<script" not in page and "default-src 'none'" in page
    assert page.count('class="chart ranked"') == 6 * 2  # six cells, two GPU models
    assert "node017: 38% below the other 23 NVIDIA H200 machines" in page
    assert page.count('class="bar outlier"') == 6  # node017 in each cell
    # by default: the summary and a heatmap per group, no per-cell chart
    summary = render_compare_page(cmp)
    assert summary.count('class="chart heatmap"') == 2 and 'class="chart ranked"' not in summary
    assert summary.count('class="outlier"') == 3  # node017's three precisions, outlined
    big = render_compare_page(_cmp(200) if 200 in _FLEETS else build_comparison(fleet(200)))
    assert len(big.encode()) <= 2_000_000
    assert 'width="1060"' in big and not re.search(r'<svg[^>]* width="(?!1060")\d{5,}', big)


# --- bad inputs among many ------------------------------------------------------------------------------

def test_a_corrupt_a_tampered_and_a_hostile_bundle_among_many_are_refused_and_the_rest_compared(tmp_path, capsys, monkeypatch):
    import tarfile

    res = make_results(machine_cells(1.0), make_env(host="fixture-node000"), run_id="FIXTURE-FLEET-0000")
    template = bundle_members(export_run(make_run_dir(tmp_path / "runs", res), tmp_path / "first"))
    good = []
    for i in range(97):
        files = dict(template)
        r = make_results(machine_cells(1.0 + 0.002 * i), make_env(host=f"fixture-node{i:03d}"), run_id=f"FIXTURE-FLEET-{i:04d}")
        files["results.json"] = json.dumps(r).encode()
        files["env.json"] = json.dumps(r["environment"]).encode()
        good.append(write_bundle(tmp_path / f"node{i:03d}.tar.gz", files))
    corrupt = tmp_path / "corrupt.tar.gz"
    corrupt.write_bytes(b"\x1f\x8b" + b"not really gzip" * 10)
    tampered_files = dict(template)
    tampered_files["manifest.json"] = __import__("fixtures.results.factory", fromlist=["true_manifest"]).true_manifest(template)
    tampered_files["results.json"] = template["results.json"].replace(b'"complete"', b'"completE"', 1)
    tampered = write_bundle(tmp_path / "tampered.tar.gz", tampered_files, rehash=False)
    link = tarfile.TarInfo("b/escape")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    hostile = write_bundle(tmp_path / "hostile.tar.gz", dict(template), extra=(link,))
    inputs = [good[0], corrupt, *good[1:50], tampered, *good[50:], hostile]
    code, out, err = run_main(["compare", *map(str, inputs), "--json", "-"], capsys, monkeypatch)
    assert code == 5, err
    data = json.loads(out)
    assert len(data["sources"]) == 97 and {s["machine"] for s in data["sources"]} == {f"fixture-node{i:03d}" for i in range(97)}
    assert [Path(r["path"]).name for r in data["refused"]] == ["corrupt.tar.gz", "tampered.tar.gz", "hostile.tar.gz"]
    assert "Refused: 3 inputs could not be read; the other 97 were compared" in err
    for name in ("corrupt.tar.gz", "tampered.tar.gz", "hostile.tar.gz"):
        [line] = [line for line in err.splitlines() if f"refused {tmp_path / name}:" in line]
        assert len(line.split(": ", 1)[1]) > 10  # with its reason
    assert "Traceback" not in err


def test_a_refused_baseline_is_an_error_and_so_is_one_input_left(tmp_path, capsys, monkeypatch):
    res = make_results(machine_cells(1.0), make_env(), run_id="FIXTURE-FLEET-0000")
    ok = export_run(make_run_dir(tmp_path / "runs", res), tmp_path / "b")
    bad = tmp_path / "bad.tar.gz"
    bad.write_text("not a bundle")
    code, out, err = run_main(["compare", str(bad), str(ok)], capsys, monkeypatch)
    assert code == 5 and "not a gzip file" in err and out == ""


# --- a stranger's strings -------------------------------------------------------------------------------

HOSTILE_HOST = "vm\x1b]0;owned\x07\x1b[2J"
HOSTILE_GPU = "<script>alert(1)</script> GPU"
HOSTILE_REASON = "<img src=x onerror=alert(1)> \x1b[31mred\x9b2J"
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A bundle (made by the kit's own export: every hash in its manifest true) whose env.json host
    name carries an OSC title, a BEL and a clear-screen, whose GPU name is a <script>, and whose
    skipped cell's reason is an <img onerror>; and five ordinary ones."""
    from fixtures.results.factory import make_cell

    root = tmp_path_factory.mktemp("hostile")
    cells = machine_cells(1.0) + [make_cell("resnet34", "fp32", status="skipped", reason=HOSTILE_REASON)]
    bad = export_run(make_run_dir(root / "runs", make_results(cells, make_env(host=HOSTILE_HOST, gpu=HOSTILE_GPU),
                                                              run_id="FIXTURE-HOSTILE")), root / "b")
    others = [export_run(make_run_dir(root / "runs", make_results(machine_cells(1.0 + 0.05 * i), make_env(host=f"fixture-node{i}"),
                                                                  run_id=f"FIXTURE-OK-{i}")), root / "b") for i in range(5)]
    return bad, others


def _clean(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert not _CONTROLS.search(text.replace("\n", "").replace("\t", "")), repr(_CONTROLS.search(text.replace("\n", "")))


def test_a_hostile_bundle_verifies_and_show_prints_it_inert(hostile, capsys, monkeypatch):
    bad, _ = hostile
    code, out, err = run_main(["bundle", "verify", str(bad)], capsys, monkeypatch)
    assert code == 0 and "verified" in out
    code, out, err = run_main(["bundle", "show", str(bad)], capsys, monkeypatch)
    assert code == 0, err
    _clean(out + err)
    assert "vm]0;owned" not in out and "vm" in out and "alert(1)" in out  # the text is there, made inert


@pytest.mark.parametrize("fleet_size", [2, 6])
@pytest.mark.parametrize("fmt", ["rich", "--markdown", "--csv", "--json"])
def test_compare_prints_a_hostile_bundles_text_inert_in_every_format(hostile, capsys, monkeypatch, fmt, fleet_size):
    bad, others = hostile
    args = ["compare", str(others[0]), str(bad), *map(str, others[1:fleet_size - 1])] + ([] if fmt == "rich" else [fmt, "-"])
    code, out, err = run_main(args, capsys, monkeypatch)
    assert code == 0, err
    _clean(out + err)
    if fmt == "--markdown":
        assert "<script" not in out and "<img" not in out and "&lt;script&gt;" in out
    if fmt == "--json":
        assert json.loads(out)["sources"][1]["machine"] == "vm"


@pytest.mark.parametrize("fleet_size", [2, 6])
def test_the_compare_page_renders_for_a_hostile_host_name(hostile, tmp_path, capsys, monkeypatch, fleet_size):
    bad, others = hostile
    page = tmp_path / "cmp.html"
    code, out, err = run_main(["compare", str(others[0]), str(bad), *map(str, others[1:fleet_size - 1]),
                               "--html", str(page)], capsys, monkeypatch)
    assert code == 0, err  # once an xml ParseError in the SVG charts
    html = page.read_text()
    _clean(html)
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; GPU" in html


# --- the fleet page in a real browser ---------------------------------------------------------------------

@pytest.mark.browser
def test_the_fleet_page_of_200_machines_fits_1280_pixels_in_chromium(tmp_path):
    """No horizontal scroll at 1,280 px: the page's own layout measured by Chromium. The measuring
    script goes into a copy of the page (the page itself has no script and its CSP forbids one)."""
    from test_report_html import _browser, _console_errors

    from kit.report.html.compare import render_compare_page

    srcs = fleet(200, spread=(0.9, 1.1))
    srcs[17] = source(17, "fixture-node017-with-a-rather-long-host-name.cluster.example.org", 0.6)
    html = render_compare_page(build_comparison(srcs))
    assert len(html.encode()) <= 2_000_000
    page = tmp_path / "fleet.html"
    page.write_text(html)
    dom = _browser(tmp_path, page.as_uri(), "--dump-dom", "--window-size=1280,900")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('class="chart heatmap"') == 1 and _console_errors(dom.stderr) == []
    probe = tmp_path / "probe.html"
    script = ("<script>window.addEventListener('load', () => { const d = document.documentElement; "
              "document.body.setAttribute('data-scroll-width', d.scrollWidth); });</script>")
    probe.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html).replace("</body>", script + "</body>"))
    dom = _browser(tmp_path, probe.as_uri(), "--dump-dom", "--window-size=1280,900", "--virtual-time-budget=5000")
    width = int(re.search(r'data-scroll-width="(\d+)"', dom.stdout).group(1))
    assert 1000 <= width <= 1280


def test_a_terminal_sees_the_verdicts_in_colour_and_otherwise_the_same_rows():
    cmp = _cmp(64)
    buf = io.StringIO()
    render.print_rich(cmp, Console(file=buf, width=120, force_terminal=True, color_system="standard"), False)
    coloured = buf.getvalue()
    assert "\x1b[32mfaster\x1b[0m" in coloured
    plain = re.sub(r"\x1b\[[0-9;]*m", "", coloured)
    start = plain.index(cmp.rows[0].label)
    assert plain[start:] == _rich(cmp, 120)[_rich(cmp, 120).index(cmp.rows[0].label):]


def test_a_table_of_each_columns_widest_rows_measures_as_the_whole_table():
    """kit.compare.console.widest: the Inputs tables are measured on the few machines holding each
    column's widest text (a fleet's 200 rows measured one by one took 0.15 s); rich makes a column as
    wide as its widest cell, so the width is the whole table's, wide characters and folded lines too."""
    from rich.table import Table

    from kit.compare.console import natural_width, widest

    rows = [("A", "node-1", "x" * 3), ("B", "節點-長い名前", "y"), ("C (baseline)", "n", "two\nlines-but-longest-here"),
            ("D", "node-22", "z" * 12), ("E", "node-22", "q")]
    console = Console(file=io.StringIO(), width=80)

    def table(of):
        t = Table(title="Inputs")
        for col in ("", "machine", "file"):
            t.add_column(col, overflow="fold")
        for r in of:
            t.add_row(*r)
        return t

    few = widest(rows, lambda r: r)
    assert few == [rows[1], rows[2]]  # in their order; "C (baseline)", the CJK name and the long line
    assert natural_width(console, table(few)) == natural_width(console, table(rows))


@pytest.mark.parametrize("odd", ["label", "machine", "gpu_model", "file"])
def test_the_inputs_table_is_chosen_as_before_when_one_machine_has_the_long_text(odd, monkeypatch):
    """One machine among 40 with a long text in one column: the Inputs table measured on the widest
    rows makes the same choice (today's table, or the fleet's compact one) as measuring every row."""
    import dataclasses

    from kit.compare.fleet import views as fleet_views

    sources = fleet(40)
    s = sources[17]
    if odd == "label":
        s.label = "Q" * 30
    elif odd == "file":
        s.path = Path("f" * 70 + ".tar.gz")
    elif odd == "machine":
        s.env = dataclasses.replace(s.env, machine="長" * 20)
    else:
        s.env = dataclasses.replace(s.env, gpu="NVIDIA H200 NVL with a long product name")
    cmp = build_comparison(sources)
    for width in (80, 120, 160, 220):
        fast = _rich(cmp, width)
        with monkeypatch.context() as m:  # every row measured, as before
            m.setattr(render, "widest", lambda items, cells: list(items))
            m.setattr(fleet_views, "widest", lambda items, cells: list(items))
            assert _rich(cmp, width) == fast, width
