"""Live GPU telemetry around each cell: power, energy, clocks, heat, throttling.

The runner starts a sampler before a cell and stops it after::

    sampler = telemetry.start_for_device("cuda:0")   # a background thread, 5 Hz
    ... run the cell ...
    result.telemetry = sampler.stop(windows)          # a summary dict (idempotent); windows: the timed steps
    telemetry.attach_energy(result)                   # per-epoch energy, items per joule

What a sample reads (NVML, for the one GPU the cell runs on): board power
(W), SM and memory clocks (MHz), GPU temperature (°C), GPU and memory
utilisation (%), the clock-event ("throttle") reasons bitmask, and, about
once a second, the processes on the GPU. Energy comes from the driver's total
energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ, Volta and newer)
read at start, at every sample and at stop; where that counter does not exist
the sampled power is integrated over time and the summary says so
(``energy_source``). Given the cell's timed spans (each repeat's steady state,
``steady_windows`` on time.monotonic), the summary also has the energy and mean
power over those spans alone (``steady_power_w``), which energy per item uses.

A metric NVML does not support on this GPU is read once, recorded as unknown
with the reason, and not asked for again. The sampler measures its own cost:
``sampler_overhead_s_per_s`` is the time spent inside NVML calls per second
of wall time (it runs on its own thread, but shares the GIL with the cell).

For a CPU device, or when NVML is not usable, ``stop()`` returns
``{"available": False, "reason": ...}``.

This module samples; what the samples say (the summary ``stop()`` returns, energy per
unit of work) is kit.env.telemetry_summary.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable

from kit.env import nvml as nvml_probe
from kit.env.probe import describe_exception
from kit.env.telemetry_summary import combine_gpus, summarise

DEFAULT_HZ = 5.0
#: Processes on the GPU are listed about once a second (cheaper than every sample).
PROCESS_EVERY_S = 1.0


class Unavailable:
    """The sampler for a CPU device, or when NVML cannot be used."""

    def __init__(self, reason: str):
        self.reason = reason

    def stop(self, steady_windows: list | None = None) -> dict:
        return {"available": False, "reason": self.reason}


class Sampler:
    """Samples one GPU on a background thread until :meth:`stop`.

    ``nvml`` is the NVML module (``pynvml``, or a fake in tests); ``clock`` is
    injectable so tests can run :meth:`sample_once` against a fake timeline.
    """

    def __init__(
        self,
        nvml: Any,
        index: int | None = None,
        uuid: str | None = None,
        hz: float = DEFAULT_HZ,
        clock: Callable[[], float] = time.monotonic,
        own_pid: int | None = None,
        mapping: str = "index",
    ):
        self.nvml = nvml
        self.index = index
        self.uuid = uuid
        self.interval_s = 1.0 / hz
        self.clock = clock
        self.own_pid = os.getpid() if own_pid is None else own_pid
        self.mapping = mapping
        self.handle: Any = None
        self.gpu: dict[str, Any] = {}
        self.unsupported: dict[str, str] = {}
        # One list per metric, filled by sample_once(); times in clock seconds.
        self.times: list[float] = []
        self.power_w: list[tuple[float, float]] = []
        self.energy_mj: list[tuple[float, int]] = []  # the driver's energy counter at each sample
        self.sm_mhz: list[int] = []
        self.mem_mhz: list[int] = []
        self.temp_c: list[int] = []
        self.util_gpu: list[int] = []
        self.util_mem: list[int] = []
        self.reasons: list[int] = []
        self.other_pids: set[int] = set()
        self.busy_s = 0.0
        # read by the summary (kit.env.telemetry_summary.summarise) with the series above
        self.energy_start_mj: int | None = None
        self.t0 = 0.0
        self.error: str | None = None
        self._last_process_check: float | None = None
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._summary: dict | None = None
        self._session = False

    # -- life cycle ---------------------------------------------------------
    def start(self, thread: bool = True) -> "Sampler":
        self.nvml.nvmlInit()
        self._session = True
        try:
            if self.uuid is not None:
                self.handle = self.nvml.nvmlDeviceGetHandleByUUID(self.uuid)
            else:
                self.handle = self.nvml.nvmlDeviceGetHandleByIndex(self.index or 0)
        except Exception:
            self._shutdown()
            raise
        self.gpu = {
            "index": self.index,
            "uuid": self._read("uuid", self.nvml.nvmlDeviceGetUUID, self.handle),
            "name": self._read("name", self.nvml.nvmlDeviceGetName, self.handle),
            "mapping": self.mapping,
        }
        self.gpu = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in self.gpu.items()}
        self.t0 = self.clock()
        self.sample_once()  # reads the energy counter too: the cell's starting value
        self.energy_start_mj = self.energy_mj[0][1] if self.energy_mj else None
        if thread:
            self._thread = threading.Thread(target=self._loop, name="kit-telemetry", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop_event.wait(self.interval_s):
            try:
                self.sample_once()
            except Exception as exc:  # noqa: BLE001 -- telemetry must never break a cell
                self.error = describe_exception(exc)
                return

    def stop(self, steady_windows: list | None = None) -> dict:
        """Stop sampling and return the summary; with ``steady_windows`` ([start, end] on this
        sampler's clock: the cell's timed steps), also the energy over those spans
        (kit.env.telemetry_summary.steady_energy). Calling it again returns the same dict."""
        with self._lock:
            if self._summary is not None:
                return self._summary
            self._stop_event.set()
            if self._thread is not None:
                self._thread.join(timeout=5.0)
            try:
                self.sample_once()  # the state at the very end of the cell, the energy counter's too
                last = self.energy_mj[-1] if self.energy_mj else None
                end_mj = last[1] if last is not None and last[0] == self.times[-1] else None
                t1 = self.clock()
                self._summary = summarise(self, t1, end_mj, steady_windows)
            except Exception as exc:  # noqa: BLE001
                self._summary = {"available": False, "reason": f"telemetry failed: {describe_exception(exc)}"}
            finally:
                self._shutdown()
            return self._summary

    def _shutdown(self) -> None:
        if self._session:
            self._session = False
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass

    # -- sampling -------------------------------------------------------------
    def _read(self, metric: str, fn: Callable[..., Any] | None, *args: Any) -> Any:
        """One NVML read; an unsupported metric is remembered and skipped from then on."""
        if metric in self.unsupported:
            return None
        if fn is None:
            self.unsupported[metric] = "not provided by this NVML binding"
            return None
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001
            self.unsupported[metric] = describe_exception(exc)
            return None

    def _read_energy(self) -> int | None:
        v = self._read("energy_counter", getattr(self.nvml, "nvmlDeviceGetTotalEnergyConsumption", None), self.handle)
        return int(v) if v is not None else None

    def sample_once(self) -> None:
        start = time.perf_counter()
        nv = self.nvml
        h = self.handle
        now = self.clock()
        self.times.append(now)
        p = self._read("power", nv.nvmlDeviceGetPowerUsage, h)
        if p is not None:
            self.power_w.append((now, p / 1000.0))
        e = self._read_energy()
        if e is not None:
            self.energy_mj.append((now, e))
        sm = self._read("sm_clock", nv.nvmlDeviceGetClockInfo, h, nvml_probe.const(nv, "NVML_CLOCK_SM", 1))
        if sm is not None:
            self.sm_mhz.append(int(sm))
        mem = self._read("mem_clock", nv.nvmlDeviceGetClockInfo, h, nvml_probe.const(nv, "NVML_CLOCK_MEM", 2))
        if mem is not None:
            self.mem_mhz.append(int(mem))
        t = self._read("temperature", nv.nvmlDeviceGetTemperature, h, nvml_probe.const(nv, "NVML_TEMPERATURE_GPU", 0))
        if t is not None:
            self.temp_c.append(int(t))
        u = self._read("utilization", nv.nvmlDeviceGetUtilizationRates, h)
        if u is not None:
            self.util_gpu.append(int(u.gpu))
            self.util_mem.append(int(u.memory))
        reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        r = self._read("clock_event_reasons", reasons_fn, h)
        if r is not None:
            self.reasons.append(int(r))
        if self._last_process_check is None or now - self._last_process_check >= PROCESS_EVERY_S:
            self._last_process_check = now
            procs = nvml_probe.processes(nv, h, with_names=False)
            if isinstance(procs, list):
                for entry in procs:
                    if not self._is_ours(entry["pid"]):
                        self.other_pids.add(entry["pid"])
            elif "processes" not in self.unsupported:
                self.unsupported["processes"] = procs["reason"]
        self.busy_s += time.perf_counter() - start

    def _is_ours(self, pid: int) -> bool:
        """This process or one of its children (data-loader workers, compile workers)."""
        for _ in range(64):
            if pid == self.own_pid:
                return True
            if pid <= 1:
                return False
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    # pid (comm) state ppid ...; comm may contain spaces, so split after ')'.
                    pid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                return False
        return False


# -- picking the GPU a device string means ------------------------------------


def resolve_gpu(device: str, env: dict[str, str] | None = None, use_torch: bool = True) -> tuple[dict[str, Any] | None, str]:
    """Which physical GPU ``device`` ("cuda", "cuda:1", "auto") is, for NVML.

    Returns ({"index": i} or {"uuid": "GPU-..."}, how) or (None, reason).
    CUDA numbers the GPUs it sees after CUDA_VISIBLE_DEVICES; NVML numbers all
    of them in PCI bus order. When PyTorch already initialised CUDA, the
    device's UUID settles it; otherwise CUDA_VISIBLE_DEVICES is applied, which
    is exact when CUDA_DEVICE_ORDER=PCI_BUS_ID or the GPUs are alike.
    """
    env = dict(os.environ if env is None else env)
    dev = (device or "auto").strip().lower()
    if dev in ("cpu", "mps") or not (dev == "auto" or dev.startswith("cuda")):
        return None, f"device {device!r} is not an NVIDIA GPU"
    n = 0
    if ":" in dev:
        try:
            n = int(dev.split(":", 1)[1])
        except ValueError:
            return None, f"cannot read the GPU number in device {device!r}"

    uuid = _torch_uuid(n) if use_torch else None
    if uuid:
        return {"uuid": uuid}, "uuid from torch.cuda.get_device_properties"
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return {"index": n}, "cuda index = NVML index (CUDA_VISIBLE_DEVICES unset)"
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if n >= len(entries):
        return None, f"device {device!r} is not among CUDA_VISIBLE_DEVICES={visible!r}"
    entry = entries[n]
    if entry.isdigit():
        return {"index": int(entry)}, f"CUDA_VISIBLE_DEVICES={visible!r}"
    if entry.startswith("GPU-"):
        return {"uuid": entry}, f"CUDA_VISIBLE_DEVICES={visible!r}"
    return None, f"CUDA_VISIBLE_DEVICES entry {entry!r} (MIG instance or unknown form) is not supported by the telemetry sampler"


def _torch_uuid(n: int) -> str | None:
    """The NVML UUID of CUDA device n, only if torch is already imported and CUDA is up."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        u = str(torch.cuda.get_device_properties(n).uuid)
        return u if u.startswith("GPU-") or u.startswith("MIG-") else f"GPU-{u}"
    except Exception:  # noqa: BLE001 -- old torch without .uuid, or any CUDA error
        return None


class GroupSampler:
    """The samplers of a data-parallel cell's GPUs, stopped together into one summary
    (kit.env.telemetry_summary.combine_gpus)."""

    def __init__(self, samplers: list[Any]):
        self.samplers = samplers

    def stop(self, steady_windows: list | None = None) -> dict:
        return combine_gpus([s.stop(steady_windows) for s in self.samplers])


def start_for_devices(devices: list[str], nvml: Any = None, hz: float = DEFAULT_HZ) -> GroupSampler | Sampler | Unavailable:
    """Start sampling every GPU of ``devices`` (a data-parallel cell's ranks, cuda:0..N-1);
    one device is :func:`start_for_device`."""
    if len(devices) == 1:
        return start_for_device(devices[0], nvml=nvml, hz=hz)
    return GroupSampler([start_for_device(d, nvml=nvml, hz=hz) for d in devices])


def start_for_device(device: str, nvml: Any = None, hz: float = DEFAULT_HZ) -> Sampler | Unavailable:
    """Start sampling the GPU behind ``device``; never raises (telemetry is optional)."""
    where, how = resolve_gpu(device)
    if where is None:
        return Unavailable(how)
    module = nvml if nvml is not None else nvml_probe.load_module()
    if module is None:
        return Unavailable("the nvidia-ml-py package (pynvml) is not installed")
    try:
        return Sampler(module, index=where.get("index"), uuid=where.get("uuid"), hz=hz, mapping=how).start()
    except Exception as exc:  # noqa: BLE001
        first = describe_exception(exc)
    if how.startswith("uuid from torch"):
        # NVML did not know torch's UUID spelling: fall back to the index mapping.
        where, how = resolve_gpu(device, use_torch=False)
        if where is not None:
            try:
                return Sampler(module, index=where.get("index"), uuid=where.get("uuid"), hz=hz, mapping=how).start()
            except Exception as exc:  # noqa: BLE001
                first = describe_exception(exc)
    return Unavailable(f"NVML not usable: {first}")
