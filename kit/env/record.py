"""The environment record: everything needed to judge whether two results are comparable.

``collect(config)`` gathers it by code, at the start of a run, and the runner
stores it in ``env.json`` and in ``results.json`` under ``environment``. Every
probe that fails records ``{"value": "unknown", "reason": ...}``
(kit/env/probe.py) instead of a value.

Fields (top level)::

    record_version     1; bump when a field changes meaning
    collected_at       UTC, ISO 8601
    host               name, host_id (sha256-based pseudonym), anonymized
    os                 system, kernel, distribution, machine
    cpu                model, logical_cores, usable_cores, physical_cores
    memory             total_bytes (and cgroup_limit_bytes inside a container)
    nvml               the NVML probe (kit/env/nvml.py): driver_version,
                       cuda_driver_version, gpus[...] (the same shape `kit doctor --json` prints)
    cuda_runtime       CUDA runtime and cuDNN of the installed PyTorch (see runtime_versions)
    python             version, implementation, executable
    packages           versions of torch, torchvision, fastai, apex, the kit, ... ("not installed" when absent)
    kit                version, git_commit, git_dirty
    container          inside, stack, image_id, image_digest (set by `kit launch`)
    command_line       the exact argv
    device_requested, seed, data      from the run's config

``KIT_ANONYMIZE=1`` replaces the host name (and GPU UUIDs and process names)
by opaque ids. ``KIT_HOST_NAME`` overrides the host name (`kit launch` passes
the real host's name into the container, whose own name is random).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from kit.compat import metadata

from kit import __version__
from kit.env import nvml as nvml_probe
from kit.env.probe import attempt, describe_exception, unknown
from kit.env.identity import host_identity
from kit.results.ratios import finite_number

RECORD_VERSION = 1

#: Distributions whose versions decide comparability; read with importlib.metadata
#: (never imported). "mpkit" is the kit itself.
PACKAGES: tuple[str, ...] = (
    "torch", "torchvision", "torchao", "fastai", "fastcore", "fastprogress", "apex", "numpy",
    "triton", "mpkit", "nvidia-ml-py", "docker", "typer", "rich",
)


def collect(config: Any = None, *, nvml: Any = None, env: Mapping[str, str] | None = None) -> dict:
    """The environment record for a run with ``config`` (a RunConfig, or None)."""
    env = os.environ if env is None else env
    anonymize = env.get("KIT_ANONYMIZE", "") not in ("", "0", "false", "no")
    gpu = nvml if isinstance(nvml, dict) else nvml_probe.probe(nvml)
    if anonymize:
        gpu = _anonymize_gpu(gpu)
    record: dict[str, Any] = {
        "record_version": RECORD_VERSION,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": host_identity(env, anonymize, container_info(env)["inside"]),
        "os": os_info(),
        "cpu": cpu_info(),
        "memory": memory_info(),
        "nvml": gpu,
        "cuda_runtime": runtime_versions(),
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "packages": package_versions(),
        "apex": apex_info(env),
        "kit": {"version": __version__, **git_state(env)},
        "container": container_info(env),
        "command_line": list(getattr(config, "command_line", None) or sys.argv),
    }
    if config is not None:
        record["device_requested"] = getattr(config, "device", unknown("not in the config"))
        record["seed"] = getattr(config, "seed", unknown("not in the config"))
        record["data"] = {
            "source": getattr(config, "data", unknown("not in the config")),
            "dir": str(getattr(config, "data_dir", "")) or unknown("not in the config"),
            "synthetic": getattr(config, "data", None) == "synthetic",
        }
    else:
        for key in ("device_requested", "seed", "data"):
            record[key] = unknown("no run configuration given")
    return record


# -- host, OS, CPU, memory --------------------------------------------------------


def gpu_records(env: dict) -> list | None:
    """The GPU records of an environment record (``nvml.gpus``), or None. A stranger's env.json may
    hold anything: only the records that are objects are kept."""
    nvml = env.get("nvml") or {}
    gpus = nvml.get("gpus") if isinstance(nvml, dict) else None
    return [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else None


def host_id_of(env: dict) -> Any:
    host = env.get("host")
    return host.get("host_id") if isinstance(host, dict) else None


def gpu_models(env: dict) -> list:
    """The GPU model names of an environment record, sorted, each once ([] where none is recorded)."""
    return sorted({g["name"] for g in gpu_records(env) or [] if isinstance(g.get("name"), str)})


def _text(v: Any) -> Any:
    return v if isinstance(v, str) else None


def _texts(v: Any) -> list:
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


#: the string fields of a ``merged_from`` entry (kit.bundle.merge writes them)
MERGED_SOURCE_TEXT = ("bundle", "run_id", "status", "device", "host_id", "manifest_sha256", "via")
#: a ``merged_from`` entry's calibration records: the source run's own (kit.bench.calibrate's)
MERGED_SOURCE_CALIBRATION = ("peak_tflops_measured", "memory_bandwidth_measured")


def _record_of_scalars(v: Any, depth: int = 3) -> Any:
    """A calibration record from a stranger's file: objects (``depth`` deep), strings, booleans and
    finite numbers come through; anything else is dropped (None where ``v`` is not an object)."""
    if not isinstance(v, dict):
        return None
    out = {}
    for k, x in v.items():
        if not isinstance(k, str):
            continue
        if isinstance(x, (str, bool)):
            out[k] = x
        elif finite_number(x) is not None:
            out[k] = finite_number(x)
        elif isinstance(x, dict) and depth > 1:
            out[k] = _record_of_scalars(x, depth - 1)
    return out


def calibration_records(record: dict) -> dict:
    """A session's or a merged run's own calibration records (:data:`MERGED_SOURCE_CALIBRATION`) from a
    stranger's record: objects of scalars (``by_shape`` is three deep), None where absent."""
    return {k: _record_of_scalars(record.get(k)) for k in MERGED_SOURCE_CALIBRATION}


def merged_sources(env: dict) -> list:
    """The ``merged_from`` entries of a merged bundle's environment, each run it was merged from. A
    stranger's record may hold anything: only the entries that are objects, and of them only strings
    and lists of strings (earlier sessions as :func:`session_summary` wrote them), and the source's
    calibration records as objects of scalars, come through."""
    entries = env.get("merged_from")
    out = []
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, dict):
            continue
        src = {k: _text(e.get(k)) for k in MERGED_SOURCE_TEXT}
        src["gpu_uuids"], src["command_line"] = _texts(e.get("gpu_uuids")), _texts(e.get("command_line"))
        src["cells"] = _texts(e.get("cells"))
        src.update(calibration_records(e))
        sessions = e.get("earlier_sessions")
        src["earlier_sessions"] = [
            {"collected_at": _text(x.get("collected_at")), "host_id": _text(x.get("host_id")),
             "gpu_uuids": _texts(x.get("gpu_uuids")), "kit_commit": _text(x.get("kit_commit")), "cells": _texts(x.get("cells")),
             **calibration_records(x)}
            for x in (sessions if isinstance(sessions, list) else []) if isinstance(x, dict)]
        out.append(src)
    return out


def session_summary(session: dict) -> dict:
    """Who measured what, from one entry of ``earlier_sessions`` (or any environment record): when,
    the host, the GPUs' UUIDs, the kit's commit, the cells it measured and its own calibration. A
    stranger's record may hold anything: only strings, lists of strings and the calibration records'
    scalars come through."""
    kit = session.get("kit") if isinstance(session.get("kit"), dict) else {}
    return {"collected_at": _text(session.get("collected_at")), "host_id": _text(host_id_of(session)),
            "gpu_uuids": [g["uuid"] for g in gpu_records(session) or [] if isinstance(g.get("uuid"), str)],
            "kit_commit": _text(kit.get("git_commit")), "cells": _texts(session.get("cells")),
            **calibration_records(session)}


def keep_earlier_session(environment: dict, previous: dict, finished: list) -> dict | None:
    """A resumed run's environment keeps the record of every session before it.

    ``kit run --resume`` measures the missing cells in a new session, which may be another day, another
    commit of the kit, another machine or GPU (a device lent for a few minutes, a preempted cluster
    job). env.json describes the session that writes it; the sessions before it move, oldest first, to
    ``environment["earlier_sessions"]``, each with ``cells``: the finished cells it measured (those
    finished at this resume that no earlier session claims). Returns the previous session's entry
    when it ran on another machine or GPU than this one (the caller says so), else None."""
    earlier = [s for s in previous.get("earlier_sessions") or [] if isinstance(s, dict)]
    claimed = {c for s in earlier for c in (s.get("cells") or []) if isinstance(c, str)}
    entry = {k: v for k, v in previous.items() if k != "earlier_sessions"}
    entry["cells"] = [c for c in finished if c not in claimed]
    environment["earlier_sessions"] = earlier + [entry]

    def where(env: dict) -> tuple:
        return host_id_of(env), tuple(sorted(str(g.get("uuid")) for g in gpu_records(env) or []))

    return entry if where(entry) != where(environment) else None


def os_info() -> dict:
    return {
        "system": platform.system(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "distribution": _os_release(),
        "machine": platform.machine(),
    }


def _os_release() -> Any:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            for line in Path(path).read_text(encoding="utf-8").splitlines():
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
        except OSError:
            continue
    return unknown("no /etc/os-release")


def cpu_info() -> dict:
    out: dict[str, Any] = {"logical_cores": os.cpu_count() or unknown("os.cpu_count() returned None")}
    try:
        out["usable_cores"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError) as exc:
        out["usable_cores"] = unknown(describe_exception(exc))
    model: Any = None
    cores: set[tuple[str, str]] = set()
    try:
        phys = core = ""
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if key == "model name" and model is None:
                model = value
            elif key == "physical id":
                phys = value
            elif key == "core id":
                core = value
                cores.add((phys, core))
    except OSError as exc:
        model = model or unknown(f"cannot read /proc/cpuinfo: {describe_exception(exc)}")
    out["model"] = model or platform.processor() or unknown("no model name in /proc/cpuinfo")
    out["physical_cores"] = len(cores) if cores else unknown("no core ids in /proc/cpuinfo")
    return out


def device_kind(device: str) -> str:
    """'cuda' or 'cpu': the kind of device ``--device`` names. 'auto' becomes 'cuda' where an NVIDIA
    driver is loaded (as torch's CUDA check needs), else 'cpu'; torch is not imported for a guess."""
    if device.startswith("cuda"):
        return "cuda"
    if device == "auto":
        return "cuda" if os.path.exists("/proc/driver/nvidia/version") else "cpu"
    return "cpu"


def cpu_has_native_bf16() -> bool | None:
    """True/False from the Linux CPU flags (AVX512-BF16 or AMX-BF16); None if unknown. Without
    them the kit skips amp-bf16 cells on the CPU (PyTorch would emulate bf16), and the plan's
    estimate counts them as skipped (kit.runner.plan.runs_on_cpu)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = f.read()
    except OSError:
        return None
    return "avx512_bf16" in flags or "amx_bf16" in flags


def memory_info() -> dict:
    out: dict[str, Any] = {}
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                out["total_bytes"] = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError) as exc:
        out["total_bytes"] = unknown(f"cannot read /proc/meminfo: {describe_exception(exc)}")
    out.setdefault("total_bytes", unknown("no MemTotal in /proc/meminfo"))
    # A container's memory limit (cgroup v2, then v1) matters as much as the host's RAM.
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            out["cgroup_limit_bytes"] = int(text)
        break
    return out


# -- software ---------------------------------------------------------------------


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict:
    out: dict[str, Any] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"  # a fact, not an unknown
        except Exception as exc:  # noqa: BLE001
            out[name] = unknown(describe_exception(exc))
    return out


def torch_wheel_cuda() -> str | None:
    """CUDA version of the installed torch wheel from torch/version.py, without importing torch."""
    try:
        dist = metadata.distribution("torch")
        text = dist.read_text("torch/version.py")
        if text is None:
            path = dist.locate_file("torch/version.py")
            text = open(path, encoding="utf-8").read()
    except Exception:  # noqa: BLE001 -- no torch, or an unusual install
        return None
    m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([\d.]+)['\"]", text, re.M)
    return m.group(1) if m else None


def installed(package: str) -> bool:
    """Whether ``package`` is on this process's import path, found without importing it (importing
    torch takes seconds, and Apex imports torch)."""
    import importlib.util

    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def apex_info(env: Mapping[str, str] | None = None) -> dict:
    """Which Apex the benchmark would import, found without importing it (that imports torch).

    Apex is often used from a source folder on PYTHONPATH (python-only, as on the GPU machines),
    which has no package metadata: ``packages.apex`` would then say "not installed" although the
    Apex cells run. This says where it is and whether it still has ``amp`` and ``fp16_utils``
    (deleted in 25.07). An image built with Apex sets KIT_APEX_REF and KIT_APEX_SOURCE."""
    import importlib.util

    env = os.environ if env is None else env
    out: dict[str, Any] = {}
    try:
        spec = importlib.util.find_spec("apex")
    except (ImportError, ValueError) as exc:
        spec = None
        out["error"] = describe_exception(exc)
    if spec is None or not spec.submodule_search_locations:
        out["found"] = False
    else:
        folder = Path(list(spec.submodule_search_locations)[0])
        out.update(found=True, path=str(folder),
                   has_amp=(folder / "amp" / "__init__.py").is_file(),
                   has_fp16_utils=(folder / "fp16_utils" / "__init__.py").is_file())
        try:
            out["version"] = metadata.version("apex")
        except metadata.PackageNotFoundError:
            out["version"] = unknown("no package metadata: a source folder on the import path")
    for key, name in (("KIT_APEX_REF", "ref"), ("KIT_APEX_SOURCE", "source")):
        if env.get(key):
            out[name] = env[key]
    # The kit's images write what their Apex step built (ref, commit, GitHub or a local source).
    if env.get("KIT_APEX_INFO"):
        try:
            image = json.loads(Path(env["KIT_APEX_INFO"]).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            out["image"] = unknown(describe_exception(exc))
        else:
            if isinstance(image, dict):
                out["image"] = {k: image[k] for k in ("built", "ref", "commit", "source", "build_options") if k in image}
                for k in ("ref", "commit", "source"):
                    if image.get(k) and k not in out:
                        out[k] = image[k]
    return out


def runtime_versions() -> dict:
    """CUDA runtime and cuDNN versions PyTorch uses.

    Exact values come from torch itself, but only when torch is already
    imported (this module never imports it). Before that, the CUDA version is
    read from torch/version.py as text and cuDNN from the nvidia-cudnn-*
    wheel's metadata, and ``source`` says so. The runner can call this again
    after importing torch and replace ``record["cuda_runtime"]``.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        out: dict[str, Any] = {"source": "torch (imported)"}
        out["torch"] = attempt(lambda: str(torch.__version__))
        out["cuda"] = attempt(lambda: torch.version.cuda or unknown("this torch build has no CUDA"))
        out["cudnn"] = attempt(lambda: torch.backends.cudnn.version() or unknown("cuDNN not available to torch"))
        out["cuda_available"] = attempt(lambda: bool(torch.cuda.is_available()))
        return out
    out = {"source": "installed package metadata (torch not imported yet)"}
    try:
        metadata.version("torch")
    except metadata.PackageNotFoundError:
        return {"source": "none", "cuda": unknown("torch is not installed"), "cudnn": unknown("torch is not installed")}
    wheel_cuda = torch_wheel_cuda()
    out["cuda"] = wheel_cuda or unknown("torch/version.py names no CUDA version (a CPU build?)")
    cudnn = None
    for dist in ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11"):
        try:
            cudnn = metadata.version(dist)
            out["cudnn_package"] = dist
            break
        except metadata.PackageNotFoundError:
            continue
    out["cudnn"] = cudnn or unknown("torch not imported yet and no nvidia-cudnn wheel installed (cuDNN may be bundled in torch)")
    return out


def git_state(env: Mapping[str, str]) -> dict:
    """The kit's git commit (and whether the tree has changes), when it is a checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if commit.returncode == 0 and commit.stdout.strip():
            status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=5)
            dirty: Any = bool(status.stdout.strip()) if status.returncode == 0 else unknown(status.stderr.strip() or "git status failed")
            return {"git_commit": commit.stdout.strip(), "git_dirty": dirty}
        reason = commit.stderr.strip().splitlines()[0] if commit.stderr.strip() else "git rev-parse failed"
    except (OSError, subprocess.SubprocessError) as exc:
        reason = describe_exception(exc)
    # Inside an image there is no .git; the image build may pass the commit in.
    if env.get("KIT_GIT_COMMIT"):
        return {"git_commit": env["KIT_GIT_COMMIT"], "git_dirty": unknown("commit given by KIT_GIT_COMMIT")}
    return {"git_commit": unknown(f"not a git checkout: {reason}"), "git_dirty": unknown("not a git checkout")}


def container_info(env: Mapping[str, str]) -> dict:
    inside = Path("/.dockerenv").exists() or Path("/run/.containerenv").exists() or bool(env.get("container"))
    not_set = "not set (not started by kit launch)"
    return {
        "inside": inside,
        # not started in one of the kit's images (KIT_STACK unset): the user's own environment
        "stack": env.get("KIT_STACK") or "native",
        "image_id": env.get("KIT_IMAGE_ID") or unknown(f"KIT_IMAGE_ID {not_set}"),
        "image_digest": env.get("KIT_IMAGE_DIGEST") or unknown(f"KIT_IMAGE_DIGEST {not_set}"),
    }


def _anonymize_gpu(gpu: dict) -> dict:
    out = dict(gpu)
    gpus = []
    for g in gpu.get("gpus") or []:
        g = dict(g)
        if isinstance(g.get("uuid"), str):
            g["uuid"] = "GPU-anon-" + hashlib.sha256(g["uuid"].encode()).hexdigest()[:16]
        if isinstance(g.get("processes"), list):
            g["processes"] = [{k: v for k, v in p.items() if k != "name"} for p in g["processes"]]
        gpus.append(g)
    out["gpus"] = gpus
    return out
