"""An earlier run read back for ``kit run --resume``: its journal's state (options, id, finished
cells, how it ended) and, for a run that ended complete, its newest bundle."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

from kit.errors import KitError, SchemaError, UsageError
from kit.results.journal import JOURNAL_NAME, read_journal
from kit.results.schema import CellResult, RunConfig
from kit.runner.plan import build_plan


@dataclass
class ResumeState:
    """What an earlier run's journal says: its options, id, finished cells and how it ended."""

    config: RunConfig
    run_id: str
    done: dict[str, CellResult]
    started_at: float | None
    #: status of the last ``run_end`` ("complete", "interrupted", "failed"), None when the run never ended
    ended: str | None = None

    def is_complete(self) -> bool:
        """The run ended complete with every planned cell finished (ok or skipped); a run
        with failed cells is not complete: a resume measures those again."""
        return self.ended == "complete" and all(c in self.done for c in build_plan(self.config).cell_ids)


_RESUME_REMEDY = "Pass the run folder an earlier `kit run` printed (results/<run id>/), or start a new run without --resume."


def read_resume_state(run_dir: Path) -> ResumeState:
    """The earlier run's state from its journal; UsageError (exit 2) when ``run_dir`` is no run folder."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        what = "is not a folder" if run_dir.exists() else "does not exist"
        raise UsageError(f"--resume {run_dir}: {what}.", remedy=_RESUME_REMEDY)
    jpath = run_dir / JOURNAL_NAME
    if not jpath.is_file():
        raise UsageError(f"--resume {run_dir}: it has no {JOURNAL_NAME}, so it is not a run folder, or its run never started.",
                         remedy=_RESUME_REMEDY)
    config = None
    run_id = None
    started_at = None
    ended = None
    events = 0
    done: dict[str, CellResult] = {}
    for ev in read_journal(jpath):
        events += 1
        if ev["event"] == "run_start":
            config = RunConfig.from_dict(ev["config"])
            run_id = ev["run_id"]
            started_at = ev.get("time")
        elif ev["event"] == "cell_end" and ev.get("result", {}).get("status") in ("ok", "skipped"):
            res = CellResult.from_dict(ev["result"])
            done[res.cell_id] = res
        elif ev["event"] == "run_end":
            ended = ev.get("status")
        elif ev["event"] == "note" and ev.get("resumed"):
            ended = None  # a resume started after that end
    if not events:
        raise UsageError(f"--resume {run_dir}: its {JOURNAL_NAME} is empty; the run never started.", remedy=_RESUME_REMEDY)
    if config is None or run_id is None:
        raise SchemaError(f"{jpath}: no run_start event; cannot resume this run.")
    return ResumeState(config, run_id, done, started_at, ended)


def find_bundle(run_dir: Path, results_root: Path, run_id: str) -> Path | None:
    """The newest bundle in ``results_root`` of run ``run_id`` that verifies, ended complete and holds
    the run folder's cells as they are now (a bundle written before a resume measured failed cells
    again does not), or None. Bundles are named as kit.bundle.export names them, the start time in
    the local time of whoever wrote them, so any time stamp is looked at."""
    try:
        from kit.bundle.export import bundle_stem, load_run_folder
        from kit.bundle.safe_open import open_bundle

        folder = load_run_folder(run_dir)
        prefix = bundle_stem(folder).rsplit("_", 1)[0]  # machine_gpu_stack, without the time stamp
        cells = {c.cell_id: c.status for c in folder.results.cells}
    except Exception:  # an unreadable folder has no bundle to point at
        return None

    def age(path: Path) -> tuple:  # newest first; of two written in the same instant, the later name (-2, -3...)
        try:
            return path.stat().st_mtime, path.name
        except OSError:
            return 0.0, path.name

    for path in sorted(results_root.glob(f"{glob.escape(prefix)}_*.tar.gz"), key=age, reverse=True):
        try:
            if not path.is_file():
                continue
            bundle = open_bundle(path)  # verifies every member's hash
            if (bundle.manifest.get("run_id") == run_id and bundle.manifest.get("run_status") == "complete"
                    and {c.cell_id: c.status for c in bundle.results.cells} == cells):
                return path
        except (KitError, OSError):
            continue
    return None
