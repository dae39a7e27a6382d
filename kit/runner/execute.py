"""Run a plan: journal every event, write results after each cell, resume, bundle.

Flow of ``kit run`` (one module per step)::

    kit.cli.run -> kit.runner.plan.build_plan -> kit.env.preflight.check_native_run
      -> kit.runner.execute.execute
           for each cell: kit.bench.api.run_cell  (the only code that imports torch)
                          kit.env.telemetry sampler around it
                          journal "cell_end" + results.json (atomic)
      -> kit.bundle.export.export_run  -> results/<machine>_<gpu>_<stack>_<date>.tar.gz

A crash or Ctrl-C never loses a finished cell: each one is in the journal
(fsynced) and in results.json before the next starts. ``--resume RUN_DIR``
reads the journal back and skips finished cells.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kit.errors import Interrupted, KitError, RunFailed, SchemaError, UsageError
from kit.results.atomic import atomic_write_json
from kit.results.derive import derive
from kit.results.journal import JOURNAL_NAME, Journal, read_journal
from kit.results.schema import CellResult, RunConfig, RunResults, CellSpec
from kit.results.stats import summarise_repeats
from kit.runner.context import CellContext
from kit.runner.plan import Plan, build_plan

log = logging.getLogger("kit.run")

RESULTS_NAME = "results.json"
ENV_NAME = "env.json"
LOG_NAME = "run.log"


@dataclass
class RunOutcome:
    run_dir: Path
    results: RunResults
    bundle: Path | None
    bundle_error: str | None = None


def new_run_id(suite: str) -> str:
    host = socket.gethostname().split(".")[0] or "host"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{host}-{suite}-{secrets.token_hex(2)}"


def load_resume_state(run_dir: Path) -> tuple[RunConfig, str, dict[str, CellResult], float | None]:
    """Config, run id, finished cells and start time from an interrupted run's journal."""
    jpath = run_dir / JOURNAL_NAME
    if not jpath.exists():
        raise UsageError(f"{run_dir} has no {JOURNAL_NAME}: it is not a run folder, or it never started.")
    config = None
    run_id = None
    started_at = None
    done: dict[str, CellResult] = {}
    for ev in read_journal(jpath):
        if ev["event"] == "run_start":
            config = RunConfig.from_dict(ev["config"])
            run_id = ev["run_id"]
            started_at = ev.get("time")
        elif ev["event"] == "cell_end" and ev.get("result", {}).get("status") in ("ok", "skipped"):
            res = CellResult.from_dict(ev["result"])
            done[res.cell_id] = res
    if config is None or run_id is None:
        raise SchemaError(f"{jpath}: no run_start event; cannot resume this run.")
    return config, run_id, done, started_at


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _ours() -> bool:
    return signal.getsignal(signal.SIGTERM) is _raise_interrupt


def _before_fork() -> None:
    # hold SIGTERM back across fork(): one that arrived in the child before the
    # reset below would still meet the inherited handler
    if _ours():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _after_fork_in_parent() -> None:
    if _ours():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _after_fork_in_child() -> None:
    """In a forked child (a DataLoader worker), SIGTERM kills again.

    PyTorch stops a worker that is slow to exit with SIGTERM; a worker that had
    inherited :func:`_raise_interrupt` turned that into a KeyboardInterrupt at an
    arbitrary point (once inside ``logging``'s at-fork hook) and could die in a
    way its parent reported as "DataLoader worker exited unexpectedly".
    """
    if _ours():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


_AT_FORK_REGISTERED = False


def _install_sigterm_handler():
    """SIGTERM -> KeyboardInterrupt in this process only; returns the previous handler."""
    global _AT_FORK_REGISTERED
    if not _AT_FORK_REGISTERED:
        os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                            after_in_child=_after_fork_in_child)
        _AT_FORK_REGISTERED = True
    return signal.signal(signal.SIGTERM, _raise_interrupt)


class _StopFlag:
    def __init__(self) -> None:
        self.stop = False


def execute(
    config: RunConfig | None,
    results_root: Path,
    resume_dir: Path | None = None,
    ui: "ProgressUI | None" = None,
    make_bundle: bool = True,
) -> RunOutcome:
    from kit.runner.progress import NullUI

    ui = ui or NullUI()
    done: dict[str, CellResult] = {}
    started = None
    if resume_dir is not None:
        resume_dir = Path(resume_dir)
        config, run_id, done, started = load_resume_state(resume_dir)
        run_dir = resume_dir
    else:
        assert config is not None
        run_id = new_run_id(config.suite)
        run_dir = Path(results_root) / run_id
        run_dir.mkdir(parents=True, exist_ok=False)
    plan = build_plan(config)

    _attach_log(run_dir / LOG_NAME)
    from kit.env import record as env_record

    environment = env_record.collect(config)
    environment["data_provenance"] = _data_provenance(config)
    atomic_write_json(run_dir / ENV_NAME, environment)

    results = RunResults(run_id=run_id, config=config, environment=environment, started_at=started or time.time())
    journal = Journal(run_dir / JOURNAL_NAME)
    if resume_dir is None:
        journal.write("run_start", run_id=run_id, config=config.to_dict(), cells=plan.cell_ids)
    else:
        journal.write("note", message=f"resumed; {len(done)} finished cell(s) kept", resumed=True)
    ui.plan(plan, done)

    stop = _StopFlag()
    status = "complete"
    # `docker stop` (and kill) send SIGTERM: treat it like Ctrl-C so the run ends with its
    # journal closed, results.json marked interrupted and a bundle of what finished
    previous_term = None
    if threading.current_thread() is threading.main_thread():
        previous_term = _install_sigterm_handler()
    try:
        from kit.bench import api as bench  # torch is imported here, and only here

        results.environment["cuda_runtime"] = env_record.runtime_versions()

        device = bench.resolve_device(config.device)
        results.environment.setdefault("run_device", device)
        if "peak_tflops_measured" not in results.environment:
            results.environment["peak_tflops_measured"] = bench.calibrate(device)
            atomic_write_json(run_dir / ENV_NAME, results.environment)
        for index, spec in enumerate(plan.cells):
            if spec.cell_id in done:
                results.cells.append(done[spec.cell_id])
                ui.cell_skipped_resume(spec)
                continue
            result = _run_one(bench, spec, config, device, run_dir, journal, ui, stop)
            results.cells.append(result)
            journal.write("cell_end", spec.cell_id, result=result.to_dict())
            atomic_write_json(run_dir / RESULTS_NAME, results.to_dict())
            ui.cell_done(spec, result)
    except KeyboardInterrupt:
        status = "interrupted"
        journal.write("run_interrupted", message="Ctrl-C")
    except BaseException:
        status = "failed"
        journal.write("note", message="run failed", error=traceback.format_exc())
        raise
    finally:
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
        results.status = status if status != "complete" or len(results.cells) == len(plan.cells) else "interrupted"
        results.finished_at = time.time()
        results.derived = derive(results.cells, config.mode, config.tolerance, results.environment.get("peak_tflops_measured"))
        journal.write("run_end", status=results.status)
        journal.close()
        atomic_write_json(run_dir / RESULTS_NAME, results.to_dict())
        _detach_log()

    bundle, bundle_error = None, None
    if make_bundle:
        bundle, bundle_error = _bundle(run_dir, results_root)
    outcome = RunOutcome(run_dir, results, bundle, bundle_error)
    if status == "interrupted":
        raise Interrupted(
            f"Interrupted. {sum(c.status in ('ok', 'skipped') for c in results.cells)} finished cell(s) kept in {run_dir}"
            + (f"; bundle {bundle}" if bundle else ""),
            remedy=f"Continue with: kit run --resume {run_dir}",
        )
    return outcome


def _run_one(bench, spec: CellSpec, config: RunConfig, device: str, run_dir: Path, journal: Journal, ui, stop) -> CellResult:
    from kit.env import telemetry

    journal.write("cell_start", spec.cell_id, spec=spec.to_dict())
    ctx = CellContext(
        device=device,
        data_dir=Path(config.data_dir),
        data_source=config.data,
        seed=config.seed,
        repeats=config.repeats,
        mode=config.mode,
        event=lambda kind, **f: journal.write(kind, spec.cell_id, **f),
        progress=lambda done, total, desc="": ui.cell_progress(spec, done, total, desc),
        should_stop=lambda: stop.stop,
        extra={"run_dir": str(run_dir)},
    )
    ui.cell_start(spec)
    sampler = telemetry.start_for_device(device)
    started = time.time()
    try:
        result = bench.run_cell(spec, ctx)
    except (KeyboardInterrupt, KitError):
        sampler.stop()  # Ctrl-C or a user-facing error: let it propagate
        raise
    except Exception as exc:  # one broken cell must not cost the others
        log.error("cell %s failed:\n%s", spec.cell_id, traceback.format_exc())
        result = CellResult(spec.workload, spec.model, spec.precision, spec.engine, "failed",
                            params=spec.params, reason=f"{exc.__class__.__name__}: {exc}")
    tele = sampler.stop()
    result.started_at, result.finished_at = started, time.time()
    if result.status == "ok":
        result.telemetry = tele
        telemetry.attach_energy(result)
        if not result.summary:
            result.summary = summarise_repeats(result.repeats)
    return result


def _data_provenance(config: RunConfig) -> dict:
    """Which data each suite used: real (with checksums) or synthetic."""
    from kit.data import describe

    from kit.runner.plan import SUITE_DATASETS

    names = SUITE_DATASETS[config.suite]
    return {name: describe(config.data_dir, name, config.data) for name in names}


def _bundle(run_dir: Path, results_root: Path) -> tuple[Path | None, str | None]:
    try:
        from kit.bundle.export import export_run

        return export_run(run_dir, Path(results_root)), None
    except KitError as exc:
        log.error("bundle export failed: %s", exc)
        return None, exc.message
    except Exception as exc:  # results.json is already safe on disk
        log.error("bundle export failed:\n%s", traceback.format_exc())
        return None, f"{exc.__class__.__name__}: {exc}"


_handler: logging.Handler | None = None


def _attach_log(path: Path) -> None:
    global _handler
    _handler = logging.FileHandler(path, encoding="utf-8")
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("kit")
    root.setLevel(logging.INFO)
    root.addHandler(_handler)


def _detach_log() -> None:
    global _handler
    if _handler is not None:
        logging.getLogger("kit").removeHandler(_handler)
        _handler.close()
        _handler = None
