"""The index file: an SQLite database (Python's ``sqlite3``) with a versioned schema.

What makes a file the kit's index:

- ``PRAGMA application_id`` is :data:`APPLICATION_ID` (SQLite's field for "which program's file
  is this", in the database header) and the ``meta`` table says ``application = mpkit results index``;
- ``PRAGMA user_version`` is the schema version, :data:`SCHEMA_VERSION`. A file of a newer schema
  is refused (a newer kit wrote it); an older one is migrated when a command that writes opens it
  (:func:`open_index`; a read refuses it, kit.index.reader), step by step (:data:`MIGRATIONS`), in
  one transaction, and the command says so. A new index is made the same way: the first schema,
  then every step, under a temporary name, linked into place whole.

Any other file (another program's database, a text file, a bundle given by mistake) is refused
with one line (:class:`kit.errors.UsageError`, exit 2), and nothing is written to it. So is an
index whose schema is not exactly what this kit makes for its version (:func:`check_schema`: a
trigger would run on the kit's own writes, a view could stand in for a table): a shared index is as
untrusted as a stranger's bundle, and it is opened with SQLite's defensive settings (:func:`connect`).

Locking, for an index in a folder many nodes share: the journal is SQLite's rollback journal
(``journal_mode=DELETE``), never WAL, whose shared-memory index needs every process on one host
(https://www.sqlite.org/wal.html, "All processes using a database must be on the same host computer").
A writer takes the write lock first (``BEGIN IMMEDIATE``) and waits up to :data:`kit.index.connection.BUSY_TIMEOUT_S`
for another writer to finish; each batch of bundles is one transaction, so a writer killed at any point leaves
every bundle recorded whole or not at all. An index found in WAL mode on a network file system is
refused. The rollback journal still relies on the file system's POSIX advisory locks (``fcntl``),
which some shared file systems do not provide (docs/results-index.md lists them).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from kit import __version__
from kit.bundle.inert import inert
from kit.errors import NEWER_KIT_REMEDY, KitError, UsageError
from kit.index.bounds import check_count, check_rows
from kit.index.connection import connect, connect_readonly, is_rollback_needed, stray_wal
from kit.index.files import check_path, filesystem_type, is_network_fs, neighbours, not_ours

#: "mpkt" as a big-endian 32-bit integer: SQLite's application id field for this kit's index files
APPLICATION_ID = 0x6D706B74
APPLICATION = "mpkit results index"
SCHEMA_VERSION = 7
#: how long a writer waits for another's transaction before giving up (many nodes may add at once)

_SCHEMA = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE bundles (
    id           INTEGER PRIMARY KEY,
    sha256       TEXT NOT NULL UNIQUE,   -- of the .tar.gz as added: the bundle's identity
    file_name    TEXT NOT NULL,
    path         TEXT NOT NULL,          -- where it was added from (for the record, never reopened)
    size_bytes   INTEGER NOT NULL,
    added_at     TEXT NOT NULL,          -- UTC, ISO 8601
    run_id       TEXT NOT NULL,
    run_started  REAL,                   -- the run's start, seconds since the epoch (results.json)
    run_date     TEXT NOT NULL,          -- the same, UTC ISO 8601 ("unknown" if not recorded)
    status       TEXT NOT NULL,
    interrupted  INTEGER NOT NULL,
    host         TEXT NOT NULL,
    gpu          TEXT NOT NULL,
    gpu_count    INTEGER,
    driver       TEXT NOT NULL,
    stack        TEXT NOT NULL,
    torch        TEXT NOT NULL,
    kit          TEXT NOT NULL,          -- the kit version that wrote the results
    n_cells      INTEGER NOT NULL,       -- rows in cells for this bundle (a complete record has them all)
    results_z    BLOB NOT NULL,          -- results.json as in the bundle, zlib-compressed
    env_z        BLOB NOT NULL           -- env.json as in the bundle ({} when it had none), zlib-compressed
);
CREATE TABLE cells (
    bundle_id         INTEGER NOT NULL REFERENCES bundles(id) ON DELETE CASCADE,
    cell_id           TEXT NOT NULL,
    status            TEXT NOT NULL,
    unit              TEXT NOT NULL,
    throughput_median REAL,              -- median over repeats (kit.compare.measures.sample)
    throughput_json   TEXT NOT NULL,     -- the per-repeat throughputs, a JSON list
    PRIMARY KEY (bundle_id, cell_id)
);
CREATE INDEX bundles_host ON bundles(host, run_started);
CREATE INDEX bundles_gpu ON bundles(gpu);
CREATE INDEX bundles_started ON bundles(run_started);
"""


def figures_z(results_json: bytes) -> bytes:
    """The stored form of a run's figures (kit.compare.figures.run_figures of its results.json,
    checked by kit.results.schema; kit.index.figures_codec.encode). Raises the schema's error for a
    results.json that is not the kit's."""
    from kit.compare.figures import run_figures
    from kit.index.figures_codec import encode
    from kit.results.schema import RunResults

    return encode(run_figures(RunResults.from_dict(json.loads(results_json), source="results.json")))


def _add_compare_column(con: sqlite3.Connection) -> None:
    """v1 -> v2: ``bundles.compare_z``. Kits of schema v2 stored there the part of each results.json a
    comparison read; from v3 on nothing reads it (the figures replace it) and it is left empty."""
    con.execute("ALTER TABLE bundles ADD COLUMN compare_z BLOB NOT NULL DEFAULT x''")


def _add_figures(con: sqlite3.Connection) -> None:
    """v2 -> v3: ``bundles.figures_z``, each run's figures (what a comparison reads of it, computed
    once: kit.compare.figures); compare_z is emptied. The figures themselves are computed by the
    step to v4, which every migration from v2 or older also takes (computed once, in today's form)."""
    con.execute("ALTER TABLE bundles ADD COLUMN figures_z BLOB NOT NULL DEFAULT x''")
    con.execute("UPDATE bundles SET compare_z = x''")


def _store_figures(con: sqlite3.Connection) -> None:
    """Each run's figures (re)computed from its stored results.json, in today's stored form; a run
    whose copy is damaged gets none (compare names it when it reads it: b"" is not the form).
    v3 -> v4: the figures' numbers packed as float64 (kit.index.figures_codec, format 2); v4 -> v5: with
    each cell's method record (format 3); v5 -> v6: with each cell's verdict (format 4); v6 -> v7: each
    cell's energy per epoch as the run measured it (format 5)."""
    from kit.errors import KitError
    from kit.index.figures_codec import inflate

    ids = [r[0] for r in con.execute("SELECT id FROM bundles")]
    for bundle_id in ids:  # one at a time: a large index is not held in memory at once
        (results_z,) = con.execute("SELECT results_z FROM bundles WHERE id = ?", (bundle_id,)).fetchone()
        try:
            figures = figures_z(inflate(results_z))
        except (ValueError, TypeError, AttributeError, KitError):  # Damaged is a ValueError
            figures = b""  # a damaged copy stays damaged
        con.execute("UPDATE bundles SET figures_z = ? WHERE id = ?", (figures, bundle_id))


#: (version it makes, what it does, the step): each changes the schema of the version before it
MIGRATIONS = (
    (2, "add compare_z (read by the kits of schema v2 only)", _add_compare_column),
    (3, "store each run's figures, what a comparison reads of it (figures_z)", _add_figures),
    (4, "store the figures' numbers packed (figures format 2)", _store_figures),
    (5, "store each cell's method record with its figures (figures format 3)", _store_figures),
    (6, "store each cell's verdict, what bound it, with its figures (figures format 4)", _store_figures),
    (7, "recompute each cell's energy per epoch: the run's measured figure, not the whole cell's energy "
        "over its epochs (figures format 5)", _store_figures),
)


def _expected_schema(version: int) -> dict:
    """What :func:`_create` and the migrations up to ``version`` make: (type, name) -> (table, SQL),
    read from an index made in memory, so the check can never disagree with what the kit makes."""
    if version not in _EXPECTED:
        con = sqlite3.connect(":memory:", isolation_level=None)
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                con.execute(statement)
        for to, _what, step in MIGRATIONS:
            if to <= version:
                step(con)
        _EXPECTED[version] = _schema_of(con)
        con.close()
    return _EXPECTED[version]


_EXPECTED: dict = {}
_KINDS = {"trigger": 0, "view": 1, "table": 2, "index": 3}


def _schema_of(con: sqlite3.Connection) -> dict:
    return {(kind, name): (table, " ".join(sql.split()) if sql else sql)
            for kind, name, table, sql in con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")}


def check_schema(con: sqlite3.Connection, path: Path, version: int) -> None:
    """UsageError unless the file's tables, columns, indexes (and nothing else: no trigger, no view)
    are exactly those this kit makes for schema ``version``. A trigger could run on the kit's writes
    (delete rows, write elsewhere in the file) and a view could stand in for a table, so an index with
    anything else is refused before a row is read or written."""
    found, expected = _schema_of(con), _expected_schema(version)
    # the most telling difference first: a trigger or view, then a table, then an index
    for (kind, name), (table, sql) in sorted(found.items(), key=lambda kv: (_KINDS.get(kv[0][0], 0), kv[0])):
        if (kind, name) in expected:
            if expected[(kind, name)] != (table, sql):
                raise not_ours(path, f"its {kind} {inert(name)!r} is not the one this kit makes (v{version})")
        elif ("table", name) in expected or ("index", name) in expected:
            raise not_ours(path, f"{inert(name)!r} is a {kind} in place of the kit's "
                                  + ("table" if ("table", name) in expected else "index"))
        else:
            raise not_ours(path, f"it holds {'an' if kind == 'index' else 'a'} {kind} the kit did not make ({inert(name)!r}"
                                  + (f" on {inert(table)!r}" if table != name else "") + ")")
    missing = sorted(set(expected) - set(found))
    if missing:
        raise not_ours(path, f"the kit's {missing[0][0]} {missing[0][1]!r} is missing")


def check_schema_again(con: sqlite3.Connection) -> None:
    """:func:`check_schema` inside a writer's transaction (after ``BEGIN IMMEDIATE``): another process
    may have changed the schema since the file was opened and checked."""
    path = Path(con.execute("PRAGMA database_list").fetchone()[2])
    check_schema(con, path, con.execute("PRAGMA user_version").fetchone()[0])


def check_file(con: sqlite3.Connection, path: Path) -> int:
    """Its schema version; UsageError unless the file is this kit's index of a schema it reads (a
    newer one is refused; an older one is the caller's: a writer migrates it, a reader refuses it)."""
    try:
        app_id = con.execute("PRAGMA application_id").fetchone()[0]
        version = con.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as exc:
        raise not_ours(path, f"not an SQLite database, so not a results index ({exc})") from None
    if app_id != APPLICATION_ID or "meta" not in tables:
        raise not_ours(path, "an SQLite database that is not a results index of the kit")
    if version > SCHEMA_VERSION:
        made_by = con.execute("SELECT value FROM meta WHERE key = 'kit_version'").fetchone()
        raise UsageError(
            f"{path}: a results index of schema v{version}, newer than this kit reads (v{SCHEMA_VERSION})"
            + (f"; made by kit {inert(str(made_by[0])[:80])}" if made_by else "") + "; refused (nothing was written to it).",
            remedy=NEWER_KIT_REMEDY)
    if version < 1:
        raise not_ours(path, f"a results index without a schema version (user_version {version})")
    check_schema(con, path, version)  # before a row is read: meta could be a view
    row = con.execute("SELECT value FROM meta WHERE key = 'application'").fetchone()
    if not row or row[0] != APPLICATION:
        raise not_ours(path, "an SQLite database that is not a results index of the kit")
    mode = con.execute("PRAGMA journal_mode").fetchone()[0]
    if str(mode).lower() == "wal" or neighbours(path).wal_mode:  # a reader opens a WAL file immutable
        fstype = filesystem_type(path)
        if is_network_fs(fstype):
            raise UsageError(
                f"{path}: the index is in WAL mode on a {fstype} file system, where WAL does not work "
                "(its shared memory is not shared between hosts); refused.",
                remedy="Switch it back on one host, with no other process using it: "
                       f"sqlite3 {path} 'PRAGMA journal_mode=DELETE'")
    return version


def _steps(con: sqlite3.Connection, version: int) -> int:
    """Apply every migration after ``version`` (inside the caller's transaction); the new version. A
    step the next one repeats (the figures recomputed in a newer form) runs once, as the last."""
    todo = [(to, step) for to, _what, step in MIGRATIONS if to > version]
    for i, (to, step) in enumerate(todo):
        if i + 1 == len(todo) or todo[i + 1][1] is not step:
            step(con)
        version = to
    con.execute(f"PRAGMA user_version = {version}")
    return version


def _create(con: sqlite3.Connection) -> None:
    import time

    con.execute("BEGIN IMMEDIATE")
    try:
        # another process may have created it while this one waited for the lock
        if con.execute("PRAGMA user_version").fetchone()[0] == 0 and not con.execute(
                "SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
            # one statement at a time: executescript would commit the open transaction first
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    con.execute(statement)
            con.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [
                ("application", APPLICATION),
                ("kit_version", __version__),
                ("created_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
            ])
            con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            _steps(con, 1)  # the first schema, then every step: one way to each version
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise


def _migrate(con: sqlite3.Connection, path: Path, version: int) -> str:
    """Bring an index of an older schema to :data:`SCHEMA_VERSION`, in one transaction (a process
    killed halfway leaves it as it was); another process may have done it while this one waited.
    What it did, in words ("" if another process had)."""
    import time

    todo = "; ".join(what for to, what, _ in MIGRATIONS if to > version)
    try:
        con.execute("BEGIN IMMEDIATE")
        now = con.execute("PRAGMA user_version").fetchone()[0]
        if now < SCHEMA_VERSION:
            _steps(con, now)
            con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (
                f"migrated_v{now}_to_v{SCHEMA_VERSION}",
                f"by kit {__version__} at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"))
        con.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise KitError(
            f"{path}: a results index of schema v{version}; this kit reads v{SCHEMA_VERSION} and updates it once "
            f"({todo}), which needs to write it ({exc}).",
            remedy=f"Update it once where the file can be written: kit index add --index {path}") from None
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    return f"updated from schema v{now} to v{SCHEMA_VERSION} ({todo})" if now < SCHEMA_VERSION else ""


def _make(path: Path) -> None:
    """A new index at ``path``, made under a temporary name beside it and linked into place whole:
    no process ever sees it half made, nor an empty file, and where another writer made one
    meanwhile, that one stays (``os.link`` does not replace). On a file system without hard links
    it is renamed into place if no file is there yet."""
    import secrets

    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.new")
    try:
        con = connect(str(tmp))
        try:
            con.execute("PRAGMA journal_mode = DELETE")
            _create(con)
        finally:
            con.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another writer made it first: theirs is used
        except OSError:
            if not path.exists():
                os.replace(tmp, path)
    finally:
        for leftover in (tmp, Path(f"{tmp}-journal")):
            try:
                leftover.unlink()
            except FileNotFoundError:
                pass


def _journal_is_hot(path: Path) -> bool:
    """Whether SQLite finds a hot journal beside the index (one no writer holds: left by a writer
    cut short, or put there): it refuses to read the file read-only until it is rolled back."""
    if not neighbours(path).journal_bytes:
        return False
    try:
        con = connect_readonly(path, check_neighbours=False)
    except sqlite3.Error:
        return False
    try:
        con.execute("PRAGMA schema_version").fetchone()
        return False
    except sqlite3.OperationalError as exc:
        return is_rollback_needed(exc)
    finally:
        con.close()


def _try_rollback(path: Path) -> None:
    """Roll the hot journal back on a private copy first: UsageError, with the file and the journal
    left as they are, when the file it makes is not an index of the kit (a journal another program
    left, or one put there to plant a trigger: rolled back, it would be part of the file)."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kit-index-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        shutil.copyfile(f"{path}-journal", f"{copy}-journal")
        con = connect(str(copy))
        try:
            check_file(con, path)
            _check_content(con, path)  # what the real file will be, checked before it is touched
        except UsageError as exc:
            raise UsageError(
                exc.message.replace("; refused", f", once {path}-journal beside it is rolled back into it; refused"),
                remedy=f"{path}-journal was not left by the kit: move it away, then run the command again.") from None
        finally:
            con.close()


def open_index(path: str | Path, create: bool = False, said: list | None = None) -> sqlite3.Connection:
    """A connection to write the index at ``path``, checked. ``create``: make a new index there if
    there is no file (``kit index add``; an empty file is refused, as any file that is not an index).
    Opening it rolls back a hot journal a writer cut short left (once a private copy shows what it
    makes is still the kit's index) and updates an older schema; ``said`` gets a line for each."""
    path = Path(path)
    exists = check_path(path, create)
    n = neighbours(path)
    if exists and n.wal_present and not n.wal_mode:
        raise stray_wal(path)
    hot = exists and _journal_is_hot(path)
    if hot:
        _try_rollback(path)
    con = None
    try:
        if not exists:
            _make(path)
        con = connect(str(path))
        version = check_file(con, path)  # its first read rolls a hot journal back
        if hot and said is not None:
            said.append(f"{path}: rolled back {path}-journal, left by a writer that was cut short "
                        "(its last batch is undone, as SQLite does).")
        _check_content(con, path)
        if version < SCHEMA_VERSION:
            done = _migrate(con, path, version)
            if done and said is not None:
                said.append(f"{path}: {done}.")
    except BaseException as exc:
        if con is not None:
            con.close()
        _raise_open_error(path, exc)
    return con


def _check_content(con: sqlite3.Connection, path: Path) -> None:
    """The limits of kit.index.bounds: the number of runs, every column of every run."""
    check_count(con, path)
    check_rows(con, path)


def _raise_open_error(path: Path, exc: BaseException) -> None:
    """Raise ``exc`` as the one line it is for a writer opening the index."""
    if isinstance(exc, sqlite3.OperationalError):
        raise KitError(f"{path}: cannot open the index ({exc}).",
                       remedy="Check the file's permissions and that its folder can be written (SQLite writes a journal beside it).") from None
    if isinstance(exc, sqlite3.DatabaseError):
        raise not_ours(path, f"not a usable SQLite database ({exc})") from None
    raise exc
