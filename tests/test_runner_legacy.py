"""The cuda10 image's front end (kit.runner.legacy) takes the options of `kit run`."""

from __future__ import annotations

import typer

from kit.cli.main import app
from kit.runner import legacy

#: options that only make sense on the host (the container is started by `kit launch`)
HOST_ONLY = {"dry_run"}


def test_every_kit_run_option_has_a_legacy_flag():
    run = typer.main.get_command(app).commands["run"]
    kit_run = {p.name for p in run.params}
    dests = {action.dest for action in legacy.parser()._actions}
    missing = kit_run - dests - HOST_ONLY
    assert not missing, f"kit run options the cuda10 front end does not take: {sorted(missing)}"


def test_isolate_reaches_the_run_config():
    from kit.runner.option_checks import config_from_options

    opts = legacy.parse(["run", "--isolate", "all", "--data", "synthetic", "--suite", "lstm"])
    assert config_from_options(opts).isolate == "all"


def test_a_first_cell_that_would_not_fit_the_time_limit_writes_nothing_and_exits_124(tmp_path, capsys):
    # the same check as `kit run`'s (kit.runner.service.check_first_cell_fits): a CPU cell's estimate is
    # seconds, so none fits in 1; nothing runs, nothing is written
    results = tmp_path / "results"
    rc = legacy.main(["run", "--data", "synthetic", "--device", "cpu", "-m", "resnet18", "-p", "fp32", "-e", "torch",
                      "--repeats", "1", "--steps", "1", "--results-dir", str(results), "--time-limit", "1"])
    out = capsys.readouterr().out
    assert rc == 124, out
    assert "error: Run not started: its first cell to run, cifar/resnet18/fp32/torch" in out
    assert "what to do: Give it more time" in out
    assert not results.exists() or not any(results.iterdir())
