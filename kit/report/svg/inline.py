"""matplotlib's SVG output made one inert ``<svg>`` element the report can inline: no prolog,
defs, clip paths or ids, 2-decimal geometry, and the classes and hover titles of the marks."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple
from xml.etree import ElementTree as ET

from kit.report.svg.primitives import FONTS, _SVG_NS, _Marks

# --- matplotlib's SVG -> one inert <svg> element ------------------------------------------------------

_NUMBER = re.compile(r"(-?\d+\.\d{2})\d+")
_KEEP_TEXT = ("text", "tspan", "title")
_NO_ROTATION = re.compile(r"^rotate\(-?0[ ,]+[-\d.]+[ ,]+[-\d.]+\)$")
_FONT_FAMILY = re.compile(r"font-family:[^;]*;?\s*")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _strip(elem: ET.Element) -> None:
    """What the inline SVG does without: defs, clip paths, styles, ids, digits past 1/100 pt, no-op rotations."""
    for child in list(elem):
        name = _local(child.tag)
        if name in ("metadata", "defs", "clipPath", "style", "script"):
            elem.remove(child)
            continue
        _strip(child)
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


def _apply_marks(root: ET.Element, marks: _Marks, q: str) -> None:
    """Each marked artist's class and hover title (they need matplotlib's ids, the gids); artists that
    belong together (a legend entry's swatch and name; an off-scale triangle and its value) become one
    ``<g class=...>`` where the first of them stood."""
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


def _prune(elem: ET.Element, top: bool) -> None:
    """Unwrap groups without attributes (matplotlib's per-artist <g id=...>): they draw nothing.
    One drawn thing per line (a bar with its title, a legend entry, ...)."""
    out: List[ET.Element] = []
    for child in list(elem):
        _prune(child, False)
        if _local(child.tag) == "g" and not child.attrib:
            out.extend(list(child))
        else:
            out.append(child)
    for child in list(elem):
        elem.remove(child)
    for child in out:
        child.tail = "\n" if top else None
        elem.append(child)


def _inline_svg(svg: str, marks: _Marks, chart_id: str, title: str, width: int, height: int) -> str:
    from kit.bundle.inert import inert

    chart_id, title = inert(chart_id), inert(title)
    marks.by_gid = {k: (c, None if h is None else inert(h), g) for k, (c, h, g) in marks.by_gid.items()}
    root = ET.fromstring(svg.encode("utf-8"))  # the parser drops the prolog, DOCTYPE and comments
    q = "{%s}" % _SVG_NS

    _apply_marks(root, marks, q)
    _strip(root)
    _prune(root, True)
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
