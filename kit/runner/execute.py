"""Run a plan: journal every event, write results after each cell, resume, bundle.

Flow of ``kit run`` (one module per step)::

    kit.cli.run -> kit.runner.plan.build_plan -> kit.env.preflight.check_native_run
      -> kit.runner.execute.execute
           for each cell: kit.bench.api.run_cell  (the only code that imports torch;
                          in a process of its own for Apex cells: kit.runner.isolate)
                          kit.env.telemetry sampler around it
                          journal "cell_end" + results.json (atomic)
      -> kit.report.export.export_run  -> results/<machine>_<gpu>_<stack>_<date>.tar.gz
         (kit.bundle writes the bundle, kit.report renders its charts and report.html)

A crash, Ctrl-C or SIGTERM never loses a finished cell: each one is in the
journal (fsynced) and in results.json before the next starts. ``--resume RUN_DIR``
reads the journal back and skips finished cells; a run that had already ended
complete is left as it is. One process at a time writes a run folder
(kit.runner.lock): a second one is refused.

The steps of a run live beside it: reading an earlier run back (kit.runner.resume), one cell
(kit.runner.cell_run), SIGTERM (kit.runner.stop_signals), the run's log (kit.runner.run_log).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shlex
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kit import __version__
from kit.errors import DiskFull, Interrupted, KitError, Terminated, TimeLimitReached, UsageError
from kit.results.atomic import atomic_write_json
from kit.results.derive import derive
from kit.results.journal import JOURNAL_NAME, Journal
from kit.results.run_files import ENV_NAME, LOG_NAME, RESULTS_NAME
from kit.results.schema import CellResult, RunConfig, RunResults
from kit.runner.cell_run import _run_one
from kit.runner.lock import RunLock
from kit.runner.plan import Plan, build_plan, cell_seconds
from kit.runner.resume import ResumeState, find_bundle, read_resume_state
from kit.runner.run_log import _attach_log, _detach_log
from kit.runner.stop_signals import (TIME_LIMIT, _install_stop_handlers, _restore_handlers, _stop_reason,
                                     arm_time_limit, disarm_time_limit, reset_stops, stop_at_time_limit,
                                     stop_requested)

if TYPE_CHECKING:
    from kit.runner.progress import NullUI

log = logging.getLogger("kit.run")

@dataclass
class RunOutcome:
    run_dir: Path
    results: RunResults
    bundle: Path | None
    bundle_error: str | None = None
    #: ``--resume`` of a run that had already ended complete: nothing was measured, and nothing
    #: written into the run folder (``bundle`` is the run's bundle that verifies, when one is found)
    already_complete: bool = False
    #: ... and no bundle of it verified, so ``bundle`` was made from the run folder again
    bundle_remade: bool = False


def new_run_id(suite: str) -> str:
    host = socket.gethostname().split(".")[0] or "host"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{host}-{suite}-{secrets.token_hex(2)}"


def _keep_earlier_session(run_dir: Path, environment: dict, finished: list) -> None:
    """A resume keeps the environment of the sessions that measured the finished cells
    (kit.env.record.keep_earlier_session) and says when they ran on another machine or GPU; a resume on
    another GPU model is refused (UsageError) before anything is measured or env.json is written."""
    from kit.env import record as env_record

    try:
        previous = json.loads((run_dir / ENV_NAME).read_text())
    except (OSError, ValueError) as e:
        log.warning("resume: the earlier session's %s could not be read (%s); its cells keep no environment", ENV_NAME, e)
        return
    if not isinstance(previous, dict):
        return
    before, here = env_record.gpu_models(previous), env_record.gpu_models(environment)
    if finished and before and here and before != here:  # one run's cells are one GPU model's (as merge insists)
        raise UsageError(
            f"--resume {run_dir}: its finished cells were measured on {', '.join(before)}, and this machine has "
            f"{', '.join(here)}; cells of different GPU models do not belong in one run.",
            remedy=f"Resume it on a machine with {', '.join(before)}, or start a new run here (kit run without --resume); "
                   "kit compare lines up runs of different GPUs.")
    other = env_record.keep_earlier_session(environment, previous, finished)
    if other is not None:
        gpus = ", ".join(str(g.get("uuid")) for g in env_record.gpu_records(other) or []) or "unknown GPUs"
        note = (f"this run started on another machine or GPU (host {env_record.host_id_of(other)}, {gpus}); "
                f"its {len(other['cells'])} finished cell(s) were measured there, and {ENV_NAME} keeps that "
                "machine's record under earlier_sessions")
        log.warning(note)
        print(f"note: {note}", file=sys.stderr)


def execute(
    plan: "Plan | RunConfig | None",
    results_root: Path,
    resume_dir: Path | None = None,
    ui: NullUI | None = None,
    make_bundle: bool = True,
    lock: RunLock | None = None,
    time_limit: "tuple[float, str] | None" = None,
) -> RunOutcome:
    """Run ``plan`` (or a config, planned here) into a new folder under ``results_root``, or continue
    ``resume_dir`` (``plan`` None: the run's own, from its journal).

    ``time_limit`` (``kit run --time-limit``: a time.monotonic() deadline and the words naming it):
    a cell whose plan estimate would end past the deadline is not started, and one still running at
    it stops as at Ctrl-C; either way the run ends interrupted (TimeLimitReached, exit 124).

    The run folder is locked (kit.runner.lock) before anything is written into it and
    until its bundle is made; pass ``lock`` when the caller already holds it (``kit run
    --resume`` takes it before its checks). A resumed run that had already ended
    complete is returned as it is (``already_complete``), with nothing written into its
    folder; with ``make_bundle``, its bundle is made again where none verifies.
    """
    from kit.runner.progress import NullUI

    ui = ui or NullUI()
    if isinstance(plan, RunConfig):
        plan = build_plan(plan)
    own_lock = lock is None
    if resume_dir is not None:
        run_dir = Path(resume_dir)
        if lock is None:
            state = read_resume_state(run_dir)  # a complete run is never written again: no lock needed
            if state.is_complete():
                return already_complete(state, run_dir, results_root, make_bundle=make_bundle)
            lock = RunLock(run_dir).acquire()
    else:
        assert plan is not None
        run_dir = make_run_dir(Path(results_root) / new_run_id(plan.config.suite))
        lock = RunLock(run_dir).acquire()
    try:
        if resume_dir is not None:
            state = read_resume_state(run_dir)
            if state.is_complete():
                return already_complete(state, run_dir, results_root, locked=True, make_bundle=make_bundle)
            return _execute_locked(build_plan(state.config), state.run_id, run_dir, results_root, state.done,
                                   state.started_at, lock, ui, make_bundle, resumed=True, time_limit=time_limit)
        return _execute_locked(plan, run_dir.name, run_dir, results_root, {}, None, lock, ui, make_bundle, resumed=False,
                               time_limit=time_limit)
    except DiskFull as exc:
        exc.remedy = disk_full_remedy(run_dir)
        raise
    finally:
        if own_lock:
            lock.release()


def disk_full_remedy(run_dir: Path) -> str:
    """What to do after the disk filled during the run in ``run_dir``: make the bundle of a run
    that ended complete, continue one whose journal has begun, else start again."""
    try:
        status = json.loads((run_dir / RESULTS_NAME).read_text(encoding="utf-8")).get("status")
    except (OSError, ValueError, AttributeError):
        status = None
    if status == "complete":
        return f"Free some space, then make the run's bundle: kit bundle export {shlex.quote(str(run_dir))}"
    try:
        begun = (run_dir / JOURNAL_NAME).stat().st_size > 0
    except OSError:
        begun = False
    if begun:
        return f"Free some space, then continue the run where it stopped: kit run --resume {shlex.quote(str(run_dir))}"
    return f"Free some space (or choose another folder) and run again; {run_dir} holds nothing to resume."


def make_run_dir(run_dir: Path) -> Path:
    """Create the run folder, or say in one line why it cannot be (exit 2)."""
    try:
        run_dir.mkdir(parents=True, exist_ok=False)
    except OSError as exc:
        raise DiskFull.from_os_error(exc, run_dir.parent) or UsageError(
            f"cannot create the run folder {run_dir}: {exc.strerror or exc}.", remedy=RESULTS_DIR_REMEDY) from None
    return run_dir


RESULTS_DIR_REMEDY = "Point --results-dir (or KIT_RESULTS_DIR) at a folder you can write in; it is created if missing."


def already_complete(state: ResumeState, run_dir: Path, results_root: Path, locked: bool = False,
                     make_bundle: bool = False) -> RunOutcome:
    """The outcome of resuming a run that had ended complete: its cells and its bundle. Nothing is
    written into the run folder; with ``make_bundle``, a bundle is made from it again when none of
    this run in ``results_root`` verifies and holds its cells (it was deleted, or damaged in a copy),
    so that a resume, `kit fleet slurm resubmit`'s too, ends with one; a KitError (exit 1) when that
    fails. ``locked``: the caller holds the run folder's lock."""
    plan = build_plan(state.config)
    results = RunResults(run_id=state.run_id, config=state.config, cells=[state.done[c] for c in plan.cell_ids],
                         status="complete", started_at=state.started_at)
    if not locked:
        # a process that is still finishing the run holds the lock until its bundle exists (then: in
        # use, exit 2); only looked at, never created, so a read-only run folder is no error
        RunLock(run_dir).check_not_in_use()
    bundle = find_bundle(run_dir, Path(results_root), state.run_id)
    if bundle is not None or not make_bundle:
        error = None if bundle else f"no bundle of this run found in {results_root}"
        return RunOutcome(run_dir, results, bundle, error, already_complete=True)
    from kit.report.export import export_run

    try:
        bundle = export_run(run_dir, Path(results_root))
    except DiskFull:
        raise
    except (KitError, OSError) as exc:
        why = exc.message if isinstance(exc, KitError) else (exc.strerror or str(exc))
        raise KitError(f"run {run_dir} is complete, but no bundle of it in {results_root} verifies, and making one "
                       f"again failed: {why.rstrip('.')}.",
                       remedy=f"Make it in a folder you can write in: kit bundle export {shlex.quote(str(run_dir))} --out DIR") from None
    return RunOutcome(run_dir, results, bundle, None, already_complete=True, bundle_remade=True)


def _execute_locked(plan: Plan, run_id: str, run_dir: Path, results_root: Path, done: dict[str, CellResult],
                    started: float | None, lock: RunLock, ui, make_bundle: bool, resumed: bool,
                    time_limit: "tuple[float, str] | None" = None) -> RunOutcome:
    """Run ``plan`` in ``run_dir`` (its lock held), one step each: open the run (its log, env.json,
    the journal), measure the cells not ``done`` and close the run (:func:`_measure_and_close`),
    make its bundle, then end as the run did (an interrupted run raises its error)."""
    _attach_log(run_dir / LOG_NAME)
    _log_start(plan, run_id, run_dir, lock)
    environment = _record_environment(plan, run_dir, done, resumed)
    results = RunResults(run_id=run_id, config=plan.config, environment=environment, started_at=started or time.time())
    journal = _open_journal(plan, run_id, run_dir, done, resumed, lock)
    ui.plan(plan, done)

    status, signal_name, reason = _measure_and_close(plan, results, journal, done, run_dir, ui, time_limit)

    bundle, bundle_error = None, None
    if make_bundle:
        bundle, bundle_error = _bundle(run_dir, results_root)
    outcome = RunOutcome(run_dir, results, bundle, bundle_error)
    if status == "interrupted":
        raise _interrupted(outcome, reason, signal_name)
    return outcome


def _log_start(plan: Plan, run_id: str, run_dir: Path, lock: RunLock) -> None:
    """The run's first lines in run.log: the kit, the command, the plan, a lock taken over."""
    config = plan.config
    log.info("kit %s, Python %s, pid %d; run %s in %s", __version__, sys.version.split()[0], os.getpid(), run_id, run_dir)
    log.info("command: %s", " ".join(config.command_line) or "(called from Python)")
    log.info("plan: %d cell(s) x %d repeat(s), %s mode, %s data, device %s", len(plan.cells), config.repeats,
             config.mode, config.data, config.device)
    if lock.took_over:
        note = f"took over the run folder's lock from {lock.took_over}, which ended without releasing it"
        log.warning(note)
        print(f"note: {note}", file=sys.stderr)


def _record_environment(plan: Plan, run_dir: Path, done: dict[str, CellResult], resumed: bool) -> dict:
    """The environment record (kit.env.record) with the data's provenance and the host's load,
    written to env.json; a resume keeps the earlier sessions' (:func:`_keep_earlier_session`)."""
    from kit.env import record as env_record
    from kit.env.hostload import snapshot

    environment = env_record.collect(plan.config)
    environment["data_provenance"] = _data_provenance(plan.config)
    environment["host_load"] = snapshot()
    if resumed:
        _keep_earlier_session(run_dir, environment, [c for c in plan.cell_ids if c in done])
    atomic_write_json(run_dir / ENV_NAME, environment)
    return environment


def _open_journal(plan: Plan, run_id: str, run_dir: Path, done: dict[str, CellResult], resumed: bool,
                  lock: RunLock) -> Journal:
    """The run's journal, its first event written: the run's start, or a resume's note."""
    journal = Journal(run_dir / JOURNAL_NAME)
    if not resumed:
        journal.write("run_start", run_id=run_id, config=plan.config.to_dict(), cells=plan.cell_ids)
    else:
        log.info("resumed: %d finished cell(s) kept, %d to run", len(done), len([c for c in plan.cell_ids if c not in done]))
        journal.write("note", message=f"resumed; {len(done)} finished cell(s) kept", resumed=True)
    if lock.took_over:
        journal.write("note", message=f"took over the run folder's lock from {lock.took_over} (it ended without releasing it)",
                      lock_taken_over=lock.took_over)
    return journal


def _measure_and_close(plan: Plan, results: RunResults, journal: Journal, done: dict[str, CellResult], run_dir: Path,
                       ui, time_limit: "tuple[float, str] | None") -> tuple[str, str | None, str | None]:
    """Measure the cells (:func:`_measure`) under the stop handlers, and close the run however that
    ends (:func:`_close_run`). Returns the status ("complete" or "interrupted"), and for an
    interruption the signal's name and the reason in words; a failure is raised after the close."""
    status = "complete"
    reason = signal_name = None
    # `docker stop` (and kill) send SIGTERM: stop like Ctrl-C so the run ends with its journal
    # closed, results.json marked interrupted and a bundle of what finished; the journal names the signal
    previous_handlers = None
    reset_stops(time_limit[1] if time_limit is not None else None)
    if threading.current_thread() is threading.main_thread():
        previous_handlers = _install_stop_handlers()
    armed = False  # the time limit's timer (main thread only; a cell not started in time is stopped anywhere)
    try:
        if time_limit is not None and previous_handlers is not None:
            armed = True
            arm_time_limit(time_limit[0])
        _measure(plan, results, journal, done, run_dir, ui, time_limit)
    except KeyboardInterrupt:  # the time limit's alarm raises nothing more while this is handled (stop_signals)
        signal_name, reason = _stop_reason()
        if signal_name != TIME_LIMIT or len(results.cells) < len(plan.cells):  # else: it came as the last cell ended
            status = "interrupted"
            log.warning("run %s", reason)
            journal.write("run_interrupted", message=reason, signal=signal_name)
    except BaseException as exc:
        status = "failed"
        log.error("run failed:\n%s", traceback.format_exc())
        if not isinstance(exc, DiskFull):  # nothing more fits on a full disk; it is said in one line
            journal.write("note", message="run failed", error=traceback.format_exc())
        raise
    finally:
        if previous_handlers is not None:
            if armed:
                disarm_time_limit()
            _restore_handlers(previous_handlers)
        reset_stops()  # said in the journal above; a later run in this process starts clean
        _close_run(plan, results, journal, run_dir, status)
    return status, signal_name, reason


def _measure(plan: Plan, results: RunResults, journal: Journal, done: dict[str, CellResult], run_dir: Path,
             ui, time_limit: "tuple[float, str] | None") -> None:
    """The device's set-up (:func:`_prepare_device`), then each cell in the plan's order: a finished
    one kept, the others run, each ended in the journal and results.json before the next starts."""
    from kit.bench import api as bench  # torch is imported here, and only here

    config = plan.config
    device = _prepare_device(bench, config, results, run_dir)
    for spec in plan.cells:
        if stop_requested():  # its KeyboardInterrupt was swallowed where it landed (a weakref callback)
            raise KeyboardInterrupt("a stop signal arrived during the last cell")
        if spec.cell_id in done:
            results.cells.append(done[spec.cell_id])
            ui.cell_skipped_resume(spec)
            continue
        if time_limit is not None:
            _start_in_time(spec, config, device, time_limit[0])
        result = _run_one(bench, spec, config, device, run_dir, journal, ui)
        results.cells.append(result)
        journal.write("cell_end", spec.cell_id, result=result.to_dict())
        atomic_write_json(run_dir / RESULTS_NAME, results.to_dict())
        ui.cell_done(spec, result)


def _prepare_device(bench, config: RunConfig, results: RunResults, run_dir: Path) -> str:
    """The device the cells run on, with what the environment record learns only now (the CUDA
    runtime, the device, its calibrated peak and memory bandwidth: env.json rewritten)."""
    from kit.env import record as env_record

    results.environment["cuda_runtime"] = env_record.runtime_versions()

    device = bench.resolve_device(config.device)
    log.info("device: %s", device)
    # the results (and so the bundle) say whether the cells were profiled, not "the default": a
    # bundle reads the same in a kit whose default differs (the journal keeps the run's own option)
    config.profile_window = config.profiles(device)
    results.environment.setdefault("run_device", device)
    if "peak_tflops_measured" not in results.environment:
        results.environment["peak_tflops_measured"] = bench.calibrate(device)
        atomic_write_json(run_dir / ENV_NAME, results.environment)
    if "memory_bandwidth_measured" not in results.environment:
        results.environment["memory_bandwidth_measured"] = bench.memory_bandwidth(device)
        atomic_write_json(run_dir / ENV_NAME, results.environment)
    return device


def _close_run(plan: Plan, results: RunResults, journal: Journal, run_dir: Path, status: str) -> None:
    """End the run in every case: its status (fewer cells than planned is interrupted), the derived
    figures, the journal's "run_end" and close, results.json, and run.log's last line."""
    config = plan.config
    results.status = status if status != "complete" or len(results.cells) == len(plan.cells) else "interrupted"
    results.finished_at = time.time()
    results.derived = derive(results.cells, config.mode, config.tolerance, results.environment)
    try:
        journal.write("run_end", status=results.status)
    finally:  # a full disk (DiskFull) still closes the journal and the log
        try:
            journal.close()
            atomic_write_json(run_dir / RESULTS_NAME, results.to_dict())
            counts = {s: sum(c.status == s for c in results.cells) for s in ("ok", "skipped", "failed")}
            log.info("run ended %s: %d cell(s) ok, %d skipped, %d failed, %d not run; results in %s", results.status,
                     counts["ok"], counts["skipped"], counts["failed"], len(plan.cells) - len(results.cells),
                     run_dir / RESULTS_NAME)
        finally:
            _detach_log()


def _interrupted(outcome: RunOutcome, reason: str | None, signal_name: str | None) -> Interrupted:
    """The error an interrupted run ends with (Ctrl-C, SIGTERM, its time limit), carrying its
    outcome: the CLI prints the bundle's path on stdout."""
    kept = sum(c.status in ("ok", "skipped") for c in outcome.results.cells)
    error_class = (Terminated if reason and reason.startswith("terminated")
                   else TimeLimitReached if signal_name == TIME_LIMIT else Interrupted)
    exc = error_class(
        f"Run {reason}: {kept} finished cell(s) kept in {outcome.run_dir}" + (f"; bundle {outcome.bundle}" if outcome.bundle else ""),
        remedy=f"Continue with: kit run --resume {shlex.quote(str(outcome.run_dir))}",
    )
    exc.outcome = outcome  # type: ignore[attr-defined]
    return exc


def _start_in_time(spec, config: RunConfig, device: str, deadline: float) -> None:
    """Stop the run (as at its time limit) rather than start a cell that the plan's estimate
    (kit.runner.plan.cell_seconds) says would end past ``deadline``."""
    need = cell_seconds(config, spec, device)
    left = deadline - time.monotonic()
    if need > left:
        stop_at_time_limit(f"{spec.cell_id} not started: its estimate is {need:.1f} s, {max(left, 0):.1f} s were left")


def _data_provenance(config: RunConfig) -> dict:
    """Which data each suite used: real (with checksums) or synthetic."""
    from kit.data.service import describe

    from kit.runner.plan import dataset_splits, datasets

    names = datasets(config)
    return {name: describe(config.data_dir, name, config.data, dataset_splits(config, name)) for name in names}


def _bundle(run_dir: Path, results_root: Path) -> tuple[Path | None, str | None]:
    try:
        from kit.report.export import export_run

        return export_run(run_dir, Path(results_root)), None
    except DiskFull:
        raise  # results.json is safe; the run ends with the full disk's one line and exit code
    except KitError as exc:
        log.error("bundle export failed: %s", exc)
        return None, exc.message
    except Exception as exc:  # results.json is already safe on disk
        log.error("bundle export failed:\n%s", traceback.format_exc())
        return None, f"{exc.__class__.__name__}: {exc}"
