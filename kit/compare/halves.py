"""Writing a large comparison's text on two CPUs: the second half in a forked child.

The terminal view of 200 runs of the full CIFAR suite is 156 per-cell tables of 200 machines each,
written line by line in Python. The tables are independent, so :func:`map_text` has a child process
(``os.fork``: it starts with the comparison already in memory, nothing is copied or pickled) write
the second half of them while this process writes the first, and reads the child's text back
through a pipe. The text is the one the same function gives in one process; where there is no fork
(Windows), only one CPU to run on, few items, or the child fails in any way, this process writes
every item itself. (``--json`` does not use it: orjson writes a fleet's rows in less time than
forking a process of that size costs.)
"""

from __future__ import annotations

import os
import struct
from typing import Callable, Sequence

#: below this much work (items x their size, as the caller counts it: a comparison's rows x machines)
#: one process writes it all (a fork costs a few milliseconds)
MIN_WORK = 2000


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the CPUs this process may run on (taskset, cgroups)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _child(fn: Callable, items: Sequence, fd: int) -> None:
    """In the child: write each item's text, length-prefixed, then leave at once (os._exit: no
    atexit handler, no flushing of the parent's buffered output, no return into the caller)."""
    code = 1
    try:
        data = [fn(x).encode("utf-8") for x in items]
        out = struct.pack(f"<{len(data)}Q", *map(len, data)) + b"".join(data)
        view = memoryview(out)
        while view:
            view = view[os.write(fd, view):]
        code = 0
    finally:
        os._exit(code)


def _parse(blob: bytes, n: int) -> list[str] | None:
    head = 8 * n
    if len(blob) < head:
        return None
    sizes = struct.unpack(f"<{n}Q", blob[:head])
    if head + sum(sizes) != len(blob):
        return None
    out, at = [], head
    for size in sizes:
        out.append(blob[at:at + size].decode("utf-8"))
        at += size
    return out


def map_text(fn: Callable[[object], str], items: Sequence, size: int = 1) -> list[str]:
    """``[fn(x) for x in items]``, the second half computed by a forked child where that helps:
    ``len(items) * size`` of at least :data:`MIN_WORK` (``size``: how big one item is, e.g. the
    machines in a row), two items or more, a fork and two CPUs."""
    items = list(items)
    if len(items) < 2 or len(items) * size < MIN_WORK or not hasattr(os, "fork") or _cpus() < 2:
        return [fn(x) for x in items]
    half = len(items) // 2
    try:
        r, w = os.pipe()
    except OSError:
        return [fn(x) for x in items]
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return [fn(x) for x in items]
    if pid == 0:  # the child
        os.close(r)
        _child(fn, items[half:], w)
    os.close(w)
    theirs = None
    try:
        mine = [fn(x) for x in items[:half]]
        blob = _read_all(r)
        _, status = os.waitpid(pid, 0)
        pid = 0
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            theirs = _parse(blob, len(items) - half)
    finally:
        os.close(r)
        if pid:  # interrupted before the child was reaped: stop it, leave no zombie
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except OSError:
                pass
    if theirs is None:  # the child failed: this process writes its half too
        theirs = [fn(x) for x in items[half:]]
    return mine + theirs
