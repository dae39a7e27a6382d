"""A full disk (ENOSPC) or quota (EDQUOT) where the kit writes: one line naming the folder and
its free space, exit 10 (kit.errors.DiskFull), and what was written before stays loadable.

The full disk is simulated: ``os.fsync`` (and, in the unit cases, a write) raises ENOSPC,
as a real full file system raises it from write, flush or fsync. The `kit run` case runs a
real ``python -m kit`` process with the fake benchmark of tests/fixtures/fake_bench.py."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kit.bundle.export import load_run_folder
from kit.errors import DiskFull, EXIT_CODES
from kit.results.atomic import atomic_write_json
from kit.results.journal import Journal, read_journal

REPO = Path(__file__).resolve().parents[1]
FAKE_BENCH = Path(__file__).resolve().parent / "fixtures" / "fake_bench.py"

#: appended to the fake benchmark's sitecustomize: from the first write of results.json on,
#: every fsync of a file in the results folder fails as on a full disk (synthetic failure)
FULL_DISK_AFTER_FIRST_CELL = '''
import errno as _errno, os as _os
_real_fsync = _os.fsync
_full = []
def _fsync(fd):
    try:
        name = _os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        name = ""
    if "results.json" in name:
        _full.append(True)
    if _full and name.startswith(_os.environ["KIT_RESULTS_DIR"]):
        raise OSError(_errno.ENOSPC, "No space left on device")
    return _real_fsync(fd)
_os.fsync = _fsync
'''


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_the_exit_code_is_in_the_table():
    assert DiskFull.exit_code == 10 and 10 in EXIT_CODES


def test_an_atomic_write_on_a_full_disk_names_the_folder_and_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    atomic_write_json(target, {"cells": [1]})
    monkeypatch.setattr(os, "fsync", _enospc)
    with pytest.raises(DiskFull) as info:
        atomic_write_json(target, {"cells": [1, 2]})
    assert str(tmp_path) in info.value.message and " free)" in info.value.message
    assert json.loads(target.read_text()) == {"cells": [1]}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left


def test_a_quota_is_said_as_a_quota(tmp_path, monkeypatch):
    def edquot(fd):
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    monkeypatch.setattr(os, "fsync", edquot)
    with pytest.raises(DiskFull, match="quota"):
        atomic_write_json(tmp_path / "env.json", {})


def test_a_journal_on_a_full_disk_raises_one_error_and_still_reads_back(tmp_path, monkeypatch):
    journal = Journal(tmp_path / "journal.jsonl")
    journal.write("run_start", run_id="r")
    monkeypatch.setattr(os, "fsync", _enospc)
    with pytest.raises(DiskFull, match=str(tmp_path)):
        journal.write("cell_end", "c", result={})
    monkeypatch.undo()
    journal.close()
    assert [e["event"] for e in read_journal(tmp_path / "journal.jsonl")][0] == "run_start"


def test_kit_run_on_a_full_disk_prints_one_line_exits_10_and_keeps_the_journal(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(FAKE_BENCH, site / "sitecustomize.py")
    with open(site / "sitecustomize.py", "a") as fh:
        fh.write(FULL_DISK_AFTER_FIRST_CELL)
    results = tmp_path / "results"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]), KIT_FAKE_BENCH="1",
               KIT_RESULTS_DIR=str(results), KIT_DATA_DIR=str(tmp_path / "data"), COLUMNS="200")
    args = ["run", "--data", "synthetic", "--device", "cpu", "-m", "resnet18,resnet34", "-p", "fp32", "-e", "torch",
            "--repeats", "1", "--steps", "1", "--skip-checks"]
    proc = subprocess.run([sys.executable, "-m", "kit", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 10, proc.stderr
    assert "Traceback" not in proc.stderr and "Logging error" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    assert "no space left" in errors[0] and str(run_dir) in errors[0] and "free" in errors[0]
    # the way on names this run's folder, and works as printed once there is room again
    advice = proc.stderr.splitlines()[proc.stderr.splitlines().index(errors[0]) + 1]
    assert advice == f"what to do: Free some space, then continue the run where it stopped: kit run --resume {run_dir}"
    assert proc.stdout == ""  # no bundle
    # what was written before the disk filled still loads: the journal's first cell, as an interrupted run
    events = list(read_journal(run_dir / "journal.jsonl"))
    assert [e["event"] for e in events][:1] == ["run_start"]
    folder = load_run_folder(run_dir)
    assert folder.interrupted and [c.cell_id for c in folder.results.cells] == ["cifar/resnet18/fp32/torch"]
    roomy = tmp_path / "roomy"  # the same fake benchmark, without the full disk
    roomy.mkdir()
    shutil.copy(FAKE_BENCH, roomy / "sitecustomize.py")
    env["PYTHONPATH"] = os.pathsep.join([str(roomy), str(REPO)])
    command = advice.split(": ", 2)[2].split()
    assert command[:3] == ["kit", "run", "--resume"]
    again = subprocess.run([sys.executable, "-m", "kit", *command[1:]], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert [c.cell_id for c in load_run_folder(run_dir).results.cells] == ["cifar/resnet18/fp32/torch",
                                                                          "cifar/resnet34/fp32/torch"]


def test_a_full_disk_outside_a_run_names_no_run_to_resume(tmp_path):
    full = DiskFull.from_os_error(OSError(errno.ENOSPC, "No space left on device"), tmp_path)
    assert full.remedy == "Free some space (or choose another folder) and run again."


def test_the_way_on_after_a_full_disk_follows_how_far_the_run_got(tmp_path):
    from kit.runner.execute import disk_full_remedy

    assert disk_full_remedy(tmp_path) == (f"Free some space (or choose another folder) and run again; {tmp_path} "
                                          "holds nothing to resume.")
    (tmp_path / "journal.jsonl").write_text('{"seq": 0, "event": "run_start"}\n')
    assert disk_full_remedy(tmp_path) == f"Free some space, then continue the run where it stopped: kit run --resume {tmp_path}"
    (tmp_path / "results.json").write_text('{"status": "complete"}')
    assert disk_full_remedy(tmp_path) == f"Free some space, then make the run's bundle: kit bundle export {tmp_path}"
