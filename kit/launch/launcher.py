"""`kit launch`: run the benchmark in the stack's container on exactly the GPU(s) asked for.

Flow (``launch``, one function per step, top to bottom)::

    parse_gpus, run_options (the `kit run` options: kit.runner.options.RunOptions)
      -> _folders (the folders mounted; a resume's run folder: kit.launch.resume)
      -> engine.connect -> _choose_stack (check_environment: kit.env.doctor.check_stack: driver,
         GPU, architecture, Docker, toolkit; picks the stack for --stack auto)
      -> ensure_image (build when missing or built from another lock)
      -> container_command (the RunOptions rendered back into `kit run`'s command line)
      -> _run_container: start_container (kit.launch.container), follow (tail
         <results>/<run>/journal.jsonl, a line per finished cell and a bar over cells on the
         display of kit.launch.display; Ctrl-C = SIGINT, then stop), _find_bundle (the runner
         writes it in the container; when the container died before that, kit.bundle.export
         on the host)
      -> _raise_unless_ended_well (a non-zero exit becomes the same error on the host:
         kit.launch.exit_status; an interrupted run's error says how to continue it)

The container runs as the owner of the results folder (result files are theirs,
whoever starts `kit launch`: the rule Compose's entrypoint follows too), on the host
network, with ./data and ./results bind-mounted at /data and /results. A resume
(``-- --resume /results/<run>``, or the run folder's host path) follows that run
folder's journal and ends with its bundle, as a new run does.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from kit.errors import DockerError, Interrupted, KitError, Terminated, TimeLimitReached, UsageError
from kit.launch import engine
from kit.launch.build import build_image, image_state
# the container's life, the display it reports to, and its exit status on the host
from kit.launch.container import STOP_TIMEOUT_S, follow, log_tail, start_container, stdout_tail
from kit.launch.display import LaunchUI, NullLaunchUI
from kit.launch.exit_status import container_error, error_from_log
from kit.launch.follow import JournalFollower, bundle_from_output, new_bundles, snapshot
from kit.launch.resume import Rerun, resume_command, resume_folder
from kit.launch.stacks import find_source_root, image_spec, read_ca_cert, stack_facts
from kit.runner.option_checks import check_suite_options
from kit.runner.options import RunOptions, parse_args, split_list, to_args
from kit.runner.service import NOT_STARTED

#: what the container runs when no `kit run` options follow `--`
SMOKE_RUN = RunOptions().with_options(smoke=True, suite="all", device="cpu")
#: the full suite on a GPU stack, its device still to be chosen (cuda:0, or cuda over several GPUs)
GPU_DEFAULT = RunOptions().with_options(suite="all")
#: the name in the message when the options after `--` do not parse
RUN_PROG = "kit run (the options after `kit launch --`)"


@dataclass
class LaunchOutcome:
    stack: str
    image: str
    gpus: tuple[str, ...]
    exit_code: int
    run_dir: Path | None
    bundle: Path | None
    interrupted: bool = False
    bundled_on_host: bool = False
    cells_done: int = 0
    log_tail: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the run's cells by their latest status: ok (measured), skipped, failed
    counts: dict[str, int] = field(default_factory=dict)
    #: a resume: the cells its earlier sessions had finished (None: a new run)
    finished_before: int | None = None

    @property
    def closing_note(self) -> str | None:
        """The run's last line where no GPU was used (the cpu stack, or --device cpu): said at
        the end, with the result, not before anything ran."""
        if self.gpus:
            return None
        return (f"No GPU was used: the {self.stack} stack ran PyTorch on the CPU. This checked the kit end to end; "
                "its numbers are not GPU results.")

    def summary(self) -> str:
        """"5 measured, 4 skipped" (and failed, and what a resume found finished)."""
        c = {"ok": 0, "skipped": 0, "failed": 0, **self.counts}
        text = f"{c['ok']} measured, {c['skipped']} skipped" + (f", {c['failed']} failed" if c["failed"] else "")
        if self.finished_before:
            text += f" ({self.finished_before} of them finished before this resume)"
        return text


# -- 1. options ---------------------------------------------------------------


def parse_gpus(gpu: str | int) -> tuple[int, ...]:
    """'0' -> (0,); '0,2' -> (0, 2). Indices as nvidia-smi numbers them."""
    text = str(gpu).strip()
    items = split_list(text, "--gpu")  # the kit's one comma-list rule: "0,,1" is a typo, refused
    try:
        ids = tuple(int(x) for x in items)
    except ValueError:
        raise UsageError(f"--gpu {text!r}: give a GPU index as nvidia-smi numbers them (0, 1, ...), or several as 0,1") from None
    if not ids or any(i < 0 for i in ids):
        raise UsageError(f"--gpu {text!r}: GPU indices are 0 or more")
    if len(set(ids)) != len(ids):
        raise UsageError(f"--gpu {text!r}: a GPU is listed twice")
    return ids


def run_options(run_args: RunOptions | Sequence[str]) -> RunOptions:
    """The `kit run` options to forward: the object itself, or parsed from the arguments after
    `--` (a leading "run" is accepted; UsageError, exit 2, when they do not parse, or when one
    belongs to another suite than the run's: kit.runner.option_checks.check_suite_options). Their
    values are checked by `kit run` in the container, where its paths exist."""
    options = run_args if isinstance(run_args, RunOptions) else parse_args(run_args, prog=RUN_PROG)
    check_suite_options(options)
    return options


def container_command(stack: str, run_args: RunOptions | Sequence[str], smoke_default: bool, gpu_count: int = 1) -> list[str]:
    """The `kit` command line inside the container: the run options rendered back
    (kit.runner.options.to_args: the options given, in their order).

    No options: the CPU smoke run on the cpu stack, the full suite on a GPU stack.
    A resume (--resume) gets no other option: the run's own, from its journal, apply.
    Without --device, the cpu stack gets --device cpu and GPU stacks cuda:0,
    which inside the container is the first GPU given with --gpu. Several GPUs
    (``gpu_count`` > 1) on a GPU stack, without --gpus: the cells run data-parallel
    over all of them (``--gpus N --device cuda``).
    """
    options = run_options(run_args)
    if options.resume is not None:
        # a resume runs with the options in its journal: none are added
        return ["run", *to_args(options)]
    if not options.given:
        if smoke_default or stack == "cpu":
            return ["run", *to_args(SMOKE_RUN)]
        options = GPU_DEFAULT
    parallel = gpu_count > 1 and stack != "cpu" and "gpus" not in options.given
    if parallel:
        options = options.with_options(gpus=gpu_count)
    if "device" not in options.given:
        options = options.with_options(device="cpu" if stack == "cpu" else ("cuda" if parallel else "cuda:0"))
    return ["run", *to_args(options)]


def runs_on_cpu(options: RunOptions) -> bool:
    """Whether the `kit run` options ask for the CPU (``--device cpu``)."""
    return options.device == "cpu"


def make_folder(path: Path) -> None:
    """Make ``path`` (and missing parents). Made by root (`sudo make run`), each new folder gets the
    owner of the folder it is made in, so a new ./results in a user's checkout is the user's, and so
    is everything the container writes there (it runs as the results folder's owner)."""
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    path.mkdir(parents=True, exist_ok=True)
    if missing and hasattr(os, "geteuid") and os.geteuid() == 0:
        st = p.stat()
        for made in reversed(missing):
            os.chown(made, st.st_uid, st.st_gid)


# -- 2. environment -----------------------------------------------------------


def check_environment(stack: str, gpus: tuple[int, ...], client: Any = None, nvml: Any = None) -> tuple[str, list[str]]:
    """(resolved stack, notes). Raises EnvironmentCheckError / DockerError with remedies."""
    notes: list[str] = []
    try:
        from kit.env.doctor import check_stack
    except ImportError:  # the doctor is part of the kit; an old checkout may lack it
        if stack == "auto":
            raise UsageError("--stack auto needs the environment checks (kit.env.doctor), which this kit lacks; pass --stack") from None
        notes.append("environment checks skipped: kit.env.doctor is not available")
        return stack, notes
    resolved = None
    for index in gpus:
        verdict = check_stack(stack, index, nvml=nvml, docker=client, require_docker=True)
        resolved = resolved or verdict.stack
        if verdict.status == "limited":
            notes.extend(f"{verdict.stack} on GPU {index}: {r}" for r in verdict.reasons)
    assert resolved is not None
    return resolved, notes


def require_runner(stack: str, root: Path | None = None) -> None:
    """Stop before a long build when the stack's in-container runner is not in this kit.

    The cuda10 image cannot run the kit itself (Python 3.7); it runs the
    module named by LEGACY_RUNNER, which is written separately.
    """
    from kit.launch.stacks import LEGACY_RUNNER

    spec_root = root or find_source_root()
    if image_spec(stack, spec_root).build_args["KIT_RUNNER"] != LEGACY_RUNNER:
        return
    module_dir = spec_root.joinpath(*LEGACY_RUNNER.split("."))
    if not (module_dir.is_dir() or module_dir.with_suffix(".py").is_file()):
        raise UsageError(
            f"The {stack} stack's in-container runner ({LEGACY_RUNNER}) is not in this kit yet, so its image cannot run a benchmark.",
            remedy="Use --stack cuda12 (Volta or newer GPUs), or --stack cpu; see docs/containers.md ('The cuda10 boundary').",
        )


# -- 3. image -----------------------------------------------------------------


def ensure_image(client: Any, stack: str, ui: LaunchUI, *, rebuild: bool = False, build_kwargs: dict | None = None) -> str:
    """The image tag for ``stack``, built first when missing, built from another
    lock or older kit code, or (when ``build_kwargs`` names a ``base``) from
    another base image."""
    kw = {k: v for k, v in (build_kwargs or {}).items() if v is not None}
    root = find_source_root()
    pem = read_ca_cert(kw.pop("ca_cert")) if kw.get("ca_cert") else None
    network = kw.pop("network", "host")
    spec = image_spec(stack, root, extra_ca_pem=pem, **kw)
    state = "stale" if rebuild else image_state(client, spec, check_base=bool(kw.get("base")))
    if state == "current":
        return spec.tag
    ui.note(
        f"Building {spec.tag} on {spec.base} (first use of the {stack} stack on this engine)" if state == "missing"
        else f"Rebuilding {spec.tag} on {spec.base}: docker/locks/{stack}.txt, the kit's code or the base image changed "
        "since it was built (cached layers make this quick when only the code changed)"
    )
    build_image(spec, root, client, network=network, ui=ui.build_ui())
    return spec.tag


# -- 4. run (kit.launch.container) and its bundle --------------------------------


def bundle_on_host(run_dir: Path, results_dir: Path) -> Path | None:
    """Export the run folder's bundle on the host (the container died before it could)."""
    try:
        from kit.report.export import export_run
    except ImportError:
        return None
    bundle = export_run(run_dir, results_dir)
    give_to_folder_owner(bundle, results_dir)
    return bundle


def give_to_folder_owner(path: Path, folder: Path) -> None:
    """A file the host wrote as root (`sudo kit launch`) into a results folder another user owns
    gets that owner, as everything the container writes there has."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        st = Path(folder).stat()
        if st.st_uid != 0:
            os.chown(path, st.st_uid, st.st_gid)


# -- the whole thing ------------------------------------------------------------


def launch(
    gpu: str | int | None = None,
    stack: str = "auto",
    run_args: RunOptions | Sequence[str] = (),
    *,
    data_dir: Path | str | None = None,
    results_dir: Path | str | None = None,
    rebuild: bool = False,
    skip_checks: bool = False,
    build_kwargs: dict | None = None,
    client: Any = None,
    nvml: Any = None,
    ui: LaunchUI | None = None,
    keep_container: bool = False,
    poll_s: float = 0.5,
    rerun: Rerun | None = None,
) -> LaunchOutcome:
    """Run `kit run` in the stack's image on GPU(s) ``gpu`` (None: GPU 0, not given); see the
    module docstring.

    Raises Interrupted after Ctrl-C (finished cells and a bundle are kept),
    RunFailed when the container exits non-zero (its last log lines are in
    the message), and DockerError / EnvironmentCheckError before anything
    starts when the host cannot run it. ``rerun`` says how the user started it, for the
    command printed to continue an interrupted or failed run.
    """
    ui = ui or NullLaunchUI()
    if stack != "auto":
        stack_facts(stack)  # unknown names fail here, before any probing
    gpu_given = None if gpu is None else str(gpu)
    gpus = parse_gpus("0" if gpu is None else gpu)
    options = run_options(run_args)  # options that do not parse fail here too
    folders, options = _folders(options, data_dir, results_dir)

    client = client or engine.connect()
    resolved, uses_gpu, notes = _choose_stack(stack, gpus, gpu_given, options, client, nvml, skip_checks)
    for n in notes:
        ui.note(n)

    require_runner(resolved)
    image = ensure_image(client, resolved, ui, rebuild=rebuild, build_kwargs=build_kwargs)
    command = container_command(resolved, options, stack == "auto" and not uses_gpu, len(gpus) if uses_gpu else 1)
    outcome = _run_container(client, image, command, resolved, gpus if uses_gpu else (), folders, notes, ui,
                             keep_container=keep_container, poll_s=poll_s)

    base = (build_kwargs or {}).get("base")
    # --results-dir in the printed command when it was given, or when a resume's folder chose it
    results = folders.results
    name_results = folders.results_given or results != Path(os.environ.get("KIT_RESULTS_DIR") or "results").resolve()
    resume = (resume_command(rerun or Rerun(), resolved, gpu_given, outcome.run_dir, results, results_given=name_results,
                             data_dir=folders.data if data_dir is not None else None, base=base)
              if outcome.run_dir is not None else None)
    _raise_unless_ended_well(outcome, resume)
    return outcome


@dataclass(frozen=True)
class _Folders:
    """The host folders mounted in the container, and a resumed run's folder on the host."""

    data: Path
    results: Path
    results_given: bool
    resume_host: Path | None = None


def _folders(options: RunOptions, data_dir: Path | str | None, results_dir: Path | str | None) -> tuple[_Folders, RunOptions]:
    """The data and results folders (the options, else KIT_DATA_DIR / KIT_RESULTS_DIR, else ./data and
    ./results); a resume's run folder is checked here, before the checks and a build, and the
    options get its path in the container (:func:`resume_folder`)."""
    results_given = results_dir is not None
    data = Path(data_dir or os.environ.get("KIT_DATA_DIR") or "data").resolve()
    results = Path(results_dir or os.environ.get("KIT_RESULTS_DIR") or "results").resolve()
    resume_host: Path | None = None
    if options.resume is not None:
        inside, resume_host, results = resume_folder(options.resume, results, results_given)
        options = options.with_options(resume=Path(inside))
    return _Folders(data, results, results_given, resume_host), options


def _choose_stack(stack: str, gpus: tuple[int, ...], gpu_given: str | None, options: RunOptions, client: Any, nvml: Any,
                  skip_checks: bool) -> tuple[str, bool, list[str]]:
    """(the stack, whether the container gets the GPUs, the notes to show): the environment checks
    (kit.env.doctor, which picks the stack for --stack auto) unless skipped, then the GPU support
    of Docker where the container gets a GPU."""
    notes: list[str] = []
    if skip_checks:
        if stack == "auto":
            raise UsageError("--skip-checks needs an explicit --stack (auto is decided by the checks)")
        resolved = stack
        notes.append("environment checks skipped (--skip-checks)")
    else:
        resolved, notes = check_environment(stack, gpus, client=client, nvml=nvml)
    uses_gpu = stack_facts(resolved).uses_gpu
    if uses_gpu and runs_on_cpu(options):
        uses_gpu = False
        notes.append(f"--device cpu: the {resolved} image runs on the CPU and no GPU is given to the container "
                     "(a check of the stack's software, not a GPU result).")
    if uses_gpu:
        engine.require_gpu_support(client)
    if not stack_facts(resolved).uses_gpu:
        notes.append(
            "No GPU stack can run here (kit doctor says why): the cpu stack runs the smoke suite on the CPU, "
            "with synthetic data, a check of the kit." if stack == "auto" else
            "The cpu stack does not use a GPU" + (" (--gpu is ignored)." if gpu_given is not None else ".")
        )
    return resolved, uses_gpu, notes


def _run_container(client: Any, image: str, command: list[str], stack: str, gpus: tuple[int, ...], folders: _Folders,
                   notes: list[str], ui: LaunchUI, *, keep_container: bool, poll_s: float) -> LaunchOutcome:
    """Start the container (``gpus``: those it gets, none on the CPU), follow its run's journal until
    it exits, and find the run's bundle (:func:`_find_bundle`): what happened, as a LaunchOutcome."""
    # Made here, not by Docker (which would make them as root); under sudo, with the owner
    # of the folder they are made in (make_folder).
    make_folder(folders.data)
    make_folder(folders.results)
    before = snapshot(folders.results)
    follower = JournalFollower(folders.results, before, run_dir=folders.resume_host)
    started_at = time.time()

    container = start_container(client, image, command, stack=stack, gpus=gpus, data_dir=folders.data,
                                results_dir=folders.results)
    ui.started(container.name, image, command)
    try:
        interrupted, cells_done = follow(container, follower, ui, poll_s=poll_s)
        try:
            status = container.wait(timeout=STOP_TIMEOUT_S * 3)
            exit_code = int(status.get("StatusCode", 1))
        except Exception:  # noqa: BLE001
            container.reload()
            exit_code = int(container.attrs.get("State", {}).get("ExitCode", 1))
        tail = log_tail(container)
        printed = stdout_tail(container)
    finally:
        ui.close()
        if not keep_container:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001
                pass

    outcome = LaunchOutcome(stack, image, tuple(str(g) for g in gpus), exit_code,
                            follower.run_dir, None, interrupted, False, cells_done, tail, notes,
                            counts=follower.counts(), finished_before=follower.finished_earlier() if folders.resume_host else None)
    _find_bundle(outcome, printed, folders.results, before, started_at)
    return outcome


def _find_bundle(outcome: LaunchOutcome, printed: Any, results: Path, before: Any, started_at: float) -> None:
    """The run's bundle into ``outcome``: the one the run printed (a resume's may reuse an earlier
    bundle's name), else the newest written since the container started, else one made on the host
    from the run folder (the container died before it could write it, or its export failed there)."""
    outcome.bundle = bundle_from_output(printed, results)
    if outcome.bundle is None:
        bundles = new_bundles(results, before, since=started_at)
        if bundles:
            outcome.bundle = bundles[-1]
    if outcome.bundle is None and outcome.run_dir is not None:
        try:
            outcome.bundle = bundle_on_host(outcome.run_dir, results)
            outcome.bundled_on_host = outcome.bundle is not None
        except KitError as exc:
            outcome.notes.append(f"no bundle: {exc.message}")


def _raise_unless_ended_well(outcome: LaunchOutcome, resume: str | None) -> None:
    """The host's error for a run that did not end complete, as `kit run` would have said it: a time
    limit that fitted no cell, an interruption (Ctrl-C, SIGTERM, its --time-limit: ``resume``
    continues it), a failure, or a container that never started a run."""
    exit_code, stack, tail = outcome.exit_code, outcome.stack, outcome.log_tail
    if exit_code == 124 and not outcome.interrupted:
        said, remedy = error_from_log(tail)
        if said and said.startswith(NOT_STARTED):  # kit run's own words: no cell fitted its --time-limit
            raise TimeLimitReached(f"kit run in the {stack} container: {said}",
                                   remedy=remedy and f"{remedy} (with kit launch: after `--`)")
    if outcome.interrupted or exit_code in (124, 130, 143):
        # 143: the container's kit got SIGTERM (`docker stop` from outside); 124: it stopped at its
        # --time-limit. Either way it kept its finished cells and ended as kit run does, so the host
        # says the same
        cls, what = ((Terminated, "Terminated (the container got SIGTERM)") if exit_code == 143 and not outcome.interrupted
                     else (TimeLimitReached, "Stopped at its --time-limit") if exit_code == 124 and not outcome.interrupted
                     else (Interrupted, "Interrupted"))
        kept = outcome.counts["ok"] + outcome.counts["skipped"]
        where = f" in {outcome.run_dir}" if outcome.run_dir else ""
        raise cls(
            what + f": {kept} finished cell(s) kept{where}" + (f"; bundle {outcome.bundle}" if outcome.bundle else "") + ".",
            remedy=f"Continue with: {resume}" if resume else None,
        )
    if exit_code != 0:
        raise container_error(exit_code, stack, tail, outcome.run_dir, outcome.bundle, resume=resume)
    if outcome.run_dir is None:
        raise DockerError("The container exited without starting a run (no run folder appeared in the results folder).",
                          remedy="Check the options after `--`; `kit run --help` lists them.")
