"""Self-contained HTML pages: ``report.html`` for one run, and ``kit compare --html``.

Everything is inline: CSS in a ``<style>`` block, charts as ``<svg>``
elements. No scripts, no web fonts, no images or links to fetch, so the page
opens the same offline, in a mail attachment or in a CI artefact viewer. All
text from results files is HTML-escaped (a bundle from elsewhere is
untrusted).

This module renders the run's report; the shared skeleton (CSS, page, tables) is
:mod:`kit.report.html.page`, the compare pages :mod:`kit.report.html.compare`.
"""

from __future__ import annotations

import json
import time
from html import escape

from kit.bundle.envinfo import EnvSummary, cell_is_synthetic, summarise_environment
from kit.compare import measures
from kit.results import explain
from kit.compare.stats import METHOD
from kit.env import record as env_record
from kit.results.curve import KNEE_DEFINITION, WHOLE_CELL, curves, fmt_knee, point_parts
from kit.results.ratios import EPOCH_S, SPEEDUP_DEFINITION, THROUGHPUT
from kit.report.env_rows import cpu_only, earlier_session_rows, machine_name, used_or_built
from kit.report.html.page import _outside_note, _page, _table, _verdict_html
from kit.report.html.why import why_section
from kit.report.insights import run_insights
from kit.results.cell_ids import image_size_part, key_of
from kit.results.schema import CellResult, RunResults



def _fmt(v: float | None, fmt: str = "{:.3g}", dash: str = "—") -> str:
    return dash if v is None else escape(fmt.format(v))


def _stamp(t: float | None) -> str:
    return "unknown" if not t else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _env_rows(env: EnvSummary, results: RunResults | None = None) -> list[tuple[str, str]]:
    gpus = env.gpu if not env.gpu_count or env.gpu_count == 1 else f"{env.gpu_count} × {env.gpu}"
    rows = [
        ("machine", machine_name(env.machine, results.environment if results is not None else None)), ("GPU", gpus), ("driver", env.driver if not cpu_only(env) or env.driver != "unknown" else "none (CPU run)"),
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


def _gib(b: float | None) -> str:
    return "—" if b is None else f"{b / 2**30:.2f}"


def _cells_table(results: RunResults) -> str:
    ratios = measures.speedup_vs_fp32(results)
    rows = []
    for c in sorted((c for c in results.cells if c.status == "ok"), key=measures.order_key):
        key = key_of(c)
        e, t = measures.sample(c, EPOCH_S), measures.sample(c, THROUGHPUT)
        n = (t or e).n if (t or e) else 0
        ecv = e.cv if e and e.n > 1 else None
        tcv = t.cv if t and t.n > 1 else None
        wait = explain.data_wait_fraction(c)
        ttfs = measures.sample(c, "time_to_first_step_s")
        mem = measures.sample(c, "peak_memory_bytes")
        metric = measures.sample(c, "final_metric")
        overflow = sum(int(r.get("overflow_steps") or 0) for r in c.repeats if isinstance(r, dict))
        nan = sum(int(r.get("nan_losses") or 0) for r in c.repeats if isinstance(r, dict))
        flags = measures.high_cv_flags(c)
        why = measures.host_busy(c)
        if why:
            flags.insert(0, measures.busy_note(why))
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
        ["cell", "n", "s/epoch with warm-up (median)", "steady throughput (median)", "epoch-time CV", "throughput CV",
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
             escape(measures.parity_metric(r["workload"])),
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
            _fmt(explain.util_pct(c), "{:.0f}%"),
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


def _badges(synthetic: bool, interrupted: bool, busy: int = 0) -> str:
    out = []
    if busy:
        out.append('<span class="badge interrupted" title="Some cells were measured while the host was busy">HOST BUSY</span>')
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
    measured = [c for c in results.cells if c.status == "ok"]
    busy = [c for c in measured if measures.host_busy(c)]
    body = [
        f"<h1>Mixed-precision training benchmark {_badges(synthetic, interrupted, len(busy))}</h1>",
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
    if busy:
        shown = "; ".join(f"{c.cell_id}: {measures.host_busy(c)}" for c in busy[:3]) + ("; ..." if len(busy) > 3 else "")
        body.append(f'<p class="sub flag"><strong>Host busy:</strong> {len(busy)} of {len(measured)} cells were measured '
                    f"while the host was busy ({escape(shown)}), marked “{escape(measures.BUSY)}” below and in every "
                    f"finding drawn from them: their {escape(measures.BUSY_WHY)}.</p>")
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
                f'Statistics over repeats: {escape(METHOD)}. s/epoch is an epoch\'s wall time, warm-up and compilation '
                "included (a short epoch can take many times what the steady throughput implies); the throughput "
                "is the steady state's, after the warm-up. CV (coefficient of variation) = standard deviation ÷ mean "
                "over repeats, of the epoch time (includes warm-up) and of the steady-state throughput; ≥ 10% is flagged.</p>")
    body.append(why_section(results))
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
