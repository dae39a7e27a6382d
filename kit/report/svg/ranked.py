"""Ranked horizontal bars (a fleet's machines in one cell, with CI whiskers), written as SVG
directly, without matplotlib."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from kit.report.svg.primitives import svg_open

# --- ranked horizontal bars (a fleet's machines in one cell), written directly --------------------------

@dataclass
class RankedBar:
    """One machine's bar: its value (a ratio), the 95% CI as whiskers, the text beside it."""

    name: str
    value: float | None
    low: float | None = None
    high: float | None = None
    text: str = ""
    hover: str = ""
    marked: bool = False  # an outlier: drawn in red and said so


def bar_end(b: RankedBar) -> float:
    """How far a bar reaches (its whisker's end, else its value)."""
    return b.high if b.high is not None else (b.value or 0.0)


def ranked_bars(bars: List[RankedBar], chart_id: str, title: str, reference: float | None = 1.0,
                reference_label: str = "", width: int = 1060, row_h: int = 15, x_max: float | None = None) -> str:
    """Horizontal bars, one row per machine in the order given (ranked by the caller), each with its
    CI whiskers and its figure on the right; a dashed reference line (the baseline = 1). A fixed width
    (the page's), so hundreds of machines make it longer, never wider. Plain SVG (no matplotlib): a
    fleet of 200 machines in six cells stays well under a megabyte. All text is inert and escaped.
    ``x_max``: the axis' end, shared by the charts of one cell (default: from these bars)."""
    from kit.bundle.inert import html_text

    label_w, text_w, top, bottom = 230, 200, 22, 20
    x0, x1 = label_w + 8, width - text_w - 8
    shown = [b for b in bars if b.value is not None]
    hi = x_max or max([bar_end(b) for b in shown] + [reference or 0.0, 0.0]) or 1.0
    scale = (x1 - x0) / (hi * 1.05)
    height = top + row_h * len(bars) + bottom
    out = svg_open("ranked", chart_id, title, width, height, 11)
    for i, b in enumerate(bars):
        y = top + i * row_h
        colour = "#D55E00" if b.marked else "#0072B2"
        emphasis = ' fill="#a3231b" font-weight="bold"' if b.marked else ""
        parts = [f'<g class="bar{" outlier" if b.marked else ""}"><title>{html_text(b.hover or b.name)}</title>',
                 f'<text x="{label_w}" y="{y + 11}" text-anchor="end"{emphasis}>{html_text(b.name)}</text>']
        if b.value is not None:
            parts.append(f'<rect x="{x0}" y="{y + 2}" width="{max(b.value * scale, 0.5):.1f}" height="{row_h - 4}" fill="{colour}"/>')
            if b.low is not None and b.high is not None:
                lx, hx, my = x0 + b.low * scale, x0 + min(b.high, hi * 1.05) * scale, y + row_h / 2
                parts.append(f'<path d="M{lx:.1f} {my:.1f}H{hx:.1f}M{lx:.1f} {my - 4:.1f}V{my + 4:.1f}M{hx:.1f} {my - 4:.1f}V{my + 4:.1f}" '
                             f'stroke="#222" stroke-width="1" fill="none"/>')
        parts.append(f'<text x="{x1 + 8}" y="{y + 11}">{html_text(b.text)}</text></g>')
        out.append("".join(parts))
    if reference is not None:
        rx = x0 + reference * scale
        out.append(f'<path d="M{rx:.1f} {top - 4}V{height - bottom + 2}" stroke="#555" stroke-dasharray="4 3" fill="none"/>'
                   f'<text x="{rx:.1f}" y="{top - 8}" text-anchor="middle" fill="#555">{html_text(reference_label)}</text>')
    out.append(f'<text x="{x0}" y="{height - 5}" fill="#555">0</text>')
    out.append("</svg>")
    return "\n".join(out)
