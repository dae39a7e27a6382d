"""A heatmap of a fleet's group (machines as rows, precisions or suites as columns), written as SVG
directly, without matplotlib or scripts.

Each square's colour is a ratio to the group (1 = white; slower shades to vermillion, faster to
blue, both saturating at :data:`SATURATE` away from 1, so a 20% slowdown is as red as it gets and a
2% one is faint), its figure is written in it, and its hover title says which machine, which column
and the ratio. Squares a finding names are outlined (``marked``). At the page's fixed width a group
of 200 machines is 200 rows of 11 px: tall, never wider, and a few tens of kilobytes. All text is
inert and escaped.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.report.svg.primitives import svg_open

#: how far from 1 a ratio is drawn at full colour
SATURATE = 0.2
SLOW = (213, 94, 0)  # Okabe-Ito vermillion
FAST = (0, 114, 178)  # Okabe-Ito blue


@dataclass
class HeatRow:
    name: str
    values: list  # a ratio per column, or None (no cell there)
    texts: list  # the figure written in each square
    marked: list  # per column: outlined (a finding names it)
    note: str = ""  # beside the row, e.g. its finding


def colour(value: float | None) -> str:
    """The fill of a ratio: white at 1, toward vermillion below and blue above; grey for none."""
    if value is None:
        return "#eeeeee"
    t = max(-1.0, min(1.0, (value - 1.0) / SATURATE))
    end = SLOW if t < 0 else FAST
    a = abs(t)
    r, g, b = (round(255 + (c - 255) * a) for c in end)
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(rows: list[HeatRow], columns: list[str], chart_id: str, title: str, width: int = 1060,
            row_h: int = 11) -> str:
    """The heatmap as one ``<svg>`` element (see the module's docstring)."""
    from kit.bundle.inert import html_text as h

    label_w, note_w, top, legend_h = 210, 170, 30, 34
    x0 = label_w + 8
    col_w = max(24, min(110, (width - x0 - note_w) // max(len(columns), 1)))
    height = top + row_h * len(rows) + legend_h
    out = svg_open("heatmap", chart_id, title, width, height, 9)
    for j, c in enumerate(columns):
        out.append(f'<text x="{x0 + j * col_w + col_w / 2:.1f}" y="{top - 8}" text-anchor="middle" font-size="10">{h(c)}</text>')
    outlines = []
    for i, r in enumerate(rows):
        y = top + i * row_h
        bold = ' font-weight="bold" fill="#a3231b"' if any(r.marked) else ""
        parts = [f'<text x="{label_w}" y="{y + row_h - 2}" text-anchor="end"{bold}>{h(r.name)}</text>']
        for j, (v, text, mark) in enumerate(zip(r.values, r.texts, r.marked)):
            x = x0 + j * col_w
            parts.append(f'<g><title>{h(r.name)} · {h(columns[j])}: {h(text)}</title>'
                         f'<rect x="{x}" y="{y}" width="{col_w - 1}" height="{row_h - 1}" fill="{colour(v)}"/>'
                         f'<text x="{x + col_w / 2:.1f}" y="{y + row_h - 2}" text-anchor="middle">{h(text)}</text></g>')
            if mark:
                outlines.append(f'<rect class="outlier" x="{x + 0.5}" y="{y + 0.5}" width="{col_w - 2}" height="{row_h - 2}" '
                                f'fill="none" stroke="#000" stroke-width="1.5"/>')
        if r.note:
            parts.append(f'<text x="{x0 + len(columns) * col_w + 6}" y="{y + row_h - 2}"{bold}>{h(r.note)}</text>')
        out.append("".join(parts))
    out.extend(outlines)  # on top of every square
    ly = top + row_h * len(rows) + 12
    steps = 9
    for k in range(steps):
        v = 1.0 - SATURATE + 2 * SATURATE * k / (steps - 1)
        out.append(f'<rect x="{x0 + k * 22}" y="{ly}" width="22" height="10" fill="{colour(v)}"/>')
    out.append(f'<text x="{x0}" y="{ly + 21}">≤{1 - SATURATE:.2f}× (slower)</text>'
               f'<text x="{x0 + steps * 11}" y="{ly + 21}" text-anchor="middle">1.00×</text>'
               f'<text x="{x0 + steps * 22}" y="{ly + 21}" text-anchor="end">≥{1 + SATURATE:.2f}×</text>'
               f'<rect x="{x0 + steps * 22 + 16}" y="{ly}" width="22" height="10" fill="none" stroke="#000" stroke-width="1.5"/>'
               f'<text x="{x0 + steps * 22 + 44}" y="{ly + 9}">outlined: the cells a finding names slow</text>')
    out.append("</svg>")
    return "\n".join(out)
