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
