"""Write files so that a reader never sees half of one.

The data go to a temporary file in the same folder, are flushed and fsynced,
and the temporary file is renamed over the target with ``os.replace`` (atomic
on POSIX within one file system). A writer killed at any point leaves the old
file or no file, never a truncated one.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Iterator


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, public: bool = False) -> Iterator[BinaryIO]:
    """Write ``path`` through a binary file handle; it appears only if the block
    finishes. An exception (or a kill) leaves the old file or none, and the
    temporary file is removed. ``public`` gives the file the usual mode for new
    files (0666 minus umask) instead of mkstemp's 0600, for shared data folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if public:
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
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
