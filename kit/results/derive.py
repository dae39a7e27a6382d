"""Figures derived from a run's cells: the seed's fp32/reduced-precision
"performance ratios", the fp16/fp32 max-batch ratio, the convergence
parity verdicts, efficiency against the calibrated peaks, and the ceilings
(the most each precision could buy over fp32 on this GPU). Pure Python (host
side); stored under ``derived`` in results.json.
"""

from __future__ import annotations

from kit.results import ratios, suites
from kit.results.curve import batch_curves
from kit.results.ceilings import calibration_for, ceilings, efficiency as cell_efficiency
from kit.results.precisions import PRECISIONS, mode
from kit.results.cell_ids import curve_batch, image_size_part
from kit.results.schema import CellResult



def _median(cell: CellResult, key: str) -> float | None:
    s = cell.summary.get(key)
    return s["median"] if s else None


def _group(cells: list[CellResult], points: bool = True) -> dict[tuple, dict[str, CellResult]]:
    """(workload, model, engine, batch of a curve's point or None, image size where it is not
    CIFAR's own 32 px or None) -> {precision: cell}: the cells whose precisions are compared (a
    batch curve's at the same batch size; never cells of two image sizes, which a merged bundle
    can hold). ``points`` False: a curve's points of one precision fall together (the last one
    stands for them)."""
    groups: dict[tuple, dict[str, CellResult]] = {}
    for c in cells:
        point = curve_batch(c.params) if points else None
        size = c.params.get("image_size") if image_size_part(c.workload, c.params) else None
        groups.setdefault((c.workload, c.model, c.engine, point, size), {})[c.precision] = c
    return groups


def _at(point: int | None, size: int | None = None) -> dict:
    """A derived row's batch size, for a batch curve's point, and its image size where that is not 32 px."""
    return {**({} if point is None else {"batch_size": point}), **({} if size is None else {"image_size": size})}


def performance_ratios(cells: list[CellResult]) -> list[dict]:
    """The seed's performance ratio per reduced-precision cell, as defined in
    :mod:`kit.results.ratios`: ``speedup_over_fp32`` (median steady-state
    throughput ÷ fp32's; > 1 = faster than fp32), and, under its own name,
    ``epoch_time_ratio`` (fp32 median epoch time ÷ this one's, warm-up included).
    One row per (workload, model, engine, precision)."""
    rows = []
    for (workload, model, engine, point, size), by_prec in _group(cells).items():
        base = by_prec.get(ratios.BASE_PRECISION)
        if base is None or base.status != "ok":
            continue
        for prec, c in by_prec.items():
            if prec == ratios.BASE_PRECISION or c.status != "ok":
                continue
            rows.append({
                "workload": workload, "model": model, "engine": engine, "precision": prec, **_at(point, size),
                "speedup_over_fp32": ratios.speedup_over_fp32(c, base),
                "epoch_time_ratio": ratios.epoch_time_ratio(c, base),
            })
    return rows


def max_batch_ratios(cells: list[CellResult]) -> list[dict]:
    rows = []
    # one row per model and precision: the search's answer is the same at every point of a curve
    for (workload, model, engine, _, size), by_prec in _group([c for c in cells if c.status == "ok"], points=False).items():
        base = by_prec.get("fp32")
        b32 = base.metrics.get("max_batch") if base and base.status == "ok" else None
        if not b32:
            continue
        for prec, c in by_prec.items():
            b = c.metrics.get("max_batch") if c.status == "ok" else None
            if prec != "fp32" and b:
                rows.append({"workload": workload, "model": model, "engine": engine, "precision": prec, **_at(None, size),
                             "max_batch_fp32": b32, "max_batch": b, "ratio": b / b32})
    return rows


def quality_gap(workload: str, value: float, reference: float) -> float:
    """How far a final metric is from a reference one, as parity measures it (the suite's
    kit.results.suites.Parity): accuracy points lost (reference - value; > 0 = worse) where
    higher is better in points, otherwise the relative difference of the perplexity or held-out
    loss ((value - reference) / reference; > 0 = worse)."""
    if suites.parity_of(workload).gap == "points":
        return reference - value
    return (value - reference) / reference


def parity_rule(workload: str, tol: float) -> str:
    """The rule a parity verdict applies, in words ("accuracy within 1.0 points of fp32")."""
    rule = suites.parity_of(workload)
    noun = rule.noun or rule.metric
    if rule.gap == "points":
        return f"{noun} within {tol * 100:.1f} points of {rule.base}"
    if rule.gap == "either":
        return f"{noun} within {tol:.0%} of {rule.base}'s"
    return f"{noun} within {tol:.0%} of {rule.base}"


def within(workload: str, gap: float, tol: float) -> bool:
    """Whether a gap of :func:`quality_gap` is within the tolerance (both ways for an "either" rule)."""
    return abs(gap) <= tol if suites.parity_of(workload).gap == "either" else gap <= tol


def parity(cells: list[CellResult], tolerance: float | None = None) -> list[dict]:
    """Did each reduced-precision cell reach fp32's final metric within tolerance?

    Each suite's descriptor gives its rule (kit.results.suites.Parity): CIFAR's metric is test
    accuracy (higher is better, tolerance in absolute points); the LSTM's is test perplexity (lower
    is better, relative tolerance); the GPT suite's is the held-out loss after N steps, against
    amp-bf16's (relative, either way). Each row's ``base`` names the precision compared with where
    it is not fp32; the reference value stays under the key ``fp32`` for the seed's suites' readers.
    """
    rows = []
    for (workload, model, engine, point, size), by_prec in _group(cells).items():
        rule = suites.parity_of(workload)
        base_name = rule.base
        base = by_prec.get(base_name)
        ref = _median(base, "final_metric") if base and base.status == "ok" else None
        if ref is None:
            continue
        tol = tolerance if tolerance is not None else rule.tolerance
        for prec, c in by_prec.items():
            if prec == base_name or c.status != "ok":
                continue
            v = _median(c, "final_metric")
            if v is None:
                continue
            gap = quality_gap(workload, v, ref)
            ok = within(workload, gap, tol)
            row = {"workload": workload, "model": model, "engine": engine, "precision": prec, **_at(point, size),
                   "fp32": ref, "value": v, "gap": gap, "tolerance": tol, "rule": parity_rule(workload, tol),
                   "verdict": f"matches {base_name}" if ok else f"worse than {base_name}"}
            if base_name != "fp32":
                row = {**row, "base": base_name, "reference": ref}
                del row["fp32"]
            rows.append(row)
    return rows


def bf16_ratios(cells: list[CellResult]) -> list[dict]:
    """The suites shown against amp-bf16 too (their descriptor's ``vs_bf16``: the GPT suite): each
    precision's throughput ÷ amp-bf16's (fp8 ÷ bf16 above all), by the one definition of
    :mod:`kit.results.ratios` (median over repeats ÷ median over repeats) with amp-bf16 in the
    place of fp32."""
    rows = []
    for (workload, model, engine, point, size), by_prec in _group(cells).items():
        base = by_prec.get("amp-bf16")
        if not against_bf16(workload) or base is None or base.status != "ok":
            continue
        for prec, c in by_prec.items():
            if prec == "amp-bf16" or c.status != "ok":
                continue
            rows.append({"workload": workload, "model": model, "engine": engine, "precision": prec, **_at(point, size),
                         "base": "amp-bf16", "speedup_over_bf16": ratios.speedup_over_fp32(c, base)})
    return rows




def against_bf16(workload: str) -> bool:
    """Whether the suite's views show its cells against amp-bf16 too (its descriptor says)."""
    found = suites.find(workload)
    return bool(found and found.vs_bf16)


def efficiency(cells: list[CellResult], environment: dict | None) -> list[dict]:
    """Achieved TFLOP/s per cell as a fraction of this GPU's own measured matmul peak
    (kit.results.ceilings.efficiency), each cell against the calibration of the session that
    measured it (kit.results.ceilings.calibration_for: the run's, an earlier session's, a merged
    run's), the cells where both were measured."""
    rows = []
    for c in cells:
        e = cell_efficiency(c, calibration_for(environment, c.cell_id)["peak_tflops_measured"])
        if e:
            rows.append({"cell_id": c.cell_id, **e})
    return rows


def ceiling_rows(cells: list[CellResult], environment: dict | None) -> list[dict]:
    """The most each reduced precision of the run could buy over fp32 on this GPU
    (kit.results.ceilings.ceilings): ``compute_bound``, the calibrated peak ratio (None where a peak
    was not measured), and ``memory_bound``, the ratio of bytes per element. One row per precision,
    from the environment's own calibration (a merged bundle's: its first run's; a resumed run's: its
    last session's; each cell's own are in kit explain's ladders)."""
    present = {c.precision for c in cells if c.status == "ok"}
    env = environment if isinstance(environment, dict) else {}
    rows = []
    for name in PRECISIONS:
        if name in present and name != ratios.BASE_PRECISION:
            c = ceilings(env, name)
            rows.append({"precision": name, "peak_dtype": mode(name).peak_dtype, "compute_bound": c["compute"],
                         "memory_bound": c["memory"]})
    return rows


def derive(cells: list[CellResult], mode: str, tolerance: float | None = None, environment: dict | None = None) -> dict:
    """The figures derived from the cells; ``environment``, the run's, holds the calibrations the
    efficiency and the ceilings read (:func:`efficiency`, :func:`ceiling_rows`)."""
    out = {"performance_ratios": performance_ratios(cells), "max_batch_ratios": max_batch_ratios(cells),
           "efficiency": efficiency(cells, environment), "ceilings": ceiling_rows(cells, environment)}
    if any(against_bf16(c.workload) for c in cells):
        out["bf16_ratios"] = bf16_ratios(cells)
    if any(curve_batch(c.params) is not None for c in cells):
        out["batch_curves"] = batch_curves(cells)
    if mode == "convergence":
        out["parity"] = parity(cells, tolerance)
    return out
