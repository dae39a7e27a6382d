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


def widest(items, cells) -> list:
    """The items whose cells (``cells(item)``: the texts one row shows, as the terminal shows them)
    are the widest of their column, in their order: a table of these rows alone is as wide as the
    table of all (rich makes a column as wide as its widest cell), so a fleet's table is measured
    on a handful of rows, not on every machine's."""
    from rich.cells import cell_len

    best: dict[int, tuple[int, int]] = {}  # column: (width, the index of the item)
    items = list(items)
    for n, item in enumerate(items):
        for col, text in enumerate(cells(item)):
            width = max(map(cell_len, str(text).split("\n")))
            if col not in best or width > best[col][0]:
                best[col] = (width, n)
    keep = {n for _, n in best.values()}
    return [item for n, item in enumerate(items) if n in keep]


def unbroken_fit(console, renderable) -> bool:
    """``renderable`` fits the console with no word or figure broken: its narrowest form, each column
    as wide as its longest word (rich wraps a cell only between words down to that), is within the
    console's width."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update_width(1_000_000), renderable).minimum <= console.width


def longest_word(text: str) -> int:
    """The terminal width of the longest word of ``text`` (what a column must give it unbroken)."""
    from rich.cells import cell_len

    return max((cell_len(w) for w in str(text).split()), default=0)
