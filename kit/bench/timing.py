"""Clocks that tell the truth on an asynchronous device.

CUDA kernels run after the Python call returns, so a wall clock read without
synchronising measures launch time, not work. Every boundary we time
(epoch start/end, the end of warm-up) synchronises first; inside the steady
state we do not synchronise per step, so the measurement itself costs nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

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


@dataclass
class StepClock:
    """Times a training run split into warm-up and steady state.

    ``mark_warm()`` is called once the first ``warmup_steps`` steps (and any
    compilation) are done; steady-state throughput counts only what follows.
    """

    device: str
    warmup_steps: int = 5
    t_start: float = 0.0
    t_first_step: float | None = None
    t_warm: float | None = None
    steady_items: int = 0
    steps: int = 0
    epoch_seconds: list[float] = field(default_factory=list)
    _epoch_t0: float = 0.0

    def start(self) -> None:
        self.t_start = now(self.device)

    def epoch_start(self) -> None:
        self._epoch_t0 = now(self.device)

    def epoch_end(self) -> float:
        dt = now(self.device) - self._epoch_t0
        self.epoch_seconds.append(dt)
        return dt

    def step_done(self, items: int) -> None:
        self.steps += 1
        if self.steps == 1:
            self.t_first_step = now(self.device)
        if self.t_warm is not None:
            self.steady_items += items
        elif self.steps >= self.warmup_steps:
            self.t_warm = now(self.device)

    def steady_seconds(self, t_end: float) -> float | None:
        return (t_end - self.t_warm) if self.t_warm is not None else None

    def summary(self) -> dict:
        t_end = now(self.device)
        steady = self.steady_seconds(t_end)
        out = {
            "epoch_seconds": list(self.epoch_seconds),
            "epoch_seconds_median": sorted(self.epoch_seconds)[len(self.epoch_seconds) // 2] if self.epoch_seconds else None,
            "time_to_first_step_s": (self.t_first_step - self.t_start) if self.t_first_step else None,
            "steady_seconds": steady,
            "steady_items": self.steady_items,
            "throughput_items_per_s": (self.steady_items / steady) if steady and self.steady_items else None,
            "steps": self.steps,
        }
        return out
