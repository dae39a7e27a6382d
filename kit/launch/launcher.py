"""`kit launch`: run the benchmark in the stack's container on exactly the GPU(s) asked for.

Flow (one function per step, top to bottom)::

    parse_gpus -> check_environment (kit.env.doctor.check_stack: driver, GPU,
    architecture, Docker, toolkit; picks the stack for --stack auto)
      -> engine.connect -> ensure_image (build when missing or built from
         another lock) -> container_command -> start_container
      -> follow (tail <results>/<run>/journal.jsonl: a line per finished
         cell and a bar over cells; Ctrl-C = SIGINT, then stop)
      -> finish (bundle: the runner writes it in the container; when the
         container died before that, kit.bundle.export on the host)

The container runs as the invoking user (result files are theirs), on the
host network, with ./data and ./results bind-mounted at /data and /results.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence

from kit.errors import (
    DataError,
    DockerError,
    EXIT_CODES,
    EnvironmentCheckError,
    Interrupted,
    KitError,
    RunFailed,
    Terminated,
    UsageError,
    without_parser_prefix,
)
from kit.launch import engine
from kit.launch.build import BuildUI, build_image, image_state
from kit.launch.follow import JournalFollower, new_bundles, snapshot
from kit.launch.stacks import find_source_root, image_spec, read_ca_cert, stack_facts

#: /dev/shm for the data-loader workers (Docker's default is 64 MB, which
#: PyTorch DataLoader workers exhaust with "bus error").
SHM_SIZE = "2g"
#: After Ctrl-C: how long the runner gets to mark the run interrupted and write
#: its bundle before the container is stopped.
INTERRUPT_GRACE_S = 60
STOP_TIMEOUT_S = 10
LOG_TAIL_LINES = 30

SMOKE_ARGS = ["run", "--smoke", "--suite", "all", "--device", "cpu"]
GPU_ARGS = ["run", "--suite", "all"]


class LaunchUI(Protocol):
    def note(self, text: str) -> None: ...
    def build_ui(self) -> BuildUI: ...
    def started(self, container_name: str, image: str, command: list[str]) -> None: ...
    def run_started(self, run_id: str, cells: list[str]) -> None: ...
    def cell_done(self, cell_id: str, headline: str, status: str) -> None: ...
    def stopping(self) -> None: ...
    def close(self) -> None: ...


class NullLaunchUI:
    def note(self, text: str) -> None: ...
    def build_ui(self) -> BuildUI:
        from kit.launch.build import NullBuildUI

        return NullBuildUI()
    def started(self, container_name: str, image: str, command: list[str]) -> None: ...
    def run_started(self, run_id: str, cells: list[str]) -> None: ...
    def cell_done(self, cell_id: str, headline: str, status: str) -> None: ...
    def stopping(self) -> None: ...
    def close(self) -> None: ...


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


# -- 1. options ---------------------------------------------------------------


def parse_gpus(gpu: str | int) -> tuple[int, ...]:
    """'0' -> (0,); '0,2' -> (0, 2). Indices as nvidia-smi numbers them."""
    text = str(gpu).strip()
    try:
        ids = tuple(int(x) for x in text.split(",") if x.strip() != "")
    except ValueError:
        raise UsageError(f"--gpu {text!r}: give a GPU index as nvidia-smi numbers them (0, 1, ...), or several as 0,1") from None
    if not ids or any(i < 0 for i in ids):
        raise UsageError(f"--gpu {text!r}: GPU indices are 0 or more")
    if len(set(ids)) != len(ids):
        raise UsageError(f"--gpu {text!r}: a GPU is listed twice")
    return ids


def container_command(stack: str, run_args: Sequence[str], smoke_default: bool, gpu_count: int = 1) -> list[str]:
    """The `kit` command line inside the container.

    No arguments: the CPU smoke run on the cpu stack, the full suite on a GPU
    stack. Arguments are `kit run` options (a leading "run" is accepted).
    Without --device, the cpu stack gets --device cpu and GPU stacks cuda:0,
    which inside the container is the first GPU given with --gpu. Several GPUs
    (``gpu_count`` > 1) on a GPU stack, without --gpus: the cells run data-parallel
    over all of them (``--gpus N --device cuda``).
    """
    args = list(run_args)
    if args and args[0] == "run":
        args = args[1:]
    parallel = gpu_count > 1 and stack != "cpu" and not any(a == "--gpus" or a.startswith("--gpus=") for a in args)
    if not args:
        if smoke_default or stack == "cpu":
            return list(SMOKE_ARGS)
        args = GPU_ARGS[1:]
    if parallel:
        args += ["--gpus", str(gpu_count)]
    if device_arg(args) is None:
        args += ["--device", "cpu" if stack == "cpu" else ("cuda" if parallel else "cuda:0")]
    return ["run", *args]


def device_arg(run_args: Sequence[str]) -> str | None:
    """The value of ``--device`` in `kit run` options (``--device X`` or ``--device=X``), if given."""
    args = list(run_args)
    for i, a in enumerate(args):
        if a == "--device":
            return args[i + 1] if i + 1 < len(args) else ""
        if a.startswith("--device="):
            return a.split("=", 1)[1]
    return None


def runs_on_cpu(run_args: Sequence[str]) -> bool:
    """Whether the `kit run` options ask for the CPU (``--device cpu``)."""
    return device_arg(run_args) == "cpu"


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


# -- 4. run -------------------------------------------------------------------


def start_container(client: Any, image: str, command: list[str], *, stack: str, gpus: tuple[int, ...], data_dir: Path, results_dir: Path) -> Any:
    from docker.types import DeviceRequest

    device_requests = []
    if stack_facts(stack).uses_gpu and gpus:
        device_requests = [DeviceRequest(device_ids=[str(i) for i in gpus], capabilities=[["gpu"]])]
    user = f"{os.getuid()}:{os.getgid()}" if hasattr(os, "getuid") else None
    name = f"mpkit-{stack}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    try:
        return client.containers.run(
            image,
            command,
            name=name,
            detach=True,
            device_requests=device_requests,
            shm_size=SHM_SIZE,
            network_mode="host",
            user=user,
            init=True,  # docker-init forwards SIGINT to the runner and reaps its workers
            stop_signal="SIGINT",
            volumes={
                str(data_dir): {"bind": "/data", "mode": "rw"},
                str(results_dir): {"bind": "/results", "mode": "rw"},
            },
            environment={"KIT_DATA_DIR": "/data", "KIT_RESULTS_DIR": "/results", "PYTHONUNBUFFERED": "1"},
            labels={"mpkit.launch": "1", "mpkit.stack": stack},
        )
    except KitError:
        raise
    except Exception as exc:  # noqa: BLE001 -- APIError from create/start
        # run() = create + start: a failed start leaves a created container behind.
        try:
            client.containers.get(name).remove(force=True)
        except Exception:  # noqa: BLE001 -- it was never created
            pass
        raise engine.explain(
            engine.api_error_text(exc),
            engine.Context(during="run", stack=stack, gpus=tuple(str(g) for g in gpus), image=image, min_driver=stack_facts(stack).min_driver),
        ) from None


def follow(container: Any, follower: JournalFollower, ui: LaunchUI, poll_s: float = 0.5) -> tuple[bool, int]:
    """Show the run's progress until the container exits. Returns (interrupted, cells done)."""
    cells_done = 0
    interrupted = False

    def drain() -> None:
        nonlocal cells_done
        for ev in follower.poll():
            kind = ev.get("event")
            if kind == "run_start":
                ui.run_started(str(ev.get("run_id", "?")), list(ev.get("cells") or []))
            elif kind == "cell_end":
                cells_done += 1
                result = ev.get("result") or {}
                ui.cell_done(str(ev.get("cell_id")), headline(result), str(result.get("status", "?")))

    try:
        _wait_exited(container, drain, poll_s)
    except KeyboardInterrupt:
        interrupted = True
        ui.stopping()
        _interrupt(container, follower, drain, poll_s)
    drain()
    return interrupted, cells_done


def _wait_exited(container: Any, drain: Any, poll_s: float, deadline: float | None = None) -> bool:
    """Drain the journal and poll until the container has exited (True) or the
    monotonic ``deadline`` passes (False)."""
    while deadline is None or time.monotonic() < deadline:
        drain()
        container.reload()
        if container.status in ("exited", "dead"):
            return True
        time.sleep(poll_s)
    return False


def _interrupt(container: Any, follower: JournalFollower, drain: Any, poll_s: float) -> None:
    """SIGINT (the runner keeps finished cells and bundles), then stop if it lingers."""
    try:
        container.kill(signal="SIGINT")
    except Exception:  # noqa: BLE001 -- already gone
        return
    try:
        if _wait_exited(container, drain, poll_s, deadline=time.monotonic() + INTERRUPT_GRACE_S):
            return
    except KeyboardInterrupt:
        pass  # a second Ctrl-C: stop now
    try:
        container.stop(timeout=STOP_TIMEOUT_S)
    except Exception:  # noqa: BLE001
        pass


def headline(result: dict) -> str:
    """One line for a finished cell (the runner's own wording)."""
    try:
        from kit.results.schema import CellResult
        from kit.runner.progress import describe_result

        return describe_result(CellResult.from_dict(result))
    except Exception:  # noqa: BLE001 -- a result from another kit version: say what we can
        status = result.get("status", "?")
        return status if status == "ok" else f"{status}: {result.get('reason')}"


def log_tail(container: Any, lines: int = LOG_TAIL_LINES) -> list[str]:
    try:
        raw = container.logs(tail=lines)
    except Exception:  # noqa: BLE001
        return []
    return raw.decode("utf-8", "replace").splitlines()[-lines:]


#: Exit codes of the kit in the container that mean the same on the host (the
#: README's table): `kit launch` ends with the same code and error class, so
#: `kit launch -- --suite nope` is a usage error (2) like `kit run --suite nope`.
#: Any other non-zero code is "the run failed" (8).
PASSED_THROUGH: dict[int, type[KitError]] = {2: UsageError, 3: DataError, 6: EnvironmentCheckError}

_ERROR_LINE = re.compile(r"^(?:Error|error|[\w.]+: error): (?P<text>.+)$")
_REMEDY_LINE = re.compile(r"^what to do: (?P<text>.+)$")
def clean_error_text(text: str) -> str:
    """An error line without the parser's internals (pydantic's "Value error, ")."""
    return without_parser_prefix(text).strip()


def error_from_log(lines: Sequence[str]) -> tuple[str | None, str | None]:
    """(message, remedy) of the last error the kit (or Click, or argparse) printed
    in the container's log, or (None, None) when there is none."""
    message = remedy = None
    for i, raw in enumerate(lines):
        m = _ERROR_LINE.match(raw.strip())
        if m:
            message, remedy = clean_error_text(m.group("text")), None
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            r = _REMEDY_LINE.match(nxt)
            if r:
                remedy = r.group("text").strip()
    return message, remedy


def container_error(exit_code: int, stack: str, gpu: str | int, tail: Sequence[str], run_dir: Path | None, bundle: Path | None) -> KitError:
    """The host-side error for a container that exited with ``exit_code`` (not 0, 130 or 143)."""
    resume = (f"kit launch --stack {stack} --gpu {gpu} -- --resume /results/{run_dir.name}" if run_dir else None)
    kept = (f" Finished cells are kept in {run_dir}." if run_dir else "") + (f" Bundle: {bundle}." if bundle else "")
    cls = PASSED_THROUGH.get(exit_code)
    if cls is UsageError:
        message, remedy = error_from_log(tail)
        return UsageError(
            f"kit run in the {stack} container refused its options: {message or 'see its log above'}" + kept,
            remedy=remedy or "Fix the options after `--` (they go to `kit run` in the container; `kit run --help` lists them).",
        )
    text = "\n".join(clean_error_text(t) for t in tail) or "(the container printed nothing)"
    meaning = EXIT_CODES.get(exit_code, "see the log")
    what = "stopped" if cls is not None else "failed"
    message = (f"The run in the {stack} container {what} (exit code {exit_code}: {meaning})." + kept
               + f"\nLast {LOG_TAIL_LINES} lines of the container's log:\n{text}")
    if cls is not None:
        _, remedy = error_from_log(tail)
        return cls(message, remedy=remedy or "Fix what the log says and run again.")
    return RunFailed(
        message,
        remedy="Fix what the log says and run again" + (f"; finished cells are skipped with: {resume}" if resume else ""),
    )


def bundle_on_host(run_dir: Path, results_dir: Path) -> Path | None:
    """Export the run folder's bundle on the host (the container died before it could)."""
    try:
        from kit.report.export import export_run
    except ImportError:
        return None
    return export_run(run_dir, results_dir)


# -- the whole thing ------------------------------------------------------------


def launch(
    gpu: str | int = "0",
    stack: str = "auto",
    run_args: Sequence[str] = (),
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
) -> LaunchOutcome:
    """Run `kit run` in the stack's image on GPU(s) ``gpu``; see the module docstring.

    Raises Interrupted after Ctrl-C (finished cells and a bundle are kept),
    RunFailed when the container exits non-zero (its last log lines are in
    the message), and DockerError / EnvironmentCheckError before anything
    starts when the host cannot run it.
    """
    ui = ui or NullLaunchUI()
    if stack != "auto":
        stack_facts(stack)  # unknown names fail here, before any probing
    gpus = parse_gpus(gpu)
    notes: list[str] = []

    client = client or engine.connect()
    if skip_checks:
        if stack == "auto":
            raise UsageError("--skip-checks needs an explicit --stack (auto is decided by the checks)")
        resolved = stack
        notes.append("environment checks skipped (--skip-checks)")
    else:
        resolved, notes = check_environment(stack, gpus, client=client, nvml=nvml)
    uses_gpu = stack_facts(resolved).uses_gpu
    if uses_gpu and runs_on_cpu(run_args):
        uses_gpu = False
        notes.append(f"--device cpu: the {resolved} image runs on the CPU and no GPU is given to the container "
                     "(a check of the stack's software, not a GPU result).")
    if uses_gpu:
        engine.require_gpu_support(client)
    smoke_default = stack == "auto" and not uses_gpu
    if not stack_facts(resolved).uses_gpu:
        notes.append(
            "No GPU was used: the cpu stack runs PyTorch on the CPU. This checks the kit end to end; its numbers are not GPU results."
            if stack == "auto" else "The cpu stack does not use a GPU (--gpu is ignored)."
        )
    for n in notes:
        ui.note(n)

    require_runner(resolved)
    image = ensure_image(client, resolved, ui, rebuild=rebuild, build_kwargs=build_kwargs)
    command = container_command(resolved, run_args, smoke_default, len(gpus) if uses_gpu else 1)

    data = Path(data_dir or os.environ.get("KIT_DATA_DIR") or "data").resolve()
    results = Path(results_dir or os.environ.get("KIT_RESULTS_DIR") or "results").resolve()
    # Made here, by the invoking user, so Docker does not create them as root.
    data.mkdir(parents=True, exist_ok=True)
    results.mkdir(parents=True, exist_ok=True)
    before = snapshot(results)
    follower = JournalFollower(results, before)

    container = start_container(client, image, command, stack=resolved, gpus=gpus if uses_gpu else (), data_dir=data, results_dir=results)
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
    finally:
        ui.close()
        if not keep_container:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001
                pass

    outcome = LaunchOutcome(resolved, image, tuple(str(g) for g in gpus) if uses_gpu else (), exit_code,
                            follower.run_dir, None, interrupted, False, cells_done, tail, notes)
    bundles = new_bundles(results, before)
    if bundles:
        outcome.bundle = bundles[-1]
    elif outcome.run_dir is not None:
        try:
            outcome.bundle = bundle_on_host(outcome.run_dir, results)
            outcome.bundled_on_host = outcome.bundle is not None
        except KitError as exc:
            outcome.notes.append(f"no bundle: {exc.message}")

    if interrupted or exit_code in (130, 143):
        # 143: the container's kit got SIGTERM (`docker stop` from outside): it kept its
        # finished cells and ended as kit run does, so the host says the same
        terminated = exit_code == 143 and not interrupted
        where = f" in {outcome.run_dir}" if outcome.run_dir else ""
        raise (Terminated if terminated else Interrupted)(
            ("Terminated (the container got SIGTERM)" if terminated else "Interrupted")
            + f": {cells_done} finished cell(s) kept{where}" + (f"; bundle {outcome.bundle}" if outcome.bundle else "") + ".",
            remedy=(f"Continue with: kit launch --stack {resolved} --gpu {gpu} -- --resume /results/{outcome.run_dir.name}"
                    if outcome.run_dir else None),
        )
    if exit_code != 0:
        raise container_error(exit_code, resolved, gpu, tail, outcome.run_dir, outcome.bundle)
    if outcome.run_dir is None:
        raise DockerError("The container exited without starting a run (no run folder appeared in the results folder).",
                          remedy="Check the options after `--`; `kit run --help` lists them.")
    return outcome
