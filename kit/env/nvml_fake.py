"""A fake ``pynvml`` module fed from JSON, for tests (the kit's and other engineers').

It implements exactly the NVML calls kit/env uses, with pynvml's error
classes and codes, so kit/env/nvml.py, the doctor, preflight and the
telemetry sampler can be exercised without a GPU::

    from kit.env.nvml_fake import FakeNVML
    fake = FakeNVML.from_file("tests/fixtures/nvml/a100_525.json")
    kit.env.nvml.probe(fake)

Fixture format (every value may instead be ``{"error": "NotSupported"}`` to
make that call raise ``NVMLError_NotSupported``)::

    {"_fixture": "what this is and that it is hand-written",
     "init_error": null | "LibraryNotFound" | "DriverNotLoaded" | ...,
     "driver_version": "525.85.12", "cuda_driver_version": 12000,
     "gpus": [{"name": ..., "uuid": ..., "compute_capability": [8, 0],
               "memory": {"total": ..., "used": ...}, "power_limit_mw": ...,
               "pcie_generation": 4, "pcie_width": 16, "ecc_mode": [1, 1],
               "clocks": {"sm": ..., "memory": ...},
               "processes": [{"pid": 1234, "used_memory": ...}],
               "timeline": [{"power_mw": ..., "energy_mj": ..., "sm_clock": ...,
                             "mem_clock": ..., "temperature": ..., "util_gpu": ...,
                             "util_mem": ..., "clock_event_reasons": 0,
                             "processes": [...]}, ...]}]}

``timeline`` holds the changing values; ``fake.tick`` picks the entry (the last
one repeats). Tests advance ``tick`` between samples.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# pynvml's error codes (nvml.h nvmlReturn_t) by the suffix of pynvml's class names.
ERROR_CODES: dict[str, int] = {
    "Uninitialized": 1,
    "InvalidArgument": 2,
    "NotSupported": 3,
    "NoPermission": 4,
    "NotFound": 6,
    "DriverNotLoaded": 9,
    "LibraryNotFound": 12,
    "FunctionNotFound": 13,
    "GpuIsLost": 15,
    "LibRmVersionMismatch": 18,
    "Unknown": 999,
}

_MESSAGES = {
    "NotSupported": "Not Supported",
    "NoPermission": "Insufficient Permissions",
    "DriverNotLoaded": "Driver Not Loaded",
    "LibraryNotFound": "NVML Shared Library Not Found",
    "FunctionNotFound": "Function Not Found",
    "GpuIsLost": "GPU is lost",
    "LibRmVersionMismatch": "RM has detected an NVML/RM version mismatch.",
    "Uninitialized": "Uninitialized",
}


class NVMLError(Exception):
    """Like pynvml.NVMLError: carries ``value`` (the return code)."""

    value = 999

    def __str__(self) -> str:
        return _MESSAGES.get(type(self).__name__[len("NVMLError_"):] if type(self).__name__.startswith("NVMLError_") else type(self).__name__, "Unknown Error")


_ERROR_CLASSES: dict[str, type[NVMLError]] = {
    name: type(f"NVMLError_{name}", (NVMLError,), {"value": code}) for name, code in ERROR_CODES.items()
}


def _raise(name: str) -> None:
    raise _ERROR_CLASSES.get(name, _ERROR_CLASSES["Unknown"])()


def _value(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"error"}:
        _raise(v["error"])
    return v


class FakeNVML:
    """The subset of pynvml the kit calls, answering from a fixture dict."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVMLError = NVMLError

    def __init__(self, data: dict):
        self.data = data
        self.tick = 0
        self.initialised = 0
        self.calls: dict[str, int] = {}
        for name, cls in _ERROR_CLASSES.items():
            setattr(self, cls.__name__, cls)
        # Older pynvml has only ...ThrottleReasons; a fixture can say so.
        if data.get("no_clocks_event_reasons_api"):
            self.nvmlDeviceGetCurrentClocksEventReasons = None  # type: ignore[assignment]

    @classmethod
    def from_file(cls, path: str | Path) -> "FakeNVML":
        return cls(json.loads(Path(path).read_text(encoding="utf-8")))

    # -- bookkeeping -------------------------------------------------------
    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _need_init(self) -> None:
        if self.initialised <= 0:
            _raise("Uninitialized")

    def _gpu(self, handle: Any) -> dict:
        self._need_init()
        return self.data["gpus"][handle.index]

    def _now(self, handle: Any) -> dict:
        timeline = self._gpu(handle).get("timeline") or [{}]
        return timeline[min(self.tick, len(timeline) - 1)]

    def _dyn(self, handle: Any, key: str, static: Any = None) -> Any:
        now = self._now(handle)
        if key in now:
            return _value(now[key])
        if static is not None:
            return _value(static)
        _raise("NotSupported")

    # -- system ------------------------------------------------------------
    def nvmlInit(self) -> None:
        self._count("nvmlInit")
        err = self.data.get("init_error")
        if err:
            _raise(err)
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self._count("nvmlShutdown")
        self._need_init()
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._need_init()
        return _value(self.data["driver_version"])

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._need_init()
        return _value(self.data["cuda_driver_version"])

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._need_init()
        return _value(self.data.get("nvml_version", {"error": "NotSupported"}))

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        self._need_init()
        names = self.data.get("process_names", {})
        if str(pid) in names:
            return _value(names[str(pid)])
        _raise("NotFound")

    def nvmlDeviceGetCount(self) -> int:
        self._need_init()
        return len(self.data.get("gpus", []))

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self._need_init()
        if not 0 <= index < len(self.data.get("gpus", [])):
            _raise("InvalidArgument")
        return SimpleNamespace(index=index)

    def nvmlDeviceGetHandleByUUID(self, uuid: Any) -> Any:
        self._need_init()
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        for i, g in enumerate(self.data.get("gpus", [])):
            if g.get("uuid") == uuid:
                return SimpleNamespace(index=i)
        _raise("NotFound")

    # -- static per-GPU facts ------------------------------------------------
    def nvmlDeviceGetName(self, h: Any) -> str:
        return _value(self._gpu(h)["name"])

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return _value(self._gpu(h)["uuid"])

    def nvmlDeviceGetCudaComputeCapability(self, h: Any) -> tuple[int, int]:
        return tuple(_value(self._gpu(h)["compute_capability"]))  # type: ignore[return-value]

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Any:
        m = _value(self._gpu(h)["memory"])
        used = m.get("used", 0)
        return SimpleNamespace(total=m["total"], used=used, free=m["total"] - used)

    def nvmlDeviceGetPowerManagementLimit(self, h: Any) -> int:
        return _value(self._gpu(h).get("power_limit_mw", {"error": "NotSupported"}))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: Any) -> int:
        return _value(self._gpu(h).get("pcie_generation", {"error": "NotSupported"}))

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: Any) -> int:
        return _value(self._gpu(h).get("pcie_width", {"error": "NotSupported"}))

    def nvmlDeviceGetEccMode(self, h: Any) -> list[int]:
        return _value(self._gpu(h).get("ecc_mode", {"error": "NotSupported"}))

    # -- changing values (timeline) ----------------------------------------
    def nvmlDeviceGetClockInfo(self, h: Any, kind: int) -> int:
        self._count("nvmlDeviceGetClockInfo")
        clocks = self._gpu(h).get("clocks", {})
        if kind == self.NVML_CLOCK_SM:
            return self._dyn(h, "sm_clock", clocks.get("sm"))
        return self._dyn(h, "mem_clock", clocks.get("memory"))

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        self._count("nvmlDeviceGetPowerUsage")
        return self._dyn(h, "power_mw")

    def nvmlDeviceGetTotalEnergyConsumption(self, h: Any) -> int:
        self._count("nvmlDeviceGetTotalEnergyConsumption")
        return self._dyn(h, "energy_mj")

    def nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> int:
        return self._dyn(h, "temperature")

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> Any:
        return SimpleNamespace(gpu=self._dyn(h, "util_gpu"), memory=self._dyn(h, "util_mem"))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:
        self._count("nvmlDeviceGetCurrentClocksEventReasons")
        return self._dyn(h, "clock_event_reasons")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: Any) -> int:
        self._count("nvmlDeviceGetCurrentClocksThrottleReasons")
        return self._dyn(h, "clock_event_reasons")

    def _procs(self, h: Any) -> list:
        now = self._now(h)
        procs = now["processes"] if "processes" in now else self._gpu(h).get("processes", [])
        procs = _value(procs)
        return [SimpleNamespace(pid=p["pid"], usedGpuMemory=p.get("used_memory")) for p in procs]

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list:
        return self._procs(h)

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: Any) -> list:
        self._gpu(h)
        return []
