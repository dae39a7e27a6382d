"""`kit index add`: verify each bundle as `kit bundle verify` does, and record it once.

A bundle is identified by the sha256 of its .tar.gz: one already in the index is a no-op, said as
such, and is not opened again. Every other bundle is opened with
:func:`kit.bundle.safe_open.open_bundle` (the one verifier: structure, safety, schema, every file's
hash); a refused one is reported with its reason and exit code and changes nothing, and the
others are still added. What a comparison needs is stored (results.json and env.json as the bundle
holds them, compressed, and the columns the filters and ``history`` read), so ``kit compare
--index`` never reopens a tarball.

Each bundle is one transaction, taken with ``BEGIN IMMEDIATE`` (the write lock first, waiting for
another writer up to the busy timeout). Verification happens before the lock is taken, so a writer
holds it only for the few inserts. A process killed at any point leaves each bundle in the index
whole or not at all (SQLite's rollback journal).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional

from kit.bundle.envinfo import summarise_environment
from kit.bundle.safe_open import ENV_NAME, RESULTS_NAME, open_bundle
from kit.compare import measures
from kit.errors import BundleError, KitError, UsageError
from kit.results import ratios

ADDED, PRESENT, REFUSED = "added", "already in the index", "refused"


@dataclass
class AddOutcome:
    path: Path
    outcome: str  # ADDED / PRESENT / REFUSED
    reason: str = ""
    exit_code: int = 0  # what `kit bundle verify` exits with for this bundle (0 unless refused)
    sha256: str = ""


def expand(paths: Iterable[Path]) -> list[Path]:
    """The bundles named: a file as given; a folder, every ``*.tar.gz`` under it (sorted)."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*.tar.gz") if q.is_file()))
        else:
            out.append(p)
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _iso(ts: Optional[float]) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) if ts is not None else "unknown"


def _started(results, manifest: dict) -> Optional[float]:
    """The run's start (results.json), else when the bundle was made (its manifest)."""
    ts = results.started_at
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return float(ts)
    made = manifest.get("created_at")
    if isinstance(made, str):
        import calendar

        try:
            return float(calendar.timegm(time.strptime(made, "%Y-%m-%dT%H:%M:%SZ")))
        except ValueError:
            return None
    return None


def _record(con: sqlite3.Connection, path: Path, digest: str, size: int, bundle) -> bool:
    """Insert one verified bundle in one transaction; False when another writer recorded it first."""
    results = bundle.results
    env = bundle.environment
    summary = summarise_environment(env, results.config, results.cells)
    started = _started(results, bundle.manifest)
    kit_version = summary.kit_version if summary.kit_version != "unknown" else str(results.kit_version)
    cells = {}
    for cell in results.cells:
        values = ratios.metric_values(cell, measures.THROUGHPUT)
        s = measures.sample(cell, measures.THROUGHPUT)
        cells[cell.cell_id] = (cell.cell_id, cell.status, measures.unit_of(cell), s.median if s else None, json.dumps(values))
    env_bytes = bundle.files.get(ENV_NAME) or json.dumps(env).encode("utf-8")
    row = (
        digest, path.name, str(path.resolve()), size, _iso(time.time()), str(results.run_id), started, _iso(started),
        str(results.status), int(bundle.interrupted), summary.machine, summary.gpu, summary.gpu_count,
        summary.driver, summary.stack, summary.torch, kit_version, len(cells),
        zlib.compress(bundle.files[RESULTS_NAME], 6), zlib.compress(env_bytes, 6),
    )
    con.execute("BEGIN IMMEDIATE")
    try:
        cur = con.execute(
            "INSERT OR IGNORE INTO bundles (sha256, file_name, path, size_bytes, added_at, run_id, run_started, run_date,"
            " status, interrupted, host, gpu, gpu_count, driver, stack, torch, kit, n_cells, results_z, env_z)"
            " VALUES (" + ", ".join("?" * len(row)) + ")", row)
        if cur.rowcount == 0:
            con.execute("ROLLBACK")
            return False
        bundle_id = cur.lastrowid
        con.executemany(
            "INSERT INTO cells (bundle_id, cell_id, status, unit, throughput_median, throughput_json) VALUES (?, ?, ?, ?, ?, ?)",
            [(bundle_id, *c) for c in cells.values()])
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    return True


def add_one(con: sqlite3.Connection, path: Path) -> AddOutcome:
    """Verify and record one bundle; never raises a KitError (a refusal is the outcome)."""
    path = Path(path)
    try:
        if not path.is_file():
            what = "no such file" if not path.exists() else "not a regular file (a folder, device or FIFO)"
            raise UsageError(f"{path}: {what}.")
        digest = _sha256(path)
        if con.execute("SELECT 1 FROM bundles WHERE sha256 = ?", (digest,)).fetchone():
            return AddOutcome(path, PRESENT, "same sha256 as a bundle already recorded: nothing to do", 0, digest)
        bundle = open_bundle(path)  # exactly the checks of `kit bundle verify`
        size = path.stat().st_size
        if _sha256(path) != digest:
            raise BundleError(f"{path.name} changed while it was being added; add it again once it is complete.")
    except KitError as exc:
        return AddOutcome(path, REFUSED, exc.message, exc.exit_code)
    except OSError as exc:
        return AddOutcome(path, REFUSED, f"{path}: cannot be read ({exc.strerror or exc}).", UsageError.exit_code)
    try:
        added = _record(con, path, digest, size, bundle)
    except sqlite3.OperationalError as exc:  # the busy timeout ran out, the disk is full, ...
        raise KitError(f"cannot write to the index ({exc}); {path.name} was not added.",
                       remedy="Another `kit index add` may hold the lock for long; run this again (bundles already added are kept).") from None
    if not added:
        return AddOutcome(path, PRESENT, "recorded by another writer meanwhile: nothing to do", 0, digest)
    return AddOutcome(path, ADDED, "", 0, digest)


def add_bundles(con: sqlite3.Connection, paths: Iterable[Path],
                on_outcome: Optional[Callable[[AddOutcome], None]] = None) -> list[AddOutcome]:
    """:func:`add_one` for each bundle, in order; ``on_outcome`` sees each as it is decided."""
    outcomes = []
    for p in paths:
        o = add_one(con, p)
        outcomes.append(o)
        if on_outcome is not None:
            on_outcome(o)
    return outcomes


def exit_code(outcomes: list[AddOutcome]) -> int:
    """0 when nothing was refused; else the code `kit bundle verify` gives the first refused bundle
    (5 failed verification or unsafe, 4 unknown schema or malformed, 2 not a file)."""
    return next((o.exit_code for o in outcomes if o.outcome == REFUSED), 0)
