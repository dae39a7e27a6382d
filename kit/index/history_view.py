"""What `kit index history` shows: the JSON layout and the terminal's tables of a machine's history
(:mod:`kit.index.history` computes it). Bundle text is made inert before it is printed."""

from __future__ import annotations

from kit.bundle.inert import inert, shortened
from kit.compare.fmt import fmt_machine
from kit.index.history import CHANGE_FIELDS


def _t(value) -> str:
    """A bundle's string in a table: inert, and shortened where long (the JSON keeps it whole)."""
    return shortened("" if value is None else value)


def _date(iso: str) -> str:
    """``2026-11-02 08:15`` from the stored ``2026-11-02T08:15:00Z``."""
    return iso[:16].replace("T", " ") if iso != "unknown" else iso


def history_dict(host: str, host_id: str, runs: list, cells: list, precisions: list, rows: list,
                 min_change: float) -> dict:
    """`kit index history --json`: the machine, its runs, the summary and every cell's points."""
    from kit.compare.stats import METHOD

    return {
        "host": host, "host_id": host_id, "method": METHOD, "min_change_pct": min_change,
        "runs": [{**{k: r[k] for k in ("run_id", "run_date", "file_name", "sha256", *CHANGE_FIELDS)},
                  "gpu_uuids": list(r["gpu_uuids"])} for r in runs],
        "summary": {"precisions": precisions, "runs": [{
            "run_id": row.run["run_id"], "run_date": row.run["run_date"], "cells": row.cells,
            "changed": [{"field": f, "before": before, "now": now} for f, before, now in row.changed],
            "vs_previous": {pr: {"geomean_ratio": c.ratio, "cells": c.cells, "flagged": c.flagged,
                                 "method_breaks": c.breaks, "gpu_breaks": c.gpu_breaks}
                            for pr, c in row.by_precision.items()},
        } for row in rows]},
        "cells": [{"cell_id": c.cell_id, "unit": c.unit, "points": [{
            "run_id": p.run["run_id"], "run_date": p.run["run_date"], "status": p.status,
            "throughput_median": p.median, "throughput_repeats": p.values, "changed": p.changed,
            "vs_previous": p.vs_previous.to_dict() if p.vs_previous else None, "flagged": p.flagged,
            "method": p.method, "method_break": p.method_break, "gpu_break": p.gpu_break,
        } for p in c.points]} for c in cells],
    }


#: the summary's column of what changed since the run before (under the table where it does not fit)
CHANGED = "changed since the run before"


def _changed_text(i: int, row) -> str:
    said = [f"{f} {_t(before)} -> {_t(now)}" for f, before, now in row.changed]
    breaks = sum(c.breaks for c in row.by_precision.values())
    if breaks:
        said.append(f"method of {breaks} cell(s): no ratio there")
    gpu = sum(c.gpu_breaks for c in row.by_precision.values())
    if gpu:
        said.append(f"GPU of {gpu} cell(s): no ratio there")
    return "; ".join(said) if i > 1 else "(first run)"


def _figure(i: int, c):
    from rich.text import Text

    from kit.results.ratios import fmt_ratio

    if c is None or c.ratio is None:
        return Text("" if c is None or i == 1 else "-", style="dim")
    flagged = f" ({c.flagged}!)" if c.flagged else ""
    return Text(f"{fmt_ratio(c.ratio, 3)}{flagged}", style="bold red" if c.flagged else "")


def summary_table(precisions: list, rows: list, changed: bool = True):
    """One row per run: what changed (``changed``: in a column of its own), and per precision the
    geometric-mean ratio to the previous run; no column narrower than its longest word."""
    from rich.text import Text

    cells = [[str(i), _date(row.run["run_date"])] + [_changed_text(i, row)] * changed
             + [_figure(i, row.by_precision.get(pr)) for pr in precisions] + [str(row.cells)]
             for i, row in enumerate(rows, 1)]
    for i, (row, texts) in enumerate(zip(rows, cells), 1):
        said = i > 1 and bool(row.changed or any(c.breaks or c.gpu_breaks for c in row.by_precision.values()))
        if changed:
            texts[2] = Text(texts[2], style="bold yellow" if said else "dim")
    header = ["#", "run date (UTC)"] + [CHANGED] * changed + [_t(pr) for pr in precisions] + ["cells"]
    return _table(header, cells, no_wrap=(0, 1))


def fitted_summary(console, precisions: list, rows: list) -> tuple:
    """The summary table as it fits ``console`` with no figure or word broken: what changed moves under
    the table, then the precisions without a ratio in any run go, then the last precisions; returns
    (the table, the lines under it)."""
    from kit.compare.console import unbroken_fit

    table = summary_table(precisions, rows)
    if unbroken_fit(console, table):
        return table, []
    said = [f"  {i}: {_changed_text(i, row)}" for i, row in enumerate(rows, 1) if i > 1 and _changed_text(i, row)]
    notes = [f"{CHANGED}:"] + said if said else []
    shown = list(precisions)
    empty = [pr for pr in precisions if all(r.by_precision.get(pr) is None or r.by_precision[pr].ratio is None for r in rows)]
    for pr in dict.fromkeys(empty + precisions[::-1]):
        table = summary_table(shown, rows, changed=False)
        if unbroken_fit(console, table) or len(shown) == 1:
            break
        shown.remove(pr)
    table = summary_table(shown, rows, changed=False)
    gone = [pr for pr in precisions if pr not in shown]
    if gone:
        notes.append(f"Not shown at {console.width} columns: {', '.join(map(_t, gone))} (--json has every precision; "
                     "--cells PATTERN a table per cell).")
    return table, notes


def _cell_table(c, notes: list | None = None, columns: tuple = ("driver", "torch", "kit")):
    """A cell's table: one row per run, its median throughput and the ratio to the run before (or why
    none: in the table, or, with ``notes``, as "no ratio [n]" there and the reason appended to ``notes``);
    ``columns``: which of the versions to show. No column narrower than its longest word."""
    from rich.text import Text

    from kit.compare.fmt import fmt_vs_baseline

    rows = []
    for p in c.points:
        r = p.run

        def mark(name):
            return Text(_t(r[name]) + (" *" if name in p.changed else ""), style="bold yellow" if name in p.changed else "")

        figure = f"{p.median:,.1f}" if p.median is not None else _t(p.status)
        why = "method changed: no ratio" if p.method_break else inert(p.gpu_break) if p.gpu_break else ""
        if why and notes is not None:
            notes.append(why)
            why = f"no ratio [{len(notes)}]"
        why = shortened(why)
        vs = fmt_vs_baseline(p.vs_previous) if p.vs_previous else Text(why, style="bold magenta")
        rows.append([_date(r["run_date"]), *(mark(x) for x in columns), figure, vs,
                     Text("!", style="bold red") if p.flagged else ""])
    return _table(["run date (UTC)", *columns, f"{_t(c.unit)}/s", "vs previous run", ""], rows, no_wrap=(0,))


def _table(header: list, rows: list, no_wrap: tuple = ()):
    """A table of ``rows`` under ``header`` whose columns are never narrower than their longest word."""
    from rich import box
    from rich.table import Table

    from kit.compare.console import longest_word

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for n, col in enumerate(header):
        t.add_column(col, overflow="fold", no_wrap=n in no_wrap,
                     min_width=max([longest_word(col)] + [longest_word(str(row[n])) for row in rows]))
    for row in rows:
        t.add_row(*row)
    return t


def fitted_cell_table(console, c) -> tuple:
    """A cell's table as it fits ``console`` with no figure or word broken: the reasons for no ratio
    move under it, then the versions' columns go (kit, torch, driver); (the table, the lines under it)."""
    from kit.compare.console import unbroken_fit

    table = _cell_table(c)
    if unbroken_fit(console, table):
        return table, []
    columns = ["driver", "torch", "kit"]
    while True:
        reasons: list = []
        table = _cell_table(c, reasons, tuple(columns))
        if unbroken_fit(console, table) or not columns:
            break
        columns.pop()
    gone = [x for x in ("driver", "torch", "kit") if x not in columns]
    return table, [f"[{n}] {why}" for n, why in enumerate(reasons, 1)] + (
        [f"Not shown at {console.width} columns: {', '.join(gone)} (kit index history --json - has them)."] if gone else [])


def print_history(host: str, host_id: str, runs: list, cells: list, shown: list, precisions: list, rows: list,
                  min_change: float) -> None:
    """The terminal view: a line on the machine and its runs, the summary table, each shown cell's table,
    and what was flagged or broken."""
    from rich.console import Console
    from rich.text import Text

    from kit.compare.stats import METHOD

    console = Console()
    name = fmt_machine(_t(host), _t(host_id))
    console.print(Text(f"{name}: {len(runs)} runs, {_date(runs[0]['run_date'])} to {_date(runs[-1]['run_date'])} (UTC). "
                       f"(k!) marks k cells whose change is significant and at least {min_change:g}%; "
                       "a cell measured by another method or on another GPU than in the run before breaks its "
                       "series (no ratio).", style="bold"))
    console.print(Text(f"Statistics: {METHOD}.", style="dim"))
    console.print(f"{name}: each run against the run before (per precision: the geometric mean over its cells of "
                  "this run's throughput ÷ the previous run's)", markup=False, highlight=False)
    table, notes = fitted_summary(console, precisions, rows)
    console.print(table)
    for line in notes:
        console.print(line, markup=False, highlight=False)
    for c in shown:
        console.print(f"{_t(c.cell_id)} ({_t(c.unit)}/s, median over repeats)", markup=False, highlight=False)
        table, notes = fitted_cell_table(console, c)
        console.print(table)
        for line in notes:
            console.print(line, markup=False, highlight=False)
    flagged = sum(p.flagged for c in cells for p in c.points)
    breaks = sum(p.method_break is not None for c in cells for p in c.points)
    gpu = sum(p.gpu_break is not None for c in cells for p in c.points)
    console.print(f"{flagged} significant change(s) of {min_change:g}% or more, over the {len(cells)} cells." if flagged
                  else f"No significant change of {min_change:g}% or more between consecutive runs.", markup=False)
    if breaks:
        console.print(f"{breaks} break(s) in the series: the cell was measured by another method (engine revision or "
                      "settings) than in the run before, so no change is computed there (kit index history --json - "
                      "names each method).", markup=False)
    if gpu:
        console.print(f"{gpu} break(s) in the series: the cell was measured on another GPU model, or other GPUs, than "
                      "in the run before, so no change is computed there: a ratio across them measures the GPUs, "
                      "not a change of this machine.", markup=False)
    if not shown and cells:
        console.print(f"Per-cell tables: --cells PATTERN (e.g. --cells {_t(cells[0].cell_id.split('/')[2])}).", markup=False)
