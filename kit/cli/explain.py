"""`kit explain`: why each precision is (not) faster in each cell of a bundle."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from kit.cli.output import Output, output_options


@output_options(json="the verdicts and ladders as JSON")
def explain(
    bundle: Path = typer.Argument(..., help="The bundle (.tar.gz) to explain."),
    cell: Optional[List[str]] = typer.Option(None, "--cell", metavar="PATTERN",
                                             help="Only the cells whose id matches this shell pattern, e.g. "
                                                  "'cifar/resnet18/*'; give it again for more."),
    short: bool = typer.Option(False, "--short", help="One line per reduced-precision cell: its verdict and its "
                                                       "ladder in short; then the engines side by side."),
    output: Output = None,
) -> None:
    """Per cell, what bound it (host, loader, compute on or off the tensor cores, memory), and per
    precision against fp32 the speedup ladder: peak ratio, kernels' time, device time, step time,
    measured speedup. Every figure is measured; a piece the bundle lacks is said, not guessed."""
    from kit.bundle.safe_open import open_bundle
    from kit.report.explain_text import explain_json, explain_text

    b = open_bundle(bundle)
    text = explain_text(b, cell or None, short)  # checks the patterns before any format is written
    output.show(lambda: typer.echo(text, nl=False), json=lambda: explain_json(b, cell or None))


def register(app: typer.Typer) -> None:
    app.command("explain")(explain)
