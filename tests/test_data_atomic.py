"""A writer killed mid-write never leaves a partial file under the real name.

Each test starts a child process, lets it get into the middle of writing (it says
so on stdout and waits), SIGKILLs it, and checks what is left under the real name.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kit

REPO = Path(kit.__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")


def _kill_when_ready(code: str, *args: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        line = child.stdout.readline()
        assert line.strip() == "mid-write", f"child did not reach the middle of the write: {line!r} {child.stderr.read()}"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL


# The child pauses inside fsync: the data is in the temporary file, the rename has not happened.
ATOMIC_CHILD = """
    import os, sys, time
    from kit.results import atomic

    def stall(fd):
        print("mid-write", flush=True)
        time.sleep(60)

    atomic.os.fsync = stall
    atomic.atomic_write_bytes(sys.argv[1], b"NEW" * 1_000_000)
"""


@pytest.mark.parametrize("old", [None, b"OLD CONTENTS"], ids=["no-old-file", "old-file"])
def test_atomic_write_killed_midway_leaves_old_file_or_nothing(tmp_path, old):
    target = tmp_path / "results.json"
    if old is not None:
        target.write_bytes(old)
    _kill_when_ready(ATOMIC_CHILD, str(target))
    if old is None:
        assert not target.exists()
    else:
        assert target.read_bytes() == old
    # the child really was mid-write: its temporary file is there, hidden, never under the real name
    leftovers = [p for p in tmp_path.iterdir() if p != target]
    assert leftovers and all(p.name.startswith(".results.json.") and p.suffix == ".tmp" for p in leftovers)


# The child's "server" sends half the archive, then stalls; the kit is mid-download.
FETCH_CHILD = """
    import dataclasses, sys, time
    from kit.data.fetch import fetch_file
    from kit.facts.datasets import CIFAR100

    data = b"x" * 300_000
    facts = dataclasses.replace(CIFAR100, md5="0" * 32, sha256=None, mirrors=("http://fixture.invalid/f",))

    class Stalling:
        headers = {"Content-Length": str(len(data))}
        pos = 0
        def read(self, n):
            if self.pos >= len(data) // 2:
                print("mid-write", flush=True)
                time.sleep(60)
            out = data[self.pos:self.pos + min(n, 10_000)]
            self.pos += len(out)
            return out

    fetch_file(facts, sys.argv[1], opener=lambda url, timeout: Stalling(), progress=False)
"""


@pytest.mark.parametrize("old", [None, b"previous download"], ids=["no-old-file", "old-file"])
def test_download_killed_midway_leaves_old_file_or_nothing(tmp_path, old):
    target = tmp_path / "cifar-100-python.tar.gz"
    if old is not None:
        target.write_bytes(old)
    _kill_when_ready(FETCH_CHILD, str(tmp_path))
    if old is None:
        assert not target.exists()
    else:
        assert target.read_bytes() == old
    leftovers = [p for p in tmp_path.iterdir() if p != target and p.name != ".kit"]
    assert leftovers and all(p.name.startswith(".cifar-100-python.tar.gz.") and p.suffix == ".part" for p in leftovers)
