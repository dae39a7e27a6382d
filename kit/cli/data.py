"""`kit data`: download, verify and inspect the data sets (each one entry of kit.data.registry)."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from kit.cli.output import Output, output_options
from kit.data.registry import all_datasets, names

def _help() -> str:
    sets = "; ".join(f"{d.facts.name}: {d.facts.title}, {d.help}" for d in all_datasets())
    return (f"Download, verify and inspect the data sets ({sets}). Files go to ./data, or --data-dir, or "
            "$KIT_DATA_DIR. Offline? Place the files there by hand (see `kit data info` for names and checksums) "
            "or run the benchmark with --data synthetic.")


app = typer.Typer(help=_help(), no_args_is_help=True)

#: the data sets by name (kit.data.registry), and "all"
Name = Enum("Name", {**{n: n for n in names()}, "all": "all"}, type=str)  # type: ignore[misc]
NAME_HELP = f"{', '.join(names())}, or all."


def _names(name: Name) -> list[str]:
    return list(names()) if name.value == "all" else [name.value]


DATA_DIR_HELP = "Data folder (default: $KIT_DATA_DIR, else ./data)."


@app.command("fetch")
def fetch(
    name: Name = typer.Argument(..., help=NAME_HELP),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
    url: Optional[List[str]] = typer.Option(
        None, "--url", metavar="URL", help="Download from this URL instead of the public mirrors (repeat to give several; tried in order)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Download a data set (trying each mirror in turn), verify its checksum, and keep it in the data folder.

    A verified copy already present is not downloaded again; a copy with the wrong
    checksum is reported and replaced by a good one. $KIT_DATA_MIRRORS (base URLs,
    space- or comma-separated) replaces the public mirror list."""
    from rich.console import Console

    from kit.data.service import fetch_dataset

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = Console(highlight=False, soft_wrap=True)
    for n in _names(name):
        r = fetch_dataset(n, data_dir, urls=url, progress=not quiet, log=lambda m: err.print(f"[yellow]{m}[/yellow]"))
        if r["downloaded"]:
            what = f"downloaded from {r['url']}"
            if r["replaced_bad_file"]:
                what += " (replacing a file with the wrong checksum)"
        else:
            what = "already present and verified"
        out.print(f"[green]ok[/green] {r['title']}: {r['path']} {what}; MD5 {r['md5']}")
        if r.get("extracted_to"):
            out.print(f"   extracted to {r['extracted_to']}")


@app.command("verify")
def verify(
    name: Name = typer.Argument(..., help=NAME_HELP),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
) -> None:
    """Check a data set in full: the archive's checksum (hashed, not trusted from a stamp) and the published sizes.

    Exits with code 3 and says what is wrong when a file is missing, altered, truncated or in the wrong layout."""
    from rich.console import Console

    from kit.data.service import verify_dataset

    out = Console(highlight=False, soft_wrap=True)
    for n in _names(name):
        report = verify_dataset(n, data_dir)
        out.print(f"[bold]{report['title']}[/bold] in {report['data_dir']}")
        for check in report["checks"]:
            mark = {True: "[green]ok[/green]", False: "[yellow]not verified[/yellow]", None: "[yellow]skipped[/yellow]"}[check["ok"]]
            out.print(f"  {mark} {check['check']}: {check['detail']}")


@app.command("info")
@output_options(json="the report as JSON")
def info(
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
    output: Output = None,
) -> None:
    """Show what is in the data folder: which archives are present and verified, extracted files, caches.

    Reads no archive (fast); `kit data verify` does the full check."""
    from kit.data.service import data_info

    report = data_info(data_dir)
    output.show(lambda: _print_info(report), json=lambda: json.dumps(report, indent=2) + "\n")


def _print_info(report: dict) -> None:
    from rich.console import Console

    from kit.data.files import human_size

    out = Console(highlight=False, soft_wrap=True)
    out.print(f"Data folder: {report['data_dir']}" + ("" if report["exists"] else " (does not exist yet)"))
    for d in report["datasets"]:
        if d["present"]:
            state = f"present, {human_size(d['size_bytes'])}, " + ("verified" if d["verified"] else "not verified yet (run `kit data verify`)")
        else:
            state = "missing"
        out.print(f"[bold]{d['dataset']}[/bold]  {d['title']}")
        out.print(f"  {d['file']}: {state}")
        out.print(f"  expected MD5 {d['md5_expected']}" + (f", SHA-256 {d['sha256_expected']}" if d["sha256_expected"] else ""))
        if d["extracted"]:
            out.print(f"  extracted: {d['extracted']}")
        for c in d["caches"]:
            out.print(f"  decoded cache: {c['path']} ({human_size(c['size_bytes'])})")
    for p in report["leftovers"]:
        out.print(f"[yellow]leftover partial download (safe to delete):[/yellow] {p}")
