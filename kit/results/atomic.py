"""Write files so that a reader never sees half of one.

The data go to a temporary file in the same folder, are flushed and fsynced,
and the temporary file is renamed over the target with ``os.replace`` (atomic
on POSIX within one file system). A writer killed at any point leaves the old
file or no file, never a truncated one; a full disk (ENOSPC, EDQUOT) raises
:class:`kit.errors.DiskFull` (exit 10) naming the folder, with the old file kept.

Every file written here gets the usual mode for a new file (0666 minus the
user's umask), like the journal and run.log that are opened normally: one rule
for every file a run writes, not mkstemp's private 0600.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from kit.errors import DiskFull


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, public: bool = True) -> Iterator[BinaryIO]:
    """Write ``path`` through a binary file handle; it appears only if the block
    finishes. An exception (or a kill) leaves the old file or none, and the
    temporary file is removed. The file gets 0666 minus the umask (``public``
    is kept for callers that still pass it; every file gets that mode)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise DiskFull.from_os_error(exc, path.parent) or exc
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        # a full disk: one line naming the folder (the old file, if any, is untouched)
        full = DiskFull.from_os_error(exc, path.parent)
        if full is not None:
            raise full from None
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    with atomic_open(path) as fh:
        fh.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def current_umask() -> int:
    """The process's umask (os.umask can only be read by setting it; it is set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: some file systems refuse)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class LogFileHandler(logging.FileHandler):
    """run.log's handler: a line that does not fit on a full disk (ENOSPC, EDQUOT) is dropped
    without logging's "--- Logging error ---" traceback on the terminal (the journal and
    results.json, written through this module, say in one line that the disk is full);
    any other error is reported as logging reports it."""

    def handleError(self, record: logging.LogRecord) -> None:
        if DiskFull.from_os_error(sys.exc_info()[1]) is not None:
            return
        super().handleError(record)
