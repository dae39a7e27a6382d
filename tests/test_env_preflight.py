"""Preflight for `kit run`: stop early when CUDA cannot work, warn when the GPU is shared."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from fixtures.nvml_fake import FakeNVML
from kit.env import preflight
from kit.errors import EnvironmentCheckError

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"


def host(name: str, **changes) -> FakeNVML:
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    for k, v in changes.items():
        data["gpus"][0][k] = v
    return FakeNVML(data)


def console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=200), buf


def test_asking_for_cuda_without_a_driver_fails_early_with_the_remedy():
    with pytest.raises(EnvironmentCheckError) as err:
        preflight.check_native_run("cuda", nvml=host("no_driver"))
    assert "asks for an NVIDIA GPU" in err.value.message
    assert "--device cpu" in err.value.remedy


def test_auto_without_a_driver_notes_the_cpu_fallback():
    con, buf = console()
    preflight.check_native_run("auto", console=con, nvml=host("no_driver"))
    assert "runs on the CPU" in buf.getvalue()


def test_cpu_device_needs_no_checks():
    preflight.check_native_run("cpu", nvml=object())  # the probe is never touched


def test_a_gpu_number_that_does_not_exist_fails(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(EnvironmentCheckError, match="no such GPU"):
        preflight.check_native_run("cuda:2", nvml=host("h200_580"), torch_cuda="12.8")


def test_another_process_on_the_gpu_is_warned_about(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    con, buf = console()
    procs = [{"pid": os.getpid(), "used_memory": 1}, {"pid": 4242, "used_memory": 1}]
    fake = host("h200_580", processes=procs, timeline=[])
    preflight.check_native_run("cuda:0", console=con, nvml=fake, torch_cuda="12.8")
    out = buf.getvalue()
    assert "already in use by PID 4242 (python3)" in out
    assert f"PID {os.getpid()}" not in out


def test_torch_built_for_a_newer_cuda_major_than_the_driver_fails():
    with pytest.raises(EnvironmentCheckError) as err:
        preflight.check_native_run("cuda", nvml=host("a100_525"), torch_cuda="13.0")
    assert "CUDA 13.0" in err.value.message and "supports only CUDA 12.0" in err.value.message
    assert "error 35" in err.value.message
    assert "580" in err.value.remedy


def test_torch_built_for_a_newer_cuda_minor_warns_about_compatibility():
    con, buf = console()
    preflight.check_native_run("cuda", console=con, nvml=host("a100_525"), torch_cuda="12.8")
    assert "minor-version compatibility" in buf.getvalue()


def test_matching_driver_is_silent():
    con, buf = console()
    preflight.check_native_run("cuda", console=con, nvml=host("h200_580"), torch_cuda="12.8")
    assert buf.getvalue() == ""


def test_torch_wheel_cuda_is_read_without_importing_torch():
    import sys

    had_torch = "torch" in sys.modules
    from kit.env.record import torch_wheel_cuda

    value = torch_wheel_cuda()
    assert value is None or value[0].isdigit()
    assert ("torch" in sys.modules) == had_torch
