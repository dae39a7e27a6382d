"""Hardware facts from NVIDIA's NVML interface.

Source: NVML API reference, "Clock Event Reasons" (nvmlClocksEventReason*,
formerly nvmlClocksThrottleReason*), nvml.h, as also defined in the
nvidia-ml-py package (pynvml.py).
"""

from __future__ import annotations

#: Clock-event (throttle) reason bits that mean the GPU ran slower than it
#: could for reasons outside the workload. Name -> bit.
THROTTLE_REASONS: dict[str, int] = {
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
    "power_brake": 0x80,
}

#: Bits that are reported but do not mean a slowdown of the work: the GPU was
#: idle (0x1), application clocks were set (0x2), sync boost (0x10), display
#: clock setting (0x100).
BENIGN_CLOCK_EVENTS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sync_boost": 0x10,
    "display_clock_setting": 0x100,
}
