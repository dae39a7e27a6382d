"""`kit launch`: run the benchmark in the stack's container on one GPU (what `make run` calls)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Optional

import typer

from kit.cli.stacks import StackChoice


def launch(
    ctx: typer.Context,
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help="GPU index as nvidia-smi numbers them (default 0; several: 0,1, and each cell runs data-parallel over them: kit run --gpus N). Only these are given to the container; the cpu stack uses none."),
    stack: StackChoice = typer.Option(StackChoice.auto, "--stack", "-s", help="Image stack; auto picks the best one this host can run (no GPU: cpu, and a smoke run)."),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help="Host data folder mounted at /data (default ./data or KIT_DATA_DIR)."),
    results_dir: Optional[Path] = typer.Option(None, "--results-dir", help="Host results folder mounted at /results (default ./results or KIT_RESULTS_DIR). The container runs as its owner: the files it writes are the folder owner's."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Rebuild the image first even if it exists."),
    ca_cert: Optional[Path] = typer.Option(None, "--ca-cert", help="If the image must be built: extra CA certificate (PEM) for a TLS-inspecting proxy."),
    pip_index_url: Optional[str] = typer.Option(None, "--pip-index-url", help="If the image must be built: package index mirror instead of PyPI."),
    pip_extra_index_url: Optional[str] = typer.Option(None, "--pip-extra-index-url", help="If the image must be built: extra package index(es) beside PyPI."),
    base: Optional[str] = typer.Option(None, "--base", help="Base image to build on instead of the stack's, as for `kit image build` (a local one without Docker Hub: scripts/make_base_image.sh). An image built on another base is rebuilt."),
    apex: bool = typer.Option(True, "--apex/--no-apex", help="If the image must be built: with NVIDIA Apex (cuda10, cuda12), from GitHub unless --apex-src is given, as for `kit image build`. --no-apex builds it without Apex (where GitHub is out of reach and no local copy is at hand); the Apex precisions are then recorded as skipped."),
    apex_src: Optional[Path] = typer.Option(None, "--apex-src", help="If the image must be built: build Apex from this local source (folder or `git archive` tarball) instead of GitHub, as for `kit image build`. An image built from another Apex source is rebuilt."),
    skip_checks: bool = typer.Option(False, "--skip-checks", help="Do not run the driver/GPU/toolkit checks first (needs an explicit --stack)."),
    keep_container: bool = typer.Option(False, "--keep-container", help="Keep the stopped container (for docker logs / inspect)."),
) -> None:
    """Run the benchmark in the stack's container on the GPU(s) asked for; a results bundle at the end.

    Checks first (driver, GPU, toolkit), builds the image when missing, gives
    the container exactly --gpu, mounts ./data and ./results, and follows the
    run's journal.

    Options after `--` go to `kit run` inside the container, e.g.
    `kit launch --gpu 0 -- --suite cifar -m resnet50 --repeats 5`; continue an
    interrupted run with `kit launch ... -- --resume /results/<run>` (the
    command an interrupted launch prints).
    """
    from rich.console import Console

    from kit.launch.launcher import launch as do_launch
    from kit.launch.ui import RichLaunchUI

    from kit.launch.stacks import read_apex_source

    console = Console(stderr=True, highlight=False)
    source = read_apex_source(apex_src) if apex_src is not None else None  # checked before anything starts
    build_kwargs = {"ca_cert": ca_cert, "pip_index_url": pip_index_url, "pip_extra_index_url": pip_extra_index_url, "base": base,
                    "apex": apex, "apex_src": source}
    outcome = do_launch(
        gpu, stack.value, list(ctx.args), data_dir=data_dir, results_dir=results_dir, rebuild=rebuild,
        skip_checks=skip_checks, build_kwargs=build_kwargs, ui=RichLaunchUI(console), keep_container=keep_container,
        rerun=how_started(),
    )
    where = f"GPU {','.join(outcome.gpus)}" if outcome.gpus else "the CPU"
    # soft_wrap: paths stay whole on one line, for a terminal's copy and a script's grep
    console.print(f"\nDone: {outcome.summary()}, on {where}, stack {outcome.stack}. Run folder: {outcome.run_dir}",
                  soft_wrap=True, markup=False)
    if outcome.bundle:
        console.print(f"Bundle: {outcome.bundle}" + (" (exported on the host)" if outcome.bundled_on_host else ""),
                      soft_wrap=True, markup=False)
        from kit.report.export import run_report

        console.print(run_report(outcome.bundle, outcome.run_dir, write=False), soft_wrap=True, markup=False)
    for note in outcome.notes:
        if note.startswith("no bundle"):
            console.print(f"[yellow]{note}[/yellow]")
    if outcome.closing_note:
        console.print(outcome.closing_note, soft_wrap=True, markup=False)


def how_started():
    """How this `kit launch` was started (kit.launch.resume.Rerun), for the command it prints
    to continue a run: through `make run` (the Makefile sets KIT_LAUNCH_VIA=make), as `kit` on
    PATH, as a path to the command (`.venv/bin/kit`, not on PATH), or as `python -m kit`."""
    from kit.launch.resume import Rerun

    from kit.launch.engine import started_by_make

    if started_by_make():
        return Rerun(make=True)
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else "kit"
    if Path(argv0).name in ("__main__.py", "-m", "-c"):
        return Rerun(prog=f"{shlex.quote(sys.executable)} -m kit launch")
    on_path = shutil.which("kit")
    try:
        if on_path and os.path.samefile(on_path, argv0):
            return Rerun()
    except OSError:
        pass
    if Path(argv0).name == argv0:  # a bare name that is not this file on PATH: say `kit`
        return Rerun()
    path = Path(argv0)
    try:
        shown = str(path.resolve().relative_to(Path.cwd()))
        shown = shown if "/" in shown else f"./{shown}"
    except ValueError:
        shown = str(path.resolve())
    return Rerun(prog=f"{shlex.quote(shown)} launch")


def register(app: typer.Typer) -> None:
    app.command(
        "launch",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(launch)
