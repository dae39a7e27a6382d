"""Reading the index: filters, the list of runs, compare's sources and comparison (a machine's history:
:mod:`kit.index.history`).

Every view reads the same rows in the same order: by the run's start (earliest first; runs that
recorded none last), then in the order they were added; each run once (:mod:`kit.index.runs`: an
interrupted bundle superseded by its completed resume, and a copy of an earlier run, are left out). ``kit compare --index`` takes the first
of that order as the baseline unless ``--baseline`` names another.

The sources handed to the comparison are the objects ``kit compare`` builds from a tarball
(:class:`kit.compare.load.Source`), made from each run's figures (:mod:`kit.compare.figures`,
computed at ingest and stored by :mod:`kit.index.figures_codec`, checked as they are read) and its
env.json, with the headline facts of :func:`kit.bundle.envinfo.summarise_environment`. A run's
results.json is read from the index only if a view asks for it (the HTML page's per-run charts).

Every read opens the index with kit.index.reader.open_reader, which never writes, and reads what
kit.index.bounds allows: each run's blobs one at a time, a history's cells after counting and
checking them, the JSON inside with kit.bundle.safe_json.
"""

from __future__ import annotations

import calendar
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from kit.bundle import safe_json
from kit.bundle.inert import inert
from kit.compare.load import Source, _label
from kit.errors import SchemaError, UsageError
from kit.index.figures_codec import decode, inflate
from kit.index.connection import connect_readonly
from kit.index.reader import reading
from kit.index.runs import left_out
from kit.results.schema import RunResults

#: --where FIELD=VALUE: the field's column
WHERE_FIELDS = {"gpu": "gpu", "host": "host", "driver": "driver", "stack": "stack", "torch": "torch", "kit": "kit"}
ORDER = "ORDER BY run_started IS NULL, run_started, id"
#: the columns of a listed run
LIST_COLUMNS = ("id", "sha256", "file_name", "path", "run_id", "run_started", "run_date", "status", "interrupted",
                "host", "gpu", "gpu_count", "driver", "stack", "torch", "kit", "n_cells", "added_at")


@dataclass
class Filter:
    """Which runs: ``--where FIELD=VALUE`` (repeatable; all must hold), ``--since DATE``, ``--host H``.

    ``--where`` matches VALUE as a whole word of the field, ignoring case: ``gpu=H200`` keeps
    "NVIDIA H200" and "NVIDIA H200 NVL", ``driver=580`` keeps "580.159.04", ``torch=2.1`` keeps
    "2.1.0" but not "2.11.0" (a word ends where a letter or digit does not follow).
    ``--host`` (and ``equals``) is the exact host name."""

    equals: dict = field(default_factory=dict)  # column -> value, exactly
    words: list = field(default_factory=list)  # (column, value): value is a whole word of the column
    since: Optional[float] = None

    def sql(self) -> tuple[str, list]:
        terms, args = [], []
        for col, value in self.equals.items():
            terms.append(f"{col} = ?")
            args.append(value)
        if self.since is not None:
            terms.append("run_started >= ?")
            args.append(self.since)
        return ("WHERE " + " AND ".join(terms)) if terms else "", args

    def keep(self, run: dict) -> bool:
        """The word matches (in Python: SQLite's lower() folds ASCII only)."""
        return all(word_match(value, str(run[col])) for col, value in self.words)


def word_match(value: str, text: str) -> bool:
    """``value`` occurs in ``text`` (ignoring case) with no letter or digit right before or after it."""
    import re

    return re.search(r"(?<![0-9a-z])" + re.escape(value.lower()) + r"(?![0-9a-z])", text.lower()) is not None


def parse_since(text: str) -> float:
    """``2026-11-01`` or ``2026-11-01T08:00`` (UTC) as seconds since the epoch; UsageError otherwise."""
    for fmt in ("%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"):
        try:
            return float(calendar.timegm(time.strptime(text.strip().rstrip("Z"), fmt)))
        except ValueError:
            continue
    raise UsageError(f"--since {text!r}: not a date; give YYYY-MM-DD (UTC), e.g. --since 2026-11-01.")


def make_filter(where: Iterable[str] = (), since: Optional[str] = None, host: Optional[str] = None) -> Filter:
    f = Filter()
    for term in where or ():
        name, eq, value = str(term).partition("=")
        name = name.strip().lower()
        if not eq or not name:
            raise UsageError(f"--where {term!r}: give FIELD=VALUE, e.g. --where gpu=H200 "
                             f"(fields: {', '.join(WHERE_FIELDS)}).")
        if name not in WHERE_FIELDS:
            raise UsageError(f"--where {name}: no such field; the fields are {', '.join(WHERE_FIELDS)}.")
        if not value.strip():
            raise UsageError(f"--where {name}=: give a value, e.g. --where gpu=H200.")
        f.words.append((WHERE_FIELDS[name], value.strip()))
    if host is not None:
        f.equals["host"] = host
    if since is not None:
        f.since = parse_since(since)
    return f


def list_runs(con: sqlite3.Connection, flt: Optional[Filter] = None, everything: bool = False) -> list[dict]:
    """The matching runs, each once (kit.index.runs.left_out: an interrupted bundle superseded by its
    completed resume, and a copy of a run already listed, are left out). ``everything``: those too,
    each with ``left_out`` saying why ("superseded by FILE", "the same run as FILE"; None for the others)."""
    flt = flt or Filter()
    where, args = flt.sql()
    rows = con.execute(f"SELECT {', '.join(LIST_COLUMNS)} FROM bundles {where} {ORDER}", args).fetchall()
    hidden = left_out(con)
    runs = []
    for run in (dict(zip(LIST_COLUMNS, r)) for r in rows):
        why = hidden.get(run["id"])
        if (why is None or everything) and flt.keep(run):
            if everything:
                run["left_out"] = None if why is None else (
                    f"superseded by {why[1]}" if why[0] == "superseded" else f"the same run as {why[1]}")
            runs.append(run)
    return runs


def counts(con: sqlite3.Connection) -> dict:
    n, hosts, gpus = con.execute("SELECT COUNT(*), COUNT(DISTINCT host), COUNT(DISTINCT gpu) FROM bundles").fetchone()
    return {"bundles": n, "hosts": hosts, "gpus": gpus}


def _results_loader(index_path: str, bundle_id: int, label: str):
    """Reads one run's results.json from the index when a view asks for it (the per-run charts of the
    HTML page): a connection of its own, the schema's check, the index's error for a damaged copy."""
    def load() -> RunResults:
        con = connect_readonly(Path(index_path))
        try:
            (results_z,) = con.execute("SELECT results_z FROM bundles WHERE id = ?", (bundle_id,)).fetchone()
        except MemoryError:  # larger than SQLite may load (kit.index.bounds): no copy the kit stores
            raise damaged_copy(label, ValueError("larger than the kit stores")) from None
        except (sqlite3.Error, TypeError) as exc:  # a damaged page, a row gone since the index was checked
            raise damaged_copy(label, ValueError(f"SQLite cannot read it: {exc}")) from None
        finally:
            con.close()
        try:
            obj = safe_json.loads(inflate(results_z))
        except ValueError as exc:  # Damaged, TooLarge and UnicodeDecodeError included
            raise damaged_copy(label, exc) from None
        return RunResults.from_dict(obj, source=f"{label} (results.json)")
    return load


def damaged_copy(label: str, exc: Exception) -> SchemaError:
    return SchemaError(f"the index's copy of {label} is damaged ({exc}).",
                       remedy="Add the bundle to a new index: kit index add --index NEW.sqlite BUNDLE")


def _source(i: int, row: tuple, index_path: str) -> Source:
    bundle_id, file_name, path, figures_z, env_z, interrupted = row
    label = inert(file_name)
    try:
        figures = decode(figures_z)
        env = safe_json.loads(inflate(env_z))
    except ValueError as exc:  # Damaged, TooLarge and UnicodeDecodeError included
        raise damaged_copy(label, exc) from None
    src = Source(i, _label(i), Path(path), "index", None, env if isinstance(env, dict) else {}, None,
                 bool(interrupted), figures, _results_loader(index_path, bundle_id, f"{label} (index)"))
    if not src.environment:
        # a bundle with an empty env.json: its results.json's environment, as a tarball reads it
        results_env = src.run_results().environment
        src.environment = results_env if isinstance(results_env, dict) else {}
    src.env = figures.environment_summary(src.environment)
    return src


def _pick_baseline(runs: list[dict], baseline: str) -> int:
    b = baseline.strip()
    if b.isdigit():
        i = int(b)
        if not 1 <= i <= len(runs):
            raise UsageError(f"--baseline {i}: the index has {len(runs)} matching runs (count from 1, in run-date order).")
        return i - 1
    hits = [i for i, r in enumerate(runs) if b in (r["run_id"], r["file_name"], r["host"], r["sha256"])]
    if not hits:
        raise UsageError(f"--baseline {b!r}: no matching run has that run id, file name or host.",
                         remedy="Give its position (1 = the earliest run) or see: kit index list")
    if len(hits) > 1:
        raise UsageError(f"--baseline {b!r}: {len(hits)} matching runs have it; give a run id or a position.")
    return hits[0]


def sources(con: sqlite3.Connection, flt: Optional[Filter] = None, baseline: Optional[str] = None) -> list[Source]:
    """compare's inputs from the index: the matching runs in run-date order, the baseline first."""
    runs = list_runs(con, flt)
    if baseline is not None and str(baseline).strip():
        runs.insert(0, runs.pop(_pick_baseline(runs, str(baseline))))
    if len(runs) < 2:
        raise UsageError(f"compare needs at least two runs; the index has {len(runs)} matching the filters.",
                         remedy="Loosen --where/--since/--host, or see what is there: kit index list")
    index_path = con.execute("PRAGMA database_list").fetchone()[2]
    # one run's blobs at a time: read, decoded and dropped before the next (each is bounded,
    # kit.index.bounds; all of them at once would be the sum)
    return [_source(i, con.execute("SELECT id, file_name, path, figures_z, env_z, interrupted FROM bundles "
                                   "WHERE id = ?", (r["id"],)).fetchone(), index_path) for i, r in enumerate(runs)]


def comparison(index: Path, where: Iterable[str] = (), since: Optional[str] = None, host: Optional[str] = None,
               baseline: Optional[str] = None, allow_method_change: bool = False, group_by: Optional[str] = None):
    """`kit compare --index`: the comparison (kit.compare.engine.Comparison) of the runs of the index
    file ``index`` that match the filters, from the index alone (methods judged within each group
    where ``group_by`` groups them: kit.compare.engine.build_comparison)."""
    from kit.compare.engine import build_comparison

    flt = make_filter(where or (), since, host)
    with reading(index) as con:
        srcs = sources(con, flt, baseline)
    return build_comparison(srcs, allow_method_change, group_by)
