"""`kit image`: (being built)."""

from __future__ import annotations

import typer

app = typer.Typer(help="(being built)", no_args_is_help=True)
