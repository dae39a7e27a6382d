"""Write a Comparison as a rich table, CSV, JSON or Markdown.

Every output carries the same numbers; the rich and Markdown forms show three
tables (time and throughput, speedup over fp32 per machine, throughput
against the baseline), the warnings and the cells that could not be compared.
CSV is tidy (one line per cell x machine) for spreadsheets and pandas.

Ratios are printed by :func:`fmt_speedup_estimate` (speedup over fp32, the
point from :func:`kit.results.ratios.fmt_speedup`) and :func:`fmt_vs_baseline`
(machine against the baseline); every other view (``kit bundle show``, the
HTML pages, the charts) uses the same two functions.
"""

from __future__ import annotations

import csv
import io
from typing import Iterable

from kit.bundle.inert import markdown_text
from kit.compare.engine import Comparison, MachineCell, Row
from kit.compare.fleet import summary as fleet_summary, views as fleet_views
from kit.compare.console import fits, widest
from kit.compare.fleet.grouped import View, summarise_fleet
from kit.compare.json_text import Written, dumps, json_text
from kit.compare.fmt import fmt_cv, fmt_speedup_estimate, fmt_throughput, fmt_time, fmt_vs_baseline, speed_verdict
from kit.compare.figures import HOST_PACED
from kit.compare.measures import fmt_parity_gap, fmt_quality_gap, parity_metric
from kit.compare.stats import OUTSIDE_NOTE, RatioEstimate
from kit.results.explain import HOST_BOUND, HOST_BOUND_IDLE
from kit.results.ratios import EPOCH_S, THROUGHPUT

SPEEDUP_TITLE = (
    "Speedup over fp32 on each machine (median throughput ÷ fp32's = fp32 time ÷ this precision's; "
    ">1 = faster; [95% CI of the ratio of means])"
)


def speedup_title(with_verdicts: bool) -> str:
    """The speedup table's title; where its cells carry their verdicts, it says what they are."""
    return SPEEDUP_TITLE[:-1] + "; under it what bound the cell: kit explain's verdict)" if with_verdicts else SPEEDUP_TITLE


#: what the "host-paced" flag (kit.compare.figures.HOST_PACED) means, where a view shows it
HOST_PACED_NOTE = (f"{HOST_PACED}: an engine whose loop the host drives step by step, as the original tools' did "
                   "(CIFAR's fastai, the LSTM's kit engine): on a fast GPU its figure measures the host's CPU as much "
                   "as the GPU, so a ratio between two machines there is a ratio of their hosts too.")


#: what the host-bound mark under a ratio to the baseline means (kit explain's verdict, kit.results.explain.bound)
HOST_BOUND_NOTE = (f"⚠ {HOST_BOUND} in A (or B, ...): kit explain rates that machine's cell {HOST_BOUND} (the GPU "
                   f"idle at least {HOST_BOUND_IDLE:.0%} of a step, waiting for the host), so its ratio to the baseline "
                   "compares the hosts' CPUs as much as the GPUs.")


def host_bound_mark(cmp: Comparison, row: Row, mc: MachineCell | None) -> str | None:
    """Under the ratio of ``mc`` (a machine's cell of ``row``) to the baseline's: the machines of the two,
    the baseline first, whose cell kit explain rates host-bound ("host-bound in A, B"); None where
    neither is, or where there is no ratio."""
    if mc is None or mc.vs_baseline is None:
        return None
    i = next(n for n, m in enumerate(row.machines) if m is mc)
    names = [cmp.sources[n].label for n in dict.fromkeys((0, i))
             if row.machines[n] is not None and row.machines[n].explain_kind == HOST_BOUND]
    return f"{HOST_BOUND} in {', '.join(names)}" if names else None


def any_host_bound_ratio(cmp: Comparison) -> bool:
    return any(host_bound_mark(cmp, r, mc) for r in cmp.rows for mc in r.machines[1:])


def any_host_paced(cmp: Comparison) -> bool:
    return any(mc is not None and HOST_PACED in mc.flags for r in cmp.rows for mc in r.machines)


def any_outside_ci(cmp: Comparison) -> bool:
    return any(est is not None and est.outside_ci for r in cmp.rows for mc in r.machines if mc
               for est in (mc.vs_fp32, mc.vs_baseline))


def _status_text(mc: MachineCell | None) -> str:
    if mc is None:
        return "—"
    return f"{mc.status}" + (f": {mc.reason}" if mc.reason else "")


def _cell_label(row: Row) -> str:
    return row.label


def _time_cell(row: Row, mc: MachineCell | None, with_energy: bool) -> list[str]:
    if mc is None or mc.status != "ok":
        return [_status_text(mc)]
    lines = [f"{fmt_time(mc.epoch_s)}/epoch", fmt_throughput(mc.throughput, row.unit)]
    lines += n_and_cv(mc)
    if with_energy and mc.energy_j_per_epoch is not None:
        lines.append(f"{mc.energy_j_per_epoch:,.0f} J/epoch")
    if mc.flags:
        lines.append("⚠ " + ", ".join(mc.flags))
    return lines


def n_and_cv(mc: MachineCell) -> list[str]:
    """``n=3, throughput CV 0.2%`` (the epoch-time CV when there is no throughput)."""
    s, metric = (mc.throughput, THROUGHPUT) if mc.throughput is not None else (mc.epoch_s, EPOCH_S)
    if s is None:
        return []
    return [f"n={s.n}, {fmt_cv(s, metric)}" if s.n > 1 else "n=1"]


def not_compared_lines(cmp: Comparison, verbose: bool) -> list[str]:
    """The cells not compared: counted by reason, or (``verbose``) one line each."""
    if verbose:
        return list(cmp.not_comparable)
    return [f"{n} cell{'s' if n != 1 else ''}: {reason}" for reason, n in cmp.not_compared_by_reason()]


def not_compared_title(cmp: Comparison, verbose: bool) -> str:
    n = len(cmp.not_compared)
    tail = "" if verbose else " — counted by reason; --verbose lists every cell"
    return f"Not compared: {n} cell{'s' if n != 1 else ''} missing, skipped, failed or measured otherwise on some inputs{tail}"


QUALITY_TITLE = (
    "Final quality (convergence runs; median over repeats): each cell's final metric, its gap to this "
    "machine's base precision with the parity verdict, and its gap to the baseline machine's same cell"
)


def quality_rows(cmp: Comparison) -> list[Row]:
    """The rows where some machine's convergence run recorded the final metric."""
    return [r for r in cmp.rows if any(mc and mc.final_metric for mc in r.machines)]


def quality_lines(row: Row, mc: MachineCell | None, baseline: str) -> list[str]:
    """``held-out loss 6.2447``, ``-0.20% vs amp-bf16: matches amp-bf16``, ``+0.05% vs base machine``."""
    if mc is None or mc.status != "ok":
        return [_status_text(mc)]
    if mc.final_metric is None:
        return ["—"]
    lines = [f"{parity_metric(row.workload)} {mc.final_metric.median:.5g}"
             + (f" (n={mc.final_metric.n})" if mc.final_metric.n > 1 else "")]
    if mc.parity:
        lines.append(f"{fmt_parity_gap(mc.parity)} vs {mc.parity.get('base', 'fp32')}: {mc.parity['verdict']}")
    if mc.quality_vs_baseline is not None:
        lines.append(f"{fmt_quality_gap(row.workload, mc.quality_vs_baseline)} vs {baseline}")
    return lines


def _has_energy(cmp: Comparison) -> bool:
    return any(mc and mc.energy_j_per_epoch is not None for r in cmp.rows for mc in r.machines)


# --- rich --------------------------------------------------------------------------------

def _inputs_table(cmp: Comparison, sources=None):
    """The Inputs table, one column per fact; of ``sources`` only, where given (to measure it)."""
    from rich.markup import escape
    from rich.table import Table

    inputs = Table(title="Inputs", title_justify="left", show_lines=False)
    for col in ("", "machine", "GPU", "driver", "stack", "torch", "data", "file"):
        inputs.add_column(col, overflow="fold")
    for s in cmp.sources if sources is None else sources:
        mark = " (baseline)" if s is cmp.baseline_source else ""
        # text read from bundles is inert (kit.compare.load) and escaped so it cannot inject rich markup
        inputs.add_row(
            f"[bold]{s.label}[/bold]{mark}", *(escape(x) for x in fleet_views.input_fields(s)),
            escape(s.file_name) + (" [yellow](interrupted)[/yellow]" if s.interrupted else ""),
        )
    return inputs


def _inputs_fit(cmp: Comparison, console) -> bool:
    """The Inputs table fits the console: measured on the machines with each column's widest text."""
    rows = widest(cmp.sources, lambda s: (fleet_views.label_of(cmp, s), *fleet_views.input_fields(s),
                                          fleet_views.input_file(s)))
    return fits(console, [_inputs_table(cmp, rows)])


def _column_tables(cmp: Comparison) -> list:
    """Today's tables, one column per machine (the layout for a few machines), and the notes between them."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    out: list = []
    energy = _has_energy(cmp)

    def per_machine(title: str, rows: list[Row], lines, show_lines: bool = False) -> None:
        """A table of ``rows`` with one column per machine; ``lines(row, mc)`` gives a cell's lines."""
        t = Table(title=title, title_justify="left", show_lines=show_lines)
        t.add_column("cell", overflow="fold")
        for s in cmp.sources:
            t.add_column(s.label)
        for row in rows:
            t.add_row(escape(_cell_label(row)), *(escape("\n".join(lines(row, mc))) for mc in row.machines))
        out.append(t)

    per_machine("Time per epoch and throughput (median over repeats)", cmp.rows,
                lambda row, mc: _time_cell(row, mc, energy), show_lines=True)
    sp_rows = [r for r in cmp.rows if any(mc and mc.vs_fp32 for mc in r.machines)]
    if sp_rows:
        shown = fleet_views.any_verdict(cmp)
        per_machine(speedup_title(shown), sp_rows, lambda row, mc: [fmt_speedup_estimate(mc.vs_fp32), mc.vs_fp32.verdict]
                    + fleet_views.verdict_lines(mc, shown) if mc and mc.vs_fp32 else ["—"])

    base = cmp.baseline_source
    t = Table(title=f"Throughput relative to {base.label} (baseline; median ÷ median, >1 = faster than {base.label}; [95% CI of the ratio of means])", title_justify="left")
    t.add_column("cell", overflow="fold")
    for s in cmp.sources[1:]:
        t.add_column(f"{s.label} ÷ {base.label}")
    for row in cmp.rows:
        cells = []
        for mc in row.machines[1:]:
            est = mc.vs_baseline if mc else None
            if est is None:
                cells.append("—" if mc is None or mc.status == "ok" else escape(_status_text(mc)))
                continue
            colour = "green" if speed_verdict(est) == "faster" else "red" if speed_verdict(est) == "slower" else "default"
            mark = host_bound_mark(cmp, row, mc)
            cells.append(f"[{colour}]{escape(fmt_vs_baseline(est))}\n{speed_verdict(est)}[/{colour}]"
                         + (f"\n[yellow]⚠ {escape(mark)}[/yellow]" if mark else ""))
        t.add_row(escape(_cell_label(row)), *cells)
    out.append(t)
    if any_outside_ci(cmp):
        out.append(Text(OUTSIDE_NOTE + "."))
    if any_host_bound_ratio(cmp):
        out.append(Text(HOST_BOUND_NOTE))
    q_rows = quality_rows(cmp)
    if q_rows:
        per_machine(QUALITY_TITLE, q_rows, lambda row, mc: quality_lines(row, mc, base.label))
    return out


#: no machine's column in the column tables is narrower than this (its figures: "n=3, throughput CV 0.2%")
MIN_COLUMN = 16


def print_rich(cmp: Comparison, console, verbose: bool = False, view=None) -> None:
    """Inputs, method, warnings, then the tables: one column per machine where they fit the
    console, else (or when ``view`` asks for a metric or groups) machines as rows
    (:mod:`kit.compare.fleet.views`)."""
    view = view or View()
    if summary_first(cmp, view) and not (verbose or per_cell_wanted(view)):
        # the summary names every machine: the inputs' facts once, the table of them with --verbose
        shared = " · ".join(f"{k} {v}" for k, v in fleet_views.shared_inputs(cmp))
        console.print(f"{len(cmp.sources)} inputs" + (f"; every input: {shared}" if shared else "")
                      + " (each input's facts: --verbose)", markup=False, highlight=False)
    elif _inputs_fit(cmp, console):
        console.print(_inputs_table(cmp))
    else:
        fleet_views.print_inputs_compact(cmp, console)
    console.print(f"[dim]Statistics: {cmp.method}.[/dim]")
    _print_counted_once(cmp, console)
    _print_warnings(cmp, console)
    # a machine's column takes more than MIN_COLUMN characters: past that many, do not build them to measure
    many = len(cmp.sources) * MIN_COLUMN > console.width
    columns = None if many or view.rows or view.group_by or view.metric != "throughput" else _column_tables(cmp)
    if not cmp.rows:
        console.print("No cell was measured, the same way, by two inputs: nothing to divide (below, why).",
                      highlight=False, markup=False)
    elif columns is not None and fits(console, columns):
        for part in columns:
            console.print(part)
    else:
        fleet = fleet_views.fleet_of(cmp, view)
        if leads_with_summary(cmp, fleet):
            fleet_views.print_findings(fleet, console)
            console.print(fleet_summary.explanation(view.by), markup=False, highlight=False, style="dim")
            for table in fleet_summary.summary_tables(fleet, view.by):
                console.print(table.title, markup=False, highlight=False)
                console.print()
                console.file.write("".join(x + "\n" for x in fleet_summary.text_lines(table, console.width)) + "\n")
            if per_cell_wanted(view):
                fleet_views.print_rows(cmp, console, view, fleet, findings=False)
        else:
            fleet_views.print_rows(cmp, console, view, fleet)
        if any_outside_ci(cmp):
            console.print(OUTSIDE_NOTE + ".", highlight=False, markup=False)
    if any_host_paced(cmp):
        console.print(HOST_PACED_NOTE, highlight=False, markup=False)
    _print_not_compared(cmp, console, verbose)


#: above this many machines a grouped fleet's views lead with the summary (kit.compare.fleet.summary)
SUMMARY_ABOVE = 4


def leads_with_summary(cmp: Comparison, fleet) -> bool:
    return fleet is not None and len(cmp.sources) > SUMMARY_ABOVE


def summary_first(cmp: Comparison, view: View) -> bool:
    """Whether the views lead with the fleet's summary (a grouped fleet above SUMMARY_ABOVE machines)."""
    return bool(view.group_by) and len(cmp.sources) > SUMMARY_ABOVE


def per_cell_wanted(view: View) -> bool:
    """The per-cell tables after a fleet's summary: asked for by --cells, --verbose or --metric."""
    return bool(view.cells or view.verbose or view.rows)


def print_refused(cmp: Comparison, console) -> None:
    """Each input that could not be read, with its reason (the others were compared)."""
    if cmp.refused:
        n = len(cmp.refused)
        console.print(f"Refused: {n} input{'s' if n != 1 else ''} could not be read; the other {len(cmp.sources)} "
                      "were compared:", style="bold red", highlight=False, markup=False)
        for r in cmp.refused:
            console.print(f"  {r.line}", highlight=False, markup=False)


def _print_not_compared(cmp: Comparison, console, verbose: bool) -> None:
    if cmp.not_compared:
        console.print(not_compared_title(cmp, verbose) + ":", highlight=False, markup=False, style="bold")
        for line in not_compared_lines(cmp, verbose):
            console.print(f"  {line}", highlight=False, markup=False)


def _print_counted_once(cmp: Comparison, console) -> None:
    for line in cmp.counted_once:
        console.print(f"Counted once: {line}", markup=False, highlight=False)


def _print_warnings(cmp: Comparison, console) -> None:
    if not cmp.warnings:
        console.print("[green]No comparability warnings.[/green]")
        return
    console.print("[bold]Comparability warnings[/bold] (most severe first):")
    colours = {"high": "red", "medium": "yellow", "low": "dim"}
    for w in cmp.warnings:
        console.print(f"  [{colours[w.severity]}]{w.severity.upper():6}[/{colours[w.severity]}] ", end="")
        console.print(w.message, markup=False, highlight=False)


def print_notes(cmp: Comparison, console, verbose: bool = False) -> None:
    """Warnings and not-comparable cells, for stderr when stdout carries CSV/JSON/Markdown."""
    _print_counted_once(cmp, console)
    _print_warnings(cmp, console)
    _print_not_compared(cmp, console, verbose)


# --- CSV, JSON -----------------------------------------------------------------------------

CSV_COLUMNS = (
    "cell_id", "workload", "model", "precision", "engine", "machine", "baseline", "machine_name", "gpu",
    "status", "reason", "n", "epoch_s_median", "epoch_time_cv", "throughput_median", "throughput_unit", "throughput_cv",
    "speedup_vs_fp32", "speedup_mean_ratio", "speedup_mean_ratio_ci95_low", "speedup_mean_ratio_ci95_high",
    "speedup_welch_p", "speedup_verdict", "speedup_median_outside_ci",
    "vs_baseline", "vs_baseline_mean_ratio", "vs_baseline_mean_ratio_ci95_low", "vs_baseline_mean_ratio_ci95_high",
    "vs_baseline_welch_p", "vs_baseline_verdict", "vs_baseline_median_outside_ci",
    "energy_j_per_epoch", "data_source", "flags",
    "final_metric_name", "final_metric_median", "parity_base", "parity_gap", "parity_verdict", "final_metric_gap_vs_baseline",
    "explain_verdict", "explain_verdict_kind",
)


def _est_cols(est: RatioEstimate | None) -> list:
    """ratio of medians, ratio of means, its 95% CI, Welch p, verdict, whether the median is outside the CI."""
    if est is None:
        return ["", "", "", "", "", "", ""]
    return [est.ratio, "" if est.mean_ratio is None else est.mean_ratio,
            "" if est.ci_low is None else est.ci_low, "" if est.ci_high is None else est.ci_high,
            "" if est.p_value is None else est.p_value, est.verdict, "yes" if est.outside_ci else "no"]


def _quality_cols(row: Row, mc: MachineCell) -> list:
    """final metric's name and median, the parity row's base, gap and verdict, the gap to the baseline machine."""
    if mc.final_metric is None:
        return ["", "", "", "", "", ""]
    p = mc.parity or {}
    return [parity_metric(row.workload), mc.final_metric.median, p.get("base", "fp32") if p else "",
            p.get("gap", ""), p.get("verdict", ""), "" if mc.quality_vs_baseline is None else mc.quality_vs_baseline]


def to_csv(cmp: Comparison) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for row in cmp.rows:
        for s, mc in zip(cmp.sources, row.machines):
            mc = mc or MachineCell(status="missing")
            e, t = mc.epoch_s, mc.throughput
            w.writerow([
                row.cell_id, row.workload, row.model, row.precision, row.engine, s.label,
                "yes" if s is cmp.baseline_source else "no", s.env.machine, s.env.gpu, mc.status, mc.reason or "",
                (t or e).n if (t or e) else "", e.median if e else "", e.cv if e else "",
                t.median if t else "", row.unit, t.cv if t else "",
                *_est_cols(mc.vs_fp32), *_est_cols(mc.vs_baseline),
                "" if mc.energy_j_per_epoch is None else mc.energy_j_per_epoch, mc.data_source if mc.status == "ok" else "",
                ";".join(mc.flags),
                *_quality_cols(row, mc),
                mc.explain_verdict or "", mc.explain_kind or "",
            ])
    return buf.getvalue()


def to_json(cmp: Comparison, view=None, gate=None) -> str:
    """The comparison as JSON; with ``--group-by``, the fleet's groups and findings under ``"fleet"``;
    with ``--fail-if-slower``, what its gate (kit.compare.gate.Gate) tested under ``"fail_if_slower"``."""
    # each row one line (200 runs of the full CIFAR suite: 0.3 s in one process; a forked second
    # process, as the tables use, costs more than it saves here)
    d = cmp.to_dict(rows=Written(dumps(cmp.row_dict(r)) for r in cmp.rows))
    if view is not None and view.group_by:
        fleet = summarise_fleet(cmp, view.group_by, view.outlier_pct)
        d["fleet"] = fleet.to_dict()
        d["fleet"]["summary"] = [t.to_dict() for t in fleet_summary.summary_tables(fleet, view.by)]
    if gate is not None:
        d["fail_if_slower"] = gate.to_dict()
    return json_text(d) + "\n"


# --- Markdown --------------------------------------------------------------------------------

def _md_escape(text: str) -> str:
    """A table cell: each line a stranger's text made inert and escaped (kit.bundle.inert.markdown_text:
    GitHub renders inline HTML, so ``<script>`` must arrive as text), the lines joined by ``<br>``."""
    return "<br>".join(markdown_text(line) for line in str(text).split("\n"))


def _md_table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(_md_escape(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_md_escape(str(c)) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def to_markdown(cmp: Comparison, verbose: bool = False, view=None) -> str:
    view = view or View()
    md = markdown_text
    base = cmp.baseline_source
    out = ["## Inputs", "", _md_table(
        ("", "machine", "GPU", "driver", "stack", "torch", "data", "file"),
        [(s.label + (" (baseline)" if s is base else ""), s.env.machine, s.env.gpu, s.env.driver, s.env.stack,
          s.env.torch, s.env.data_source, s.file_name + (" (interrupted)" if s.interrupted else "")) for s in cmp.sources],
    ), "", f"Statistics: {cmp.method}.", ""] + [f"Counted once: {md(x)}" for x in cmp.counted_once] + [""] * bool(cmp.counted_once)
    if cmp.warnings:
        out += ["## Comparability warnings", ""] + [f"- **{w.severity}**: {md(w.message)}" for w in cmp.warnings] + [""]
    if view.rows or view.group_by or view.metric != "throughput" or len(cmp.sources) > MARKDOWN_COLUMNS:
        # a fleet: a Markdown table of 64 machine columns is unreadable wherever it is pasted
        fleet = fleet_views.fleet_of(cmp, view)
        if leads_with_summary(cmp, fleet):
            out += fleet_views.markdown_findings(fleet) + [markdown_text(fleet_summary.explanation(view.by)), ""]
            for table in fleet_summary.summary_tables(fleet, view.by):
                out += fleet_summary.markdown_lines(table)
            if per_cell_wanted(view):
                out += fleet_views.to_markdown_rows(cmp, view, fleet, findings=False)
        else:
            out += fleet_views.to_markdown_rows(cmp, view, fleet)
        if any_outside_ci(cmp):
            out += [OUTSIDE_NOTE + ".", ""]
        return "\n".join(out + _md_not_compared(cmp, verbose))
    energy = _has_energy(cmp)
    out += ["## Time per epoch and throughput (median over repeats)", "", _md_table(
        ["cell"] + [s.label for s in cmp.sources],
        [[_cell_label(r)] + ["\n".join(_time_cell(r, mc, energy)) for mc in r.machines] for r in cmp.rows],
    ), ""]
    sp_rows = [r for r in cmp.rows if any(mc and mc.vs_fp32 for mc in r.machines)]
    if sp_rows:
        shown = fleet_views.any_verdict(cmp)
        out += [f"## {speedup_title(shown)}", "", _md_table(
            ["cell"] + [s.label for s in cmp.sources],
            [[_cell_label(r)] + ["\n".join([f"{fmt_speedup_estimate(mc.vs_fp32)} {mc.vs_fp32.verdict}"] + fleet_views.verdict_lines(mc, shown)) if mc and mc.vs_fp32 else "—" for mc in r.machines] for r in sp_rows],
        ), ""]
    out += [f"## Throughput relative to {base.label} (baseline; median ÷ median; [95% CI of the ratio of means])", "", _md_table(
        ["cell"] + [f"{s.label} ÷ {base.label}" for s in cmp.sources[1:]],
        [[_cell_label(r)] + [
            (f"{fmt_vs_baseline(mc.vs_baseline)} {speed_verdict(mc.vs_baseline)}"
             + "".join(f"\n⚠ {x}" for x in [host_bound_mark(cmp, r, mc)] if x)
             if mc and mc.vs_baseline else _status_text(mc) if mc and mc.status != "ok" else "—")
            for mc in r.machines[1:]] for r in cmp.rows],
    ), ""]
    if any_outside_ci(cmp):
        out += [OUTSIDE_NOTE + ".", ""]
    if any_host_bound_ratio(cmp):
        out += [HOST_BOUND_NOTE, ""]
    if any_host_paced(cmp):
        out += [HOST_PACED_NOTE, ""]
    q_rows = quality_rows(cmp)
    if q_rows:
        out += [f"## {QUALITY_TITLE}", "", _md_table(
            ["cell"] + [s.label for s in cmp.sources],
            [[_cell_label(r)] + ["\n".join(quality_lines(r, mc, base.label)) for mc in r.machines] for r in q_rows],
        ), ""]
    return "\n".join(out + _md_not_compared(cmp, verbose))


#: Markdown keeps one column per machine up to this many machines (Markdown has no width to measure)
MARKDOWN_COLUMNS = 4


def _md_not_compared(cmp: Comparison, verbose: bool) -> list[str]:
    if not cmp.not_compared:
        return []
    return ([f"## {not_compared_title(cmp, verbose)}", ""]
            + [f"- {markdown_text(line)}" for line in not_compared_lines(cmp, verbose)] + [""])
