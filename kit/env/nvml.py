"""A thin probe over NVML (the ``pynvml`` module of the nvidia-ml-py package).

Everything returns plain dicts, so the doctor, the environment record and the
tests share one shape. The NVML module is injectable: tests pass a fake (see
tests/fixtures/nvml_fake.py) built from recorded answers; production code passes
nothing and gets ``pynvml``.

Shapes::

    probe() -> {"available": True, "state": "ok", "driver_version": "580.65.06",
                "cuda_driver_version": "13.0", "nvml_version": ..., "gpu_count": 1,
                "gpus": [gpu, ...]}
            or {"available": False, "state": "no_driver" | "driver_mismatch" |
                "no_permission" | "nvml_error" | "no_nvml_package",
                "reason": "...", "gpus": []}

    gpu = {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-...",
           "compute_capability": "9.0", "sm": "sm_90", "architecture": "Hopper",
           "memory_total_bytes": ..., "memory_used_bytes": ...,
           "power_limit_w": 700.0, "pcie": {"generation": 5, "width": 16},
           "ecc_mode": "enabled", "clocks_mhz": {"sm": ..., "memory": ...},
           "processes": [{"pid": 123, "used_memory_bytes": ..., "name": ...}]}

Any single value NVML cannot give is ``{"value": "unknown", "reason": ...}``
(kit/env/probe.py), never an empty or invented value.
"""

from __future__ import annotations

from typing import Any

from kit.env.probe import attempt, describe_exception, is_unknown, unknown
from kit.facts import cuda as cuda_facts

# NVML return codes (nvml.h, nvmlReturn_t) that decide the host-level state.
_ERR_NO_PERMISSION = 4
_ERR_DRIVER_NOT_LOADED = 9
_ERR_LIBRARY_NOT_FOUND = 12
_ERR_LIB_RM_VERSION_MISMATCH = 18

# NVML enum values (nvml.h) used when the module does not define them.
_CLOCK_SM = 1
_CLOCK_MEM = 2
_TEMPERATURE_GPU = 0


def load_module() -> Any | None:
    """``pynvml`` if the package is installed, else None (imported lazily)."""
    try:
        import pynvml  # nvidia-ml-py

        return pynvml
    except ImportError:
        return None


def const(nvml: Any, name: str, default: int) -> int:
    return getattr(nvml, name, default)


def init_failure(exc: BaseException) -> dict:
    """Turn an nvmlInit() failure into the host-level state the doctor explains."""
    code = getattr(exc, "value", None)
    reason = describe_exception(exc)
    if code in (_ERR_LIBRARY_NOT_FOUND, _ERR_DRIVER_NOT_LOADED) or isinstance(exc, OSError):
        state = "no_driver"
    elif code == _ERR_LIB_RM_VERSION_MISMATCH:
        state = "driver_mismatch"
    elif code == _ERR_NO_PERMISSION:
        state = "no_permission"
    else:
        state = "nvml_error"
    return {"available": False, "state": state, "reason": reason, "gpus": []}


def probe(nvml: Any | None = None) -> dict:
    """Driver, CUDA version the driver supports, and every GPU. Never raises."""
    if nvml is None:
        nvml = load_module()
    if nvml is None:
        return {
            "available": False,
            "state": "no_nvml_package",
            "reason": "the nvidia-ml-py package (pynvml) is not installed",
            "gpus": [],
        }
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 -- any init failure is a host state
        return init_failure(exc)
    try:
        out: dict[str, Any] = {"available": True, "state": "ok"}
        out["driver_version"] = attempt(nvml.nvmlSystemGetDriverVersion, convert=_text)
        out["cuda_driver_version"] = attempt(nvml.nvmlSystemGetCudaDriverVersion, convert=cuda_facts.cuda_version_from_nvml)
        out["nvml_version"] = attempt(nvml.nvmlSystemGetNVMLVersion, convert=_text) if hasattr(nvml, "nvmlSystemGetNVMLVersion") else unknown("not provided by this pynvml")
        count = attempt(nvml.nvmlDeviceGetCount)
        if is_unknown(count):
            out["gpu_count"] = count
            out["gpus"] = []
        else:
            out["gpu_count"] = int(count)
            out["gpus"] = [probe_gpu(nvml, i) for i in range(int(count))]
        return out
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def probe_gpu(nvml: Any, index: int) -> dict:
    """One GPU's static facts and current state (NVML already initialised)."""
    gpu: dict[str, Any] = {"index": index}
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as exc:  # noqa: BLE001
        gpu["error"] = describe_exception(exc)
        for key in ("name", "uuid", "compute_capability", "memory_total_bytes"):
            gpu[key] = unknown(f"no handle for GPU {index}: {describe_exception(exc)}")
        gpu["processes"] = unknown(f"no handle for GPU {index}")
        return gpu
    gpu["name"] = attempt(nvml.nvmlDeviceGetName, handle, convert=_text)
    gpu["uuid"] = attempt(nvml.nvmlDeviceGetUUID, handle, convert=_text)
    cc = attempt(nvml.nvmlDeviceGetCudaComputeCapability, handle)
    if is_unknown(cc):
        gpu["compute_capability"] = gpu["sm"] = gpu["architecture"] = cc
    else:
        major, minor = int(cc[0]), int(cc[1])
        gpu["compute_capability"] = f"{major}.{minor}"
        gpu["sm"] = cuda_facts.sm((major, minor))
        gpu["architecture"] = cuda_facts.architecture((major, minor))
    mem = attempt(nvml.nvmlDeviceGetMemoryInfo, handle)
    if is_unknown(mem):
        gpu["memory_total_bytes"] = gpu["memory_used_bytes"] = mem
    else:
        gpu["memory_total_bytes"] = int(mem.total)
        gpu["memory_used_bytes"] = int(mem.used)
    gpu["power_limit_w"] = attempt(nvml.nvmlDeviceGetPowerManagementLimit, handle, convert=lambda mw: mw / 1000.0)
    gpu["pcie"] = {
        "generation": attempt(nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle, convert=int),
        "width": attempt(nvml.nvmlDeviceGetCurrPcieLinkWidth, handle, convert=int),
    }
    gpu["ecc_mode"] = attempt(nvml.nvmlDeviceGetEccMode, handle, convert=lambda m: "enabled" if int(m[0]) else "disabled")
    sm, memory = const(nvml, "NVML_CLOCK_SM", _CLOCK_SM), const(nvml, "NVML_CLOCK_MEM", _CLOCK_MEM)
    gpu["clocks_mhz"] = {
        "sm": attempt(nvml.nvmlDeviceGetClockInfo, handle, sm, convert=int),
        "memory": attempt(nvml.nvmlDeviceGetClockInfo, handle, memory, convert=int),
        # the most the GPU may clock to, and the clock applications are held to (lowered by
        # `nvidia-smi -ac`): a machine whose clocks were locked low shows here, not in its power limit
        "max_sm": attempt(_provided(nvml, "nvmlDeviceGetMaxClockInfo"), handle, sm, convert=int),
        "applications_sm": attempt(_provided(nvml, "nvmlDeviceGetApplicationsClock"), handle, sm, convert=int),
    }
    gpu["processes"] = processes(nvml, handle)
    return gpu


def _provided(nvml: Any, name: str):
    """``nvml``'s function ``name``, or one that raises saying this pynvml has none (recorded as unknown)."""
    fn = getattr(nvml, name, None)
    if fn is None:
        def missing(*_args):
            raise AttributeError(f"{name} not provided by this pynvml")
        return missing
    return fn


def processes(nvml: Any, handle: Any, with_names: bool = True) -> list[dict] | dict:
    """Compute and graphics processes on a GPU, one entry per PID.

    Inside a container NVML sees only the container's own processes (the
    driver hides PIDs outside its PID namespace).
    """
    found: dict[int, dict] = {}
    errors: list[str] = []
    for fname in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        fn = getattr(nvml, fname, None)
        if fn is None:
            errors.append(f"{fname} not provided by this pynvml")
            continue
        try:
            for p in fn(handle):
                pid = int(p.pid)
                used = getattr(p, "usedGpuMemory", None)
                entry = found.setdefault(pid, {"pid": pid, "used_memory_bytes": unknown("not reported by the driver")})
                if isinstance(used, int) and used >= 0:
                    entry["used_memory_bytes"] = used
        except Exception as exc:  # noqa: BLE001
            errors.append(describe_exception(exc))
    if errors and not found and len(errors) == 2:
        return unknown("; ".join(errors))
    if with_names and hasattr(nvml, "nvmlSystemGetProcessName"):
        for entry in found.values():
            entry["name"] = attempt(nvml.nvmlSystemGetProcessName, entry["pid"], convert=_text)
    return sorted(found.values(), key=lambda e: e["pid"])


def compute_capability(gpu: dict) -> tuple[int, int] | None:
    """(8, 6) from a probed GPU dict; None when unknown."""
    cc = gpu.get("compute_capability")
    if not isinstance(cc, str):
        return None
    major, _, minor = cc.partition(".")
    return int(major), int(minor or 0)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


#: nvmlGpuTopologyLevel_t (nvml.h): the closest common ancestor of two GPUs on the PCIe tree
_TOPOLOGY_LEVELS = {0: "same board", 10: "one PCIe switch", 20: "several PCIe switches", 30: "one PCIe host bridge",
                    40: "one NUMA node (across host bridges)", 50: "across NUMA nodes (SMP interconnect)"}
#: nvmlGpuP2PCapsIndex_t NVML_P2P_CAPS_INDEX_NVLINK, and NVML_P2P_STATUS_OK
_P2P_CAPS_NVLINK = 3
_P2P_STATUS_OK = 0


def interconnect(indices: list[int], nvml: Any | None = None) -> dict:
    """How the GPUs ``indices`` (NVML's numbering) reach each other, for a data-parallel cell.

    ``{"kind": "nvlink" | "pcie" | "mixed" | "none" | "unknown", "pairs": [{"gpus": [a, b],
    "link": "nvlink" | "pcie" | unknown, "pcie_path": "one PCIe switch" ...}], "source": ...}``:
    a pair is NVLink when NVML reports NVLink peer-to-peer between them as OK
    (nvmlDeviceGetP2PStatus, NVLINK index), else PCIe, with the closest common ancestor of
    the two on the PCIe tree (nvmlDeviceGetTopologyCommonAncestor). Never raises."""
    indices = list(indices)
    if len(indices) < 2:
        return {"kind": "none", "reason": "one GPU: nothing to connect", "pairs": []}
    if nvml is None:
        nvml = load_module()
    if nvml is None:
        return {"kind": "unknown", "reason": "the nvidia-ml-py package (pynvml) is not installed", "pairs": []}
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        return {"kind": "unknown", "reason": init_failure(exc)["reason"], "pairs": []}
    try:
        handles = {}
        for i in indices:
            h = attempt(nvml.nvmlDeviceGetHandleByIndex, i)
            if is_unknown(h):
                return {"kind": "unknown", "reason": f"no NVML handle for GPU {i}: {h['reason']}", "pairs": []}
            handles[i] = h
        pairs = []
        for n, a in enumerate(indices):
            for b in indices[n + 1:]:
                pair: dict[str, Any] = {"gpus": [a, b]}
                p2p = (attempt(nvml.nvmlDeviceGetP2PStatus, handles[a], handles[b],
                               const(nvml, "NVML_P2P_CAPS_INDEX_NVLINK", _P2P_CAPS_NVLINK), convert=int)
                       if hasattr(nvml, "nvmlDeviceGetP2PStatus") else unknown("not provided by this pynvml"))
                level = (attempt(nvml.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b], convert=int)
                         if hasattr(nvml, "nvmlDeviceGetTopologyCommonAncestor") else unknown("not provided by this pynvml"))
                pair["pcie_path"] = level if is_unknown(level) else _TOPOLOGY_LEVELS.get(level, f"topology level {level}")
                if is_unknown(p2p):
                    pair["link"] = p2p
                else:
                    pair["link"] = "nvlink" if p2p == _P2P_STATUS_OK else "pcie"
                pairs.append(pair)
        links = {p["link"] if isinstance(p["link"], str) else "unknown" for p in pairs}
        kind = links.pop() if len(links) == 1 else ("unknown" if "unknown" in links else "mixed")
        return {"kind": kind, "pairs": pairs,
                "source": "NVML: nvmlDeviceGetP2PStatus (NVLink) and nvmlDeviceGetTopologyCommonAncestor (PCIe path)"}
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
