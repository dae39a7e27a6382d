"""A run's bundle with its report: the bundle package writes and reads bundles
(kit.bundle.export), this module renders what a bundle shows beside its data.

    run folder --kit.bundle.export.load_run_folder--> RunFolder
        --bundle_files: charts/*.svg (kit.report.charts) + report.html (kit.report.html.run_report)-->
        --kit.bundle.export.write_bundle--> results/<machine>_<gpu>_<stack>_<date>.tar.gz

The runner, ``kit bundle export``, ``kit bundle merge`` and ``kit launch`` make bundles here.

A bundle's report can also be rendered again from its data, by this kit (``kit bundle report``):

    bundle (untrusted: kit.bundle.safe_open.open_bundle verifies it)
        --bundle_report: charts + report.html from its results and environment-->
        --write_report--> <bundle name>.report.html beside it, or where --out says

so a bundle made by an older kit shows today's figures; the report.html inside it stays the one
rendered when it was made (its bytes are in its manifest).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from kit.bundle import export as bundle_export
from kit.bundle import merge as bundle_merge
from kit.bundle.export import REPORT_NAME, RunFolder, write_out
from kit.bundle.safe_open import Bundle, open_bundle
from kit.errors import KitError
from kit.report.charts import run_charts
from kit.report.html.run_report import render_run_report


def bundle_files(folder: RunFolder, bundle_name: str) -> dict:
    """The charts and the self-contained report.html of a run, as a bundle carries them."""
    charts = run_charts(folder.results)
    files = {name: svg.encode("utf-8") for name, svg in charts.items()}
    files[REPORT_NAME] = render_run_report(
        folder.results, folder.environment, interrupted=folder.interrupted, charts=charts, bundle_name=bundle_name,
    ).encode("utf-8")
    return files


def export_run(run_dir: Path, results_root: Path) -> Path:
    """The bundle of ``run_dir`` (finished or interrupted) in ``results_root``; see kit.bundle.export."""
    return bundle_export.export_run(run_dir, results_root, bundle_files)


def merge_bundles(paths: list, out_dir: Path, same_model: bool = False, planned=None) -> Path:
    """One bundle from several, with its own report; see kit.bundle.merge (``planned``: what a
    run config plans, kit.runner.plan.planned_cell_ids, for a source cut short)."""
    return bundle_merge.merge_bundles(paths, out_dir, same_model, render=bundle_files, planned=planned)


#: the name of a bundle's report rendered again: ``<bundle's name>.report.html``
REPORT_SUFFIX = ".report.html"
#: the ends of a bundle's name (an interrupted run's: ``.interrupted.tar.gz``, kept)
_BUNDLE_ENDS = (".tar.gz", ".tgz")


def bundle_report(bundle: Bundle) -> str:
    """The report.html of an opened bundle as this kit renders it from the bundle's results and
    environment (its charts drawn again too): today's figures, whatever kit made the bundle."""
    charts = run_charts(bundle.results)
    return render_run_report(bundle.results, bundle.environment, interrupted=bundle.interrupted, charts=charts,
                             bundle_name=bundle.path.name)


def report_path(bundle_path: Path, out: Path | None = None) -> Path:
    """Where ``kit bundle report`` writes: ``out`` where it names an .html file, else the folder ``out``
    (default: the bundle's own), with the bundle's name and REPORT_SUFFIX."""
    name = bundle_path.name
    for end in _BUNDLE_ENDS:
        if name.endswith(end):
            name = name[: -len(end)]
            break
    if out is not None and not out.is_dir() and out.suffix.lower() in (".html", ".htm"):
        return out
    return (bundle_path.parent if out is None else out) / f"{name}{REPORT_SUFFIX}"


def write_report(bundle_path: Path, out: Path | None = None) -> Path:
    """``kit bundle report``: open ``bundle_path`` as untrusted input (BundleError, exit 5, for one that
    fails verification; SchemaError, exit 4), render its report and write it (report_path; UsageError,
    exit 2, where that cannot be written). Returns the file written."""
    bundle = open_bundle(bundle_path)
    return write_out(report_path(Path(bundle_path), out), bundle_report(bundle).encode("utf-8"), "the report")


def run_report(bundle_path: Path, run_dir: Path | None, write: bool = True) -> str:
    """The line a run ends with, saying where its report is: the bundle's own report.html, copied into
    the run folder (``write``; else only where it is there already) so that it opens without
    unpacking the bundle; else the command that renders it."""
    page = Path(run_dir) / REPORT_NAME if run_dir is not None else None
    if page is not None and write:
        try:
            write_out(page, open_bundle(bundle_path).files[REPORT_NAME], "the report")
        except (OSError, KitError, KeyError):
            page = None
    if page is not None and page.is_file():
        return f"Report: {page} (open it in a browser)"
    return f"Report: inside the bundle; to open it: kit bundle report {shlex.quote(str(bundle_path))} --open"
