"""The sweep's batch script run by bash as Slurm would run one array task (SLURM_ARRAY_TASK_ID set), with a
fake Python in the sweep's --python that records each `kit run` it is given: the time limit a task's run
gets from the sweep's --time, and a task that runs again continuing its newest run folder."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from fixtures.cli import run_main
from kit.errors import UsageError
from kit.fleet.slurm import render_script, task_states
from kit.fleet.sweep import Submission, plan_sweep, slurm_seconds

#: records its arguments; FAKE_RESUME=refuse: `--resume` exits 2 (as kit run does for a run of another GPU
#: model); FAKE_RC: the exit code otherwise
FAKE_PYTHON = r'''#!/bin/sh
echo "$*" >> "$FAKE_DIR/kit.calls"
case "$*" in *--resume*) [ "${FAKE_RESUME:-}" = refuse ] && exit 2 ;; esac
exit "${FAKE_RC:-0}"
'''


@pytest.fixture
def fake_python(tmp_path):
    p = tmp_path / "fake-python"
    p.write_text(FAKE_PYTHON)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return p


def _sweep(tmp_path, fake_python, time_limit=None):
    sweep = plan_sweep(tmp_path / "sweep", ["--data", "synthetic", "-m", "resnet18"], ["cifar"], [1],
                       python=str(fake_python), time_limit=time_limit)
    sweep.path.mkdir(parents=True)
    sweep.save()
    (sweep.path / "job.sbatch").write_text(render_script(sweep))
    return sweep


def _run_task(tmp_path, sweep, **env):
    full = dict(os.environ, SLURM_ARRAY_TASK_ID="0", SLURM_JOB_ID="100", FAKE_DIR=str(tmp_path), **env)
    done = subprocess.run(["bash", str(sweep.path / "job.sbatch")], env=full, capture_output=True, text=True, timeout=60)
    calls = (tmp_path / "kit.calls").read_text().splitlines() if (tmp_path / "kit.calls").exists() else []
    return done, calls


def _unfinished_run(sweep) -> Path:
    run_dir = sweep.task_dir(0) / "results" / "20261206-120000-node1-cifar-ab12"
    run_dir.mkdir(parents=True)
    (run_dir / "journal.jsonl").write_text('{"event": "run_start"}\n')
    return run_dir


def _limit(call: str) -> int:
    words = call.split()
    return int(words[words.index("--time-limit") + 1])


def test_a_task_gets_the_sweeps_time_less_a_margin_as_its_time_limit(tmp_path, fake_python):
    sweep = _sweep(tmp_path, fake_python, time_limit="10")  # ten minutes: a minute's margin
    done, calls = _run_task(tmp_path, sweep)
    assert done.returncode == 0, done.stderr
    assert len(calls) == 1 and calls[0].startswith("-m kit run --suite cifar --data synthetic --models resnet18")
    assert f"--results-dir {sweep.task_dir(0)}/results" in calls[0]
    assert 535 <= _limit(calls[0]) <= 540
    assert (sweep.task_dir(0) / "exit_code").read_text().strip() == "0"


def test_a_short_time_keeps_nine_tenths_of_it_and_no_time_gives_no_limit(tmp_path, fake_python):
    sweep = _sweep(tmp_path, fake_python, time_limit="2:00")  # two minutes: a tenth is the margin
    assert 100 <= _limit(_run_task(tmp_path, sweep)[1][0]) <= 108
    (tmp_path / "kit.calls").unlink()
    shutil.rmtree(sweep.path)
    sweep = _sweep(tmp_path, fake_python)
    assert "--time-limit" not in _run_task(tmp_path, sweep)[1][0]


@pytest.mark.parametrize("restart", ["0", "1"])
def test_a_task_that_runs_again_continues_its_newest_run_with_the_time_left(tmp_path, fake_python, restart):
    # restart 0: `kit fleet slurm resubmit` (a new job); 1: Slurm requeued the task (preemption, node failure)
    sweep = _sweep(tmp_path, fake_python, time_limit="1:00:00")
    run_dir = _unfinished_run(sweep)
    done, calls = _run_task(tmp_path, sweep, SLURM_RESTART_COUNT=restart, FAKE_RC="124")
    assert done.returncode == 124
    assert len(calls) == 1 and calls[0].startswith(f"-m kit run --resume {run_dir}/")
    assert "--results-dir" not in calls[0] and 3530 <= _limit(calls[0]) <= 3540
    assert (sweep.task_dir(0) / "exit_code").read_text().strip() == "124"


def test_a_resume_that_kit_run_refuses_starts_a_new_run_and_says_so(tmp_path, fake_python):
    sweep = _sweep(tmp_path, fake_python, time_limit="30")
    run_dir = _unfinished_run(sweep)
    done, calls = _run_task(tmp_path, sweep, FAKE_RESUME="refuse")
    assert done.returncode == 0, done.stderr
    assert [c.split()[3] for c in calls] == ["--resume", "--suite"]
    assert "--time-limit" in calls[1]
    attempts = (sweep.task_dir(0) / "attempts").read_text()
    assert f"kit run --resume {run_dir}/ refused (exit 2): a new run" in attempts


def test_a_folder_another_process_holds_is_not_run_over_a_second_time(tmp_path, fake_python):
    # kit run refuses a locked folder with exit 2 and names the holder; the task ends so, no second run
    sweep = _sweep(tmp_path, fake_python, time_limit="30")
    run_dir = _unfinished_run(sweep)
    (run_dir / "run.lock").write_text('{"pid": 1, "host": "node7"}')
    done, calls = _run_task(tmp_path, sweep, FAKE_RESUME="refuse")
    assert done.returncode == 2 and len(calls) == 1 and "--resume" in calls[0]
    assert (sweep.task_dir(0) / "exit_code").read_text().strip() == "2"
    assert "a new run" not in (sweep.task_dir(0) / "attempts").read_text()


@pytest.mark.parametrize("container, image", [("pyxis", "reg#mpkit:cuda12"), ("apptainer", "/shared/mpkit.sif")])
def test_a_container_tasks_kit_run_gets_the_time_limit_too(tmp_path, container, image):
    sweep = plan_sweep(tmp_path / "s", ["--data", "synthetic"], ["cifar"], [1], time_limit="1:00:00",
                       container=container, image=image)
    runs = [line.strip() for line in render_script(sweep).splitlines()
            if " kit run " in line and not line.lstrip().startswith(("#", "echo"))]
    assert len(runs) == 2 and all(r.startswith(("srun --container-image", "apptainer exec")) for r in runs)
    assert all(r.endswith("$(limit)") for r in runs)


def test_a_time_over_kit_runs_thirty_days_gives_no_limit_rather_than_a_refusal(tmp_path, fake_python):
    sweep = _sweep(tmp_path, fake_python, time_limit="31-0")
    done, calls = _run_task(tmp_path, sweep)
    assert done.returncode == 0 and "--time-limit" not in calls[0]


def test_a_folder_without_a_journal_is_no_run_to_continue(tmp_path, fake_python):
    sweep = _sweep(tmp_path, fake_python)
    (sweep.task_dir(0) / "results" / "not-a-run").mkdir(parents=True)
    assert _run_task(tmp_path, sweep)[1][0].split()[3] == "--suite"


@pytest.mark.parametrize("text, seconds", [("30", 1800), ("0", 0), ("5:30", 330), ("1:00:00", 3600), ("2-0", 172800),
                                           ("1-02", 93600), ("1-02:30", 95400), ("1-02:30:15", 95415)])
def test_slurms_time_forms_read_as_sbatch_reads_them(text, seconds):
    assert slurm_seconds(text) == seconds


@pytest.mark.parametrize("text", ["one hour", "1h", "-5", "1:2:3:4", ""])
def test_a_time_slurm_would_not_read_is_refused(text):
    with pytest.raises(UsageError, match="Slurm's forms"):
        slurm_seconds(text)


def test_a_time_of_zero_is_slurms_no_limit(tmp_path, fake_python):
    sweep = _sweep(tmp_path, fake_python, time_limit="0")
    assert "#SBATCH --time=0" in render_script(sweep)
    assert "--time-limit" not in _run_task(tmp_path, sweep)[1][0]


@pytest.mark.parametrize("args, words", [
    (["--", "--time-limit", "10m"], "--time-limit is the sweep's to set"),
    (["--sbatch-arg=--time=2:00:00"], "--sbatch-arg sets the job's time"),
    (["--sbatch-arg=-t30"], "--sbatch-arg sets the job's time"),
])
def test_the_jobs_time_is_the_sweeps_to_set(tmp_path, capsys, monkeypatch, args, words):
    monkeypatch.setenv("PATH", "/nonexistent")
    code, out, err = run_main(["fleet", "slurm", "submit", "--dir", str(tmp_path / "s"), "--dry-run", *args],
                              capsys, monkeypatch)
    assert code == 2 and words in err and "-t/--time" in err


def test_status_says_what_a_tasks_exit_code_means(tmp_path, fake_python):
    sweep = _sweep(tmp_path, fake_python, time_limit="10")
    sweep.submissions.append(Submission("100", [0], "gpu:1", 0.0))
    _run_task(tmp_path, sweep, FAKE_RC="124")
    (state,) = task_states(sweep, ask_slurm=False)
    assert state.state == "no bundle" and "exit code 124 (kit run stopped at its --time-limit" in state.detail


def test_a_task_sent_again_with_a_broken_bundle_ends_done_through_the_real_kit_run(tmp_path):
    """The script driving the real `python -m kit run` (its benchmark the fake one): the first attempt
    makes a bundle; damaged (cut short in a copy), the task is 'bad bundle'; sent again,
    it continues the complete run, whose bundle is made again, and the task is done."""
    import sys

    from test_exit_codes_run import _env

    sweep = plan_sweep(tmp_path / "sweep", ["--data", "synthetic", "-m", "resnet18", "-p", "fp32", "-e", "torch",
                                            "--repeats", "1", "--steps", "1", "--skip-checks"], ["cifar"], [0],
                       python=sys.executable, time_limit="10")
    sweep.path.mkdir(parents=True)
    sweep.submissions.append(Submission("100", [0], None, 0.0))
    sweep.save()
    (sweep.path / "job.sbatch").write_text(render_script(sweep))
    env = dict(_env(tmp_path), SLURM_ARRAY_TASK_ID="0", SLURM_JOB_ID="100")

    def attempt():
        done = subprocess.run(["bash", str(sweep.path / "job.sbatch")], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return task_states(sweep, ask_slurm=False)[0]

    first = attempt()
    assert first.state == "done", first.detail
    first.bundle.write_bytes(first.bundle.read_bytes()[:200])
    assert task_states(sweep, ask_slurm=False)[0].state == "bad bundle"
    again = attempt()
    assert again.state == "done" and again.bundle != first.bundle, again.detail
    assert len([p for p in (sweep.task_dir(0) / "results").iterdir() if p.is_dir()]) == 1  # the same run
