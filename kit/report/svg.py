"""Grouped bar charts with error bars, as standalone SVG text (no plotting library).

One function, :func:`bar_chart`: categories along x (models, cells), one bar
per series in each group (precisions, machines), optional error bars (a 95%
CI, or min..max over repeats), an optional reference line (1.0 on ratio
charts), axis labels with units, a legend. Each bar carries a ``<title>`` so
a browser shows the exact value on hover without any script.

Colours are the Okabe-Ito palette (distinguishable with the common forms of
colour blindness).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


@dataclass
class Series:
    name: str
    values: list[float | None]
    #: absolute lower / upper ends of the error bar per value (None = no bar)
    low: list[float | None] = field(default_factory=list)
    high: list[float | None] = field(default_factory=list)
    #: optional per-value text for the hover title (e.g. "95% CI [1.38, 1.46]")
    notes: list[str | None] = field(default_factory=list)
    #: optional per-value text that replaces the default number format (e.g. "1.42×")
    texts: list[str | None] = field(default_factory=list)
    #: fixed colour (so a precision keeps its colour across charts); default: by position
    colour: str | None = None


def _nice_step(span: float, target_ticks: int = 5) -> float:
    raw = span / max(target_ticks, 1)
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _fmt_tick(v: float, step: float) -> str:
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    # as many decimals as the step needs (0.25 -> 2, 0.5 -> 1, 5 -> 0)
    decimals = next((d for d in range(0, 5) if abs(step * 10**d - round(step * 10**d)) < 1e-6), 4)
    return f"{v:.{decimals}f}"


def _fmt_value(v: float) -> str:
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def bar_chart(
    title: str,
    categories: list[str],
    series: list[Series],
    y_label: str,
    x_label: str = "",
    reference: float | None = None,
    reference_label: str = "",
    width: int = 760,
    height: int = 360,
    chart_id: str = "chart",
    scale_to_values: bool = False,
    note: str = "",
) -> str:
    """An SVG bar chart; values of None draw nothing (and say "no data" on hover).

    ``scale_to_values``: the y axis is scaled to the bars (the medians), not to
    the error bars; an error bar that reaches beyond the axis (a warm-up repeat)
    is cut at the top and marked with a triangle and its value, so one outlier
    does not flatten every bar. ``note``: a line under the chart saying what
    the error bars and markers are."""
    n_series = max(len(series), 1)
    legend_rows = math.ceil(len(series) / 4) if series else 0
    longest = max((len(c) for c in categories), default=1)
    rotate = longest * 7 * max(len(categories), 1) > (width - 100) * 0.9
    # "Title — detail" is drawn as a bold line and a smaller second line.
    title_main, _, title_sub = title.partition(" — ")
    top_pad = 16 if title_sub else 0
    margin_l, margin_r, margin_t = 72, 16, 42 + top_pad + legend_rows * 18
    margin_b = 48 + (min(longest, 28) * 5 if rotate else 0) + (16 if x_label else 0) + (16 if note else 0)
    plot_w = width - margin_l - margin_r
    plot_h = height - margin_t - margin_b
    if plot_h < 80:
        height += 80 - plot_h
        plot_h = 80

    tops: list[float] = []
    for s in series:
        for i, v in enumerate(s.values):
            if v is None or not math.isfinite(v):
                continue
            hi = s.high[i] if i < len(s.high) and s.high[i] is not None and not scale_to_values else v
            tops.append(max(v, hi if math.isfinite(hi) else v))
    if reference is not None:
        tops.append(reference)
    y_max = max(tops, default=1.0)
    y_max = y_max if y_max > 0 else 1.0
    headroom = 1.25 if scale_to_values else 1.05  # room for the cut error bars' markers
    step = _nice_step(y_max * headroom)
    y_top = step * math.ceil(y_max * headroom / step)

    def y(v: float) -> float:
        return margin_t + plot_h - (max(0.0, min(v, y_top)) / y_top) * plot_h

    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{escape(chart_id)}" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-labelledby="{escape(chart_id)}-title" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif">',
        f'<title id="{escape(chart_id)}-title">{escape(title)}</title>',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{margin_l}" y="20" font-size="15" font-weight="600" fill="#222">{escape(title_main)}</text>',
    ]
    if title_sub:
        out.append(f'<text x="{margin_l}" y="37" font-size="12" fill="#555">{escape(title_sub)}</text>')
    # legend (also for one series: it says what the bars are)
    if series:
        for i, s in enumerate(series):
            lx = margin_l + (i % 4) * ((plot_w) / 4)
            ly = 34 + top_pad + (i // 4) * 18
            out.append(f'<g class="legend"><rect x="{lx:.1f}" y="{ly - 9}" width="12" height="12" fill="{s.colour or PALETTE[i % len(PALETTE)]}"/>'
                       f'<text x="{lx + 17:.1f}" y="{ly + 1}" font-size="12" fill="#333">{escape(s.name)}</text></g>')
    # grid and y axis
    tick = 0.0
    while tick <= y_top + step / 1000:
        ty = y(tick)
        out.append(f'<line x1="{margin_l}" x2="{margin_l + plot_w}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{margin_l - 6}" y="{ty + 4:.1f}" font-size="11" text-anchor="end" fill="#555">{_fmt_tick(tick, step)}</text>')
        tick += step
    out.append(f'<line x1="{margin_l}" x2="{margin_l}" y1="{margin_t}" y2="{margin_t + plot_h}" stroke="#888"/>')
    out.append(f'<line x1="{margin_l}" x2="{margin_l + plot_w}" y1="{margin_t + plot_h}" y2="{margin_t + plot_h}" stroke="#888"/>')
    cy = margin_t + plot_h / 2
    out.append(
        f'<text x="16" y="{cy:.1f}" font-size="12" fill="#333" text-anchor="middle" '
        f'transform="rotate(-90 16 {cy:.1f})">{escape(y_label)}</text>'
    )
    # bars
    n_cat = max(len(categories), 1)
    group_w = plot_w / n_cat
    bar_w = min(48.0, group_w * 0.8 / n_series)
    for ci, cat in enumerate(categories):
        gx = margin_l + ci * group_w + (group_w - bar_w * n_series) / 2
        for si, s in enumerate(series):
            v = s.values[ci] if ci < len(s.values) else None
            bx = gx + si * bar_w
            colour = s.colour or PALETTE[si % len(PALETTE)]
            bar_note = s.notes[ci] if ci < len(s.notes) and s.notes[ci] else None
            if v is None or not math.isfinite(v):
                out.append(
                    f'<text x="{bx + bar_w / 2:.1f}" y="{margin_t + plot_h - 4}" font-size="9" fill="#999" '
                    f'text-anchor="middle">n/a<title>{escape(s.name)}, {escape(cat)}: no data</title></text>'
                )
                continue
            top = y(v)
            text = s.texts[ci] if ci < len(s.texts) and s.texts[ci] else _fmt_value(v)
            label = f"{s.name}, {cat}: {text}" + (f" ({bar_note})" if bar_note else "")
            out.append(
                f'<rect class="bar" x="{bx + 1:.1f}" y="{top:.1f}" width="{max(bar_w - 2, 1):.1f}" '
                f'height="{max(margin_t + plot_h - top, 0):.1f}" fill="{colour}"><title>{escape(label)}</title></rect>'
            )
            lo = s.low[ci] if ci < len(s.low) else None
            hi = s.high[ci] if ci < len(s.high) else None
            if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi) and hi > lo:
                ex = bx + bar_w / 2
                cap = min(bar_w / 4, 6)
                cut = hi > y_top  # an outlier beyond the axis: cut, and marked with its value
                y_lo, y_hi = y(lo), y(hi)
                out.append(
                    f'<g class="errorbar" stroke="#222" stroke-width="1.3">'
                    f'<line x1="{ex:.1f}" x2="{ex:.1f}" y1="{y_lo:.1f}" y2="{y_hi:.1f}"/>'
                    f'<line x1="{ex - cap:.1f}" x2="{ex + cap:.1f}" y1="{y_lo:.1f}" y2="{y_lo:.1f}"/>'
                    + ("" if cut else f'<line x1="{ex - cap:.1f}" x2="{ex + cap:.1f}" y1="{y_hi:.1f}" y2="{y_hi:.1f}"/>')
                    + "</g>"
                )
                if cut:
                    ty = margin_t
                    out.append(
                        f'<g class="offscale"><path d="M{ex - 4:.1f},{ty + 7:.1f} L{ex:.1f},{ty:.1f} L{ex + 4:.1f},{ty + 7:.1f} Z" '
                        f'fill="#b00020"/><text x="{ex + 5:.1f}" y="{ty + 8:.1f}" font-size="9" fill="#b00020" '
                        f'text-anchor="start">{escape(_fmt_value(hi))}</text>'
                        f'<title>{escape(s.name)}, {escape(cat)}: error bar reaches {escape(_fmt_value(hi))}, beyond the axis</title></g>'
                    )
        lx = margin_l + ci * group_w + group_w / 2
        ly = margin_t + plot_h + 16
        if rotate:
            out.append(
                f'<text x="{lx:.1f}" y="{ly:.1f}" font-size="11" fill="#333" text-anchor="end" '
                f'transform="rotate(-35 {lx:.1f} {ly:.1f})">{escape(cat[:28])}</text>'
            )
        else:
            out.append(f'<text x="{lx:.1f}" y="{ly:.1f}" font-size="11" fill="#333" text-anchor="middle">{escape(cat)}</text>')
    if reference is not None and 0 < reference <= y_top:
        ry = y(reference)
        out.append(
            f'<line class="reference" x1="{margin_l}" x2="{margin_l + plot_w}" y1="{ry:.1f}" y2="{ry:.1f}" '
            f'stroke="#b00020" stroke-dasharray="5 4" stroke-width="1.2"/>'
        )
        if reference_label:
            out.append(
                f'<text x="{margin_l + plot_w - 4}" y="{ry - 4:.1f}" font-size="11" fill="#b00020" '
                f'text-anchor="end">{escape(reference_label)}</text>'
            )
    if x_label:
        out.append(
            f'<text x="{margin_l + plot_w / 2:.1f}" y="{height - 8 - (16 if note else 0)}" font-size="12" fill="#333" '
            f'text-anchor="middle">{escape(x_label)}</text>'
        )
    if note:
        out.append(f'<text class="note" x="{margin_l}" y="{height - 7}" font-size="10.5" fill="#555">{escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out)
