"""A fleet's summary: one table per group, one row per machine, read before any per-cell table.

For 200 machines of the full suite the per-cell tables are 131 tables of 200 rows; what a lab reads
first is one row per machine: its **geometric-mean ratio to its group** over all its cells and per
precision (or per suite: ``View.by``), each cell's ratio being the machine's speed ÷ the pooled
repeats of the rest of its group (:mod:`kit.compare.fleet.grouped`, the ratio of medians); its worst cell;
its spread (the median over its cells of its repeats' coefficient of variation); and its findings
(:mod:`kit.compare.fleet.findings`). Machines with findings come first, then the slowest. The
terminal and Markdown views (:mod:`kit.compare.render`) and the fleet page
(:mod:`kit.report.html.compare`, with a heatmap of the same numbers) all read :func:`summary_tables`.
"""

from __future__ import annotations

import math
import statistics
import textwrap
from dataclasses import dataclass

from kit.compare.fleet.grouped import FleetSummary
from kit.compare.fleet.findings import group_phrase
from kit.results.ratios import fmt_ratio, geometric_mean

#: decimals of a summary ratio (a 1% difference must show)
DECIMALS = 3


def column_of(row, by: str) -> str:
    """The summary column a cell (kit.compare.engine.Row) counts in."""
    return row.workload if by == "suite" else row.precision


@dataclass
class MachineRow:
    source: object  # kit.compare.load.Source
    overall: float | None
    by_column: dict  # column -> geometric-mean ratio (None: no cell there)
    worst: tuple | None  # (ratio, cell label) of its lowest ratio
    cv: float | None  # median CV over its cells
    findings: list  # kit.compare.fleet.findings.Finding

    @property
    def named_slow(self) -> bool:
        return any(f.kind == "slow" for f in self.findings)

    def to_dict(self) -> dict:
        return {"label": self.source.label, "machine": self.source.env.machine, "geomean_ratio": self.overall,
                "geomean_ratio_by": self.by_column, "worst_cell": None if self.worst is None else
                {"ratio": self.worst[0], "cell_id": self.worst[1]}, "median_cv": self.cv,
                "findings": [f.short for f in self.findings]}


@dataclass
class GroupTable:
    group: str
    title: str
    columns: list  # the precisions (or suites), in the comparison's order
    rows: list  # MachineRow, machines with findings first, then the slowest

    def to_dict(self) -> dict:
        return {"group": self.group, "title": self.title, "columns": self.columns,
                "machines": [r.to_dict() for r in self.rows]}


def summary_tables(fleet: FleetSummary, by: str = "precision") -> list[GroupTable]:
    """One :class:`GroupTable` per group of ``fleet`` (groups whose machines share no cell are left out)."""
    findings: dict[int, list] = {}
    for f in fleet.findings:
        findings.setdefault(f.source.index, []).append(f)
    out = []
    for group, members in fleet.groups.items():
        columns: list[str] = []
        ratios: dict[int, dict[str, list[float]]] = {s.index: {} for s in members}
        worst: dict[int, tuple] = {}
        cvs: dict[int, list[float]] = {s.index: [] for s in members}
        group_cvs: list[float] = []
        for gc in fleet.cells_of(group):
            col = column_of(gc.row, by)
            if col not in columns:
                columns.append(col)
            for m in gc.members:
                if m.cv is not None:
                    cvs[m.source.index].append(m.cv)
                if m.vs_rest is None or not m.vs_rest.ratio > 0:
                    continue
                r = m.vs_rest.ratio
                ratios[m.source.index].setdefault(col, []).append(r)
                if m.source.index not in worst or r < worst[m.source.index][0]:
                    worst[m.source.index] = (r, gc.row.label)
            cell_cvs = [m.cv for m in gc.members if m.cv is not None]
            if cell_cvs:
                group_cvs.append(statistics.median(cell_cvs))
        if not columns:
            continue
        rows = []
        for s in members:
            mine = ratios[s.index]
            rows.append(MachineRow(s, geometric_mean([x for xs in mine.values() for x in xs]),
                                   {c: geometric_mean(mine.get(c, [])) for c in columns}, worst.get(s.index),
                                   statistics.median(cvs[s.index]) if cvs[s.index] else None, findings.get(s.index, [])))
        rows.sort(key=lambda r: (not r.findings, not r.named_slow, r.overall if r.overall is not None else math.inf,
                                 r.source.index))
        cv = f"; median CV {statistics.median(group_cvs):.1%}" if group_cvs else ""
        out.append(GroupTable(group, f"{fleet.by} {group}: {group_phrase(fleet.by, group, len(members))}{cv}", columns, rows))
    return out


def explanation(by: str) -> str:
    """The line above the summary tables: what the columns are."""
    return (f"Summary, one row per machine (machines with findings first, then the slowest): all and each {by}: "
            "the geometric mean over its cells of its speed ÷ the pooled repeats of the rest of its group (ratio of "
            "medians; < 1 = slower); CV: the median over its cells of its repeats' coefficient of variation; "
            "worst cell: its lowest ratio. The per-cell tables: --cells PATTERN or --verbose.")


def table_cells(t: GroupTable) -> tuple[list[str], list[list[str]]]:
    """The header and each row's cells, as text."""
    header = ["#", "machine", "all"] + t.columns + ["CV", "finding", "worst cell"]
    body = []
    for rank, r in enumerate(t.rows, 1):
        body.append([str(rank), f"{r.source.label} {r.source.env.machine}", fmt_ratio(r.overall, DECIMALS)]
                    + [fmt_ratio(r.by_column[c], DECIMALS) for c in t.columns]
                    + ["—" if r.cv is None else f"{r.cv:.1%}", "; ".join(f.short for f in r.findings),
                       "—" if r.worst is None else f"{fmt_ratio(r.worst[0], DECIMALS)} {r.worst[1]}"])
    return header, body


def text_lines(t: GroupTable, width: int) -> list[str]:
    """The table as fixed-width lines (kit.compare.fleet.views.plain_table), no figure or name cut. Where
    it is wider than ``width``, each machine's worst cell goes on a line of its own under its row, then
    the per-precision (or per-suite) columns go from the last, and a line says which (--json and
    --markdown keep them)."""
    from kit.compare.fleet.views import plain_table

    header, body = table_cells(t)

    def laid_out(header: list, body: list, fold: int) -> tuple:
        right = {i for i, h in enumerate(header) if h not in ("machine", "finding", "worst cell")}
        return plain_table(header, body, right=right, fold=fold, width=width)

    def wide(header: list, body: list) -> int:
        return 1 + sum(max(len(r[i]) for r in [header] + body) for i in range(len(header))) + 2 * (len(header) - 1)

    if wide(header, body) <= width:
        head, rows = laid_out(header, body, len(header) - 1)
        return head + [x for lines in rows for x in lines]
    worst = [r[-1] for r in body]
    header, body = header[:-1], [r[:-1] for r in body]
    dropped: list[str] = []
    while wide(header, body) > width and header[3] != "CV":  # the last per-column figure goes
        i = header.index("CV") - 1
        dropped.insert(0, header[i])
        header, body = header[:i] + header[i + 1:], [r[:i] + r[i + 1:] for r in body]
    head, rows = laid_out(header, body, header.index("finding"))
    out = head + [x for lines, w in zip(rows, worst) for x in lines + [f"      worst cell {w}"]]
    if dropped:  # wrapped between words, as the terminal's other lines are
        out += textwrap.wrap(f"Not shown at {width} columns: {', '.join(dropped)} (--json and --markdown have every "
                             "column).", width, break_long_words=False, break_on_hyphens=False)
    return out


def markdown_lines(t: GroupTable) -> list[str]:
    from kit.bundle.inert import markdown_text as md
    from kit.compare.fleet.views import md_table

    header, body = table_cells(t)
    return [f"### {md(t.title)}", "", md_table([md(h) for h in header], [[md(c) for c in r] for r in body]), ""]
