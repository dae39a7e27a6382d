"""Measuring rich tables against the console: whether machines fit as columns."""

from __future__ import annotations


def natural_width(console, renderable) -> int:
    """The width ``renderable`` takes with nothing wrapped (rich's measurement, not capped at the console)."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update_width(1_000_000), renderable).maximum


def fits(console, renderables) -> bool:
    """Every table's natural width is within the console's (a pipe: 80 columns)."""
    from rich.table import Table

    return all(natural_width(console, r) <= console.width for r in renderables if isinstance(r, Table))
