"""Clocks that tell the truth on an asynchronous device.

CUDA kernels run after the Python call returns, so a wall clock read without
synchronising measures launch time, not work. Every boundary we time
(epoch start/end, the first step, the end of warm-up) synchronises first;
inside the steady state we do not synchronise per step, so the measurement
itself costs nothing.

Timeline of one repeat, as :class:`StepClock` sees it::

    start()   step 1 done        step W done (warm)                epoch_end()
      |---------|------ ... -------|====== steady state ======= ... ==|
      '- time_to_first_step_s -'    (compilation, cudnn autotuning and
                                     CUDA-graph capture happen before W)

Steady-state throughput counts only the items of steps after the warm mark
and only the time inside epochs (``epoch_start``..``epoch_end``), so an
evaluation pass between epochs never dilutes it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(torch.device(device))


def now(device: str) -> float:
    """Synchronise the device, then read a monotonic clock (seconds)."""
    sync(device)
    return time.perf_counter()


def reset_peak_memory(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(torch.device(device))


def peak_memory_bytes(device: str) -> int | None:
    if device.startswith("cuda"):
        return int(torch.cuda.max_memory_allocated(torch.device(device)))
    return None  # the CPU allocator keeps no peak statistic we could trust


def warmup_steps_for(total_steps: int, wanted: int) -> int:
    """Warm-up steps for a run of ``total_steps``: ``wanted``, but never more than
    half the run, so even a 4-step smoke run leaves steady steps to measure."""
    return max(1, min(wanted, total_steps // 2))


@dataclass
class StepClock:
    """Times a training run split into warm-up and steady state.

    Call ``start()`` before the first step, ``epoch_start()``/``epoch_end()``
    around each epoch's training (not its evaluation), and ``step_done(items)``
    after every optimizer step. The clock marks itself warm after
    ``warmup_steps`` steps; steady-state throughput counts only what follows.
    ``time_fn`` is the clock read after synchronising (tests pass a fake).
    """

    device: str
    warmup_steps: int = 5
    time_fn: Callable[[], float] = time.perf_counter
    #: the clock of ``steady_windows`` (the telemetry sampler's; tests pass a fake)
    mono_fn: Callable[[], float] = time.monotonic
    t_start: float = 0.0
    t_first_step: float | None = None
    t_warm: float | None = None
    steady_items: int = 0
    steps: int = 0
    epoch_seconds: list[float] = field(default_factory=list)
    _epoch_t0: float | None = None
    _open_since: float | None = None  # start of the current steady segment
    _steady_closed: float = 0.0  # steady seconds of finished segments
    #: the steady segments as [start, end] on time.monotonic(), the clock the runner's telemetry
    #: sampler keeps (system-wide: the same in a cell's own process), so the runner can take the
    #: GPU's energy over exactly these spans (kit.env.telemetry_summary.steady_energy)
    steady_windows: list = field(default_factory=list)

    def _now(self) -> float:
        sync(self.device)
        return self.time_fn()

    def start(self) -> None:
        self.t_start = self._now()

    def _open(self, t: float) -> None:
        self._open_since = t
        self.steady_windows.append([self.mono_fn(), None])

    def _close(self, t: float) -> None:
        self._steady_closed += t - self._open_since
        self._open_since = None
        self.steady_windows[-1][1] = self.mono_fn()

    def epoch_start(self) -> None:
        self._epoch_t0 = self._now()
        if self.t_warm is not None:
            self._open(self._epoch_t0)

    def epoch_end(self) -> float:
        t = self._now()
        t0 = self._epoch_t0 if self._epoch_t0 is not None else self.t_start
        dt = t - t0
        self.epoch_seconds.append(dt)
        if self._open_since is not None:
            self._close(t)
        self._epoch_t0 = None
        return dt

    def step_done(self, items: int) -> None:
        self.steps += 1
        if self.steps == 1:
            self.t_first_step = self._now()
        if self.t_warm is not None:
            self.steady_items += items
        elif self.steps >= self.warmup_steps:
            self.t_warm = self._now()
            self._open(self.t_warm)

    @property
    def warm(self) -> bool:
        return self.t_warm is not None

    def steady_seconds(self, t_end: float | None = None) -> float | None:
        """Seconds of steady state so far (an open segment runs up to ``t_end``)."""
        if self.t_warm is None:
            return None
        total = self._steady_closed
        if self._open_since is not None:
            total += (t_end if t_end is not None else self._now()) - self._open_since
        return total

    def summary(self) -> dict:
        steady = self.steady_seconds()
        return {
            "epoch_seconds": list(self.epoch_seconds),
            "epoch_seconds_median": statistics.median(self.epoch_seconds) if self.epoch_seconds else None,
            "time_to_first_step_s": (self.t_first_step - self.t_start) if self.t_first_step is not None else None,
            "warmup_steps": self.warmup_steps,
            "steady_seconds": steady,
            "steady_items": self.steady_items,
            "throughput_items_per_s": (self.steady_items / steady) if steady and self.steady_items else None,
            "steps": self.steps,
            "steady_windows": [[a, b if b is not None else self.mono_fn()] for a, b in self.steady_windows],
        }
