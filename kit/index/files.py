"""What a path given as an index is, and what lies beside it, before SQLite opens anything.

SQLite opens whatever it is given: a FIFO blocks it or reads as "disk I/O error", an empty file
becomes a new database, and a ``-journal`` or ``-wal`` file beside the index is part of the
database to SQLite: a hot journal is rolled back into the file on the first read, and a WAL file's
transactions are read as the index's own (and checkpointed into it when the last connection
closes). So the kit looks first:

- the path is a regular file that starts with SQLite's header (:func:`check_path`); a folder, FIFO,
  device or socket, an empty file, or a file of another format is one line, exit 2, and is neither
  read by SQLite nor written;
- :func:`neighbours`: the journal and WAL files beside it, and whether the file's header says WAL
  mode (bytes 18 and 19 of the database header, "file format write/read version": 2 is WAL,
  https://www.sqlite.org/fileformat.html, section 1.3.3).

The kit never makes an empty index file: a new index is made under a temporary name and linked into
place whole (kit.index.db), so an empty file at the path is never one of its own being made.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from kit.errors import UsageError

SQLITE_HEADER = b"SQLite format 3\x00"


def not_ours(path: Path, why: str, read: bool = True) -> UsageError:
    """The one line for a file that is not a results index of the kit: nothing was written to it."""
    done = "nothing was written to it" if read else "nothing was read from it or written to it"
    return UsageError(f"{path}: {why}; refused ({done}).",
                      remedy="Give the index file that `kit index add` made, or a new path for a new index.")


def _kind(mode: int) -> str | None:
    """What a file that is not a regular file is, in words; None for a regular file."""
    for test, what in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return None if stat.S_ISREG(mode) else "not a regular file"


def check_path(path: Path, create: bool = False) -> bool:
    """True when ``path`` is an existing file that starts as an SQLite database does; False when
    there is none and ``create`` (a writer may make it there). UsageError (exit 2) for anything
    else, named as what it is: no file (without ``create``), a missing folder, a folder, FIFO,
    device or socket (never opened: a FIFO would block), an empty file, another format."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not create:
            raise UsageError(f"{path}: no such index.",
                             remedy=f"Make one with: kit index add --index {path} BUNDLE...") from None
        if not path.parent.is_dir():
            raise UsageError(f"{path}: the folder {path.parent} does not exist.") from None
        return False
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc}).") from None
    kind = _kind(st.st_mode)
    if kind == "a folder":
        raise UsageError(f"{path} is a folder, not an index file.", remedy="Give a file path, e.g. --index results/index.sqlite.")
    if kind is not None:
        raise not_ours(path, f"{kind}, not a results index file", read=False)
    if st.st_size == 0:
        raise UsageError(
            f"{path}: an empty file (0 bytes), not a results index; refused (nothing was written to it).",
            remedy=f"Remove it and `kit index add --index {path} BUNDLE...` makes a new index there, or give the index file.")
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc}).") from None
    if head != SQLITE_HEADER:
        raise not_ours(path, "not an SQLite database, so not a results index")
    return True


@dataclass(frozen=True)
class Neighbours:
    """What lies beside an index file, and what its header says."""

    journal: Path  # PATH-journal: SQLite's rollback journal
    wal: Path  # PATH-wal: a write-ahead log
    journal_bytes: int  # 0 where there is none
    wal_present: bool
    wal_mode: bool  # the header says WAL mode


def neighbours(path: Path) -> Neighbours:
    journal, wal = Path(f"{path}-journal"), Path(f"{path}-wal")
    try:
        journal_bytes = os.lstat(journal).st_size
    except OSError:
        journal_bytes = 0
    wal_present = os.path.lexists(wal)
    try:
        with open(path, "rb") as fh:
            header = fh.read(20)
    except OSError:
        header = b""
    return Neighbours(journal, wal, journal_bytes, wal_present, 2 in header[18:20])


# ----------------------------------------------------------------------------- the file system it is on
#: file system types (as /proc/self/mountinfo names them) on which WAL mode is refused: network and
#: cluster file systems, and FUSE file systems, whose shared memory is not shared between hosts
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "lustre", "gpfs", "ceph", "glusterfs",
              "beegfs", "afs", "fuse")

MOUNTINFO = "/proc/self/mountinfo"


def _mount(path: Path, mountinfo: str = MOUNTINFO) -> tuple[str, str, str]:
    """(mount point, file system type, mount options) of the mount holding ``path`` (the longest
    matching mount point in /proc/self/mountinfo); ("", "unknown", "") off Linux."""
    target = os.path.realpath(path if path.exists() else path.parent)
    best = ("", "unknown", "")
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fields, rest = left.split(), right.split()
                if len(fields) < 6 or not rest:
                    continue
                mount = fields[4].replace("\\040", " ")
                inside = target == mount or target.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best[0]):
                    best = (mount, rest[0], fields[5] + "," + (rest[2] if len(rest) > 2 else ""))
    except OSError:
        pass
    return best


def filesystem_type(path: Path) -> str:
    """The type of the file system holding ``path`` ("nfs4", "ext4", ...; "unknown" off Linux)."""
    return _mount(path)[1]


def lock_warning(path: Path, mountinfo: str = MOUNTINFO) -> str | None:
    """A sentence when the index's file system is known to keep locks on each node only (NFS mounted
    with ``nolock`` or ``local_lock=``): writers on two nodes would not see each other's lock."""
    mount, fstype, options = _mount(path, mountinfo)
    opts = set(options.split(","))
    if fstype.startswith("nfs") and ("nolock" in opts or "local_lock=all" in opts or "local_lock=posix" in opts):
        return (f"{path}: {mount} is an NFS mount whose locks are local to this node ({options}); "
                "run `kit index add` on one node at a time, or the index can be damaged (docs/results-index.md).")
    return None


def is_network_fs(fstype: str) -> bool:
    base = fstype.split(".", 1)[0]
    return base in NETWORK_FS
