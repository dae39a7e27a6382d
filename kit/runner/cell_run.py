"""One cell of a plan run: its context, the telemetry and host load around it, in a process of
its own where it needs one (kit.runner.isolate), and what its telemetry keeps of it."""

from __future__ import annotations

import logging
import time
import traceback
from pathlib import Path

from kit.errors import KitError
from kit.results import step_profile
from kit.results.journal import Journal
from kit.results.schema import CellResult, RunConfig, CellSpec
from kit.results.stats import summarise_repeats
from kit.bench.context import CellContext
from kit.runner.isolate import run_isolated, run_parallel_cell, wants_isolation
from kit.results.run_files import LOG_NAME
from kit.runner.stop_signals import stop_requested

log = logging.getLogger("kit.run")


def timed_spans(result: CellResult) -> list | None:
    """Every repeat's steady-state spans ([start, end] on time.monotonic, kit.bench.timing.StepClock),
    taken out of the repeats: the telemetry turns them into the GPU's energy over the timed steps,
    and the results keep that energy, not the clock readings."""
    spans = []
    for rep in result.repeats or []:
        windows = rep.pop("steady_windows", None) if isinstance(rep, dict) else None
        if isinstance(windows, list):
            spans.extend(w for w in windows if isinstance(w, (list, tuple)) and len(w) == 2)
    return spans or None


def cell_devices(spec: CellSpec, device: str) -> list[str]:
    """The devices a cell runs on, for its telemetry: a data-parallel cell's ranks use GPUs
    0..N-1 (kit.runner.isolate.run_parallel_cell); every other cell, ``device``."""
    world = spec.params.get("world_size") or 1
    if world > 1 and device.startswith("cuda"):
        return [f"cuda:{rank}" for rank in range(world)]
    return [device]


def _run_one(bench, spec: CellSpec, config: RunConfig, device: str, run_dir: Path, journal: Journal, ui) -> CellResult:
    from kit.env import telemetry
    from kit.env.telemetry_summary import attach_energy

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
        should_stop=stop_requested,  # Ctrl-C or SIGTERM, even one whose KeyboardInterrupt was lost
        extra={"run_dir": str(run_dir)},
        profile_steps=step_profile.DEFAULT_STEPS if config.profiles(device) else 0,
    )
    ui.cell_start(spec)
    log.info("cell %s: started", spec.cell_id)
    from kit.env import hostload

    host = hostload.start()
    sampler = telemetry.start_for_devices(cell_devices(spec, device))
    started = time.time()
    try:
        if spec.params.get("world_size"):  # kit run --gpus N: one process per rank
            result = run_parallel_cell(spec, ctx, run_dir / LOG_NAME, run_dir)
        elif wants_isolation(spec, config.isolate):
            # a cell that will only say "skipped" needs no process of its own
            result = bench.skipped_cell(spec, device) or run_isolated(spec, ctx, run_dir / LOG_NAME)
        else:
            result = bench.run_cell(spec, ctx)
    except (KeyboardInterrupt, KitError):
        sampler.stop()  # Ctrl-C or a user-facing error: let it propagate
        raise
    except Exception as exc:  # one broken cell must not cost the others
        log.error("cell %s failed:\n%s", spec.cell_id, traceback.format_exc())
        result = CellResult(spec.workload, spec.model, spec.precision, spec.engine, "failed",
                            params=spec.params, reason=f"{exc.__class__.__name__}: {exc}")
    tele = sampler.stop(timed_spans(result))
    result.started_at, result.finished_at = started, time.time()
    result.host = host.stop()
    if result.host.get("busy"):
        log.warning("cell %s: the host was busy (%s); its times include waiting for the CPU", spec.cell_id,
                    result.host["busy"])
    if result.status == "ok":
        result.telemetry = tele
        attach_energy(result)
        if not result.summary:
            result.summary = summarise_repeats(result.repeats)
    from kit.runner.progress import describe_result

    log.info("cell %s: %s (%.1f s)", spec.cell_id, describe_result(result), result.finished_at - started)
    return result
