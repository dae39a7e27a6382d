"""The runner's entry into the benchmark code: resolve the device, run one cell."""

from __future__ import annotations

from kit.errors import UsageError
from kit.results.schema import CellResult, CellSpec
from kit.bench.context import CellContext


def import_stack() -> str | None:
    """Import PyTorch now, before `kit run` writes anything: None when it imports, else
    what went wrong (a broken install fails here, not after the run folder exists)."""
    try:
        import torch  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"{exc.__class__.__name__}: {exc}"
    return None


def resolve_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if requested == "cpu":
        return "cpu"
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UsageError(f"--device {requested}: no CUDA GPU is visible to PyTorch here.", remedy="Use --device cpu, or check `kit doctor`.")
        index = int(requested.split(":", 1)[1]) if ":" in requested else 0
        if index >= torch.cuda.device_count():
            raise UsageError(f"--device {requested}: only {torch.cuda.device_count()} GPU(s) visible (indices 0..{torch.cuda.device_count() - 1}).")
        # the run's GPU becomes the current device, so that streams, CUDA graphs and
        # library handles that default to "the current device" are on it too
        torch.cuda.set_device(index)
        return f"cuda:{index}"
    raise UsageError(f"unknown --device {requested!r}; use auto, cpu, cuda or cuda:N")


def _runner(spec: CellSpec):
    """The module of the cell's suite that measures it (its descriptor's ``runner``, imported now)."""
    import importlib

    from kit.results import suites

    found = suites.find(spec.workload)
    if found is None:
        raise UsageError(f"unknown workload {spec.workload!r}")
    return importlib.import_module(found.runner)


def run_cell(spec: CellSpec, ctx: CellContext) -> CellResult:
    return _runner(spec).run_cell(spec, ctx)


def skipped_cell(spec: CellSpec, device: str) -> CellResult | None:
    """The cell's skipped result when it cannot run on ``device`` (None: run it). Cheap: no training,
    so the runner asks before it starts a process of its own for the cell (kit.runner.isolate)."""
    skipped = getattr(_runner(spec), "skipped_cell", None)
    return skipped(spec, device) if skipped else None


def calibrate(device: str) -> dict:
    """The GPU's own matmul peak per dtype (see kit.bench.calibrate)."""
    from kit.bench.calibrate import calibrate as _calibrate

    return _calibrate(device)


def memory_bandwidth(device: str) -> dict:
    """The device's own copy bandwidth (see kit.bench.calibrate.memory_bandwidth)."""
    from kit.bench.calibrate import memory_bandwidth as _bandwidth

    return _bandwidth(device)
