"""Why a precision is (not) faster in a cell: a verdict per cell and a speedup ladder per precision pair.

Every figure here is read from what a run measured; a piece that was not measured is a line saying
so and why, never a guess.

- **Ceilings** (:func:`ceilings`): the most a precision could buy over fp32 on this GPU: for
  compute-bound work the ratio of this GPU's calibrated matmul peaks (kit.bench.calibrate, the
  mode's ``peak_dtype`` in kit.results.precisions against fp32's); for memory-bound work the ratio
  of bytes per element (kit.facts.dtypes; a mode's tensors are in its autocast dtype, else its
  ``peak_dtype``'s format). The copy bandwidth measured beside the peaks is shown with them.
- **A cell's profile** (``CellResult.profile``, optional: the profiled window of a few steps under
  ``torch.profiler``, outside the timed repeats, kit.results.step_profile): per step, ``step_s``
  (host wall time), ``device_s`` (summed kernel time), ``idle_s`` (the gap: step_s - device_s,
  never negative), and ``device_s_by_class`` (kit.results.kernel_classes' classes). Bundles without
  it lack the rungs that need it; a window that measured no device time (a CPU) says why.
- **Verdict** (:func:`verdict`): host-bound with the GPU-idle share (the profile's idle gap), else
  compute-bound on or off the tensor cores or memory-bound (the profile's kernel classes); without a
  profile, loader-bound (data wait against compute, medians over repeats), else host-bound where
  NVML's utilisation, sampled over the whole cell, leaves the GPU idle for at least 30% of the timed
  steps however the idle time falls (:func:`idle_within_steps`); otherwise "not measured" and what
  is missing.
- **Ladder** (:func:`ladder`): peak ratio -> matmul kernels' time ratio -> device-time ratio ->
  step-time ratio -> the measured speedup (kit.results.ratios' one definition), each rung with what
  it lost against the rung above where both are measured.

Torch-free and Python 3.7 syntax (the cuda10 image reads results).
"""

from __future__ import annotations

import fnmatch
import math
from typing import Any, Dict, List, Optional

from kit.facts.dtypes import AUTOCAST_DTYPE, BYTES_PER_ELEMENT
from kit.results import kernel_classes as kc
from kit.results import ratios
from kit.results.cell_ids import key_of
from kit.results.precisions import BY_NAME, mode
from kit.results.schema import CellResult, RunResults

#: A run that waited for data this share of its training time was loader-bound (data_wait_s
#: against compute_s, median over repeats).
DATA_BOUND_FRACTION = 0.30
#: A step whose device was idle this share of it is host-bound (the profile's idle gap, or the least
#: idle share NVML's utilisation allows within the timed steps: :func:`idle_within_steps`).
HOST_BOUND_IDLE = 0.30
#: the kernel classes whose time the peak ratio bounds
MATMUL_CLASSES = (kc.TENSOR_CORE_MATMUL, kc.OTHER_MATMUL)
#: the kernel classes of memory-bound work
MEMORY_CLASSES = (kc.NORM_ELEMENTWISE, kc.CASTS_COPIES)
NO_PROFILE = "no profiled window (kernel time by class, host and device time per step)"


def _num(d: Any, key: str) -> Optional[float]:
    """A positive finite number at ``d[key]`` (a stranger's file: anything else is None)."""
    v = d.get(key) if isinstance(d, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        return None
    return float(v)


def storage_dtype(precision: str) -> str:
    """The format a mode's tensors are in (its autocast dtype, else its peak's)."""
    m = mode(precision)
    return AUTOCAST_DTYPE.get(m.autocast or "", m.peak_dtype)


def ceilings(environment: Dict[str, Any], precision: str) -> Dict[str, Any]:
    """{"compute": ratio or None, "compute_why", "memory": ratio, "memory_why"} of ``precision`` over fp32."""
    peaks = environment.get("peak_tflops_measured")
    dtype = mode(precision).peak_dtype
    out: Dict[str, Any] = {}
    p, p32 = _num(peaks, dtype), _num(peaks, "fp32")
    if p and p32:
        out["compute"] = p / p32
        out["compute_why"] = f"matmul peak {p:g} TFLOP/s ({dtype}) ÷ {p32:g} (fp32), calibrated on this GPU"
    else:
        out["compute"] = None
        errors = peaks.get("errors") if isinstance(peaks, dict) else None
        reason = (errors.get(dtype) if isinstance(errors, dict) else None) or (
            peaks.get("reason") if isinstance(peaks, dict) else None)
        out["compute_why"] = f"not measured: no calibrated {dtype} and fp32 matmul peak in this run" + (
            f" ({reason})" if reason else "")
    store = storage_dtype(precision)
    out["memory"] = BYTES_PER_ELEMENT["fp32"] / BYTES_PER_ELEMENT[store]
    out["memory_why"] = f"{BYTES_PER_ELEMENT['fp32']} bytes per fp32 element ÷ {BYTES_PER_ELEMENT[store]} per {store}"
    return out


def profile_of(cell: CellResult) -> Optional[Dict[str, Any]]:
    """The cell's profile where it holds a usable step (step_s and device_s), else None."""
    p = getattr(cell, "profile", None)
    if not isinstance(p, dict) or p.get("available") is False or not (_num(p, "step_s") and _num(p, "device_s")):
        return None
    return p


def unmeasured_window(cell: CellResult) -> Optional[str]:
    """Why the cell's profiled window measured no device time, where one ran and said so (a CPU
    device, no profiler, a failed window); None where the cell has a usable profile or none at all."""
    p = getattr(cell, "profile", None)
    if isinstance(p, dict) and p.get("available") is False:
        reason = p.get("reason")
        return reason if isinstance(reason, str) and reason else "the window measured no device time"
    return None


def _by_class(p: Dict[str, Any]) -> Dict[str, float]:
    d = p.get("device_s_by_class")
    return {k: float(v) for k, v in d.items() if k in kc.CLASSES and _num(d, k)} if isinstance(d, dict) else {}


def data_wait_fraction(cell: CellResult) -> Optional[float]:
    """Share of training time spent waiting for the next batch (medians over repeats; the kit's one
    definition: the report, the insights and the verdicts read it)."""
    wait = ratios.median_of(ratios.metric_values(cell, "data_wait_s"))
    compute = ratios.median_of(ratios.metric_values(cell, "compute_s"))
    if wait is None or compute is None or wait + compute <= 0:
        return None
    return wait / (wait + compute)


def util_pct(cell: CellResult) -> Optional[float]:
    """NVML's mean GPU utilisation over the cell, where telemetry recorded it (the kit's one reading of
    it: the report, the insights and the verdicts); older bundles named it otherwise."""
    t = cell.telemetry if isinstance(cell.telemetry, dict) and cell.telemetry.get("available", True) is not False else {}
    for key in ("util_mean_pct", "gpu_util_mean_pct", "utilization_mean_pct"):
        v = t.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def steps_share(cell: CellResult) -> Optional[float]:
    """The timed steps' share of the time NVML sampled: the repeats' steady_seconds summed ÷ the
    telemetry's duration_s (None where either is missing)."""
    steady = sum(ratios.finite_values(r.get("steady_seconds") for r in cell.repeats if isinstance(r, dict)))
    duration = _num(cell.telemetry, "duration_s")
    return steady / duration if steady > 0 and duration else None


def idle_within_steps(util: float, share: float) -> float:
    """The least share of the timed steps the GPU was idle, from NVML's mean utilisation ``util`` (%,
    the share of sampled time a kernel ran) over a cell whose timed steps were ``share`` of the
    sampled time: were every idle moment outside the steps, (1 - util) - (1 - share) of the cell
    would still be idle within them."""
    share = min(share, 1.0)
    return max(share - util / 100.0, 0.0) / share


def verdict(cell: CellResult) -> str:
    """What bound the cell, in one line, from its measured pieces (or what is missing)."""
    p = profile_of(cell)
    if p is not None:
        step, device = _num(p, "step_s"), _num(p, "device_s")
        idle = max(step - device, 0.0)
        if idle / step >= HOST_BOUND_IDLE:
            return f"host-bound: the GPU idle {idle / step:.0%} of the step (profiled: {idle * 1e3:.2f} of {step * 1e3:.2f} ms)"
        by = _by_class(p)
        if by:
            top = max(by, key=by.get)
            share = by[top] / device
            if top == kc.TENSOR_CORE_MATMUL:
                return f"compute-bound on the tensor cores: {share:.0%} of device time in tensor-core matmuls"
            if top == kc.OTHER_MATMUL:
                return f"compute-bound off the tensor cores: {share:.0%} of device time in matmuls without them"
            if top in MEMORY_CLASSES:
                mem = sum(by.get(k, 0.0) for k in MEMORY_CLASSES) / device
                return f"memory-bound: {mem:.0%} of device time in normalisation, elementwise, casts and copies"
            return f"device-bound, mostly {top}: {share:.0%} of device time"
    wait = data_wait_fraction(cell)
    util = util_pct(cell)
    if wait is not None and wait >= DATA_BOUND_FRACTION:
        return f"loader-bound: waited for data {wait:.0%} of training time" + (
            f" (NVML utilisation {util:.0f}%)" if util is not None else "")
    share = steps_share(cell)
    waited = "data wait " + ("not measured" if wait is None else format(wait, ".0%"))
    if util is not None and share is not None and idle_within_steps(util, share) >= HOST_BOUND_IDLE:
        return (f"host-bound: the GPU idle at least {idle_within_steps(util, share):.0%} of the timed steps "
                f"(NVML utilisation {util:.0f}% over the cell, the timed steps {min(share, 1.0):.0%} of it; {waited})")
    seen = [f"NVML utilisation {util:.0f}%" if util is not None else "no NVML utilisation",
            f"timed steps {share:.0%} of the cell" if share is not None else "no step time against NVML's", waited]
    why = unmeasured_window(cell)
    window = f"the profiled window measured no device time ({why})" if why else "no profiled window of the steps"
    return f"not measured: {window}, and NVML over the whole cell cannot say ({'; '.join(seen)})"


def _rung(name: str, value: Optional[float], how: str) -> Dict[str, Any]:
    return {"rung": name, "ratio": value, "how": how}


def ladder(cell: CellResult, base: CellResult, environment: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The rungs of ``cell``'s speedup over ``base`` (its fp32 cell), top to bottom, each with
    ``lost`` (what it lost against the measured rung above) where both are measured."""
    ceil = ceilings(environment, cell.precision)
    p, p32 = profile_of(cell), profile_of(base)
    rungs = [_rung("peak ratio", ceil["compute"], ceil["compute_why"] + "; memory-bound work: at most "
                   + ratios.fmt_ratio(ceil["memory"]) + " (" + ceil["memory_why"] + ")")]
    if p and p32:
        mm, mm32 = (sum(_by_class(x).get(k, 0.0) for k in MATMUL_CLASSES) for x in (p, p32))
        rungs.append(_rung("matmul kernels' time ratio", mm32 / mm if mm and mm32 else None,
                           f"fp32 {mm32 * 1e3:.2f} ms ÷ {mm * 1e3:.2f} ms per step" if mm and mm32
                           else "not measured: no matmul kernels in a profile"))
        d, d32 = _num(p, "device_s"), _num(p32, "device_s")
        rungs.append(_rung("device-time ratio", d32 / d, f"fp32 {d32 * 1e3:.2f} ms ÷ {d * 1e3:.2f} ms of kernels "
                           f"per step; other kernels {(d - mm) * 1e3:.2f} ms (fp32 {(d32 - mm32) * 1e3:.2f})"))
        s, s32 = _num(p, "step_s"), _num(p32, "step_s")
        rungs.append(_rung("step-time ratio", s32 / s, f"fp32 {s32 * 1e3:.2f} ms ÷ {s * 1e3:.2f} ms per step; "
                           f"GPU idle {max(s - d, 0) * 1e3:.2f} ms (fp32 {max(s32 - d32, 0) * 1e3:.2f})"))
    else:
        missing = "not measured: " + NO_PROFILE + " for " + " and ".join(
            x.precision for x, q in ((base, p32), (cell, p)) if q is None)
        whys = sorted({w for w in (unmeasured_window(base) if p32 is None else None,
                                   unmeasured_window(cell) if p is None else None) if w})
        if whys:
            missing += "; a window ran but measured no device time: " + "; ".join(whys)
        rungs += [_rung(n, None, missing) for n in ("matmul kernels' time ratio", "device-time ratio", "step-time ratio")]
    rungs.append(_rung("measured speedup", ratios.speedup_over_fp32(cell, base),
                       "median steady-state throughput ÷ fp32's, over repeats (the kit's " + ratios.SPEEDUP_NAME + ")"))
    above = None
    for r in rungs:
        if r["ratio"] is not None and above is not None:
            r["kept"] = r["ratio"] / above["ratio"]
            r["lost"] = (f"keeps {r['kept']:.0%} of the {above['rung']}'s {ratios.fmt_ratio(above['ratio'])}"
                         + ("" if rungs.index(r) == rungs.index(above) + 1 else "; the rungs between are not measured"))
        if r["ratio"] is not None:
            above = r
    return rungs


def explain(results: RunResults, pattern: Optional[str] = None) -> List[Dict[str, Any]]:
    """Per cell (ok, matching the shell ``pattern`` on its id): its id, verdict, and against its fp32
    cell (same workload, model, engine and settings) the ladder; the run's ceilings' inputs first."""
    cells = [c for c in results.cells if c.status == "ok" and c.precision in BY_NAME
             and (pattern is None or fnmatch.fnmatchcase(c.cell_id, pattern))]
    by_key = {key_of(c): c for c in results.cells if c.status == "ok"}
    out = []
    for c in cells:
        k = key_of(c)
        base = by_key.get(k[:2] + (ratios.BASE_PRECISION,) + k[3:])
        row: Dict[str, Any] = {"cell_id": c.cell_id, "verdict": verdict(c)}
        if c.precision != ratios.BASE_PRECISION:
            row["ladder"] = (ladder(c, base, results.environment) if base is not None
                             else [_rung("measured speedup", None, "not measured: no fp32 cell of these settings")])
        out.append(row)
    return out
