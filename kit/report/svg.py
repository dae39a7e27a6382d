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
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple
from xml.etree import ElementTree as ET

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
                       width: int, height: int, margin_l: float, top_pad: float, legend_rows: int, fy) -> None:
    """Title, subtitle, note and legend, in figure coordinates where the hand-drawn charts had them
    (shared by the bar and the line chart)."""
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
    ncol = min(len(series), 4)
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
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Polygon, Rectangle

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
    y_max = max(tops, default=1.0)
    y_max = y_max if y_max > 0 else 1.0
    headroom = 1.25 if scale_to_values else 1.05  # room for the cut error bars' markers
    ticks = _y_ticks(y_max * headroom)
    step, y_top = ticks[1] - ticks[0], ticks[-1]
    tick_labels = [_fmt_tick(t, step) for t in ticks]

    # --- the layout, in SVG units (1 unit = 1 pt = 1/72 in; the report scales the chart) ------
    n_series = max(len(series), 1)
    legend_rows = math.ceil(len(series) / 4) if series else 0
    longest = max((len(c) for c in categories), default=1)
    rotate = longest * 7 * max(len(categories), 1) > (width - 100) * 0.9
    title_main, _, title_sub = title.partition(" — ")  # "Title — detail": bold line, smaller line
    top_pad = 16 if title_sub else 0
    margin_l = max(72, 36 + 7 * max(len(t) for t in tick_labels))
    margin_r, margin_t = 16, 42 + top_pad + legend_rows * 18
    margin_b = 48 + (min(longest, 28) * 5 if rotate else 0) + (16 if x_label else 0) + (16 if note else 0)
    plot_w = width - margin_l - margin_r
    plot_h = height - margin_t - margin_b
    if plot_h < 80:
        height += 80 - plot_h
        plot_h = 80
    n_cat = max(len(categories), 1)
    ux = n_cat / plot_w  # data units per SVG unit, along x (one category = 1)
    uy = y_top / plot_h  # and along y

    def fy(y_from_top: float) -> float:  # figure fraction of a y measured from the top
        return 1.0 - y_from_top / height

    marks = _Marks()
    with matplotlib.rc_context(_RC):
        fig, ax = _figure(width, height, (margin_l, margin_b, plot_w, plot_h), (-0.5, n_cat - 0.5), y_top, ticks, step,
                          y_label, x_label)
        ax.set_xticks(list(range(len(categories))))
        shown = [c if len(c) <= 28 or not rotate else c[:27] + "…" for c in categories]
        if rotate:
            ax.set_xticklabels([_plain(c) for c in shown], rotation=35, ha="right", rotation_mode="anchor")
        else:
            ax.set_xticklabels([_plain(c) for c in shown])
        for tick in ax.yaxis.get_major_ticks():
            tick.label1.set_gid(marks.gid("ytick"))

        # titles, legend, note: in figure coordinates, where the hand-drawn charts had them
        _titles_and_legend(fig, marks, series, title_main, title_sub, note, width, height, margin_l, top_pad,
                           legend_rows, fy)

        # bars, error bars, off-scale markers
        bar_w = min(48.0 * ux, 0.8 / n_series)
        for ci, cat in enumerate(categories):
            gx = ci - bar_w * n_series / 2
            for si, s in enumerate(series):
                v = s.values[ci] if ci < len(s.values) else None
                x0 = gx + si * bar_w
                ex = x0 + bar_w / 2
                colour = s.colour or PALETTE[si % len(PALETTE)]
                bar_note = s.notes[ci] if ci < len(s.notes) and s.notes[ci] else None
                if v is None or not math.isfinite(v):
                    ax.text(ex, 4 * uy, "n/a", fontsize=9, color="#999999", ha="center", va="baseline",
                            gid=marks.gid("missing", f"{s.name}, {cat}: no data"))
                    continue
                text = s.texts[ci] if ci < len(s.texts) and s.texts[ci] else _fmt_value(v)
                label = f"{s.name}, {cat}: {text}" + (f" ({bar_note})" if bar_note else "")
                ax.add_patch(Rectangle((x0 + 1 * ux, 0.0), max(bar_w - 2 * ux, ux), max(0.0, min(v, y_top)),
                                       facecolor=colour, edgecolor="none", linewidth=0, gid=marks.gid("bar", label)))
                lo = s.low[ci] if ci < len(s.low) else None
                hi = s.high[ci] if ci < len(s.high) else None
                if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
                    continue
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
        if reference is not None and 0 < reference <= y_top:
            ax.axhline(reference, color="#b00020", linestyle=(0, (5, 4)), linewidth=1.2, gid=marks.gid("reference"))
            if reference_label:
                ax.text(n_cat - 0.5 - 4 * ux, reference + 4 * uy, _plain(reference_label), fontsize=11,
                        color="#b00020", ha="right", va="baseline", gid=marks.gid("reference-label"))

        buf = io.StringIO()
        fig.savefig(buf, format="svg", facecolor="#ffffff")
    return _inline_svg(buf.getvalue(), marks, chart_id=chart_id, title=title, width=width, height=height)


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
    from matplotlib.patches import Ellipse

    marks = marks or {}
    xs = [math.log2(x) for x in x_values]
    tops = [v for s in series for v in s.values if v is not None and math.isfinite(v)]
    y_max = max(tops, default=1.0)
    y_max = y_max if y_max > 0 else 1.0
    ticks = _y_ticks(y_max * 1.08)
    step, y_top = ticks[1] - ticks[0], ticks[-1]
    tick_labels = [_fmt_tick(t, step) for t in ticks]

    legend_rows = math.ceil(len(series) / 4) if series else 0
    title_main, _, title_sub = title.partition(" — ")
    top_pad = 16 if title_sub else 0
    margin_l = max(72, 36 + 7 * max(len(t) for t in tick_labels))
    margin_r, margin_t = 24, 42 + top_pad + legend_rows * 18
    margin_b = 48 + (16 if x_label else 0) + (16 if note else 0)
    plot_w = width - margin_l - margin_r
    plot_h = height - margin_t - margin_b
    if plot_h < 80:
        height += 80 - plot_h
        plot_h = 80
    x_lo, x_hi = (min(xs) - 0.3, max(xs) + 0.3) if xs else (0.0, 1.0)
    ux = (x_hi - x_lo) / plot_w
    uy = y_top / plot_h

    def fy(y_from_top: float) -> float:
        return 1.0 - y_from_top / height

    gids = _Marks()
    with matplotlib.rc_context(_RC):
        fig, ax = _figure(width, height, (margin_l, margin_b, plot_w, plot_h), (x_lo, x_hi), y_top, ticks, step,
                          y_label, x_label)
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{x:,}" for x in x_values])
        for tick in ax.yaxis.get_major_ticks():
            tick.label1.set_gid(gids.gid("ytick"))
        _titles_and_legend(fig, gids, series, title_main, title_sub, note, width, height, margin_l, top_pad,
                           legend_rows, fy)

        for si, s in enumerate(series):
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
                if marks.get(s.name) == x_values[i]:
                    ax.add_patch(Ellipse((x, min(v, y_top)), 15 * ux, 15 * uy, facecolor="none", edgecolor=colour,
                                         linewidth=1.5, gid=gids.gid("mark", f"{s.name}: knee at {x_values[i]:,}")))

        buf = io.StringIO()
        fig.savefig(buf, format="svg", facecolor="#ffffff")
    return _inline_svg(buf.getvalue(), gids, chart_id=chart_id, title=title, width=width, height=height)


# --- matplotlib's SVG -> one inert <svg> element ------------------------------------------------------

_NUMBER = re.compile(r"(-?\d+\.\d{2})\d+")
_KEEP_TEXT = ("text", "tspan", "title")
_NO_ROTATION = re.compile(r"^rotate\(-?0[ ,]+[-\d.]+[ ,]+[-\d.]+\)$")
_FONT_FAMILY = re.compile(r"font-family:[^;]*;?\s*")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _inline_svg(svg: str, marks: _Marks, chart_id: str, title: str, width: int, height: int) -> str:
    from kit.bundle.inert import inert

    chart_id, title = inert(chart_id), inert(title)
    marks.by_gid = {k: (c, None if h is None else inert(h), g) for k, (c, h, g) in marks.by_gid.items()}
    root = ET.fromstring(svg.encode("utf-8"))  # the parser drops the prolog, DOCTYPE and comments
    q = "{%s}" % _SVG_NS

    def walk(elem: ET.Element) -> None:
        for child in list(elem):
            name = _local(child.tag)
            if name in ("metadata", "defs", "clipPath", "style", "script"):
                elem.remove(child)
                continue
            walk(child)
        for attr in ("clip-path", "id"):
            elem.attrib.pop(attr, None)
        for attr in ("d", "x", "y", "transform", "points"):  # 2 decimals are 1/100 pt
            if attr in elem.attrib:
                elem.set(attr, _NUMBER.sub(r"\1", " ".join(elem.get(attr).split())))
        if _NO_ROTATION.match(elem.get("transform", "")):
            del elem.attrib["transform"]
        if "style" in elem.attrib:  # the font family is said once, on the <svg>
            elem.set("style", _FONT_FAMILY.sub("", elem.get("style")).strip().rstrip(";"))
        if _local(elem.tag) not in _KEEP_TEXT:
            elem.text = None
        elem.tail = None

    # classes and hover titles first (they need matplotlib's ids, the gids)
    groups: Dict[str, List[ET.Element]] = {}
    group_meta: Dict[str, Tuple[str, Optional[str]]] = {}
    parents = {child: parent for parent in root.iter() for child in parent}
    for elem in list(root.iter()):
        gid = elem.get("id")
        if gid not in marks.by_gid:
            continue
        cls, hover, group = marks.by_gid[gid]
        if group is not None:
            groups.setdefault(group, []).append(elem)
            group_meta[group] = (cls, hover)
            continue
        elem.set("class", cls)
        if hover:
            t = ET.Element(q + "title")
            t.text = hover
            elem.insert(0, t)
    # artists that belong together (a legend entry's swatch and name; an off-scale triangle and
    # its value) become one <g class=...> where the first of them stood
    for group, members in groups.items():
        cls, hover = group_meta[group]
        first = members[0]
        parent = parents[first]
        merged = ET.Element(q + "g", {"class": cls})
        if hover:
            t = ET.SubElement(merged, q + "title")
            t.text = hover
        for m in members:
            merged.extend(list(m))
        parent.insert(list(parent).index(first), merged)
        for m in members:
            parents[m].remove(m)
    walk(root)

    def prune(elem: ET.Element, top: bool) -> None:
        """Unwrap groups without attributes (matplotlib's per-artist <g id=...>): they draw nothing.
        One drawn thing per line (a bar with its title, a legend entry, ...)."""
        out: List[ET.Element] = []
        for child in list(elem):
            prune(child, False)
            if _local(child.tag) == "g" and not child.attrib:
                out.extend(list(child))
            else:
                out.append(child)
        for child in list(elem):
            elem.remove(child)
        for child in out:
            child.tail = "\n" if top else None
            elem.append(child)

    prune(root, True)
    attrs = {
        "class": "chart", "id": chart_id, "viewBox": f"0 0 {width} {height}", "width": str(width),
        "height": str(height), "role": "img", "aria-labelledby": f"{chart_id}-title",
        "stroke-linejoin": "round", "stroke-linecap": "butt",
        "font-family": ", ".join([f"'{f}'" if " " in f else f for f in FONTS] + ["sans-serif"]),
    }
    root.attrib.clear()
    root.attrib.update(attrs)
    heading = ET.Element(q + "title", {"id": f"{chart_id}-title"})
    heading.text = title
    heading.tail = "\n"
    root.insert(0, heading)
    root.text = "\n"
    ET.register_namespace("", _SVG_NS)
    return ET.tostring(root, encoding="unicode")


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
    cid = html_text(chart_id)
    out = [f'<svg class="chart ranked" id="{cid}" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
           f'role="img" aria-labelledby="{cid}-title" font-family="\'DejaVu Sans\', Helvetica, Arial, sans-serif" font-size="11">',
           f'<title id="{cid}-title">{html_text(title)}</title>']
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
