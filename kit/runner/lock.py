"""One writer per run folder: an OS lock on ``<run folder>/run.lock`` for the whole run.

Two processes writing one run folder (``kit run --resume DIR`` while the first
``kit run`` still writes DIR) interleave their journals: duplicate ``seq``
numbers, two ``cell_end`` per cell, two ``run_end`` and two bundles. So the
runner takes an exclusive ``flock`` on ``run.lock`` before it writes anything
into the folder, and holds it until the run has ended. A second writer is
refused with the holder's pid and host (written into the file), exit code 2.

The lock belongs to the open file, not to the file's existence: when the holder
dies (a crash, ``kill -9``, a power cut) the operating system drops it, so a
stale lock never blocks. A lock file that a dead process left behind is taken
over, and :attr:`RunLock.took_over` says whose it was (the runner writes that
into the journal). A clean release removes the file.

Where ``flock`` is not available (no ``fcntl``, or a file system that refuses
it), the pid and host in the file decide instead: a live pid on this host
holds the folder, anything else is stale.

Python 3.7 syntax (the cuda10 image runs the runner).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from pathlib import Path

from kit.errors import UsageError

try:
    import fcntl
except ImportError:  # not Linux/macOS: the pid check below does the work
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = "run.lock"
_BUSY = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES)


def _host() -> str:
    return socket.gethostname() or "unknown host"


class RunLock:
    """The exclusive lock on one run folder. ``acquire()`` or raise; ``release()`` when done."""

    def __init__(self, run_dir: "str | os.PathLike") -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self._fd: int | None = None
        #: who held the folder before us and died without releasing it ("pid N on host H"), or None
        self.took_over: str | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "RunLock":
        """Take the lock, or raise UsageError (exit 2) naming the process that holds it."""
        if self._fd is not None:
            return self
        while True:
            try:
                fd = os.open(str(self.path), os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise UsageError(
                    f"cannot lock the run folder {self.run_dir}: {exc.strerror or exc}",
                    remedy="The run folder must be a folder you can write in.",
                ) from None
            try:
                locked = self._flock(fd)
            except BaseException:
                os.close(fd)
                raise
            previous = _read_holder(fd)
            if not locked and _alive(previous):
                os.close(fd)
                raise _in_use(self.run_dir, previous)
            if locked and not _same_file(fd, self.path):
                # the holder released (and removed) the file between our open and our lock:
                # the lock we got is on a file nobody else will see; start again
                os.close(fd)
                continue
            break
        if previous:
            self.took_over = _describe(previous)
        _write_holder(fd)
        self._fd = fd
        return self

    def writer(self) -> "dict | None":
        """The process that holds the folder (its ``pid`` and ``host``, "unknown" where the lock file
        does not say), or None when no process does; never creates or changes anything (for a
        folder we only read, maybe read-only)."""
        try:
            fd = os.open(str(self.path), os.O_RDONLY)
        except OSError:
            return None  # no lock file: no writer (a writer creates it before writing anything)
        try:
            holder = _read_holder(fd)
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    return None  # nobody holds it exclusively: a left-over file of a dead run
                except OSError as exc:
                    if exc.errno in _BUSY:
                        return holder or {"pid": "unknown", "host": "unknown"}
            return holder if _alive(holder) else None
        finally:
            os.close(fd)

    def check_not_in_use(self) -> None:
        """Raise the "in use" UsageError when another process holds the folder; never
        creates or changes anything (:meth:`writer`)."""
        holder = self.writer()
        if holder is not None:
            raise _in_use(self.run_dir, holder)

    def release(self) -> None:
        """Remove the lock file and drop the lock (in that order, so no one locks a removed file)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.unlink(str(self.path))
        except OSError:
            pass
        os.close(fd)  # closing the last descriptor drops the flock

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _flock(self, fd: int) -> bool:
        """True: we hold the OS lock. False: no OS lock here (decide by pid). Raises if busy."""
        if fcntl is None:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno in _BUSY:
                holder = _read_holder(fd)
                raise _in_use(self.run_dir, holder) from None
            return False  # e.g. ENOLCK, EOPNOTSUPP on some network file systems


def _in_use(run_dir: Path, holder: "dict | None") -> UsageError:
    pid = (holder or {}).get("pid", "unknown")
    host = (holder or {}).get("host", "unknown")
    return UsageError(
        f"run folder in use (pid {pid}, host {host}): {run_dir} is being written by another kit run.",
        # SIGTERM, not SIGINT: a run started in the background of a script ignores SIGINT; SIGTERM
        # stops any run as Ctrl-C does (kit.runner.stop_signals), finished cells kept
        remedy=(f"Wait for that run to end (or stop it: kill -TERM {pid} on {host}; it keeps its finished cells), "
                f"then resume it. If that process is gone (a crashed container, another machine), delete "
                f"{run_dir / LOCK_NAME} and resume."),
    )


def _read_holder(fd: int) -> "dict | None":
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, 4096)
    except OSError:
        return None
    if not data.strip():
        return None
    try:
        obj = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return {"pid": "unknown", "host": "unknown"}
    return obj if isinstance(obj, dict) else {"pid": "unknown", "host": "unknown"}


def _write_holder(fd: int) -> None:
    record = {"pid": os.getpid(), "host": _host(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, (json.dumps(record) + "\n").encode("utf-8"))


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(str(path))
    except OSError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _alive(holder: "dict | None") -> bool:
    """Without an OS lock: does the recorded holder still run? (Another host's pid: assume so.)"""
    if not holder:
        return False
    if holder.get("host") != _host():
        return True
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def _describe(holder: dict) -> str:
    return f"pid {holder.get('pid', 'unknown')} on host {holder.get('host', 'unknown')}"
