"""`kit image`: build and list the kit's container images (one per stack)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kit.cli.output import Output, output_options
from kit.cli.stacks import StackChoice

app = typer.Typer(help="Build and list the kit's container images (stacks cuda10, cuda12, cuda12-fused, cpu).", no_args_is_help=True)


@app.command("build")
def build(
    stack: StackChoice = typer.Option(StackChoice.auto, "--stack", "-s", help="Which stack; auto asks `kit doctor`'s checks which one this host runs best."),
    gpu: int = typer.Option(0, "--gpu", help="The GPU that --stack auto judges."),
    ca_cert: Optional[Path] = typer.Option(None, "--ca-cert", help="PEM file of an extra CA certificate (TLS-inspecting proxies); added to the image's trust store for pip."),
    pip_index_url: Optional[str] = typer.Option(None, "--pip-index-url", help="Package index to use instead of PyPI (a mirror)."),
    pip_extra_index_url: Optional[str] = typer.Option(None, "--pip-extra-index-url", help="Extra package index(es) beside PyPI, space-separated (a local wheel mirror)."),
    pip_trusted_host: Optional[str] = typer.Option(None, "--pip-trusted-host", help="Host of a plain-HTTP mirror that pip should accept."),
    base: Optional[str] = typer.Option(None, "--base", help="Base image instead of the stack's (e.g. a local copy: scripts/make_base_image.sh)."),
    network: str = typer.Option("host", "--network", help="Network for the build's RUN steps (host, bridge, none)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Rebuild every layer."),
    apex: bool = typer.Option(True, "--apex/--no-apex", help="Build NVIDIA Apex (cuda10, cuda12), from GitHub unless --apex-src is given. --no-apex: Apex precisions are then recorded as skipped."),
    apex_src: Optional[Path] = typer.Option(None, "--apex-src", help="Build Apex from this local source instead of GitHub: a folder or a `git archive` tarball of github.com/NVIDIA/apex (e.g. apex-241dd6c4.tar.gz for cuda10). Checked first (setup.py and apex/, no links); its commit must be the stack's pinned ref."),
    apex_ref: Optional[str] = typer.Option(None, "--apex-ref", help="Apex ref to build instead of the stack's pin (a tag or commit; checked against --apex-src's commit)."),
) -> None:
    """Build mpkit:<stack>-<kit version> from docker/Dockerfile (classic builder, progress shown)."""
    from rich.console import Console

    from kit.launch.build import build_stack
    from kit.launch.ui import RichBuildUI

    from kit.launch.stacks import read_apex_source

    console = Console(stderr=True, highlight=False)
    source = read_apex_source(apex_src) if apex_src is not None else None  # before any probing: a bad path builds nothing
    name = stack.value
    if name == "auto":
        from kit.env.doctor import check_stack

        name = check_stack("auto", gpu).stack
        console.print(f"--stack auto: building the {name} stack (kit doctor explains the choice)")
    result = build_stack(
        name, ca_cert=ca_cert, pip_index_url=pip_index_url, pip_extra_index_url=pip_extra_index_url,
        pip_trusted_host=pip_trusted_host, base=base, network=network, no_cache=no_cache, apex=apex,
        apex_src=source, apex_ref=apex_ref, ui=RichBuildUI(console),
    )
    console.print(
        f"Built [bold]{result.tag}[/bold] ({result.image_id[:19]}) in {result.seconds:.0f} s, "
        f"{result.steps} steps ({result.cached_steps} from cache). Log: {result.log_path}"
    )
    typer.echo(result.tag)


@app.command("list")
@output_options(json="the list as JSON")
def list_(output: Output = None) -> None:
    """List the kit's images on this Docker engine, with stack, lock and Apex."""
    import json
    from dataclasses import asdict

    from kit.launch.build import list_images
    from kit.facts.stacks import STACK_NAMES
    from kit.launch.stacks import file_sha256, find_source_root, lock_path

    images = list_images()
    try:
        root = find_source_root()
        current = {s: file_sha256(lock_path(s, root)) for s in STACK_NAMES if lock_path(s, root).is_file()}
    except Exception:  # noqa: BLE001 -- listing works outside a checkout, without the lock comparison
        current = {}
    output.show(lambda: _print_images(images, current), json=lambda: json.dumps(
        [asdict(i) | {"lock_current": current.get(i.stack) == i.lock_sha256 if current else None} for i in images],
        indent=2) + "\n")


def _print_images(images: list, current: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    if not images:
        typer.echo("No kit images on this engine yet; build one with: kit image build --stack cpu|cuda12|cuda10 (or cuda12-fused)")
        return
    table = Table(title="kit images")
    for col in ("image", "stack", "kit", "lock", "apex", "size", "created"):
        table.add_column(col)
    for i in images:
        lock = i.lock_sha256[:12]
        if current:
            lock += " (current)" if current.get(i.stack) == i.lock_sha256 else " (stale: rebuild)"
        build = f" {i.apex_build}" if i.apex_build and i.apex_build != "?" else ""
        apex = f"yes, {i.apex_ref}{build} from {i.apex_source or 'a source not recorded'}" if i.apex_built else "no"
        table.add_row(i.tag, i.stack, i.kit_version, lock, apex, f"{i.size_bytes / 1e9:.1f} GB", i.created)
    Console().print(table)
