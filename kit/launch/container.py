"""The benchmark container's life: start it (exactly the GPUs asked for, the mounts,
as the owner of the results folder), follow its journal until it exits (Ctrl-C: SIGINT,
a grace period, then stop), and read the tail of its log."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from kit.env.identity import machine_host_id
from kit.errors import KitError
from kit.launch import engine
from kit.launch.display import LaunchUI, headline
from kit.launch.follow import JournalFollower
from kit.launch.stacks import stack_facts

#: /dev/shm for the data-loader workers (Docker's default is 64 MB, which
#: PyTorch DataLoader workers exhaust with "bus error").
SHM_SIZE = "2g"
#: After Ctrl-C: how long the runner gets to mark the run interrupted and write
#: its bundle before the container is stopped.
INTERRUPT_GRACE_S = 60
STOP_TIMEOUT_S = 10
LOG_TAIL_LINES = 30


def results_owner(results_dir: Path) -> str | None:
    """``UID:GID`` of the results folder: the container runs as its owner, so every file it
    writes there belongs to whoever owns the folder (what the image's entrypoint does for
    Compose: docker/entrypoint.sh, KIT_RUN_AS_OWNER_OF), whoever started `kit launch`
    (root under `sudo make run` too). None where the OS has no uids."""
    if not hasattr(os, "getuid"):
        return None
    st = Path(results_dir).stat()
    return f"{st.st_uid}:{st.st_gid}"


def container_environment(client: Any, image: str) -> dict:
    """The run's environment inside the container: the mounted folders, and what the run records but
    cannot see from inside (kit.env.record): this machine's host id (from its machine-id; the
    container's own is its image's) and the image's id."""
    env = {"KIT_DATA_DIR": "/data", "KIT_RESULTS_DIR": "/results", "PYTHONUNBUFFERED": "1"}
    hid = machine_host_id()
    if hid:
        env["KIT_HOST_ID"] = hid
    try:
        env["KIT_IMAGE_ID"] = str(client.images.get(image).id)
    except Exception:  # noqa: BLE001 -- the run records "not set" rather than failing the launch
        pass
    return env


def start_container(client: Any, image: str, command: list[str], *, stack: str, gpus: tuple[int, ...], data_dir: Path, results_dir: Path) -> Any:
    from docker.types import DeviceRequest

    device_requests = []
    if stack_facts(stack).uses_gpu and gpus:
        device_requests = [DeviceRequest(device_ids=[str(i) for i in gpus], capabilities=[["gpu"]])]
    user = results_owner(results_dir)
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
            environment=container_environment(client, image),
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
    """Show the run's progress until the container exits. Returns (interrupted, cells finished
    in this session). A resumed run (the follower was given its folder) starts its bar at the
    cells its earlier sessions finished."""
    cells_done = 0
    interrupted = False
    if follower.earlier and follower.run_id:
        ui.run_started(follower.run_id, follower.cells, finished=follower.finished_earlier())

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


def log_tail(container: Any, lines: int = LOG_TAIL_LINES) -> list[str]:
    try:
        raw = container.logs(tail=lines)
    except Exception:  # noqa: BLE001
        return []
    return raw.decode("utf-8", "replace").splitlines()[-lines:]


def stdout_tail(container: Any, lines: int = 20) -> list[str]:
    """The last lines the container wrote to its stdout alone (`kit run` prints only its
    bundle's path there; progress and messages go to stderr)."""
    try:
        raw = container.logs(stdout=True, stderr=False, tail=lines)
    except Exception:  # noqa: BLE001 -- an engine or a fake without the split: no path from here
        return []
    if not isinstance(raw, (bytes, bytearray)):
        return []
    return raw.decode("utf-8", "replace").splitlines()[-lines:]
