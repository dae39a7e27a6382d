"""`kit index add`: verify each bundle as `kit bundle verify` does, and record it once.

A bundle is identified by the sha256 of its .tar.gz: one already in the index is a no-op, said as
such, and is not opened again. Every other bundle is opened with
:func:`kit.bundle.safe_open.open_bundle` (the one verifier: structure, safety, schema, every file's
hash); a refused one is reported with its reason and exit code and changes nothing, and the
others are still added. What a comparison needs is stored (results.json and env.json as the bundle
holds them, compressed; the run's figures, what a comparison reads of it, computed once here
(:func:`kit.compare.figures.run_figures`, stored by :mod:`kit.index.figures_codec`); and the columns
the filters and ``history`` read), so ``kit compare --index`` never reopens a tarball nor
re-derives a run's figures.

A bundle of a run already recorded under another tarball (same run id, same results.json and
env.json: :mod:`kit.index.runs`) is "already in the index" too, so each run is recorded once.

The index is opened to write first (kit.index.db.open_index: checked, a journal a writer cut short
rolled back, an older schema migrated); a new index is made only when the first verified bundle is
recorded (:func:`add_to`), so nothing is made when nothing is added. A bundle whose strings or
cells go past the limits every read checks (kit.index.bounds.row_problem) is refused, named, so an
index the kit made is always one it reads.

Verified bundles are recorded in batches, one transaction each, taken with ``BEGIN IMMEDIATE`` (the
write lock first, waiting for another writer up to the busy timeout), inside which the schema is
checked again (another process may have changed it since the file was opened). Verification happens
before the lock is taken, by worker processes when there are many (they end with their parent,
whatever ends it), so a writer holds the lock only for the inserts. A process killed at any point
leaves each bundle in the index whole or not at all (SQLite's rollback journal).
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
from kit.bundle.safe_open import open_bundle
from kit.compare import measures
from kit.compare.figures import run_figures
from kit.errors import BundleError, KitError, SchemaError, UsageError
from kit.index.bounds import MAX_RUNS, row_problem
from kit.index.db import check_schema_again, open_index
from kit.index.files import check_path
from kit.index.figures_codec import encode
from kit.index.runs import content_digest, stored_digest
from kit.results import ratios
from kit.results.run_files import ENV_NAME, RESULTS_NAME

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


@dataclass
class _Ready:
    """A verified bundle, as the rows it becomes (made where it was verified, maybe in a worker)."""

    outcome: AddOutcome
    row: tuple
    cells: list
    #: its results.json and env.json (kit.index.runs.content_digest): a copy of a recorded run is not added
    content: str = ""


def _env_bytes(bundle) -> bytes:
    return bundle.files.get(ENV_NAME) or json.dumps(bundle.environment).encode("utf-8")


def _rows(path: Path, digest: str, size: int, bundle) -> tuple[tuple, list]:
    results = bundle.results
    env = bundle.environment
    summary = summarise_environment(env, results.config, results.cells)
    started = _started(results, bundle.manifest)
    kit_version = summary.kit_version if summary.kit_version != "unknown" else str(results.kit_version)
    cells = {}
    for cell in results.cells:
        values = ratios.metric_values(cell, ratios.THROUGHPUT)
        s = measures.sample(cell, ratios.THROUGHPUT)
        cells[cell.cell_id] = (cell.cell_id, cell.status, measures.unit_of(cell), s.median if s else None, json.dumps(values))
    env_bytes = _env_bytes(bundle)
    row = (
        digest, path.name, str(path.resolve()), size, _iso(time.time()), str(results.run_id), started, _iso(started),
        str(results.status), int(bundle.interrupted), summary.machine, summary.gpu, summary.gpu_count,
        summary.driver, summary.stack, summary.torch, kit_version, len(cells),
        zlib.compress(bundle.files[RESULTS_NAME], 6), zlib.compress(env_bytes, 6),
        encode(run_figures(results)),
    )
    return row, list(cells.values())


_COLUMNS = ("sha256", "file_name", "path", "size_bytes", "added_at", "run_id", "run_started", "run_date", "status",
            "interrupted", "host", "gpu", "gpu_count", "driver", "stack", "torch", "kit", "n_cells", "results_z",
            "env_z", "figures_z")
_INSERT = f"INSERT OR IGNORE INTO bundles ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"


def _same_runs(con: sqlite3.Connection, ready: list) -> dict:
    """(run id, content digest) -> the file name recorded with it, for the run ids of ``ready``."""
    run_ids = sorted({r.row[5] for r in ready})
    out: dict = {}
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start:start + 500]
        for run_id, file_name, results_z, env_z in con.execute(
                f"SELECT run_id, file_name, results_z, env_z FROM bundles WHERE run_id IN ({', '.join('?' * len(chunk))})"
                " ORDER BY id DESC", chunk):
            out[(run_id, stored_digest(results_z, env_z))] = file_name
    return out


def _record(con: sqlite3.Connection, ready: list) -> None:
    """Insert verified bundles in one transaction (the write lock taken first, ``BEGIN IMMEDIATE``); a
    bundle another writer recorded meanwhile, or a copy of a recorded run (same run id, same
    results.json and env.json: kit.index.runs), becomes "already in the index"; one past the most
    runs an index holds (kit.index.bounds.MAX_RUNS) is refused."""
    try:
        con.execute("BEGIN IMMEDIATE")
        try:
            check_schema_again(con)  # the schema checked on opening may have changed since
            recorded = _same_runs(con, ready)
            room = MAX_RUNS - con.execute("SELECT count(*) FROM bundles").fetchone()[0]
            for r in ready:
                same = recorded.get((r.row[5], r.content))
                if same is not None:
                    r.outcome.outcome, r.outcome.reason = PRESENT, f"the same run as {same} (same run id and results): nothing to do"
                    continue
                if room <= 0:
                    r.outcome.outcome, r.outcome.exit_code = REFUSED, UsageError.exit_code
                    r.outcome.reason = (f"the index holds {MAX_RUNS:,} runs, the most an index holds; "
                                        "add it to another index")
                    continue
                room -= 1
                cur = con.execute(_INSERT, r.row)
                if cur.rowcount == 0:
                    r.outcome.outcome, r.outcome.reason = PRESENT, "recorded meanwhile (given twice, or by another writer): nothing to do"
                    continue
                recorded[(r.row[5], r.content)] = r.row[1]
                con.executemany(
                    "INSERT INTO cells (bundle_id, cell_id, status, unit, throughput_median, throughput_json)"
                    " VALUES (?, ?, ?, ?, ?, ?)", [(cur.lastrowid, *c) for c in r.cells])
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
    except sqlite3.OperationalError as exc:  # the busy timeout ran out, the disk is full, ...
        raise KitError(f"cannot write to the index ({exc}); {len(ready)} verified bundle(s) were not added.",
                       remedy="Another `kit index add` may hold the lock for long; run this again (bundles already added are kept).") from None


_KNOWN: frozenset = frozenset()


def _init_worker(known: frozenset, parent: int) -> None:
    global _KNOWN
    _KNOWN = known
    _end_with_parent(parent)


def _end_with_parent(parent: int) -> None:
    """Make this worker end when ``parent`` does, whatever ends it (``kill -9`` gives it no chance
    to stop its pool, and a worker would verify on for nobody). On Linux the kernel sends SIGKILL
    the moment the parent dies (``prctl(PR_SET_PDEATHSIG)``); everywhere, a thread sees the parent
    change (``os.getppid``: an orphan is adopted by another process) and ends the process."""
    import os
    import signal
    import sys
    import threading

    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1 (linux/prctl.h)
        except (OSError, AttributeError):
            pass  # the thread below still ends it

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def prepare(path: Path, known: frozenset | None = None):
    """Verify one bundle and make its rows: a _Ready, or the AddOutcome when it is already in the
    index (by sha256, not opened) or refused. Touches no database (it may run in a worker)."""
    known = _KNOWN if known is None else known
    path = Path(path)
    try:
        if not path.is_file():
            what = "no such file" if not path.exists() else "not a regular file (a folder, device or FIFO)"
            raise UsageError(f"{path}: {what}.")
        digest = _sha256(path)
        if digest in known:
            return AddOutcome(path, PRESENT, "same sha256 as a bundle already recorded: nothing to do", 0, digest)
        bundle = open_bundle(path)  # exactly the checks of `kit bundle verify`
        size = path.stat().st_size
        if _sha256(path) != digest:
            raise BundleError(f"{path.name} changed while it was being added; add it again once it is complete.")
        row, cells = _rows(path, digest, size, bundle)
        problem = row_problem(dict(zip(_COLUMNS, row)), cells)
        if problem:
            raise SchemaError(f"{path.name}: {problem}.")
        content = content_digest(bundle.files[RESULTS_NAME], _env_bytes(bundle))
    except KitError as exc:
        return AddOutcome(path, REFUSED, exc.message, exc.exit_code)
    except OSError as exc:
        return AddOutcome(path, REFUSED, f"{path}: cannot be read ({exc.strerror or exc}).", UsageError.exit_code)
    except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:
        # no bundle the verifier passes should get here; if one does, it is refused alone, named,
        # and the others are still added
        return AddOutcome(path, REFUSED, f"{path.name}: the kit could not record it ({type(exc).__name__}: {exc}); "
                                         "please report this with the bundle.", KitError.exit_code)
    return _Ready(AddOutcome(path, ADDED, "", 0, digest), row, cells, content)


#: verified bundles are written in batches of at most this many, or after this many seconds
BATCH_BUNDLES, BATCH_SECONDS = 50, 1.0
#: with this many bundles or more, they are verified by worker processes (``jobs``)
PARALLEL_FROM = 16


def add_bundles(con: Optional[sqlite3.Connection], paths: Iterable[Path],
                on_outcome: Optional[Callable[[AddOutcome], None]] = None, jobs: int = 1,
                make: Optional[Callable[[], sqlite3.Connection]] = None) -> list[AddOutcome]:
    """Verify and record each bundle. Bundles are verified before the write lock is taken (by
    ``jobs`` worker processes when there are many) and recorded in batches, one transaction each,
    so a writer holds the lock only for the inserts. ``on_outcome`` sees each outcome once it is
    final (an added bundle once its transaction committed). Outcomes are in the order given.
    ``con`` None: the index does not exist yet, and ``make()`` makes it when the first verified
    bundle is recorded (the caller closes what it returns: see :func:`add_to`)."""
    paths = [Path(p) for p in paths]
    known = frozenset(r[0] for r in con.execute("SELECT sha256 FROM bundles")) if con is not None else frozenset()
    outcomes: list = [None] * len(paths)
    batch: list = []
    last = time.monotonic()

    def flush() -> None:
        nonlocal batch, last, con
        if batch:
            if con is None:
                con = make()
            _record(con, [r for _, r in batch])
            for i, r in batch:
                _done(i, r.outcome)
        batch, last = [], time.monotonic()

    def _done(i: int, o: AddOutcome) -> None:
        outcomes[i] = o
        if on_outcome is not None:
            on_outcome(o)

    def take(i: int, prepared) -> None:
        if isinstance(prepared, _Ready):
            batch.append((i, prepared))
            if len(batch) >= BATCH_BUNDLES or time.monotonic() - last >= BATCH_SECONDS:
                flush()
        else:
            _done(i, prepared)

    if jobs > 1 and len(paths) >= PARALLEL_FROM:
        import multiprocessing
        import os
        from concurrent.futures import ProcessPoolExecutor

        # spawned workers: nothing of this process (its open index) is inherited
        ctx = multiprocessing.get_context("spawn")
        from concurrent.futures.process import BrokenProcessPool

        try:
            with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker,
                                     initargs=(known, os.getpid())) as pool:
                for i, prepared in enumerate(pool.map(prepare, paths, chunksize=4)):
                    take(i, prepared)
        except BrokenProcessPool:
            flush()  # what was verified is kept
            raise KitError("a process verifying bundles died (out of memory?); the bundles recorded so far are kept.",
                           remedy="Run the same command again with --jobs 1.") from None
    else:
        for i, p in enumerate(paths):
            take(i, prepare(p, known))
    flush()
    return outcomes


def add_to(index: Path, paths: Iterable[Path], on_outcome: Optional[Callable[[AddOutcome], None]] = None,
           jobs: int = 1, said: Optional[list] = None) -> tuple[list[AddOutcome], bool]:
    """`kit index add`: verify each bundle and record it in the index file ``index``, which is
    opened for writing first (checked; a journal a writer cut short left is rolled back and an
    older schema updated, each said in ``said``). A new index is made only when the first verified
    bundle is recorded: nothing is made when nothing is added. The outcomes, and whether the index
    exists at the end."""
    index = Path(index)
    con = open_index(index, said=said) if check_path(index, create=True) else None
    made: list = []

    def make() -> sqlite3.Connection:
        made.append(open_index(index, create=True, said=said))
        return made[0]

    try:
        outcomes = add_bundles(con, paths, on_outcome, jobs, make)
    finally:
        for c in [con, *made]:
            if c is not None:
                c.close()
    return outcomes, con is not None or bool(made)


def exit_code(outcomes: list[AddOutcome]) -> int:
    """0 when nothing was refused; else the code `kit bundle verify` gives the first refused bundle
    (5 failed verification or unsafe, 4 unknown schema or malformed, 2 not a file)."""
    return next((o.exit_code for o in outcomes if o.outcome == REFUSED), 0)
