"""What the matplotlib charts of kit.report.svg.plots share: the palette, fonts and rc settings, Series,
number formats and y ticks, the figure and axes in the report's style, titles and legend, and the
marks (class, hover title) that the inline SVG gives each artist."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
FONTS = ["DejaVu Sans", "Helvetica", "Arial"]  # DejaVu Sans: what matplotlib measures the text with

_SVG_NS = "http://www.w3.org/2000/svg"
_RC = {
    "svg.fonttype": "none",  # text stays text: selectable, searchable, a third of the size of glyph paths
    "svg.hashsalt": "mpkit",  # fixed ids (all removed afterwards in any case)
    "svg.image_inline": True,
    "font.family": "sans-serif",
    "font.sans-serif": FONTS,
    "axes.unicode_minus": False,
    "lines.scale_dashes": False,
    "path.simplify": False,
    "text.usetex": False,
}


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


def _plain(text: str) -> str:
    """Text drawn as typed: a '$' would start matplotlib's mathtext (a model or host name is data),
    and inert (kit.bundle.inert): a control character in a host name would make the SVG not XML."""
    from kit.bundle.inert import inert

    return inert(text).replace("$", r"\$")


def _y_ticks(y_max: float) -> list[float]:
    """Round tick values from 0 up to at least ``y_max`` (matplotlib's MaxNLocator)."""
    from matplotlib.ticker import MaxNLocator

    ticks = [float(t) for t in MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(0.0, y_max) if t >= -1e-12]
    if ticks[-1] < y_max * (1 - 1e-9):  # (never seen; a safeguard for old versions)
        ticks.append(ticks[-1] + (ticks[1] - ticks[0]))
    return [0.0 if abs(t) < 1e-12 else t for t in ticks]


class _Marks:
    """What the cleaned SVG adds to an artist's group: a class, a hover title, and
    for several artists (a legend entry, an off-scale marker) one shared group."""

    def __init__(self) -> None:
        self.by_gid: Dict[str, Tuple[str, Optional[str], Optional[str]]] = {}

    def gid(self, cls: str, title: str | None = None, group: str | None = None) -> str:
        key = f"mpkit-{len(self.by_gid)}"
        self.by_gid[key] = (cls, title, group)
        return key


def _titles_and_legend(fig, marks: _Marks, series: list[Series], title_main: str, title_sub: str, note: str,
                       width: int, height: int, margin_l: float, top_pad: float, legend_rows: int, fy,
                       columns: int = 4) -> None:
    """Title, subtitle, note and legend (at most ``columns`` entries a row), in figure coordinates where
    the hand-drawn charts had them (shared by the bar, line and stacked bar charts)."""
    from matplotlib.patches import Rectangle

    fig.text(margin_l / width, fy(20), _plain(title_main), fontsize=15, fontweight="bold", color="#222222",
             va="baseline")
    if title_sub:
        fig.text(margin_l / width, fy(37), _plain(title_sub), fontsize=12, color="#555555", va="baseline")
    if note:
        fig.text(margin_l / width, fy(height - 7), _plain(note), fontsize=10.5, color="#555555",
                 va="baseline", gid=marks.gid("note"))
    if not series:
        return
    # matplotlib fills a legend column by column; this order reads row by row, as the old charts did
    ncol = min(len(series), columns)
    order = [r * ncol + c for c in range(ncol) for r in range(legend_rows) if r * ncol + c < len(series)]
    handles = [Rectangle((0, 0), 1, 1, facecolor=series[i].colour or PALETTE[i % len(PALETTE)]) for i in order]
    legend = fig.legend(
        handles, [_plain(series[i].name) for i in order], loc="upper left", ncol=ncol,
        bbox_to_anchor=(margin_l / width, fy(26 + top_pad)), frameon=False, fontsize=12,
        handlelength=0.9, handleheight=0.9, handletextpad=0.45, columnspacing=2.2, borderpad=0.0,
        borderaxespad=0.0, labelspacing=0.35,
    )
    legend_handles = getattr(legend, "legend_handles", None) or getattr(legend, "legendHandles")
    for i, h, t in zip(order, legend_handles, legend.get_texts()):
        h.set_gid(marks.gid("legend", group=f"legend-{i}"))
        t.set_gid(marks.gid("legend", group=f"legend-{i}"))
        t.set_color("#333333")


def _figure(width, height, box, x_limits, y_top, ticks, step, y_label, x_label):
    """The chart's figure and axes in the report's style (white, light grid, left and bottom spines
    only, y ticks formatted with _fmt_tick); box is (left margin, bottom margin, plot width, plot
    height) in points. Called inside matplotlib.rc_context(_RC)."""
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter

    fig = Figure(figsize=(width / 72.0, height / 72.0), dpi=72)
    FigureCanvasSVG(fig)
    fig.patch.set_facecolor("#ffffff")
    margin_l, margin_b, plot_w, plot_h = box
    ax = fig.add_axes([margin_l / width, margin_b / height, plot_w / width, plot_h / height])
    ax.set_xlim(*x_limits)
    ax.set_ylim(0.0, y_top)
    ax.set_facecolor("#ffffff")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_color("#888888")
        ax.spines[side].set_linewidth(1.0)
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _fmt_tick(v, step)))
    ax.grid(axis="y", color="#e4e4e4", linewidth=1.0)
    ax.set_axisbelow(True)
    ax.tick_params(axis="both", length=0, labelsize=11, labelcolor="#555555")
    ax.tick_params(axis="y", pad=6)
    ax.tick_params(axis="x", pad=8, labelcolor="#333333")
    ax.set_ylabel(_plain(y_label), fontsize=12, color="#333333")
    if x_label:
        ax.set_xlabel(_plain(x_label), fontsize=12, color="#333333")
    return fig, ax


def svg_open(kind: str, chart_id: str, title: str, width: int, height: int, font_size: int) -> list:
    """The opening of a chart's SVG (its class, id, size, accessible title and font), the first lines
    of the list a chart writer appends its marks to; ``chart_id`` and ``title`` are escaped here."""
    from kit.bundle.inert import html_text

    cid = html_text(chart_id)
    return [f'<svg class="chart {kind}" id="{cid}" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'role="img" aria-labelledby="{cid}-title" font-family="\'DejaVu Sans\', Helvetica, Arial, sans-serif" '
            f'font-size="{font_size}">', f'<title id="{cid}-title">{html_text(title)}</title>']
