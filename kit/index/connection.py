"""Connections to a results index, the lowest layer of kit.index: SQLite's defensive settings for a
file that may come from anyone, the read-only connection every read uses (kit.index.reader) and the
writer's probe for a hot journal (kit.index.db), and the refusals of what lies beside the file."""

from __future__ import annotations

import sqlite3
import urllib.parse
from pathlib import Path

from kit.errors import UsageError
from kit.index.bounds import SQLITE_HEAP_BYTES
from kit.index.files import neighbours

#: how long a writer waits for another's lock (seconds)
BUSY_TIMEOUT_S = 120.0


def connect(target: str, uri: bool = False) -> sqlite3.Connection:
    """A connection with SQLite's defensive settings, for a file that may come from anyone: no SQL
    function named in the schema runs (``trusted_schema`` off), and where Python offers it (3.12+)
    the defensive flag (no PRAGMA or write to the schema that can corrupt the file). The schema
    itself is checked by :func:`check_schema`, and SQLite's heap is bounded (kit.index.bounds)."""
    # isolation_level=None: the kit opens its transactions itself (BEGIN IMMEDIATE for writes)
    con = sqlite3.connect(target, timeout=BUSY_TIMEOUT_S, isolation_level=None, uri=uri)
    # SQLite's memory is the process's: a value larger than this fails to load (MemoryError), never
    # half the machine's memory (a limit already lower stays)
    limit = con.execute("PRAGMA hard_heap_limit").fetchone()[0]
    if not 0 < limit <= SQLITE_HEAP_BYTES:
        con.execute(f"PRAGMA hard_heap_limit = {SQLITE_HEAP_BYTES}")
    con.execute("PRAGMA trusted_schema = OFF")
    if hasattr(sqlite3, "SQLITE_DBCONFIG_DEFENSIVE"):
        con.setconfig(sqlite3.SQLITE_DBCONFIG_DEFENSIVE, True)
    con.execute("PRAGMA foreign_keys = ON")
    return con


#: SQLITE_READONLY_ROLLBACK (sqlite3.h: SQLITE_READONLY | 3 << 8): a hot journal, a read-only connection
READONLY_ROLLBACK = 776


def is_rollback_needed(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused a read-only read because a hot journal must be rolled back first."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    return code == READONLY_ROLLBACK if code is not None else "readonly database" in str(exc)


def _uri(path: Path, immutable: bool) -> str:
    return f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro" + ("&immutable=1" if immutable else "")


def connect_readonly(path: Path, check_neighbours: bool = True) -> sqlite3.Connection:
    """A read-only connection to ``path`` (kit.index.db.connect's settings); UsageError for a WAL
    file beside it (unless ``check_neighbours`` is off: the writer's probe for a hot journal)."""
    n = neighbours(path)
    if check_neighbours and n.wal_present:
        raise stray_wal(path) if not n.wal_mode else _wal_in_use(path)
    return connect(_uri(path, immutable=n.wal_mode and not n.wal_present), uri=True)


def _wal_in_use(path: Path) -> UsageError:
    return UsageError(
        f"{path}: the index is in WAL mode with a WAL file beside it ({path}-wal), whose transactions a read "
        "would take as the index's (and write a -shm file beside it); refused (nothing was written to it).",
        remedy="If a `kit index add` is running on this host, wait for it; else switch the index back to the kit's "
               f"rollback journal on this host, with no other process using it: sqlite3 {path} 'PRAGMA journal_mode=DELETE'")



def stray_wal(path: Path) -> UsageError:
    """A ``-wal`` file beside an index in rollback-journal mode: SQLite would read its transactions
    as the index's and write them into the file; neither SQLite nor the kit leaves one there."""
    return UsageError(
        f"{path}: a WAL file lies beside it ({path}-wal), which SQLite would read as part of the index and "
        "write into it, though the index is in rollback-journal mode (the kit never leaves one); refused "
        "(nothing was written to it).",
        remedy=f"Move {path}-wal away (the index file itself is whole), then run the command again.")
