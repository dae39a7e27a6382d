"""Live GPU telemetry around each cell (placeholder; see issue 5)."""

from __future__ import annotations


class _NoTelemetry:
    def __init__(self, reason: str):
        self.reason = reason

    def stop(self) -> dict:
        return {"available": False, "reason": self.reason}


def start_for_device(device: str):
    return _NoTelemetry("telemetry sampler not built yet")


def attach_energy(result) -> None:
    return None
