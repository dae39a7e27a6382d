"""Stacked horizontal bars, drawn by matplotlib, as inline-safe SVG text: one bar per category (a
precision), split into parts (a step's device time by kernel class and its host gap).

The report's "Why this speedup" section draws one per suite, model and engine with
:func:`stacked_bars`: each part is a segment with a ``<title>`` (its name, figure and share of the
bar, shown on hover without a script), each bar's total is written at its end, a category without
figures says why in grey, and the legend names every part in a fixed colour. The figure goes through
the same steps as :mod:`kit.report.svg.plots`'s charts (the shared rc settings, titles and legend of
:mod:`kit.report.svg.primitives`, then :func:`kit.report.svg.inline._inline_svg`), so it is one inert
``<svg>`` element with an accessible title. matplotlib is imported inside the function.
"""

from __future__ import annotations

import io
import math

from kit.report.svg.inline import _inline_svg
from kit.report.svg.primitives import PALETTE, Series, _Marks, _RC, _fmt_tick, _plain, _titles_and_legend, _y_ticks

#: legend entries per row (the parts' names are long: "tensor-core matmul/convolution")
LEGEND_COLUMNS = 3


def stacked_bars(
    title: str,
    categories: list[str],
    parts: list[Series],
    x_label: str,
    unit: str = "",
    decimals: int = 2,
    missing: list[str | None] | None = None,
    width: int = 760,
    chart_id: str = "chart",
    note: str = "",
) -> str:
    """An SVG of one horizontal bar per category, top to bottom, stacked from ``parts``: each Series is
    one part, its ``values`` aligned with ``categories`` (None or 0: the part is absent there) and its
    ``colour`` fixed by the caller. ``unit`` follows every figure ("ms"), written with ``decimals``; ``missing`` gives, per
    category, why it has no bar (written in its place). The axis starts at zero."""
    import matplotlib

    missing = missing or [None] * len(categories)

    def fmt(v: float) -> str:
        return f"{v:,.{decimals}f} {unit}".strip()

    totals = []
    for ci in range(len(categories)):
        vals = [s.values[ci] for s in parts if ci < len(s.values) and s.values[ci] is not None
                and math.isfinite(s.values[ci]) and s.values[ci] > 0]
        totals.append(math.fsum(vals) if vals else None)
    x_max = max([t for t in totals if t is not None], default=1.0) or 1.0
    ticks = _y_ticks(x_max * 1.18)  # room for each bar's total at its end
    step, x_top = ticks[1] - ticks[0], ticks[-1]

    legend_rows = math.ceil(len(parts) / LEGEND_COLUMNS) if parts else 0
    title_main, _, title_sub = title.partition(" — ")
    top_pad = 16 if title_sub else 0
    bar_h, row_h = 18, 28
    margin_l = max(90, 24 + 7 * max((len(c) for c in categories), default=4))
    margin_r, margin_t = 24, 46 + top_pad + legend_rows * 18
    margin_b = 44 + (16 if note else 0)
    plot_w = width - margin_l - margin_r
    plot_h = max(row_h * len(categories), row_h)
    height = margin_t + plot_h + margin_b
    ux = x_top / plot_w  # data units per SVG unit, along x
    uy = 1.0 / row_h  # one category = 1 along y

    def fy(y_from_top: float) -> float:
        return 1.0 - y_from_top / height

    marks = _Marks()
    with matplotlib.rc_context(_RC):
        fig, ax = _hbar_figure(width, height, (margin_l, margin_b, plot_w, plot_h), x_top, ticks, step, categories, x_label,
                          marks)
        _titles_and_legend(fig, marks, parts, title_main, title_sub, note, width, height, margin_l, top_pad,
                           legend_rows, fy, columns=LEGEND_COLUMNS)

        for ci, cat in enumerate(categories):
            if totals[ci] is None:
                why = missing[ci] or "no figures"
                ax.text(2 * ux, ci, _plain(why), fontsize=10, color="#888888", ha="left", va="center",
                        gid=marks.gid("missing", f"{cat}: {why}"))
                continue
            _stack(ax, marks, parts, ci, cat, totals[ci], bar_h * uy, ux, fmt)

        buf = io.StringIO()
        fig.savefig(buf, format="svg", facecolor="#ffffff")
    return _inline_svg(buf.getvalue(), marks, chart_id=chart_id, title=title, width=width, height=height)


def _hbar_figure(width: int, height: float, box: tuple, x_top: float, ticks: list[float], step: float, categories: list[str],
            x_label: str, marks: _Marks):
    """The figure and its axes: the x axis from zero to ``x_top`` with a grid at ``ticks``, one row a
    category from the top down, in the report's style."""
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter

    margin_l, margin_b, plot_w, plot_h = box
    fig = Figure(figsize=(width / 72.0, height / 72.0), dpi=72)
    FigureCanvasSVG(fig)
    fig.patch.set_facecolor("#ffffff")
    ax = fig.add_axes([margin_l / width, margin_b / height, plot_w / width, plot_h / height])
    n = max(len(categories), 1)
    ax.set_xlim(0.0, x_top)
    ax.set_ylim(n - 0.5, -0.5)  # the first category on top
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_color("#888888")
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _fmt_tick(v, step)))
    ax.grid(axis="x", color="#e4e4e4", linewidth=1.0)
    ax.set_axisbelow(True)
    ax.tick_params(axis="both", length=0, labelsize=11, labelcolor="#555555")
    ax.set_yticks(list(range(len(categories))))
    ax.set_yticklabels([_plain(c) for c in categories])
    ax.set_xlabel(_plain(x_label), fontsize=12, color="#333333")
    for tick in ax.xaxis.get_major_ticks():
        tick.label1.set_gid(marks.gid("xtick"))
    return fig, ax


def _stack(ax, marks: _Marks, parts: list[Series], ci: int, cat: str, total: float, h: float, ux: float, fmt) -> None:
    """Category ``ci``'s bar, ``h`` high: its parts end to end (each with its figure and share on hover),
    then its total at its end."""
    from matplotlib.patches import Rectangle

    x = 0.0
    for si, s in enumerate(parts):
        v = s.values[ci] if ci < len(s.values) else None
        if v is None or not math.isfinite(v) or v <= 0:
            continue
        label = f"{cat}, {s.name}: {fmt(v)} ({v / total:.0%} of {fmt(total)})"
        ax.add_patch(Rectangle((x, ci - h / 2), v, h, facecolor=s.colour or PALETTE[si % len(PALETTE)],
                               edgecolor="#ffffff", linewidth=0.6, gid=marks.gid("segment", label)))
        x += v
    ax.text(total + 4 * ux, ci, fmt(total), fontsize=10.5, color="#333333", ha="left",
            va="center", gid=marks.gid("total", f"{cat}: {fmt(total)} in all"))
