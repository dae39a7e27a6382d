"""A run's bundle with its report: the bundle package writes and reads bundles
(kit.bundle.export), this module renders what a bundle shows beside its data.

    run folder --kit.bundle.export.load_run_folder--> RunFolder
        --bundle_files: charts/*.svg (kit.report.charts) + report.html (kit.report.html.run_report)-->
        --kit.bundle.export.write_bundle--> results/<machine>_<gpu>_<stack>_<date>.tar.gz

The runner, ``kit bundle export``, ``kit bundle merge`` and ``kit launch`` make bundles here.
"""

from __future__ import annotations

from pathlib import Path

from kit.bundle import export as bundle_export
from kit.bundle import merge as bundle_merge
from kit.bundle.export import REPORT_NAME, RunFolder
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
