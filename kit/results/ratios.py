"""The seed's performance ratio, defined and printed in one place.

**Speedup over fp32** (the 2019 article's "performance ratio", fp32 time ÷
reduced-precision time; > 1 = faster than fp32) is computed from steady-state
throughput: the median over repeats of the mode's throughput ÷ the median over
repeats of fp32's throughput, same workload, model and engine, same run. Epoch
wall time includes warm-up, cuDNN autotuning and graph capture in a first
repeat, which in a short throughput-mode epoch can swamp the difference the
ratio is meant to show; steady-state throughput does not.

**Epoch-time ratio** (fp32 median epoch time ÷ the mode's median epoch time) is
a second measure with its own name; where a view shows it, it says so.

Every view (``kit compare``, ``kit bundle show``, the HTML report and its
charts, ``results.json``'s ``derived``, ``scripts/perf_table.py``) computes the
point estimate with :func:`speedup_over_fp32` and prints it with
:func:`fmt_speedup`. Pure Python, Python 3.7 syntax (the report runs in the
cuda10 image); imports nothing from ``kit.compare``.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable, List, Optional

THROUGHPUT = "throughput_items_per_s"
EPOCH_S = "epoch_seconds_median"
BASE_PRECISION = "fp32"

#: The names the views print, so that each measure is called the same everywhere.
SPEEDUP_NAME = "speedup over fp32"
SPEEDUP_DEFINITION = (
    "speedup over fp32 = median steady-state throughput of the precision ÷ median of fp32's, "
    "over repeats (= fp32 time ÷ this precision's time; > 1 = faster than fp32)"
)

#: decimals of the speedup and epoch-time ratio wherever they are printed
RATIO_DECIMALS = 2


def finite_number(v: Any) -> Optional[float]:
    """``v`` as a float where it is a finite real number, else None: bools, None, strings, NaN, the
    infinities and integers too large for a float (JSON allows thousands of digits) are no number. The
    one test of a number read from a stranger's file."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def positive_at(d: Any, key: str) -> Optional[float]:
    """A positive finite number at ``d[key]`` (:func:`finite_number`'s test; a stranger's file: anything
    else, or ``d`` not an object, is None)."""
    v = finite_number(d.get(key) if isinstance(d, dict) else None)
    return v if v is not None and v > 0 else None


def finite_values(values: Iterable[Any]) -> List[float]:
    """The finite numbers among ``values`` (:func:`finite_number`'s; the others dropped)."""
    return [f for f in (finite_number(v) for v in values) if f is not None]


def metric_values(cell: Any, metric: str) -> List[float]:
    """A cell's per-repeat values of ``metric``; when the repeats lack it (a
    cell from an older kit), the summary's median as the one value."""
    reps = [r for r in (getattr(cell, "repeats", None) or []) if isinstance(r, dict)]
    xs = finite_values(r.get(metric) for r in reps)
    if xs:
        return xs
    s = (getattr(cell, "summary", None) or {}).get(metric)
    if isinstance(s, dict):
        return finite_values([s.get("median")])
    return []


def median_of(values: Iterable[Any]) -> Optional[float]:
    """The median of the finite numbers among ``values``; None when there are none."""
    xs = finite_values(values)
    return statistics.median(xs) if xs else None


def ratio_of_medians(num: Iterable[Any], den: Iterable[Any]) -> Optional[float]:
    """median(num) ÷ median(den), or None when either is empty or den's median is 0."""
    return ratio_of(median_of(num), median_of(den))


def geometric_mean(ratios: Iterable[Any]) -> Optional[float]:
    """The geometric mean of the finite, positive numbers among ``ratios`` (the one way the kit sums up
    many cells' ratios: a cell twice as fast and one half as fast average to 1); None when there are none."""
    xs = [x for x in finite_values(ratios) if x > 0]
    return math.exp(math.fsum(math.log(x) for x in xs) / len(xs)) if xs else None


def ratio_of(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """``a / b`` for two medians already taken (:func:`median_of`): :func:`ratio_of_medians` when a
    caller holds the medians (a fleet's comparison divides every machine's by the baseline's)."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def speedup_over_fp32(cell: Any, fp32_cell: Any) -> Optional[float]:
    """The speedup over fp32 of ``cell`` (median throughput ÷ fp32's median throughput)."""
    if cell is None or fp32_cell is None:
        return None
    return ratio_of_medians(metric_values(cell, THROUGHPUT), metric_values(fp32_cell, THROUGHPUT))


def epoch_time_ratio(cell: Any, fp32_cell: Any) -> Optional[float]:
    """fp32's median epoch time ÷ ``cell``'s (includes warm-up; not the speedup)."""
    if cell is None or fp32_cell is None:
        return None
    return ratio_of_medians(metric_values(fp32_cell, EPOCH_S), metric_values(cell, EPOCH_S))


#: the most decimals a ratio too small for its usual decimals is given; smaller ones print as
#: "<0.000000001"
MAX_RATIO_DECIMALS = 9


def ratio_digits(value: float, decimals: int = RATIO_DECIMALS) -> str:
    """A ratio's number in ``decimals`` decimals: ``2.45``. One that would read as zero there
    (0.00042 in three: ``0.000``) keeps as many significant digits instead: ``0.000420``. One that
    is no finite number (no figure the kit reads can make it) is ``—``, as :func:`fmt_ratio` has it."""
    if not math.isfinite(value):
        return "—"
    if value == 0 or abs(value) >= 0.5 * 10 ** -decimals:
        return "{:.{d}f}".format(value, d=decimals)
    places = decimals - 1 - math.floor(math.log10(abs(value)))
    if places > MAX_RATIO_DECIMALS:
        return ("<" if value > 0 else ">-") + "{:.{d}f}".format(10.0 ** -MAX_RATIO_DECIMALS, d=MAX_RATIO_DECIMALS)
    return "{:.{d}f}".format(value, d=places)


def fmt_ratio(value: Optional[float], decimals: int = RATIO_DECIMALS) -> str:
    """A ratio as every view prints it: ``2.45×`` (``—`` when unknown; see :func:`ratio_digits`
    for one too small for ``decimals``)."""
    if value is None or not math.isfinite(value):
        return "—"
    return ratio_digits(value, decimals) + "×"


def fmt_speedup(value: Optional[float]) -> str:
    """The speedup over fp32, as every view prints it (two decimals, ``×`` after the number)."""
    return fmt_ratio(value, RATIO_DECIMALS)
