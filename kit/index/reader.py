"""Opening the index to read it: `kit compare --index`, `kit index list`, `kit index history` and
their HTML and JSON views. A read never writes, neither the index nor anything beside it.

How (docs/results-index.md, "How a read opens the index"):

- The file is opened read-only through SQLite's URI, ``file:PATH?mode=ro``: SQLite opens it with
  ``O_RDONLY``, so it cannot roll a journal back into it, checkpoint a WAL into it or migrate it.
  SQLite's locks are kept, so a reader waits while a writer commits a batch and never sees half of
  one (a reader opened ``immutable=1`` takes no lock and can, which is why that is not the default).
- A **hot journal** beside it (one no writer holds: a writer was cut short, or the file was put
  there) is what SQLite must roll back before the file can be read; read-only, it refuses
  (``SQLITE_READONLY_ROLLBACK``), and so does the kit, in one line: the next `kit index add` rolls
  it back, and says so (kit.index.db.open_index).
- A **WAL file** beside it is refused before SQLite opens anything: read-only, SQLite would still
  read its transactions as the index's and make a ``-shm`` file beside it. An index whose header
  says WAL mode (someone switched it) with no WAL file beside it is read ``immutable=1``: with no
  WAL file, every transaction is in the file itself, and SQLite then makes no ``-wal`` or ``-shm``.
- An index of an **older schema** is refused with the command that updates it: migrating writes.
- Then the limits of kit.index.bounds, before any row is read: the number of runs, and every
  column of every row.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from kit.errors import KitError, UsageError
from kit.index.bounds import check_count, check_rows, damaged
from kit.index.connection import connect_readonly, is_rollback_needed
from kit.index.files import check_path

def open_reader(path: str | Path) -> sqlite3.Connection:
    """A read-only connection to the index at ``path``, checked (its identity and schema, the
    limits of kit.index.bounds); UsageError (exit 2) for a file that is not an index of this kit's
    schema, a hot journal or a WAL file beside it; SchemaError (exit 4) for a value the kit never
    writes. Nothing is written, whatever the file."""
    from kit.index.db import SCHEMA_VERSION, check_file

    path = Path(path)
    check_path(path, create=False)
    try:
        con = connect_readonly(path)
    except sqlite3.Error as exc:
        raise KitError(f"{path}: cannot open the index ({exc}).", remedy="Check that the file can be read.") from None
    try:
        try:
            con.execute("PRAGMA schema_version").fetchone()  # SQLite looks for a hot journal here
        except sqlite3.OperationalError as exc:
            if is_rollback_needed(exc):
                raise _hot_journal(path) from None
            raise
        version = check_file(con, path)
        if version < SCHEMA_VERSION:
            raise UsageError(
                f"{path}: a results index of schema v{version}; this kit reads v{SCHEMA_VERSION}, and updates an "
                "older index only in a command that writes; refused (nothing was written to it).",
                remedy=f"Update it once where it can be written: kit index add --index {path} "
                       "(with no bundle, that only updates it); then read it again.")
        check_count(con, path)
        check_rows(con, path)
    except BaseException as exc:
        con.close()
        if isinstance(exc, sqlite3.DatabaseError):
            raise _unreadable(path, exc) from None
        raise
    return con


def _unreadable(path: Path, exc: sqlite3.DatabaseError) -> KitError:
    """An SQLite error while reading: a busy writer past the timeout (exit 1), or damage (exit 4)."""
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return KitError(f"{path}: the index stayed locked by a writer ({exc}); nothing was read.",
                        remedy="Run the command again once the `kit index add` that holds it has ended.")
    return damaged(path, f"SQLite cannot read it ({exc})")


@contextmanager
def reading(path: str | Path) -> Iterator[sqlite3.Connection]:
    """:func:`open_reader`, closed at the end; an SQLite error while the index is read (a damaged
    page found past the first checks) is one line, as any damage."""
    con = open_reader(path)
    try:
        yield con
    except sqlite3.DatabaseError as exc:
        raise _unreadable(Path(path), exc) from None
    finally:
        con.close()


def _hot_journal(path: Path) -> UsageError:
    return UsageError(
        f"{path}: a journal lies beside it ({path}-journal) that no writer holds: a `kit index add` was cut "
        "short, or the file was put there; reading would roll it back into the index, which a read does not "
        "do; refused (nothing was written to it).",
        remedy=f"If a `kit index add` was cut short here, `kit index add --index {path}` rolls it back (and says "
               "so); if you do not know where the journal came from, move it away.")
