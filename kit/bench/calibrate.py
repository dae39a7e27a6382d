"""Measure this GPU's own matrix-multiply peak per dtype and its memory bandwidth (a few seconds).

Achieved TFLOP/s of a cell is reported as a fraction of *this* number rather
than of a datasheet figure: clocks, power limits and the software stack make
vendor peaks unreachable, and the kit should compare like with like. The peak
is the best rate over a few square products (:data:`SHAPES`), as ml-engineering's
"maximum achievable matmul FLOPS" finder takes the best of a sweep; the rate at
one mid-sized product (:data:`TYPICAL`) is kept beside it, to show how much of
the peak a matmul of ordinary size gets. The bandwidth (a device-to-device copy;
on a CPU a memcpy) is the ceiling of memory-bound work, which a narrower dtype
can speed up by its bytes per element at most (kit.results.explain).
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from kit.bench.precision import FP8_MIN_CAPABILITY, configure_backends


def _gemm_tflops(mm, n: int, iters: int, warmup: int, device: str) -> float:
    """TFLOP/s of ``mm()`` (one n x n x n product), timed with CUDA events after ``warmup`` calls."""
    for _ in range(warmup):
        mm()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        mm()
    end.record()
    torch.cuda.synchronize(device)
    seconds = start.elapsed_time(end) / 1000.0
    return 2 * n**3 * iters / seconds / 1e12


def matmul_tflops(device: str, dtype_name: str, n: int = 8192, iters: int = 10, warmup: int = 3) -> float:
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
    configure_backends("tf32" if dtype_name == "tf32" else "fp32")
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    rate = _gemm_tflops(lambda: a @ b, n, iters, warmup, device)
    del a, b
    torch.cuda.empty_cache()
    return rate


def scaled_mm_tflops(device: str, n: int = 8192, iters: int = 10, warmup: int = 3) -> float:
    """fp8 (e4m3) GEMM rate through ``torch._scaled_mm``, the kernel torchao's Float8Linear
    calls: tensorwise scales, bf16 output, fast accumulation off (torchao's setting for the
    backward GEMMs; its forward GEMM uses fast accumulation, which is not slower)."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, generator=gen).to(torch.float8_e4m3fn)
    # _scaled_mm wants its second operand column-major: the transpose of a row-major matrix
    b = torch.randn(n, n, device=device, generator=gen).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=device, dtype=torch.float32)

    def mm():
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    rate = _gemm_tflops(mm, n, iters, warmup, device)
    del a, b
    torch.cuda.empty_cache()
    return rate


#: the n of the n x n x n products the peaks are swept over (the largest needs 3 x 576 MiB in fp32)
SHAPES = (4096, 6144, 8192, 12288)
#: the product whose rate is kept beside the peak as a matmul of ordinary size
TYPICAL = 4096


def sweep(rate_at: Callable[[int], float], shapes: tuple = SHAPES) -> dict:
    """``rate_at(n)`` (TFLOP/s of an n x n x n product) for each n of ``shapes``: {"best": the highest
    rate or None, "by_n": {n: rate}, "errors": {n: the first line of what failed}}. A shape that
    fails (out of memory on a small GPU) is left out of the best and says why."""
    by_n, errors = {}, {}
    for n in shapes:
        try:
            by_n[n] = rate_at(n)
        except RuntimeError as exc:
            errors[n] = (str(exc).splitlines() or [exc.__class__.__name__])[0]
    return {"best": max(by_n.values()) if by_n else None, "by_n": by_n, "errors": errors}


def _record(out: dict, name: str, swept: dict) -> None:
    """One dtype's sweep into the calibration record: the peak under ``name`` (None where every shape
    failed, the reason under ``errors``), each shape's rate under ``by_shape``, the typical one under
    ``typical``, and each shape that failed with its reason under ``shape_errors``."""
    out[name] = round(swept["best"], 1) if swept["best"] is not None else None
    out.setdefault("by_shape", {})[name] = {f"{n}^3": round(r, 1) for n, r in swept["by_n"].items()}
    if TYPICAL in swept["by_n"]:
        out.setdefault("typical", {})[name] = round(swept["by_n"][TYPICAL], 1)
    if swept["errors"]:
        out.setdefault("shape_errors", {})[name] = {f"{n}^3": why for n, why in swept["errors"].items()}
    if swept["best"] is None and swept["errors"]:
        out.setdefault("errors", {})[name] = next(iter(swept["errors"].values()))


def calibrate(device: str) -> dict:
    """{"method", "fp32", "tf32", "fp16", "bf16", "fp8"}: each dtype's peak in TFLOP/s (the best of
    :data:`SHAPES`), or None and why under ``errors`` (``fp8`` before compute capability 8.9 or
    without torch._scaled_mm); beside them ``by_shape`` ({dtype: {"4096^3": rate, ...}}),
    ``typical`` ({dtype: the rate at :data:`TYPICAL`}), ``typical_shape`` and ``shape_errors``
    ({dtype: {shape: why}} for each shape that failed)."""
    if not device.startswith("cuda"):
        return {"available": False, "reason": "matmul calibration runs on CUDA devices only"}
    sizes = ", ".join(map(str, SHAPES))
    out = {"available": True, "method": f"best of n^3 matmuls for n in {sizes}, each 3 warm-up + 10 timed with CUDA "
                                        f"events, random normal inputs; typical: {TYPICAL}^3", "typical_shape": f"{TYPICAL}^3"}
    cap = torch.cuda.get_device_capability(torch.device(device))
    for name in ("fp32", "tf32", "fp16", "bf16"):
        if name in ("tf32", "bf16") and cap < (8, 0):
            out[name] = None
            continue
        _record(out, name, sweep(lambda n, name=name: matmul_tflops(device, name, n=n)))
    out["fp8"] = None
    if cap < FP8_MIN_CAPABILITY:
        out.setdefault("errors", {})["fp8"] = "fp8 GEMMs need compute capability {}.{}+".format(*FP8_MIN_CAPABILITY)
    elif not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        out.setdefault("errors", {})["fp8"] = f"torch {torch.__version__} has no torch._scaled_mm"
    else:
        try:
            _record(out, "fp8", sweep(lambda n: scaled_mm_tflops(device, n=n)))
            if out["fp8"] is not None:
                out["fp8_method"] = (f"best of n^3 torch._scaled_mm for n in {sizes}, float8_e4m3fn inputs, tensorwise "
                                     "scales, bf16 output")
        except TypeError as exc:  # an older signature
            out.setdefault("errors", {})["fp8"] = (str(exc).splitlines() or [exc.__class__.__name__])[0]
    configure_backends("fp32")
    return out


def memory_bandwidth(device: str, mib: int | None = None, tries: int = 5) -> dict:
    """{"available", "gb_per_s", "method"}: the best of ``tries`` copies of one ``mib`` MiB tensor
    into another on ``device`` (each copy reads and writes it: 2 x its bytes moved), after one
    warm-up copy; CUDA events time a GPU's, ``time.perf_counter`` a CPU's memcpy. The best, not the
    median: the ceiling, as the matmul peak is. {"available": False, "reason"} where it fails
    (out of memory). ``mib`` by default: 1024 on a GPU (far past a GPU's L2 cache, so the copy
    goes to memory), 256 on a CPU (short in a CPU run)."""
    if mib is None:
        mib = 1024 if device.startswith("cuda") else 256
    n = mib * 2**20 // 4
    try:
        src = torch.empty(n, dtype=torch.float32, device=device).fill_(1.0)
        dst = torch.empty_like(src)
        dst.copy_(src)  # warm-up: first touch of the pages, allocator
        best = float("inf")
        for _ in range(tries):
            if device.startswith("cuda"):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                dst.copy_(src)
                end.record()
                torch.cuda.synchronize(device)
                seconds = start.elapsed_time(end) / 1000.0
            else:
                t0 = time.perf_counter()
                dst.copy_(src)
                seconds = time.perf_counter() - t0
            best = min(best, seconds)
        del src, dst
    except RuntimeError as exc:
        return {"available": False, "reason": (str(exc).splitlines() or [exc.__class__.__name__])[0]}
    finally:
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    kind = "device-to-device copy timed with CUDA events" if device.startswith("cuda") else "memcpy (Tensor.copy_) timed with perf_counter"
    return {"available": True, "gb_per_s": round(2 * n * 4 / best / 1e9, 1), "device": device,
            "method": f"{mib} MiB fp32 {kind}, best of {tries} after 1 warm-up; bytes moved = read + write"}
