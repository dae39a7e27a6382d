"""Checks `kit run` makes before starting anything (torch-free, a fraction of a second).

- The device asks for CUDA but there is no driver or no such GPU: stop now,
  with the remedy, instead of failing inside PyTorch minutes later.
- The installed PyTorch wheel's CUDA is newer than the driver supports (read
  from torch/version.py as text; torch is never imported here): stop for a
  new major version (CUDA error 35 would follow), warn for a newer minor
  version (minor-version compatibility, features limited).
- Another process already uses the GPU: warn, because it disturbs the timings.
"""

from __future__ import annotations

import os
from typing import Any

from kit.env import nvml as nvml_probe
from kit.env.doctor import no_driver_remedy
from kit.env.probe import is_unknown, known
from kit.env.record import torch_wheel_cuda
from kit.env.telemetry import resolve_gpu
from kit.errors import EnvironmentCheckError
from kit.facts import cuda as cuda_facts


def check_native_run(device: str, console: Any = None, nvml: Any = None, torch_cuda: str | None = None) -> None:
    """Raise EnvironmentCheckError when ``device`` cannot work here; print warnings to ``console``.

    ``device``: "auto", "cpu", "cuda" or "cuda:N". ``nvml``: a probe dict or an
    NVML module (tests); ``torch_cuda``: the CUDA version of the installed
    torch wheel ("12.8"), read from the installed package when None.
    """
    dev = (device or "auto").strip().lower()
    if dev == "cpu" or not (dev == "auto" or dev.startswith("cuda")):
        return
    host = nvml if isinstance(nvml, dict) else nvml_probe.probe(nvml)
    explicit = dev.startswith("cuda")

    if not host.get("available") or not host.get("gpus"):
        why = host.get("reason") if not host.get("available") else "the driver is loaded but no GPU is visible"
        if explicit:
            raise EnvironmentCheckError(
                f"--device {device} asks for an NVIDIA GPU, but there is none usable here ({why}).",
                remedy=(
                    "Install the NVIDIA driver and reboot, or run on the CPU with --device cpu."
                    if host.get("state") == "no_driver" or host.get("available")
                    else no_driver_remedy(host) + " Or run on the CPU with --device cpu."
                ),
            )
        _say(console, f"[cyan]note:[/cyan] no NVIDIA GPU usable ({why}); --device auto runs on the CPU.")
        return

    where, how = resolve_gpu(dev if explicit else "cuda:0")
    if where is None:
        raise EnvironmentCheckError(f"--device {device}: {how}.", remedy="Check CUDA_VISIBLE_DEVICES and the GPU number (nvidia-smi lists them).")
    gpu = _find(host["gpus"], where)
    if gpu is None:
        if explicit:
            raise EnvironmentCheckError(
                f"--device {device}: no such GPU ({how}); this host has {len(host['gpus'])} GPU(s).",
                remedy="Use --device cuda:N with N from 0 to the number of visible GPUs minus one.",
            )
        return

    _check_driver_for_torch(host, console, torch_cuda)

    procs = gpu.get("processes")
    if isinstance(procs, list):
        others = [p for p in procs if p.get("pid") != os.getpid()]
        if others:
            desc = ", ".join(f"PID {p['pid']}" + (f" ({p['name']})" if isinstance(p.get("name"), str) else "") for p in others)
            _say(console, f"[yellow]warning:[/yellow] GPU {gpu.get('index')} ({known(gpu.get('name'), 'GPU')}) is already in use by {desc}; "
                          "timings will be disturbed. Stop those processes or pick another GPU.")


def _check_driver_for_torch(host: dict, console: Any, torch_cuda: str | None) -> None:
    wheel = torch_cuda or torch_wheel_cuda()
    driver_cuda = host.get("cuda_driver_version")
    if not wheel or is_unknown(driver_cuda) or not isinstance(driver_cuda, str):
        return
    w, d = cuda_facts.parse_version(wheel), cuda_facts.parse_version(driver_cuda)
    driver = known(host.get("driver_version"), "unknown")
    if w[0] > d[0]:
        need = cuda_facts.MINOR_COMPAT_MIN_DRIVER.get(w[0]) or cuda_facts.MIN_DRIVER_FOR_CUDA.get(f"{w[0]}.{w[1] if len(w) > 1 else 0}", "a newer one")
        raise EnvironmentCheckError(
            f"The installed PyTorch is built for CUDA {wheel}, but driver {driver} supports only CUDA {driver_cuda}; "
            "PyTorch would fail with CUDA error 35 (cudaErrorInsufficientDriver).",
            remedy=f"Upgrade the NVIDIA driver (≥ {need}), or install a PyTorch build for CUDA {d[0]}.x, or use a container (kit doctor).",
        )
    if w[:2] > d[:2]:
        _say(console, f"[yellow]warning:[/yellow] PyTorch is built for CUDA {wheel}, the driver supports CUDA {driver_cuda}: "
                      "it runs under minor-version compatibility, with features limited (PTX JIT of newer code fails with error 222).")


def _find(gpus: list[dict], where: dict) -> dict | None:
    for g in gpus:
        if "uuid" in where and g.get("uuid") == where["uuid"]:
            return g
        if "index" in where and g.get("index") == where["index"]:
            return g
    return None


def _say(console: Any, text: str) -> None:
    if console is not None:
        console.print(text)
