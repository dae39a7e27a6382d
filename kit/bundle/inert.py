"""Make a stranger's text inert before a terminal, a Markdown page or a table shows it.

Every string read from a bundle (host names, GPU names, versions, reasons, file names) was
written by whoever made the bundle. A terminal obeys escape sequences in what it prints: an
OSC sequence sets the window title or a hyperlink, a CSI sequence clears the screen or moves
the cursor, and bidi overrides make ``evil.tar.gz`` read as something else. So text from a
bundle passes through :func:`inert` before any view prints it:

- whole escape sequences are removed (CSI ``ESC [ ... final``, OSC ``ESC ] ... BEL|ST``, DCS, SOS,
  PM and APC strings up to ST, and two-character ``ESC x`` sequences), and their 8-bit C1 forms;
- every remaining control character (Unicode category Cc: C0, DEL and C1) is removed, except that
  a line break or tab becomes a space (``multiline=True`` keeps line breaks);
- the bidirectional formatting characters (embeddings, overrides, isolates and the marks) and the
  line and paragraph separators are removed.

HTML and SVG escape their text with the standard library's ``html.escape`` on top of this
(:func:`html_text`); Markdown, which GitHub renders as HTML, uses :func:`markdown_text`.
"""

from __future__ import annotations

import html
import re

_ESC_SEQ = re.compile(
    r"""
    (?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?            # CSI: parameters, intermediates, final byte
  | (?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])       # OSC, DCS, SOS, PM, APC ...
    [^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?         #   ... up to BEL or ST (or the end of the text)
  | \x1b[ -/]*[0-~]?                              # any other escape sequence (ESC 7, ESC c, ESC ( B)
    """,
    re.VERBOSE,
)
#: bidi embeddings, overrides, isolates and marks; line and paragraph separators
_INVISIBLE = dict.fromkeys(
    [0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
)
_CONTROLS = dict.fromkeys([*range(0x00, 0x20), *range(0x7F, 0xA0)])


def inert(text: object, multiline: bool = False) -> str:
    """``text`` as a string with no escape sequence, control or bidi character left."""
    s = text if isinstance(text, str) else str(text)
    if s.isprintable() and s.isascii():
        return s  # the common case: nothing to remove
    s = _ESC_SEQ.sub("", s)
    keep = "\n" if multiline else ""
    s = s.replace("\r\n", "\n").replace("\t", " ")
    if not multiline:
        s = s.replace("\n", " ").replace("\r", " ")
    table = {c: None for c in _CONTROLS if chr(c) != keep}
    table.update(_INVISIBLE)
    return s.translate(table)


def html_text(text: object) -> str:
    """Inert text escaped for HTML or SVG element content and quoted attribute values."""
    return html.escape(inert(text), quote=True)


def markdown_text(text: object) -> str:
    """Inert text for a Markdown table cell: HTML escaped (GitHub renders inline HTML), and the
    characters Markdown gives meaning to inside a table row neutralised."""
    s = html.escape(inert(text), quote=False)
    return s.replace("|", "\\|").replace("`", "\\`")


#: the most characters of a stranger's string in a table cell (a host name may be 253)
TABLE_CHARS = 64


def shortened(text: object, limit: int = TABLE_CHARS) -> str:
    """:func:`inert` text of at most ``limit`` characters, cut with "…" where longer: a stranger's
    string in a table, where a 10,000-character host name would fill the screen (the JSON views
    keep the whole value)."""
    s = inert(text)
    return s if len(s) <= limit else s[:limit - 1] + "…"
