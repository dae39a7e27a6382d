"""`--help` at 80 columns shows every option name whole (a name cut with "…" cannot be typed)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kit.cli.main import app

REPO = Path(__file__).resolve().parents[1]


def _commands(group, prefix=()):
    for name, cmd in group.commands.items():
        yield prefix + (name,), cmd
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, prefix + (name,))


COMMANDS = list(_commands(typer.main.get_command(app)))


def _option_names(cmd) -> list[str]:
    return [o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]


def _shows_whole(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_option_name_is_whole_in_the_80_column_help(path, cmd):
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    cut = [n for n in _option_names(cmd) if not _shows_whole(n, result.output)]
    assert not cut, f"kit {' '.join(path)} --help at 80 columns does not show {cut} whole:\n{result.output}"


def test_kit_run_help_in_an_80_column_terminal_names_every_option():
    out = subprocess.run([sys.executable, "-m", "kit", "run", "--help"], capture_output=True, text=True, cwd=REPO,
                         env={"COLUMNS": "80", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}, timeout=60)
    assert out.returncode == 0, out.stderr
    run_cmd = dict((" ".join(p), c) for p, c in COMMANDS)["run"]
    names = _option_names(run_cmd)
    assert "--static-loss-scale" in names and "--no-dynamic-loss-scale" in names
    assert [n for n in names if not _shows_whole(n, out.stdout)] == []
    assert "…" not in out.stdout
