"""Cells in a process of their own (kit.runner.isolate): what one cell does to its process cannot
reach the next; events, progress, errors, a dying process and a stop request all cross back."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kit.errors import DataError, KitError
from kit.results.schema import CellSpec, RunConfig
from kit.bench.context import CellContext
from kit.runner.isolate import CellProcessDied, run_isolated, start_method, wants_isolation

ROOT = Path(__file__).resolve().parents[1]


def _spec(precision="fp32"):
    return CellSpec("lstm", "apex-2018", precision, "kit", {"preset": "apex-2018"})


def _ctx(tmp_path, **kw):
    return CellContext(device="cpu", data_dir=tmp_path, data_source="synthetic", seed=7, **kw)


def test_a_global_patched_by_one_cell_does_not_reach_the_next_cell(tmp_path):
    first = run_isolated(_spec(), _ctx(tmp_path), call="isolate_cells:patch_a_global")
    second = run_isolated(_spec(), _ctx(tmp_path), call="isolate_cells:check_the_global")
    assert first.status == second.status == "ok"
    assert second.metrics["floor_is_real"] is True
    assert first.metrics["pid"] != os.getpid() and second.metrics["pid"] != first.metrics["pid"]
    assert math.floor(2.5) == 2  # nor this process


def test_without_isolation_the_same_patch_leaks_into_the_next_cell(tmp_path):
    """The control: in one process the patch reaches the next cell (what isolation prevents)."""
    import isolate_cells

    real = math.floor
    try:
        isolate_cells.patch_a_global(_spec(), _ctx(tmp_path))
        assert isolate_cells.check_the_global(_spec(), _ctx(tmp_path)).metrics["floor_is_real"] is False
    finally:
        math.floor = real


def test_events_and_progress_of_the_child_reach_the_parent(tmp_path):
    events, progress = [], []
    ctx = _ctx(tmp_path, event=lambda kind, **f: events.append((kind, f)), progress=lambda *a: progress.append(a))
    result = run_isolated(_spec(), ctx, call="isolate_cells:talk")
    assert events == [("note", {"message": "from the child"})]
    assert progress == [(1, 2, "half way")]
    assert result.metrics == {"seed": 7, "device": "cpu"}


def test_children_come_from_one_clean_fork_server_with_the_parents_environment(tmp_path, monkeypatch):
    """Each isolated cell is forked from the fork server (torch imported once, CUDA never touched there)
    and still sees the parent's environment and working folder as they are when the cell starts."""
    monkeypatch.setenv("KIT_ISOLATE_TEST_VAR", "first")
    first = run_isolated(_spec(), _ctx(tmp_path), call="isolate_cells:report_process")
    monkeypatch.setenv("KIT_ISOLATE_TEST_VAR", "second")  # after the server has started
    monkeypatch.chdir(tmp_path)
    second = run_isolated(_spec(), _ctx(tmp_path), call="isolate_cells:report_process")
    assert first.metrics["var"] == "first" and second.metrics["var"] == "second"
    assert second.metrics["cwd"] == str(tmp_path)
    assert not first.metrics["cuda_initialised"] and not second.metrics["cuda_initialised"]
    assert first.metrics["pid"] != second.metrics["pid"] != os.getpid()
    if start_method() == "forkserver" and importlib.util.find_spec("torch"):
        assert first.metrics["torch_loaded"] and second.metrics["torch_loaded"]  # the server's preload
        assert first.metrics["ppid"] == second.metrics["ppid"] != os.getpid()  # both forked by the server
    monkeypatch.delenv("KIT_ISOLATE_TEST_VAR")
    third = run_isolated(_spec(), _ctx(tmp_path), call="isolate_cells:report_process")
    assert third.metrics["var"] is None


FORK_SERVER_PATH_CHECK = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, os.path.join(sys.argv[1], "tests"))
from kit.bench.context import CellContext
from kit.results.schema import CellSpec
from kit.runner.isolate import run_isolated
os.chdir(sys.argv[2])  # a folder holding another "kit" package
r = run_isolated(CellSpec("lstm", "apex-2018", "fp32", "kit", {}), CellContext(device="cpu", data_dir=sys.argv[2],
                 data_source="synthetic", seed=1), call="isolate_cells:report_process")
print(json.dumps(r.metrics))
"""


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH (Python 3.11) keeps the working folder off the path")
def test_the_fork_server_preloads_the_runners_copy_of_the_kit_not_the_working_folders(tmp_path):
    decoy = tmp_path / "kit" / "bench"
    decoy.mkdir(parents=True)
    (tmp_path / "kit" / "__init__.py").write_text("")
    (decoy / "__init__.py").write_text("")
    (decoy / "preload.py").write_text("raise SystemExit('the decoy kit was preloaded')\n")
    out = subprocess.run([sys.executable, "-c", FORK_SERVER_PATH_CHECK, str(ROOT), str(tmp_path)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if start_method() == "forkserver":
        assert got["preloaded"] == str(ROOT / "kit" / "bench" / "preload.py"), got


def test_a_module_that_fails_to_preload_is_left_to_the_cell(tmp_path, monkeypatch):
    """multiprocessing's fork server dies on a preload error other than ImportError; kit.bench.preload
    catches each one, so the server lives and the cell imports (and reports) the module itself."""
    from kit.bench import preload

    (tmp_path / "kit_mismatched_ext.py").write_text("raise RuntimeError('operator torchvision::nms does not exist')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    failed = preload.load(["kit_no_such_module_here", "kit_mismatched_ext", "math"])
    assert set(failed) == {"kit_no_such_module_here", "kit_mismatched_ext"}
    assert failed["kit_mismatched_ext"].startswith("RuntimeError: operator torchvision::nms")


def test_a_rank_that_cannot_start_stops_the_ranks_already_started(tmp_path, monkeypatch):
    """Rank 1's process fails to start (the fork server gone, no memory): the error reaches the runner
    and rank 0, already waiting for its peers, is stopped, not left holding its GPU."""
    from kit.runner import isolate

    real = isolate._mp_context()
    started = []

    class Ctx:
        def __getattr__(self, name):
            return getattr(real, name)

        def Process(self, *a, **k):
            proc = real.Process(*a, **k)
            if "rank 1" in (k.get("name") or ""):
                def refuse():
                    raise OSError("cannot start rank 1")
                proc.start = refuse
            else:
                started.append(proc)
            return proc

    monkeypatch.setattr(isolate, "_mp_context", lambda: Ctx())
    fields = [isolate._ctx_fields(_ctx(tmp_path)) for _ in range(2)]
    with pytest.raises(OSError, match="cannot start rank 1"):
        isolate._run_children(_spec(), _ctx(tmp_path), fields, None, "isolate_cells:wait_for_stop")
    assert len(started) == 1 and started[0].pid is not None and not started[0].is_alive()


def test_a_kit_error_in_the_child_is_the_same_error_in_the_parent(tmp_path):
    with pytest.raises(DataError) as info:
        run_isolated(_spec(), _ctx(tmp_path), call="isolate_cells:raise_data_error")
    assert info.value.message == "no such data set here" and info.value.remedy == "fetch it"
    assert info.value.exit_code == 3


def test_a_bug_in_the_child_fails_with_its_message(tmp_path):
    with pytest.raises(RuntimeError, match="ZeroDivisionError: a bug in the cell"):
        run_isolated(_spec(), _ctx(tmp_path), call="isolate_cells:raise_bug")


def test_a_child_that_dies_is_reported_with_its_exit_code(tmp_path):
    with pytest.raises(CellProcessDied, match="exit code 9"):
        run_isolated(_spec(), _ctx(tmp_path), call="isolate_cells:die")


def test_a_stop_request_ends_the_child_and_interrupts_the_parent(tmp_path):
    asked = {"n": 0}

    def should_stop():
        asked["n"] += 1
        return asked["n"] > 3

    with pytest.raises(KeyboardInterrupt):
        run_isolated(_spec(), _ctx(tmp_path, should_stop=should_stop), call="isolate_cells:wait_for_stop")


def test_which_cells_are_isolated():
    assert wants_isolation(_spec("apex-o1"), "apex") and wants_isolation(_spec("apex-o2"), "apex")
    assert not wants_isolation(_spec("fp32"), "apex")
    assert wants_isolation(_spec("fp32"), "all")
    assert not wants_isolation(_spec("apex-o1"), "none")
    assert RunConfig().isolate == "apex"
    with pytest.raises(KitError):
        RunConfig.of(isolate="some")


def test_an_isolated_cpu_run_measures_the_same_cells(tmp_path):
    """A real (tiny) run with every cell in its own process: every cell ends as it does in-process."""
    cmd = [sys.executable, "-m", "kit", "run", "--smoke", "--suite", "lstm", "--device", "cpu", "--skip-checks",
           "--isolate", "all", "--results-dir", str(tmp_path / "r"), "--data-dir", str(tmp_path / "d")]
    env = dict(os.environ, PYTHONPATH=str(ROOT), KIT_NO_TELEMETRY="1")
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    results = json.loads(next((tmp_path / "r").glob("*/results.json")).read_text())
    statuses = {c["precision"]: c["status"] for c in results["cells"]}
    assert statuses["fp32"] == "ok" and statuses["fp16-master"] == "skipped"
    assert results["config"]["isolate"] == "all"
    log = next((tmp_path / "r").glob("*/run.log")).read_text()
    assert "running in its own process" in log and "[cell process]" in log


def test_a_cell_that_can_only_be_skipped_gets_no_process_of_its_own(tmp_path):
    """Apex cells on the CPU (or fastai x Apex) are skipped by rule: the runner decides that before it
    would spend a process of its own and CUDA start-up on them."""
    cmd = [sys.executable, "-m", "kit", "run", "--suite", "lstm", "--preset", "apex-2018", "-p", "apex-o1,apex-o2",
           "--device", "cpu", "--skip-checks", "--max-batches", "2", "--repeats", "1", "--data", "synthetic",
           "--results-dir", str(tmp_path / "r"), "--data-dir", str(tmp_path / "d")]
    env = dict(os.environ, PYTHONPATH=str(ROOT), KIT_NO_TELEMETRY="1")
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    results = json.loads(next((tmp_path / "r").glob("*/results.json")).read_text())
    assert {c["precision"]: c["status"] for c in results["cells"]} == {"apex-o1": "skipped", "apex-o2": "skipped"}
    assert all("needs a CUDA GPU" in c["reason"] for c in results["cells"])
    assert "running in its own process" not in next((tmp_path / "r").glob("*/run.log")).read_text()
