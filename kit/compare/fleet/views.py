"""Machines as rows: the terminal and Markdown views of a comparison of many machines.

Where machines fit as columns (:func:`kit.compare.render.print_rich` measures its tables against the
console's width; a pipe is 80 columns), the tables of today stay. Where they do not, or when
``--metric`` or ``--group-by`` is given, each cell gets a table of its own with one row per machine:
the machine's median (of ``--metric``), its ratio to the baseline with the 95% CI and the verdict,
fastest first. With ``--group-by`` each cell has one table per group, the ratio is to the rest of the
group (:mod:`kit.compare.fleet.grouped`), the group's median, min-max and IQR head the table, and the machines
slower than the rest of their group are named in the findings.

Figures and cell ids are never cut: their columns do not wrap, only a machine's name may fold.
"""

from __future__ import annotations

from dataclasses import dataclass
from kit.compare.engine import Comparison, MachineCell, Row
from kit.compare.halves import map_text
from kit.compare.fleet.grouped import FleetSummary, GroupCell, View, summarise_fleet
from kit.compare.fleet.findings import group_phrase, rule_sentence
from kit.compare.console import natural_width, widest
from kit.compare.fmt import _UNIT_SHORT, fmt_speedup_estimate, fmt_throughput, fmt_time, fmt_vs_baseline, speed_verdict
from kit.compare.load import Source
from kit.compare.stats import RatioEstimate
from kit.bundle.inert import markdown_text
from kit.results.explain import NOT_MEASURED
from kit.results.ratios import EPOCH_S

INPUT_COLUMNS = ("machine", "GPU", "driver", "stack", "torch", "data")


def input_fields(s: Source) -> tuple[str, ...]:
    return (s.env.machine, s.env.gpu, s.env.driver, s.env.stack, s.env.torch, s.env.data_source)


def input_file(s: Source) -> str:
    return s.file_name + (" (interrupted)" if s.interrupted else "")


def label_of(cmp: Comparison, s: Source) -> str:
    return s.label + (" (baseline)" if s is cmp.baseline_source else "")


def shared_inputs(cmp: Comparison) -> list[tuple[str, str]]:
    """The input facts every machine shares (GPU, driver...): said once above a fleet's Inputs table."""
    out = []
    for i, name in enumerate(INPUT_COLUMNS):
        if name == "machine":
            continue
        values = {input_fields(s)[i] for s in cmp.sources}
        if len(values) == 1:
            out.append((name, values.pop()))
    return out


# --- one machine's line in a cell ------------------------------------------------------------

@dataclass(frozen=True)
class Line:
    """A machine's row in a cell's table: what is shown and what it is sorted by."""

    source: Source
    value: str  # the median of the metric (or the machine's status)
    ratio: str  # the ratio with its CI ("" where the metric has none)
    verdict: str
    key: tuple  # sort key: fastest (or lowest energy) first; machines without a value last
    row_key: tuple = ()  # the cell's key (kit.compare.engine.Row.key)
    bound: str = ""  # what bound the machine's cell (kit explain's verdict, short), "" where it has none


def metric_lines(cmp: Comparison, row: Row, metric: str, members: list[Source] | None = None,
                 vs_rest: dict[int, RatioEstimate | None] | None = None) -> list[Line]:
    """One :class:`Line` per machine (``members``: those of one group) for ``row``, sorted."""
    base = cmp.baseline_source
    out = []
    for s in members if members is not None else cmp.sources:
        mc: MachineCell | None = row.machines[s.index]
        if mc is None or mc.status != "ok":
            status = "—" if mc is None else mc.status + (f": {mc.reason}" if mc.reason else "")
            out.append(Line(s, status, "", "", (1, 0.0, s.index), row.key))
            continue
        if vs_rest is not None:
            est = vs_rest.get(s.index)
            ratio, verdict = (fmt_vs_baseline(est), speed_verdict(est)) if est else ("—", "")
        else:
            est = mc.vs_baseline
            ratio, verdict = ((fmt_vs_baseline(est), speed_verdict(est)) if est
                              else ("baseline", "") if s is base else ("—", ""))
        bound = mc.explain_verdict or ""
        if metric == "throughput" and mc.throughput is not None:
            out.append(Line(s, fmt_throughput(mc.throughput, row.unit), ratio, verdict, (0, -mc.throughput.median, s.index), row.key, bound))
        elif metric in ("throughput", "epoch-time") and mc.epoch_s is not None:
            out.append(Line(s, f"{fmt_time(mc.epoch_s)}/epoch", ratio, verdict, (0, mc.epoch_s.median, s.index), row.key, bound))
        elif metric == "speedup" and mc.vs_fp32 is not None:
            out.append(Line(s, fmt_speedup_estimate(mc.vs_fp32), "", mc.vs_fp32.verdict, (0, -mc.vs_fp32.ratio, s.index), row.key, bound))
        elif metric == "energy" and mc.energy_j_per_epoch is not None:
            out.append(Line(s, f"{mc.energy_j_per_epoch:,.0f} J/epoch", "", "", (0, mc.energy_j_per_epoch, s.index), row.key, bound))
        else:
            out.append(Line(s, "—", ratio if metric in ("throughput", "epoch-time") else "", "", (1, 0.0, s.index), row.key, bound))
    return sorted(out, key=lambda ln: ln.key)


#: the column of what bound each machine's cell (kit explain's verdict), beside its ratio
BOUND_HEADER = "bound"


def any_verdict(cmp: Comparison) -> bool:
    """Whether some machine's cell has a measured verdict (kit.results.explain.bound: a kind other than
    "not measured"). Where none has, the tables leave the verdict out rather than fill a column with
    "not measured" (a comparison of runs without a profile, data wait or NVML over the steps); --json
    and --csv carry it for every cell."""
    return any(mc is not None and mc.explain_kind not in (None, NOT_MEASURED) for r in cmp.rows for mc in r.machines)


def verdict_lines(mc: MachineCell | None, shown: bool = True) -> list[str]:
    """What bound the machine's cell (kit.results.explain.bound's short form, kit explain's verdict),
    as a line under its ratio in the column tables; none for a cell without one, or where no cell of
    the comparison has a measured verdict (``shown``: :func:`any_verdict`)."""
    return [mc.explain_verdict] if shown and mc is not None and mc.explain_verdict else []


def bound_header(cmp: Comparison, metric: str) -> str:
    """The verdict column's name ("" where the metric has no ratio beside it, energy, or no cell has
    a measured verdict: :func:`any_verdict`)."""
    return "" if metric == "energy" or not any_verdict(cmp) else BOUND_HEADER


def outlier_verdict(ln: Line, outliers: set[tuple]) -> str:
    """The verdict, with ``outlier`` where the machine is named slow and this cell is one of its slow
    cells (``outliers``: FleetSummary.outlier_cells); a cell it did not measure is never one."""
    if (ln.source.index, ln.row_key) not in outliers:
        return ln.verdict
    return f"{ln.verdict}, outlier" if ln.verdict else "outlier"


def metric_rows(cmp: Comparison, metric: str) -> list[Row]:
    """The cells that have ``metric`` on some machine (the speedup needs a base precision, energy a meter)."""
    if metric == "speedup":
        return [r for r in cmp.rows if any(mc and mc.vs_fp32 for mc in r.machines)]
    if metric == "energy":
        return [r for r in cmp.rows if any(mc and mc.energy_j_per_epoch is not None for mc in r.machines)]
    return list(cmp.rows)


def headers(cmp: Comparison, metric: str, grouped: bool) -> tuple[str, str, str]:
    """(value, ratio, verdict) column names."""
    base = cmp.baseline_source.label
    value = {"throughput": "throughput", "epoch-time": "time", "speedup": "speedup over fp32 [95% CI]",
             "energy": "energy"}[metric]
    ratio = "" if metric in ("speedup", "energy") else ("÷ group [95% CI]" if grouped else f"÷ {base} [95% CI]")
    verdict = "" if metric == "energy" else "verdict"
    return value, ratio, verdict


def explanation(cmp: Comparison, view: View) -> str:
    """The line above the per-cell tables: what the columns are."""
    base = cmp.baseline_source.label
    what = {"throughput": "median throughput over repeats", "epoch-time": "median time per epoch over repeats",
            "speedup": "speedup over fp32 on each machine (median throughput ÷ fp32's)",
            "energy": "energy per epoch (median over repeats)"}[view.metric]
    if view.metric in ("speedup", "energy"):
        ratio = ""
    elif view.group_by:
        ratio = ("; ÷ group: this machine's speed ÷ the pooled repeats of the other machines of its group "
                 "(ratio of medians, [95% CI of the ratio of means]); outlier: named in the findings")
    else:
        ratio = f"; ÷ {base}: speed ÷ {base}'s (ratio of medians, [95% CI of the ratio of means], >1 = faster)"
    order = "lowest first" if view.metric == "energy" else "fastest first"
    bound = "; bound: what bound the machine's cell (kit explain's verdict)" if bound_header(cmp, view.metric) else ""
    return f"One table per cell, one row per machine, {order}: {what}{ratio}{bound}."


def spread_text(gc: GroupCell, unit: str) -> str:
    """``median 51,800 img/s; min–max 31,000–53,100; IQR 50,200–52,700``."""
    if gc.metric == EPOCH_S:
        f, u = (lambda v: f"{v:.3g}"), "s/epoch"
    else:
        f, u = (lambda v: f"{v:,.0f}" if v >= 100 else f"{v:.3g}"), _UNIT_SHORT.get(gc.row.unit, gc.row.unit + "/s")
    return f"median {f(gc.median)} {u}; min–max {f(gc.low)}–{f(gc.high)}; IQR {f(gc.q1)}–{f(gc.q3)}"


def tables(cmp: Comparison, view: View, fleet: FleetSummary | None):
    """(title, a function giving its lines) for every table of the rows layout, in order: the lines
    (:func:`metric_lines`) are the work, done where they are written (:func:`print_rows` writes a
    fleet's tables on two CPUs)."""
    from functools import partial

    for row in metric_rows(cmp, view.metric):
        if fleet is None:
            yield row.label, partial(metric_lines, cmp, row, view.metric)
            continue
        for gc in (c for c in fleet.cells if c.row is row):
            members = fleet.groups[gc.group]
            vs_rest = {m.source.index: m.vs_rest for m in gc.members}
            title = f"{row.label} · {fleet.by} {gc.group}: {group_phrase(fleet.by, gc.group, len(gc.members))}; {spread_text(gc, row.unit)}"
            yield title, partial(metric_lines, cmp, row, view.metric, members, vs_rest)


def fleet_of(cmp: Comparison, view: View) -> FleetSummary | None:
    return summarise_fleet(cmp, view.group_by, view.outlier_pct) if view.group_by else None


def findings_lines(fleet: FleetSummary) -> list[str]:
    """Each finding's lines (its candidate causes indented under it), or one line saying there is none."""
    if not fleet.findings:
        return [f"No machine is slow (more than {fleet.outlier_pct:g}% below the rest of its group, consistently) "
                "or unstable."]
    return [line for f in fleet.findings for line in f.lines]


def left_out_lines(fleet: FleetSummary) -> list[str]:
    """One line per group that leaves cells (or itself) out of the comparison, with the reasons
    (kit.compare.fleet.left_out); none where every group compares every cell its machines measured."""
    return [x.line for x in fleet.left_out]


LEFT_OUT_TITLE = "Left out of the groups' comparisons (and so of the findings and the summary)"


def findings_title(fleet: FleetSummary) -> str:
    return f"Findings (grouped by {fleet.by}; {rule_sentence(fleet.outlier_pct)})"


# --- rich -------------------------------------------------------------------------------------

def print_inputs_compact(cmp: Comparison, console) -> None:
    """The Inputs table with one line per machine: facts shared by every input said once above it,
    the file column left out when even then the table is wider than the console."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    shared = dict(shared_inputs(cmp))
    if shared:
        console.print("Every input: " + " · ".join(f"{k} {v}" for k, v in shared.items()), markup=False, highlight=False)
    cols = [(i, name) for i, name in enumerate(INPUT_COLUMNS) if name not in shared]

    def build(with_file: bool, sources=None) -> Table:
        t = Table(title=f"Inputs ({len(cmp.sources)})", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        t.add_column("", no_wrap=True)
        for _, name in cols:
            t.add_column(name, no_wrap=name != "machine", overflow="fold")
        if with_file:
            t.add_column("file", no_wrap=True)
        for s in cmp.sources if sources is None else sources:
            f = input_fields(s)
            t.add_row(Text(label_of(cmp, s)), *(Text(f[i]) for i, _ in cols),
                      *([Text(input_file(s))] if with_file else []))
        return t

    # measured on the machines with each column's widest text (as wide as all of them)
    widest_rows = widest(cmp.sources, lambda s: (label_of(cmp, s), *(input_fields(s)[i] for i, _ in cols), input_file(s)))
    if natural_width(console, build(True, widest_rows)) > console.width:
        console.print(build(False))
        console.print("(file names left out to fit the terminal; --json and --csv list them)", highlight=False, markup=False)
    else:
        console.print(build(True))


def plain_table(header: list[str], rows: list[list[str]], right: set[int], fold: int,
                width: int) -> tuple[list[str], list[list[str]]]:
    """A table as fixed-width lines, laid out as rich's SIMPLE_HEAD tables are (a leading space, two
    between columns, a rule under the header), without rich's per-cell measuring: a fleet's per-cell
    tables are thousands of rows. Columns ``right`` are right-aligned; no column is cut, only the
    ``fold`` column's long values fold onto more lines when the table is wider than ``width``.
    Returns the header's lines (the rule included) and each row's lines."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    total = 1 + sum(widths) + 2 * (len(widths) - 1)
    if total > width:
        widths[fold] = max(len(header[fold]), 8, widths[fold] - (total - width))

    def line(cells: list[str]) -> list[str]:
        parts = [[c[k:k + widths[i]] for k in range(0, len(c), widths[i])] or [""] if i == fold else [c]
                 for i, c in enumerate(cells)]
        out = []
        for j in range(max(len(x) for x in parts)):
            out.append(" " + "  ".join((x[j] if j < len(x) else "").rjust(widths[i]) if i in right
                                       else (x[j] if j < len(x) else "").ljust(widths[i])
                                       for i, x in enumerate(parts)).rstrip())
        return out

    head = line(header) + [" " + "─" * (sum(widths) + 2 * (len(widths) - 1))]
    return head, [line(r) for r in rows]


def print_findings(fleet: FleetSummary, console) -> None:
    console.print(findings_title(fleet) + ":", style="bold", markup=False, highlight=False)
    for line in findings_lines(fleet):
        console.print(f"  {line}", markup=False, highlight=False)
    if fleet.left_out:
        console.print(LEFT_OUT_TITLE + ":", style="bold", markup=False, highlight=False)
        for line in left_out_lines(fleet):
            console.print(f"  {line}", markup=False, highlight=False)


def print_rows(cmp: Comparison, console, view: View, fleet: FleetSummary | None = None, findings: bool = True) -> None:
    """The per-cell tables of the rows layout, with ``--group-by`` against each group (``fleet``,
    computed here when not given) and after the findings unless ``findings`` is false."""
    from rich.text import Text

    fleet = fleet if fleet is not None else fleet_of(cmp, view)
    if fleet is not None and findings:
        print_findings(fleet, console)
    console.print(explanation(cmp, view), markup=False, highlight=False, style="dim")
    if not metric_rows(cmp, view.metric):
        console.print(f"No cell has {'an' if view.metric[0] in 'aeiou' else 'a'} {view.metric} figure on any machine.", markup=False, highlight=False)
    value_h, ratio_h, verdict_h = headers(cmp, view.metric, fleet is not None)
    bound_h = bound_header(cmp, view.metric)
    outliers = fleet.outlier_cells() if fleet else set()
    header = (["#", "machine", value_h] + ([ratio_h] if ratio_h else []) + ([bound_h] if bound_h else [])
              + ([verdict_h] if verdict_h else []))

    def laid_out(lines_of) -> tuple:
        """(the header's lines, the rows' cells, their colours, each row's lines) of one table."""
        body, colours = [], []
        for rank, ln in enumerate(lines_of(), 1):
            name = f"{ln.source.label} {ln.source.env.machine}"  # the baseline says so in the ratio column
            verdict = outlier_verdict(ln, outliers)
            body.append([str(rank), name, ln.value] + ([ln.ratio] if ratio_h else []) + ([ln.bound] if bound_h else [])
                        + ([verdict] if verdict_h else []))
            colours.append("green" if ln.verdict == "faster" else "red" if ln.verdict == "slower" else "")
        head, row_lines_all = plain_table(header, body, right={0, 2}, fold=1, width=console.width)
        return head, body, colours, row_lines_all

    def as_text(lines_of) -> str:
        head, _, _, row_lines_all = laid_out(lines_of)
        return "".join(x + "\n" for x in head) + "".join(x + "\n" for rl in row_lines_all for x in rl) + "\n"

    specs = list(tables(cmp, view, fleet))
    if console.color_system is None:  # a pipe or a file: nothing to colour, the lines as they are
        # a fleet's tables are written on two CPUs (kit.compare.halves: the same text as in one process)
        texts = map_text(as_text, [lines_of for _, lines_of in specs], len(cmp.sources))
        for (title, _), text in zip(specs, texts):
            console.print(title, markup=False, highlight=False)
            console.print()
            console.file.write(text)
        return
    for title, lines_of in specs:
        head, body, colours, row_lines_all = laid_out(lines_of)
        console.print(title, markup=False, highlight=False)
        console.print()
        block = Text("".join(x + "\n" for x in head), no_wrap=True)
        for row_lines, colour, row in zip(row_lines_all, colours, body):
            # the verdict in its colour (a terminal's; none in a pipe): it ends the row's first line
            first = row_lines[0]
            if colour and verdict_h and first.endswith(row[-1]):
                block.append(first[:len(first) - len(row[-1])])
                block.append(row[-1], style=colour)
            else:
                block.append(first)
            block.append("\n" + "".join(x + "\n" for x in row_lines[1:]) if len(row_lines) > 1 else "\n")
        console.print(block, no_wrap=True, crop=False, overflow="ignore", highlight=False, markup=False)


# --- Markdown -----------------------------------------------------------------------------------

def md_table(header: list[str], rows: list[list[str]]) -> str:
    """Cells are already Markdown-safe text (kit.bundle.inert.markdown_text)."""
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
                     + ["| " + " | ".join(r) + " |" for r in rows])


def markdown_findings(fleet: FleetSummary) -> list[str]:
    md = markdown_text
    left = ([f"## {md(LEFT_OUT_TITLE)}", ""] + [f"- {md(x)}" for x in left_out_lines(fleet)] + [""]) if fleet.left_out else []
    return ([f"## {md(findings_title(fleet))}", ""]
            + [("  - " if x.startswith("  ") else "- ") + md(x.strip()) for x in findings_lines(fleet)] + [""] + left)


def to_markdown_rows(cmp: Comparison, view: View, fleet: FleetSummary | None = None, findings: bool = True) -> list[str]:
    """The rows layout's sections in Markdown (every bundle's text escaped)."""
    md = markdown_text
    fleet = fleet if fleet is not None else fleet_of(cmp, view)
    out: list[str] = []
    if fleet is not None and findings:
        out += markdown_findings(fleet)
    out += [md(explanation(cmp, view)), ""]
    if not metric_rows(cmp, view.metric):
        out += [f"No cell has {'an' if view.metric[0] in 'aeiou' else 'a'} {view.metric} figure on any machine.", ""]
    value_h, ratio_h, verdict_h = headers(cmp, view.metric, fleet is not None)
    bound_h = bound_header(cmp, view.metric)
    outliers = fleet.outlier_cells() if fleet else set()
    for title, lines_of in tables(cmp, view, fleet):
        lines = lines_of()
        header = (["#", "machine", value_h] + ([ratio_h] if ratio_h else []) + ([bound_h] if bound_h else [])
                  + ([verdict_h] if verdict_h else []))
        body = []
        for rank, ln in enumerate(lines, 1):
            name = f"{ln.source.label} {ln.source.env.machine}"
            verdict = outlier_verdict(ln, outliers)
            body.append([str(rank), md(name), md(ln.value)] + ([md(ln.ratio)] if ratio_h else [])
                        + ([md(ln.bound)] if bound_h else []) + ([md(verdict)] if verdict_h else []))
        out += [f"### {md(title)}", "", md_table([md(h) for h in header], body), ""]
    return out

