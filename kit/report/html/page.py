"""The skeleton every kit page shares: the CSS, the page around a body (no scripts, nothing
fetched), tables of escaped cells, and a speedup's verdict with its interval."""

from __future__ import annotations

import time
from html import escape
from typing import Iterable

from kit import __version__
from kit.compare.fmt import fmt_speedup_estimate
from kit.compare.stats import OUTSIDE_NOTE

CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; color: #1d1d1f; background: #f6f7f9; line-height: 1.45; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 28px 48px; background: #fff; }
h1 { font-size: 1.6rem; margin: 0 0 4px; }
h2 { font-size: 1.2rem; margin: 32px 0 10px; border-bottom: 1px solid #e3e3e3; padding-bottom: 4px; }
.sub { color: #555; margin: 0 0 12px; }
.badge { display: inline-block; padding: 2px 10px; border-radius: 12px; font-size: .8rem; font-weight: 700; letter-spacing: .04em; margin-right: 6px; vertical-align: middle; }
.badge.synthetic { background: #fff3cd; color: #7a5200; border: 1px solid #e0b84d; }
.badge.interrupted { background: #fde2e1; color: #8a1c17; border: 1px solid #e3837d; }
.badge.complete { background: #e3f4e8; color: #1d6b35; border: 1px solid #8fcf9f; }
table { border-collapse: collapse; width: 100%; font-size: .86rem; margin: 6px 0 14px; }
th, td { border-bottom: 1px solid #e6e6e6; padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: #f0f2f5; font-weight: 600; }
th.num { text-align: right; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.env td:first-child { width: 180px; color: #555; }
.sig { color: #1d6b35; font-weight: 600; }
.slower { color: #a3231b; font-weight: 600; }
.ns { color: #777; }
.flag { color: #8a5a00; font-size: .8rem; }
.note { color: #555; font-size: .8rem; }
ul.findings li { margin-bottom: 6px; }
ul.warnings li.high { color: #8a1c17; }
ul.warnings li.medium { color: #7a5200; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(500px, 1fr)); gap: 14px 18px; }
h3 { font-size: 1rem; margin: 22px 0 6px; }
figure { margin: 0; }
figure.why-chart { max-width: 760px; }
figcaption { font-size: .8rem; color: #555; }
svg.chart { width: 100%; height: auto; border: 1px solid #eee; }
details pre { background: #f6f7f9; padding: 10px; overflow-x: auto; font-size: .78rem; }
footer { margin-top: 36px; font-size: .78rem; color: #666; }
"""


def _page(title: str, body: str, extra_css: str = "") -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        # No scripts at all, and nothing may be fetched from anywhere.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>{escape(title)}</title>\n<style>{CSS}{extra_css}</style>\n</head>\n<body>\n<main>\n{body}\n"
        f"<footer>Made by mpkit {escape(__version__)} on {escape(time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()))}. "
        "Self-contained page: no scripts, no network.</footer>\n</main>\n</body>\n</html>\n"
    )


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "", numeric_from: int = 99) -> str:
    """Cells are already-escaped HTML fragments."""
    header = list(header)
    head = "".join(f'<th class="num">{h}</th>' if i >= numeric_from else f"<th>{h}</th>" for i, h in enumerate(header))
    thead = f"<thead><tr>{head}</tr></thead>" if any(header) else ""
    body = []
    for r in rows:
        tds = "".join(f'<td class="num">{c}</td>' if i >= numeric_from else f"<td>{c}</td>" for i, c in enumerate(r))
        body.append(f"<tr>{tds}</tr>")
    return f'<table class="{cls}">{thead}<tbody>{"".join(body)}</tbody></table>'


def _verdict_html(est) -> str:
    """A speedup over fp32 with its interval and verdict (the one formatter: kit.compare.render)."""
    if est is None:
        return "—"
    cls = "sig" if est.significant and est.ratio >= 1 else "slower" if est.significant else "ns"
    return f'{escape(fmt_speedup_estimate(est))} <span class="{cls}">{escape(est.verdict)}</span>'


def _outside_note(estimates) -> str:
    if any(e is not None and e.outside_ci for e in estimates):
        return f'<p class="sub">{escape(OUTSIDE_NOTE)}.</p>'
    return ""
