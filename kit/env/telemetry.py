"""Live GPU telemetry around each cell: power, energy, clocks, heat, throttling.

The runner starts a sampler before a cell and stops it after::

    sampler = telemetry.start_for_device("cuda:0")   # a background thread, 5 Hz
    ... run the cell ...
    result.telemetry = sampler.stop()                 # a summary dict (idempotent)
    telemetry.attach_energy(result)                   # per-epoch energy, items per joule

What a sample reads (NVML, for the one GPU the cell runs on): board power
(W), SM and memory clocks (MHz), GPU temperature (°C), GPU and memory
utilisation (%), the clock-event ("throttle") reasons bitmask, and, about
once a second, the processes on the GPU. Energy comes from the driver's total
energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ, Volta and newer)
read at start and stop; where that counter does not exist the sampled power
is integrated over time and the summary says so (``energy_source``).

A metric NVML does not support on this GPU is read once, recorded as unknown
with the reason, and not asked for again. The sampler measures its own cost:
``sampler_overhead_s_per_s`` is the time spent inside NVML calls per second
of wall time (it runs on its own thread, but shares the GIL with the cell).

For a CPU device, or when NVML is not usable, ``stop()`` returns
``{"available": False, "reason": ...}``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable

from kit.env import nvml as nvml_probe
from kit.env.probe import describe_exception, unknown
from kit.facts.hardware import THROTTLE_REASONS

DEFAULT_HZ = 5.0
#: A throttle reason counts when it is present in more than this fraction of
#: samples (a policy: a single sample at a phase change is not throttling).
THROTTLE_FRACTION = 0.05
#: Processes on the GPU are listed about once a second (cheaper than every sample).
PROCESS_EVERY_S = 1.0


class Unavailable:
    """The sampler for a CPU device, or when NVML cannot be used."""

    def __init__(self, reason: str):
        self.reason = reason

    def stop(self) -> dict:
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
        self.sm_mhz: list[int] = []
        self.mem_mhz: list[int] = []
        self.temp_c: list[int] = []
        self.util_gpu: list[int] = []
        self.util_mem: list[int] = []
        self.reasons: list[int] = []
        self.other_pids: set[int] = set()
        self.busy_s = 0.0
        self._last_process_check: float | None = None
        self._energy_start_mj: int | None = None
        self._t0 = 0.0
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._summary: dict | None = None
        self._session = False
        self._error: str | None = None

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
        self._t0 = self.clock()
        self._energy_start_mj = self._read_energy()
        self.sample_once()
        if thread:
            self._thread = threading.Thread(target=self._loop, name="kit-telemetry", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop_event.wait(self.interval_s):
            try:
                self.sample_once()
            except Exception as exc:  # noqa: BLE001 -- telemetry must never break a cell
                self._error = describe_exception(exc)
                return

    def stop(self) -> dict:
        """Stop sampling and return the summary. Calling it again returns the same dict."""
        with self._lock:
            if self._summary is not None:
                return self._summary
            self._stop_event.set()
            if self._thread is not None:
                self._thread.join(timeout=5.0)
            try:
                self.sample_once()  # the state at the very end of the cell
                end_mj = self._read_energy()
                t1 = self.clock()
                self._summary = self._summarise(t1, end_mj)
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

    # -- summary --------------------------------------------------------------
    def _summarise(self, t1: float, end_mj: int | None) -> dict:
        duration = max(t1 - self._t0, 0.0)
        n = len(self.times)
        out: dict[str, Any] = {"available": True, "gpu": self.gpu, "interval_s": self.interval_s, "samples": n, "duration_s": duration}

        watts = [w for _, w in self.power_w]
        out["power_mean_w"] = _mean(watts) if watts else unknown(self.unsupported.get("power", "no power samples"))
        out["power_max_w"] = max(watts) if watts else unknown(self.unsupported.get("power", "no power samples"))

        if self._energy_start_mj is not None and end_mj is not None and end_mj >= self._energy_start_mj:
            out["energy_j"] = (end_mj - self._energy_start_mj) / 1000.0
            out["energy_source"] = "counter"
        elif len(self.power_w) >= 1:
            out["energy_j"] = _integrate(self.power_w, self._t0, t1)
            out["energy_source"] = "integrated"
            out["energy_note"] = (
                "the driver has no total-energy counter for this GPU "
                f"({self.unsupported.get('energy_counter', 'counter went backwards')}); "
                f"energy is sampled power integrated over time at {1 / self.interval_s:g} Hz"
            )
        else:
            out["energy_j"] = unknown("no energy counter and no power samples: " + self.unsupported.get("power", ""))
            out["energy_source"] = "none"

        out["sm_clock_mean_mhz"] = _mean(self.sm_mhz) if self.sm_mhz else unknown(self.unsupported.get("sm_clock", "no samples"))
        out["sm_clock_min_mhz"] = min(self.sm_mhz) if self.sm_mhz else unknown(self.unsupported.get("sm_clock", "no samples"))
        out["mem_clock_mean_mhz"] = _mean(self.mem_mhz) if self.mem_mhz else unknown(self.unsupported.get("mem_clock", "no samples"))
        out["temp_max_c"] = max(self.temp_c) if self.temp_c else unknown(self.unsupported.get("temperature", "no samples"))
        out["temp_mean_c"] = _mean(self.temp_c) if self.temp_c else unknown(self.unsupported.get("temperature", "no samples"))
        out["util_mean_pct"] = _mean(self.util_gpu) if self.util_gpu else unknown(self.unsupported.get("utilization", "no samples"))
        out["mem_util_mean_pct"] = _mean(self.util_mem) if self.util_mem else unknown(self.unsupported.get("utilization", "no samples"))

        if self.reasons:
            fractions = {name: sum(1 for r in self.reasons if r & bit) / len(self.reasons) for name, bit in THROTTLE_REASONS.items()}
            out["throttle_fraction"] = fractions
            out["throttle_reasons"] = [name for name, f in fractions.items() if f > THROTTLE_FRACTION]
            out["throttled"] = bool(out["throttle_reasons"])
        else:
            why = unknown(self.unsupported.get("clock_event_reasons", "no samples"))
            out["throttle_fraction"] = why
            out["throttle_reasons"] = why
            out["throttled"] = why

        if "processes" in self.unsupported and not self.other_pids:
            out["other_processes"] = unknown(self.unsupported["processes"])
        else:
            out["other_processes"] = bool(self.other_pids)
        out["other_pids"] = sorted(self.other_pids)

        out["sampler_busy_s"] = self.busy_s
        out["sampler_overhead_s_per_s"] = self.busy_s / duration if duration > 0 else unknown("zero duration")
        out["unsupported"] = dict(self.unsupported)
        if self._error:
            out["sampler_error"] = self._error
        return out


def _mean(xs: list[float] | list[int]) -> float:
    return sum(xs) / len(xs)


def _integrate(samples: list[tuple[float, float]], t0: float, t1: float) -> float:
    """Trapezoidal energy (J) from (time, watts) samples, held flat to the ends of [t0, t1]."""
    pts = sorted(samples)
    if len(pts) == 1:
        return pts[0][1] * max(t1 - t0, 0.0)
    energy = pts[0][1] * max(pts[0][0] - t0, 0.0) + pts[-1][1] * max(t1 - pts[-1][0], 0.0)
    for (ta, wa), (tb, wb) in zip(pts, pts[1:]):
        energy += (wa + wb) / 2.0 * (tb - ta)
    return energy


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


# -- energy per unit of work --------------------------------------------------


ENERGY_ATTRIBUTION = (
    "estimate: the cell's mean board power x each epoch's time (the cell also spans warm-up, "
    "compilation and evaluation, whose power may differ)"
)


def attach_energy(result: Any) -> None:
    """Add energy per epoch to each repeat and items per joule, from ``result.telemetry``.

    The mean power is the energy counter's joules over the cell's duration
    (or the sampled mean when only that exists). Per-epoch energy and items per
    joule are estimates from that mean and are labelled as such.
    """
    tele = getattr(result, "telemetry", None)
    if not isinstance(tele, dict) or not tele.get("available"):
        return
    energy = tele.get("energy_j")
    duration = tele.get("duration_s")
    if isinstance(energy, (int, float)) and isinstance(duration, (int, float)) and duration > 0:
        mean_w = energy / duration
        tele["cell_mean_power_w"] = mean_w
    elif isinstance(tele.get("power_mean_w"), (int, float)):
        mean_w = float(tele["power_mean_w"])
        tele["cell_mean_power_w"] = mean_w
    else:
        tele["energy_j_per_epoch"] = unknown("no energy or power measurement for this GPU")
        return
    if mean_w <= 0:
        tele["energy_j_per_epoch"] = unknown("measured power was zero")
        return
    unit = getattr(result, "throughput_unit", "items") or "items"
    per_epoch: list[float] = []
    per_joule: list[float] = []
    for rep in getattr(result, "repeats", None) or []:
        secs = rep.get("epoch_seconds")
        if isinstance(secs, list) and secs and all(isinstance(s, (int, float)) for s in secs):
            rep["energy_j_per_epoch"] = [mean_w * s for s in secs]
            per_epoch.extend(rep["energy_j_per_epoch"])
        tput = rep.get("throughput_items_per_s")
        if isinstance(tput, (int, float)) and tput > 0:
            rep["items_per_j"] = tput / mean_w
            per_joule.append(rep["items_per_j"])
    tele["energy_attribution"] = ENERGY_ATTRIBUTION
    tele["energy_j_per_epoch"] = _median(per_epoch) if per_epoch else unknown("no per-epoch times in the repeats")
    tele["items_per_j"] = _median(per_joule) if per_joule else unknown("no throughput in the repeats")
    tele["items_per_j_unit"] = f"{unit} per joule"


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2.0
