"""`kit run`: run the benchmark suites natively (the containers call this too)."""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer


class Suite(str, Enum):
    cifar = "cifar"
    lstm = "lstm"
    all = "all"


def run(
    suite: Suite = typer.Option(Suite.cifar, help="Which comparison: CIFAR-100 ResNets, the Wikitext-2 LSTM, or both."),
    data: str = typer.Option("real", help="'real' (downloaded CIFAR-100 / WikiText-2) or 'synthetic' (same shapes, generated; throughput only)."),
    device: str = typer.Option("auto", help="auto, cpu, cuda or cuda:N."),
    models: Optional[List[str]] = typer.Option(None, "--models", "-m", help="ResNets to run (repeat or comma-separate): resnet18, resnet34, resnet50, resnet101, resnet152. Default: all five."),
    precisions: Optional[List[str]] = typer.Option(None, "--precisions", "-p", help="fp32, tf32, amp-fp16, amp-bf16, fp16-master, apex-o1, apex-o2. Default: all (unsupported ones are recorded as skipped)."),
    engines: Optional[List[str]] = typer.Option(None, "--engines", "-e", help="CIFAR engines: torch (GPU-bound) and/or fastai (faithful). Default: both."),
    presets: Optional[List[str]] = typer.Option(None, "--preset", help="LSTM presets: apex-2018, tensor-core. Default: both."),
    epochs: Optional[int] = typer.Option(None, help="Epochs per repeat (default: 1 in throughput mode; the preset's in convergence mode)."),
    steps: Optional[int] = typer.Option(None, help="CIFAR: steps per epoch in throughput mode (default 100)."),
    max_batches: Optional[int] = typer.Option(None, help="LSTM: stop each epoch after this many batches."),
    batch_size: Optional[int] = typer.Option(None, help="Batch size (default: 256 for CIFAR, 32 with --device cpu; the preset's for the LSTM)."),
    image_size: int = typer.Option(32, help="CIFAR image size: 32 (native), or 64/128/224 upsampled on the device."),
    repeats: int = typer.Option(3, help="Repeats per cell (median and spread are reported)."),
    seed: int = typer.Option(0, help="Base random seed (recorded)."),
    mode: str = typer.Option("throughput", help="throughput (fixed steps, synthetic allowed) or convergence (full epochs on real data, accuracy parity)."),
    find_max_batch: bool = typer.Option(False, "--find-max-batch", help="CIFAR: also find the largest batch that fits, per model and precision."),
    compile: str = typer.Option("auto", help="torch engine: torch.compile with CUDA graphs: auto, on or off."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="Data-parallel: run each cell over N ranks with DistributedDataParallel (GPUs 0..N-1, NCCL; with --device cpu, N gloo processes). --batch-size is per GPU; --gpus 1 is the data-parallel path on one GPU."),
    global_batch_size: Optional[int] = typer.Option(None, "--global-batch-size", help="Data-parallel: the global batch, split evenly over --gpus (instead of --batch-size per GPU)."),
    scaling: bool = typer.Option(False, "--scaling", help="Data-parallel: also measure each cell on one rank first, and record the scaling efficiency."),
    isolate: str = typer.Option("apex", help="Cells run in a process of their own, so one cell's global state (Apex amp's patches of torch) cannot reach the next: apex (the Apex cells), all, or none."),
    tolerance: Optional[float] = typer.Option(None, help="Convergence parity tolerance (accuracy points for CIFAR, relative perplexity for the LSTM)."),
    emsize: Optional[int] = typer.Option(None, help="LSTM: embedding size (overrides the preset)."),
    nhid: Optional[int] = typer.Option(None, help="LSTM: hidden units per layer."),
    nlayers: Optional[int] = typer.Option(None, help="LSTM: layers."),
    lr: Optional[float] = typer.Option(None, help="LSTM: initial learning rate."),
    clip: Optional[float] = typer.Option(None, help="LSTM: gradient clipping norm."),
    bptt: Optional[int] = typer.Option(None, help="LSTM: sequence length."),
    dropout: Optional[float] = typer.Option(None, help="LSTM: dropout."),
    tied: Optional[bool] = typer.Option(None, "--tied/--untied", help="LSTM: tie encoder and decoder weights."),
    static_loss_scale: Optional[float] = typer.Option(None, help="fp16-master: static loss scale (the example's --static-loss-scale)."),
    dynamic_loss_scale: Optional[bool] = typer.Option(None, "--dynamic-loss-scale/--no-dynamic-loss-scale", help="fp16-master: dynamic loss scaling."),
    data_dir: Path = typer.Option(Path(os.environ.get("KIT_DATA_DIR", "data")), help="Data cache folder (env KIT_DATA_DIR)."),
    results_dir: Path = typer.Option(Path(os.environ.get("KIT_RESULTS_DIR", "results")), help="Where run folders and bundles go (env KIT_RESULTS_DIR)."),
    resume: Optional[Path] = typer.Option(None, help="Continue an interrupted run from its folder, skipping finished cells (refused while another process writes the folder; a complete run is left as it is)."),
    smoke: bool = typer.Option(False, "--smoke", help="A one-minute sanity run: resnet18, fp32 + amp-bf16 + fp16-master, 1 epoch of 4 steps, 1 repeat, synthetic data, plus a 5-batch LSTM."),
    skip_checks: bool = typer.Option(False, "--skip-checks", help="Do not run the driver/GPU checks first."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the cells the run would measure and a rough duration on stdout, then stop (options are checked; nothing is fetched or written)."),
) -> None:
    """Run the benchmark suites and write results.json, the journal and a bundle (its path on stdout)."""
    from kit.runner.service import run_from_cli

    run_from_cli(locals(), argv=sys.argv)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
