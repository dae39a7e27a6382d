"""What one cell measured, read as samples over its repeats.

Reports and comparisons read cells only through these functions, so a cell
from an older kit (summary only, no per-repeat list) or with missing fields
degrades to "no data" instead of an exception.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from kit.compare.fmt import CV_NAMES
from kit.compare.stats import RatioEstimate, Sample, ratio_estimates
from kit.env.hostload import BUSY_LOAD_PER_CORE, BUSY_STEAL_PCT, busy_reason
from kit.results import ratios
from kit.results.cell_ids import key_of
from kit.results.ratios import BASE_PRECISION, EPOCH_S, THROUGHPUT
from kit.results.stats import HIGH_CV
from kit.results.schema import CellResult, RunResults
from kit.results import suites
from kit.results.precisions import PRECISIONS

ENERGY = "energy_j_per_epoch"
#: a convergence cell's quality at the end (test accuracy, perplexity, held-out loss: parity_metric)
FINAL_METRIC = "final_metric"



def sample(cell: CellResult, metric: str) -> Sample | None:
    """The metric over the cell's repeats, or from its summary when the repeats lack it."""
    values = [r.get(metric) for r in (cell.repeats or []) if isinstance(r, dict)]
    s = Sample.of(values) if values else None
    if s is None:
        s = Sample.from_stats((cell.summary or {}).get(metric))
    return s


class SampleCache:
    """Each cell's :func:`sample` and :func:`kit.results.ratios.metric_values` per metric, computed
    once: a comparison reads each cell's throughput for its own figures, its speedup over fp32, its
    ratio to the baseline (the baseline's cell once per machine) and its CV flags. The same values as
    calling the functions each time; the cache holds its cells (so their ids stay theirs) and is meant
    to live as long as one comparison is being built."""

    def __init__(self) -> None:
        self._samples: dict = {}
        self._values: dict = {}
        self._keys: dict = {}

    def key(self, cell: CellResult) -> tuple[str, ...]:
        """:func:`kit.results.cell_ids.key_of`, once per cell."""
        hit = self._keys.get(id(cell))
        if hit is None:
            hit = self._keys[id(cell)] = (cell, key_of(cell))
        return hit[1]

    def sample(self, cell: CellResult, metric: str) -> Sample | None:
        key = (id(cell), metric)
        hit = self._samples.get(key)
        if hit is None:
            hit = self._samples[key] = (cell, sample(cell, metric))
        return hit[1]

    def values(self, cell: CellResult, metric: str) -> list[float]:
        key = (id(cell), metric)
        hit = self._values.get(key)
        if hit is None:
            hit = self._values[key] = (cell, ratios.metric_values(cell, metric))
        return hit[1]


def _sampler(cache: SampleCache | None):
    return cache.sample if cache is not None else sample


def telemetry(cell: CellResult) -> dict | None:
    """The NVML summary when it was recorded, else None."""
    t = cell.telemetry
    if isinstance(t, dict) and t.get("available", True) is not False:
        return t
    return None


def telemetry_reason(cell: CellResult) -> str | None:
    t = cell.telemetry
    if isinstance(t, dict) and t.get("available") is False:
        return str(t.get("reason") or "not recorded")
    if t is None:
        return "not recorded"
    return None


def throttled(cell: CellResult) -> bool:
    t = telemetry(cell) or {}
    value = t.get("throttled")
    if isinstance(value, (list, tuple, dict)):
        return bool(value)
    return bool(value)


def energy_per_epoch(cell: CellResult) -> float | None:
    """Joules per epoch where the run measured energy: the cell's own figure,
    kit.env.telemetry_summary.attach_energy's (the median over every epoch of every repeat, at the
    mean power of the timed steps where that was measured, else of the whole cell; its
    ``energy_basis`` says which). A cell without it (written by another tool) gives the median of its
    repeats' figures, a number or a list of one per epoch each. None where neither was recorded: never
    the cell's whole energy over its epochs, which counts its warm-up, compilation and batch search."""
    t = telemetry(cell) or {}
    if _joules(t.get(ENERGY)):
        return float(t[ENERGY])
    values: list = []
    for rep in cell.repeats or []:
        x = rep.get(ENERGY) if isinstance(rep, dict) else None
        values.extend(v for v in (x if isinstance(x, list) else [x]) if _joules(v))
    s = Sample.of(values) or Sample.from_stats((cell.summary or {}).get(ENERGY))
    return float(s.median) if s and _joules(s.median) else None


def _joules(v) -> bool:
    """Whether ``v`` is an energy a cell can have measured: a finite number above zero."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def high_cvs(cell: CellResult, cache: SampleCache | None = None) -> dict[str, float]:
    """Each CV (by its name, "epoch-time CV" / "throughput CV") that is >= 10% (pyperf's threshold).

    Epoch times are compared only between repeats that did the same work: where the repeats
    warmed up for different numbers of steps (the GPT suite's first repeat warms up and
    compiles for the preset's warm-up steps, the later ones for one step), their epoch times
    differ by design, not by noise, and only the steady-state throughput's CV speaks."""
    out: dict[str, float] = {}
    warmups = {r.get("warmup_steps") for r in (cell.repeats or []) if isinstance(r, dict)}
    like_for_like = len(warmups - {None}) <= 1
    get = _sampler(cache)
    for metric in (EPOCH_S, THROUGHPUT) if like_for_like else (THROUGHPUT,):
        s = get(cell, metric)
        if s and s.n > 1 and s.cv >= HIGH_CV:
            out[CV_NAMES[metric]] = s.cv
    return out


def high_cv_flags(cell: CellResult, cache: SampleCache | None = None) -> list[str]:
    """``["high epoch-time CV 157%"]``: one flag per CV at or over the threshold, each named."""
    return [f"high {name} {cv:.0%}" for name, cv in high_cvs(cell, cache).items()]


def fmt_scaling(efficiency: float) -> str:
    """A scaling efficiency as every view prints it (``93.1%``)."""
    return f"{efficiency:.1%}"


def fmt_allreduce_ms(seconds: float) -> str:
    """An all-reduce time per step, in milliseconds, as every view prints it (``1.23``)."""
    return f"{seconds * 1e3:.3g}"


def data_parallel_note(cell: CellResult) -> str | None:
    """What a data-parallel cell adds to its row, from what it recorded (kit.runner.isolate: the scaling
    efficiency is computed there, once): ``"2 ranks (nccl, nvlink), scaling 93.1%, all-reduce 1.23 ms a
    step"``; None for a plain cell."""
    dp = (cell.metrics or {}).get("data_parallel") if isinstance(cell.metrics, dict) else None
    if not isinstance(dp, dict) or not isinstance(dp.get("world_size"), int):
        return None
    how = [str(dp["backend"])] if dp.get("backend") else []
    link = (dp.get("interconnect") or {}).get("kind") if isinstance(dp.get("interconnect"), dict) else None
    if link and link not in ("none", "unknown"):
        how.append(str(link))
    parts = [f"{dp['world_size']} rank{'s' if dp['world_size'] != 1 else ''}" + (f" ({', '.join(how)})" if how else "")]
    scaling = dp.get("scaling") if isinstance(dp.get("scaling"), dict) else {}
    eff = scaling.get("efficiency")
    if isinstance(eff, (int, float)) and not isinstance(eff, bool):
        parts.append(f"scaling {fmt_scaling(eff)}")
    elif scaling:
        parts.append("scaling not measured")
    comm = dp.get("allreduce") if isinstance(dp.get("allreduce"), dict) else {}
    sec = comm.get("seconds_per_step")
    if isinstance(sec, (int, float)) and not isinstance(sec, bool):
        parts.append(f"all-reduce {fmt_allreduce_ms(sec)} ms a step")
    if dp.get("ranks_in_step") is False:
        parts.append("ranks out of step")
    return ", ".join(parts)


def engine_label(workload: str, engine: str) -> str:
    """An engine's name with what it is where its suite says (the LSTM's two), else the name itself."""
    return suites.engine_label(workload, engine)


def parity_metric(workload: str) -> str:
    """What a workload's convergence cells end on (their ``final_metric``; its suite's parity rule)."""
    return suites.parity_of(workload).metric


def parity_rows(results: RunResults) -> list[dict]:
    """A convergence run's parity verdicts, in the cells' order; none in throughput mode. They are
    computed in one place, kit.results.derive.parity (what results.json stores under derived.parity),
    from the cells and the run's tolerance."""
    if results.config.mode != "convergence":
        return []
    from kit.results.derive import parity

    rows = parity(list(results.cells), results.config.tolerance)
    return sorted(rows, key=lambda r: order_key((r["workload"], r["model"], r["precision"], r["engine"])))


def parity_key(row: dict) -> tuple[str, ...]:
    """The cell key (kit.results.cell_ids.cell_key) of the cell a parity row judges."""
    size = (f"{row['image_size']}px",) if row.get("image_size") is not None else ()
    point = (f"bs{row['batch_size']}",) if row.get("batch_size") is not None else ()
    return (row["workload"], row["model"], row["precision"], row["engine"]) + size + point


def fmt_quality_gap(workload: str, gap: float) -> str:
    """A gap of kit.results.derive.quality_gap as every view prints it: accuracy points for CIFAR
    (``-0.31 points``, the accuracy's change), a relative difference otherwise (``+0.18%``)."""
    if suites.parity_of(workload).gap == "points":
        return f"{-gap * 100:+.2f} points"
    return f"{gap:+.2%}"


def fmt_parity_gap(row: dict) -> str:
    """The difference from the base precision as every view prints it (:func:`fmt_quality_gap`)."""
    return fmt_quality_gap(row["workload"], row["gap"])


def fmt_parity(row: dict) -> str:
    """One parity row in words: ``held-out loss 6.2447 vs amp-bf16's 6.2572 (-0.20%): matches amp-bf16
    (held-out loss within 1% of amp-bf16's)``."""
    base = row.get("base", "fp32")
    ref = row.get("reference", row.get("fp32"))
    name = parity_metric(row["workload"])
    return f"{name} {row['value']:.5g} vs {base}'s {ref:.5g} ({fmt_parity_gap(row)}): {row['verdict']} ({row['rule']})"


def _model_rank(model: str) -> int:
    """A model's place among every suite's models (kit.results.suites.model_order); unknown ones last."""
    order = suites.model_order()
    return order.index(model) if model in order else len(order)


def order_key(cell: Any) -> tuple:
    """Sort order of cells (or their keys, kit.results.cell_ids.cell_key): workload, engine, image size
    (32 px first), model, precision, then a batch curve's points by batch size."""
    key = cell if isinstance(cell, tuple) else key_of(cell)
    w, m, p, e = key[:4]
    point = next((x for x in key[4:] if x.startswith("bs")), "")
    size = next((x for x in key[4:] if x.endswith("px")), "")
    return (
        w,
        e,
        int(size[:-2]) if size[:-2].isdigit() else 0,
        _model_rank(m),
        m,
        PRECISIONS.index(p) if p in PRECISIONS else len(PRECISIONS),  # the registry's order
        p,
        int(point[2:]) if point[2:].isdigit() else -1,
    )


def ok_cells(results: RunResults, cache: SampleCache | None = None) -> dict[tuple[str, ...], CellResult]:
    """The ok cells by key (kit.results.cell_ids.cell_key: a batch curve's point has a fifth part)."""
    key = cache.key if cache is not None else key_of
    return {key(c): c for c in results.cells if c.status == "ok"}


#: the mark of a cell measured while its host was busy, in every view that shows its figures
BUSY = "host busy"
#: what a busy host does to a cell's figures, said where a view first marks one
BUSY_WHEN = (f"measured while the host was busy (load average past {BUSY_LOAD_PER_CORE:g}x its cores, or CPU "
             f"steal over {BUSY_STEAL_PCT:g}%)")
#: what that does to the figures (after "its" or "their")
BUSY_WHY = "times include waiting for the CPU, so a figure may be the load, not the machine; measure again on a quiet host"
BUSY_EFFECT = f"{BUSY_WHEN}: its {BUSY_WHY}"


def host_busy(cell: CellResult) -> str | None:
    """Why the host was busy while the cell ran ("load average 7.2 on 2 cores"), from its host record
    (kit.env.hostload.busy_reason: the thresholds applied to the recorded numbers), else None."""
    return busy_reason(getattr(cell, "host", None))


def busy_note(reason: str) -> str:
    """``host busy (load average 7.2 on 2 cores)``: a busy cell's mark, with why."""
    return f"{BUSY} ({reason})"


def speedup_busy(key: tuple[str, ...], cells: dict, base_precision: str = BASE_PRECISION) -> str | None:
    """Where the speedup of the cell ``key`` over its base cell (of ``cells``, by key) was drawn from a
    cell measured on a busy host, why ("load average 7.9 on 2 cores", "fp32: CPU steal 12%" for the
    base); None where neither was."""
    w, m, p, e = key[:4]
    said = []
    for which, k in (("", key), (f"{base_precision}: ", (w, m, base_precision, e) + tuple(key[4:]))):
        cell = cells.get(k)
        why = host_busy(cell) if cell is not None else None
        if why:
            said.append(which + why)
    return "; ".join(said) or None


def speedup_vs_fp32(results: RunResults, cache: SampleCache | None = None) -> dict[tuple[str, ...], RatioEstimate]:
    """Per ok cell that is not fp32: the speedup over fp32 (the 2019 article's
    "performance ratio", defined in :mod:`kit.results.ratios`: median
    throughput ÷ fp32's median throughput), with the CI and verdict of
    :func:`kit.compare.stats.ratio_estimates`."""
    return speedup_vs(results, BASE_PRECISION, cache)


#: The GPT suite's second base: fp8 (and fp16) against bf16, today's mixed precision
#: (kit.results.derive.bf16_ratios computes the same ratio of medians for the bundle).
BF16_BASE = "amp-bf16"


def speedup_vs(results: RunResults, base_precision: str,
               cache: SampleCache | None = None) -> dict[tuple[str, ...], RatioEstimate]:
    """Per ok cell of another precision: its throughput ÷ ``base_precision``'s in the same model,
    engine and point (kit.results.ratios' one ratio of medians), with the CI and verdict."""
    cells = ok_cells(results, cache)
    todo: list = []  # (key, (num, den, point)): estimated all at once (kit.compare.stats.ratio_estimates)
    for key, cell in cells.items():
        w, m, p, e = key[:4]
        base = cells.get((w, m, base_precision, e) + key[4:])  # a curve's point: the base at its batch size
        if p == base_precision or base is None:
            continue
        get = _sampler(cache)
        num, den = get(cell, THROUGHPUT), get(base, THROUGHPUT)
        point = (ratios.speedup_over_fp32(cell, base) if cache is None  # the same ratio of medians:
                 else ratios.ratio_of_medians(cache.values(cell, THROUGHPUT), cache.values(base, THROUGHPUT)))
        if num and den and point is not None:
            todo.append((key, (num, den, point)))
    estimates = ratio_estimates([pair for _, pair in todo])
    return {key: est for (key, _), est in zip(todo, estimates) if est}


def unit_of(cell: CellResult) -> str:
    unit = cell.throughput_unit or "items"
    return unit


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
