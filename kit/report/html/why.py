"""The report's "Why this speedup" section: per suite, model and engine, where a profiled step's time
goes in each precision (a stacked bar: device time by kernel class and the host gap, ms per step),
each cell's verdict, and per reduced precision the speedup ladder with what each rung kept of the
one above and the rungs that were not measured.

Every figure is :func:`kit.results.explain.explain`'s, the rows `kit explain` prints (its ladder's
lines joined as :func:`kit.results.explain.ladder_lines` joins them), so the terminal and the page
never disagree. A run without any profiled cell still gets the section: the verdicts, the partial
ladders, and one line saying why the middle rungs are not measured. Bundle text is escaped.
"""

from __future__ import annotations

import re
from html import escape

from kit.compare import measures
from kit.report.explain_text import busy_mark, over_100, with_busy
from kit.report.svg.primitives import PALETTE, Series
from kit.report.svg.stacked import stacked_bars
from kit.results import kernel_classes as kc
from kit.results.explain import HOST_GAP, NO_PROFILE, across_engines, bound_short, explain, ladder_lines, profile_reason
from kit.results.precisions import PRECISIONS
from kit.results.ratios import BASE_PRECISION, fmt_ratio
from kit.results.schema import RunResults

#: each part's colour, the same in every group's chart: the kernel classes in their order, the host gap grey
PART_COLOURS = {**{k: PALETTE[i % len(PALETTE)] for i, k in enumerate(kc.CLASSES)}, HOST_GAP: "#BBBBBB"}

INTRO = ("Per model and engine: where the timed step's time goes in each precision (device time by kernel class, "
         "from a few steps under torch.profiler outside the timed repeats, and the host gap: the rest of the timed "
         "step, in which no kernel ran; milliseconds per step), what bound each cell, and for each reduced precision the speedup ladder "
         "against fp32: the peak ratio, the matmul kernels' time ratio, the device-time ratio, the step-time ratio "
         "and the measured speedup, each rung with what it kept of the rung above. The same figures as "
         "`kit explain BUNDLE`; docs/explain.md says how to read them.")

CHART_NOTE = ("ms per timed step: kernel time from each cell's profiled window (outside the timed repeats), the host "
              "gap the rest; hover a part for its figure")


def _profile_reasons(results: RunResults) -> list[str]:
    """The reasons the run's cells give for having no profile (a profile recorded as unavailable)."""
    out: list[str] = []
    for c in results.cells:
        reason = profile_reason(c)
        if reason and reason not in out:
            out.append(reason)
    return out


def partial_line(results: RunResults) -> str:
    """The one line a run without any profiled cell gets: why its ladders are partial."""
    reasons = _profile_reasons(results)
    said = f"; the run says: {'; '.join(reasons[:3])}" if reasons else ""
    return (f"Ladders partial: not measured in this run: {NO_PROFILE} in any cell{said}. So the matmul kernels', device-time "
            "and step-time rungs are not measured and no bars are drawn; each ladder has the peak ratio and the "
            "measured speedup, and the verdicts come from data wait and NVML.")


def _chart_id(group: str) -> str:
    return "why-" + re.sub(r"[^A-Za-z0-9_-]+", "-", group)


def _chart(group: str, rows: list[dict], missing_why: dict[str, str]) -> str:
    """The group's stacked bars, one per precision (a precision without a profile says so in grey)."""
    names = [n for n in list(kc.CLASSES) + [HOST_GAP]
             if any(r["step_parts_s"] and any(p[0] == n for p in r["step_parts_s"]) for r in rows)]
    parts = []
    for n in names:
        vals = []
        for r in rows:
            found = [t for name, t in (r["step_parts_s"] or []) if name == n]
            vals.append(found[0] * 1e3 if found else None)
        parts.append(Series(n, vals, colour=PART_COLOURS[n]))
    missing = [None if r["step_parts_s"] else missing_why.get(r["cell_id"], "not profiled") for r in rows]
    return stacked_bars(f"Where a step's time goes — {group}", [r["precision"] for r in rows], parts,
                        x_label="milliseconds per timed step", unit="ms", missing=missing,
                        chart_id=_chart_id(group), note=CHART_NOTE)


def _ladder_rows(row: dict) -> list[list[str]]:
    """One table row per ladder line of a cell (the precision and verdict in the first, spanning)."""
    verdict = (f'<strong>{escape(row["verdict_short"])}</strong><br><span class="note">{escape(row["verdict"])}</span>'
               + (f'<br><span class="flag">⚠{escape(busy_mark(row))}</span>' if busy_mark(row) else ""))
    head = f'<strong>{escape(row["precision"])}</strong>'
    if row["precision"] == BASE_PRECISION or "ladder" not in row:
        return [[head, verdict, "—", "—", '<span class="note">the base: the other precisions are measured against it</span>']]
    out = []
    kept = {r["rung"]: r.get("kept") for r in row["ladder"]}
    for line in ladder_lines(row["ladder"]):
        ratio = "not measured" if line["ratio"] is None else escape(fmt_ratio(line["ratio"]))
        lost = (line["lost"] or "") + over_100(line["name"], kept.get(line["name"]))
        how = escape(line["how"]) + (f'<br><span class="note">{escape(lost)}</span>' if lost else "")
        out.append([escape(line["name"]), ratio, how])
    out[0] = [head, verdict] + out[0]
    return out


def _table_with_spans(rows_per_cell: list[list[list[str]]]) -> str:
    """The ladder table: the precision and its verdict span the rows of its ladder."""
    header = "".join(f"<th>{h}</th>" for h in ("precision", "verdict", "rung", "ratio", "measured as; what it kept"))
    body = []
    for rows in rows_per_cell:
        span = f' rowspan="{len(rows)}"' if len(rows) > 1 else ""
        for i, r in enumerate(rows):
            cells = ([f"<td{span}>{r[0]}</td>", f"<td{span}>{r[1]}</td>"] if i == 0 else []) + [
                f'<td class="num">{c}</td>' if j == 1 else f"<td>{c}</td>" for j, c in enumerate(r[-3:])]
            body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="why"><thead><tr>{header}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _kernels_table(members: list[dict]) -> str:
    """The group's largest kernels per precision (kit.results.explain.largest_kernels), folded."""
    body = []
    for r in members:
        for k in r["largest_kernels"]:
            body.append(f"<tr><td>{escape(r['precision'])}</td><td class=\"num\">{k['share']:.0%}</td>"
                        f"<td class=\"num\">{k['s'] * 1e3:.3f}</td><td><code>{escape(k['name'])}</code></td>"
                        f"<td>{escape(k['class'])}" + (f" (today: {escape(k['class_today'])})" if k.get("class_today") else "")
                        + "</td></tr>")
    header = "".join(f"<th>{h}</th>" for h in ("precision", "share of device time", "ms per step", "kernel", "class"))
    return ('<details class="why-kernels"><summary>Largest kernels in each profiled step</summary>'
            f'<table class="why"><thead><tr>{header}</tr></thead><tbody>{"".join(body)}</tbody></table></details>')


def _across_engines_table(results: RunResults, rows: list[dict]) -> str:
    """One row per model and precision two engines measured: each engine's speedup over its own fp32
    cell and its verdict (kit.results.explain.across_engines, as `kit explain` ends); "" where none."""
    groups = across_engines(results, rows)
    if not groups:
        return ""
    body = "".join(
        f"<tr><td>{escape(g['cells'])}</td><td>" + "<br>".join(
            f"<strong>{escape(m['engine'])}</strong> "
            f"{escape(fmt_ratio(m['speedup'])) if m['speedup'] is not None else 'not measured'} "
            f'<span class="note">{escape(bound_short(m["verdict_short"]))}</span>' for m in g["engines"]) + "</td></tr>"
        for g in groups)
    return ('<h3>Across engines</h3><p class="sub">The same model and precision through each engine: its speedup over '
            'its own fp32 cell and what bound the cell, fastest first.</p>'
            f'<table class="why"><thead><tr><th>cells</th><th>engines</th></tr></thead><tbody>{body}</tbody></table>')


def why_section(results: RunResults) -> str:
    """The section's HTML ("" for a run without a measured cell)."""
    cells = {c.cell_id: c for c in results.cells if c.status == "ok"}
    rows = sorted(with_busy(results, explain(results)), key=lambda r: measures.order_key(cells[r["cell_id"]]))
    if not rows:
        return ""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    missing_why = {cid: "not profiled: " + profile_reason(c) for cid, c in cells.items() if profile_reason(c)}
    any_profile = any(r["step_parts_s"] for r in rows)
    out = ['<h2 id="why">Why this speedup</h2>', f'<p class="sub">{escape(INTRO)}</p>']
    if not any_profile:
        out.append(f'<p class="sub why-partial">{escape(partial_line(results))}</p>')
    for group, members in groups.items():
        members.sort(key=lambda r: PRECISIONS.index(r["precision"]) if r["precision"] in PRECISIONS else 99)
        out.append(f"<h3>{escape(group)}</h3>")
        if any(r["step_parts_s"] for r in members):
            out.append(f'<figure class="why-chart">{_chart(group, members, missing_why)}</figure>')
        out.append(_table_with_spans([_ladder_rows(r) for r in members]))
        answers = [r["answer"] + busy_mark(r) for r in members if r.get("answer")]
        if answers:
            out.append('<ul class="why-answers">' + "".join(f"<li>{escape(a)}</li>" for a in answers) + "</ul>")
        if any(r["largest_kernels"] for r in members):
            out.append(_kernels_table(members))
    across = _across_engines_table(results, rows)
    if across:
        out.append(across)
    return "\n".join(out)

