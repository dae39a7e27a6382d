"""What `kit index history` shows: the JSON layout and the terminal's tables of a machine's history
(:mod:`kit.index.history` computes it). Bundle text is made inert before it is printed."""

from __future__ import annotations

from kit.bundle.inert import shortened
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


def summary_table(name: str, precisions: list, rows: list):
    """One row per run: what changed, and per precision the geometric-mean ratio to the previous run."""
    from rich.table import Table
    from rich.text import Text

    from kit.results.ratios import fmt_ratio

    t = Table(title=f"{name}: each run against the run before (per precision: the geometric mean over its "
                    "cells of this run's throughput ÷ the previous run's)", title_justify="left")
    for col in ("#", "run date (UTC)", "changed since the run before", *map(_t, precisions), "cells"):
        t.add_column(col, overflow="fold", no_wrap=col in ("#", "run date (UTC)"))
    for i, row in enumerate(rows, 1):
        said = [f"{f} {_t(before)} -> {_t(now)}" for f, before, now in row.changed]
        breaks = sum(c.breaks for c in row.by_precision.values())
        if breaks:
            said.append(f"method of {breaks} cell(s): no ratio there")
        gpu = sum(c.gpu_breaks for c in row.by_precision.values())
        if gpu:
            said.append(f"GPU of {gpu} cell(s): no ratio there")
        figures = []
        for pr in precisions:
            c = row.by_precision.get(pr)
            if c is None or c.ratio is None:
                figures.append(Text("" if c is None or i == 1 else "-", style="dim"))
                continue
            flagged = f" ({c.flagged}!)" if c.flagged else ""
            figures.append(Text(f"{fmt_ratio(c.ratio, 3)}{flagged}", style="bold red" if c.flagged else ""))
        t.add_row(str(i), _date(row.run["run_date"]), Text("; ".join(said) if i > 1 else "(first run)",
                                                          style="bold yellow" if said else "dim"), *figures, str(row.cells))
    return t


def _cell_table(c):
    """A cell's table: one row per run, its median throughput and the ratio to the run before (or why none)."""
    from rich.table import Table
    from rich.text import Text

    from kit.compare.fmt import fmt_vs_baseline

    t = Table(title=f"{_t(c.cell_id)} ({_t(c.unit)}/s, median over repeats)", title_justify="left")
    for col in ("run date (UTC)", "driver", "torch", "kit", f"{_t(c.unit)}/s", "vs previous run", ""):
        t.add_column(col, overflow="fold")
    for p in c.points:
        r = p.run

        def mark(name):
            return Text(_t(r[name]) + (" *" if name in p.changed else ""), style="bold yellow" if name in p.changed else "")

        figure = f"{p.median:,.1f}" if p.median is not None else _t(p.status)
        vs = (fmt_vs_baseline(p.vs_previous) if p.vs_previous
              else Text("method changed: no ratio", style="bold magenta") if p.method_break
              else Text(p.gpu_break, style="bold magenta") if p.gpu_break else "")
        t.add_row(_date(r["run_date"]), mark("driver"), mark("torch"), mark("kit"),
                  figure, vs, Text("!", style="bold red") if p.flagged else "")
    return t


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
    console.print(summary_table(name, precisions, rows))
    for c in shown:
        console.print(_cell_table(c))
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
