"""A stranger's strings are inert: no escape sequence, control or bidi character survives."""

import pytest

from kit.bundle.inert import html_text, inert, markdown_text

HOSTILE = [
    "vm\x1b]0;owned\x07\x1b[2J",       # set the window title, clear the screen
    "a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",  # an OSC 8 hyperlink ended by ST
    "b\x9b2Jc",                          # 8-bit CSI
    "d\x1bce",                           # ESC c: reset the terminal
    "evil\u202egz.rat.exe",              # right-to-left override
    "x\u2066y\u2069z\u200f",             # isolates and a mark
    "nul\x00bell\x07del\x7fc1\x85",
    "dangling\x1b",
    "unterminated\x1b]0;title",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_loses_every_control_and_escape(text):
    out = inert(text)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in out), repr(out)
    assert not any(c in out for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")


def test_what_the_escapes_wrapped_stays_readable():
    assert inert("vm\x1b]0;owned\x07\x1b[2J") == "vm"
    assert inert("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\") == "alink"
    assert inert("\x1b[31mred\x1b[0m") == "red"
    assert inert("evil\u202egz.rat.exe") == "evilgz.rat.exe"


def test_plain_and_unicode_text_is_unchanged():
    for s in ("node017", "NVIDIA H200", "580.159.04", "Grüße, 東京 — ok", "gpu:0 (fp16)"):
        assert inert(s) == s


def test_line_breaks_become_spaces_unless_kept():
    assert inert("a\nb\tc\r\nd") == "a b c d"
    assert inert("a\nb\x1b[2Jc", multiline=True) == "a\nbc"


def test_html_and_markdown_forms_escape_markup():
    assert html_text('<script>alert(1)</script>"') == "&lt;script&gt;alert(1)&lt;/script&gt;&quot;"
    md = markdown_text("<img src=x onerror=alert(1)>|`x`")
    assert "<" not in md and "\\|" in md and "\\`" in md
