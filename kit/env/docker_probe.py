"""Can this host start GPU containers? A probe of the Docker engine.

Three questions, each with the answer a user can act on:

1. Is the engine reachable? (SDK not installed / daemon not running /
   no permission on the socket / other error)
2. Which runtimes does it have? ``docker info`` -> ``Runtimes`` lists
   ``nvidia`` when the NVIDIA Container Toolkit registered itself
   (``nvidia-ctk runtime configure --runtime=docker``).
3. Can ``--gpus`` work another way? Docker 25+ can hand out GPUs through CDI
   (``DiscoveredDevices`` with ``nvidia.com/gpu=...`` in Docker 28+), and
   ``--gpus`` also works when dockerd finds ``nvidia-container-runtime-hook``
   on its PATH. The hook check looks at this machine's PATH, so it only counts
   when the engine is local.

The docker SDK is imported lazily; the client is injectable (anything with an
``info()`` method returning the ``docker info`` dict, or raising).

Shape::

    {"reachable": True, "state": "ok", "host": "unix:///var/run/docker.sock",
     "server_version": "28.1.1", "runtimes": ["io.containerd.runc.v2", "nvidia", "runc"],
     "default_runtime": "runc", "cdi_devices": [], "gpu_support": "nvidia-runtime" |
     "cdi" | "hook" | "none"}
  or {"reachable": False, "state": "no_sdk" | "not_running" | "permission_denied" | "error",
      "reason": "...", "host": ...}
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Callable

from kit.env.probe import describe_exception

DEFAULT_HOST = "unix:///var/run/docker.sock"
#: Binaries dockerd looks up for `--gpus` without a registered runtime
#: (moby daemon/nvidia_linux.go).
GPU_HOOKS = ("nvidia-container-runtime-hook", "nvidia-container-toolkit")


def _default_client(timeout: float) -> Any:
    import docker  # lazily: the host side must start fast and work without it

    return docker.from_env(timeout=timeout)


def probe(client: Any | None = None, timeout: float = 5.0, which: Callable[[str], str | None] | None = None) -> dict:
    """Probe the engine. Never raises. ``which`` finds binaries on PATH (injectable for tests)."""
    which = which or shutil.which
    host = os.environ.get("DOCKER_HOST") or DEFAULT_HOST
    if client is None:
        try:
            client = _default_client(timeout)
        except ImportError:
            return {"reachable": False, "state": "no_sdk", "host": host, "reason": "the docker Python package is not installed"}
        except Exception as exc:  # noqa: BLE001 -- the SDK connects in from_env()
            return _unreachable(exc, host)
    try:
        info = client.info()
    except Exception as exc:  # noqa: BLE001
        return _unreachable(exc, host)

    runtimes = sorted((info.get("Runtimes") or {}).keys())
    devices = info.get("DiscoveredDevices") or []
    cdi = sorted(
        d.get("ID", "") for d in devices if isinstance(d, dict) and d.get("Source") == "cdi" and str(d.get("ID", "")).startswith("nvidia.com/gpu")
    )
    local = host.startswith("unix://") or host.startswith("npipe://")
    hooks = [h for h in GPU_HOOKS if which(h)] if local else []
    if "nvidia" in runtimes:
        support = "nvidia-runtime"
    elif cdi:
        support = "cdi"
    elif hooks:
        support = "hook"
    else:
        support = "none"
    return {
        "reachable": True,
        "state": "ok",
        "host": host,
        "server_version": info.get("ServerVersion", "unknown"),
        "runtimes": runtimes,
        "default_runtime": info.get("DefaultRuntime", "unknown"),
        "cdi_devices": cdi,
        "gpu_hooks_on_path": hooks,
        "gpu_support": support,
    }


def _unreachable(exc: BaseException, host: str) -> dict:
    chain = exception_chain(exc)
    text = " ".join(str(e) for e in chain)
    if any(isinstance(e, PermissionError) for e in chain) or "Permission denied" in text:
        state = "permission_denied"
    elif any(isinstance(e, (FileNotFoundError, ConnectionRefusedError)) for e in chain) or any(
        s in text for s in ("No such file or directory", "Connection refused", "Connection aborted")
    ):
        state = "not_running"
    else:
        state = "error"
    return {"reachable": False, "state": state, "host": host, "reason": describe_exception(exc)}


def exception_chain(exc: BaseException) -> list[BaseException]:
    """The exception, its causes, and exceptions nested in their args (requests/urllib3 do that)."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 20:
        e = todo.pop()
        if any(e is s for s in seen):
            continue
        seen.append(e)
        for nxt in (e.__cause__, e.__context__, *[a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]):
            if nxt is not None:
                todo.append(nxt)
    return seen
