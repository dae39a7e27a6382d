"""Plain-language lines: what the run shows, one line per finding, each
listing the cells it holds for (grouped by model and engine).

A line is written only where the data supports it: a speedup claim needs the
fp32 cell and the reduced-precision cell; "limited by the data loader" needs
the measured data-wait and compute times; "the GPU was busy N%" needs NVML
utilisation. Nothing is inferred from missing data.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.compare import measures
from kit.results import explain
from kit.compare.stats import ONE_REPEAT
from kit.results import suites
from kit.results.ratios import BASE_PRECISION, SPEEDUP_NAME, fmt_speedup
from kit.results.cell_ids import key_of
# the threshold kit explain's verdicts use too
from kit.results.schema import RunResults

#: Below this speedup over fp32 a precision "gave no speedup" (the
#: 2019 article's ResNet-101 gain was 1.13-1.18x; under 1.1 is within what
#: launch overheads and loaders usually eat).
NO_SPEEDUP_BELOW = 1.10
#: Mean NVML utilisation under this is worth saying out loud.
LOW_UTIL_PCT = 70.0


@dataclass(frozen=True)
class Insight:
    subject: str  # the finding: "Slower than fp32"
    text: str  # the cells it holds for, grouped by model and engine


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def _subject(key: tuple[str, ...]) -> str:
    workload, model, _precision, engine = key[:4]
    found = suites.find(workload)
    subject = found.subject if found else workload
    return f"{subject} {model} · {engine}".lstrip()


def _without_precision(key: tuple[str, ...]) -> tuple[str, ...]:
    """A cell's key with its precision left out: the cells one fp32 cell is the base of."""
    return (key[0], key[1], key[3]) + tuple(key[4:])


def _curve_point(key: tuple[str, ...]) -> tuple[str, int] | None:
    """(series, batch) for a batch curve's point (its key ends in ``bsN``): the precision with any image
    size, and the batch size; None for any other cell."""
    extra = tuple(key[4:])
    if extra and extra[-1].startswith("bs") and extra[-1][2:].isdigit():
        return " ".join((key[2],) + extra[:-1]), int(extra[-1][2:])
    return None


@dataclass
class _Series:
    """A batch curve's points in one finding, shown as one range: "amp-fp16 bs256–8192 2.89×–7.32×"."""

    name: str
    points: list  # (batch, speedup, note)

    def __str__(self) -> str:
        batches = [b for b, _, _ in self.points]
        ratios = sorted(r for _, r, _ in self.points)
        notes = [n for _, _, n in self.points if n]
        if len(self.points) == 1:
            text = f"{self.name} bs{batches[0]} {fmt_speedup(ratios[0])}"
            return text + (f" ({notes[0]})" if notes else "")
        text = f"{self.name} bs{min(batches)}–{max(batches)} {fmt_speedup(ratios[0])}–{fmt_speedup(ratios[-1])}"
        return text + (f" ({len(notes)} of {len(self.points)} sizes {notes[0]})" if notes else "")


class _Finding:
    """One finding and the cells it holds for, in the order they were added; a batch curve's points
    with a speedup go in as one range per curve (:class:`_Series`)."""

    def __init__(self, subject: str, explanation: str = "") -> None:
        self.subject, self.explanation = subject, explanation
        self.by_group: dict[str, list] = {}

    def add(self, key: tuple[str, ...], detail: str, speedup: tuple[float, str] | None = None) -> None:
        items = self.by_group.setdefault(_subject(key), [])
        point = _curve_point(key) if speedup is not None else None
        if point is None:
            items.append(detail)
            return
        name, batch = point
        series = next((i for i in items if isinstance(i, _Series) and i.name == name), None)
        if series is None:
            items.append(_Series(name, []))
            series = items[-1]
        series.points.append((batch,) + speedup)

    def insight(self) -> Insight | None:
        if not self.by_group:
            return None
        cells = "; ".join(f"{group}: {', '.join(str(i) for i in items)}" for group, items in self.by_group.items())
        return Insight(self.subject, (f"{self.explanation}: " if self.explanation else "") + cells + ".")


def run_insights(results: RunResults, synthetic: bool) -> list[Insight]:
    """One line per finding (faster, no speedup, slower, loader-bound, GPU idle,
    throttled, noisy), each listing the cells it holds for."""
    cells = measures.ok_cells(results)
    speedups = measures.speedup_vs_fp32(results)
    faster = _Finding(f"Faster than fp32 ({SPEEDUP_NAME} ≥ {fmt_speedup(NO_SPEEDUP_BELOW)})")
    flat = _Finding(f"No speedup ({SPEEDUP_NAME} {fmt_speedup(1.0)}–{fmt_speedup(NO_SPEEDUP_BELOW)})")
    slower = _Finding(f"Slower than fp32 ({SPEEDUP_NAME} under {fmt_speedup(1.0)})")
    loader = _Finding("Limited by the data loader",
                      f"waiting for data {_pct(explain.DATA_BOUND_FRACTION)} or more of the step time")
    idle = _Finding(f"GPU busy under {LOW_UTIL_PCT:.0f}% of the time",
                    "Python, kernel launches or the input pipeline bound the run, not GPU math")
    not_loader = _Finding("The data loader was not the limit", "waiting for data")
    throttled = _Finding("The GPU throttled (power or thermal)", "those times are pessimistic")
    noisy = _Finding("Repeats varied by 10% or more", "treat those numbers with care")
    no_base = _Finding("No fp32 cell to compare against")
    busy = _Finding("Measured while the host was busy", "their times include waiting for the CPU, so a figure "
                    "(and a speedup drawn from it) may be the load, not the machine; measure again on a quiet host")

    # why an fp32 cell has no result (skipped or failed, e.g. "out of memory at batch 2048"), by its group
    fp32_reasons = {_without_precision(key_of(c)): c.reason or c.status
                    for c in results.cells if c.status != "ok" and c.precision == BASE_PRECISION}
    keys = sorted(cells, key=measures.order_key)
    groups_with_fp32 = {_without_precision(k) for k in keys if k[2] == BASE_PRECISION}
    for key in keys:
        cell, precision = cells[key], key[2]
        if len(key) > 4:  # at another image size, or a batch curve's point: say which
            precision = " ".join((precision,) + tuple(key[4:]))
        est = speedups.get(key)
        wait, util = explain.data_wait_fraction(cell), explain.util_pct(cell)
        lacks_speedup = est is not None and est.ratio < NO_SPEEDUP_BELOW
        own_busy = measures.host_busy(cell)
        if own_busy:
            busy.add(key, f"{precision} ({own_busy})")
        mark = f" ({measures.BUSY})" if own_busy else ""
        if est is not None:
            note = "" if est.significant else "1 repeat" if est.verdict == ONE_REPEAT else est.verdict
            drawn = measures.speedup_busy(key, cells)
            if drawn:  # a speedup drawn from a busy cell (this one or its fp32 cell) says so
                note = "; ".join(x for x in (note, measures.busy_note(drawn)) if x)
            detail = f"{precision} {fmt_speedup(est.ratio)}" + (f" ({note})" if note else "")
            (faster if not lacks_speedup else flat if est.ratio >= 1.0 else slower).add(key, detail, (est.ratio, note))
        elif key[2] != BASE_PRECISION and _without_precision(key) not in groups_with_fp32:
            why = fp32_reasons.get(_without_precision(key))
            no_base.add(key, precision + (f" (fp32: {why})" if why else ""))
        if lacks_speedup or key[2] == BASE_PRECISION:
            if lacks_speedup and wait is not None and wait >= explain.DATA_BOUND_FRACTION:
                loader.add(key, f"{precision} {_pct(wait)}{mark}")
            elif util is not None and util < LOW_UTIL_PCT:
                idle.add(key, f"{precision} {util:.0f}%{mark}")
            elif lacks_speedup and wait is not None:
                not_loader.add(key, f"{precision} {_pct(wait)}{mark}")
        if measures.throttled(cell):
            throttled.add(key, precision + mark)
        cvs = measures.high_cvs(cell)
        if cvs:
            noisy.add(key, f"{precision} ({', '.join(f'{name} {cv:.0%}' for name, cv in cvs.items())}){mark}")

    out = [f.insight() for f in (busy, faster, flat, slower, loader, idle, not_loader, throttled, noisy, no_base)]
    if synthetic and cells:
        out.append(Insight("Synthetic data", "throughput only; loss and accuracy mean nothing here."))
    return [i for i in out if i is not None]
