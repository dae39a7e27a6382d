"""Which charts a run (or a comparison) gets, built from the measured cells.

Per workload x engine (the CIFAR torch engine, the CIFAR fastai engine, the
LSTM), one run gets:

- ``epoch-time``: seconds per epoch per model, one bar per precision
  (median over repeats; error bars span min..max over repeats; the axis is
  scaled to the medians, and a repeat beyond it, such as a first repeat's
  warm-up, is marked at the top with its value);
- ``speedup``: the speedup over fp32 per model (the 2019 article's
  "performance ratio", :mod:`kit.results.ratios`: median throughput ÷ fp32's;
  error bars are the 95% CI of the ratio of means, see kit.compare.stats);
- ``throughput``: images or tokens per second per model and precision;
- ``vs-bf16`` (the GPT suite): fp8 and fp16 throughput ÷ amp-bf16's per preset, the same ratio of
  medians with its 95% CI (today's question: what fp8 buys over bf16);
- ``batch-curve`` (a run with ``--batch-sizes``): per model, throughput against batch size,
  one line per precision, the knee ringed; and images per joule where energy was measured.

A comparison adds, per workload x engine, each machine's throughput relative
to the baseline machine with its 95% CI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kit.compare import measures
from kit.compare.fmt import fmt_speedup_estimate, fmt_vs_baseline
from kit.report.svg.plots import bar_chart, line_chart
from kit.report.svg.primitives import PALETTE, Series
from kit.results import curve as curve_mod
from kit.results import precisions, suites
from kit.results.derive import against_bf16
from kit.results.precisions import PRECISIONS
from kit.results.ratios import BASE_PRECISION, EPOCH_S, THROUGHPUT
from kit.results.schema import RunResults

if TYPE_CHECKING:
    from kit.compare.engine import Comparison

MIN_MAX_NOTE = "error bars: min–max of repeats; ▲ a repeat beyond the axis (e.g. a warm-up), with its value"


def _groups(results: RunResults) -> dict[tuple, dict]:
    """(workload, engine, the key's image-size part: () or ("224px",)) -> {"models": [...],
    "precisions": [...], "cells": {(model, precision): cell}}."""
    out: dict[tuple, dict] = {}
    for key, cell in sorted(measures.ok_cells(results).items(), key=lambda kv: measures.order_key(kv[0])):
        if any(x.startswith("bs") for x in key[4:]):
            continue  # a batch curve's point: drawn by the curve charts (batch_curve_charts)
        w, m, p, e = key[:4]
        g = out.setdefault((w, e, tuple(key[4:])), {"models": [], "precisions": [], "cells": {}, "unit": measures.unit_of(cell)})
        if m not in g["models"]:
            g["models"].append(m)
        if p not in g["precisions"]:
            g["precisions"].append(p)
        g["cells"][(m, p)] = cell
    for g in out.values():
        g["precisions"].sort(key=lambda p: PRECISIONS.index(p) if p in PRECISIONS else 99)
    return out


def precision_colour(precision: str) -> str | None:
    """The same colour for a precision in every chart."""
    if precision in PRECISIONS:
        return PALETTE[PRECISIONS.index(precision) % len(PALETTE)]
    return None


def _group_title(workload: str, engine: str) -> str:
    """The suite's chart title (its descriptor's), with the engine's label."""
    found = suites.find(workload)
    return found.title.format(engine=measures.engine_label(workload, engine)) if found else f"{workload}, {engine}"


def run_charts(results: RunResults, suffix: str = "", id_prefix: str = "") -> dict[str, str]:
    """Chart file name (``charts/...svg``) -> SVG text, for one run."""
    charts: dict[str, str] = {}
    ratios = measures.speedup_vs_fp32(results)
    vs_bf16 = measures.speedup_vs(results, measures.BF16_BASE)
    ok = measures.ok_cells(results)
    for (workload, engine, extra), g in _groups(results).items():
        base = f"{workload}-{engine}" + "".join(f"-{x}" for x in extra)
        title = _group_title(workload, engine) + "".join(f" at {x[:-2]} px" for x in extra) + suffix
        models, precisions, cells = g["models"], g["precisions"], g["cells"]

        time_series = []
        thr_series = []
        for p in precisions:
            t_vals, t_lo, t_hi, r_vals, r_lo, r_hi, busy = [], [], [], [], [], [], []
            for m in models:
                cell = cells.get((m, p))
                why = measures.host_busy(cell) if cell else None
                busy.append(measures.busy_note(why) if why else None)
                ts = measures.sample(cell, EPOCH_S) if cell else None
                rs = measures.sample(cell, THROUGHPUT) if cell else None
                t_vals.append(ts.median if ts else None)
                t_lo.append(ts.min if ts and ts.n > 1 else None)
                t_hi.append(ts.max if ts and ts.n > 1 else None)
                r_vals.append(rs.median if rs else None)
                r_lo.append(rs.min if rs and rs.n > 1 else None)
                r_hi.append(rs.max if rs and rs.n > 1 else None)
            time_series.append(Series(p, t_vals, t_lo, t_hi, busy, colour=precision_colour(p)))
            thr_series.append(Series(p, r_vals, r_lo, r_hi, busy, colour=precision_colour(p)))
        if any(v is not None for s in time_series for v in s.values):
            charts[f"charts/{base}-epoch-time.svg"] = bar_chart(
                f"Time per epoch — {title}", models, time_series,
                y_label="seconds per epoch (median)", x_label="model",
                chart_id=f"{id_prefix}{base}-epoch-time", scale_to_values=True, note=_busy_note(MIN_MAX_NOTE, time_series),
            )
        if any(v is not None for s in thr_series for v in s.values):
            charts[f"charts/{base}-throughput.svg"] = bar_chart(
                f"Throughput — {title}", models, thr_series,
                y_label=f"{g['unit']} per second (median)", x_label="model",
                chart_id=f"{id_prefix}{base}-throughput", scale_to_values=True, note=_busy_note(MIN_MAX_NOTE, thr_series),
            )
        ratio_series = _ratio_series(ratios, workload, engine, extra, models,
                                     [p for p in precisions if p != BASE_PRECISION], ok)
        if ratio_series:
            charts[f"charts/{base}-speedup.svg"] = _ratio_chart(
                f"Speedup over fp32 — {title}", models, ratio_series, "speedup over fp32 (×)", "model",
                BASE_PRECISION, f"{id_prefix}{base}-speedup")
        bf16_series = _ratio_series(vs_bf16, workload, engine, extra, models,
                                    [p for p in precisions if p in VS_BF16_PRECISIONS], ok,
                                    measures.BF16_BASE) if against_bf16(workload) else []
        if bf16_series:
            charts[f"charts/{base}-vs-bf16.svg"] = _ratio_chart(
                f"Throughput ÷ amp-bf16 — {title}", models, bf16_series, "throughput ÷ amp-bf16's (×)", "preset",
                measures.BF16_BASE, f"{id_prefix}{base}-vs-bf16")
    charts.update(batch_curve_charts(results, suffix=suffix, id_prefix=id_prefix))
    return charts


#: the precisions drawn against amp-bf16 (the vs-bf16 chart of a suite whose descriptor asks for it):
#: fp8's recipes and fp16
VS_BF16_PRECISIONS = tuple(p for p in precisions.PRECISIONS if precisions.mode(p).peak_dtype in ("fp16", "fp8")
                           and precisions.mode(p).autocast)


def _busy_note(note: str, series: list) -> str:
    """The chart's note, and where a bar was drawn from a cell measured on a busy host, that it says so."""
    if any(n and measures.BUSY in n for s in series for n in s.notes):
        return note + f"; ⚠ {measures.BUSY}: a bar drawn from a cell measured while the host was busy (hover for why)"
    return note


def _ratio_series(estimates: dict, workload: str, engine: str, extra: tuple, models: list, precisions: list,
                  cells: dict, base: str = BASE_PRECISION) -> list:
    """One bar series per precision of ratio estimates (speedup over fp32, or ÷ amp-bf16) with their CIs;
    a bar drawn from a cell measured on a busy host (``cells``: the run's ok cells by key) says so."""
    out = []
    for p in precisions:
        vals, lo, hi, notes, texts = [], [], [], [], []
        for m in models:
            key = (workload, m, p, engine) + extra
            est = estimates.get(key)
            vals.append(est.ratio if est else None)
            lo.append(est.ci_low if est else None)
            hi.append(est.ci_high if est else None)
            texts.append(fmt_speedup_estimate(est) if est else None)
            busy = measures.speedup_busy(key, cells, base) if est else None
            notes.append(f"95% CI of the ratio of means; {est.verdict}" + (f"; {measures.busy_note(busy)}" if busy else "")
                         if est else None)
        if any(v is not None for v in vals):
            out.append(Series(p, vals, lo, hi, notes, colour=precision_colour(p), texts=texts))
    return out


def _ratio_chart(heading: str, models: list, series: list, y_label: str, x_label: str, base: str, chart_id: str) -> str:
    """Bars of ratios against ``base`` (fp32, or amp-bf16), a line at 1, error bars their 95% CIs."""
    return bar_chart(heading, models, series, y_label=y_label, x_label=x_label,
                     note=_busy_note(f"median throughput ÷ {base}'s median; error bars: 95% CI of the ratio of means; "
                                     "▲ beyond the axis", series),
                     reference=1.0, reference_label=f"{base} = 1", chart_id=chart_id, scale_to_values=True)


CURVE_NOTE = "median over repeats; ○ the knee; × not measured at that size (hover: why, e.g. out of memory)"


def batch_curve_charts(results: RunResults, suffix: str = "", id_prefix: str = "") -> dict[str, str]:
    """A run with ``--batch-sizes``: per workload x engine x model, throughput against batch size,
    one line per precision (the knee ringed), and images per joule the same way where the GPU
    reported energy (kit.results.curve)."""
    groups: dict[tuple, list[curve_mod.Curve]] = {}
    for c in curve_mod.curves(results.cells):
        if not c.shown:
            continue
        groups.setdefault((c.workload, c.engine, c.model, c.size_suffix), []).append(c)
    charts: dict[str, str] = {}
    for (workload, engine, model, px), cs in sorted(groups.items(), key=lambda kv: (kv[0][3], measures.order_key((kv[0][0], kv[0][2], "", kv[0][1])))):
        cs.sort(key=lambda c: PRECISIONS.index(c.precision) if c.precision in PRECISIONS else 99)
        sizes = sorted({p.batch_size for c in cs for p in c.points})
        at_size = f" at {cs[0].image_size} px" if px else ""
        title = f"{model}{at_size}, {_group_title(workload, engine)}{suffix}"
        base = f"{workload}-{engine}-{model}{px.replace('/', '-')}-batch-curve"
        unit = next((c.unit for c in cs if c.unit), "items")

        def series(value, unmeasured=lambda p: "not measured") -> list[Series]:
            out = []
            for c in cs:
                at = {p.batch_size: p for p in c.points}
                vals, notes = [], []
                for b in sizes:
                    p = at.get(b)
                    vals.append(value(p) if p is not None and p.status == "ok" else None)
                    why = "not in this curve" if p is None else p.reason or (unmeasured(p) if p.status == "ok" else p.status)
                    notes.append(why if vals[-1] is None else None)
                out.append(Series(c.precision, vals, notes=notes, colour=precision_colour(c.precision)))
            return out

        thr = series(lambda p: p.throughput)
        if any(v is not None for s in thr for v in s.values):
            charts[f"charts/{base}.svg"] = line_chart(
                f"Throughput against batch size — {title}", sizes, thr,
                y_label=f"{unit} per second (median)", x_label="batch size (log scale)",
                chart_id=f"{id_prefix}{base}", note=CURVE_NOTE,
                marks={c.precision: c.knee for c in cs if c.knee is not None},
            )
        # one basis per line: figures over the whole cell (warm-up included) read high
        per_j = series(lambda p: p.steady_images_per_j,
                       unmeasured=lambda p: "timed steps too short to measure energy over" if p.images_per_j else "not measured")
        if any(v is not None for s in per_j for v in s.values):
            charts[f"charts/{base}-per-joule.svg"] = line_chart(
                f"{unit.capitalize()} per joule against batch size — {title}", sizes, per_j,
                y_label=f"{unit} per joule (median)", x_label="batch size (log scale)",
                chart_id=f"{id_prefix}{base}-per-joule",
                note=("steady throughput ÷ mean board power over the timed steps (an estimate); sizes whose timed "
                      "steps were too short to measure are left out (the table gives their whole-cell figure); × not measured"),
            )
    return charts


def comparison_charts(comparison: "Comparison") -> list[tuple[str, str]]:
    """(caption, SVG) pairs for the compare page."""
    out: list[tuple[str, str]] = []
    base = comparison.baseline_source
    others = [s for s in comparison.sources if s is not base]
    groups: dict[tuple[str, str], list] = {}
    for row in comparison.rows:
        groups.setdefault((row.workload, row.engine), []).append(row)
    for (workload, engine), rows in groups.items():
        # a batch curve's point adds its batch: "resnet18 fp32 bs512"
        cats = [" ".join((r.model, r.precision) + tuple(r.key[4:])) for r in rows]
        series = []
        for src in others:
            vals, lo, hi, notes, texts = [], [], [], [], []
            for r in rows:
                mc = r.machines[src.index]
                est = mc.vs_baseline if mc else None
                vals.append(est.ratio if est else None)
                lo.append(est.ci_low if est else None)
                hi.append(est.ci_high if est else None)
                texts.append(fmt_vs_baseline(est) if est else None)
                notes.append(f"95% CI of the ratio of means; {est.verdict}" if est else None)
            series.append(Series(f"{src.label}: {src.short_name}", vals, lo, hi, notes, texts=texts))
        if series and any(v is not None for s in series for v in s.values):
            svg = bar_chart(
                f"Throughput relative to {base.label} ({base.short_name}) — {_group_title(workload, engine)}",
                cats, series, y_label=f"throughput ÷ {base.label}'s (×)",
                note=f"median throughput ÷ {base.label}'s median; error bars: 95% CI of the ratio of means",
                reference=1.0, reference_label=f"{base.label} = 1", chart_id=f"vs-baseline-{workload}-{engine}",
                width=max(760, 40 + 34 * len(cats) * max(1, len(series))),
            )
            out.append((f"Each machine against the baseline, {_group_title(workload, engine)}", svg))
    for src in comparison.sources:
        for name, svg in run_charts(src.run_results(), suffix=f" — {src.label}: {src.short_name}", id_prefix=f"{src.label}-").items():
            if name.endswith("-throughput.svg"):
                continue  # the time chart carries the same information per machine
            out.append((f"{src.label}: {src.short_name}", svg))
    return out
