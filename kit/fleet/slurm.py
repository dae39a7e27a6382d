"""Slurm: the batch script, sbatch, squeue/scontrol, and the collection of the tasks' bundles.

Why ``sbatch`` directly and not submitit: a sweep task is a `kit run` command line, not a pickled
Python function, so a plain batch script says everything (``--dry-run`` prints it, an administrator
can read it, it runs in a container whose Python differs from the submitting one); submitit would
add a dependency and pickles that must unpickle on the nodes, for nothing the kit needs.

Without slurmdbd there is no accounting (``sacct`` says so): the kit follows a sweep with ``squeue``
(what is queued or running) and, once a task has left the queue, with the ``exit_code`` file the batch
script writes beside the task's results, and ``scontrol show job`` while the controller still
remembers the job (MinJobAge, 300 s by default).
"""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

from kit import __version__
from kit.errors import EXIT_CODES, BundleError, EnvironmentCheckError, KitError, RunFailed, UsageError
from kit.fleet.sweep import SCRIPT_FILE, TASKS_DIR, Submission, Sweep, Task, slurm_seconds
from kit.runner.lock import LOCK_NAME
from kit.runner.options import MAX_DURATION_S

log = logging.getLogger("kit.fleet")

#: what sbatch, squeue and scontrol say when the controller cannot be reached
_UNREACHABLE = ("unable to contact slurm controller", "socket timed out", "connection refused", "zero bytes were transmitted",
                "communication connection failure", "could not establish a configuration source")
#: a task's `kit run` stops itself this long before the sweep's --time (at most a tenth of it): Slurm
#: sends SIGTERM at its limit and SIGKILL KillWait (30 s by default) later, so stopping first leaves
#: room to write the bundle, and the run starts no cell that the plan's estimate says would not fit
TIME_MARGIN_S = 60
MERGED_DIR = "merged"
COMPARE_PAGE = "compare.html"
NO_SLURM_REMEDY = ("Run kit fleet slurm on a host with the Slurm client commands (a cluster's login node), "
                   "or see what would be submitted with --dry-run.")


# ----------------------------------------------------------------------------- the batch script
def task_command(sweep: Sweep, task: Task) -> List[str]:
    """The task's `kit run` as the batch script runs it (before --results-dir / --resume)."""
    # the task's image is $IMAGE, set by the script's case for the task
    if sweep.container == "pyxis":
        return ["srun", '--container-image="$IMAGE"', '--container-mounts="$SWEEP:$SWEEP"',
                '--container-workdir="$SWEEP"', "kit", "run"]
    if sweep.container == "apptainer":
        return ["apptainer", "exec"] + (["--nv"] if task.gpus else []) + ['--bind "$SWEEP"', '"$IMAGE"', "kit", "run"]
    return [shlex.quote(sweep.python), "-m", "kit", "run"]


def render_script(sweep: Sweep) -> str:
    """The job-array batch script: each array task picks its `kit run` options by SLURM_ARRAY_TASK_ID."""
    folder = sweep.path
    lines = [
        "#!/bin/bash",
        f"# kit fleet slurm (kit {__version__}): sweep {sweep.name}, {len(sweep.tasks)} task(s); one array task = one `kit run`.",
        f"#SBATCH --job-name=kit-{sweep.name}",
        f"#SBATCH --output={folder}/{TASKS_DIR}/%a/slurm-%A_%a.out",
        f"#SBATCH --chdir={folder}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        "#SBATCH --requeue",
    ]
    if sweep.partition:
        lines.append(f"#SBATCH --partition={sweep.partition}")
    if sweep.time_limit:
        lines.append(f"#SBATCH --time={sweep.time_limit}")
    if sweep.cpus_per_task:
        lines.append(f"#SBATCH --cpus-per-task={sweep.cpus_per_task}")
    lines += [
        "# GPUs: given per submission (sbatch --gres=gpu:N), since an array shares one request",
        "set -u",
        "START=$(date +%s)",
        f"SWEEP={shlex.quote(str(folder))}",
        'TASK="${SLURM_ARRAY_TASK_ID:?this script runs as a task of a Slurm job array}"',
        'TASK_DIR="$SWEEP/tasks/$TASK"',
        'case "$TASK" in',
    ]
    for t in sweep.tasks:
        image = f"; IMAGE={shlex.quote(t.image)}" if t.image else ""
        lines.append(f"  {t.index}) ARGS=({' '.join(shlex.quote(a) for a in t.run_args)}){image} ;;  # {t.label}")
    lines += [
        '  *) echo "kit fleet: no task $TASK in this sweep" >&2; exit 2 ;;',
        "esac",
        'mkdir -p "$TASK_DIR/results"',
        'rm -f "$TASK_DIR/exit_code"',
        'echo "job ${SLURM_JOB_ID:-?} restart ${SLURM_RESTART_COUNT:-0} on $(hostname -s) at $(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$TASK_DIR/attempts"',
    ]
    limit_s = slurm_seconds(sweep.time_limit) if sweep.time_limit else 0
    margin = min(TIME_MARGIN_S, limit_s // 10)
    if 0 < limit_s - margin <= MAX_DURATION_S:  # 0 is Slurm's "no limit"; over 30 days, kit run's
        lines += [
            f"# kit run stops itself {margin} s before the job's --time={sweep.time_limit} ({limit_s} s), counted from this",
            "# script's start: finished cells and the bundle are kept (exit 124)",
            f"limit() {{ local left=$(( START + {limit_s - margin} - $(date +%s) )); echo \"--time-limit $(( left > 1 ? left : 1 ))\"; }}",
        ]
    else:
        lines.append("limit() { :; }")
    lines += [
        "# a task that runs again (requeued after preemption or a node failure, or resubmitted) continues its",
        "# newest run folder: finished cells are kept (of a complete run, its bundle is made again where none",
        "# verifies); where kit run refuses that (exit 2: another GPU model, a folder it cannot resume), the",
        f"# task starts a new run, unless another process holds the folder ({LOCK_NAME}; kit run said whose)",
        'LAST=$(ls -1dt "$TASK_DIR"/results/*/ 2>/dev/null | head -n 1)',
        "rc=",
        'if [ -n "$LAST" ] && [ -f "$LAST/journal.jsonl" ]; then',
        f'  {_cmd(sweep)} --resume "$LAST" $(limit)',
        "  rc=$?",
        f'  if [ "$rc" -eq 2 ] && [ ! -e "$LAST/{LOCK_NAME}" ]; then',
        '    echo "kit run --resume $LAST refused (exit 2): a new run" >> "$TASK_DIR/attempts"; rc=',
        "  fi",
        "fi",
        'if [ -z "$rc" ]; then',
        f'  {_cmd(sweep)} "${{ARGS[@]}}" --results-dir "$TASK_DIR/results" $(limit)',
        "  rc=$?",
        "fi",
        'echo "$rc" > "$TASK_DIR/exit_code"',
        'exit "$rc"',
    ]
    return "\n".join(lines) + "\n"


def _cmd(sweep: Sweep) -> str:
    # one command for every task (Apptainer gets --nv when any task has GPUs)
    gpu_task = Task(0, None, 1 if any(t.gpus for t in sweep.tasks) else 0)
    return " ".join(task_command(sweep, gpu_task))


def sbatch_command(sweep: Sweep, indices: List[int], gpus: int) -> List[str]:
    cmd = ["sbatch", "--parsable", f"--array={_ranges(indices)}"]
    if gpus:
        cmd.append(f"--gres=gpu:{gpus}")
    return cmd + list(sweep.sbatch_args) + [str(sweep.path / SCRIPT_FILE)]


def _ranges(indices: List[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5' (sbatch --array)."""
    out, idx = [], sorted(set(indices))
    start = prev = None
    for i in idx + [None]:
        if start is not None and (i is None or i != prev + 1):
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if i is not None and start is None:
            start = i
        prev = i
    return ",".join(out)


def groups_by_gpus(tasks: List[Task]) -> Dict[int, List[int]]:
    out: Dict[int, List[int]] = {}
    for t in tasks:
        out.setdefault(t.gpus, []).append(t.index)
    return out


# ----------------------------------------------------------------------------- talking to Slurm
Runner = Callable[[List[str]], "subprocess.CompletedProcess[str]"]


def _run(cmd: List[str]) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def require_client() -> None:
    """EnvironmentCheckError (exit 6) when sbatch is not on PATH."""
    if shutil.which("sbatch") is None:
        raise EnvironmentCheckError("sbatch is not on PATH: no Slurm client on this host.", remedy=NO_SLURM_REMEDY)


def slurm(cmd: List[str], run: Optional[Runner] = None, what: str = "") -> "subprocess.CompletedProcess[str]":
    """Run a Slurm client command; EnvironmentCheckError (exit 6) when it is missing or the controller is down."""
    if run is None:
        if shutil.which(cmd[0]) is None:
            raise EnvironmentCheckError(f"{cmd[0]} is not on PATH: no Slurm client on this host.", remedy=NO_SLURM_REMEDY)
        run = _run
    try:
        out = run(cmd)
    except FileNotFoundError:
        raise EnvironmentCheckError(f"{cmd[0]} is not on PATH: no Slurm client on this host.", remedy=NO_SLURM_REMEDY) from None
    except subprocess.TimeoutExpired:
        raise EnvironmentCheckError(f"{cmd[0]} did not answer in 120 s: the Slurm controller is not reachable.",
                                    remedy="Check it with `scontrol ping` (slurmctld must be up); then run this again.") from None
    if out.returncode != 0:
        text = (out.stderr or out.stdout or "").strip()
        first = text.splitlines()[0] if text else f"exit code {out.returncode}"
        if any(u in text.lower() for u in _UNREACHABLE):
            raise EnvironmentCheckError(f"{cmd[0]}: the Slurm controller is not reachable ({first}).",
                                        remedy="Check it with `scontrol ping` (slurmctld must be up); finished bundles "
                                               "are kept, so run this again once it answers.")
    return out


def submit(sweep: Sweep, indices: Optional[List[int]] = None, run: Optional[Runner] = None) -> List[Submission]:
    """sbatch the tasks ``indices`` (default: all), one array per GPU count; record the job ids in sweep.json."""
    chosen = [t for t in sweep.tasks if indices is None or t.index in indices]
    subs = []
    for gpus, idx in sorted(groups_by_gpus(chosen).items()):
        out = slurm(sbatch_command(sweep, idx, gpus), run)
        if out.returncode != 0:
            text = (out.stderr or out.stdout or "").strip().splitlines()
            line = text[-1] if text else f"exit code {out.returncode}"
            raise UsageError(f"sbatch refused the sweep's tasks {_ranges(idx)}: {line}",
                             remedy=f"Fix the option it names (partition, --time, GPUs) and submit again; "
                                    f"{'already submitted: ' + ', '.join(s.job_id for s in subs) if subs else 'nothing was submitted'}.")
        job_id = out.stdout.strip().split(";")[0].strip()
        if not job_id.isdigit():
            raise KitError(f"sbatch answered {out.stdout.strip()!r}, not a job id.")
        sub = Submission(job_id, idx, f"gpu:{gpus}" if gpus else None, time.time())
        sweep.submissions.append(sub)
        sweep.save()  # every job id is on disk before the next sbatch
        subs.append(sub)
    return subs


def queued(sweep: Sweep, run: Optional[Runner] = None) -> Dict[int, str]:
    """Task index -> squeue state, for the sweep's tasks that are still queued or running."""
    jobs = sorted({s.job_id for s in sweep.submissions})
    if not jobs:
        return {}
    lines: List[str] = []
    # one call for all; per job when the controller has forgotten one of them (squeue then fails for all)
    for group in [jobs] + ([[j] for j in jobs] if len(jobs) > 1 else []):
        out = slurm(["squeue", "-h", "-r", "-j", ",".join(group), "-o", "%F|%K|%T"], run)
        if out.returncode == 0:
            lines += out.stdout.splitlines()
            if group is jobs:
                break
        elif "invalid job id" not in (out.stderr or "").lower():  # forgotten jobs have ended
            text = (out.stderr or out.stdout or "").strip()
            raise EnvironmentCheckError(f"squeue failed: {text.splitlines()[0] if text else out.returncode}",
                                        remedy="Check the Slurm controller with `scontrol ping`.")
    states: Dict[int, str] = {}
    for line in lines:
        parts = line.strip().split("|")
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        job, idx, state = parts[0], int(parts[1]), parts[2].strip()
        if sweep.last_job(idx) == job:  # an older submission's task is not this one
            states[idx] = state
    return states


def scontrol_state(job_id: str, index: int, run: Optional[Runner] = None) -> Optional[str]:
    """JobState and Reason of array task ``job_id``_``index`` while the controller remembers it, else None."""
    try:
        out = slurm(["scontrol", "show", "job", f"{job_id}_{index}"], run)
    except EnvironmentCheckError:
        return None
    if out.returncode != 0:
        return None
    fields = dict(tok.split("=", 1) for tok in out.stdout.split() if "=" in tok)
    state = fields.get("JobState")
    reason = fields.get("Reason")
    return f"{state} ({reason})" if state and reason and reason != "None" else state


# ----------------------------------------------------------------------------- states and bundles
@dataclass
class TaskState:
    task: Task
    #: pending | running | done | failed | no bundle | bad bundle | partial | not submitted
    state: str
    detail: str = ""
    bundle: Optional[Path] = None
    bad: List[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.state == "done"


def newest_bundle(task_dir: Path) -> tuple:
    """(the newest bundle that verifies, whether its run was complete, [why each newer one failed])."""
    from kit.bundle.safe_open import open_bundle

    bad = []
    paths = sorted((task_dir / "results").glob("*.tar.gz"), key=lambda p: p.stat().st_mtime, reverse=True)
    for p in paths:
        try:
            b = open_bundle(p)
        except KitError as exc:
            bad.append(f"{p.name}: {exc.message}")
            continue
        return p, b.manifest.get("run_status") == "complete", bad
    return None, False, bad


def task_states(sweep: Sweep, run: Optional[Runner] = None, ask_slurm: bool = True) -> List[TaskState]:
    active = queued(sweep, run) if ask_slurm else {}
    out = []
    for t in sweep.tasks:
        job = sweep.last_job(t.index)
        if job is None:
            out.append(TaskState(t, "not submitted"))
            continue
        if t.index in active:
            state = active[t.index]
            out.append(TaskState(t, "pending" if state == "PENDING" else "running", f"{job}_{t.index} {state}"))
            continue
        tdir = sweep.task_dir(t.index)
        code_file = tdir / "exit_code"
        code = code_file.read_text().strip() if code_file.is_file() else None
        bundle, complete, bad = newest_bundle(tdir)
        log_hint = f"see {tdir.relative_to(sweep.path)}/slurm-{job}_{t.index}.out"
        if bundle is not None and complete and code in ("0", None):
            out.append(TaskState(t, "done", bundle.name, bundle, bad))
        elif bundle is not None:
            why = _exit_words(code) if code not in ("0", None) else "its run did not finish"
            out.append(TaskState(t, "partial", f"{why}; {bundle.name} holds its finished cells; {log_hint}", bundle, bad))
        elif bad:
            out.append(TaskState(t, "bad bundle", f"{bad[0]}; {log_hint}", None, bad))
        else:
            if code is None:
                sc = scontrol_state(job, t.index, run) if ask_slurm else None
                why = (f"Slurm says {sc}" if sc else
                       "it ended without an exit code (killed, cancelled, out of time, or its node failed)")
            else:
                why = f"kit run ended with {_exit_words(code)}"
            out.append(TaskState(t, "no bundle", f"{why}; {log_hint}"))
    return out


def _exit_words(code: str) -> str:
    """'exit code 124 (kit run stopped at its --time-limit ...)': the code and what `kit run` means by it."""
    meaning = EXIT_CODES.get(int(code)) if code.isdigit() else None
    return f"exit code {code}" + (f" ({meaning})" if meaning else "")


def follow(sweep: Sweep, show: Callable[[List[TaskState]], None], poll_s: float = 10.0,
           timeout_s: Optional[float] = None, run: Optional[Runner] = None) -> List[TaskState]:
    """Poll until no task is pending or running; ``show`` gets every change."""
    start = time.monotonic()
    last = None
    while True:
        states = task_states(sweep, run)
        key = [(s.task.index, s.state) for s in states]
        if key != last:
            show(states)
            last = key
        if not any(s.state in ("pending", "running") for s in states):
            return states
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            raise KitError(f"the sweep's tasks are still queued or running after {timeout_s:.0f} s.",
                           remedy=f"Follow them later: kit fleet slurm status {sweep.path} --follow")
        time.sleep(poll_s)


@dataclass
class Collected:
    states: List[TaskState]
    merged: Optional[Path] = None
    compare_page: Optional[Path] = None
    notes: List[str] = field(default_factory=list)
    #: with an index: what `kit index add` made of each verified task bundle (kit.index.ingest.AddOutcome)
    indexed: list = field(default_factory=list)


def collect(sweep: Sweep, run: Optional[Runner] = None, ask_slurm: bool = True,
            index: Optional[Path] = None) -> Collected:
    """Verify each task's newest bundle, merge the good ones and compare them; then say what is missing.
    With ``index``, each verified task bundle is also added to that results index (kit.index).

    The merged bundle and the comparison are written first: a task without a bundle (exit 8) or with
    one that fails verification (exit 5) never costs the others'."""
    con = None
    said: list = []  # what opening the index to write did (a journal rolled back, the schema updated)
    if index is not None:
        from kit.index.db import open_index

        con = open_index(index, create=True, said=said)  # a file that is not an index: exit 2 before any work
    states = task_states(sweep, run, ask_slurm)
    good = [s.bundle for s in states if s.bundle is not None]
    result = Collected(states, notes=said)
    if con is not None:
        from kit.index.ingest import add_bundles

        try:
            result.indexed = add_bundles(con, good)
        finally:
            con.close()
    if len(good) >= 2:
        from kit.report.export import merge_bundles
        from kit.runner.plan import planned_cell_ids

        try:
            result.merged = merge_bundles(good, sweep.path / MERGED_DIR, same_model=True, planned=planned_cell_ids)
        except UsageError as exc:  # e.g. tasks on different GPU models, or the same cells at several GPU counts
            result.notes.append(f"not merged into one bundle: {exc.message} (compared instead)")
        result.compare_page = _compare(good, sweep.path / COMPARE_PAGE, result.notes)
    elif len(good) == 1:
        result.notes.append(f"one bundle only ({good[0]}): nothing to merge or compare")
    active = [s for s in states if s.state in ("pending", "running", "not submitted")]
    bad = [s for s in states if s.state == "bad bundle"]
    missing = [s for s in states if s.state in ("no bundle", "partial")]
    resubmit = f"kit fleet slurm resubmit {sweep.path}"
    merged = f", merged into {result.merged}" if result.merged else ""
    if bad:
        raise _with(BundleError(
            f"{len(bad)} task(s) left a bundle that fails verification: "
            + "; ".join(f"task {s.task.index} ({s.detail})" for s in bad[:3])
            + f". {len(good)} verified bundle(s) kept{merged}",
            remedy=f"Run them again: {resubmit} (the verified bundles are kept)."), result)
    if missing:
        raise _with(RunFailed(
            f"{len(missing)} task(s) have no complete bundle: "
            + "; ".join(f"task {s.task.index} {s.state} ({s.detail})" for s in missing[:3])
            + f". {len(good)} bundle(s) kept{merged}",
            remedy=f"Run them again: {resubmit} (finished bundles are kept)."), result)
    if active:
        raise _with(KitError(f"{len(active)} task(s) are still pending or running (or were never submitted): "
                             + ", ".join(str(s.task.index) for s in active),
                             remedy=f"Wait for them: kit fleet slurm status {sweep.path} --follow; then collect again."), result)
    return result


def _with(exc: KitError, collected: Collected) -> KitError:
    exc.collected = collected  # type: ignore[attr-defined]  # the CLI prints what was kept
    return exc


def _compare(bundles: List[Path], page: Path, notes: List[str]) -> Optional[Path]:
    from kit.compare.engine import compare_paths
    from kit.report.html.compare import render_compare_page
    from kit.results.atomic import atomic_write_text

    try:
        atomic_write_text(page, render_compare_page(compare_paths(bundles)))
        return page
    except KitError as exc:
        notes.append(f"no comparison page: {exc.message}")
        return None


def to_resubmit(states: List[TaskState], only: Optional[List[int]] = None) -> List[int]:
    """Tasks without a verified complete bundle that are not queued (or those of ``only`` among them)."""
    picked = [s.task.index for s in states if s.state in ("no bundle", "bad bundle", "partial", "not submitted")]
    if only:
        known = {s.task.index: s for s in states}
        unknown = [i for i in only if i not in known]
        if unknown:
            raise UsageError(f"--task {unknown[0]}: the sweep has tasks 0..{len(states) - 1}.")
        busy = [i for i in only if known[i].state in ("pending", "running", "done")]
        if busy:
            raise UsageError(f"--task {busy[0]} is {known[busy[0]].state}; only tasks without a complete bundle are resubmitted.")
        picked = list(only)
    return picked


# ----------------------------------------------------------------------------- what the site has
def require_usable(lines: List[tuple]) -> None:
    """EnvironmentCheckError (exit 6) unless :func:`check` found the client and a controller that answers."""
    found = {what: (ok, detail) for what, ok, detail in lines}
    if not found.get("sbatch", (False, ""))[0]:
        raise EnvironmentCheckError("sbatch is not on PATH: no Slurm client on this host.", remedy=NO_SLURM_REMEDY)
    ok, detail = found.get("controller", (False, "no answer"))
    if not ok:
        raise EnvironmentCheckError(f"the Slurm controller is not up ({detail or 'no answer to scontrol ping'}).",
                                    remedy="Start slurmctld (or ask the cluster's admins), then run kit fleet slurm check again.")


def check(run: Optional[Runner] = None) -> List[tuple]:
    """(what, ok, detail) lines: the client, the controller, partitions and GPUs, container runtimes."""
    lines = []
    sb = shutil.which("sbatch")
    lines.append(("sbatch", bool(sb), sb or "not on PATH"))
    if not sb:
        return lines
    ping = slurm(["scontrol", "ping"], run)
    up = ping.returncode == 0 and "UP" in ping.stdout
    lines.append(("controller", up, (ping.stdout or ping.stderr).strip().splitlines()[0] if (ping.stdout or ping.stderr).strip() else ""))
    if not up:  # sinfo would only fail the same way
        return lines
    info = slurm(["sinfo", "-h", "-o", "%P|%D|%c|%G|%t"], run)
    for line in info.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 5:
            lines.append((f"partition {parts[0]}", True, f"{parts[1]} node(s), {parts[2]} CPUs, GRES {parts[3]}, {parts[4]}"))
    srun_help = _run(["srun", "--help"]) if shutil.which("srun") else None
    pyxis = bool(srun_help and "--container-image" in (srun_help.stdout or ""))
    lines.append(("pyxis (srun --container-image)", pyxis, "found: --container pyxis" if pyxis else "not found"))
    app = shutil.which("apptainer") or shutil.which("singularity")
    lines.append(("Apptainer", bool(app), f"{app}: --container apptainer" if app else "not found"))
    enroot = shutil.which("enroot")
    lines.append(("enroot", bool(enroot), enroot or "not found"))
    return lines
