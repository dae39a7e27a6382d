"""The CLI: help everywhere, documented in the README, clear errors and exit codes (docs/troubleshooting.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kit.cli.main import app, main
from kit.errors import EXIT_CODES, KitError

README = Path(__file__).resolve().parents[1] / "README.md"
TROUBLESHOOTING = README.parent / "docs" / "troubleshooting.md"
runner = CliRunner()


def _commands(group, prefix: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        path = prefix + (name,)
        yield path, cmd
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, path)


def _all_commands():
    return list(_commands(typer.main.get_command(app)))


def test_every_command_has_help_text():
    missing = [" ".join(p) for p, cmd in _all_commands() if not (cmd.help or cmd.short_help)]
    assert not missing, f"commands without help: {missing}"
    for path, _ in _all_commands():
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage" in result.output


def test_every_command_is_in_the_readme():
    text = README.read_text(encoding="utf-8")
    missing = [" ".join(p) for p, _ in _all_commands() if f"kit {' '.join(p)}" not in text]
    assert not missing, f"commands missing from README.md: {missing}"


def test_every_exit_code_is_in_the_troubleshooting_page():
    text = TROUBLESHOOTING.read_text(encoding="utf-8")
    for code, meaning in EXIT_CODES.items():
        assert f"| {code} |" in text, f"exit code {code} ({meaning}) is not documented in docs/troubleshooting.md"


def test_python_dash_m_kit_works():
    out = subprocess.run([sys.executable, "-m", "kit", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("kit ")


def test_kit_errors_print_a_message_not_a_traceback(capsys, monkeypatch):
    import kit.cli.main as cli_main

    def boom(*_a, **_k):
        raise KitError("the thing is broken", remedy="do the other thing")

    monkeypatch.setattr(cli_main, "app", boom)
    try:
        main(["anything"])
    except SystemExit as exc:
        assert exc.code == 1
    err = capsys.readouterr().err
    assert "the thing is broken" in err and "do the other thing" in err
    assert "Traceback" not in err


def _this_kit() -> dict:
    """The environment for a `python -m kit` subprocess that imports this checkout's kit
    (not an installed copy), with the test's KIT_* folders."""
    return dict(os.environ, PYTHONPATH=str(README.parent))


def test_bad_option_values_exit_2_with_a_message(workdir):
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--suite", "nope"], capture_output=True, text=True, env=_this_kit())
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--precisions", "fp8", "--skip-checks", "--data", "synthetic"],
                         capture_output=True, text=True, env=_this_kit())
    assert out.returncode == 2, out.stderr
    assert "unknown precision 'fp8'" in out.stderr
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--mode", "convergence", "--data", "synthetic", "--skip-checks"],
                         capture_output=True, text=True, env=_this_kit())
    assert out.returncode == 2 and "needs real data" in out.stderr


def test_bad_lstm_settings_are_refused_before_any_cell_runs(workdir):
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--smoke", "--suite", "all", "--device", "cpu",
                          "--dropout", "1.5", "--skip-checks"], capture_output=True, text=True, env=_this_kit())
    assert out.returncode == 2, out.stderr
    assert "dropout" in out.stderr
    assert not (workdir / "results").exists(), "a run folder was made for a run that could not start"


def test_dry_run_prints_the_plan_and_writes_nothing(workdir):
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--dry-run", "--suite", "all", "--data", "synthetic",
                          "-m", "resnet18,resnet50", "-p", "fp32,amp-fp16", "--preset", "tensor-core"],
                         capture_output=True, text=True, env=_this_kit())
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())  # the plan is on stdout; the console wraps long lines
    assert "Plan: 10 cells x 3 repeats" in text and "rough estimate" in text
    assert "Dry run: nothing was run" in text
    assert not (workdir / "results").exists() and not (workdir / "data").exists()
    bad = subprocess.run([sys.executable, "-m", "kit", "run", "--dry-run", "--suite", "lstm", "--dropout", "1.5"],
                         capture_output=True, text=True, env=_this_kit())
    assert bad.returncode == 2 and "dropout" in bad.stderr and "Traceback" not in bad.stderr


def test_dry_run_of_a_resume_counts_the_finished_cells(workdir):
    from fixtures.results.factory import make_cell, make_results, make_run_dir, set_config

    results = make_results([make_cell("resnet18", "fp32")], status="interrupted")
    set_config(results, models=["resnet18"], precisions=["fp32", "amp-fp16"], engines=["torch"])
    run_dir = make_run_dir(workdir / "runs", results, finish_journal=False)
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--dry-run", "--resume", str(run_dir)],
                         capture_output=True, text=True, env=_this_kit())
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "1 cell(s) to run" in text and "1 already finished (resumed)" in text
    assert sorted(p.name for p in run_dir.iterdir()) == ["env.json", "journal.jsonl", "results.json", "run.log"]


def test_the_plan_estimate_counts_one_lstm_epoch_in_throughput_mode():
    from kit.results.schema import CellSpec
    from kit.runner.plan import estimate_seconds

    spec = CellSpec("lstm", "tensor-core", "fp32", "kit", {"preset": "tensor-core", "epochs": None})
    one = CellSpec("lstm", "tensor-core", "fp32", "kit", {"preset": "tensor-core", "epochs": 1})
    assert estimate_seconds(spec, 1, 10.0, "throughput") == estimate_seconds(one, 1, 10.0, "throughput")
    assert estimate_seconds(spec, 1, 10.0, "convergence") > 10 * estimate_seconds(one, 1, 10.0, "convergence")


def test_every_stack_option_takes_auto_and_the_stacks_the_kit_has():
    """`kit doctor`, `kit image build` and `kit launch` take --stack from one list, kit.facts.stacks's."""
    from typing import get_type_hints

    from kit.cli.stacks import StackChoice
    from kit.facts.stacks import STACK_NAMES

    seen = {}
    for path, cmd in _all_commands():
        for param in getattr(cmd, "params", []):
            if "--stack" in param.opts:
                choice = get_type_hints(cmd.callback)[param.name]
                seen[" ".join(path)] = [c.value for c in choice]
                assert choice is StackChoice, path
                assert f"<{'|'.join(seen[' '.join(path)])}>" in runner.invoke(app, [*path, "--help"]).output
    assert seen == {name: ["auto", *STACK_NAMES] for name in ("doctor", "launch", "image build")}


@pytest.mark.parametrize("raised, code", [(RuntimeError("a bug"), 1), (KeyboardInterrupt(), 130)])
def test_a_command_that_skips_teardown_ends_at_once_on_an_error_too(monkeypatch, capsys, raised, code):
    """A command that asked to skip the interpreter's teardown (kit run: torch's can hang) ends with
    kit.cli.fast_exit.exit_now on an unexpected error (its traceback printed) or Ctrl-C as well."""
    import sys

    from kit.cli import fast_exit
    from kit.cli import main as cli_main

    ended = []

    class Ended(BaseException):  # as os._exit, nothing runs after it
        pass

    def exit_now(c):
        ended.append(c)
        raise Ended

    def app(**_):
        fast_exit.skip_teardown()
        raise raised

    monkeypatch.setattr(fast_exit, "exit_now", exit_now)
    monkeypatch.setattr(cli_main, "app", app)
    monkeypatch.setattr(sys, "argv", ["kit", "run"])
    with pytest.raises(Ended):
        cli_main.main()
    assert ended == [code]
    err = capsys.readouterr().err
    assert ("Traceback" in err and "RuntimeError: a bug" in err) if code == 1 else "interrupted" in err
    fast_exit.release()
