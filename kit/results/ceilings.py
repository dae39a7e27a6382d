"""The ceilings of this GPU for a cell: the most a precision could buy over fp32 here, the cell's
achieved rate against the calibrated peak, and which session's calibration holds for a cell.

- **Ceilings** (:func:`ceilings`): for compute-bound work the ratio of this GPU's calibrated matmul
  peaks (kit.bench.calibrate, the mode's ``peak_dtype`` in kit.results.precisions against fp32's); for
  memory-bound work the ratio of bytes per element (kit.facts.dtypes; a mode's tensors are in its
  autocast dtype, else its ``peak_dtype``'s format).
- **Efficiency** (:func:`efficiency`): the achieved TFLOP/s against the peak of the precision's dtype.
- **Which calibration** (:func:`calibration_for`): every session of a run calibrates (a resumed run
  may continue on another machine) and a merged bundle keeps each run's: a cell is held to the
  calibration of the session that measured it.

kit.results.explain reads these for its ladders; kit.results.derive for ``derived.efficiency`` and
``derived.ceilings``. Torch-free and Python 3.7 syntax (the cuda10 image reads results).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from kit.facts.dtypes import AUTOCAST_DTYPE, BYTES_PER_ELEMENT
from kit.results.precisions import BY_NAME, mode
from kit.results.ratios import finite_number
from kit.results.ratios import positive_at as _num
from kit.results.schema import CellResult


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


#: the calibration records of a run's environment (kit.bench.calibrate writes them)
CALIBRATION = ("peak_tflops_measured", "memory_bandwidth_measured")


def _records(v: Any) -> List[Dict[str, Any]]:
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _measured(record: Dict[str, Any], cell_id: str) -> bool:
    """Whether a session or merged run's record lists ``cell_id`` among its cells and carries its own
    calibration."""
    cells = record.get("cells")
    return isinstance(cells, list) and cell_id in cells and isinstance(record.get(CALIBRATION[0]), dict)


def _from(record: Dict[str, Any], source: Optional[str]) -> Dict[str, Any]:
    return {**{k: record.get(k) for k in CALIBRATION}, "source": source}


def _session_of(record: Dict[str, Any], cell_id: str, name: str) -> Optional[Dict[str, Any]]:
    """The calibration of the earlier session of a resumed run (``record``'s ``earlier_sessions``)
    that measured ``cell_id``, if it carries one."""
    for s in _records(record.get("earlier_sessions")):
        if _measured(s, cell_id):
            when = s.get("collected_at")
            return _from(s, f"{name}, its session of {when}" if isinstance(when, str) else f"{name}, an earlier session")
    return None


def calibration_for(environment: Any, cell_id: str) -> Dict[str, Any]:
    """The calibration that holds for one cell: that of the session that measured it. A resumed run
    calibrates again in each session (a session may run on another machine), and its earlier
    sessions keep their own (``earlier_sessions``, with the cells each measured); a merged bundle
    keeps each run's, and its earlier sessions', in ``merged_from`` (kit.bundle.merge). ``source``
    names where it came from (None: the environment's own, the last session of the run)."""
    env = environment if isinstance(environment, dict) else {}
    for e in _records(env.get("merged_from")):
        cells = e.get("cells")
        if isinstance(cells, list) and cell_id in cells:
            name = e.get("bundle") if isinstance(e.get("bundle"), str) else "a merged run"
            found = _session_of(e, cell_id, name) or (_from(e, name) if _measured(e, cell_id) else None)
            if found:
                return found
    return _session_of(env, cell_id, "this run") or _from(env, None)


def calibrations(environment: Any) -> List[Dict[str, Any]]:
    """Every calibration a (merged, resumed) bundle carries, each once, as :func:`calibration_for`
    returns them: the merged runs' and their earlier sessions', the run's earlier sessions', its own."""
    env = environment if isinstance(environment, dict) else {}
    found = []
    for e in _records(env.get("merged_from")):
        name = e.get("bundle") if isinstance(e.get("bundle"), str) else "a merged run"
        found += [_from(s, name) for s in _records(e.get("earlier_sessions")) if isinstance(s.get(CALIBRATION[0]), dict)]
        found += [_from(e, name)] if isinstance(e.get(CALIBRATION[0]), dict) else []
    found += [_from(s, "this run") for s in _records(env.get("earlier_sessions")) if isinstance(s.get(CALIBRATION[0]), dict)]
    return found + [_from(env, None)]


def efficiency(cell: CellResult, peaks: Any) -> Optional[Dict[str, Any]]:
    """The cell's achieved TFLOP/s (the FLOPs PyTorch counts in a training step × the measured
    throughput, median over repeats) against this GPU's calibrated matmul peak for the precision's
    ``peak_dtype``: {"achieved_tflops", "peak_tflops", "peak_dtype", "fraction_of_peak"}; None where
    either was not measured (the kit's one reading of it: the report and `kit explain`)."""
    if cell.status != "ok" or cell.precision not in BY_NAME or not isinstance(peaks, dict) or not peaks.get("available"):
        return None
    s = cell.summary.get("achieved_tflops") if isinstance(cell.summary, dict) else None
    achieved = _num(s, "median")
    dtype = mode(cell.precision).peak_dtype
    peak = _num(peaks, dtype)
    if not achieved or not peak:
        return None
    fraction = finite_number(achieved / peak)  # (a stranger's 1e308 over 1e-300 is no number)
    if fraction is None:
        return None
    return {"achieved_tflops": achieved, "peak_tflops": peak, "peak_dtype": dtype, "fraction_of_peak": fraction}
