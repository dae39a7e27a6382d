"""What `kit index list` shows on a terminal: one row per run, in run-date order.

The table fits the terminal without breaking a figure or a word: rich wraps a cell only between words,
and where even that does not fit (an 80-column terminal), columns go, the least needed first, and a
line says which; the bundle files (``--files``), one long word each, are listed under the table when
their column does not fit. ``--json`` keeps every column. Bundle text is made inert before it is printed.
"""

from __future__ import annotations

from kit.bundle.inert import inert, shortened
from kit.compare.console import longest_word, unbroken_fit

#: the columns that go, in this order, where the table does not fit the terminal
DROPPED_FIRST = ("stack", "kit", "torch", "driver")
FILE = "file"
LEFT_OUT = "left out of compare and history"


def _s(value) -> str:
    """A bundle's string in a table: inert, and shortened where long (the JSON keeps it whole)."""
    return shortened("" if value is None else value)


def _date(iso: str) -> str:
    """``2026-11-02 08:15`` from the stored ``2026-11-02T08:15:00Z``."""
    return iso[:16].replace("T", " ") if iso != "unknown" else iso


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _rows(runs: list) -> list[dict]:
    """Each run's cells of the table by column name; the position ("#") is what --baseline takes."""
    out, i = [], 0
    for r in runs:
        i += r["left_out"] is None  # the positions --baseline takes: the runs compare reads
        out.append({"#": str(i) if r["left_out"] is None else "-", "run date (UTC)": _date(r["run_date"]),
                    **{k: _s(r[k]) for k in ("host", "driver", "stack", "torch", "kit")}, "gpu": _s(_gpu(r["gpu"] or "")),
                    "cells": f"{r['n_cells']}" + (" (interrupted)" if r["interrupted"] else ""),
                    FILE: _s(r["file_name"]), "whole file": inert(r["file_name"]), LEFT_OUT: _s(r["left_out"] or "")})
    return out


def _gpu(name: str) -> str:
    """The GPU's name without the vendor every GPU the kit runs on shares ("H100 80GB HBM3")."""
    return name[len("NVIDIA "):] if name.startswith("NVIDIA ") else name


def _table(columns: list, rows: list):
    from rich import box
    from rich.table import Table
    from rich.text import Text

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in columns:
        header = "GPU" if col == "gpu" else col
        # never narrower than its longest word: rich's squeeze would otherwise fold one
        t.add_column(header, overflow="fold", no_wrap=col in ("#", "run date (UTC)"),
                     min_width=max(longest_word(x) for x in [header] + [row[col] for row in rows]))
    for row in rows:
        t.add_row(*(Text(row[c]) for c in columns))
    return t


def print_runs(index, runs: list, total: dict, files: bool, console) -> None:
    """`kit index list`'s table of ``runs`` (kit.index.query.list_runs) on ``console``."""
    hidden = sum(r["left_out"] is not None for r in runs)
    title = (f"{index}: {_plural(total['bundles'], 'bundle')} of {_plural(total['hosts'], 'host')} "
             f"({len(runs)} shown, by run date"
             + (f"; {hidden} left out of compare and history: each run counts once)" if hidden else ")"))
    rows = _rows(runs)
    columns = ["#", "run date (UTC)", "host", "gpu", "driver", "stack", "torch", "kit", "cells"]
    columns += [FILE] * files + [LEFT_OUT] * any(r["left_out"] for r in runs)
    dropped = []
    table = _table(columns, rows)
    for col in [FILE] * files + list(DROPPED_FIRST):
        if unbroken_fit(console, table):
            break
        columns.remove(col)
        dropped.append(col)
        table = _table(columns, rows)
    console.print(title, markup=False, highlight=False)  # wrapped between words, as a table's title is not
    console.print(table)
    shown_dropped = [c for c in dropped if c != FILE]
    if shown_dropped:
        console.print(f"Not shown at {console.width} columns: {', '.join(shown_dropped)} (--json has every column).",
                      markup=False, highlight=False)
    if FILE in dropped:
        console.print("Files:", markup=False, highlight=False)
        for row in rows:
            console.print(f"  {row['#']:>3}  {row['whole file']}", markup=False, highlight=False, soft_wrap=True)
