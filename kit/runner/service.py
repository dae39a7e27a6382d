"""Glue between `kit run`'s options and the runner: build the config, check, run, print."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.errors import UsageError
from kit.results.schema import RunConfig

LSTM_OVERRIDES = ("emsize", "nhid", "nlayers", "lr", "clip", "bptt", "dropout", "tied", "static_loss_scale", "dynamic_loss_scale")


def _split(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip() for x in str(v).split(",") if x.strip())
    return out


def config_from_options(opts: dict[str, Any], argv: list[str] | None = None) -> RunConfig:
    if opts["compile"] not in ("auto", "on", "off"):
        raise UsageError("--compile must be auto, on or off")
    suite = getattr(opts["suite"], "value", opts["suite"])
    if opts.get("smoke"):
        return RunConfig(
            suite=suite,
            mode="throughput",
            device=opts["device"],
            data="synthetic",
            data_dir=str(opts["data_dir"]),
            models=_split(opts.get("models")) or ["resnet18"],
            precisions=_split(opts.get("precisions")) or ["fp32", "amp-bf16", "fp16-master"],
            engines=_split(opts.get("engines")) or ["torch", "fastai"],
            presets=_split(opts.get("presets")) or ["apex-2018"],
            epochs=1,
            steps=opts.get("steps") or 4,
            max_batches=opts.get("max_batches") or 5,
            batch_size=opts.get("batch_size") or 32,
            image_size=opts["image_size"],
            repeats=1,
            seed=opts["seed"],
            compile="off" if opts["compile"] == "auto" else opts["compile"],
            lstm={k: opts.get(k) for k in LSTM_OVERRIDES if opts.get(k) is not None},
            command_line=list(argv or []),
        )
    return RunConfig(
        suite=suite,
        mode=opts["mode"],
        device=opts["device"],
        data=opts["data"],
        data_dir=str(opts["data_dir"]),
        models=_split(opts.get("models")),
        precisions=_split(opts.get("precisions")),
        engines=_split(opts.get("engines")),
        presets=_split(opts.get("presets")),
        epochs=opts.get("epochs"),
        steps=opts.get("steps"),
        max_batches=opts.get("max_batches"),
        batch_size=opts.get("batch_size"),
        image_size=opts["image_size"],
        repeats=opts["repeats"],
        seed=opts["seed"],
        find_max_batch=opts["find_max_batch"],
        compile=opts["compile"],
        tolerance=opts.get("tolerance"),
        lstm={k: opts.get(k) for k in LSTM_OVERRIDES if opts.get(k) is not None},
        command_line=list(argv or []),
    )


def check_lstm_settings(config: RunConfig) -> None:
    """Reject bad LSTM overrides (e.g. --dropout 1.5) before any cell runs, not after the CIFAR cells."""
    if config.suite not in ("lstm", "all"):
        return
    from kit.bench.lstm.config import resolve  # torch-free: presets and validation only
    from kit.runner.plan import build_plan

    for spec in build_plan(config).cells:
        if spec.workload == "lstm":
            resolve(spec.params, config.mode)


def run_from_cli(opts: dict[str, Any], argv: list[str] | None = None) -> None:
    from rich.console import Console

    from kit.runner.execute import execute
    from kit.runner.progress import RichUI

    console = Console(stderr=True)
    resume = opts.get("resume")
    config = None if resume else config_from_options(opts, argv)
    results_dir = Path(opts["results_dir"])
    run_config, done = config, {}
    if resume:
        from kit.runner.execute import load_resume_state

        # a resumed run keeps its own options (from its journal) and its bundle lands beside it
        run_config, _run_id, done, _started = load_resume_state(Path(resume))
        results_dir = Path(resume).resolve().parent
        console.print("Resuming: the run's own options (from its journal) apply; other run options are ignored.")
    device = run_config.device
    if opts.get("dry_run"):
        show_plan(run_config, done, console)
        return
    if not opts.get("skip_checks"):
        from kit.env.preflight import check_native_run

        check_native_run(device, console=console)
    if config is not None:
        check_lstm_settings(config)
    if config is not None and config.data == "real":
        ensure_real_data(config, console)
    ui = RichUI(console=console)
    try:
        outcome = execute(config, results_dir, resume_dir=Path(resume) if resume else None, ui=ui)
    finally:
        ui.close()
    res = outcome.results
    console.print("\n" + outcome_summary(outcome))
    for c in res.cells:
        if c.status == "skipped":
            console.print(f"  skipped {c.cell_id}: {c.reason}")
    if outcome.bundle:
        console.print(f"Bundle: {outcome.bundle}")
    elif outcome.bundle_error:
        console.print(f"[yellow]No bundle ({outcome.bundle_error}); results.json is in the run folder; retry with: kit bundle export {outcome.run_dir}[/yellow]")
    raise_if_cells_failed(outcome)


def show_plan(config: RunConfig, done: dict, console) -> None:
    """`kit run --dry-run`: the cells the run would measure (those a resumed run has left,
    ``done`` being its finished ones) and a rough duration; nothing is checked, fetched,
    trained or written. Precisions the machine cannot run are only known when the run
    starts: they are recorded as skipped."""
    from kit.runner.plan import build_plan
    from kit.runner.progress import print_plan

    check_lstm_settings(config)
    print_plan(console, build_plan(config), done)
    console.print("Dry run: nothing was run. Cells this machine cannot run (e.g. apex-* without Apex, "
                  "amp-bf16 before Ampere) are recorded as skipped when the run starts.")


def outcome_summary(outcome) -> str:
    """"N cell(s) measured, N skipped, N failed. Run folder: ..." (kit run and the cuda10 runner)."""
    cells = outcome.results.cells
    counts = {s: sum(c.status == s for c in cells) for s in ("ok", "skipped", "failed")}
    return (f"{counts['ok']} cell(s) measured, {counts['skipped']} skipped, {counts['failed']} failed. "
            f"Run folder: {outcome.run_dir}")


def raise_if_cells_failed(outcome) -> None:
    """RunFailed (exit 8) naming the first failed cells, when any failed; finished cells are kept."""
    failed = [c for c in outcome.results.cells if c.status == "failed"]
    if failed:
        from kit.errors import RunFailed

        raise RunFailed(
            f"{len(failed)} cell(s) failed: " + "; ".join(f"{c.cell_id} ({c.reason})" for c in failed[:5]),
            remedy=f"See {outcome.run_dir / 'run.log'} for the tracebacks; finished cells are kept.",
        )


def ensure_real_data(config: RunConfig, console, progress: bool = True) -> None:
    """Fetch (with a progress bar) whatever real data set the run needs and lacks,
    before any run folder exists; a failure names the file, checksum and folder."""
    from kit.data import describe, fetch_dataset
    from kit.data.service import fetch_reason

    from kit.runner.plan import SUITE_DATASETS

    names = SUITE_DATASETS[config.suite]
    for name in names:
        d = describe(config.data_dir, name, "real")
        if d.get("present") and not d.get("problem"):
            continue
        console.print(fetch_reason(d))
        fetch_dataset(name, config.data_dir, progress=progress)
