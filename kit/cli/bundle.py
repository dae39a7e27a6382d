"""`kit bundle`: make, check and read results bundles (.tar.gz)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(
    help="Make, verify and summarise results bundles (the .tar.gz each run leaves in results/).",
    no_args_is_help=True,
)


@app.command("export")
def export(
    run_dir: Path = typer.Argument(..., help="A run folder (results/<run id>/), finished or stopped (not one a run is still writing)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for the bundle (default: the run folder's parent)."),
) -> None:
    """Make a bundle from a run folder (rebuilding results from the journal if the run died); a run still running is refused."""
    from kit.runner.service import export_bundle

    typer.echo(str(export_bundle(run_dir, out)))


@app.command("verify")
def verify(bundle: Path = typer.Argument(..., help="The bundle (.tar.gz) to check.")) -> None:
    """Check a bundle's structure, safety, schema version and every file's sha256."""
    from kit.bundle.safe_open import open_bundle
    from kit.report.show import verify_lines

    b = open_bundle(bundle)
    for line in verify_lines(b):
        typer.echo(f"ok  {line}")
    from kit.bundle.inert import inert

    typer.echo(f"{inert(bundle.name)}: verified")


@app.command("show")
def show(
    bundle: Path = typer.Argument(..., help="The bundle (.tar.gz) to summarise."),
    cell: Optional[List[str]] = typer.Option(None, "--cell", metavar="PATTERN",
                                             help="Only the cells (and batch curves) whose id matches this shell "
                                                  "pattern, e.g. 'cifar/resnet50/*'; give it again for more."),
) -> None:
    """Print the environment headline and each cell's median throughput, epoch time and spread."""
    from rich.console import Console

    from kit.bundle.safe_open import open_bundle
    from kit.report.show import print_show

    print_show(open_bundle(bundle), Console(), cell or None)


@app.command("report")
def report(
    bundle: Path = typer.Argument(..., help="The bundle (.tar.gz) whose report to render."),
    out: Optional[Path] = typer.Option(None, "--out", help="A folder for <bundle name>.report.html (made if missing), "
                                                          "or an .html file to write (default: beside the bundle)."),
    open_it: bool = typer.Option(False, "--open", help="Open the report in the web browser as well."),
) -> None:
    """Render a bundle's report.html with this kit, from the bundle's data, and print where it is."""
    from kit.report.export import write_report

    page = write_report(bundle, out)
    typer.echo(str(page))
    if open_it:
        import webbrowser

        if not webbrowser.open(page.resolve().as_uri()):
            typer.echo(f"No web browser found to open it here; open {page} in one.", err=True)


@app.command("merge")
def merge(
    bundles: List[Path] = typer.Argument(..., help="Two or more bundles measured on the same machine."),
    out: Path = typer.Option(Path("results"), "--out", help="Folder for the merged bundle."),
    same_model: bool = typer.Option(False, "--same-model", help="Accept bundles from other machines with the same GPU models and driver (recorded per source)."),
) -> None:
    """Merge bundles from one machine (e.g. several kit runs of one session) into one bundle."""
    from kit.report.export import merge_bundles
    from kit.runner.plan import planned_cell_ids

    typer.echo(f"Merged bundle: {merge_bundles(list(bundles), out, same_model=same_model, planned=planned_cell_ids)}")
