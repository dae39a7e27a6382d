"""Glue between `kit run`'s options (kit.runner.options.RunOptions) and the runner: check, build the config, run, print.

Order of `kit run` (each step stops with one line and its exit code, before the next
writes anything):

1. every option is checked (:func:`kit.runner.option_checks.config_from_options`; a resume folder by
   :func:`kit.runner.resume.read_resume_state`): exit 2;
2. ``--dry-run`` prints the plan on stdout and stops;
3. a resumed run folder is locked (exit 2 when another process writes it); a run that had
   already ended complete says so, with its bundle, and stops;
4. the results folder must be writable (exit 2; probed, nothing left), the benchmark stack
   must import (torch, and torchvision and fastai where the cells need them; exit 6), the
   device must be usable (exit 6), the real data present or fetched (exit 3);
5. the run (kit.runner.execute): progress on stderr, the bundle's path on stdout.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import NamedTuple

from kit.compare.measures import host_busy
from kit.errors import EnvironmentCheckError
from kit.results.run_files import LOG_NAME
from kit.results.schema import RunConfig
from kit.runner.option_checks import check_results_dir, check_resume_options
from kit.results import suites
from kit.runner.option_checks import config_from_options
from kit.runner.plan import build_plan
from kit.runner.options import RunOptions

def check_bench_stack(plan, console=None) -> None:
    """EnvironmentCheckError (exit 6) when the benchmark stack the run's cells need is missing or
    broken: torch not installed (a host-only install, `pip install .`), or torch, torchvision or
    fastai not importing (kit.env.bench_stack, in a child process: the pair that fixes it), or
    torch not importing in this process."""
    from kit.env.bench_stack import check_for_run, install_remedy, needed_for
    from kit.env.record import installed

    if not installed("torch"):
        raise EnvironmentCheckError("kit run needs the benchmark stack (PyTorch), which is not installed here.",
                                    remedy=install_remedy())
    check_for_run(needed_for(plan.cells), console)
    from kit.bench.api import import_stack

    problem = import_stack()
    if problem:
        raise EnvironmentCheckError(f"kit run needs the benchmark stack, but PyTorch does not import here ({problem}).",
                                    remedy=install_remedy())


RESUME_NOTE = "Resuming: the run's own options (from its journal) apply."


def run_from_cli(options: RunOptions, argv: list[str] | None = None) -> None:
    """`kit run`: the steps in this module's docstring. Progress, notes and the summary go to
    stderr; stdout gets only what a script wants: the bundle's path (the plan with --dry-run)."""
    from rich.console import Console

    from kit.runner.resume import read_resume_state

    console = Console(stderr=True)
    limit = time_limit(options)  # exit 2 for a malformed one, before anything else
    if options.resume:
        resume_dir = Path(options.resume)
        state = read_resume_state(resume_dir)  # exit 2 when it is no run folder
        check_resume_options(options, state.config, resume_dir)  # exit 2: an option that changes the run
        if options.dry_run:
            console.print(RESUME_NOTE)
            show_plan(build_plan(state.config), state.done, Console(), limit)
            return
        if state.is_complete():  # checked without the lock: a complete run is never written again
            _already_complete(state, resume_dir, console)
            return
        check_first_cell_fits(build_plan(state.config), state.done, limit, resume_dir)  # before the lock: nothing touched
        _resume(resume_dir, options, console, limit)
        return
    config = config_from_options(options, argv)
    plan = build_plan(config)  # each suite checks its cells' settings here (exit 2), before anything is written
    for problem in suites.broken().values():  # a plugin that does not load costs the other suites nothing
        console.print(f"[yellow]note: {problem}; it is left out.[/yellow]", highlight=False)
    if options.dry_run:
        show_plan(plan, {}, Console(), limit)
        return
    results_dir = Path(options.results_dir)
    check_results_dir(results_dir, create=True)  # what a permission check misses (/proc, read-only mounts)
    _check_can_run(plan, options, console)
    check_first_cell_fits(plan, {}, limit)
    if config.data == "real":
        ensure_real_data(config, console)
    _run_and_report(plan, results_dir, None, None, console, limit)


class TimeLimit(NamedTuple):
    """``--time-limit``: its time.monotonic() deadline, the words naming it, and its length (s)."""

    deadline: float
    words: str
    seconds: float


def time_limit(options: RunOptions) -> "TimeLimit | None":
    """``--time-limit`` as a :class:`TimeLimit` counted from now (its deadline and words are also its
    items 0 and 1, as the runner reads them), or None; a UsageError (exit 2) for a malformed one."""
    if options.time_limit is None:
        return None
    import time

    from kit.runner.options import parse_duration

    seconds = parse_duration(options.time_limit)
    return TimeLimit(time.monotonic() + seconds, f"--time-limit {options.time_limit}", seconds)


#: how kit run's refusal of a run whose first cell does not fit its --time-limit begins (kit launch
#: passes the container's on)
NOT_STARTED = "Run not started"


def first_cell_seconds(config, spec) -> float:
    """The estimate the start-up check (:func:`check_first_cell_fits`) and the dry run give the first
    cell left to run: on the device ``--device`` names; for 'auto', whose device is known only once
    torch is imported, the cheaper of the GPU's and the CPU's estimates."""
    from kit.runner.plan import cell_seconds

    if config.device == "auto":
        return min(cell_seconds(config, spec, kind) for kind in ("cuda", "cpu"))
    return cell_seconds(config, spec)


def check_first_cell_fits(plan, done: dict, limit, resume_dir: Path | None = None, command: str = "kit run") -> None:
    """Stop (TimeLimitReached, exit 124) before anything is written when the first cell left to run
    (``done``: a resumed run's finished cells) would not fit in what is left of ``limit``
    (:func:`time_limit`'s) by the plan's estimate: the run would stop before it anyway, leaving an empty
    run folder (or one more session in a resumed run's) and an empty bundle. The estimate's device is
    the one ``--device`` names; for 'auto', whose device is known only once torch is imported, the
    cheaper of the GPU's and the CPU's estimates, so that only a run that would stop either way is
    refused here. ``command``: the command the remedy names.

    The limit counts the start-up too: the imports and checks before this one (what ``limit``, a
    :class:`TimeLimit`, has spent so far) and, after it, the environment record and the device's
    calibration. The limit the remedy suggests is twice the start-up so far and twice the estimate (a
    cell may take half or twice it), so that a run given it starts its first cell."""
    if limit is None:
        return
    import math
    import time

    from kit.errors import TimeLimitReached

    todo = [spec for spec in plan.cells if spec.cell_id not in done]
    if not todo:
        return
    need = first_cell_seconds(plan.config, todo[0])
    left = limit[0] - time.monotonic()
    if need <= left:
        return
    seconds = getattr(limit, "seconds", None)
    spent = max(seconds - left, 0.0) if seconds is not None else 0.0
    where = f"nothing was written; {resume_dir} is as it was" if resume_dir else "no run folder was made"
    again = (f"{command} --resume {shlex.quote(str(resume_dir))} --time-limit" if resume_dir
             else f"{command} ... --time-limit")
    raise TimeLimitReached(
        f"{NOT_STARTED}: its first cell to run, {todo[0].cell_id}, has an estimate of {need:.1f} s and "
        f"{limit[1]} leaves {max(left, 0):.1f} s ({where}).",
        remedy=f"Give it more time: the limit counts the start-up ({spent:.1f} s until this check, and more before "
               f"the first cell) as well as the cells, and a cell may take half or twice its estimate; e.g. twice "
               f"both: {again} {math.ceil(2 * (spent + need))}s")


def _already_complete(state, resume_dir: Path, console, locked: bool = False) -> None:
    """`kit run --resume` of a run that ended complete: say so and print its bundle, made again
    beside the run folder when none verifies; nothing is written into the run folder."""
    from kit.runner.execute import already_complete

    outcome = already_complete(state, resume_dir, resume_dir.resolve().parent, locked=locked, make_bundle=True)
    console.print(outcome_summary(outcome))
    _print_bundle(outcome, console)


def _resume(resume_dir: Path, options: RunOptions, console, limit) -> None:
    from kit.runner.resume import read_resume_state
    from kit.runner.lock import RunLock

    # a resumed run's bundle lands beside its folder
    results_dir = resume_dir.resolve().parent
    with RunLock(resume_dir) as lock:  # exit 2 while another process writes the folder
        state = read_resume_state(resume_dir)  # again, now that no one else can write it
        if state.is_complete():  # it ended between the first read and the lock
            _already_complete(state, resume_dir, console, locked=True)
            return
        console.print(RESUME_NOTE)
        _check_can_run(build_plan(state.config), options, console)
        _run_and_report(None, results_dir, resume_dir, lock, console, limit)


def _check_can_run(plan, options: RunOptions, console) -> None:
    """The benchmark stack imports (always) and the device is usable (unless --skip-checks): exit 6."""
    config = plan.config
    check_bench_stack(plan, console)
    from kit.runner.isolate import check_data_parallel

    check_data_parallel(config)  # --gpus N: the GPUs exist here (exit 2)
    if not options.skip_checks:
        from kit.env.preflight import check_native_run

        check_native_run(config.device, console=console)


def _run_and_report(plan, results_dir: Path, resume_dir: Path | None, lock, console, limit=None) -> None:
    from kit.errors import Interrupted
    from kit.runner.execute import execute
    from kit.runner.progress import RichUI

    ui = RichUI(console=console)
    try:
        outcome = execute(plan, results_dir, resume_dir=resume_dir, ui=ui, lock=lock, time_limit=limit)
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
    """The bundle's path on stdout (``bundle=$(kit run ...)``), and on stderr where its report is (the
    bundle's report.html, copied into the run folder; a resume of a complete run writes nothing there);
    its absence, with the remedy, on stderr."""
    if outcome.bundle:
        from kit.report.export import run_report

        _print_stdout(str(outcome.bundle))
        console.print(run_report(outcome.bundle, outcome.run_dir, write=not outcome.already_complete),
                      markup=False, soft_wrap=True)
    elif outcome.already_complete:
        console.print(f"{outcome.bundle_error}; make one with: kit bundle export {shlex.quote(str(outcome.run_dir))}",
                      markup=False, soft_wrap=True)
    elif outcome.bundle_error:
        console.print(f"No bundle ({outcome.bundle_error}); results.json is in the run folder; retry with: "
                      f"kit bundle export {shlex.quote(str(outcome.run_dir))}", style="yellow", markup=False, soft_wrap=True)


def _print_stdout(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def export_bundle(run_dir: Path, out: Path | None = None) -> Path:
    """`kit bundle export`: the bundle of the run folder ``run_dir`` (finished, or stopped: kit.report.export)
    in ``out`` (default: beside it). A run folder that another process still writes (its lock,
    kit.runner.lock) is refused (UsageError, exit 2): its bundle would hold only the cells finished so far,
    labelled interrupted, while that run goes on and makes its own bundle at its end."""
    from kit.errors import UsageError
    from kit.report.export import export_run
    from kit.runner.lock import RunLock

    holder = RunLock(run_dir).writer()
    if holder is not None:
        pid, host = holder.get("pid", "unknown"), holder.get("host", "unknown")
        raise UsageError(
            f"run folder in use (pid {pid}, host {host}): {run_dir} is being written by a run that has not ended, so "
            "a bundle of it now would hold only the cells finished so far, labelled interrupted; nothing was written.",
            remedy=f"Wait for that run to end: it makes its own bundle. To stop it sooner, kill -TERM {pid} on {host}: it "
                   "keeps its finished cells and makes their bundle.")
    return export_run(run_dir, out if out is not None else Path(run_dir).resolve().parent)


def show_plan(plan, done: dict, console, limit=None) -> None:
    """`kit run --dry-run`: the cells the run would measure (those a resumed run has left,
    ``done`` being its finished ones) and a rough duration, and with ``--time-limit`` (``limit``,
    :func:`time_limit`'s) how many of them the estimate fits in it; nothing is checked, fetched,
    trained or written. Precisions the machine cannot run are only known when the run
    starts: they are recorded as skipped."""
    import time

    from kit.runner.plan import cell_seconds
    from kit.runner.progress import print_plan

    print_plan(console, plan, done)
    todo = [c for c in plan.cells if c.cell_id not in done]
    if limit is not None and todo:
        left, words = limit[0] - time.monotonic(), limit[1]
        fit = 0
        for spec in todo:  # as the run decides: in order, each cell started only if its estimate fits
            left -= first_cell_seconds(plan.config, spec) if not fit else cell_seconds(plan.config, spec)
            if left < 0:
                break
            fit += 1
        if fit == 0:
            console.print(f"{words}: by the estimate, not even the first of the {len(todo)} cell(s) to run fits in "
                          "it: the run would not start.")
        else:
            console.print(f"{words}: by the estimate, {'all' if fit == len(todo) else f'the first {fit} of the'} "
                          f"{len(todo)} cell(s) to run fit in it" + ("" if fit == len(todo) else
                                                                   "; `kit run --resume` goes on with the rest") + ".")
    console.print("Dry run: nothing was run. Cells this machine cannot run (e.g. apex-* without Apex, "
                  "amp-bf16 before Ampere) are recorded as skipped when the run starts.")


def outcome_summary(outcome) -> str:
    """"N cell(s) measured, N skipped, N failed. Run folder: ..." (kit run and the cuda10 runner);
    for a resume of a run that had already ended complete, that it was."""
    cells = outcome.results.cells
    if getattr(outcome, "already_complete", False):
        if getattr(outcome, "bundle_remade", False):
            return (f"Run {outcome.run_dir} is already complete ({len(cells)} cell(s) finished); nothing was "
                    "measured, and its bundle, which was missing or did not verify, was made again.")
        return (f"Run {outcome.run_dir} is already complete ({len(cells)} cell(s) finished); "
                "nothing was measured or written.")
    counts = {s: sum(c.status == s for c in cells) for s in ("ok", "skipped", "failed")}
    busy = [(c.cell_id, host_busy(c)) for c in cells if c.status == "ok" and host_busy(c)]
    said = ""
    if busy:
        shown = "; ".join(f"{cid}: {why}" for cid, why in busy[:3]) + ("; ..." if len(busy) > 3 else "")
        said = (f" {len(busy)} of them measured while the host was busy ({shown}): their times include waiting for "
                "the CPU, so they may be the load, not the machine (marked in `kit bundle show`, the report and "
                "`kit compare`); measure again on a quiet host.")
    return (f"{counts['ok']} cell(s) measured, {counts['skipped']} skipped, {counts['failed']} failed.{said} "
            f"Run folder: {outcome.run_dir}")


def raise_if_cells_failed(outcome) -> None:
    """RunFailed (exit 8) naming the first failed cells, when any failed; finished cells are kept."""
    failed = [c for c in outcome.results.cells if c.status == "failed"]
    if failed:
        from kit.errors import RunFailed

        raise RunFailed(
            f"{len(failed)} cell(s) failed: " + "; ".join(f"{c.cell_id} ({c.reason})" for c in failed[:5]),
            remedy=f"See {outcome.run_dir / LOG_NAME} for the tracebacks; finished cells are kept.",
        )


def ensure_real_data(config: RunConfig, console, progress: bool = True) -> None:
    """Fetch (with a progress bar) whatever real data set the run needs and lacks,
    before any run folder exists; a failure names the file, checksum and folder."""
    from kit.data.service import check_placed, describe, fetch_dataset, fetch_reason

    from kit.runner.plan import dataset_splits, datasets

    names = datasets(config)
    for name in names:
        splits = dataset_splits(config, name)
        d = describe(config.data_dir, name, "real", splits)
        for s in suites.run_by(config.suite):
            note = s.data_note(config, name, d) if s.data_note and name in s.datasets else None
            if note:
                console.print(note)
        if d.get("placed_by_hand"):
            # files placed by hand are used as they are, once the data set's check of them passes
            # (WikiText-2: its published token counts): here, before a run folder exists (exit 3)
            check_placed(name, config.data_dir, splits)
            continue
        if d.get("present") and not d.get("problem"):
            continue
        console.print(fetch_reason(d))
        fetch_dataset(name, config.data_dir, progress=progress)
