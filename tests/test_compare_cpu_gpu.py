"""Comparing a CPU run with a GPU run: cuDNN in one format, no cuDNN comparison for the run
that used no GPU, the first warning says which ran on a CPU, and the driver reads the same in
compare and `kit bundle show`. Environments and cells are fixture data."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from fixtures.results.factory import make_env, make_results, make_run_dir, standard_cells
from kit.bundle.envinfo import cudnn_version, summarise_environment
from kit.bundle.safe_open import open_bundle
from kit.compare.engine import compare_paths
from kit.report.export import export_run
from kit.report.show import print_show


@pytest.mark.parametrize("raw, text", [
    (92400, "9.24.0"), ("92400", "9.24.0"), (90100, "9.1.0"), (91900, "9.19.0"), (8907, "8.9.7"), (8700, "8.7.0"),
    (7605, "7.6.5"), ("9.19.0.56", "9.19.0"), ("8.9.7", "8.9.7"), ("unknown", "unknown"), (None, "unknown"),
])
def test_cudnn_is_shown_in_one_format(raw, text):
    assert cudnn_version(raw) == text
    env = make_env(cudnn=raw) if raw is not None else dict(make_env(), cudnn=None)
    assert summarise_environment(env).cudnn == text


def _cpu_env():
    env = make_env(host="fixture-cpu-host", stack="cpu", cudnn="92400")
    env.pop("gpus")
    env.pop("driver")
    env["run_device"] = "cpu"
    return env


def _bundles(tmp_path):
    gpu = export_run(make_run_dir(tmp_path / "a", make_results(standard_cells(), make_env(cudnn="9.19.0.56"),
                                                               run_id="FIXTURE-gpu")), tmp_path / "out")
    cpu = export_run(make_run_dir(tmp_path / "b", make_results(standard_cells(speed=0.1), _cpu_env(), run_id="FIXTURE-cpu")),
                     tmp_path / "out")
    return gpu, cpu


def test_the_first_warning_says_which_ran_on_a_cpu_and_no_cudnn_warning(tmp_path):
    gpu, cpu = _bundles(tmp_path)
    warnings = compare_paths([gpu, cpu]).warnings
    first = warnings[0]
    assert first.severity == "high" and first.message.startswith("B ran on a CPU, A on a GPU"), first.message
    assert not any("cuDNN" in w.message for w in warnings), [w.message for w in warnings]


def test_the_driver_of_a_cpu_run_reads_the_same_in_compare_and_show(tmp_path):
    gpu, cpu = _bundles(tmp_path)
    comparison = compare_paths([gpu, cpu])
    assert comparison.sources[1].env.driver == "none (CPU run)"
    buf = io.StringIO()
    print_show(open_bundle(cpu), Console(file=buf, width=200, color_system=None))
    line = next(line for line in buf.getvalue().splitlines() if line.startswith("driver"))
    assert line.split(None, 1)[1].strip() == "none (CPU run)"


def test_two_gpu_runs_still_compare_their_cudnn(tmp_path):
    a = export_run(make_run_dir(tmp_path / "a", make_results(standard_cells(), make_env(cudnn="90100"), run_id="FIXTURE-a")),
                   tmp_path / "out")
    b = export_run(make_run_dir(tmp_path / "b", make_results(standard_cells(), make_env(host="h-b", cudnn="92400"),
                                                             run_id="FIXTURE-b")), tmp_path / "out")
    messages = [w.message for w in compare_paths([a, b]).warnings]
    assert any("different cuDNN versions: A 9.1.0, B 9.24.0" in m for m in messages), messages
    assert not any("ran on a CPU" in m for m in messages)
