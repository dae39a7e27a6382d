"""A real sweep on the one-node Slurm that scripts/ci_slurm.sh starts: two CPU tasks as a job array through
`kit fleet slurm submit --wait`, followed with squeue, collected, verified, merged and compared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
#: two tiny tasks: the LSTM (8 units, 4 batches) and ResNet-18 (2 steps of 2 images), one repeat each
TASK_ARGS = ["--data", "synthetic", "--repeats", "1", "-p", "fp32", "--preset", "apex-2018", "--max-batches", "4",
             "--nhid", "8", "--emsize", "8", "--nlayers", "1", "--bptt", "8", "--batch-size", "2",
             "-m", "resnet18", "-e", "torch", "--steps", "2", "--skip-checks"]


def _kit(args, tmp_path, timeout=600, **env):
    # the tasks run with this Python (the checkout's .venv in CI) and this checkout's kit
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), KIT_NO_TELEMETRY="1", COLUMNS="200", **env)
    return subprocess.run([sys.executable, "-m", "kit", *args], cwd=tmp_path, env=full_env, capture_output=True,
                          text=True, timeout=timeout)


def test_a_two_task_cpu_sweep_runs_on_slurm_and_is_merged_into_one_verified_bundle(tmp_path):
    sweep = tmp_path / "sweep"
    out = _kit(["fleet", "slurm", "submit", "--dir", str(sweep), "--suites", "lstm,cifar", "--gpus-per-task", "0",
                "--cpus-per-task", "1", "--time", "10", "--wait", "--poll", "2", "--", *TASK_ARGS], tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Submitted job" in out.stderr
    merged = Path(out.stdout.strip().splitlines()[-1])
    assert merged.parent == sweep / "merged" and merged.is_file()

    from kit.bundle.safe_open import open_bundle

    bundle = open_bundle(merged)  # verifies every hash
    cells = {c.cell_id: c.status for c in bundle.results.cells}
    assert cells == {"lstm/apex-2018/fp32/kit": "ok", "cifar/resnet18/fp32/torch": "ok"}
    assert len(bundle.environment["merged_from"]) == 2
    assert (sweep / "compare.html").is_file()
    state = json.loads((sweep / "sweep.json").read_text())
    assert len(state["submissions"]) == 1 and state["submissions"][0]["indices"] == [0, 1]
    for i in (0, 1):
        assert (sweep / "tasks" / str(i) / "exit_code").read_text().strip() == "0"
        assert list((sweep / "tasks" / str(i)).glob("slurm-*_%d.out" % i))

    # the finished sweep: nothing to resubmit, status says done
    again = _kit(["fleet", "slurm", "resubmit", str(sweep)], tmp_path)
    assert again.returncode == 0 and "Nothing to resubmit" in again.stderr
    status = _kit(["fleet", "slurm", "status", str(sweep)], tmp_path)
    assert status.returncode == 0 and "2 done" in status.stderr


def test_a_controller_that_does_not_answer_is_one_line_and_exit_6(tmp_path):
    conf = tmp_path / "slurm.conf"
    # the running cluster's configuration, pointed at a port where no controller listens
    text = Path("/etc/slurm/slurm.conf").read_text()
    conf.write_text(text + "\nSlurmctldPort=9\nMessageTimeout=2\n")
    out = _kit(["fleet", "slurm", "submit", "--dir", str(tmp_path / "sweep"), "--gpus-per-task", "0", "--",
                "--smoke"], tmp_path, timeout=300, SLURM_CONF=str(conf))
    assert out.returncode == 6, out.stderr
    assert "the Slurm controller is not reachable" in out.stderr and "Traceback" not in out.stderr
    assert "kit fleet slurm resubmit" in out.stderr  # the sweep was written: it can be submitted later
