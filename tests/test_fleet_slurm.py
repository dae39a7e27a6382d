"""`kit fleet slurm` without a cluster: fake sbatch/squeue/scontrol on PATH (small shell scripts that record
their arguments), fixture bundles in the tasks' folders. The real Slurm runs in tests/slurm/ (CI's Slurm job)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from fixtures.cli import run_main
from fixtures.results.factory import bundle_members, make_cell, make_env, make_results, make_run_dir, write_bundle
from kit.fleet.sweep import load_sweep
from kit.report.export import export_run

FAKES = {
    # sbatch: FAKE_SBATCH=ok|down|invalid; records its arguments; answers job ids 100, 101, ...
    "sbatch": r'''#!/bin/sh
echo "$*" >> "$FAKE_DIR/sbatch.calls"
case "${FAKE_SBATCH:-ok}" in
  down) echo "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)" >&2; exit 1 ;;
  invalid) echo "sbatch: error: invalid partition specified: nosuch" >&2; echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2; exit 1 ;;
esac
n=$(cat "$FAKE_DIR/next" 2>/dev/null || echo 100)
echo $((n + 1)) > "$FAKE_DIR/next"
echo "$n"
''',
    # squeue: prints $FAKE_DIR/queue (lines "jobid|index|STATE")
    "squeue": r'''#!/bin/sh
if [ "${FAKE_SQUEUE:-ok}" = down ]; then echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1; fi
cat "$FAKE_DIR/queue" 2>/dev/null
exit 0
''',
    "scontrol": r'''#!/bin/sh
echo "slurm_load_jobs error: Invalid job id specified" >&2
exit 1
''',
}


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    for name, text in FAKES.items():
        p = bin_dir / name
        p.write_text(text)
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:/bin")  # no real Slurm client (CI's Slurm job installs one)
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    return tmp_path


def _cli(args, capsys, monkeypatch):
    return run_main(args, capsys, monkeypatch)


def _calls(fake: Path) -> list:
    p = fake / "sbatch.calls"
    return p.read_text().splitlines() if p.exists() else []


def _submit(sweep: Path, capsys, monkeypatch, *extra, tasks=("--smoke",)):
    return _cli(["fleet", "slurm", "submit", "--dir", str(sweep), *extra, "--", *tasks], capsys, monkeypatch)


def _bundle_in(sweep: Path, index: int, model: str) -> Path:
    res = make_results([make_cell(model, "fp32")], make_env(), run_id=f"FIXTURE-task{index}")
    run_dir = make_run_dir(sweep / "tasks" / str(index) / "results", res)
    return export_run(run_dir, sweep / "tasks" / str(index) / "results")


def _finished(sweep: Path, index: int, code: int = 0) -> None:
    (sweep / "tasks" / str(index) / "exit_code").write_text(f"{code}\n")


# ----------------------------------------------------------------------------- submit
def test_dry_run_prints_the_batch_script_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no Slurm needed
    sweep = tmp_path / "sweep"
    code, out, err = _submit(sweep, capsys, monkeypatch, "--suites", "cifar,lstm", "--gpus-per-task", "1,2",
                             "-p", "gpu", "-t", "1:00:00", "--dry-run", tasks=("--data", "synthetic"))
    assert code == 0, err
    assert out.startswith("#!/bin/bash") and "#SBATCH --partition=gpu" in out and "#SBATCH --time=1:00:00" in out
    assert "0) ARGS=(--suite cifar --data synthetic) ;;" in out
    assert "1) ARGS=(--suite cifar --data synthetic --gpus 2) ;;" in out
    assert "3) ARGS=(--suite lstm --data synthetic --gpus 2) ;;" in out
    assert "# sbatch --parsable --array=0,2 --gres=gpu:1" in out and "# sbatch --parsable --array=1,3 --gres=gpu:2" in out
    assert not sweep.exists()


def test_each_suites_task_gets_only_the_options_its_suite_reads(tmp_path, capsys, monkeypatch):
    """One set of task options serves --suites lstm,cifar,gpt: the LSTM's --preset reaches the LSTM task
    only, -m the CIFAR task only, --seq-len the GPT task only (kit run refuses an option of another
    suite); options of every suite reach every task."""
    monkeypatch.setenv("PATH", "/nonexistent")
    code, out, err = _submit(tmp_path / "sweep", capsys, monkeypatch, "--suites", "lstm,cifar,gpt", "--gpus-per-task", "1",
                             "--dry-run", tasks=("--data", "synthetic", "--preset", "apex-2018", "--max-batches", "4",
                                                 "-m", "resnet18", "--seq-len", "64", "--repeats", "1"))
    assert code == 0, err
    assert "0) ARGS=(--suite lstm --data synthetic --preset apex-2018 --max-batches 4 --repeats 1) ;;" in out
    assert "1) ARGS=(--suite cifar --data synthetic --models resnet18 --repeats 1) ;;" in out
    assert "2) ARGS=(--suite gpt --data synthetic --seq-len 64 --repeats 1) ;;" in out


@pytest.mark.parametrize("tasks,needle", [
    (("--epoch", "3"), "unrecognized arguments: --epoch 3"),                      # a typo: refused at submit
    (("--suite", "gpt", "--epochs", "2"), "--epochs is an option of the cifar and lstm suites"),
])
def test_task_options_that_kit_run_would_refuse_stop_the_sweep_before_it_is_written(tmp_path, capsys, monkeypatch,
                                                                                    tasks, needle):
    monkeypatch.setenv("PATH", "/nonexistent")
    code, out, err = _submit(tmp_path / "sweep", capsys, monkeypatch, "--gpus-per-task", "1", tasks=tasks)
    assert code == 2 and needle in err
    assert not (tmp_path / "sweep").exists()


def test_one_array_per_gpu_count_and_the_job_ids_are_kept(fake_slurm, capsys, monkeypatch):
    sweep = fake_slurm / "sweep"
    code, out, err = _submit(sweep, capsys, monkeypatch, "--suites", "cifar,lstm", "--gpus-per-task", "1,2")
    assert code == 0, err
    calls = _calls(fake_slurm)
    assert calls == [f"--parsable --array=0,2 --gres=gpu:1 {sweep}/job.sbatch",
                     f"--parsable --array=1,3 --gres=gpu:2 {sweep}/job.sbatch"]
    state = load_sweep(sweep)
    assert [(s.job_id, s.indices) for s in state.submissions] == [("100", [0, 2]), ("101", [1, 3])]
    assert all((sweep / "tasks" / str(i)).is_dir() for i in range(4))  # Slurm writes each task's log there


def test_sbatch_missing_is_one_line_exit_6_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    code, out, err = _submit(tmp_path / "sweep", capsys, monkeypatch)
    assert code == 6
    assert "sbatch is not on PATH" in err and "--dry-run" in err and "Traceback" not in err
    assert not (tmp_path / "sweep").exists()


def test_a_controller_that_is_down_is_exit_6_and_the_sweep_can_be_submitted_later(fake_slurm, capsys, monkeypatch):
    sweep = fake_slurm / "sweep"
    monkeypatch.setenv("FAKE_SBATCH", "down")
    code, out, err = _submit(sweep, capsys, monkeypatch, "--gpus-per-task", "0")
    assert code == 6
    assert "the Slurm controller is not reachable" in err and f"kit fleet slurm resubmit {sweep}" in err
    assert load_sweep(sweep).submissions == []
    monkeypatch.setenv("FAKE_SBATCH", "ok")
    code, out, err = _cli(["fleet", "slurm", "resubmit", str(sweep)], capsys, monkeypatch)
    assert code == 0, err
    assert "as job 100" in err and [s.job_id for s in load_sweep(sweep).submissions] == ["100"]


def test_squeue_against_a_controller_that_is_down_is_exit_6(fake_slurm, capsys, monkeypatch):
    sweep = fake_slurm / "sweep"
    assert _submit(sweep, capsys, monkeypatch)[0] == 0
    monkeypatch.setenv("FAKE_SQUEUE", "down")
    code, out, err = _cli(["fleet", "slurm", "status", str(sweep)], capsys, monkeypatch)
    assert code == 6 and "squeue: the Slurm controller is not reachable" in err


@pytest.mark.parametrize("args, words", [
    (["--", "--results-dir", "x"], "--results-dir is the sweep's to set"),
    (["--gpus-per-task", "0", "--", "--gpus", "2"], "--gpus and --device are the sweep's"),
    (["--container", "pyxis"], "needs --image"),
    (["--time", "one hour"], "Slurm's forms"),
    (["--gpus-per-task", "1,1"], "name each value once"),
    (["--suites", "resnet"], "choose from cifar, lstm, gpt, all"),
    (["--stacks", "cuda12"], "--stacks needs --container"),
    (["--stacks", "cuda12,cpu", "--container", "pyxis", "--image", "reg#mpkit:1"], "need {stack} in --image"),
])
def test_bad_sweep_options_are_one_line_and_exit_2(fake_slurm, capsys, monkeypatch, args, words):
    code, out, err = _cli(["fleet", "slurm", "submit", "--dir", str(fake_slurm / "s"), *args], capsys, monkeypatch)
    assert code == 2 and words in err and "Traceback" not in err
    assert _calls(fake_slurm) == []


def test_sbatch_refusing_an_option_is_exit_2_with_its_words(fake_slurm, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_SBATCH", "invalid")
    code, out, err = _submit(fake_slurm / "sweep", capsys, monkeypatch, "-p", "nosuch")
    assert code == 2 and "Invalid partition name specified" in err


def test_a_pyxis_sweep_runs_kit_in_the_image(tmp_path, capsys, monkeypatch):
    code, out, err = _submit(tmp_path / "s", capsys, monkeypatch, "--container", "pyxis", "--image",
                             "registry.example/mpkit:cuda12-0.1.0", "--dry-run")
    assert code == 0, err
    assert 'srun --container-image="$IMAGE" --container-mounts="$SWEEP:$SWEEP"' in out
    assert "0) ARGS=(--smoke); IMAGE=registry.example/mpkit:cuda12-0.1.0 ;;" in out
    assert "kit run \"${ARGS[@]}\" --results-dir \"$TASK_DIR/results\"" in out


def test_a_sweep_over_stacks_runs_each_in_its_image(tmp_path, capsys, monkeypatch):
    code, out, err = _submit(tmp_path / "s", capsys, monkeypatch, "--container", "apptainer", "--stacks", "cuda12,cuda10",
                             "--image", "/shared/mpkit-{stack}.sif", "--dry-run")
    assert code == 0, err
    assert "0) ARGS=(--smoke); IMAGE=/shared/mpkit-cuda12.sif ;;  # default suite on 1 GPU, cuda12" in out
    assert "1) ARGS=(--smoke); IMAGE=/shared/mpkit-cuda10.sif ;;" in out
    assert 'apptainer exec --nv --bind "$SWEEP" "$IMAGE" kit run' in out


# ----------------------------------------------------------------------------- status, collect, resubmit
def test_status_reads_the_queue_and_the_tasks_exit_codes(fake_slurm, capsys, monkeypatch):
    sweep = fake_slurm / "sweep"
    assert _submit(sweep, capsys, monkeypatch, "--suites", "cifar,lstm,all", "--gpus-per-task", "0")[0] == 0
    (fake_slurm / "queue").write_text("100|1|RUNNING\n100|2|PENDING\n99|0|RUNNING\n")
    _bundle_in(sweep, 0, "resnet18")
    _finished(sweep, 0)
    code, out, err = _cli(["fleet", "slurm", "status", str(sweep)], capsys, monkeypatch)
    assert code == 0, err
    assert "1 done, 1 pending, 1 running" in err  # job 99 is no submission of this sweep


def test_collect_merges_the_bundles_and_names_the_task_that_wrote_none(fake_slurm, capsys, monkeypatch):
    sweep = fake_slurm / "sweep"
    assert _submit(sweep, capsys, monkeypatch, "--suites", "cifar,lstm,all", "--gpus-per-task", "0")[0] == 0
    kept = [_bundle_in(sweep, 0, "resnet18"), _bundle_in(sweep, 1, "resnet50")]
    for i in (0, 1):
        _finished(sweep, i)
    _finished(sweep, 2, code=8)  # task 2's run failed before it wrote a bundle
    code, out, err = _cli(["fleet", "slurm", "collect", str(sweep)], capsys, monkeypatch)
    assert code == 8
    assert "1 task(s) have no complete bundle: task 2 no bundle (kit run ended with exit code 8" in err
    assert "kit fleet slurm resubmit" in err and "Traceback" not in err
    merged = Path(out.strip().splitlines()[-1])
    from kit.bundle.safe_open import open_bundle

    assert merged.parent == sweep / "merged"
    assert {c.model for c in open_bundle(merged).results.cells} == {"resnet18", "resnet50"}
    assert (sweep / "compare.html").is_file()
    assert all(p.is_file() for p in kept)


def test_a_bundle_that_fails_verification_is_exit_5_and_the_others_are_kept(fake_slurm, capsys, monkeypatch):
    sweep = fake_slurm / "sweep"
    assert _submit(sweep, capsys, monkeypatch, "--suites", "cifar,lstm,all", "--gpus-per-task", "0")[0] == 0
    _bundle_in(sweep, 0, "resnet18")
    _bundle_in(sweep, 1, "resnet50")
    bad = _bundle_in(sweep, 2, "resnet101")
    files = bundle_members(bad)
    files["results.json"] = files["results.json"].replace(b'"ok"', b'"OK"', 1)  # changed after hashing
    write_bundle(bad, files, rehash=False)
    for i in range(3):
        _finished(sweep, i)
    code, out, err = _cli(["fleet", "slurm", "collect", str(sweep)], capsys, monkeypatch)
    assert code == 5
    assert "task 2" in err and "fails verification" in err and "2 verified bundle(s) kept" in err
    assert list((sweep / "merged").glob("*.tar.gz"))
    # resubmit sends only task 2; the verified bundles stay where they are
    code, out, err = _cli(["fleet", "slurm", "resubmit", str(sweep)], capsys, monkeypatch)
    assert code == 0, err
    assert _calls(fake_slurm)[-1] == f"--parsable --array=2 {sweep}/job.sbatch"
    assert len(list((sweep / "tasks" / "0" / "results").glob("*.tar.gz"))) == 1


def test_resubmit_refuses_a_task_that_is_done_or_unknown(fake_slurm, capsys, monkeypatch):
    sweep = fake_slurm / "sweep"
    assert _submit(sweep, capsys, monkeypatch, "--suites", "cifar,lstm", "--gpus-per-task", "0")[0] == 0
    _bundle_in(sweep, 0, "resnet18")
    _finished(sweep, 0)
    code, out, err = _cli(["fleet", "slurm", "resubmit", str(sweep), "--task", "0"], capsys, monkeypatch)
    assert code == 2 and "--task 0 is done" in err
    code, out, err = _cli(["fleet", "slurm", "resubmit", str(sweep), "--task", "7"], capsys, monkeypatch)
    assert code == 2 and "tasks 0..1" in err


def test_a_folder_that_is_no_sweep_is_exit_2(tmp_path, capsys, monkeypatch):
    code, out, err = _cli(["fleet", "slurm", "collect", str(tmp_path / "nope")], capsys, monkeypatch)
    assert code == 2 and "does not exist: it is no sweep folder" in err


def test_check_lists_what_it_found_and_exits_6_without_a_client_or_a_controller(fake_slurm, capsys, monkeypatch):
    bin_dir = fake_slurm / "fake-bin"
    (bin_dir / "scontrol").write_text('#!/bin/sh\necho "Slurmctld(primary) at ctl is DOWN"\nexit 1\n')
    code, out, err = _cli(["fleet", "slurm", "check"], capsys, monkeypatch)
    assert code == 6 and "--  controller: Slurmctld(primary) at ctl is DOWN" in out
    assert "controller is not up" in err and "Traceback" not in err
    (bin_dir / "scontrol").write_text('#!/bin/sh\necho "Slurmctld(primary) at ctl is UP"\n')
    (bin_dir / "sinfo").write_text('#!/bin/sh\necho "debug*|1|2|(null)|idle"\n')
    for name in ("scontrol", "sinfo"):
        (bin_dir / name).chmod(0o755)
    code, out, err = _cli(["fleet", "slurm", "check"], capsys, monkeypatch)
    assert code == 0, err
    assert "ok  controller" in out and "ok  partition debug*: 1 node(s), 2 CPUs" in out
    monkeypatch.setenv("PATH", "/nonexistent")
    code, out, err = _cli(["fleet", "slurm", "check"], capsys, monkeypatch)
    assert code == 6 and "--  sbatch: not on PATH" in out and "sbatch is not on PATH" in err
