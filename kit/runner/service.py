"""Glue between `kit run`'s options and the runner: check, build the config, run, print.

Order of `kit run` (each step stops with one line and its exit code, before the next
writes anything):

1. every option is checked (:func:`config_from_options`; a resume folder by
   :func:`kit.runner.execute.read_resume_state`): exit 2;
2. ``--dry-run`` prints the plan on stdout and stops;
3. a resumed run folder is locked (exit 2 when another process writes it); a run that had
   already ended complete says so, with its bundle, and stops;
4. the results folder must be writable (exit 2; probed, nothing left), the benchmark stack
   (torch) must import (exit 6), the device must be usable (exit 6), the real data present
   or fetched (exit 3);
5. the run (kit.runner.execute): progress on stderr, the bundle's path on stdout.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from kit.errors import EnvironmentCheckError, UsageError
from kit.results.schema import RunConfig

LSTM_OVERRIDES = ("emsize", "nhid", "nlayers", "lr", "clip", "bptt", "dropout", "tied", "static_loss_scale", "dynamic_loss_scale")
#: the list options, by their flag: (flag, key in the options)
LIST_OPTIONS = (("--models", "models"), ("--precisions", "precisions"), ("--engines", "engines"), ("--preset", "presets"))
DEVICE_PATTERN = re.compile(r"(auto|cpu|cuda(:[0-9]+)?)")
BENCH_STACK_REMEDY = ("Install it with: pip install 'mpkit[bench]' (torch, torchvision, fastai), "
                      "or run in the kit's container instead: kit launch.")


def _split(values: list[str] | None, flag: str = "") -> list[str]:
    """A list option's names (repeated and/or comma-separated). Given but empty, or naming
    one thing twice, is a UsageError: a cell measured twice under one id is lost in a compare."""
    if values is None:
        return []
    out: list[str] = []
    for v in values:
        out.extend(x.strip() for x in str(v).split(",") if x.strip())
    if not out:
        raise UsageError(f"{flag or 'a list option'} is empty; it needs at least one name.",
                         remedy=f"Leave {flag} out to run them all, or name them, comma-separated.")
    twice = sorted({x for x in out if out.count(x) > 1})
    if twice:
        raise UsageError(f"{flag} names {', '.join(twice)} more than once; each is measured once per run.",
                         remedy=f"Name each once, e.g. {flag} {','.join(dict.fromkeys(out))}")
    return out


def normalise_device(device: str) -> str:
    """``--device`` as the runner reads it (auto, cpu, cuda or cuda:N), or a UsageError."""
    dev = str(device or "").strip().lower()
    if not DEVICE_PATTERN.fullmatch(dev):
        if dev.startswith("cuda"):
            raise UsageError(f"--device {device!r} is malformed: after 'cuda:' comes the GPU's number, e.g. cuda:0.",
                             remedy="Use cuda or cuda:N (N = the GPU's number, as nvidia-smi lists it).")
        raise UsageError(f"--device {device!r} is not a device the kit knows.",
                         remedy="Use auto, cpu, cuda or cuda:N (N = the GPU's number, as nvidia-smi lists it).")
    return dev


def check_results_dir(path: str | os.PathLike, create: bool = False) -> None:
    """A UsageError (exit 2) when runs cannot be written under ``path``.

    Without ``create`` nothing is touched: ``path`` (or its nearest existing parent)
    must be a folder this user may write in. With ``create`` the missing folders are
    made and a file written and removed there, which finds what a permission check
    cannot (``/proc``, a read-only mount); folders made for the probe are removed again,
    so a run that stops at a later check leaves nothing behind.
    """
    p = Path(path)
    flag = f"--results-dir {path}"
    existing = _nearest_existing(p)
    if not existing.is_dir():
        raise UsageError(f"{flag}: {existing} is a file, not a folder.", remedy=_results_remedy())
    if not os.access(str(existing), os.W_OK | os.X_OK):
        raise UsageError(f"{flag}: {existing} is not writable by this user.", remedy=_results_remedy())
    if not create:
        return
    import tempfile

    made: list[Path] = []
    try:
        for folder in reversed([p.absolute(), *p.absolute().parents]):
            if not folder.exists():
                folder.mkdir()
                made.append(folder)
        with tempfile.TemporaryFile(dir=str(p)):
            pass
    except OSError as exc:
        raise UsageError(f"{flag}: cannot create a folder or write a file there ({exc.strerror or exc}).",
                         remedy=_results_remedy()) from None
    finally:
        for folder in reversed(made):
            try:
                folder.rmdir()
            except OSError:
                pass


def _nearest_existing(path: Path) -> Path:
    """``path`` itself when it exists, else its nearest parent that does."""
    existing = path.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return existing


def _results_remedy() -> str:
    from kit.runner.execute import RESULTS_DIR_REMEDY

    return RESULTS_DIR_REMEDY


def check_bench_stack() -> None:
    """EnvironmentCheckError (exit 6) when the benchmark stack (torch) is missing or does not
    import: a host-only install (`pip install .`) has the command line but not the runner."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise EnvironmentCheckError("kit run needs the benchmark stack (PyTorch), which is not installed here.",
                                    remedy=BENCH_STACK_REMEDY)
    from kit.bench.api import import_stack

    problem = import_stack()
    if problem:
        raise EnvironmentCheckError(f"kit run needs the benchmark stack, but PyTorch does not import here ({problem}).",
                                    remedy=BENCH_STACK_REMEDY)


def check_options(opts: dict[str, Any]) -> None:
    """The checks RunConfig cannot make itself (it has no flags, paths or ranges of the CLI)."""
    if opts["compile"] not in ("auto", "on", "off"):
        raise UsageError("--compile must be auto, on or off")
    seed = opts.get("seed")
    if seed is not None and not 0 <= seed < 2 ** 31:
        raise UsageError(f"--seed {seed}: must be from 0 to 2147483647.")
    tolerance = opts.get("tolerance")
    if tolerance is not None and tolerance < 0:
        raise UsageError(f"--tolerance {tolerance}: must be 0 or more.")
    data_dir = Path(opts["data_dir"])
    existing = _nearest_existing(data_dir)
    if not existing.is_dir():
        where = "is a file" if existing == data_dir.absolute() else f"is under {existing}, a file"
        raise UsageError(f"--data-dir {data_dir}: {where}, not a folder.",
                         remedy="Point --data-dir (or KIT_DATA_DIR) at a folder; it is created if missing.")
    check_results_dir(opts["results_dir"])


def config_from_options(opts: dict[str, Any], argv: list[str] | None = None) -> RunConfig:
    """Every option of `kit run` checked in one place (UsageError, exit 2), before anything is
    printed or written, and turned into the run's RunConfig."""
    check_options(opts)
    device = normalise_device(opts["device"])
    lists = {key: _split(opts.get(key), flag) for flag, key in LIST_OPTIONS}
    suite = getattr(opts["suite"], "value", opts["suite"])
    if opts.get("smoke"):
        config = RunConfig(
            suite=suite,
            mode="throughput",
            device=device,
            data="synthetic",
            data_dir=str(opts["data_dir"]),
            models=lists["models"] or ["resnet18"],
            precisions=lists["precisions"] or ["fp32", "amp-bf16", "fp16-master"],
            engines=lists["engines"] or ["torch", "fastai"],
            presets=lists["presets"] or ["apex-2018"],
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
            isolate=opts.get("isolate") or "apex",
            **data_parallel_options(opts),
        )
    else:
        config = RunConfig(
            suite=suite,
            mode=opts["mode"],
            device=device,
            data=opts["data"],
            data_dir=str(opts["data_dir"]),
            models=lists["models"],
            precisions=lists["precisions"],
            engines=lists["engines"],
            presets=lists["presets"],
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
            isolate=opts.get("isolate") or "apex",
            **data_parallel_options(opts),
        )
    check_lstm_settings(config)
    return config


def data_parallel_options(opts: dict[str, Any]) -> dict:
    """--gpus, --global-batch-size, --scaling as RunConfig fields (checked there)."""
    if opts.get("global_batch_size") is not None and opts.get("batch_size") is not None:
        raise UsageError("give --batch-size (per GPU) or --global-batch-size, not both.")
    return {"gpus": opts.get("gpus"), "global_batch_size": opts.get("global_batch_size"),
            "scaling": bool(opts.get("scaling"))}


def check_lstm_settings(config: RunConfig) -> None:
    """Reject bad LSTM overrides (e.g. --dropout 1.5) before any cell runs, not after the CIFAR cells."""
    if config.suite not in ("lstm", "all"):
        return
    from kit.bench.lstm.config import resolve  # torch-free: presets and validation only
    from kit.runner.plan import build_plan

    for spec in build_plan(config).cells:
        if spec.workload == "lstm":
            resolve(spec.params, config.mode)


RESUME_NOTE = "Resuming: the run's own options (from its journal) apply; other run options are ignored."


def run_from_cli(opts: dict[str, Any], argv: list[str] | None = None) -> None:
    """`kit run`: the steps in this module's docstring. Progress, notes and the summary go to
    stderr; stdout gets only what a script wants: the bundle's path (the plan with --dry-run)."""
    from rich.console import Console

    from kit.runner.execute import read_resume_state

    console = Console(stderr=True)
    resume = opts.get("resume")
    if resume:
        resume_dir = Path(resume)
        state = read_resume_state(resume_dir)  # exit 2 when it is no run folder
        if opts.get("dry_run"):
            console.print(RESUME_NOTE)
            show_plan(state.config, state.done, Console())
            return
        if state.is_complete():  # checked without the lock: a complete run is never written again
            _already_complete(state, resume_dir, console)
            return
        _resume(resume_dir, opts, console)
        return
    config = config_from_options(opts, argv)
    if opts.get("dry_run"):
        show_plan(config, {}, Console())
        return
    results_dir = Path(opts["results_dir"])
    check_results_dir(results_dir, create=True)  # what a permission check misses (/proc, read-only mounts)
    _check_can_run(config, opts, console)
    if config.data == "real":
        ensure_real_data(config, console)
    _run_and_report(config, results_dir, None, None, console)


def _already_complete(state, resume_dir: Path, console, locked: bool = False) -> None:
    """`kit run --resume` of a run that ended complete: say so and print its bundle; write nothing."""
    from kit.runner.execute import already_complete

    outcome = already_complete(state, resume_dir, resume_dir.resolve().parent, locked=locked)
    console.print(outcome_summary(outcome))
    _print_bundle(outcome, console)


def _resume(resume_dir: Path, opts: dict[str, Any], console) -> None:
    from kit.runner.execute import read_resume_state
    from kit.runner.lock import RunLock

    # a resumed run's bundle lands beside its folder
    results_dir = resume_dir.resolve().parent
    with RunLock(resume_dir) as lock:  # exit 2 while another process writes the folder
        state = read_resume_state(resume_dir)  # again, now that no one else can write it
        if state.is_complete():  # it ended between the first read and the lock
            _already_complete(state, resume_dir, console, locked=True)
            return
        console.print(RESUME_NOTE)
        _check_can_run(state.config, opts, console)
        _run_and_report(None, results_dir, resume_dir, lock, console)


def _check_can_run(config: RunConfig, opts: dict[str, Any], console) -> None:
    """The benchmark stack imports (always) and the device is usable (unless --skip-checks): exit 6."""
    check_bench_stack()
    from kit.runner.isolate import check_data_parallel

    check_data_parallel(config)  # --gpus N: the GPUs exist here (exit 2)
    if not opts.get("skip_checks"):
        from kit.env.preflight import check_native_run

        check_native_run(config.device, console=console)


def _run_and_report(config: RunConfig | None, results_dir: Path, resume_dir: Path | None, lock, console) -> None:
    from kit.errors import Interrupted
    from kit.runner.execute import execute
    from kit.runner.progress import RichUI

    ui = RichUI(console=console)
    try:
        outcome = execute(config, results_dir, resume_dir=resume_dir, ui=ui, lock=lock)
    except Interrupted as exc:
        stopped = getattr(exc, "outcome", None)
        if stopped is not None and stopped.bundle:
            _print_stdout(str(stopped.bundle))
        raise
    finally:
        ui.close()
    res = outcome.results
    console.print("\n" + outcome_summary(outcome))
    for c in res.cells:
        if c.status == "skipped":
            console.print(f"  skipped {c.cell_id}: {c.reason}")
    _print_bundle(outcome, console)
    raise_if_cells_failed(outcome)


def _print_bundle(outcome, console) -> None:
    """The bundle's path on stdout (``bundle=$(kit run ...)``); its absence, with the remedy, on stderr."""
    if outcome.bundle:
        _print_stdout(str(outcome.bundle))
    elif outcome.already_complete:
        console.print(f"{outcome.bundle_error}; make one with: kit bundle export {outcome.run_dir}")
    elif outcome.bundle_error:
        console.print(f"[yellow]No bundle ({outcome.bundle_error}); results.json is in the run folder; retry with: kit bundle export {outcome.run_dir}[/yellow]")


def _print_stdout(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


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
    """"N cell(s) measured, N skipped, N failed. Run folder: ..." (kit run and the cuda10 runner);
    for a resume of a run that had already ended complete, that it was."""
    cells = outcome.results.cells
    if getattr(outcome, "already_complete", False):
        return (f"Run {outcome.run_dir} is already complete ({len(cells)} cell(s) finished); "
                "nothing was measured or written.")
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
