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
- ``throughput``: images or tokens per second per model and precision.

A comparison adds, per workload x engine, each machine's throughput relative
to the baseline machine with its 95% CI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kit.compare import measures
from kit.compare.fmt import fmt_speedup_estimate, fmt_vs_baseline
from kit.report.svg import PALETTE, Series, bar_chart
from kit.results.schema import RunResults

if TYPE_CHECKING:
    from kit.compare.engine import Comparison

MIN_MAX_NOTE = "error bars: min–max of repeats; ▲ a repeat beyond the axis (e.g. a warm-up), with its value"


def _groups(results: RunResults) -> dict[tuple[str, str], dict]:
    """(workload, engine) -> {"models": [...], "precisions": [...], "cells": {(model, precision): cell}}."""
    out: dict[tuple[str, str], dict] = {}
    for key, cell in sorted(measures.ok_cells(results).items(), key=lambda kv: measures.order_key(kv[0])):
        w, m, p, e = key
        g = out.setdefault((w, e), {"models": [], "precisions": [], "cells": {}, "unit": measures.unit_of(cell)})
        if m not in g["models"]:
            g["models"].append(m)
        if p not in g["precisions"]:
            g["precisions"].append(p)
        g["cells"][(m, p)] = cell
    for g in out.values():
        g["precisions"].sort(key=lambda p: measures.PRECISION_ORDER.index(p) if p in measures.PRECISION_ORDER else 99)
    return out


def precision_colour(precision: str) -> str | None:
    """The same colour for a precision in every chart."""
    if precision in measures.PRECISION_ORDER:
        return PALETTE[measures.PRECISION_ORDER.index(precision) % len(PALETTE)]
    return None


def _group_title(workload: str, engine: str) -> str:
    return f"CIFAR-100 ResNets, {engine} engine" if workload == "cifar" else f"Wikitext-2 LSTM ({engine})"


def run_charts(results: RunResults, suffix: str = "", id_prefix: str = "") -> dict[str, str]:
    """Chart file name (``charts/...svg``) -> SVG text, for one run."""
    charts: dict[str, str] = {}
    ratios = measures.speedup_vs_fp32(results)
    for (workload, engine), g in _groups(results).items():
        base = f"{workload}-{engine}"
        title = _group_title(workload, engine) + suffix
        models, precisions, cells = g["models"], g["precisions"], g["cells"]

        time_series = []
        thr_series = []
        for p in precisions:
            t_vals, t_lo, t_hi, r_vals, r_lo, r_hi = [], [], [], [], [], []
            for m in models:
                cell = cells.get((m, p))
                ts = measures.sample(cell, measures.EPOCH_S) if cell else None
                rs = measures.sample(cell, measures.THROUGHPUT) if cell else None
                t_vals.append(ts.median if ts else None)
                t_lo.append(ts.min if ts and ts.n > 1 else None)
                t_hi.append(ts.max if ts and ts.n > 1 else None)
                r_vals.append(rs.median if rs else None)
                r_lo.append(rs.min if rs and rs.n > 1 else None)
                r_hi.append(rs.max if rs and rs.n > 1 else None)
            time_series.append(Series(p, t_vals, t_lo, t_hi, colour=precision_colour(p)))
            thr_series.append(Series(p, r_vals, r_lo, r_hi, colour=precision_colour(p)))
        if any(v is not None for s in time_series for v in s.values):
            charts[f"charts/{base}-epoch-time.svg"] = bar_chart(
                f"Time per epoch — {title}", models, time_series,
                y_label="seconds per epoch (median)", x_label="model",
                chart_id=f"{id_prefix}{base}-epoch-time", scale_to_values=True, note=MIN_MAX_NOTE,
            )
        if any(v is not None for s in thr_series for v in s.values):
            charts[f"charts/{base}-throughput.svg"] = bar_chart(
                f"Throughput — {title}", models, thr_series,
                y_label=f"{g['unit']} per second (median)", x_label="model",
                chart_id=f"{id_prefix}{base}-throughput", scale_to_values=True, note=MIN_MAX_NOTE,
            )
        ratio_series = []
        for p in precisions:
            if p == measures.BASE_PRECISION:
                continue
            vals, lo, hi, notes, texts = [], [], [], [], []
            for m in models:
                est = ratios.get((workload, m, p, engine))
                vals.append(est.ratio if est else None)
                lo.append(est.ci_low if est else None)
                hi.append(est.ci_high if est else None)
                texts.append(fmt_speedup_estimate(est) if est else None)
                notes.append(f"95% CI of the ratio of means; {est.verdict}" if est else None)
            if any(v is not None for v in vals):
                ratio_series.append(Series(p, vals, lo, hi, notes, colour=precision_colour(p), texts=texts))
        if ratio_series:
            charts[f"charts/{base}-speedup.svg"] = bar_chart(
                f"Speedup over fp32 — {title}", models, ratio_series,
                y_label="speedup over fp32 (×)", x_label="model",
                note="median throughput ÷ fp32's median; error bars: 95% CI of the ratio of means; ▲ beyond the axis",
                reference=1.0, reference_label="fp32 = 1", chart_id=f"{id_prefix}{base}-speedup",
                scale_to_values=True,
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
        cats = [f"{r.model} {r.precision}" if workload == "cifar" else f"{r.model} {r.precision}" for r in rows]
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
        for name, svg in run_charts(src.results, suffix=f" — {src.label}: {src.short_name}", id_prefix=f"{src.label}-").items():
            if name.endswith("-throughput.svg"):
                continue  # the time chart carries the same information per machine
            out.append((f"{src.label}: {src.short_name}", svg))
    return out
