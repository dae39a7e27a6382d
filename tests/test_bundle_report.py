"""`kit bundle report`: a bundle's report.html rendered by today's kit from the bundle's data (opened as
untrusted input and verified), written where the user asks and opened in a browser if asked; the
line `kit run` ends with, saying where the run's report is; and the reports shipped beside the
bundles under references/, which show each cell's measured energy per epoch. Fixture bundles hold
invented numbers (tests/fixtures/results/factory.py); the shipped ones are real measurements."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import webbrowser
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fixtures.cli import run_main
from fixtures.results.factory import bundle_members, make_cell, make_env, make_results, make_run_dir, write_bundle
from kit.bundle.safe_open import open_bundle
from kit.compare import measures
from kit.report.export import bundle_report, export_run

REPO = Path(__file__).resolve().parents[1]
OLD_REPORT = b"<!DOCTYPE html><html><body><p>an old report: 12,000 J/epoch</p></body></html>"


class _Tables(HTMLParser):
    """Every <table> of a page as rows of cell texts."""

    def __init__(self):
        super().__init__()
        self.tables: list = []
        self.cell: list | None = None
        self.row: list | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.row = []
            self.tables[-1].append(self.row)
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.row.append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def energy_column(page: str) -> dict:
    """The report's GPU telemetry table: each cell's J/epoch as printed."""
    parser = _Tables()
    parser.feed(page)
    for table in parser.tables:
        if table and "J/epoch" in table[0]:
            col = table[0].index("J/epoch")
            return {row[0]: row[col] for row in table[1:]}
    return {}


@pytest.fixture
def stale_bundle(tmp_path) -> Path:
    """A fixture run's bundle whose report.html is an old page (as a bundle made by an older kit
    carries), its manifest true: only its data are today's."""
    cells = [make_cell(precision=p, util_pct=60.0, energy_j_per_epoch=e) for p, e in (("fp32", 95.0), ("amp-fp16", 41.0))]
    made = export_run(make_run_dir(tmp_path / "runs", make_results(cells, make_env())), tmp_path / "made")
    files = bundle_members(made)
    files["report.html"] = OLD_REPORT
    (tmp_path / "in").mkdir()
    return write_bundle(tmp_path / "in" / made.name, files)


def test_bundle_report_renders_todays_report_from_the_bundles_data_beside_it(stale_bundle, capsys, monkeypatch):
    code, out, err = run_main(["bundle", "report", str(stale_bundle)], capsys, monkeypatch)
    assert code == 0, err
    page = stale_bundle.with_name(stale_bundle.name[: -len(".tar.gz")] + ".report.html")
    assert out.strip() == str(page) and page.is_file()
    html = page.read_text(encoding="utf-8")
    assert "an old report" not in html and html.startswith("<!DOCTYPE html>")
    # today's page of the bundle's data: its cells, each cell's measured energy per epoch
    assert energy_column(html) == {"cifar/resnet18/fp32/torch": "95", "cifar/resnet18/amp-fp16/torch": "41"}
    assert html.split("<footer>")[0] == bundle_report(open_bundle(stale_bundle)).split("<footer>")[0]
    assert bundle_members(stale_bundle)["report.html"] == OLD_REPORT  # the bundle is read, never changed


def test_bundle_report_writes_into_the_folder_or_the_html_file_out_names(stale_bundle, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "reports" / "new"
    code, out, err = run_main(["bundle", "report", str(stale_bundle), "--out", str(folder)], capsys, monkeypatch)
    assert code == 0, err
    assert out.strip() == str(folder / (stale_bundle.name[: -len(".tar.gz")] + ".report.html"))
    page = tmp_path / "mine.html"
    code, out, err = run_main(["bundle", "report", str(stale_bundle), "--out", str(page)], capsys, monkeypatch)
    assert code == 0 and out.strip() == str(page) and "cifar/resnet18/amp-fp16/torch" in page.read_text(encoding="utf-8")


def test_a_tampered_bundle_gets_no_report(stale_bundle, tmp_path, capsys, monkeypatch):
    files = bundle_members(stale_bundle)
    files["results.json"] = files["results.json"].replace(b'"fp32"', b'"fp16"', 1)
    bad = write_bundle(tmp_path / "bad.tar.gz", files, rehash=False)
    code, out, err = run_main(["bundle", "report", str(bad), "--out", str(tmp_path / "out")], capsys, monkeypatch)
    assert code == 5 and "results.json: sha256 does not match" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists() and out == ""


def test_an_out_that_cannot_be_written_is_one_line_and_exit_2(stale_bundle, tmp_path, capsys, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder\n")
    code, out, err = run_main(["bundle", "report", str(stale_bundle), "--out", str(tmp_path / "a-file" / "x")],
                              capsys, monkeypatch)
    assert code == 2 and "cannot write the report to" in err and "Give --out a folder you can write in" in err
    assert "Traceback" not in err and out == ""


def test_open_shows_the_written_report_in_the_web_browser(stale_bundle, tmp_path, capsys, monkeypatch):
    opened = []
    monkeypatch.setattr(webbrowser, "open", lambda url, *a, **k: opened.append(url) or True)
    code, out, err = run_main(["bundle", "report", str(stale_bundle), "--out", str(tmp_path), "--open"], capsys, monkeypatch)
    assert code == 0, err
    page = Path(out.strip())
    assert opened == [page.resolve().as_uri()] and page.is_file()
    monkeypatch.setattr(webbrowser, "open", lambda url, *a, **k: False)  # no browser on this machine
    code, out, err = run_main(["bundle", "report", str(stale_bundle), "--out", str(tmp_path), "--open"], capsys, monkeypatch)
    assert code == 0 and f"No web browser found to open it here; open {page} in one." in " ".join(err.split())


FAKE_BENCH = Path(__file__).resolve().parent / "fixtures" / "fake_bench.py"


def test_kit_run_ends_by_saying_where_its_report_is(tmp_path):
    """A run (the fake benchmark of tests/fixtures/fake_bench.py) prints its bundle on stdout and, last on
    stderr, its report: the bundle's own report.html, copied into the run folder; a resume of the
    complete run names the same file."""
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(FAKE_BENCH, site / "sitecustomize.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]), KIT_FAKE_BENCH="1",
               KIT_RESULTS_DIR=str(tmp_path / "results"), KIT_DATA_DIR=str(tmp_path / "data"), COLUMNS="200")

    def kit(*args):
        return subprocess.run([sys.executable, "-m", "kit", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)

    done = kit("run", "--data", "synthetic", "--device", "cpu", "-m", "resnet18", "-p", "fp32", "-e", "torch",
               "--repeats", "1", "--steps", "1", "--skip-checks")
    assert done.returncode == 0, done.stderr[-2000:]
    bundle = Path(done.stdout.strip())
    (run_dir,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    page = run_dir / "report.html"
    assert done.stderr.rstrip().splitlines()[-1] == f"Report: {page} (open it in a browser)"
    assert page.read_bytes() == open_bundle(bundle).files["report.html"]
    again = kit("run", "--resume", str(run_dir))
    assert again.returncode == 0 and again.stderr.rstrip().splitlines()[-1] == f"Report: {page} (open it in a browser)"


# --------------------------------------------------------------------------- the shipped reports

SHIPPED = sorted((REPO / "references").rglob("*.tar.gz"))


def _beside(bundle: Path) -> Path:
    return bundle.with_name(bundle.name[: -len(".tar.gz")] + ".report.html")


def test_every_shipped_bundle_has_its_report_rendered_beside_it():
    if not SHIPPED:
        pytest.skip("no shipped bundles in this checkout")
    missing = [str(b.relative_to(REPO)) for b in SHIPPED if not _beside(b).is_file()]
    assert not missing, f"render them: python scripts/doc_outputs.py --write ({missing})"


@pytest.mark.parametrize("bundle", SHIPPED, ids=lambda p: str(p.relative_to(REPO / "references")))
def test_a_shipped_bundles_rendered_report_shows_each_cells_measured_energy_per_epoch(bundle):
    """The report beside a shipped bundle shows each cell's energy per epoch as the run measured it
    (kit.compare.measures.energy_per_epoch), where the report inside some of them shows the whole cell's
    energy over its repeats."""
    cells = [c for c in open_bundle(bundle).results.cells if c.status == "ok" and measures.telemetry(c)]
    if not cells:
        pytest.skip("no cell of this bundle recorded GPU telemetry")
    shown = energy_column(_beside(bundle).read_text(encoding="utf-8"))
    for c in cells:
        e = measures.energy_per_epoch(c)
        assert shown.get(c.cell_id) == ("—" if e is None else f"{e:,.0f}"), c.cell_id
