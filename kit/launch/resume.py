"""`kit launch -- --resume RUN`: the run folder a resume names, found on the host, and the command
that continues an interrupted or failed run, printed as the user started `kit launch`."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kit.errors import UsageError
from kit.launch.follow import CONTAINER_RESULTS
from kit.launch.stacks import stack_facts
from kit.results.journal import JOURNAL_NAME


@dataclass(frozen=True)
class Rerun:
    """How `kit launch` was started, so that the command it prints to continue a run works
    as printed: ``prog`` is the launcher as typed (``kit launch``, ``.venv/bin/kit launch``,
    ``python -m kit launch``), ``make``: through `make run` (the Makefile sets KIT_LAUNCH_VIA=make)."""

    prog: str = "kit launch"
    make: bool = False


def resume_command(rerun: Rerun, stack: str, gpu: str | None, run_dir: Path, results: Path, *,
                   results_given: bool = False, data_dir: Path | None = None, base: str | None = None) -> str:
    """The command that continues the run in ``run_dir`` (a host folder in ``results``) as the
    user started this one: the same stack, GPU(s), results folder (``--results-dir`` when it was
    given, as its host path), data folder and base image; the run's options come from its journal."""
    inside = "/results/" + run_dir.relative_to(results).as_posix()
    uses_gpu = stack_facts(stack).uses_gpu
    launch_opts: list[str] = []
    if results_given:
        launch_opts += ["--results-dir", str(results)]
    if data_dir is not None:
        launch_opts += ["--data-dir", str(data_dir)]
    tail = [*launch_opts, "--", "--resume", inside]
    if rerun.make:
        words = ["make", "run", f"STACK={stack}"]
        if uses_gpu and gpu is not None:
            words.append(f"GPU={gpu}")
        if base:
            words.append(f"BASE={base}")
        return " ".join(shlex.quote(w) for w in words) + " ARGS=" + shlex.quote(" ".join(shlex.quote(w) for w in tail))
    words = ["--stack", stack]
    if uses_gpu and gpu is not None:
        words += ["--gpu", gpu]
    if base:
        words += ["--base", base]
    return rerun.prog + " " + " ".join(shlex.quote(w) for w in [*words, *tail])


def resume_folder(resume: Path | str, results: Path, results_given: bool) -> tuple[str, Path, Path]:
    """A resumed run's folder: (its path in the container, its host path, the results folder
    to mount). ``--resume`` takes the container's path (``/results/<run>``, what an interrupted
    `kit launch` prints) or the folder's host path: inside the results folder, or, without
    ``--results-dir``, anywhere (its parent is then mounted at /results, where the run's bundle
    lands beside it). UsageError (exit 2, before any container starts) when it is no run folder."""
    text = str(resume)
    posix = PurePosixPath(text)
    if posix.parts[:2] == CONTAINER_RESULTS.parts and len(posix.parts) > 2:
        rel = posix.relative_to(CONTAINER_RESULTS)
        host = results.joinpath(*rel.parts).resolve()
    else:
        host = Path(text).expanduser().resolve()
        try:
            rel = PurePosixPath(host.relative_to(results).as_posix())
        except ValueError:
            if results_given:
                raise UsageError(
                    f"--resume {text}: {host} is not in the results folder {results} (--results-dir), "
                    "which is what the container sees.",
                    remedy=f"Give its path in the container (/results/<run>), or --results-dir {host.parent}.",
                ) from None
            results = host.parent
            rel = PurePosixPath(host.name)
    if ".." in rel.parts or not rel.parts or (str(rel) == "."):
        raise UsageError(f"--resume {text}: give a run folder in the results folder, /results/<run>.")
    remedy = ("Pass the run folder the interrupted `kit launch` printed (Continue with: ...), with the same "
              "--results-dir; `ls` that folder to see the runs.")
    if not host.is_dir():
        raise UsageError(f"--resume {text}: {host} does not exist or is not a folder.", remedy=remedy)
    if not (host / JOURNAL_NAME).is_file():
        raise UsageError(f"--resume {text}: {host} has no {JOURNAL_NAME}, so it is not a run folder, or its run never started.",
                         remedy=remedy)
    return str(CONTAINER_RESULTS / rel), host, results
