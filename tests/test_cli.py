"""The CLI: help everywhere, documented in the README, clear errors and exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from kit.cli.main import app, main
from kit.errors import EXIT_CODES, KitError

README = Path(__file__).resolve().parents[1] / "README.md"
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


def test_every_exit_code_is_in_the_readme():
    text = README.read_text(encoding="utf-8")
    for code, meaning in EXIT_CODES.items():
        assert f"| {code} |" in text, f"exit code {code} ({meaning}) is not documented in README.md"


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


def test_bad_option_values_exit_2_with_a_message(workdir):
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--suite", "nope"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--precisions", "fp8", "--skip-checks", "--data", "synthetic"],
                         capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert "unknown precision 'fp8'" in out.stderr
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--mode", "convergence", "--data", "synthetic", "--skip-checks"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "needs real data" in out.stderr


def test_bad_lstm_settings_are_refused_before_any_cell_runs(workdir):
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--smoke", "--suite", "all", "--device", "cpu",
                          "--dropout", "1.5", "--skip-checks"], capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert "dropout" in out.stderr
    assert not (workdir / "results").exists(), "a run folder was made for a run that could not start"
