"""A sweep: its tasks (suites x GPU counts), its options and its submissions, kept in ``sweep.json``."""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import List, Optional

from kit import __version__
from kit.errors import SchemaError, UsageError
from kit.facts.stacks import PREFERENCE  # the stacks a sweep runs in (cuda12-fused is opt-in)
from kit.results.atomic import atomic_write_json
from kit.results.suites import choices as suite_choices  # `kit run --suite`'s: a sweep runs each as one task
from kit.runner.option_checks import check_suite_options, options_for_suite
from kit.runner.options import parse_args, split_list, to_args

SWEEP_FORMAT = 1
SWEEP_FILE = "sweep.json"
SCRIPT_FILE = "job.sbatch"
TASKS_DIR = "tasks"
CONTAINERS = ("none", "pyxis", "apptainer")
_SLURM_TIME = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}")


@dataclass
class Task:
    """One array task: one `kit run`."""

    index: int
    suite: Optional[str]
    #: GPUs the task asks Slurm for: 0 = a CPU task (--device cpu), 1 = one GPU, N > 1 = kit run --gpus N
    gpus: int
    #: the task's `kit run` options (without --results-dir, which the batch script adds)
    run_args: List[str] = field(default_factory=list)
    #: the image stack (cuda12, cuda10, cpu) when the task runs in the kit's image, and that image
    stack: Optional[str] = None
    image: Optional[str] = None

    @property
    def label(self) -> str:
        where = "CPU" if self.gpus == 0 else f"{self.gpus} GPU" + ("s" if self.gpus > 1 else "")
        return f"{self.suite or 'default suite'} on {where}" + (f", {self.stack}" if self.stack else "")


@dataclass
class Submission:
    job_id: str
    indices: List[int]
    gres: Optional[str]
    time: float


@dataclass
class Sweep:
    """What ``kit fleet slurm submit`` planned, and what was submitted since."""

    name: str
    folder: str
    python: str
    tasks: List[Task]
    partition: Optional[str] = None
    time_limit: Optional[str] = None
    cpus_per_task: Optional[int] = None
    container: str = "none"
    image: Optional[str] = None
    sbatch_args: List[str] = field(default_factory=list)
    submissions: List[Submission] = field(default_factory=list)
    kit_version: str = __version__
    created_at: float = field(default_factory=time.time)
    sweep_format: int = SWEEP_FORMAT

    @property
    def path(self) -> Path:
        return Path(self.folder)

    def task_dir(self, index: int) -> Path:
        return self.path / TASKS_DIR / str(index)

    def last_job(self, index: int) -> Optional[str]:
        """The job id of the latest submission that ran task ``index``."""
        for sub in reversed(self.submissions):
            if index in sub.indices:
                return sub.job_id
        return None

    def to_dict(self) -> dict:
        return asdict(self)

    def save(self) -> None:
        atomic_write_json(self.path / SWEEP_FILE, self.to_dict())


def plan_sweep(folder: Path, run_args: List[str], suites: List[str], gpus: List[int], *, name: Optional[str] = None,
               python: Optional[str] = None, partition: Optional[str] = None, time_limit: Optional[str] = None,
               cpus_per_task: Optional[int] = None, container: str = "none", image: Optional[str] = None,
               sbatch_args: Optional[List[str]] = None, stacks: Optional[List[str]] = None) -> Sweep:
    """Every option checked (UsageError, exit 2) and the tasks: stacks x suites x GPU counts.

    ``stacks`` need a container runtime: ``image`` names each stack's image with ``{stack}``
    (``registry#mpkit:{stack}-0.2.0``); natively the nodes' own Python is the one stack."""
    stacks = list(stacks or [])
    run_args = list(run_args)
    if run_args and run_args[0] == "run":
        run_args = run_args[1:]
    for flag in ("--results-dir", "--resume", "--dry-run", "--time-limit"):
        if _given(run_args, flag):
            raise UsageError(f"{flag} is the sweep's to set, not a task option.",
                             remedy=_SWEEPS_OWN.get(flag, "Leave it out of the options after `--`; each task writes "
                                                          "under the sweep folder."))
    if suites and _given(run_args, "--suite"):
        raise UsageError("--suites (the sweep's) and --suite (a task option after `--`) together: give one.")
    for s in suites:
        if s not in suite_choices():
            raise UsageError(f"--suites {s!r}: choose from {', '.join(suite_choices())}.")
    if len(set(suites)) != len(suites) or len(set(gpus)) != len(gpus):
        raise UsageError("--suites and --gpus-per-task name each value once.")
    if any(g < 0 for g in gpus):
        raise UsageError("--gpus-per-task: 0 (a CPU task) or more.")
    if _given(run_args, "--gpus", "--device"):
        raise UsageError("--gpus and --device are the sweep's to set per task (--gpus-per-task).",
                         remedy="Use --gpus-per-task 0,1,2 (0 = a CPU task).")
    if container not in CONTAINERS:
        raise UsageError(f"--container {container!r}: choose from {', '.join(CONTAINERS)}.")
    if container != "none" and not image:
        raise UsageError(f"--container {container} needs --image (the kit's image as the runtime names it).",
                         remedy="e.g. --image docker://registry.example/mpkit:cuda12-0.2.0 (pyxis) or --image mpkit.sif (Apptainer)")
    for st in stacks:
        if st not in PREFERENCE:
            raise UsageError(f"--stacks {st!r}: choose from {', '.join(PREFERENCE)}.")
    if len(set(stacks)) != len(stacks):
        raise UsageError("--stacks names each stack once.")
    if stacks and container == "none":
        raise UsageError("--stacks needs --container pyxis or apptainer: natively the nodes' own Python is the stack.",
                         remedy="Add --container pyxis --image 'registry#mpkit:{stack}-0.2.0' (one image per stack).")
    if len(stacks) > 1 and "{stack}" not in (image or ""):
        raise UsageError("several --stacks need {stack} in --image, e.g. --image 'registry#mpkit:{stack}-0.2.0'.")
    if time_limit is not None:
        slurm_seconds(time_limit)  # exit 2 for a malformed one (0 is Slurm's "no limit")
    if _given(sbatch_args or [], "--time") or any(a.startswith("-t") for a in (sbatch_args or [])):
        raise UsageError("--sbatch-arg sets the job's time: give it as the sweep's -t/--time instead.",
                         remedy="Each task's kit run gets the time left of the sweep's --time as its --time-limit.")
    if cpus_per_task is not None and cpus_per_task < 1:
        raise UsageError("--cpus-per-task must be at least 1.")
    folder = Path(folder)
    if (folder / SWEEP_FILE).exists():
        raise UsageError(f"--dir {folder} already holds a sweep ({SWEEP_FILE}).",
                         remedy=f"Follow it with: kit fleet slurm status {folder}; or give a new --dir.")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--dir {folder} is a file, not a folder.")
    # the task options parse as `kit run`'s (exit 2 now, not in every task); each suite's task gets
    # only the options its suite reads, so one set can serve --suites lstm,cifar
    options = parse_args(run_args, prog="kit fleet slurm submit -- (task options)")
    if not suites:
        check_suite_options(options)
    tasks = []
    for stack in (stacks or [None]):
        for suite in (suites or [None]):
            for n in (gpus or [1]):
                args = (["--suite", suite] + to_args(options_for_suite(options, suite)[0])) if suite else list(run_args)
                if n == 0:
                    args += ["--device", "cpu"]
                elif n > 1:
                    args += ["--gpus", str(n)]
                task_image = (image or "").replace("{stack}", stack or "") if container != "none" else None
                tasks.append(Task(len(tasks), suite, n, args, stack, task_image))
    return Sweep(name=name or folder.resolve().name, folder=str(folder.resolve()), python=python or sys.executable,
                 tasks=tasks, partition=partition, time_limit=time_limit, cpus_per_task=cpus_per_task,
                 container=container, image=image, sbatch_args=list(sbatch_args or []))


#: remedies for the options a sweep sets itself, where "each task writes under the sweep folder" is not why
_SWEEPS_OWN = {"--time-limit": "Give the sweep's -t/--time: each task's kit run gets the time left of it as its --time-limit."}


def _given(args: List[str], *flags: str) -> bool:
    """Whether ``args`` hold any of ``flags``, alone or as ``flag=value``."""
    return any(a == flag or a.startswith(flag + "=") for a in args for flag in flags)


def slurm_seconds(text: str) -> int:
    """Seconds from a time in Slurm's forms (sbatch(1) --time): minutes, minutes:seconds,
    hours:minutes:seconds, days-hours, days-hours:minutes or days-hours:minutes:seconds."""
    if not _SLURM_TIME.fullmatch(text):
        raise UsageError(f"--time {text!r}: use Slurm's forms, e.g. 30, 1:30:00 or 1-00:00:00.")
    days, _, rest = text.rpartition("-")
    parts = [int(x) for x in rest.split(":")]
    if days:  # days-hours[:minutes[:seconds]]
        hours, minutes, seconds = (parts + [0, 0])[:3]
        return ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if len(parts) == 3:
        return (parts[0] * 60 + parts[1]) * 60 + parts[2]
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return parts[0] * 60


def load_sweep(folder: Path) -> Sweep:
    """The sweep in ``folder``; UsageError (exit 2) when there is none, SchemaError (exit 4) when malformed."""
    folder = Path(folder)
    path = folder / SWEEP_FILE
    if not path.is_file():
        what = "does not exist" if not folder.exists() else f"has no {SWEEP_FILE}"
        raise UsageError(f"{folder} {what}: it is no sweep folder.",
                         remedy="Pass the --dir that `kit fleet slurm submit` used.")
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        if d.get("sweep_format") != SWEEP_FORMAT:
            raise SchemaError(f"{path}: sweep format {d.get('sweep_format')!r}; this kit reads format {SWEEP_FORMAT}.",
                              remedy="Use the kit version that submitted the sweep.")
        d = dict(d)
        d["tasks"] = [Task(**t) for t in d["tasks"]]
        d["submissions"] = [Submission(**s) for s in d.get("submissions", [])]
        d["folder"] = str(folder.resolve())  # a sweep folder copied elsewhere is read where it is
        return Sweep(**d)
    except SchemaError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise SchemaError(f"{path} is malformed ({exc.__class__.__name__}: {exc}).") from None


def parse_int_list(text: Optional[str], flag: str) -> List[int]:
    if text is None:
        return []
    try:
        return [int(x) for x in split_list(text, flag)]
    except ValueError:
        raise UsageError(f"{flag} {text!r}: give whole numbers, comma-separated (e.g. 1,2,4).") from None


def parse_name_list(text: Optional[str], flag: str) -> List[str]:
    """A comma list option's names ([] when not given), by kit run's one rule (split_list)."""
    return [] if text is None else split_list(text, flag)
