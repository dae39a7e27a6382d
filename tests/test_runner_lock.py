"""One writer per run folder: a second process is refused, a dead one never blocks.

The lock is an OS lock (flock) held by a real process in these tests: a child
Python process takes it, and this process (or a `kit run --resume` subprocess)
meets it. The benchmark is the fake in tests/fixtures/fake_bench.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.errors import UsageError
from kit.results.journal import read_journal
from kit.results.schema import RunConfig
from kit.runner import lock as lock_mod
from kit.runner.lock import LOCK_NAME, RunLock

REPO = Path(__file__).resolve().parents[1]
FAKE_BENCH = Path(__file__).resolve().parent / "fixtures" / "fake_bench.py"

HOLD = (
    "import sys\n"
    "from kit.runner.lock import RunLock\n"
    "lock = RunLock(sys.argv[1]).acquire()\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"  # hold it until the test closes our stdin (or kills us)
    "lock.release()\n"
)


def _env(tmp_path: Path, **extra: str) -> dict:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    shutil.copy(FAKE_BENCH, site / "sitecustomize.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]), KIT_FAKE_BENCH="1", COLUMNS="200")
    env.update(extra)
    return env


def _holder(tmp_path: Path, folder: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=_env(tmp_path))
    assert proc.stdout.readline().strip() == "locked"
    return proc


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, f"the first run ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_a_second_process_is_refused_while_the_first_holds_the_folder(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    proc = _holder(tmp_path, folder)
    try:
        with pytest.raises(UsageError) as err:
            RunLock(folder).acquire()
        assert f"run folder in use (pid {proc.pid}, host {socket.gethostname()})" in err.value.message
        assert err.value.exit_code == 2
    finally:
        proc.stdin.close()
        proc.wait(30)
    # the holder released it on its way out: the folder is free and the lock file gone
    assert not (folder / LOCK_NAME).exists()
    with RunLock(folder) as lock:
        assert lock.took_over is None


def test_a_killed_holder_never_blocks_and_its_lock_is_taken_over_with_a_note(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    proc = _holder(tmp_path, folder)
    proc.kill()  # SIGKILL: no chance to release; the OS drops the flock
    proc.wait(30)
    assert json.loads((folder / LOCK_NAME).read_text())["pid"] == proc.pid  # left behind
    lock = RunLock(folder).acquire()
    try:
        assert lock.took_over == f"pid {proc.pid} on host {socket.gethostname()}"
        assert json.loads((folder / LOCK_NAME).read_text())["pid"] == os.getpid()
    finally:
        lock.release()
    assert not (folder / LOCK_NAME).exists()


def test_without_flock_a_live_pid_on_this_host_holds_the_folder(tmp_path, monkeypatch):
    """File systems without flock: the pid and host in the lock file decide."""
    monkeypatch.setattr(lock_mod, "fcntl", None)
    folder = tmp_path / "run"
    folder.mkdir()
    alive = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        (folder / LOCK_NAME).write_text(json.dumps({"pid": alive.pid, "host": socket.gethostname()}))
        with pytest.raises(UsageError, match=f"run folder in use \\(pid {alive.pid}, host "):
            RunLock(folder).acquire()
    finally:
        alive.stdin.close()
        alive.wait(30)
    with RunLock(folder) as lock:  # the pid is gone now: stale
        assert lock.took_over == f"pid {alive.pid} on host {socket.gethostname()}"


def _run_script(run_root: Path) -> str:
    config = RunConfig.of(suite="cifar", data="synthetic", device="cpu", models=["resnet18", "resnet34"],
                       precisions=["fp32"], engines=["torch"], repeats=1, steps=1)
    return (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from kit.results.schema import RunConfig\n"
        "from kit.runner.execute import execute\n"
        f"config = RunConfig.from_dict(json.loads({json.dumps(json.dumps(config.to_dict()))}))\n"
        f"execute(config, Path({str(run_root)!r}), make_bundle=False)\n"
    )


def test_kit_run_resume_is_refused_while_the_first_run_still_writes_the_folder(tmp_path):
    """The issue's case: `kit run --resume DIR` while the first `kit run` writes DIR ran both."""
    root = tmp_path / "results"
    gate = tmp_path / "gate"
    env = _env(tmp_path, KIT_FAKE_BENCH_GATE_AT="cifar/resnet34/fp32/torch", KIT_FAKE_BENCH_GATE=str(gate))
    first = subprocess.Popen([sys.executable, "-c", _run_script(root)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(Path(str(gate) + ".reached"), first)  # one cell done, the second in flight
        run_dir = next(p for p in root.iterdir() if p.is_dir())
        second = subprocess.run([sys.executable, "-m", "kit", "run", "--resume", str(run_dir), "--skip-checks"],
                                env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        assert f"run folder in use (pid {first.pid}, host {socket.gethostname()})" in second.stderr
        assert "Traceback" not in second.stderr and second.stdout == ""
    finally:
        gate.touch()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    events = list(read_journal(run_dir / "journal.jsonl"))
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(len(seqs))), "two writers interleaved the journal"
    assert [e["event"] for e in events].count("cell_end") == 2
    assert [e["event"] for e in events].count("run_end") == 1
    assert not (run_dir / LOCK_NAME).exists()


def _as_from_the_background_of_a_script() -> None:
    """A ``preexec_fn``: SIGINT ignored, as a shell without job control starts ``cmd &``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_the_busy_folders_advice_stops_a_run_started_in_the_background_with_its_resume_line(tmp_path):
    """The refusal names SIGTERM: a run started in the background of a script ignores SIGINT
    (Ctrl-C's), and SIGTERM, sent as the message says, stops it with its finished cells kept
    and the command that continues it."""
    root = tmp_path / "results"
    gate = tmp_path / "gate"  # never opened: the first run waits inside its second cell
    env = _env(tmp_path, KIT_FAKE_BENCH_GATE_AT="cifar/resnet34/fp32/torch", KIT_FAKE_BENCH_GATE=str(gate),
               KIT_RESULTS_DIR=str(root))
    run = [sys.executable, "-m", "kit", "run", "--data", "synthetic", "--device", "cpu", "-m", "resnet18,resnet34",
           "-p", "fp32", "-e", "torch", "--repeats", "1", "--steps", "1", "--skip-checks"]
    first = subprocess.Popen(run, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=_as_from_the_background_of_a_script)
    try:
        _wait_for(Path(str(gate) + ".reached"), first)
        run_dir = next(p for p in root.iterdir() if p.is_dir())
        second = subprocess.run([sys.executable, "-m", "kit", "run", "--resume", str(run_dir), "--skip-checks"],
                                env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        advice = second.stderr.splitlines()[1]
        assert advice == (f"what to do: Wait for that run to end (or stop it: kill -TERM {first.pid} on "
                          f"{socket.gethostname()}; it keeps its finished cells), then resume it. If that process is "
                          f"gone (a crashed container, another machine), delete {run_dir / LOCK_NAME} and resume.")
        command = advice.split("stop it: ", 1)[1].split(" on ", 1)[0]
        subprocess.run(command.split(), check=True, timeout=60)  # the advice, as printed
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 143, err
    assert f"error: Run terminated (SIGTERM): 1 finished cell(s) kept in {run_dir}" in err and "Traceback" not in err
    assert f"what to do: Continue with: kit run --resume {run_dir}" in err
    assert not (run_dir / LOCK_NAME).exists()
    events = [e["event"] for e in read_journal(run_dir / "journal.jsonl")]
    assert events.count("cell_end") == 1 and events[-2:] == ["run_interrupted", "run_end"]


def test_a_resume_after_kill_9_takes_over_the_lock_and_the_journal_says_so(tmp_path):
    root = tmp_path / "results"
    gate = tmp_path / "gate"  # never opened: the first run is killed inside its second cell
    env = _env(tmp_path, KIT_FAKE_BENCH_GATE_AT="cifar/resnet34/fp32/torch", KIT_FAKE_BENCH_GATE=str(gate))
    first = subprocess.Popen([sys.executable, "-c", _run_script(root)], env=env)
    try:
        _wait_for(Path(str(gate) + ".reached"), first)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    run_dir = next(p for p in root.iterdir() if p.is_dir())
    assert (run_dir / LOCK_NAME).exists()
    env.pop("KIT_FAKE_BENCH_GATE_AT")
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--resume", str(run_dir), "--skip-checks"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"took over the run folder's lock from pid {first.pid}" in out.stderr
    notes = [e for e in read_journal(run_dir / "journal.jsonl") if e.get("lock_taken_over")]
    assert len(notes) == 1 and f"pid {first.pid}" in notes[0]["message"]
    assert f"pid {first.pid}" in (run_dir / "run.log").read_text()
    assert not (run_dir / LOCK_NAME).exists()


def test_execute_refuses_to_resume_a_folder_another_process_holds(tmp_path):
    """The cuda10 runner calls execute() directly: it takes the lock itself."""
    from fixtures.results.factory import make_cell, make_results, make_run_dir, set_config

    from kit.runner.execute import execute

    results = make_results([make_cell("resnet18", "fp32")], status="interrupted")
    set_config(results, models=["resnet18"], precisions=["fp32", "amp-fp16"], engines=["torch"])
    run_dir = make_run_dir(tmp_path / "runs", results, finish_journal=False)
    before = (run_dir / "journal.jsonl").read_bytes()
    proc = _holder(tmp_path, run_dir)
    try:
        with pytest.raises(UsageError, match=f"run folder in use \\(pid {proc.pid}, "):
            execute(None, tmp_path / "runs", resume_dir=run_dir, make_bundle=False)
    finally:
        proc.stdin.close()
        proc.wait(30)
    assert (run_dir / "journal.jsonl").read_bytes() == before


def test_a_complete_run_whose_bundle_is_still_being_written_is_in_use(tmp_path):
    """Resuming a run that has ended complete writes nothing; but with no bundle yet and the
    lock held, its process is still finishing: say so rather than 'make a bundle yourself'."""
    from fixtures.results.factory import make_cell, make_results, make_run_dir, set_config

    from kit.runner.execute import execute

    results = make_results([make_cell("resnet18", "fp32")], status="complete")
    set_config(results, models=["resnet18"], precisions=["fp32"], engines=["torch"])
    run_dir = make_run_dir(tmp_path / "runs", results, finish_journal=True)
    proc = _holder(tmp_path, run_dir)
    try:
        with pytest.raises(UsageError, match="run folder in use"):
            execute(None, tmp_path / "runs", resume_dir=run_dir, make_bundle=False)
    finally:
        proc.stdin.close()
        proc.wait(30)
    outcome = execute(None, tmp_path / "runs", resume_dir=run_dir, make_bundle=False)
    assert outcome.already_complete and outcome.bundle is None
    assert "no bundle of this run" in outcome.bundle_error


def test_the_lock_holder_itself_can_find_a_run_complete(tmp_path):
    """A run that ended between `kit run --resume`'s first look and its lock: still 'already complete'."""
    from fixtures.results.factory import make_cell, make_results, make_run_dir, set_config

    from kit.runner.execute import execute

    results = make_results([make_cell("resnet18", "fp32")], status="complete")
    set_config(results, models=["resnet18"], precisions=["fp32"], engines=["torch"])
    run_dir = make_run_dir(tmp_path / "runs", results, finish_journal=True)
    with RunLock(run_dir) as lock:
        outcome = execute(None, tmp_path / "runs", resume_dir=run_dir, make_bundle=False, lock=lock)
    assert outcome.already_complete


def test_checking_a_folder_for_a_writer_changes_nothing_in_it(tmp_path, monkeypatch):
    """`kit run --resume` of a complete run only looks (its folder may be read-only)."""
    folder = tmp_path / "run"
    folder.mkdir()
    real_open = os.open

    def no_writes(path, flags, *a):
        assert not flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR), f"opened {path} for writing"
        return real_open(path, flags, *a)

    monkeypatch.setattr(os, "open", no_writes)
    RunLock(folder).check_not_in_use()  # no lock file: nobody writes
    assert list(folder.iterdir()) == []
    monkeypatch.undo()
    (folder / "run.lock").write_text('{"pid": 1, "host": "gone"}\n')  # left by a dead run, not held
    monkeypatch.setattr(os, "open", no_writes)
    RunLock(folder).check_not_in_use()


def test_checking_a_folder_held_by_another_process_says_in_use(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    proc = _holder(tmp_path, folder)
    try:
        with pytest.raises(UsageError, match=r"run folder in use \(pid \d+"):
            RunLock(folder).check_not_in_use()
    finally:
        proc.stdin.close()
        proc.wait(30)
