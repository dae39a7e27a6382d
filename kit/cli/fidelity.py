"""`kit fidelity`: the kit's faithful cells measured beside the original tools, on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(help="Run an original tool beside the kit's cells that reproduce it, and compare their speed.", no_args_is_help=True)


@app.command("apex")
def apex(
    apex_src: Optional[Path] = typer.Option(None, "--apex-src", help="Apex source (folder or git-archive tarball) whose examples/word_language_model/main.py is the original (commit 241dd6c4 of github.com/NVIDIA/apex, e.g. its `git archive` apex-241dd6c4.tar.gz). Run from a temporary copy, patched for today's torch; never copied into the kit."),
    fp16_utils: Optional[Path] = typer.Option(None, "--fp16-utils", help="An extracted Apex folder whose apex.fp16_utils imports with this torch (25.01), for the original's --fp16."),
    presets: str = typer.Option("apex-2018,tensor-core", "--presets", help="The kit's LSTM presets to compare (the example's defaults, and its 1504-unit tensor-core settings)."),
    settings: str = typer.Option("strict,tf32,fp16", "--settings", help="The original's settings: strict (TF32 off) <-> kit fp32, tf32 (TF32 on) <-> kit tf32, default (torch's defaults: no kit cell), fp16 (--fp16) <-> kit fp16-master."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="train/valid/test .txt in the example's format (real WikiText-2); default: the kit's synthetic text (labelled synthetic)."),
    repeats: int = typer.Option(1, "--repeats", min=1, help="Repeats of each kit cell per round."),
    runs: int = typer.Option(3, "--runs", min=2, help="Rounds at least: each runs the original once per setting and the kit's cells once, in alternating order."),
    max_runs: int = typer.Option(8, "--max-runs", min=2, help="Rounds at most: after --runs, rounds go on until every kit ÷ original ratio's 95% CI is within --ci, or this many have run (the output says which)."),
    ci: float = typer.Option(0.03, "--ci", help="The CI target: the 95% CI's half-width as a fraction of the ratio (0.03: ±3%)."),
    max_batches: int = typer.Option(1000, "--max-batches", min=1, help="Training batches per epoch, for both."),
    out: Path = typer.Option(Path("fidelity-lstm"), "--out", help="Folder for fidelity.json and every log."),
) -> None:
    """Apex's word_language_model main.py beside the kit's apex-2018/tensor-core LSTM cells (needs a GPU):
    same corpus, same device; prints mode, original tokens/s, kit tokens/s and their ratio."""
    from kit.runner.fidelity import format_table, run_apex_fidelity

    from kit.runner.options import split_list

    names = split_list(presets, "--presets")
    chosen = split_list(settings, "--settings")
    report = run_apex_fidelity(apex_src, fp16_utils, presets=names, settings=chosen, corpus=corpus, repeats=repeats,
                               max_batches=max_batches, runs=runs, out=out, max_runs=max_runs, ci=ci)
    typer.echo(format_table(report))
    typer.echo(f"(all runs and logs: {out / 'fidelity.json'})")
