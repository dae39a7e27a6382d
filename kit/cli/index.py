"""`kit index`: a results index (one SQLite file): add bundles once, list them, follow a machine over time.

`kit compare --index FILE` compares from it (:func:`kit.index.query.comparison`).
docs/results-index.md is the guide.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from kit.cli.output import Output, output_options

app = typer.Typer(
    help="A results index (one SQLite file, docs/results-index.md): add verified bundles once, list them, "
         "follow a machine's runs over time; `kit compare --index FILE` compares from it.",
    no_args_is_help=True,
)

DEFAULT_INDEX = Path("results/index.sqlite")
_INDEX_HELP = "The index file (default results/index.sqlite, or $KIT_INDEX)."
WHERE_HELP = "Only runs whose FIELD holds VALUE as a word, e.g. gpu=H200 (repeatable; fields: gpu, host, driver, stack, torch, kit)."
SINCE_HELP = "Only runs started on or after this date (YYYY-MM-DD, UTC)."


def _index_option():
    return typer.Option(DEFAULT_INDEX, "--index", "-i", envvar="KIT_INDEX", help=_INDEX_HELP)


def _err():
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def _t(value) -> str:
    """A bundle's string, inert for the terminal."""
    from kit.bundle.inert import inert

    return inert("" if value is None else value)


def _s(value) -> str:
    """A bundle's string in a table: inert, and shortened where long (the JSON keeps it whole)."""
    from kit.bundle.inert import shortened

    return shortened("" if value is None else value)


@app.command("add")
def add(
    paths: Optional[List[Path]] = typer.Argument(
        None, help="Bundles (.tar.gz), or folders: every *.tar.gz under them. None: only open the index to write "
                   "(roll back what a writer cut short left, update an older schema) and say what that did."),
    index: Path = _index_option(),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Processes that verify bundles (default: the CPUs, at most 4)."),
) -> None:
    """Verify each bundle (the checks of `kit bundle verify`) and record it once, by its sha256.

    A bundle already in the index is a no-op; a refused one is listed with its reason and changes
    nothing, and the others are still added; a new index is made only when a bundle is added. Exit 0
    when none was refused, else the code `kit bundle verify` gives the first refused bundle (5 or 4;
    2 for a path that is no file). It is what writes an index (with `kit fleet slurm collect
    --index`): rolling back a journal a writer cut short left, updating an older schema; a read never
    does either."""
    from kit.index.ingest import expand, exit_code

    if not paths:
        _update(index, _err())
        return
    bundles = expand(paths)
    outcomes = add_to_index(index, bundles, _err(), jobs)
    code = exit_code(outcomes)
    if code:
        raise typer.Exit(code)


def _update(index: Path, console) -> None:
    """`kit index add` without bundles: open the index to write, and say what that did."""
    from kit.index.db import open_index

    said: list = []
    open_index(index, said=said).close()
    for line in said:
        console.print(line, markup=False)
    console.print(f"{index}: " + ("nothing to add." if said else "up to date; nothing to add."), markup=False)


def add_to_index(index: Path, bundles: list, console, jobs: int | None = None) -> list:
    """Add ``bundles`` to ``index`` with a progress bar on a terminal, one line per bundle and a
    summary; the outcomes."""
    import os

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from kit.index.files import lock_warning
    from kit.index.ingest import ADDED, PRESENT, REFUSED, add_to

    jobs = jobs or min(os.cpu_count() or 1, 4)
    warning = lock_warning(index)
    if warning:
        console.print(f"warning: {warning}", markup=False)
    said: list = []
    with Progress(TextColumn("adding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True, disable=len(bundles) < 2 or not console.is_terminal) as bar:
        task = bar.add_task("add", total=len(bundles))

        def told(o) -> None:
            for line in said:  # what opening the index did, said before the first bundle's line
                bar.console.print(line, markup=False)
            said.clear()
            if o.outcome == REFUSED:
                bar.console.print(f"refused  {_t(o.path)}: {_t(o.reason)}", markup=False)
            elif o.outcome == PRESENT:
                bar.console.print(f"no-op    {_t(o.path)}: {_t(o.reason)}", markup=False)
            else:
                bar.console.print(f"added    {_t(o.path)}", markup=False)
            bar.advance(task)

        outcomes, exists = add_to(index, bundles, told, jobs=jobs, said=said)
    for line in said:
        console.print(line, markup=False)
    n = {k: sum(o.outcome == k for o in outcomes) for k in (ADDED, PRESENT, REFUSED)}
    console.print(f"{index}: {n[ADDED]} added, {n[PRESENT]} already in the index, {n[REFUSED]} refused"
                  + ("" if exists else " (no index made: nothing was added)"), markup=False)
    return outcomes


@app.command("list")
@output_options(json="every column of the runs, as JSON")
def list_(
    index: Path = _index_option(),
    where: Optional[List[str]] = typer.Option(None, "--where", help=WHERE_HELP),
    since: Optional[str] = typer.Option(None, "--since", help=SINCE_HELP),
    host: Optional[str] = typer.Option(None, "--host", help="Only the runs of the host of exactly this name."),
    files: bool = typer.Option(False, "--files", help="Also show each run's bundle file name."),
    output: Output = None,
) -> None:
    """What the index holds: one line per run, in run-date order (the order compare uses)."""
    from kit.index.query import counts, list_runs, make_filter
    from kit.index.reader import reading

    flt = make_filter(where or (), since, host)
    with reading(index) as con:
        runs, total = list_runs(con, flt, everything=True), counts(con)
    output.show(lambda: _print_runs(index, runs, total, files),
                json=lambda: json.dumps({"index": str(index), **total, "runs": runs}, indent=2) + "\n")


def _print_runs(index: Path, runs: list, total: dict, files: bool) -> None:
    from rich.console import Console

    from kit.index.list_view import print_runs

    print_runs(index, runs, total, files, Console())


@app.command("history")
@output_options(json="the runs, the summary and every cell's points, as JSON")
def history(
    host: str = typer.Option(..., "--host", help="The machine: its host name (as `kit index list` shows it), or its "
                                                 "host id where several machines share a name."),
    cells: Optional[str] = typer.Option(
        None, "--cells", "--cell", metavar="PATTERN",
        help="Also a table per cell whose id matches: a glob (cifar/*/amp-fp16/*), or text the id holds (amp-fp16)."),
    index: Path = _index_option(),
    since: Optional[str] = typer.Option(None, "--since", help=SINCE_HELP),
    min_change: float = typer.Option(5.0, "--min-change", metavar="PCT",
                                     help="Flag a change from the previous run that is significant and at least PCT percent."),
    output: Output = None,
) -> None:
    """A machine's runs over time: one table, a run per row, with what changed since the run before
    (driver, torch, kit, GPU; cells measured by another method or on another GPU, where no ratio is
    taken) and per precision the geometric mean of its cells' ratios to the previous run. --cells adds
    the per-cell tables (median throughput, ratio with a 95% CI, significant changes flagged)."""
    from kit.errors import UsageError
    from kit.bundle.inert import inert
    from kit.index.history import history as run_history, matching, summary
    from kit.index.history_view import history_dict, print_history
    from kit.index.query import make_filter
    from kit.index.reader import reading

    if not 0 <= min_change < 100:
        raise UsageError("--min-change must be between 0 and 100 (percent).")
    flt = make_filter((), since, None)
    with reading(index) as con:
        runs, per_cell = run_history(con, host, min_change, flt)
    name, host_id = inert(str(runs[0]["host"])), runs[0]["host_id"]  # one machine: each run records both
    shown = matching(per_cell, name, cells) if cells else []
    precisions, rows = summary(runs, per_cell)
    output.show(lambda: print_history(name, host_id, runs, per_cell, shown, precisions, rows, min_change),
                json=lambda: json.dumps(history_dict(name, host_id, runs, shown if cells else per_cell, precisions,
                                                     rows, min_change), indent=2) + "\n")


def register(main_app: typer.Typer) -> None:
    main_app.add_typer(app, name="index")
