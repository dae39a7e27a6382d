"""Self-contained HTML pages: ``report.html`` for one run, and ``kit compare --html``.

Everything is inline: CSS in a ``<style>`` block, charts as ``<svg>``
elements. No scripts, no web fonts, no images or links to fetch, so the page
opens the same offline, in a mail attachment or in a CI artefact viewer. All
text from results files is HTML-escaped (a bundle from elsewhere is
untrusted).
"""

from __future__ import annotations

import json
import time
from html import escape
from typing import TYPE_CHECKING, Iterable

from kit import __version__
from kit.bundle.envinfo import EnvSummary, cell_is_synthetic, summarise_environment
from kit.compare import measures
from kit.compare.fmt import fmt_speedup_estimate
from kit.compare.stats import METHOD, OUTSIDE_NOTE
from kit.env import record as env_record
from kit.results.curve import KNEE_DEFINITION, WHOLE_CELL, curves, fmt_knee, point_parts
from kit.results.ratios import SPEEDUP_DEFINITION
from kit.report.insights import run_insights
from kit.results.cell_ids import image_size_part, key_of
from kit.results.schema import CellResult, RunResults

if TYPE_CHECKING:
    from kit.compare.engine import Comparison

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
figure { margin: 0; }
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


def _fmt(v: float | None, fmt: str = "{:.3g}", dash: str = "—") -> str:
    return dash if v is None else escape(fmt.format(v))


def _stamp(t: float | None) -> str:
    return "unknown" if not t else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def cpu_only(env: EnvSummary) -> bool:
    return env.gpu == "CPU only"


def used_or_built(value: str, env: EnvSummary) -> str:
    """What a GPU library was on this run: on a CPU run it was not used, only
    built into torch (so the version is shown as that, not as what ran)."""
    if not cpu_only(env):
        return value
    return "not used (CPU run)" + (f"; torch built with {value}" if value and value != "unknown" else "")


def _env_rows(env: EnvSummary, results: RunResults | None = None) -> list[tuple[str, str]]:
    gpus = env.gpu if not env.gpu_count or env.gpu_count == 1 else f"{env.gpu_count} × {env.gpu}"
    rows = [
        ("machine", env.machine), ("GPU", gpus), ("driver", env.driver if not cpu_only(env) or env.driver != "unknown" else "none (CPU run)"),
        ("CUDA", used_or_built(env.cuda, env)),
        ("image stack", env.stack), ("image", env.image), ("torch", env.torch), ("cuDNN", used_or_built(env.cudnn, env)),
        ("fastai", env.fastai), ("Python", env.python), ("data", env.data_source),
        ("kit", env.kit_version if env.kit_version != "unknown" else (results.kit_version if results else "unknown")),
    ]
    if results is not None:
        rows += [
            ("run id", results.run_id), ("status", results.status),
            ("started", _stamp(results.started_at)), ("finished", _stamp(results.finished_at)),
        ]
        differs = results.environment.get("merged_config_differs") or {}
        repeats = ("repeats per cell vary: see each cell" if "repeats" in differs
                   else f"{results.config.repeats} repeat(s) per cell")
        rows.append(("mode", f"{results.config.mode}, {repeats}"))
        if results.config.command_line:
            rows.append(("command", " ".join(str(a) for a in results.config.command_line)))
        for i, src in enumerate(env_record.merged_sources(results.environment), 1):
            where = ", ".join(x for x in (src["device"], src["status"]) if x)
            sessions = src["earlier_sessions"]
            resumed = f"; resumed after {len(sessions)} earlier session(s)" if sessions else ""
            rows.append((f"merged run {i}", f"{' '.join(src['command_line'])} ({where}){resumed}"))
        rows += earlier_session_rows(results.environment)
    return rows


def earlier_session_rows(environment: dict) -> list[tuple[str, str]]:
    """One row per session before a resume (kit.env.record.keep_earlier_session): when, where,
    which kit, how many of the cells it measured."""
    rows = []
    for i, s in enumerate(x for x in environment.get("earlier_sessions") or [] if isinstance(x, dict)):
        sm = env_record.session_summary(s)
        rows.append((f"earlier session {i + 1}", f"{sm['collected_at'] or 'unknown'}: {len(sm['cells'])} cell(s) on host "
                     f"{sm['host_id']} ({', '.join(sm['gpu_uuids']) or 'no GPU recorded'}), kit commit "
                     f"{(sm['kit_commit'] or 'unknown')[:12]}"))
    return rows


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


def _gib(b: float | None) -> str:
    return "—" if b is None else f"{b / 2**30:.2f}"


def _cells_table(results: RunResults) -> str:
    ratios = measures.speedup_vs_fp32(results)
    rows = []
    for c in sorted((c for c in results.cells if c.status == "ok"), key=measures.order_key):
        key = key_of(c)
        e, t = measures.sample(c, measures.EPOCH_S), measures.sample(c, measures.THROUGHPUT)
        n = (t or e).n if (t or e) else 0
        ecv = e.cv if e and e.n > 1 else None
        tcv = t.cv if t and t.n > 1 else None
        wait = measures.data_wait_fraction(c)
        ttfs = measures.sample(c, "time_to_first_step_s")
        mem = measures.sample(c, "peak_memory_bytes")
        metric = measures.sample(c, "final_metric")
        overflow = sum(int(r.get("overflow_steps") or 0) for r in c.repeats if isinstance(r, dict))
        nan = sum(int(r.get("nan_losses") or 0) for r in c.repeats if isinstance(r, dict))
        flags = measures.high_cv_flags(c)
        if measures.throttled(c):
            flags.append("throttled")
        if nan:
            flags.append(f"{nan} NaN losses")
        parallel = measures.data_parallel_note(c)
        rows.append([
            escape(c.label) + (f'<br><span class="note">{escape(parallel)}</span>' if parallel else "")
            + (f'<br><span class="flag">⚠ {escape(", ".join(flags))}</span>' if flags else ""),
            str(n),
            _fmt(e.median if e else None, "{:.3f}"),
            _fmt(t.median if t else None, "{:,.0f}") + f" {escape(c.throughput_unit)}/s" if t else "—",
            _fmt(ecv, "{:.1%}"),
            _fmt(tcv, "{:.1%}"),
            _verdict_html(ratios.get(key)),
            _fmt(ttfs.median if ttfs else None, "{:.2f}"),
            _fmt(wait, "{:.0%}"),
            _gib(mem.median if mem else None),
            str(overflow),
            _fmt(metric.median if metric else None, "{:.4g}"),
        ])
    if not rows:
        return "<p>No cell finished successfully.</p>"
    return _table(
        ["cell", "n", "s/epoch (median)", "throughput (median)", "epoch-time CV", "throughput CV",
         "speedup over fp32 [95% CI of the ratio of means]",
         "first step s", "data wait", "peak mem GiB", "overflow steps", "final metric"],
        rows, numeric_from=1,
    ) + _outside_note(ratios.values())


def _parity_table(results: RunResults) -> str:
    """A convergence run's parity verdicts (measures.parity_rows), one row per reduced precision."""
    rows = measures.parity_rows(results)
    if not rows:
        return ""
    body = [[escape(f"{r['workload']}/{r['model']}/{r['precision']}/{r['engine']}"),
             escape(measures.PARITY_METRIC.get(r["workload"], "final metric")),
             _fmt(r["value"], "{:.5g}"),
             escape(r.get("base", "fp32")) + " " + _fmt(r.get("reference", r.get("fp32")), "{:.5g}"),
             escape(measures.fmt_parity_gap(r)), escape(r["rule"]),
             ('<span class="flag">' if r["verdict"].startswith("worse") else "<span>") + escape(r["verdict"]) + "</span>"]
            for r in rows]
    return ("<h2>Convergence parity</h2>"
            + _table(["cell", "metric", "value (median)", "base (median)", "difference", "rule", "verdict"], body, numeric_from=2))


def _max_batch_table(results: RunResults) -> str:
    """The batch search's answers per model and precision, and each one's ratio to fp32's."""
    found = {}
    for c in sorted((c for c in results.cells if c.status == "ok"), key=measures.order_key):
        mb = c.metrics.get("max_batch")
        if mb is not None:
            px = "".join("/" + x for x in image_size_part(c.workload, c.params))
            found.setdefault((c.workload, c.model + px, c.precision), (mb, bool(c.metrics.get("max_batch_at_limit"))))
    if not found:
        return ""
    rows = []
    for (workload, model, precision), (mb, at_limit) in found.items():
        base = found.get((workload, model, "fp32"))
        ratio = None if base is None or precision == "fp32" or not base[0] else mb / base[0]
        capped = at_limit or (base is not None and base[1])
        rows.append([escape(f"{workload}/{model}"), escape(precision), ("≥ " if at_limit else "") + f"{mb:,}",
                     "—" if ratio is None else ("≈ " if capped else "") + f"{ratio:.2f}×"])
    return ("<h2>Largest batch that fits</h2>"
            + _table(["model", "precision", "max batch", "vs fp32"], rows, numeric_from=2)
            + '<p class="sub">Found by doubling then binary search (to within 8 images), each try a few real training '
              "steps; ≥ means the whole training set fit, so the real limit is higher and the ratio is only a bound.</p>")


def _batch_curve_table(results: RunResults) -> str:
    """A run with --batch-sizes: per model, engine and precision, each batch size's throughput,
    speedup over fp32 at that size and images per joule, and the knee (kit.results.curve)."""
    cs = [c for c in curves(results.cells) if c.shown]
    if not cs:
        return ""
    cs.sort(key=lambda c: (c.image_size or 0, measures.order_key((c.workload, c.model, c.precision, c.engine))))
    sizes = sorted({p.batch_size for c in cs for p in c.points})
    rows = []
    for c in cs:
        at = {p.batch_size: p for p in c.points}
        row = [escape(f"{c.workload}/{c.model}{c.size_suffix} · {c.engine}"), escape(c.precision), escape(fmt_knee(c))]
        for b in sizes:
            p = at.get(b)
            row.append("—" if p is None else "<br>".join(escape(x) for x in point_parts(p, c.unit)))
        rows.append(row)
    return ("<h2>Batch curve</h2>"
            + _table(["model · engine", "precision", "knee (batch)"] + [f"batch {b:,}" for b in sizes], rows, numeric_from=2)
            + f'<p class="sub">Each batch size is a cell of its own (median over its repeats); the speedup over fp32 is '
              f"at the same batch size. {escape(KNEE_DEFINITION[0].upper() + KNEE_DEFINITION[1:])}. Images per joule: "
              "steady throughput ÷ the GPU's mean board power over the timed steps, where the GPU reported energy or "
              "power; where the timed steps were too short to measure, over the whole cell, warm-up included, "
              f"marked “{escape(WHOLE_CELL)}” (telemetry.energy_basis) and left out of the chart.</p>")


def _telemetry_table(results: RunResults) -> str:
    rows = []
    reasons: set[str] = set()
    for c in sorted((c for c in results.cells if c.status == "ok"), key=measures.order_key):
        t = measures.telemetry(c)
        if t is None:
            reasons.add(measures.telemetry_reason(c) or "not recorded")
            continue
        others = t.get("other_processes")
        rows.append([
            escape(c.cell_id),
            _fmt(t.get("power_mean_w") if isinstance(t.get("power_mean_w"), (int, float)) else None, "{:.0f}"),
            _fmt(t.get("energy_j") if isinstance(t.get("energy_j"), (int, float)) else None, "{:,.0f}"),
            _fmt(measures.energy_per_epoch(c), "{:,.0f}"),
            _fmt(measures.util_pct(c), "{:.0f}%"),
            "yes" if measures.throttled(c) else "no",
            escape(str(len(others) if isinstance(others, list) else others if others is not None else "—")),
        ])
    html = ""
    if rows:
        html += _table(["cell", "mean power W", "energy J", "J/epoch", "GPU busy", "throttled", "other GPU processes"], rows, numeric_from=1)
    if reasons:
        html += "<p class=\"sub\">No GPU telemetry for some cells: " + escape("; ".join(sorted(reasons))) + ".</p>"
    return html


def _not_measured(cells: list[CellResult]) -> str:
    bad = [c for c in cells if c.status != "ok"]
    if not bad:
        return ""
    rows = [[escape(c.cell_id), escape(c.status), escape(c.reason or "")] for c in sorted(bad, key=measures.order_key)]
    return "<h2>Not measured</h2>" + _table(["cell", "status", "reason"], rows)


def _badges(synthetic: bool, interrupted: bool) -> str:
    out = []
    if synthetic:
        out.append('<span class="badge synthetic" title="Generated data with the real shapes: throughput only">SYNTHETIC DATA</span>')
    if interrupted:
        out.append('<span class="badge interrupted" title="The run stopped before every cell finished">INTERRUPTED</span>')
    if not interrupted:
        out.append('<span class="badge complete">COMPLETE</span>')
    return "".join(out)


def render_run_report(
    results: RunResults,
    environment: dict | None,
    interrupted: bool,
    charts: dict[str, str],
    bundle_name: str = "",
) -> str:
    """The bundle's report.html."""
    env = summarise_environment(environment or results.environment, results.config, results.cells)
    synthetic = env.data_source == "synthetic" or any(cell_is_synthetic(c) for c in results.cells)
    body = [
        f"<h1>Mixed-precision training benchmark {_badges(synthetic, interrupted)}</h1>",
        f'<p class="sub">{escape(env.headline)}'
        + (f"<br>bundle {escape(bundle_name)}" if bundle_name else "") + "</p>",
    ]
    if synthetic:
        body.append(
            '<p class="sub"><strong>Synthetic data:</strong> the inputs were generated with the real data sets\' shapes. '
            "Times and throughput are real measurements; loss and accuracy are meaningless.</p>"
        )
    if interrupted:
        body.append('<p class="sub"><strong>Interrupted run:</strong> only the cells below finished; the rest were never measured.</p>')
    findings = run_insights(results, synthetic)
    body.append("<h2>What the run shows</h2>")
    if findings:
        body.append('<ul class="findings">' + "".join(
            f"<li><strong>{escape(i.subject)}</strong>: {escape(i.text)}</li>" for i in findings) + "</ul>")
    else:
        body.append("<p>No finished cells to summarise.</p>")
    body.append("<h2>Environment</h2>" + _table(["", ""], [(escape(k), escape(str(v))) for k, v in _env_rows(env, results)], cls="env"))
    if charts:
        body.append('<h2>Charts</h2><div class="charts">')
        for name, svg in charts.items():
            body.append(f"<figure>{svg}<figcaption>{escape(name)}</figcaption></figure>")
        body.append("</div>")
    body.append("<h2>Cells</h2>" + _cells_table(results))
    body.append(f'<p class="sub">{escape(SPEEDUP_DEFINITION[0].upper() + SPEEDUP_DEFINITION[1:])}. '
                f'Statistics over repeats: {escape(METHOD)}. CV (coefficient of variation) = standard deviation ÷ mean '
                "over repeats, of the epoch time (includes warm-up) and of the steady-state throughput; ≥ 10% is flagged.</p>")
    body.append(_parity_table(results))
    body.append(_batch_curve_table(results))
    body.append(_max_batch_table(results))
    tele = _telemetry_table(results)
    if tele:
        body.append("<h2>GPU telemetry</h2>" + tele)
    body.append(_not_measured(results.cells))
    body.append(
        "<h2>Raw environment record</h2><details><summary>env.json</summary><pre>"
        + escape(json.dumps(environment or results.environment or {}, indent=2, default=str)[:200_000])
        + "</pre></details>"
    )
    return _page(f"Benchmark report — {env.machine} / {env.gpu}", "\n".join(body))


#: up to this many machines the compare page has one column per machine; more make the fleet page
PAGE_COLUMNS = 4

FLEET_CSS = """
table.fleet { table-layout: fixed; }
table.fleet td { overflow-wrap: anywhere; }
table.fleet th:first-child, table.fleet td:first-child { width: 92px; }
svg.ranked { width: 100%; height: auto; display: block; margin: 4px 0 12px; }
.outlier-note { color: #a3231b; font-weight: 600; }
h3 { font-size: 1rem; margin: 22px 0 4px; overflow-wrap: anywhere; }
"""


def render_compare_page(cmp: "Comparison", view=None) -> str:
    """The page ``kit compare --html FILE`` writes: one column per machine for a few machines, the
    fleet page (:func:`render_fleet_page`) for more, or when ``view`` groups them."""
    if len(cmp.sources) > PAGE_COLUMNS or (view is not None and view.group_by):
        return render_fleet_page(cmp, view)
    from kit.compare.render import (
        QUALITY_TITLE, n_and_cv, fmt_throughput, fmt_time, fmt_vs_baseline, not_compared_lines, not_compared_title,
        quality_lines, quality_rows, speed_verdict,
    )
    from kit.report.charts import comparison_charts

    base = cmp.baseline_source
    body = [f"<h1>Comparison of {len(cmp.sources)} runs</h1>", f'<p class="sub">Baseline: {escape(base.label)} ({escape(base.short_name)}). Statistics: {escape(cmp.method)}.</p>']
    body.append("<h2>Inputs</h2>" + _table(
        ["", "machine", "GPU", "driver", "stack", "torch", "cuDNN", "data", "file"],
        [[escape(s.label) + (" (baseline)" if s is base else ""), escape(s.env.machine), escape(s.env.gpu), escape(s.env.driver),
          escape(s.env.stack), escape(s.env.torch), escape(s.env.cudnn),
          escape(s.env.data_source) + (' <span class="badge synthetic">SYNTHETIC</span>' if s.env.data_source == "synthetic" else ""),
          escape(s.file_name) + (' <span class="badge interrupted">INTERRUPTED</span>' if s.interrupted else "")]
         for s in cmp.sources],
    ))
    body.append("<h2>Comparability warnings</h2>")
    if cmp.warnings:
        body.append('<ul class="warnings">' + "".join(
            f'<li class="{w.severity}"><strong>{escape(w.severity)}</strong>: {escape(w.message)}</li>' for w in cmp.warnings) + "</ul>")
    else:
        body.append("<p>None.</p>")

    def time_cell(row, mc) -> str:
        if mc is None or mc.status != "ok":
            return escape(mc.status + (f": {mc.reason}" if mc and mc.reason else "")) if mc else "—"
        bits = [escape(fmt_time(mc.epoch_s)) + "/epoch", escape(fmt_throughput(mc.throughput, row.unit))]
        bits += [escape(x) for x in n_and_cv(mc)]
        if mc.energy_j_per_epoch is not None:
            bits.append(f"{mc.energy_j_per_epoch:,.0f} J/epoch")
        if mc.flags:
            bits.append(f'<span class="flag">⚠ {escape(", ".join(mc.flags))}</span>')
        return "<br>".join(bits)

    body.append("<h2>Time per epoch and throughput</h2>" + _table(
        ["cell"] + [escape(s.label) for s in cmp.sources],
        [[escape(r.label)] + [time_cell(r, mc) for mc in r.machines] for r in cmp.rows], numeric_from=1,
    ))
    sp_rows = [r for r in cmp.rows if any(mc and mc.vs_fp32 for mc in r.machines)]
    if sp_rows:
        body.append("<h2>Speedup over fp32 on each machine</h2><p class=\"sub\">"
                    + escape(SPEEDUP_DEFINITION[0].upper() + SPEEDUP_DEFINITION[1:])
                    + "; [95% CI of the ratio of means].</p>" + _table(
            ["cell"] + [escape(s.label) for s in cmp.sources],
            [[escape(r.label)] + [_verdict_html(mc.vs_fp32) if mc else "—" for mc in r.machines] for r in sp_rows], numeric_from=1,
        ) + _outside_note(mc.vs_fp32 for r in sp_rows for mc in r.machines if mc))

    def vs_cell(mc) -> str:
        est = mc.vs_baseline if mc else None
        if est is None:
            return escape(mc.status) if mc and mc.status != "ok" else "—"
        v = speed_verdict(est)
        cls = "sig" if v == "faster" else "slower" if v == "slower" else "ns"
        return f'{escape(fmt_vs_baseline(est))} <span class="{cls}">{escape(v)}</span>'

    body.append(f"<h2>Throughput relative to {escape(base.label)}</h2>"
                f'<p class="sub">Median throughput ÷ {escape(base.label)}\'s median; [95% CI of the ratio of means].</p>' + _table(
        ["cell"] + [f"{escape(s.label)} ÷ {escape(base.label)}" for s in cmp.sources[1:]],
        [[escape(r.label)] + [vs_cell(mc) for mc in r.machines[1:]] for r in cmp.rows], numeric_from=1,
    ) + _outside_note(mc.vs_baseline for r in cmp.rows for mc in r.machines[1:] if mc))
    q_rows = quality_rows(cmp)
    if q_rows:
        title, _, sub = QUALITY_TITLE.partition(" (")
        sub = sub[:1].upper() + sub[1:]
        body.append(f"<h2>{escape(title)}</h2><p class=\"sub\">{escape(sub.replace('):', ':', 1))}.</p>" + _table(
            ["cell"] + [escape(s.label) for s in cmp.sources],
            [[escape(r.label)] + ["<br>".join(escape(x) for x in quality_lines(r, mc, base.label)) for mc in r.machines]
             for r in q_rows], numeric_from=1,
        ))
    charts = comparison_charts(cmp)
    if charts:
        body.append('<h2>Charts</h2><div class="charts">')
        for caption, svg in charts:
            body.append(f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>")
        body.append("</div>")
    if cmp.not_compared:
        title = not_compared_title(cmp, verbose=True).replace("Not compared: ", "")
        body.append(f"<h2>Not compared</h2><p class=\"sub\">{escape(title)}, counted by reason:</p><ul>"
                    + "".join(f"<li>{escape(x)}</li>" for x in not_compared_lines(cmp, verbose=False)) + "</ul>"
                    + "<details><summary>every cell</summary><ul>"
                    + "".join(f"<li>{escape(x)}</li>" for x in not_compared_lines(cmp, verbose=True)) + "</ul></details>")
    return _page(f"Benchmark comparison — {len(cmp.sources)} runs", "\n".join(body))


def render_fleet_page(cmp: "Comparison", view=None) -> str:
    """The compare page for many machines, at the page's fixed width whatever their number: the
    inputs one line each, the findings (machines slower than the rest of their group, grouped by
    ``view.group_by`` or the GPU model), and per cell a ranked bar chart per group, each machine's
    throughput ÷ the baseline's with its 95% CI as whiskers, the outliers in red. No scripts."""
    from kit.bundle.inert import html_text
    from kit.compare.fleet import View, group_phrase, summarise_fleet
    from kit.compare.fleet_views import findings_lines, findings_title, spread_text
    from kit.compare.fmt import fmt_vs_baseline
    from kit.compare.render import not_compared_lines, not_compared_title, speed_verdict
    from kit.report.svg_ranked import RankedBar, bar_end, ranked_bars

    view = view or View()
    by = view.group_by or "gpu"
    fleet = summarise_fleet(cmp, by, view.outlier_pct)
    outliers = fleet.outliers()
    base = cmp.baseline_source
    h = html_text
    body = [f"<h1>Comparison of {len(cmp.sources)} runs</h1>",
            f'<p class="sub">Baseline: {h(base.label)} ({h(base.short_name)}). Statistics: {h(cmp.method)}.</p>']
    body.append("<h2>Findings</h2>" + f'<p class="sub">{h(findings_title(fleet))}; each machine against the pooled '
                "repeats of the other machines of its group.</p>"
                + '<ul class="findings">' + "".join(f"<li>{h(x)}</li>" for x in findings_lines(fleet)) + "</ul>")
    body.append("<h2>Comparability warnings</h2>")
    body.append('<ul class="warnings">' + "".join(f'<li class="{h(w.severity)}"><strong>{h(w.severity)}</strong>: {h(w.message)}</li>'
                                                  for w in cmp.warnings) + "</ul>" if cmp.warnings else "<p>None.</p>")
    body.append(f"<h2>Throughput relative to {h(base.label)}, per cell</h2>"
                f'<p class="sub">Each machine\'s median throughput ÷ {h(base.label)}\'s median, fastest first within '
                f"each group ({h(by)}); whiskers: 95% CI of the ratio of means; "
                '<span class="outlier-note">red: a machine named in the findings</span>.</p>')
    for n_row, row in enumerate(cmp.rows):
        body.append(f"<h3>{h(row.label)}</h3>")
        charts = []
        for gc in (c for c in fleet.cells if c.row is row):
            bars = []
            for m in gc.members:
                mc = row.machines[m.source.index]
                est = mc.vs_baseline if mc else None
                is_base = m.source is base
                value = 1.0 if is_base else est.ratio if est else None
                text = "baseline" if is_base else (fmt_vs_baseline(est) if est else "—")
                verdict = "" if is_base or est is None else speed_verdict(est)
                name = f"{m.source.label} {m.source.env.machine}"
                bars.append(RankedBar(name, value, est.ci_low if est else None, est.ci_high if est else None,
                                      text, f"{name}: {text} {verdict}".strip() + (" (outlier)" if m.source.index in outliers else ""),
                                      marked=m.source.index in outliers))
            charts.append((f"{by} {gc.group}: {group_phrase(by, gc.group, len(gc.members))}; {spread_text(gc, row.unit)}", bars))
        # one scale for the cell's groups, so that their bars (and the baseline's line) line up; a
        # whisker past 1.2x the longest bar is cut at the axis' end (the figure beside it is whole)
        ends = [bar_end(b) for _, bars in charts for b in bars if b.value is not None]
        longest = max([b.value for _, bars in charts for b in bars if b.value is not None] + [1.0])
        x_max = min(max(ends + [1.0]), longest * 1.2)
        for n_group, (caption, bars) in enumerate(charts):
            body.append(f'<p class="sub">{h(caption)}</p>' + ranked_bars(
                bars, f"fleet-{n_row}-{n_group}", f"{row.label}: {caption}", reference=1.0,
                reference_label=f"{base.label} = 1", x_max=x_max))
    body.append("<h2>Inputs</h2>" + _table(
        ["", "machine", "GPU", "driver", "stack", "torch", "data", "file"],
        [[h(s.label) + (" (baseline)" if s is base else ""), h(s.env.machine), h(s.env.gpu), h(s.env.driver),
          h(s.env.stack), h(s.env.torch), h(s.env.data_source),
          h(s.file_name) + (' <span class="badge interrupted">INTERRUPTED</span>' if s.interrupted else "")]
         for s in cmp.sources], cls="fleet"))
    if cmp.not_compared:
        body.append(f"<h2>Not compared</h2><p class=\"sub\">{h(not_compared_title(cmp, verbose=False))}:</p><ul>"
                    + "".join(f"<li>{h(x)}</li>" for x in not_compared_lines(cmp, verbose=False)) + "</ul>")
    if cmp.refused:
        body.append("<h2>Refused inputs</h2><ul>" + "".join(f"<li>{h(r.line)}</li>" for r in cmp.refused) + "</ul>")
    return _page(f"Benchmark comparison — {len(cmp.sources)} runs", "\n".join(body), extra_css=FLEET_CSS)
