"""The page ``kit compare --html`` writes: one column per machine for a few machines, or the
fleet page (ranked bars per cell and group, outliers named) for many."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from kit.report.html.page import _outside_note, _page, _table, _verdict_html
from kit.results.ratios import SPEEDUP_DEFINITION

if TYPE_CHECKING:
    from kit.compare.engine import Comparison


#: up to this many machines the compare page has one column per machine; more make the fleet page
PAGE_COLUMNS = 4

FLEET_CSS = """
table.fleet { table-layout: fixed; }
table.fleet td { overflow-wrap: anywhere; }
table.fleet th:first-child, table.fleet td:first-child { width: 92px; }
svg.ranked, svg.heatmap { width: 100%; height: auto; display: block; margin: 4px 0 12px; }
table.summary { font-size: 0.8rem; }
table.summary td { padding: 1px 6px; white-space: nowrap; }
table.summary td:last-child { white-space: normal; overflow-wrap: anywhere; }
.outlier-note { color: #a3231b; font-weight: 600; }
h3 { font-size: 1rem; margin: 22px 0 4px; overflow-wrap: anywhere; }
"""


def _time_cell(row, mc) -> str:
    """A machine's cell of the time and throughput table: its figures, or its status and why."""
    from kit.compare.fmt import fmt_throughput, fmt_time
    from kit.compare.render import n_and_cv

    if mc is None or mc.status != "ok":
        return escape(mc.status + (f": {mc.reason}" if mc and mc.reason else "")) if mc else "—"
    bits = [escape(fmt_time(mc.epoch_s)) + "/epoch", escape(fmt_throughput(mc.throughput, row.unit))]
    bits += [escape(x) for x in n_and_cv(mc)]
    if mc.energy_j_per_epoch is not None:
        bits.append(f"{mc.energy_j_per_epoch:,.0f} J/epoch")
    if mc.flags:
        bits.append(f'<span class="flag">⚠ {escape(", ".join(mc.flags))}</span>')
    return "<br>".join(bits)


def _vs_cell(cmp, row, mc) -> str:
    """A machine's cell of the table against the baseline: its ratio with the CI, the verdict, and
    the host-bound mark where kit explain rates the cell host-bound."""
    from kit.compare.fmt import fmt_vs_baseline, speed_verdict
    from kit.compare.render import host_bound_mark

    est = mc.vs_baseline if mc else None
    if est is None:
        return escape(mc.status) if mc and mc.status != "ok" else "—"
    v = speed_verdict(est)
    cls = "sig" if v == "faster" else "slower" if v == "slower" else "ns"
    mark = host_bound_mark(cmp, row, mc)
    return (f'{escape(fmt_vs_baseline(est))} <span class="{cls}">{escape(v)}</span>'
            + (f'<br><span class="flag">⚠ {escape(mark)}</span>' if mark else ""))


def render_compare_page(cmp: "Comparison", view=None) -> str:
    """The page ``kit compare --html FILE`` writes: one column per machine for a few machines, the
    fleet page (:func:`render_fleet_page`) for more, or when ``view`` groups them."""
    if len(cmp.sources) > PAGE_COLUMNS or (view is not None and view.group_by):
        return render_fleet_page(cmp, view)
    from kit.compare.render import (HOST_BOUND_NOTE, QUALITY_TITLE, any_host_bound_ratio, not_compared_lines,
                                    not_compared_title, quality_lines, quality_rows)
    from kit.report.charts import comparison_charts

    base = cmp.baseline_source
    body = [f"<h1>Comparison of {len(cmp.sources)} runs</h1>", f'<p class="sub">Baseline: {escape(base.label)} ({escape(base.short_name)}). Statistics: {escape(cmp.method)}.</p>']
    body.append("<h2>Inputs</h2>" + _table(
        ["", "machine", "GPU", "driver", "stack", "torch", "cuDNN", "data", "file"],
        [[escape(s.label) + (" (baseline)" if s is base else ""), escape(s.env.machine), escape(s.env.gpu), escape(s.env.driver),
          escape(s.env.stack), escape(s.env.torch), escape(s.env.cudnn),
          escape(s.env.data_source) + (' <span class="badge synthetic">SYNTHETIC</span>' if s.env.data_source == "synthetic" else ""),
          escape(s.file_name) + (' <span class="badge interrupted">INTERRUPTED</span>' if s.interrupted else "")]
         for s in cmp.sources],
    ))
    if cmp.counted_once:
        body.append("<h2>Counted once</h2><ul>" + "".join(f"<li>{escape(x)}</li>" for x in cmp.counted_once) + "</ul>")
    body.append("<h2>Comparability warnings</h2>")
    if cmp.warnings:
        body.append('<ul class="warnings">' + "".join(
            f'<li class="{w.severity}"><strong>{escape(w.severity)}</strong>: {escape(w.message)}</li>' for w in cmp.warnings) + "</ul>")
    else:
        body.append("<p>None.</p>")

    body.append("<h2>Time per epoch and throughput</h2>" + _table(
        ["cell"] + [escape(s.label) for s in cmp.sources],
        [[escape(r.label)] + [_time_cell(r, mc) for mc in r.machines] for r in cmp.rows], numeric_from=1,
    ))
    sp_rows = [r for r in cmp.rows if any(mc and mc.vs_fp32 for mc in r.machines)]
    if sp_rows:
        from kit.compare.fleet.views import any_verdict, verdict_lines

        shown = any_verdict(cmp)
        body.append("<h2>Speedup over fp32 on each machine</h2><p class=\"sub\">"
                    + escape(SPEEDUP_DEFINITION[0].upper() + SPEEDUP_DEFINITION[1:])
                    + "; [95% CI of the ratio of means]" + ("; under it what bound the cell (kit explain's verdict)"
                                                            if shown else "") + ".</p>" + _table(
            ["cell"] + [escape(s.label) for s in cmp.sources],
            [[escape(r.label)] + [_verdict_html(mc.vs_fp32) + "".join(f'<br><span class="note">{escape(x)}</span>'
                                                                      for x in verdict_lines(mc, shown and mc.vs_fp32 is not None))
                                  if mc else "—" for mc in r.machines] for r in sp_rows], numeric_from=1,
        ) + _outside_note(mc.vs_fp32 for r in sp_rows for mc in r.machines if mc))

    body.append(f"<h2>Throughput relative to {escape(base.label)}</h2>"
                f'<p class="sub">Median throughput ÷ {escape(base.label)}\'s median; [95% CI of the ratio of means].</p>' + _table(
        ["cell"] + [f"{escape(s.label)} ÷ {escape(base.label)}" for s in cmp.sources[1:]],
        [[escape(r.label)] + [_vs_cell(cmp, r, mc) for mc in r.machines[1:]] for r in cmp.rows], numeric_from=1,
    ) + _outside_note(mc.vs_baseline for r in cmp.rows for mc in r.machines[1:] if mc)
        + (f'<p class="sub">{escape(HOST_BOUND_NOTE)}</p>' if any_host_bound_ratio(cmp) else ""))
    q_rows = quality_rows(cmp)
    if q_rows:
        title, _, sub = QUALITY_TITLE.partition(" (")
        sub = sub[:1].upper() + sub[1:]
        body.append(f"<h2>{escape(title)}</h2><p class=\"sub\">{escape(sub.replace('):', ':', 1))}.</p>" + _table(
            ["cell"] + [escape(s.label) for s in cmp.sources],
            [[escape(r.label)] + ["<br>".join(escape(x) for x in quality_lines(r, mc, base.label)) for mc in r.machines]
             for r in q_rows], numeric_from=1,
        ))
    charts = comparison_charts(cmp)
    if charts:
        body.append('<h2>Charts</h2><div class="charts">')
        for caption, svg in charts:
            body.append(f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>")
        body.append("</div>")
    if cmp.not_compared:
        title = not_compared_title(cmp, verbose=True).replace("Not compared: ", "")
        body.append(f"<h2>Not compared</h2><p class=\"sub\">{escape(title)}, counted by reason:</p><ul>"
                    + "".join(f"<li>{escape(x)}</li>" for x in not_compared_lines(cmp, verbose=False)) + "</ul>"
                    + "<details><summary>every cell</summary><ul>"
                    + "".join(f"<li>{escape(x)}</li>" for x in not_compared_lines(cmp, verbose=True)) + "</ul></details>")
    return _page(f"Benchmark comparison — {len(cmp.sources)} runs", "\n".join(body))


def render_fleet_page(cmp: "Comparison", view=None) -> str:
    """The compare page for many machines, at the page's fixed width whatever their number: the
    findings (grouped by ``view.group_by`` or the GPU model) with their rule, the warnings, then per
    group the summary table (kit.compare.fleet.summary) and its heatmap (machines x precisions or
    suites, colour = ratio to the group, the cells a finding names outlined); the per-cell ranked bar
    charts only where ``view.cells`` or ``view.verbose`` asks for them; the Inputs table last. No scripts."""
    from kit.bundle.inert import html_text
    from kit.compare.fleet.causes import NO_CAUSE
    from kit.compare.fleet.grouped import View, summarise_fleet
    from kit.compare.fleet.summary import column_of, explanation, summary_tables, table_cells
    from kit.compare.fleet.views import LEFT_OUT_TITLE, findings_title, left_out_lines
    from kit.compare.render import not_compared_lines, not_compared_title
    from kit.report.svg.heatmap import HeatRow, heatmap
    from kit.results.ratios import fmt_ratio

    view = view or View()
    by = view.group_by or "gpu"
    fleet = summarise_fleet(cmp, by, view.outlier_pct)
    base = cmp.baseline_source
    h = html_text
    body = [f"<h1>Comparison of {len(cmp.sources)} runs</h1>",
            f'<p class="sub">Baseline: {h(base.label)} ({h(base.short_name)}). Statistics: {h(cmp.method)}.</p>']
    items = []
    for f in fleet.findings:
        causes = [c.line for c in f.causes] or [NO_CAUSE]
        items.append(f"<li>{h(f.line)}<ul>" + "".join(f"<li>{h(c)}</li>" for c in causes) + "</ul></li>")
    body.append("<h2>Findings</h2>" + f'<p class="sub">{h(findings_title(fleet))}.</p>'
                + '<ul class="findings">' + ("".join(items) or "<li>No machine is slow or unstable.</li>") + "</ul>")
    if fleet.left_out:
        body.append(f"<h2>{h(LEFT_OUT_TITLE)}</h2><ul>" + "".join(f"<li>{h(x)}</li>" for x in left_out_lines(fleet))
                    + "</ul>")
    if cmp.counted_once:
        body.append("<h2>Counted once</h2><ul>" + "".join(f"<li>{h(x)}</li>" for x in cmp.counted_once) + "</ul>")
    body.append("<h2>Comparability warnings</h2>")
    body.append('<ul class="warnings">' + "".join(f'<li class="{h(w.severity)}"><strong>{h(w.severity)}</strong>: {h(w.message)}</li>'
                                                  for w in cmp.warnings) + "</ul>" if cmp.warnings else "<p>None.</p>")
    body.append(f'<h2>Summary</h2><p class="sub">{h(explanation(view.by))} The heatmap shows the same ratios: '
                "white = as fast as the rest of the group, vermillion = slower, blue = faster.</p>")
    rows_by_key = {gc.row.key: gc.row for gc in fleet.cells}
    for n_group, table in enumerate(summary_tables(fleet, view.by)):
        header, cells = table_cells(table)
        heat = []
        for r in table.rows:
            marked_cols = {column_of(rows_by_key[k], view.by) for f in r.findings if f.kind == "slow" for k in f.cell_keys}
            heat.append(HeatRow(f"{r.source.label} {r.source.env.machine}", [r.by_column[c] for c in table.columns],
                                [fmt_ratio(r.by_column[c], 2) for c in table.columns],
                                [c in marked_cols for c in table.columns], "; ".join(f.short for f in r.findings)))
        body.append(f"<h3>{h(table.title)}</h3>"
                    + heatmap(heat, table.columns, f"heat-{n_group}", f"{table.title}: ratio to the group per {view.by}"))
        numeric = set(range(2, 3 + len(table.columns) + 1))
        head = "".join(f'<th class="num">{h(x)}</th>' if i in numeric else f"<th>{h(x)}</th>" for i, x in enumerate(header))
        trs = "".join("<tr>" + "".join(f'<td class="num">{h(c)}</td>' if i in numeric else f"<td>{h(c)}</td>"
                                       for i, c in enumerate(r)) + "</tr>" for r in cells)
        body.append(f'<table class="summary"><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>')
    if view.cells or view.verbose:
        body.extend(_per_cell_charts(cmp, fleet, by))
    else:
        body.append('<p class="sub">The per-cell charts (each machine\'s throughput ÷ the baseline\'s, per group): '
                    "--cells PATTERN or --verbose.</p>")
    body.append("<h2>Inputs</h2>" + _table(
        ["", "machine", "GPU", "driver", "stack", "torch", "data", "file"],
        [[h(s.label) + (" (baseline)" if s is base else ""), h(s.env.machine), h(s.env.gpu), h(s.env.driver),
          h(s.env.stack), h(s.env.torch), h(s.env.data_source),
          h(s.file_name) + (' <span class="badge interrupted">INTERRUPTED</span>' if s.interrupted else "")]
         for s in cmp.sources], cls="fleet"))
    if cmp.not_compared:
        body.append(f"<h2>Not compared</h2><p class=\"sub\">{h(not_compared_title(cmp, verbose=False))}:</p><ul>"
                    + "".join(f"<li>{h(x)}</li>" for x in not_compared_lines(cmp, verbose=False)) + "</ul>")
    if cmp.refused:
        body.append("<h2>Refused inputs</h2><ul>" + "".join(f"<li>{h(r.line)}</li>" for r in cmp.refused) + "</ul>")
    return _page(f"Benchmark comparison — {len(cmp.sources)} runs", "\n".join(body), extra_css=FLEET_CSS)


def _per_cell_charts(cmp: "Comparison", fleet, by: str) -> list[str]:
    """Per cell a ranked bar chart per group: each machine's throughput ÷ the baseline's with its 95%
    CI as whiskers, the machines slow in that cell in red."""
    from kit.bundle.inert import html_text as h
    from kit.compare.fleet.findings import group_phrase
    from kit.compare.fleet.views import spread_text
    from kit.compare.fmt import fmt_vs_baseline, speed_verdict
    from kit.report.svg.ranked import RankedBar, bar_end, ranked_bars

    base = cmp.baseline_source
    outliers = fleet.outlier_cells()
    body = [f"<h2>Throughput relative to {h(base.label)}, per cell</h2>"
            f'<p class="sub">Each machine\'s median throughput ÷ {h(base.label)}\'s median, fastest first within '
            f"each group ({h(by)}); whiskers: 95% CI of the ratio of means; "
            '<span class="outlier-note">red: a machine named slow, in its slow cells</span>.</p>']
    for n_row, row in enumerate(cmp.rows):
        body.append(f"<h3>{h(row.label)}</h3>")
        charts = []
        for gc in (c for c in fleet.cells if c.row is row):
            bars = []
            for m in gc.members:
                mc = row.machines[m.source.index]
                est = mc.vs_baseline if mc else None
                is_base = m.source is base
                value = 1.0 if is_base else est.ratio if est else None
                text = "baseline" if is_base else (fmt_vs_baseline(est) if est else "—")
                verdict = "" if is_base or est is None else speed_verdict(est)
                name = f"{m.source.label} {m.source.env.machine}"
                out = (m.source.index, row.key) in outliers
                bars.append(RankedBar(name, value, est.ci_low if est else None, est.ci_high if est else None,
                                      text, f"{name}: {text} {verdict}".strip() + (" (outlier)" if out else ""), marked=out))
            charts.append((f"{by} {gc.group}: {group_phrase(by, gc.group, len(gc.members))}; {spread_text(gc, row.unit)}", bars))
        # one scale for the cell's groups, so that their bars (and the baseline's line) line up; a
        # whisker past 1.2x the longest bar is cut at the axis' end (the figure beside it is whole)
        ends = [bar_end(b) for _, bars in charts for b in bars if b.value is not None]
        longest = max([b.value for _, bars in charts for b in bars if b.value is not None] + [1.0])
        x_max = min(max(ends + [1.0]), longest * 1.2)
        for n_group, (caption, bars) in enumerate(charts):
            body.append(f'<p class="sub">{h(caption)}</p>' + ranked_bars(
                bars, f"fleet-{n_row}-{n_group}", f"{row.label}: {caption}", reference=1.0,
                reference_label=f"{base.label} = 1", x_max=x_max))
    return body
