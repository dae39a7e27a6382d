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
