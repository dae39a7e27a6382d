"""`kit launch`: run the benchmark in the stack's container on one GPU (what `make run` calls)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer


class StackChoice(str, Enum):
    auto = "auto"
    cuda10 = "cuda10"
    cuda12 = "cuda12"
    cuda12_fused = "cuda12-fused"
    cpu = "cpu"


def launch(
    ctx: typer.Context,
    gpu: str = typer.Option("0", "--gpu", "-g", help="GPU index as nvidia-smi numbers them (several: 0,1, and each cell runs data-parallel over them: kit run --gpus N). Only these are given to the container."),
    stack: StackChoice = typer.Option(StackChoice.auto, "--stack", "-s", help="Image stack; auto picks the best one this host can run (no GPU: cpu, and a smoke run)."),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help="Host data folder mounted at /data (default ./data or KIT_DATA_DIR)."),
    results_dir: Optional[Path] = typer.Option(None, "--results-dir", help="Host results folder mounted at /results (default ./results or KIT_RESULTS_DIR)."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Rebuild the image first even if it exists."),
    ca_cert: Optional[Path] = typer.Option(None, "--ca-cert", help="If the image must be built: extra CA certificate (PEM) for a TLS-inspecting proxy."),
    pip_index_url: Optional[str] = typer.Option(None, "--pip-index-url", help="If the image must be built: package index mirror instead of PyPI."),
    pip_extra_index_url: Optional[str] = typer.Option(None, "--pip-extra-index-url", help="If the image must be built: extra package index(es) beside PyPI."),
    base: Optional[str] = typer.Option(None, "--base", help="Base image to build on instead of the stack's, as for `kit image build` (a local one without Docker Hub: scripts/make_base_image.sh). An image built on another base is rebuilt."),
    apex_src: Optional[Path] = typer.Option(None, "--apex-src", help="If the image must be built: build Apex from this local source (folder or `git archive` tarball) instead of GitHub, as for `kit image build`. An image built from another Apex source is rebuilt."),
    skip_checks: bool = typer.Option(False, "--skip-checks", help="Do not run the driver/GPU/toolkit checks first (needs an explicit --stack)."),
    keep_container: bool = typer.Option(False, "--keep-container", help="Keep the stopped container (for docker logs / inspect)."),
) -> None:
    """Run the benchmark in the stack's container on the GPU(s) asked for; a results bundle at the end.

    Checks first (driver, GPU, toolkit), builds the image when missing, gives
    the container exactly --gpu, mounts ./data and ./results, and follows the
    run's journal.

    Options after `--` go to `kit run` inside the container, e.g.
    `kit launch --gpu 0 -- --suite cifar -m resnet50 --repeats 5`.
    """
    from rich.console import Console

    from kit.launch.launcher import launch as do_launch
    from kit.launch.ui import RichLaunchUI

    from kit.launch.stacks import read_apex_source

    console = Console(stderr=True, highlight=False)
    source = read_apex_source(apex_src) if apex_src is not None else None  # checked before anything starts
    build_kwargs = {"ca_cert": ca_cert, "pip_index_url": pip_index_url, "pip_extra_index_url": pip_extra_index_url, "base": base,
                    "apex_src": source}
    outcome = do_launch(
        gpu, stack.value, list(ctx.args), data_dir=data_dir, results_dir=results_dir, rebuild=rebuild,
        skip_checks=skip_checks, build_kwargs=build_kwargs, ui=RichLaunchUI(console), keep_container=keep_container,
    )
    where = f"GPU {','.join(outcome.gpus)}" if outcome.gpus else "the CPU (no GPU was used)"
    console.print(f"\nDone: {outcome.cells_done} cell(s) on {where}, stack {outcome.stack}. Run folder: {outcome.run_dir}")
    if outcome.bundle:
        console.print(f"Bundle: {outcome.bundle}" + (" (exported on the host)" if outcome.bundled_on_host else ""))
    for note in outcome.notes:
        if note.startswith("no bundle"):
            console.print(f"[yellow]{note}[/yellow]")


def register(app: typer.Typer) -> None:
    app.command(
        "launch",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(launch)
