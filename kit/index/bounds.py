"""The limits an index's content keeps, checked in SQL before any row becomes a Python object.

An index file can hold anything SQLite can: two million rows, a 300 MiB blob where the kit stores a
few KB, a BLOB in a TEXT column, a negative size, a number stored as text. What a command builds
from the file is bounded by these limits, whatever the file holds:

- :data:`MAX_RUNS` rows in ``bundles`` (counted with ``count(*)`` first, which reads no row);
- every column of every row of ``bundles`` is what the kit writes there (:func:`check_rows`: its
  type, a text's length, a number's range, a blob's size; one SQL statement, which builds nothing in
  Python and reads no blob, since SQLite takes a blob's length from the row's header);
- the cells a history reads (:func:`check_cells`): their number, and each row's types and range;
- the JSON inside (kit.bundle.safe_json: nesting and number of values) and the compressed blobs
  (kit.index.figures_codec.inflate: what they decompress to);
- SQLite's own memory (:data:`SQLITE_HEAP_BYTES`, ``PRAGMA hard_heap_limit``): a value larger than
  that fails to load instead of being loaded.

``kit index add`` writes nothing beyond these limits (:func:`row_problem`), so an index the kit made
is always one it reads. A file beyond them is refused in one line: too many runs, exit 2; a value
the kit never writes, exit 4 (a damaged or edited index, as a damaged stored copy is).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterable

from kit.errors import SchemaError, UsageError
from kit.facts import plausible
from kit.index.figures_codec import MAX_INFLATED


def compress_bound(n: int) -> int:
    """The most bytes zlib's output can take for ``n`` bytes of input (zlib's ``compressBound``)."""
    return n + (n >> 12) + (n >> 14) + (n >> 25) + 13


#: rows of ``bundles``: a run a day from 250 machines for a year is 91,000
MAX_RUNS = 100_000
#: cells of one run (``n_cells``, and the rows of ``cells`` per run): the H200 reference has 156
MAX_CELLS_PER_RUN = 10_000
#: rows of ``cells`` one `kit index history` reads (3,200 runs of the full suites): more is refused
#: with the way to fewer (``--since``)
MAX_HISTORY_CELLS = 500_000
#: per-repeat values of one cell (``cells.throughput_json``): runs have 1 to 10
MAX_REPEATS = 1_000
#: a stored blob (results.json, env.json, the figures; compressed): at most what zlib makes of the
#: most a blob may decompress to (a bundle's file, 64 MiB)
MAX_BLOB_BYTES = compress_bound(MAX_INFLATED)
#: SQLite's heap: twice the largest blob, so that one loads and a larger value does not
SQLITE_HEAP_BYTES = 2 * MAX_BLOB_BYTES
#: the most characters of each text column (a file name: NAME_MAX; a path: PATH_MAX, limits.h;
#: a host name: kit.facts.plausible; the rest: many times what any run records)
TEXT_CHARS = {"sha256": 64, "file_name": 255, "path": 4096, "added_at": 64, "run_id": 256, "run_date": 64,
              "status": 64, "host": plausible.MAX_HOST_NAME, "gpu": 256, "driver": 256, "stack": 256,
              "torch": 256, "kit": 256}
#: a run's start, seconds since the epoch: from 1970 to the year 5138
MAX_STARTED = 1e11
#: GPUs of one run
MAX_GPU_COUNT = 4096
_BLOBS = ("results_z", "env_z", "figures_z", "compare_z")


def _text(col: str, chars: int) -> str:
    return f"typeof({col}) = 'text' AND length({col}) <= {chars}"


def _rules() -> dict:
    """column -> an SQL condition true for every value the kit writes there."""
    rules = {col: _text(col, n) for col, n in TEXT_CHARS.items()}
    rules["sha256"] += " AND length(sha256) = 64 AND sha256 NOT GLOB '*[^0-9a-f]*'"
    rules.update({
        "size_bytes": "typeof(size_bytes) = 'integer' AND size_bytes >= 0",
        "run_started": f"run_started IS NULL OR (typeof(run_started) IN ('real', 'integer') "
                       f"AND run_started BETWEEN 0 AND {MAX_STARTED:.0f})",
        "interrupted": "typeof(interrupted) = 'integer' AND interrupted IN (0, 1)",
        "gpu_count": f"gpu_count IS NULL OR (typeof(gpu_count) = 'integer' AND gpu_count BETWEEN 0 AND {MAX_GPU_COUNT})",
        "n_cells": f"typeof(n_cells) = 'integer' AND n_cells BETWEEN 0 AND {MAX_CELLS_PER_RUN}",
    })
    rules.update({col: f"typeof({col}) = 'blob' AND length({col}) <= {MAX_BLOB_BYTES}" for col in _BLOBS})
    return rules


RULES = _rules()


def damaged(path: Path, why: str) -> SchemaError:
    return SchemaError(f"{path}: {why}; refused as damaged or edited (nothing was written to it).",
                       remedy="Add the bundles to a new index: kit index add --index NEW.sqlite BUNDLE...")


def too_big(path: Path) -> SchemaError:
    return damaged(path, f"it holds a value larger than SQLite may load here ({SQLITE_HEAP_BYTES >> 20} MiB), "
                         f"where the kit stores at most {MAX_BLOB_BYTES >> 20} MiB")


def check_count(con: sqlite3.Connection, path: Path) -> int:
    """The number of runs (rows of ``bundles``); UsageError (exit 2) above :data:`MAX_RUNS`."""
    (n,) = con.execute("SELECT count(*) FROM bundles").fetchone()
    if n > MAX_RUNS:
        raise UsageError(
            f"{path}: holds {n:,} runs, more than the {MAX_RUNS:,} an index of the kit holds; refused "
            "(nothing was written to it).",
            remedy="Keep the runs in several indexes (one per year, or per cluster), each made by kit index add.")
    return n


def check_rows(con: sqlite3.Connection, path: Path) -> None:
    """SchemaError (exit 4) naming the first row of ``bundles`` (by its id) with a value the kit never
    writes: a BLOB in a TEXT column, a text too long, a negative size, a number stored as text, a
    blob larger than :data:`MAX_BLOB_BYTES`, ... One statement, rows never built in Python."""
    present = {r[1] for r in con.execute("PRAGMA table_info(bundles)")}
    rules = [(col, sql) for col, sql in RULES.items() if col in present]
    case = " ".join(f"WHEN NOT ({sql}) THEN '{col}'" for col, sql in rules)
    try:
        row = con.execute(f"SELECT id, bad FROM (SELECT id, CASE {case} END AS bad FROM bundles) "
                          "WHERE bad IS NOT NULL LIMIT 1").fetchone()
    except MemoryError:
        raise too_big(path) from None
    if row is not None:
        bundle_id, col = row
        raise damaged(path, f"the run in row {bundle_id} has a value in its {col} column that the kit never "
                            f"writes there ({_what(col)})")


def _what(col: str) -> str:
    if col in TEXT_CHARS:
        return "64 hexadecimal digits" if col == "sha256" else f"text of at most {TEXT_CHARS[col]} characters"
    if col in _BLOBS:
        return f"compressed data of at most {MAX_BLOB_BYTES >> 20} MiB"
    return {"size_bytes": "a whole number of at least 0", "run_started": f"empty, or seconds between 0 and {MAX_STARTED:g}",
            "interrupted": "0 or 1", "gpu_count": f"empty, or a whole number from 0 to {MAX_GPU_COUNT}",
            "n_cells": f"a whole number from 0 to {MAX_CELLS_PER_RUN:,}"}[col]


def row_problem(values: dict, cells: list) -> str:
    """Why ``kit index add`` cannot record a run whose columns are ``values`` and whose rows of
    ``cells`` are ``cells`` ((cell_id, status, unit, median, throughput_json) each), within the
    limits every read checks; "" when it can."""
    for col, chars in TEXT_CHARS.items():
        v = values.get(col)
        if isinstance(v, str) and len(v) > chars:
            return f"its {col.replace('_', ' ')} is {len(v):,} characters; an index stores at most {chars}"
    if len(cells) > MAX_CELLS_PER_RUN:
        return f"it has {len(cells):,} cells; an index stores at most {MAX_CELLS_PER_RUN:,} per run"
    for cell_id, status, unit, _median, repeats in cells:
        if not 7 <= len(cell_id) <= 1024 or len(status) > 64 or len(unit) > 64 or len(repeats) > MAX_REPEATS * 32:
            return (f"a cell's id, status, unit or repeats are longer than an index stores "
                    f"(1,024, 64, 64 characters; {MAX_REPEATS:,} repeats)")
    return ""


_CELL_RULES = {
    "cell_id": "typeof(cell_id) = 'text' AND length(cell_id) BETWEEN 7 AND 1024",
    "status": "typeof(status) = 'text' AND length(status) <= 64",
    "unit": "typeof(unit) = 'text' AND length(unit) <= 64",
    "throughput_median": f"throughput_median IS NULL OR (typeof(throughput_median) IN ('real', 'integer') "
                         f"AND throughput_median BETWEEN {plausible.MIN_THROUGHPUT!r} AND {plausible.MAX_THROUGHPUT!r})",
    "throughput_json": f"typeof(throughput_json) = 'text' AND length(throughput_json) <= {MAX_REPEATS * 32}",
}


_CELL_WHAT = {"cell_id": "text of 7 to 1,024 characters", "status": "text of at most 64 characters",
              "unit": "text of at most 64 characters",
              "throughput_median": "empty, or a throughput any device can measure (kit/facts/plausible.py)",
              "throughput_json": f"text of at most {MAX_REPEATS * 32:,} characters"}


def check_cells(con: sqlite3.Connection, path: Path, ids: Iterable[int]) -> None:
    """UsageError (exit 2) when the runs ``ids`` have more cells than a history reads
    (:data:`MAX_HISTORY_CELLS`); SchemaError (exit 4) for a row of theirs with a value the kit never
    writes in ``cells``."""
    ids = list(ids)
    case = " ".join(f"WHEN NOT ({sql}) THEN '{col}'" for col, sql in _CELL_RULES.items())
    n = 0
    for start in range(0, len(ids), 500):  # SQLite's limit on bound parameters
        chunk = ids[start:start + 500]
        marks = ", ".join("?" * len(chunk))
        n += con.execute(f"SELECT count(*) FROM cells WHERE bundle_id IN ({marks})", chunk).fetchone()[0]
        if n > MAX_HISTORY_CELLS:
            raise UsageError(f"{path}: these runs have more than {MAX_HISTORY_CELLS:,} cells, more than a history "
                             "reads at once; refused (nothing was written to it).",
                             remedy="Follow fewer runs: add --since DATE.")
        try:
            row = con.execute(f"SELECT bundle_id, bad FROM (SELECT bundle_id, CASE {case} END AS bad FROM cells "
                              f"WHERE bundle_id IN ({marks})) WHERE bad IS NOT NULL LIMIT 1", chunk).fetchone()
        except MemoryError:
            raise too_big(path) from None
        if row is not None:
            raise damaged(path, f"a cell of the run in row {row[0]} has a value in its {row[1]} column that the "
                                f"kit never writes there ({_CELL_WHAT[row[1]]})")
        per_run = con.execute(f"SELECT bundle_id FROM cells WHERE bundle_id IN ({marks}) GROUP BY bundle_id "
                              "HAVING count(*) > ? LIMIT 1", [*chunk, MAX_CELLS_PER_RUN]).fetchone()
        if per_run is not None:
            raise damaged(path, f"the run in row {per_run[0]} has more than {MAX_CELLS_PER_RUN:,} cells")

