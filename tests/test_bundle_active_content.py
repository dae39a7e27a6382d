"""A stranger's bundle may not carry active content in its report or charts.

Each hostile variant is crafted from a real bundle (made by ``kit bundle
export`` from fixture results) and **re-hashed in the manifest**, so the
structure and hash checks pass and only the active-content check can refuse
it. The kit's own report and charts, and every shipped reference bundle, must
still verify.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.results.factory import (
    bundle_members as _members,
    write_bundle as _repack,
    make_env,
    make_results,
    make_run_dir,
    standard_cells,
)
from kit.bundle.active_content import css_problem, html_problem, svg_problem, url_problem
from kit.report.export import export_run
from kit.bundle.safe_open import open_bundle
from kit.errors import BundleError

REPO = Path(__file__).resolve().parents[1]
EVIL = "https://evil.example"


@pytest.fixture(scope="module")
def good_bundle(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("good")
    run = make_run_dir(root / "runs", make_results(standard_cells(), make_env()))
    return export_run(run, root / "bundles")


def _chart(files: dict[str, bytes]) -> str:
    return sorted(n for n in files if n.startswith("charts/") and n.endswith(".svg"))[0]


# --- the kit's own output passes ---------------------------------------------------------------

def test_the_kits_own_report_and_charts_verify(good_bundle, tmp_path):
    files = _members(good_bundle)
    report = files["report.html"].decode()
    assert '<meta http-equiv="Content-Security-Policy"' in report  # the CSP meta is accepted
    assert "<svg" in report and "<style>" in report  # inline SVG and CSS are accepted
    b = open_bundle(_repack(tmp_path / "again.tar.gz", files))
    assert len(b.results.cells) == 6
    r = subprocess.run([sys.executable, "-m", "kit", "bundle", "verify", str(good_bundle)],
                       cwd=tmp_path, capture_output=True, text=True, env=_env())
    assert r.returncode == 0 and "verified" in r.stdout, r.stderr


def test_a_kit_report_of_hostile_text_in_results_still_verifies(tmp_path):
    """Strings from results (reasons, host names) are escaped by the kit's report, so a bundle the
    kit made from such results carries no active content, and the checker does not mistake the
    escaped text for markup."""
    from fixtures.results.factory import make_cell

    hostile = '<script>alert(1)</script> <img src=x onerror=alert(1)> javascript:alert(1) url(https://evil.example)'
    cells = standard_cells(models=("resnet18",), data_wait_frac=0.4, util_pct=50.0, throttled=True)
    cells.append(make_cell("resnet18", "apex-o1", status="skipped", reason=hostile))
    env = make_env(host="fixture-<b>host</b>", gpu='GPU "><script>alert(1)</script>')
    bundle = export_run(make_run_dir(tmp_path / "runs", make_results(cells, env)), tmp_path / "out")
    b = open_bundle(bundle)
    assert "&lt;script&gt;" in b.text("report.html")


@pytest.mark.parametrize("bundle", sorted((REPO / "references").rglob("*.tar.gz")), ids=lambda p: p.parent.name + "/" + p.name)
def test_shipped_reference_bundles_verify(bundle):
    assert open_bundle(bundle).results.cells


def test_a_report_with_a_csp_meta_and_harmless_markup_passes():
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            "<style>td { color: #333; } .x { fill: url(#grad); }</style></head><body>"
            "<a href='#cells'>cells</a><img src='charts/a.svg' alt='chart (images/s)'>"
            "<img src='data:image/png;base64,iVBORw0KGgo='>"
            "<svg viewBox='0 0 10 10'><defs><linearGradient id='grad'><stop offset='0'/></linearGradient></defs>"
            "<rect fill='url(#grad)' transform='translate(1,2)' width='1' height='1'/>"
            "<use href='#grad'/></svg></body></html>")
    assert html_problem(page) is None


# --- hostile HTML -------------------------------------------------------------------------------

HTML_VARIANTS = {
    "script": ("<script>alert(1)</script>", "<script>"),
    "img-onerror": ('<img src="x.png" onerror="alert(1)">', "onerror="),
    "body-onload": (None, "onload="),  # the existing <body> gets an onload=
    "svg-onload": ('<svg onload="alert(1)"></svg>', "onload="),
    "javascript-href": ('<a href="javascript:alert(1)">x</a>', "javascript: URL"),
    "entity-encoded-javascript": ('<a href="&#106;ava&#x73;cript&colon;alert(1)">x</a>', "javascript: URL"),
    "tab-split-javascript": ('<a href="java\tscript:alert(1)">x</a>', "javascript: URL"),
    "uppercase-javascript": ('<A HREF=" JAVASCRIPT:alert(1)">x</A>', "javascript: URL"),
    "vbscript-href": ('<a href="vbscript:msgbox(1)">x</a>', "vbscript: URL"),
    "data-html-href": ('<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>', "data:text/html"),
    "iframe": (f'<iframe src="{EVIL}/"></iframe>', "<iframe>"),
    "iframe-srcdoc": ('<iframe srcdoc="&lt;script&gt;alert(1)&lt;/script&gt;"></iframe>', "<iframe>"),
    "object": ('<object data="x.swf"></object>', "<object>"),
    "embed": ('<embed src="x.swf">', "<embed>"),
    "link-stylesheet": (f'<link rel="stylesheet" href="{EVIL}/x.css">', "<link>"),
    "base": (f'<base href="{EVIL}/">', "<base>"),
    "meta-refresh": (f'<meta http-equiv="refresh" content="0;url={EVIL}/">', "<meta http-equiv=refresh>"),
    "external-img": (f'<img src="{EVIL}/pixel.png">', "external URL (https:)"),
    "protocol-relative-img": ('<img src="//evil.example/pixel.png">', "external URL (//host)"),
    "backslash-host-img": ('<img src="\\\\evil.example/pixel.png">', "external URL (//host)"),
    "srcset": (f'<img src="a.png" srcset="{EVIL}/a.png 1x">', "external URL (https:) in srcset="),
    "form-action": (f'<form action="{EVIL}/"><button>go</button></form>', "<form>"),
    "formaction": ('<button formaction="javascript:alert(1)">go</button>', "<button>"),
    "style-attr-url": (f'<div style="background:url({EVIL}/x.png)">x</div>', "url(https://evil.example/x.png)"),
    "style-import": (f"<style>@import url({EVIL}/x.css);</style>", "@import"),
    "style-escaped-url": (f"<style>body {{ background: u\\72l({EVIL}/x.png) }}</style>", "url("),
    "style-image-set": (f'<style>body {{ background: image-set("{EVIL}/x.png" 1x) }}</style>', "image-set()"),
    "style-expression": ('<div style="width: expression(alert(1))">x</div>', "expression()"),
    "svg-style-breakout": ("<svg><style><img src=x onerror=alert(1)></style></svg>", "markup ('<') inside a <style>"),
    "foreign-object": ("<svg><foreignObject><div>x</div></foreignObject></svg>", "<foreignObject>"),
    "svg-xlink-javascript": ('<svg><a xlink:href="javascript:alert(1)"><text>x</text></a></svg>', "javascript: URL"),
    "svg-set-href": ('<svg><a><set attributeName="href" to="javascript:alert(1)"/><text>x</text></a></svg>', "<set>"),
    "svg-animate-href": ('<svg><a><animate attributeName="href" values="javascript:alert(1)"/></a></svg>', "<animate>"),
    "svg-external-image": (f'<svg><image href="{EVIL}/x.png"/></svg>', "external URL (https:)"),
    "svg-fill-external": (f'<svg><rect fill="url({EVIL}/p.svg#p)"/></svg>', "only url(#id)"),
    "svg-use-data": ('<svg><use href="data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=#x"/></svg>', "data: URL"),
    "comment-smuggling": ("<!--><script>alert(1)</script>-->", "comment"),
    "namespaced-script": ("<svg><svg:script>alert(1)</svg:script></svg>", "<svg:script>"),
    "math": ("<math><mtext></mtext></math>", "<math>"),
    "parent-path": ('<img src="../../../../etc/passwd">', "'..' path"),
}


@pytest.mark.parametrize("name", sorted(HTML_VARIANTS))
def test_hostile_report_html_is_rejected_with_its_own_message(good_bundle, tmp_path, name):
    snippet, words = HTML_VARIANTS[name]
    files = _members(good_bundle)
    report = files["report.html"].decode()
    if snippet is None:
        report = report.replace("<body>", '<body onload="alert(1)">', 1)
    else:
        report = report.replace("</main>", snippet + "\n</main>", 1)
    files["report.html"] = report.encode()
    with pytest.raises(BundleError) as info:
        open_bundle(_repack(tmp_path / f"{name}.tar.gz", files))
    msg = info.value.message
    assert "active content in report.html:" in msg and words in msg, msg
    assert "\n" not in msg and info.value.exit_code == 5


def test_the_message_names_the_line(good_bundle, tmp_path):
    files = _members(good_bundle)
    lines = files["report.html"].decode().split("\n")
    at = lines.index("<main>") + 1
    lines.insert(at, "<script>alert(1)</script>")
    files["report.html"] = "\n".join(lines).encode()
    with pytest.raises(BundleError, match=rf"active content in report\.html: <script> at line {at + 1};"):
        open_bundle(_repack(tmp_path / "line.tar.gz", files))


# --- hostile SVG charts -------------------------------------------------------------------------

SVG_VARIANTS = {
    "script": ("inner", "<script>alert(1)</script>", "<script>"),
    "cdata-script": ("inner", "<script><![CDATA[alert(1)]]></script>", "<script>"),
    "svg-prefixed-script": ("inner", '<s:script xmlns:s="http://www.w3.org/2000/svg">alert(1)</s:script>', "<script>"),
    "xhtml-script": ("inner", '<h:script xmlns:h="http://www.w3.org/1999/xhtml">alert(1)</h:script>', "<script>"),
    "root-onload": ("root", ' onload="alert(1)"', "onload="),
    "rect-onclick": ("inner", '<rect onclick="alert(1)" width="1" height="1"/>', "onclick="),
    "foreign-object": ("inner", '<foreignObject><body xmlns="http://www.w3.org/1999/xhtml"><img src="x" onerror="alert(1)"/></body></foreignObject>', "<foreignObject>"),
    "xlink-javascript": ("inner", '<a xmlns:xlink="http://www.w3.org/1999/xlink" xlink:href="javascript:alert(1)"><text>x</text></a>', "javascript: URL in xlink:href="),
    "external-image": ("inner", f'<image href="{EVIL}/x.png" width="1" height="1"/>', "external URL (https:)"),
    "external-use": ("inner", f'<use href="{EVIL}/sprite.svg#a"/>', "external URL (https:)"),
    "set-href": ("inner", '<a><set attributeName="href" to="javascript:alert(1)"/><text>x</text></a>', "<set>"),
    "animate-href": ("inner", '<a><animate attributeName="href" values="javascript:alert(1)"/></a>', "<animate>"),
    "style-import": ("inner", f"<style>@import url({EVIL}/x.css);</style>", "@import"),
    "style-url": ("inner", f"<style>rect {{ fill: url({EVIL}/p.svg#p) }}</style>", "only url(#id)"),
    "filter-url": ("inner", f'<rect filter="url({EVIL}/f.svg#f)" width="1" height="1"/>', "only url(#id)"),
    "xml-stylesheet": ("prolog", f'<?xml-stylesheet type="text/xsl" href="{EVIL}/x.xsl"?>', "processing instruction"),
    "doctype-entity": ("prolog", '<!DOCTYPE svg [<!ENTITY e "x">]>', "DOCTYPE"),
    "xml-base": ("root", f' xml:base="{EVIL}/"', "xml:base"),
    "not-well-formed": ("inner", "<rect>", "not well-formed"),
}


@pytest.mark.parametrize("name", sorted(SVG_VARIANTS))
def test_hostile_chart_svg_is_rejected_with_its_own_message(good_bundle, tmp_path, name):
    where, snippet, words = SVG_VARIANTS[name]
    files = _members(good_bundle)
    chart = _chart(files)
    svg = files[chart].decode()
    if where == "inner":
        close = svg.index(">", svg.index("<svg")) + 1
        svg = svg[:close] + snippet + svg[close:]
    elif where == "root":
        svg = svg.replace("<svg ", "<svg" + snippet + " ", 1)
    else:
        svg = snippet + "\n" + svg
    files[chart] = svg.encode()
    with pytest.raises(BundleError) as info:
        open_bundle(_repack(tmp_path / f"{name}.tar.gz", files))
    msg = info.value.message
    assert f"active content in {chart}:" in msg and words in msg, msg
    assert info.value.exit_code == 5


# --- other members ------------------------------------------------------------------------------

def test_an_extra_html_page_is_checked_too(good_bundle, tmp_path):
    files = _members(good_bundle)
    files["notes.html"] = b"<p>hello</p><script>alert(1)</script>"
    with pytest.raises(BundleError, match=r"active content in notes\.html: <script> at line 1"):
        open_bundle(_repack(tmp_path / "notes.tar.gz", files))


@pytest.mark.parametrize("name", ["payload.js", "charts/chart.svgz", "page.xhtml", "run.hta"])
def test_members_of_runnable_types_are_refused(good_bundle, tmp_path, name):
    files = _members(good_bundle)
    files[name] = b"alert(1)"
    with pytest.raises(BundleError, match="a type a browser or the system could run"):
        open_bundle(_repack(tmp_path / "extra.tar.gz", files))


# --- the commands -------------------------------------------------------------------------------

def _env() -> dict:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["COLUMNS"] = "200"
    return env


@pytest.fixture(scope="module")
def hostile_bundle(good_bundle, tmp_path_factory) -> Path:
    files = _members(good_bundle)
    files["report.html"] = files["report.html"].replace(b"</main>", b'<img src="x" onerror="alert(1)"></main>', 1)
    return _repack(tmp_path_factory.mktemp("hostile") / "hostile.tar.gz", files)


@pytest.mark.parametrize("args", [["bundle", "verify"], ["bundle", "show"], ["compare", "--against", "h200"]],
                         ids=["verify", "show", "compare"])
def test_verify_show_and_compare_refuse_it_with_exit_5(hostile_bundle, good_bundle, tmp_path, args):
    r = subprocess.run([sys.executable, "-m", "kit", *args, str(hostile_bundle)],
                       cwd=tmp_path, capture_output=True, text=True, env=_env())
    assert r.returncode == 5, (r.stdout, r.stderr)
    assert "active content in report.html: an event-handler attribute onerror= on <img>" in r.stderr
    assert "Traceback" not in r.stderr and "verified" not in r.stdout
    assert list(tmp_path.iterdir()) == []  # nothing written, no report served


# --- the checker's rules, directly --------------------------------------------------------------

@pytest.mark.parametrize("url, ok", [
    ("#cells", True), ("", True), ("charts/a.svg", True), ("a.svg#x", True),
    ("javascript:alert(1)", False), (" \x01javascript:alert(1)", False), ("JaVaScRiPt:x", False),
    ("https://x", False), ("http://x", False), ("//x", False), ("/\\x", False), ("/etc/passwd", False),
    ("file:///etc/passwd", False), ("../x", False), ("%2e%2E/x", False), ("a/.%2e/../x", False), ("mailto:a@b", False),
])
def test_url_rule(url, ok):
    assert (url_problem(url) is None) is ok


def test_raster_data_urls_only_in_images():
    assert url_problem("data:image/png;base64,AAAA", "src", "img") is None
    assert url_problem("data:image/svg+xml,<svg/>", "src", "img") is not None
    assert url_problem("data:image/png;base64,AAAA", "href", "a") is not None


@pytest.mark.parametrize("css", [
    "@import 'x.css';", "@IMPORT url(x.css);", "a{b:url(x.png)}", "a{b:url( 'https://x' )}",
    "a{b:\\75\\72\\6c(https://x)}", "a{b:u/**/rl(https://x)}x{c:url(y)}", "a{behavior:url(#x)}",
    "a{-moz-binding:url(#x)}", "a{b:expression(1)}", "/* unterminated",
])
def test_css_rule_refuses(css):
    assert css_problem(css, "a <style> block", block=True) is not None


def test_css_rule_accepts_the_kits_kind_of_css():
    css = "body { font-family: system-ui, \"Segoe UI\"; color: #1d1d1f; } .a::before { content: \"\\2014\"; } " \
          "svg.chart { width: 100%; } .g { fill: url(#grad); } @media (max-width: 600px) { td { padding: 2px } }"
    assert css_problem(css, "a <style> block", block=True) is None


def test_svg_without_problems_passes_and_entities_are_not_expanded():
    assert svg_problem(b'<svg xmlns="http://www.w3.org/2000/svg"><rect width="1" height="1"/></svg>') is None
    bomb = b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><svg>&b;</svg>'
    assert "DOCTYPE" in svg_problem(bomb)[0]
