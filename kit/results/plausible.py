"""Whether a run's figures are physically possible: the bounds of kit.facts.plausible, applied where a
stranger's results enter the kit (`kit bundle verify`, and so `kit index add`; `kit compare` of a
results.json or a run folder).

The results schema (kit.results.schema) already refuses a time or rate that is zero, negative, NaN
or infinite. This adds the range: a throughput, a time or an energy per epoch beyond what any
device can measure (1e300 items/s is finite and positive) is refused in one line naming its field,
exit 4, before any statistic is computed from it. A ratio of two figures inside the bounds, and its
square, stay far inside a float's range, so nothing downstream can overflow.
"""

from __future__ import annotations

from typing import Any, Iterable

from kit.errors import SchemaError
from kit.facts import plausible as bounds
from kit.results.ratios import finite_number

#: field -> (low, high, unit, what it is)
THROUGHPUT = (bounds.MIN_THROUGHPUT, bounds.MAX_THROUGHPUT, "items/s", "a throughput")
SECONDS = (bounds.MIN_SECONDS, bounds.MAX_SECONDS, "s", "a time")
ENERGY = (bounds.MIN_ENERGY_J, bounds.MAX_ENERGY_J, "J", "an energy per epoch")
#: the measured figures a cell's repeats (and summary) hold, and their range
FIELDS = {
    "throughput_items_per_s": THROUGHPUT,
    "epoch_seconds_median": SECONDS,
    "epoch_seconds": SECONDS,
    "steady_seconds": SECONDS,
    "time_to_first_step_s": SECONDS,
    "fit_seconds": SECONDS,
    "energy_j_per_epoch": ENERGY,
}
#: a summary's numbers that are a value of the metric (its spread is checked against the top only)
_CENTRES = ("median", "mean", "min", "max")


def outside(value: Any, rng: tuple) -> bool:
    """Whether ``value`` (a number) is no figure of that range: not finite, or beyond its bounds."""
    v = finite_number(value)
    return v is None or not rng[0] <= v <= rng[1]


def why(value: Any, rng: tuple) -> str:
    """``1e+300 items/s, above 1e+12 items/s`` (or below, or not a finite number)."""
    low, high, unit, _what = rng
    v = finite_number(value)
    said = repr(value) if len(repr(value)) <= 40 else f"a number of {len(repr(value))} digits"
    if v is None:
        return f"{said}, not a finite number"
    return f"{said} {unit}, {'above' if v > high else 'below'} {high if v > high else low:g} {unit}"


def _numbers(value: Any) -> Iterable[tuple[str, Any]]:
    """``("", value)`` for a number, ``("[i]", x)`` for each number of a list; nothing else."""
    if isinstance(value, list):
        for i, x in enumerate(value):
            if isinstance(x, (int, float)) and not isinstance(x, bool):
                yield f"[{i}]", x
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield "", value


def first_implausible(cell: Any) -> tuple[str, str, str] | None:
    """(the field's JSON path inside the cell, why, what it is) of the first figure of ``cell`` (a
    CellResult) outside its bounds; None when every one is inside."""
    for i, rep in enumerate(getattr(cell, "repeats", None) or []):
        if not isinstance(rep, dict):
            continue
        for key, rng in FIELDS.items():
            for at, x in _numbers(rep.get(key)):
                if outside(x, rng):
                    return f"repeats[{i}].{key}{at}", why(x, rng), rng[3]
    for key, stats in (getattr(cell, "summary", None) or {}).items():
        rng = FIELDS.get(key)
        if rng is None or not isinstance(stats, dict):
            continue
        for name in _CENTRES + ("stdev",):
            x = stats.get(name)
            if x is None or isinstance(x, bool) or not isinstance(x, (int, float)):
                continue
            own = (0.0,) + rng[1:] if name == "stdev" else rng  # a spread may be zero (identical repeats)
            if outside(x, own):
                return f"summary.{key}.{name}", why(x, own), rng[3]
    telemetry = getattr(cell, "telemetry", None)
    if isinstance(telemetry, dict):
        for at, x in _numbers(telemetry.get("energy_j_per_epoch")):
            if outside(x, ENERGY):
                return f"telemetry.energy_j_per_epoch{at}", why(x, ENERGY), ENERGY[3]
    return None


def check_results(results: Any, source: str) -> None:
    """SchemaError (exit 4) naming the first figure of ``results`` (a RunResults) that no run can
    have measured (kit.facts.plausible's bounds), its cell and why."""
    for i, cell in enumerate(getattr(results, "cells", None) or []):
        found = first_implausible(cell)
        if found is not None:
            path, said, what = found
            raise SchemaError(
                f"{source}: implausible value at cells[{i}].{path} (cell {_plain(cell)}): {said}; "
                f"{what} no device can measure (bounds: kit/facts/plausible.py)",
                remedy="The file was damaged or edited by hand; use the results.json or bundle the kit wrote.")


def check_host_name(environment: Any, source: str) -> None:
    """SchemaError (exit 4) when the environment's host name is longer than any host name can be."""
    host = environment.get("hostname") if isinstance(environment, dict) else None
    if isinstance(host, str) and len(host) > bounds.MAX_HOST_NAME:
        raise SchemaError(
            f"{source}: its host name is {len(host):,} characters, longer than any host name can be "
            f"({bounds.MAX_HOST_NAME}, the longest DNS name)",
            remedy="The file was damaged or edited by hand; use the bundle the kit wrote.")


def _plain(cell: Any) -> str:
    """The cell's id where it is plain text (a stranger's file: nothing a terminal obeys)."""
    import re

    try:
        name = cell.cell_id
    except (AttributeError, TypeError, KeyError):
        return "?"
    return name if re.fullmatch(r"[A-Za-z0-9._/@=+-]{1,200}", name) else "?"
