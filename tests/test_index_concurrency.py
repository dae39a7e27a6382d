"""The results index under processes that die or write at once (SYNTHETIC bundles,
tests/test_index_fixtures.py): `kill -9` during `kit index add` leaves a consistent index with every
recorded bundle whole, and two `kit index add` side by side both land without losing a bundle."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.results.factory import bundle_members, write_bundle
from test_index_fixtures import ROOT, kit_cli, make_bundle


def _check_consistent(index: Path) -> list[tuple]:
    """integrity_check passes and every recorded bundle has all its cells; the rows."""
    con = sqlite3.connect(index)
    try:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        rows = con.execute("SELECT host, run_id, n_cells, (SELECT COUNT(*) FROM cells WHERE bundle_id = bundles.id), "
                           "length(results_z) > 0 FROM bundles").fetchall()
    finally:
        con.close()
    for host, run_id, n_cells, cells, has_results in rows:
        assert n_cells == cells == 3 and has_results, (host, run_id)
    assert len({r[1] for r in rows}) == len(rows)
    return rows


def _count(index: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=30)  # makes no file where none is
        try:
            return con.execute("SELECT COUNT(*) FROM bundles").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:  # not made yet
        return 0


def _copies(tmp_path: Path, n: int) -> list[Path]:
    """``n`` bundles: 10 made by the kit's writer, and copies of them as other runs (run id changed,
    manifest re-hashed), which are quicker to make."""
    made = [make_bundle(tmp_path, f"fixture-node{i:03d}", i) for i in range(10)]
    out = list(made)
    for k in range(n - len(made)):
        src = made[k % len(made)]
        files = bundle_members(src)
        files["results.json"] = files["results.json"].replace(b'"run_id": "FIXTURE-', f'"run_id": "FIXTURE-copy{k}-'.encode(), 1)
        out.append(write_bundle(tmp_path / "bundles" / f"copy{k:03d}.tar.gz", files, rehash=True))
    return out


def test_kill_9_during_an_ingest_leaves_the_index_consistent(tmp_path):
    bundles = _copies(tmp_path, 150)
    index = tmp_path / "index.sqlite"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # one process verifying (--jobs 1): slow enough that batches commit one after another
    proc = subprocess.Popen([sys.executable, "-m", "kit", "index", "add", "--jobs", "1", "--index", str(index), *map(str, bundles)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _count(index) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    kept = _check_consistent(index)
    assert len(kept) < len(bundles)  # it was stopped part way (the check above holds either way)
    # the next add finishes the job: what was recorded is a no-op, the rest is added
    done = kit_cli("index", "add", "--index", str(index), *map(str, bundles))
    assert done.returncode == 0, done.stderr
    assert f"{len(bundles) - len(kept)} added, {len(kept)} already in the index, 0 refused" in done.stderr
    assert len(_check_consistent(index)) == len(bundles)


def test_two_writers_at_once_both_land(tmp_path):
    a = [make_bundle(tmp_path, f"fixture-a{i:02d}", i) for i in range(15)]
    b = [make_bundle(tmp_path, f"fixture-b{i:02d}", i) for i in range(15)]
    index = tmp_path / "shared" / "index.sqlite"
    index.parent.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # both start on a missing index: one creates it while the other waits for the lock;
    # the shared bundle (a[0]) is offered to both and recorded once
    procs = [subprocess.Popen([sys.executable, "-m", "kit", "index", "add", "--index", str(index), *map(str, part)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for part in (a, [a[0], *b])]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    rows = _check_consistent(index)
    assert sorted(r[0] for r in rows) == sorted([f"fixture-a{i:02d}" for i in range(15)] + [f"fixture-b{i:02d}" for i in range(15)])
    said = "".join(err for _, err in results)
    assert said.count("added    ") == 30 and said.count("no-op") == 1


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux: /proc/PID/stat's fourth field)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    """Running (not gone, and not a zombie waiting for a parent that does not reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc (Linux)")
def test_kill_9_of_kit_index_add_ends_its_verifier_processes(tmp_path):
    """`kill -9` gives the parent no chance to stop its pool: the workers notice by themselves that their
    parent is gone, and end (kit.index.ingest's workers), instead of verifying on for nobody."""
    bundles = _copies(tmp_path, 60)
    index = tmp_path / "index.sqlite"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "kit", "index", "add", "--jobs", "2", "--index", str(index),
                             *map(str, bundles)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list = []
    deadline = time.monotonic() + 120
    while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        workers = [p for p in _children(proc.pid) if _alive(p)]
    assert len(workers) >= 2 and proc.poll() is None, "the verifier pool did not start"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 20
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in workers if _alive(p)]
    for p in left:  # tidy up what this test started, then fail
        os.kill(p, signal.SIGKILL)
    assert not left, f"{len(left)} verifier process(es) outlived their parent"


_HOLDER = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN IMMEDIATE")  # the write lock, as another `kit index add` holds it for a batch
print("holding", flush=True)
sys.stdin.readline()            # until the test says so
con.execute("COMMIT")
print("released", flush=True)
"""


def _add_process(index: Path, bundle: Path, busy_timeout: float | None = None) -> subprocess.Popen:
    """`kit index add` in a process of its own; ``busy_timeout`` replaces the kit's (the control below)."""
    patch = "" if busy_timeout is None else f"import kit.index.connection as d; d.BUSY_TIMEOUT_S = {busy_timeout}; "
    code = patch + "import sys; from kit.cli.main import main; main(sys.argv[1:])"
    return subprocess.Popen([sys.executable, "-c", code, "index", "add", "--index", str(index), str(bundle)],
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid`` (clock ticks); -1 where /proc cannot say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return -1


def _until_idle(pid: int, at_least: float, deadline: float = 120.0) -> None:
    """Wait ``at_least`` seconds, and on Linux until ``pid`` has used no more than 2 ticks of CPU over a
    second: a process waiting for a lock sleeps, one still starting or verifying does not."""
    start = time.monotonic()
    last = _cpu_ticks(pid)
    while time.monotonic() - start < deadline:
        time.sleep(1.0)
        now = _cpu_ticks(pid)
        if time.monotonic() - start >= at_least and (now < 0 or now - last <= 2):
            return
        last = now


def test_kit_index_add_waits_for_a_writer_that_holds_the_lock_and_then_lands(tmp_path):
    """Deterministic, not a race: another process takes ``BEGIN IMMEDIATE`` and says so before
    `kit index add` starts, so the two always overlap. The add waits (still running, nothing written)
    while the lock is held, and lands once it is released. The control shows the lock really blocks a
    writer: the same add with a busy timeout of 0 fails at once."""
    first, second = make_bundle(tmp_path, "fixture-node000", 0), make_bundle(tmp_path, "fixture-node001", 1)
    index = tmp_path / "index.sqlite"
    assert kit_cli("index", "add", "--index", str(index), str(first)).returncode == 0
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(index)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        control = _add_process(index, second, busy_timeout=0)
        _, err = control.communicate(timeout=120)
        assert control.returncode == 1 and "cannot write to the index" in err and "locked" in err, err
        assert _count(index) == 1

        adder = _add_process(index, second)
        _until_idle(adder.pid, at_least=3.0)  # it verified the bundle and sleeps in SQLite's busy handler
        assert adder.poll() is None, adder.communicate()
        assert _count(index) == 1
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"
        out, err = adder.communicate(timeout=120)
        assert adder.returncode == 0 and "1 added, 0 already in the index, 0 refused" in err, err
        assert _count(index) == 2
    finally:
        holder.kill()
        holder.wait()
