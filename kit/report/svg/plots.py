"""Grouped bar charts with error bars (and line charts), drawn by matplotlib, as inline-safe SVG text.

One function, :func:`bar_chart`: categories along x (models, cells), one bar
per series in each group (precisions, machines), optional error bars (a 95%
CI, or min..max over repeats), an optional reference line (1.0 on ratio
charts), axis titles with units, a legend, and a note saying what the error
bars and markers are. The bar axis always starts at zero. Each bar carries a
``<title>`` so a browser shows the exact value on hover without any script.

    Series, labels --> matplotlib Figure (SVG canvas, no pyplot, no GUI backend)
                   --> savefig(format="svg"), text as <text> (svg.fonttype "none")
                   --> _inline_svg: one <svg> element the report can inline and the
                       bundle's active-content check accepts

``_inline_svg`` parses matplotlib's output and keeps only inert drawing: it
drops the XML prolog, DOCTYPE, comments, ``<metadata>`` and ``<defs>`` (clip
paths and a global ``*{...}`` style that would leak into the page), every
``clip-path`` and ``id`` (the report inlines several charts: ids would clash),
and adds the classes, hover titles and accessible title the report and its
tests read. The geometry keeps the matplotlib drawing as it is; nothing drawn
needs clipping because off-scale error bars are cut here (marked ▲ with
their value). Same input, same bytes: no date, no random ids.

matplotlib is imported inside :func:`bar_chart` (``import kit.cli.main``
stays fast). The code keeps to matplotlib 3.3's API: the cuda10 image renders
reports with it (docker/locks/cuda10.txt), on Python 3.7.

Colours are the Okabe-Ito palette (distinguishable with the common forms of
colour blindness).

The shared pieces live in :mod:`kit.report.svg.primitives`, ``_inline_svg`` in
:mod:`kit.report.svg.inline`, the fleet page's ranked bars in :mod:`kit.report.svg.ranked`.
"""

from __future__ import annotations

import io
import math

from dataclasses import dataclass

from kit.report.svg.inline import _inline_svg
from kit.report.svg.primitives import (PALETTE, Series, _Marks, _RC, _figure, _fmt_tick, _fmt_value, _plain,
                                       _titles_and_legend, _y_ticks)


def _y_scale(tops: list[float], headroom: float) -> tuple[list[float], float, float, list[str]]:
    """The y axis from zero to a round number above the highest of ``tops`` times ``headroom``:
    (its ticks, their step, its top, the ticks' labels)."""
    y_max = max(tops, default=1.0)
    y_max = y_max if y_max > 0 else 1.0
    ticks = _y_ticks(y_max * headroom)
    step, y_top = ticks[1] - ticks[0], ticks[-1]
    return ticks, step, y_top, [_fmt_tick(t, step) for t in ticks]


@dataclass(frozen=True)
class _Frame:
    """A chart's layout, in SVG units (1 unit = 1 pt = 1/72 in; the report scales the chart): the plot's
    box in the figure, and the title's lines and the legend's rows above it."""

    height: float
    margin_l: float
    margin_b: float
    plot_w: float
    plot_h: float
    title_main: str
    title_sub: str
    top_pad: int
    legend_rows: int

    def fy(self, y_from_top: float) -> float:
        """The figure fraction of a y measured from the top."""
        return 1.0 - y_from_top / self.height


def _frame(title: str, n_series: int, tick_labels: list[str], width: int, height: int, margin_r: float,
           margin_b: float) -> _Frame:
    """The layout of a chart of ``n_series`` series whose title is "Title — detail" (a bold line,
    a smaller line), taller than ``height`` where the plot would be under 80 units high."""
    legend_rows = math.ceil(n_series / 4) if n_series else 0
    title_main, _, title_sub = title.partition(" — ")
    top_pad = 16 if title_sub else 0
    margin_l = max(72, 36 + 7 * max(len(t) for t in tick_labels))
    margin_t = 42 + top_pad + legend_rows * 18
    plot_w = width - margin_l - margin_r
    plot_h = height - margin_t - margin_b
    if plot_h < 80:
        height += 80 - plot_h
        plot_h = 80
    return _Frame(height, margin_l, margin_b, plot_w, plot_h, title_main, title_sub, top_pad, legend_rows)


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
    import matplotlib

    # --- the scale: from zero to a round number above the bars (and error bars) ----------------
    tops: list[float] = []
    for s in series:
        for i, v in enumerate(s.values):
            if v is None or not math.isfinite(v):
                continue
            hi = s.high[i] if i < len(s.high) and s.high[i] is not None and not scale_to_values else v
            tops.append(max(v, hi if math.isfinite(hi) else v))
    if reference is not None:
        tops.append(reference)
    # room for the cut error bars' markers
    ticks, step, y_top, tick_labels = _y_scale(tops, 1.25 if scale_to_values else 1.05)

    # --- the layout ---------------------------------------------------------------------------
    n_series = max(len(series), 1)
    longest = max((len(c) for c in categories), default=1)
    rotate = longest * 7 * max(len(categories), 1) > (width - 100) * 0.9
    margin_b = 48 + (min(longest, 28) * 5 if rotate else 0) + (16 if x_label else 0) + (16 if note else 0)
    f = _frame(title, len(series), tick_labels, width, height, 16, margin_b)
    n_cat = max(len(categories), 1)
    ux = n_cat / f.plot_w  # data units per SVG unit, along x (one category = 1)
    uy = y_top / f.plot_h  # and along y

    marks = _Marks()
    with matplotlib.rc_context(_RC):
        fig, ax = _figure(width, f.height, (f.margin_l, f.margin_b, f.plot_w, f.plot_h), (-0.5, n_cat - 0.5), y_top,
                          ticks, step, y_label, x_label)
        ax.set_xticks(list(range(len(categories))))
        shown = [c if len(c) <= 28 or not rotate else c[:27] + "…" for c in categories]
        if rotate:
            ax.set_xticklabels([_plain(c) for c in shown], rotation=35, ha="right", rotation_mode="anchor")
        else:
            ax.set_xticklabels([_plain(c) for c in shown])
        for tick in ax.yaxis.get_major_ticks():
            tick.label1.set_gid(marks.gid("ytick"))

        # titles, legend, note: in figure coordinates, where the hand-drawn charts had them
        _titles_and_legend(fig, marks, series, f.title_main, f.title_sub, note, width, f.height, f.margin_l, f.top_pad,
                           f.legend_rows, f.fy)

        # bars, error bars, off-scale markers
        bar_w = min(48.0 * ux, 0.8 / n_series)
        for ci, cat in enumerate(categories):
            gx = ci - bar_w * n_series / 2
            for si, s in enumerate(series):
                _bar(ax, marks, s, si, ci, cat, gx + si * bar_w, bar_w, (ux, uy), y_top)
        if reference is not None and 0 < reference <= y_top:
            ax.axhline(reference, color="#b00020", linestyle=(0, (5, 4)), linewidth=1.2, gid=marks.gid("reference"))
            if reference_label:
                ax.text(n_cat - 0.5 - 4 * ux, reference + 4 * uy, _plain(reference_label), fontsize=11,
                        color="#b00020", ha="right", va="baseline", gid=marks.gid("reference-label"))

        buf = io.StringIO()
        fig.savefig(buf, format="svg", facecolor="#ffffff")
    return _inline_svg(buf.getvalue(), marks, chart_id=chart_id, title=title, width=width, height=f.height)


def _bar(ax, marks: _Marks, s: Series, si: int, ci: int, cat: str, x0: float, bar_w: float,
         units: tuple[float, float], y_top: float) -> None:
    """Series ``s``'s bar of category ``ci`` at ``x0``, with its error bar, cut and marked with its value
    where it reaches beyond the axis; "n/a" where it has no value. ``units``: data units per SVG unit
    along x and y."""
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Polygon, Rectangle

    ux, uy = units
    v = s.values[ci] if ci < len(s.values) else None
    ex = x0 + bar_w / 2
    colour = s.colour or PALETTE[si % len(PALETTE)]
    bar_note = s.notes[ci] if ci < len(s.notes) and s.notes[ci] else None
    if v is None or not math.isfinite(v):
        ax.text(ex, 4 * uy, "n/a", fontsize=9, color="#999999", ha="center", va="baseline",
                gid=marks.gid("missing", f"{s.name}, {cat}: no data"))
        return
    text = s.texts[ci] if ci < len(s.texts) and s.texts[ci] else _fmt_value(v)
    label = f"{s.name}, {cat}: {text}" + (f" ({bar_note})" if bar_note else "")
    ax.add_patch(Rectangle((x0 + 1 * ux, 0.0), max(bar_w - 2 * ux, ux), max(0.0, min(v, y_top)),
                           facecolor=colour, edgecolor="none", linewidth=0, gid=marks.gid("bar", label)))
    lo = s.low[ci] if ci < len(s.low) else None
    hi = s.high[ci] if ci < len(s.high) else None
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return
    cap = min(bar_w / 4, 6 * ux)
    cut = hi > y_top  # an outlier beyond the axis: cut, and marked with its value
    y_lo, y_hi = max(0.0, min(lo, y_top)), max(0.0, min(hi, y_top))
    segments = [[(ex, y_lo), (ex, y_hi)], [(ex - cap, y_lo), (ex + cap, y_lo)]]
    if not cut:
        segments.append([(ex - cap, y_hi), (ex + cap, y_hi)])
    ax.add_collection(LineCollection(segments, colors="#222222", linewidths=1.3, capstyle="butt",
                                     gid=marks.gid("errorbar")))
    if cut:
        group = f"offscale-{ci}-{si}"
        why = f"{s.name}, {cat}: error bar reaches {_fmt_value(hi)}, beyond the axis"
        ax.add_patch(Polygon([(ex - 4 * ux, y_top - 7 * uy), (ex, y_top), (ex + 4 * ux, y_top - 7 * uy)],
                             closed=True, facecolor="#b00020", edgecolor="none", linewidth=0,
                             gid=marks.gid("offscale", why, group)))
        ax.text(ex + 5 * ux, y_top - 8 * uy, _fmt_value(hi), fontsize=9, color="#b00020", ha="left",
                va="baseline", gid=marks.gid("offscale", why, group))


def line_chart(
    title: str,
    x_values: list[int],
    series: list[Series],
    y_label: str,
    x_label: str = "",
    width: int = 760,
    height: int = 360,
    chart_id: str = "chart",
    note: str = "",
    marks: dict[str, int] | None = None,
) -> str:
    """An SVG line chart of values against a doubling quantity (a batch size): x on a log2
    scale with a tick at each of ``x_values``; each Series is one line (``values`` aligned with
    ``x_values``; None: not measured, the line has a gap there and a ``×`` at the axis says why,
    from the Series' ``notes``). Every point is a dot with a ``<title>`` (its value on hover);
    ``marks`` names a series' x value to ring (e.g. the knee). The y axis starts at zero.

    The dots are drawn as patches, not as matplotlib's markers: markers are ``<defs>`` and
    ``<use href>``, which the inert SVG drops."""
    import matplotlib

    marks = marks or {}
    xs = [math.log2(x) for x in x_values]
    ticks, step, y_top, tick_labels = _y_scale([v for s in series for v in s.values if v is not None and math.isfinite(v)],
                                               1.08)
    f = _frame(title, len(series), tick_labels, width, height, 24, 48 + (16 if x_label else 0) + (16 if note else 0))
    x_lo, x_hi = (min(xs) - 0.3, max(xs) + 0.3) if xs else (0.0, 1.0)
    ux = (x_hi - x_lo) / f.plot_w
    uy = y_top / f.plot_h

    gids = _Marks()
    with matplotlib.rc_context(_RC):
        fig, ax = _figure(width, f.height, (f.margin_l, f.margin_b, f.plot_w, f.plot_h), (x_lo, x_hi), y_top, ticks, step,
                          y_label, x_label)
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{x:,}" for x in x_values])
        for tick in ax.yaxis.get_major_ticks():
            tick.label1.set_gid(gids.gid("ytick"))
        _titles_and_legend(fig, gids, series, f.title_main, f.title_sub, note, width, f.height, f.margin_l, f.top_pad,
                           f.legend_rows, f.fy)
        for si, s in enumerate(series):
            _line(ax, gids, s, si, xs, x_values, (ux, uy), y_top, marks.get(s.name))

        buf = io.StringIO()
        fig.savefig(buf, format="svg", facecolor="#ffffff")
    return _inline_svg(buf.getvalue(), gids, chart_id=chart_id, title=title, width=width, height=f.height)


def _line(ax, gids: _Marks, s: Series, si: int, xs: list[float], x_values: list[int], units: tuple[float, float],
          y_top: float, ringed: int | None) -> None:
    """Series ``s``'s line, broken where a value is missing (a ``×`` at the axis says why), and a dot
    per point; the point at x value ``ringed`` (the knee) ringed. ``units``: data units per SVG unit
    along x and y."""
    from matplotlib.patches import Ellipse

    ux, uy = units
    colour = s.colour or PALETTE[si % len(PALETTE)]
    run: list[tuple[float, float]] = []
    runs = [run]
    for i, x in enumerate(xs):
        v = s.values[i] if i < len(s.values) else None
        if v is None or not math.isfinite(v):
            runs.append([])
            run = runs[-1]
            why = s.notes[i] if i < len(s.notes) and s.notes[i] else "no data"
            ax.text(x, 4 * uy + si * 11 * uy, "×", fontsize=11, color=colour, ha="center", va="baseline",
                    gid=gids.gid("missing", f"{s.name}, {x_values[i]:,}: {why}"))
            continue
        run.append((x, min(v, y_top)))
    for r in runs:
        if len(r) > 1:
            ax.plot([p[0] for p in r], [p[1] for p in r], color=colour, linewidth=2.0,
                    solid_joinstyle="round", gid=gids.gid("line"))
    for i, x in enumerate(xs):
        v = s.values[i] if i < len(s.values) else None
        if v is None or not math.isfinite(v):
            continue
        text = s.texts[i] if i < len(s.texts) and s.texts[i] else _fmt_value(v)
        extra = s.notes[i] if i < len(s.notes) and s.notes[i] else None
        label = f"{s.name}, {x_values[i]:,}: {text}" + (f" ({extra})" if extra else "")
        ax.add_patch(Ellipse((x, min(v, y_top)), 7 * ux, 7 * uy, facecolor=colour, edgecolor="#ffffff",
                             linewidth=1.0, gid=gids.gid("point", label)))
        if ringed == x_values[i]:
            ax.add_patch(Ellipse((x, min(v, y_top)), 15 * ux, 15 * uy, facecolor="none", edgecolor=colour,
                                 linewidth=1.5, gid=gids.gid("mark", f"{s.name}: knee at {x_values[i]:,}")))
