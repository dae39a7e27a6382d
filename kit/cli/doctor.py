"""`kit doctor`: check driver, GPUs and Docker, and say which image stack fits."""

from __future__ import annotations

import json
from typing import Optional

import typer

from kit.cli.output import Output, output_options
from kit.cli.stacks import StackChoice


@output_options(json="the report as JSON (machine-readable)")
def doctor(
    stack: StackChoice = typer.Option(StackChoice.auto, help="Stack to check: auto (the recommendation), cuda10 (2019, faithful), cuda12 (today), cuda12-fused (cuda12 with Apex 25.07 fused kernels, opt-in) or cpu."),
    gpu: Optional[int] = typer.Option(None, "--gpu", help="GPU index to judge (NVML numbering, as nvidia-smi). Default: 0."),
    output: Output = None,
) -> None:
    """Check the NVIDIA driver, GPUs, Docker and the NVIDIA Container Toolkit; give a verdict per stack.

    Also checks `kit run`'s benchmark stack in this Python: torch, torchvision and fastai
    import, and torch and torchvision are a pair. Exits 0 when the requested stack (or, for
    auto, the recommended one) can run here and that stack, where installed, is not broken;
    6 otherwise, with the reason and the fix.
    """
    from rich.console import Console

    from kit.env.doctor import diagnose
    from kit.env.doctor_view import render

    report = diagnose(stack=stack.value, gpu=gpu, bench=True)
    output.show(lambda: render(report, Console(highlight=False)),
                json=lambda: json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n")
    report.raise_if_not_ok()


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
