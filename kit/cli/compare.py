"""`kit compare`: line up two or more bundles cell by cell, with statistics."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Optional

import typer

from kit.cli.fast_exit import keep_until_exit
from kit.cli.output import Output, output_options


@output_options(csv="CSV (one line per cell x machine)", json="the comparison as JSON", markdown="Markdown tables",
                html="a self-contained HTML page with charts")
def compare(
    inputs: Optional[List[Path]] = typer.Argument(None, help="Bundles (.tar.gz), run folders or results.json files; the first is the baseline."),
    against: Optional[str] = typer.Option(None, "--against", help="Add a shipped reference as the baseline, e.g. 'h200' (see references/)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", help="The baseline: its position among the inputs (1 = first) or a path."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="List every cell that could not be compared (default: counts by reason)."),
    fail_if_slower: Optional[str] = typer.Option(
        None, "--fail-if-slower", metavar="PCT",
        help="Exit with code 9 if any input is significantly slower than the baseline by more than PCT percent on any "
             "cell tested (two repeats or more on each side, measured the same way); with code 11 if it could test none. "
             "It says what it tested.",
    ),
    metric: Optional[str] = typer.Option(
        None, "--metric", metavar="METRIC",
        help="Machines as rows, one table per cell, of this metric: throughput, speedup, epoch-time or energy.",
    ),
    cells: Optional[str] = typer.Option(None, "--cells", metavar="PATTERN", help="Only the cells whose id matches this shell pattern, e.g. 'cifar/resnet50/*'."),
    group_by: Optional[str] = typer.Option(
        None, "--group-by", metavar="KEY",
        help="Group the machines by gpu, driver, stack or host: each group's spread per cell, each machine against the rest of its group, the slow ones named.",
    ),
    outlier_pct: float = typer.Option(5.0, "--outlier-pct", metavar="PCT", help="With --group-by: name a machine slower than the rest of its group by more than PCT percent, consistently (the rule is printed with the findings)."),
    by: str = typer.Option("precision", "--by", metavar="COLUMNS", help="With --group-by: the summary's columns, each machine's ratio to its group per precision or per suite."),
    index: Optional[Path] = typer.Option(None, "--index", help="Compare runs from a results index (kit index add) instead of files; earliest run first."),
    where: Optional[List[str]] = typer.Option(None, "--where", help="With --index: only runs whose FIELD holds VALUE as a word, e.g. gpu=H200 (repeatable; gpu, host, driver, stack, torch, kit)."),
    since: Optional[str] = typer.Option(None, "--since", help="With --index: only runs started on or after this date (YYYY-MM-DD, UTC)."),
    host: Optional[str] = typer.Option(None, "--host", help="With --index: only the runs of the host of exactly this name."),
    allow_method_change: bool = typer.Option(
        False, "--allow-method-change",
        help="Compare cells measured by different methods (engine revision or settings) too, each such ratio marked; "
             "by default they are left out with a HIGH warning."),
    output: Output = None,
) -> None:
    # long because: its signature is the command's Typer argument and options, with their help (35 of its lines)
    """Compare runs: median time and throughput per machine, speedup over fp32, ratio to the baseline, with 95% CIs.

    The tables go to stdout unless a format does (--json -, --csv -, --markdown - or --html -);
    any format can be written to a FILE as well."""
    with collector_paused() as paused:
        from rich.console import Console

        from kit.compare import render
        from kit.compare.engine import compare_paths
        from kit.compare.gate import gate, outcome, parse_pct
        from kit.compare.fleet.grouped import View, narrow_cells
        from kit.errors import UsageError

        pct = parse_pct(fail_if_slower) if fail_if_slower is not None else None
        view = View(metric=metric or "throughput", cells=cells, group_by=group_by, outlier_pct=outlier_pct,
                    rows=metric is not None, by=by, verbose=verbose)
        paths = list(inputs or [])
        if against:
            from kit.bundle.merge import reference_bundles

            refs = reference_bundles(against)
            paths = refs + paths
            baseline = baseline or "1"
        if index is not None or where or since is not None or host is not None:
            from kit.index.query import comparison

            if index is None or paths:
                raise UsageError("--where, --since and --host go with --index; give --index FILE or files, not both.")
            cmp = narrow_cells(comparison(index, where, since, host, baseline, allow_method_change, view.group_by),
                               view.cells)
        else:
            cmp = narrow_cells(compare_paths(paths, baseline, allow_method_change, view.group_by), view.cells)
        err = Console(stderr=True)
        if against:
            from kit.compare.load import older_reference_note

            note = older_reference_note(against, cmp.sources[0])
            if note:
                err.print(note, markup=False, highlight=False, style="yellow")
        tested = gate(cmp, pct) if pct is not None else None
        texts = {"csv": lambda: render.to_csv(cmp), "json": lambda: render.to_json(cmp, view, tested),
                 "markdown": lambda: render.to_markdown(cmp, verbose, view), "html": lambda: _html_page(cmp, view)}
        printed = output.to_stdout
        if printed is None:
            render.print_rich(cmp, Console(), verbose, view)
        else:
            # stdout carries only the data; warnings go to stderr (JSON and the page carry their own).
            output.write(printed, texts[printed]())
            if printed in ("csv", "markdown"):
                render.print_notes(cmp, err, verbose)
        render.print_refused(cmp, err)
        for fmt in output.to_files:
            output.write(fmt, texts[fmt]())
        if tested is not None:
            for line in outcome(tested):  # raises RegressionDetected (9) or NothingTested (11)
                err.print(line, markup=False, highlight=False)
        # the command line ends without freeing it (a fleet's is a million objects), and so without
        # the collector: switched back on, its first pass would walk every one of them (0.15 s)
        paused.resume = paused.resume and not keep_until_exit(cmp)
        if cmp.refused:
            # the others were compared and printed; the exit code still says an input was refused:
            # the first refused input's own (5 for a bundle that fails verification, 4 for a schema error)
            raise typer.Exit(cmp.refused[0].exit_code)


class _Paused:
    resume: bool  # switch the collector back on at the end (it was on, and the process goes on)


@contextmanager
def collector_paused() -> Iterator[_Paused]:
    """Python's cyclic garbage collector, paused while a comparison is built and printed: a fleet's
    makes millions of small objects (200 runs of the full CIFAR suite: 26,200 machine-cells, each
    with its samples and ratios) that live until the command ends and form no reference cycles, and
    the collector would walk them again and again (a third of the command's time). Reference
    counting still frees everything that is dropped. It is switched back on at the end unless the
    block sets ``resume`` to False (the process is about to end)."""
    paused = _Paused()
    paused.resume = gc.isenabled()
    gc.disable()
    try:
        yield paused
    finally:
        if paused.resume:
            gc.enable()


def _html_page(cmp, view) -> str:
    from kit.report.html.compare import render_compare_page

    return render_compare_page(cmp, view)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)
