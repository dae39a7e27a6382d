"""What `kit explain` prints: the ceilings of the run's GPU, then per cell its verdict and, against
its fp32 cell, the speedup ladder (kit.results.explain computes them; this module only words them).

Bundle text (cell ids, reasons, GPU names) is made inert before it is printed (kit.bundle.inert).
"""

from __future__ import annotations

import json
from typing import List, Optional

from kit.bundle.inert import inert
from kit.bundle.safe_open import Bundle
from kit.compare import measures
from kit.errors import UsageError
from kit.report.show import no_cell_matches
from kit.results.ceilings import calibrations
from kit.results.explain import DEVICE, KERNELS, MEASURED, STEP, across_engines, bound_short, explain, ladder_lines
from kit.results.cell_ids import key_of
from kit.results.ratios import finite_number, fmt_ratio, positive_at


#: the dtypes a calibration record rates (kit.bench.calibrate)
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")


def _rates(d: dict) -> str:
    """``fp32 51.3, fp16 741.8``: the finite rates of a calibration record's dtypes."""
    return ", ".join(f"{k} {finite_number(d.get(k)):g}" for k in DTYPES if finite_number(d.get(k)) is not None)


def _ceiling_lines(environment: dict) -> list:
    peaks = environment.get("peak_tflops_measured")
    bw = environment.get("memory_bandwidth_measured")
    if isinstance(peaks, dict) and peaks.get("available"):
        peak_line = f"matmul peaks (TFLOP/s, calibrated on this GPU): {_rates(peaks)}"
        typical = peaks.get("typical")
        if isinstance(typical, dict) and isinstance(peaks.get("typical_shape"), str) and _rates(typical):
            peak_line += f"; at {peaks['typical_shape']}: {_rates(typical)}"
    else:
        why = peaks.get("reason") if isinstance(peaks, dict) else "this run has no calibration record"
        peak_line = f"matmul peaks: not measured ({why})"
    gb_per_s = positive_at(bw, "gb_per_s")
    if isinstance(bw, dict) and bw.get("available") and gb_per_s:
        bw_line = f"memory bandwidth: {gb_per_s:g} GB/s ({bw.get('method', 'method not recorded')})"
    elif isinstance(bw, dict):
        bw_line = f"memory bandwidth: not measured ({bw.get('reason', 'no reason recorded')})"
    else:
        bw_line = "memory bandwidth: not measured (the run was made before the kit measured it)"
    return [inert(peak_line), inert(bw_line)] + _merged_calibration_lines(environment)


def _merged_calibration_lines(environment: dict) -> list:
    """Where a bundle carries several sessions' calibrations (a merge of runs, a run resumed on other
    machines): how many, and how far their peaks differ; each cell's ceilings and efficiency come
    from its own session's (kit.results.ceilings.calibration_for)."""
    seen, peaks = set(), []
    for c in calibrations(environment):
        p = c["peak_tflops_measured"]
        if isinstance(p, dict) and p.get("available"):
            key = json.dumps(p, sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                peaks.append(p)
    if len(peaks) < 2:
        return []
    spread = []
    for dtype in DTYPES:
        vals = [v for v in (finite_number(p.get(dtype)) for p in peaks) if v is not None and v > 0]
        if len(vals) >= 2:
            spread.append(f"{dtype} {max(vals) / min(vals) - 1:.1%}")
    sources = environment.get("merged_from")
    without = [e for e in sources if isinstance(e, dict) and not isinstance(e.get("peak_tflops_measured"), dict)] \
        if isinstance(sources, list) else []
    return [f"{len(peaks)} calibrations, one per session that measured cells (merged runs, resumed sessions): each "
            "cell's ceilings and efficiency are its own session's" + (f"; their peaks differ by up to {', '.join(spread)}"
                                                                       if spread else "")
            + (f"; {len(without)} merged run(s) kept no calibration of their own (merged by an older kit): their cells "
               "read the first run's" if without else "")]


def with_busy(results, rows: list) -> list:
    """``rows`` (kit.results.explain.explain's) with ``host_busy``: why the host was busy while the cell
    ran (kit.compare.measures.host_busy), else None; and for a cell with a ladder, ``speedup_host_busy``:
    where its speedup was drawn from a cell measured on a busy host (it, or its fp32 cell), else None."""
    ok = {key_of(c): c for c in results.cells if c.status == "ok"}
    by_id = {c.cell_id: c for c in ok.values()}
    for row in rows:
        cell = by_id.get(row["cell_id"])
        row["host_busy"] = measures.host_busy(cell) if cell is not None else None
        if "ladder" in row:
            row["speedup_host_busy"] = measures.speedup_busy(key_of(cell), ok) if cell is not None else None
    return rows


def busy_mark(row: dict) -> str:
    """`` [host busy (load average 7.9 on 2 cores)]`` after a line drawn from a busy cell, else ""."""
    why = row.get("speedup_host_busy") or row.get("host_busy")
    return f" [{measures.busy_note(why)}]" if why else ""


def explain_rows(bundle: Bundle, patterns: Optional[List[str]] = None) -> list:
    """kit.results.explain's rows for the bundle's cells (UsageError when ``patterns`` match none),
    each with its busy host marks (:func:`with_busy`)."""
    rows = with_busy(bundle.results, explain(bundle.results, patterns))
    if not rows and patterns:
        raise no_cell_matches(bundle.path.name, patterns, "measured cell")
    if not rows:
        raise UsageError(f"{bundle.path.name}: no measured (ok) cell to explain.",
                         remedy="`kit bundle show BUNDLE` lists its cells and why each was not measured.")
    return rows


#: the largest kernels the terminal names per cell (the JSON has all the profile kept)
TEXT_KERNELS = 3

#: why a rung can keep more than 100% of the rung above it (docs/explain.md, "More than 100%"): the rung
#: above is a measured ratio too, not a law, and each pair of rungs has its own way past it
OVER_100 = {
    KERNELS: ("the matmul kernels sped up more than the peaks allow: the peaks are each dtype's best on large "
              "matmuls, and at this model's shapes the fp32 kernels ran further below theirs than the reduced "
              "precision's did (or the two precisions ran other kernels)"),
    DEVICE: ("the device's busy time shrank more than the matmul kernels' time: the kernels outside the matmuls "
             "(normalisation, elementwise, casts, the optimizer) sped up more than the matmuls, or there were fewer of them"),
    STEP: ("the step shrank more than the device's busy time: the host gap (time no kernel ran) shrank too, fewer "
           "or cheaper launches and host work in this precision's step"),
    MEASURED: ("the timed repeats' speedup is more than the profiled step's ratio: the profiled window's few steps "
               "and the timed repeats differ a little (noise between them, a step the window timed otherwise)"),
}


def over_100(rung: str, kept: Optional[float]) -> str:
    """Why a rung kept more than 100% of the one above (:data:`OVER_100`), ": ..." to follow its line;
    "" where it kept 100% or less as the line prints it (or nothing was measured)."""
    if kept is None or float(f"{kept * 100:.0f}") <= 100 or rung not in OVER_100:
        return ""
    return f": more than 100%, because {OVER_100[rung]}"


def _step_lines(row: dict) -> list:
    """A cell's profiled step in its parts, its achieved TFLOP/s against the peak and its largest
    kernels, where measured."""
    out = []
    parts, step = row.get("step_parts_s"), row.get("step_s")
    if parts and step:
        timed, window = row.get("timed_step_s"), row.get("profiled_step_s")
        out.append(f"  {'timed' if timed else 'profiled'} step {step * 1e3:.3f} ms: "
                   + " + ".join(f"{inert(n)} {t * 1e3:.3f}" for n, t in parts))
        if timed and window:
            out.append(f"      kernels from the profiled window, whose own steps took {window * 1e3:.3f} ms "
                       f"({window / timed - 1:+.0%} on the timed step, which ran without the profiler)")
        device, busy = row.get("device_s"), row.get("busy_s")
        if device and busy and device > busy * 1.05:
            out.append(f"      kernels ran side by side: their times add up to {device * 1e3:.3f} ms in the "
                       f"{busy * 1e3:.3f} ms per step in which a kernel ran")
        if busy and busy > step * 1.05:
            out.append(f"      the window's kernels ran {busy * 1e3:.3f} ms a step, longer than the step: the parts do "
                       "not add up to it and no host gap is shown")
    cost = row.get("window_cost")
    if cost:
        out.append(f"      the profiled window took {cost[0]:.2f} s after the timed repeats, "
                   f"{cost[1]:.1%} of the cell's wall time")
    e = row.get("efficiency")
    if e:
        out.append(f"  achieved {e['achieved_tflops']:.3g} TFLOP/s: {e['fraction_of_peak']:.1%} of this GPU's calibrated "
                   f"{inert(e['peak_dtype'])} matmul peak ({e['peak_tflops']:g})")
    kernels = row.get("largest_kernels") or []
    if kernels:
        out.append("  largest kernels (share of device time, ms per step):")
        out += [f"      {k['share']:>4.0%} {k['s'] * 1e3:8.3f}  {inert(k['name'])}  [{inert(k['class'])}"
                + (f"; today: {inert(k['class_today'])}]" if k.get("class_today") else "]")
                for k in kernels[:TEXT_KERNELS]]
        moved = [k for k in kernels if k.get("class_today")]
        if moved:
            shown = sum(1 for k in kernels[:TEXT_KERNELS] if k.get("class_today"))
            out.append(f"      today's kernel classes (kit/results/kernel_classes.py) put {len(moved)} of its {len(kernels)} "
                       f"largest kernels ({sum(k['s'] for k in moved) * 1e3:.3f} ms per step; {shown} shown above) in "
                       "another class than the run's kit did; the step's parts above are as measured")
    return out


def explain_text(bundle: Bundle, patterns: Optional[List[str]] = None, short: bool = False) -> str:
    """The terminal text of `kit explain` (``short``: each reduced precision's cell in one line, its
    verdict and the ladder in short, then Across engines)."""
    rows = explain_rows(bundle, patterns)
    env = bundle.results.environment if isinstance(bundle.results.environment, dict) else {}
    out = [f"Why each precision is (not) faster: {inert(bundle.path.name)}", ""] + ["  " + x for x in _ceiling_lines(env)]
    if short:
        out.append("")
        out += [f"{inert(row['cell_id'])} ({inert(row['verdict_short'])}): {inert(row['answer'])}{inert(busy_mark(row))}"
                for row in rows if row.get("answer")]
    for row in [] if short else rows:
        out += ["", inert(row["cell_id"]), "  verdict: " + inert(row["verdict"])]
        if row.get("host_busy"):
            out.append(f"  {measures.BUSY}: {inert(row['host_busy'])}: {measures.BUSY_EFFECT}")
        elif row.get("speedup_host_busy"):
            out.append(f"  its speedup is drawn from a cell measured while the host was busy "
                       f"({inert(row['speedup_host_busy'])}): their {measures.BUSY_WHY}")
        if row.get("answer"):
            out.append("  in short: " + inert(row["answer"]))
        out += _step_lines(row)
        kept = {r["rung"]: r.get("kept") for r in row.get("ladder", [])}
        for line in ladder_lines(row.get("ladder", [])):
            ratio = line["ratio"]
            out.append(f"  {line['name']}: {fmt_ratio(ratio)}" if ratio is not None else f"  {line['name']}:")
            out.append(f"      {inert(line['how'])}")
            if line["lost"]:
                out.append(f"      {line['lost']}{over_100(line['name'], kept.get(line['name']))}")
    across = across_engines(bundle.results, rows)
    if across:
        out += ["", "Across engines (each engine's speedup over its own fp32 cell, and what bound the cell):"]
        for g in across:
            busy = {r["cell_id"]: busy_mark(r) for r in rows}
            out.append(f"  {inert(g['cells'])}: " + " · ".join(
                f"{inert(m['engine'])} {fmt_ratio(m['speedup']) if m['speedup'] is not None else 'not measured'} "
                f"({inert(bound_short(m['verdict_short']))}){inert(busy.get(m['cell_id'], ''))}" for m in g["engines"]))
    return "\n".join(out) + "\n"


def explain_json(bundle: Bundle, patterns: Optional[List[str]] = None) -> str:
    """The same rows as JSON: {"bundle", "peak_tflops_measured", "memory_bandwidth_measured", "cells": [...],
    "across_engines": [...]}."""
    env = bundle.results.environment if isinstance(bundle.results.environment, dict) else {}
    rows = explain_rows(bundle, patterns)
    doc = {"bundle": bundle.path.name, "peak_tflops_measured": env.get("peak_tflops_measured"),
           "memory_bandwidth_measured": env.get("memory_bandwidth_measured"), "cells": rows,
           "across_engines": across_engines(bundle.results, rows)}
    return json.dumps(_json_safe(doc), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _json_safe(x):
    """``x`` with every float that is no finite number (a stranger's bundle divided down to one) as
    null, and integers too large for a float as null: standard JSON, which `--json` promises."""
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return x if finite_number(x) is not None else None
    return x
