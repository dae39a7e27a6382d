"""Refuse HTML and SVG in a bundle that could run, load or navigate anything.

A bundle's ``report.html`` and ``charts/*.svg`` are the sender's bytes: the
manifest's hashes say only that they were not changed after the manifest was
written, and whoever made the bundle wrote the manifest too. The README tells
people to open ``report.html`` in a browser, so before a bundle is accepted
every HTML and SVG member is parsed with a real parser and walked, element by
element and attribute by attribute:

- HTML with :class:`html.parser.HTMLParser` (entities in attribute values are
  decoded the way a browser decodes them); SVG with expat, namespace-aware, so
  ``<svg:script>`` or an XHTML ``<script>`` inside an SVG is seen for what it is.
- Elements must be on an allow-list of inert HTML and SVG elements: ``<script>``,
  ``<iframe>``, ``<object>``, ``<embed>``, ``<foreignObject>``, ``<link>``,
  ``<base>``, forms, SVG animation (``<set>``, ``<animate>``, which can rewrite
  an ``href``) and anything unknown are refused. ``<meta http-equiv>`` may only
  be Content-Security-Policy, Content-Type, X-UA-Compatible or
  Content-Language (``refresh`` navigates).
- No ``on*`` event-handler attribute, no ``xml:base``, no ``srcdoc``.
- Every URL attribute (``href``, ``src``, ``xlink:href``, ``action``,
  ``formaction``, ``srcset``, ...) must be a fragment (``#id``) or a clean
  relative path inside the bundle; ``javascript:``, ``vbscript:``, ``data:``
  (except a raster image in an ``<img>``/``<image>``), ``http:``, ``https:``,
  ``//host`` and absolute paths are refused.
- CSS (``<style>`` blocks and ``style`` attributes; ``url(...)`` in any
  attribute) is read after removing comments and decoding escapes: no
  ``@import``, every ``url(...)`` a fragment, no ``image-set()``,
  ``expression()``, ``behavior`` or ``-moz-binding``, and no ``<`` inside a
  ``<style>`` block (in inline SVG a browser parses it as markup).
- Comments, CDATA sections, processing instructions, and DOCTYPEs other than
  ``<!DOCTYPE html>`` are refused: parsers disagree about where they end, and
  the kit writes none. SVG may not declare entities.

The kit's own report and charts pass (they are inline CSS and SVG only, under
a Content-Security-Policy). Other members whose type a browser would run
(``.js``, ``.xhtml``, ``.svgz``, ...) are refused outright; the kit never
writes them.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Iterable
from urllib.parse import unquote
from xml.parsers import expat

from kit.errors import BundleError

#: Members checked as HTML and as SVG (by lower-cased suffix).
HTML_SUFFIXES = (".html", ".htm")
SVG_SUFFIXES = (".svg",)
#: Members a browser or OS would run or render as markup that this module
#: cannot check; a kit bundle never holds them.
REFUSED_SUFFIXES = (
    ".js", ".mjs", ".xhtml", ".xht", ".xml", ".xsl", ".xslt", ".svgz", ".shtml", ".mht", ".mhtml",
    ".hta", ".swf", ".wasm", ".jar", ".exe", ".bat", ".cmd", ".com", ".scr", ".lnk", ".url", ".desktop",
    ".ps1", ".vbs", ".sh", ".py", ".pyc", ".pkl", ".pickle", ".so", ".dll",
)

_HTML_ELEMENTS = frozenset("""
html head body title meta style main header footer nav section article aside div span p br hr
h1 h2 h3 h4 h5 h6 ul ol li dl dt dd table thead tbody tfoot tr th td caption colgroup col
strong em b i u s small sub sup code pre kbd samp var abbr q blockquote figure figcaption
details summary a img time mark del ins wbr
""".split())
#: SVG elements, lower-cased (the HTML parser lower-cases inline SVG's names).
_SVG_ELEMENTS = frozenset("""
svg g defs title desc metadata rect circle ellipse line polyline polygon path text tspan textpath
use symbol marker style lineargradient radialgradient stop clippath mask pattern image a
filter fegaussianblur feoffset feblend feflood fecomposite femerge femergenode fecolormatrix
fedropshadow
""".split())
#: Named, so the message says what the element does.
_WHY = {
    "script": "<script>",
    "iframe": "<iframe> (loads another page)",
    "frame": "<frame> (loads another page)",
    "frameset": "<frameset>",
    "object": "<object> (loads a plug-in or page)",
    "embed": "<embed> (loads a plug-in)",
    "applet": "<applet>",
    "foreignobject": "<foreignObject> (HTML inside SVG)",
    "link": "<link> (loads a style sheet or other resource)",
    "base": "<base> (re-points every relative link)",
    "portal": "<portal>",
    "form": "<form>",
    "input": "<input>",
    "button": "<button>",
    "set": "<set> (SVG animation that can rewrite attributes such as href)",
    "animate": "<animate> (SVG animation that can rewrite attributes such as href)",
    "animatemotion": "<animateMotion> (SVG animation)",
    "animatetransform": "<animateTransform> (SVG animation)",
    "discard": "<discard> (SVG animation)",
    "handler": "<handler> (SVG event handler)",
    "listener": "<listener> (SVG event handler)",
    "template": "<template>",
    "noscript": "<noscript>",
    "math": "<math> (MathML)",
}
_META_HTTP_EQUIV_OK = frozenset(("content-security-policy", "content-type", "x-ua-compatible", "content-language"))
#: Attributes whose value is a URL (or, for srcset/ping, a list of them).
_URL_ATTRS = frozenset((
    "href", "src", "xlink:href", "action", "formaction", "background", "poster", "lowsrc", "dynsrc",
    "longdesc", "cite", "data", "codebase", "archive", "manifest", "usemap", "profile", "icon", "classid",
))
_URL_LIST_ATTRS = frozenset(("srcset", "imagesrcset", "ping"))
_FORBIDDEN_ATTRS = {
    "xml:base": "xml:base (re-points every relative link)",
    "srcdoc": "srcdoc (an inline page)",
    "attributename": "attributeName (SVG animation)",
}
#: Attributes that hold text for people, not CSS: never read as CSS.
_TEXT_ATTRS = frozenset(("title", "alt", "content", "id", "class", "lang", "name", "role", "label", "summary",
                         "value", "placeholder", "headers", "abbr", "datetime", "charset", "xmlns", "d", "points",
                         "transform", "viewbox", "font-family"))
_RASTER_DATA = re.compile(r"data:image/(png|jpeg|jpg|gif|webp)(;[a-z0-9=._+-]*)*,", re.ASCII)
_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):", re.ASCII)
_SVG_NS = "http://www.w3.org/2000/svg"
_XLINK_NS = "http://www.w3.org/1999/xlink"
_XML_NS = "http://www.w3.org/XML/1998/namespace"
#: Tag openings that must never appear in the raw text, whatever a parser made of
#: it (a backstop against a browser and html.parser disagreeing).
_RAW_BACKSTOP = re.compile(
    r"<\s*(?:[a-z0-9_-]+:)?(script|iframe|frame|object|embed|applet|foreignobject|base|link|portal)[\s/>]",
    re.IGNORECASE,
)


class _Found(Exception):
    def __init__(self, what: str, line: int):
        super().__init__(what)
        self.what, self.line = what, line


# --- URLs and CSS ----------------------------------------------------------------------------

def _normalise_url(value: str) -> str:
    # Browsers drop ASCII whitespace and control characters inside a scheme
    # ("java\tscript:") and around the URL, and treat '\' like '/'.
    return "".join(ch for ch in value if ord(ch) > 0x20 and ord(ch) != 0x7F).lower()


def url_problem(value: str, attr: str = "href", element: str = "a") -> str | None:
    """Why ``value`` may not stand in ``attr`` of ``element``, or None when it is
    a fragment or a clean relative path inside the bundle."""
    url = _normalise_url(value)
    if url == "" or url.startswith("#"):
        return None
    m = _SCHEME.match(url)
    if m:
        scheme = m.group(1)
        if scheme in ("javascript", "vbscript", "livescript", "mocha"):
            return f"a {scheme}: URL in {attr}="
        if scheme == "data":
            if element in ("img", "image") and attr in ("src", "href", "xlink:href") and _RASTER_DATA.match(url):
                return None
            if url.startswith(("data:text/html", "data:application/xhtml")):
                return f"a data:text/html URL in {attr}="
            return f"a data: URL in {attr}= (only raster images in <img> are accepted)"
        if scheme in ("http", "https", "ftp", "ws", "wss"):
            return f"an external URL ({scheme}:) in {attr}="
        return f"a {scheme}: URL in {attr}="
    url = url.replace("\\", "/")
    if url.startswith("//"):
        return f"an external URL (//host) in {attr}="
    if url.startswith("/"):
        return f"an absolute path in {attr}= (points outside the bundle)"
    path = unquote(url.split("#", 1)[0].split("?", 1)[0])  # browsers read %2e%2e as ..
    if ".." in path.split("/"):
        return f"a '..' path in {attr}= (points outside the bundle)"
    return None


_CSS_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})[ \t\r\n\f]?|(\n)|(.))", re.DOTALL)


def _decode_css(text: str) -> str:
    def one(m: re.Match) -> str:
        if m.group(1):
            cp = int(m.group(1), 16)
            return chr(cp) if 0 < cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF else "\ufffd"
        if m.group(2):
            return ""  # an escaped newline is a line continuation inside a string
        return m.group(3)

    return _CSS_ESCAPE.sub(one, text)


_CSS_FUNC = re.compile(r"([a-z_-][a-z0-9_-]*)\(", re.ASCII)
_CSS_URL = re.compile(r"url\(\s*(?:\"([^\"]*)\"|'([^']*)'|([^)\s]*))\s*\)", re.ASCII)
_CSS_BAD_FUNCS = {
    "image-set": "image-set() (loads images)", "-webkit-image-set": "image-set() (loads images)",
    "src": "src() (loads a resource)", "image": "image() (loads an image)",
    "cross-fade": "cross-fade() (loads images)", "element": "element()", "expression": "expression() (runs script)",
}


def css_problem(css: str, where: str, block: bool) -> str | None:
    """Why this CSS could run or load something, or None. ``block``: a whole
    ``<style>`` element (or ``style=`` attribute), where at-rules are checked;
    otherwise an attribute value where only ``url(...)`` and friends matter."""
    text = css
    if block and "<" in text:
        return f"markup ('<') inside {where}"
    # comments first (they cannot be escaped), then escapes
    out, i = [], 0
    while True:
        j = text.find("/*", i)
        if j < 0:
            out.append(text[i:])
            break
        k = text.find("*/", j + 2)
        if k < 0:
            if not block:
                out.append(text[i:])
                break
            return f"an unterminated CSS comment in {where}"
        out.append(text[i:j] + " ")
        i = k + 2
    text = _decode_css("".join(out)).lower()
    if block:
        if "@import" in text:
            return f"@import in {where} (loads a style sheet)"
        for word in ("behavior", "-moz-binding", "javascript:", "vbscript:"):
            if word in text:
                return f"{word.rstrip(':')} in {where}"
    for m in _CSS_FUNC.finditer(text):
        name = m.group(1)
        if name in _CSS_BAD_FUNCS:
            return f"{_CSS_BAD_FUNCS[name]} in {where}"
        if name == "url":
            u = _CSS_URL.match(text, m.start())
            target = next((g for g in u.groups() if g is not None), "") if u else None
            if target is None or not _normalise_url(target).startswith("#"):
                shown = (target or "")[:60]
                return f"url({shown}) in {where} (only url(#id) is accepted)"
    return None


# --- elements and attributes ------------------------------------------------------------------

def _check_attr(element: str, name: str, value: str | None, line: int) -> None:
    value = value or ""
    if name.startswith("on"):
        raise _Found(f"an event-handler attribute {name}= on <{element}>", line)
    if name in _FORBIDDEN_ATTRS:
        raise _Found(f"{_FORBIDDEN_ATTRS[name]} on <{element}>", line)
    if name in _URL_ATTRS:
        why = url_problem(value, name, element)
        if why:
            raise _Found(f"{why} on <{element}>", line)
    elif name in _URL_LIST_ATTRS:
        for part in value.split(","):
            bits = part.split()
            why = url_problem(bits[0], name, element) if bits else None
            if why:
                raise _Found(f"{why} on <{element}>", line)
    if name == "style":
        why = css_problem(value, f"the style= attribute of <{element}>", block=True)
    elif "(" in value and name not in _TEXT_ATTRS and not name.startswith(("aria-", "data-")):
        # presentation attributes (fill, filter, clip-path, mask, marker-*, cursor, ...) take url()
        why = css_problem(value, f"{name}= on <{element}>", block=False)
    else:
        why = None
    if why:
        raise _Found(why, line)


def _check_element(name: str, attrs: Iterable[tuple[str, str | None]], line: int, allowed: frozenset[str]) -> None:
    if name not in allowed:
        raise _Found(_WHY.get(name, f"<{name}> (not an element the kit writes)"), line)
    attrs = list(attrs)
    if name == "meta":
        for k, v in attrs:
            if k == "http-equiv" and (v or "").strip().lower() not in _META_HTTP_EQUIV_OK:
                raise _Found(f"<meta http-equiv={(v or '').strip().lower()}>", line)
    for k, v in attrs:
        _check_attr(name, k, v, line)


class _HTMLWalker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._style_line: int | None = None
        self._style_text: list[str] = []

    def handle_starttag(self, tag, attrs):
        line = self.getpos()[0]
        _check_element(tag, attrs, line, _HTML_ELEMENTS | _SVG_ELEMENTS)
        if tag == "style":
            self._style_line, self._style_text = line, []

    def handle_startendtag(self, tag, attrs):
        _check_element(tag, attrs, self.getpos()[0], _HTML_ELEMENTS | _SVG_ELEMENTS)

    def handle_endtag(self, tag):
        if tag == "style" and self._style_line is not None:
            why = css_problem("".join(self._style_text), "a <style> block", block=True)
            if why:
                raise _Found(why, self._style_line)
            self._style_line = None

    def handle_data(self, data):
        if self._style_line is not None:
            self._style_text.append(data)

    def handle_comment(self, data):
        raise _Found("an HTML comment (browsers and parsers disagree about where comments end)", self.getpos()[0])

    def handle_decl(self, decl):
        if decl.strip().lower() != "doctype html":
            raise _Found(f"the declaration <!{decl[:40]}>", self.getpos()[0])

    def unknown_decl(self, data):
        raise _Found(f"the declaration <![{data[:20]}", self.getpos()[0])

    def handle_pi(self, data):
        raise _Found(f"a processing instruction <?{data[:40]}", self.getpos()[0])

    def close(self):
        super().close()
        if self._style_line is not None:  # <style> never closed: the rest of the file is CSS
            why = css_problem("".join(self._style_text), "a <style> block", block=True)
            if why:
                raise _Found(why, self._style_line)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def html_problem(text: str) -> tuple[str, int] | None:
    """(what, line) for the first active or unloadable thing in an HTML document."""
    walker = _HTMLWalker()
    try:
        walker.feed(text)
        walker.close()
    except _Found as found:
        return found.what, found.line
    m = _RAW_BACKSTOP.search(text)
    if m:
        return f"<{m.group(1).lower()}>", _line_of(text, m.start())
    return None


def svg_problem(data: bytes) -> tuple[str, int] | None:
    """(what, line) for the first active or unloadable thing in an SVG document."""
    parser = expat.ParserCreate(namespace_separator=" ")
    stack: list[str] = []

    def where() -> int:
        return parser.CurrentLineNumber

    def start(name: str, attrs: dict) -> None:
        ns, _, local = name.rpartition(" ")
        if ns not in ("", _SVG_NS):
            raise _Found(_WHY.get(local.lower(), f"<{local}> in namespace {ns}"), where())
        pairs = []
        for key, value in attrs.items():
            ans, _, alocal = key.rpartition(" ")
            if ans == "":
                pairs.append((alocal.lower(), value))
            elif ans == _XLINK_NS:
                pairs.append((f"xlink:{alocal.lower()}", value))
            elif ans == _XML_NS:
                pairs.append((f"xml:{alocal.lower()}", value))
            else:
                raise _Found(f"the attribute {alocal}= in namespace {ans} on <{local}>", where())
        _check_element(local.lower(), pairs, where(), _SVG_ELEMENTS)
        stack.append(local.lower())
        if local.lower() == "style":
            style_text.clear()

    def end(name: str) -> None:
        local = stack.pop()
        if local == "style":
            why = css_problem("".join(style_text), "a <style> block", block=True)
            if why:
                raise _Found(why, where())

    def chars(text: str) -> None:
        if stack and stack[-1] == "style":
            style_text.append(text)

    def refuse(what: str):
        def handler(*args) -> None:
            raise _Found(what, where())

        return handler

    style_text: list[str] = []
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    parser.ProcessingInstructionHandler = refuse("a processing instruction (<?xml-stylesheet?> loads a style sheet)")
    parser.StartDoctypeDeclHandler = refuse("a DOCTYPE (SVG files the kit writes have none)")
    parser.EntityDeclHandler = refuse("an entity declaration")
    parser.ExternalEntityRefHandler = refuse("an external entity")
    parser.CommentHandler = refuse("an XML comment")
    try:
        parser.Parse(data, True)
    except _Found as found:
        return found.what, found.line
    except expat.ExpatError as exc:
        return f"not well-formed XML ({expat.ErrorString(exc.code)})", exc.lineno
    text = data.decode("utf-8", errors="replace")
    m = _RAW_BACKSTOP.search(text)
    if m:
        return f"<{m.group(1).lower()}>", _line_of(text, m.start())
    return None


def check_files(files: dict[str, bytes], label: str) -> None:
    """Raise BundleError (exit 5) naming the first member that carries active
    content, what it is and on which line; return quietly when there is none."""
    for name in sorted(files):
        lower = name.lower()
        if lower.endswith(REFUSED_SUFFIXES):
            raise BundleError(
                f"{label}: member {name!r} is a type a browser or the system could run; kit bundles never hold one. Refused.",
                remedy="Do not open files from this bundle; ask the sender for a bundle made by `kit bundle export`.",
            )
        if lower.endswith(HTML_SUFFIXES):
            try:
                text = files[name].decode("utf-8")
            except UnicodeDecodeError:
                raise BundleError(f"{label}: {name} is not UTF-8 text; refused (the kit writes UTF-8).") from None
            found = html_problem(text)
        elif lower.endswith(SVG_SUFFIXES):
            found = svg_problem(files[name])
        else:
            continue
        if found:
            what, line = found
            raise BundleError(
                f"{label}: active content in {name}: {what} at line {line}; refused.",
                remedy="Do not open this bundle's report or charts in a browser. The kit's own reports and charts "
                "hold no scripts, event handlers or external loads; ask the sender for the bundle `kit run` wrote.",
            )
