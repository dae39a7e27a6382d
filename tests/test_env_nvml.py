"""The NVML probe: plain dicts, explicit unknowns, host states instead of exceptions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.nvml_fake import FakeNVML
from kit.env import nvml
from kit.env.probe import is_unknown

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_every_fixture_is_labelled_as_a_fixture():
    for path in FIXTURES.glob("*.json"):
        assert "FIXTURE" in json.loads(path.read_text())["_fixture"], path.name


def test_probe_reports_driver_cuda_and_each_gpu():
    fake = FakeNVML(load("h200_580"))
    out = nvml.probe(fake)
    assert out["available"] is True and out["state"] == "ok"
    assert out["driver_version"] == "580.65.06"
    assert out["cuda_driver_version"] == "13.0"
    (gpu,) = out["gpus"]
    assert gpu["name"] == "NVIDIA H200" and gpu["uuid"].startswith("GPU-")
    assert (gpu["compute_capability"], gpu["sm"], gpu["architecture"]) == ("9.0", "sm_90", "Hopper")
    assert gpu["memory_total_bytes"] == 150754820096
    assert gpu["power_limit_w"] == 700.0
    assert gpu["pcie"] == {"generation": 5, "width": 16}
    assert gpu["ecc_mode"] == "enabled"
    # the timeline's first entry, and the most the GPU may clock to and the clock applications are held to
    assert gpu["clocks_mhz"] == {"sm": 1980, "memory": 3201, "max_sm": 1980, "applications_sm": 1980}
    assert gpu["processes"] == []
    assert fake.initialised == 0, "the probe must shut NVML down again"


def test_a_clock_this_pynvml_cannot_read_is_recorded_unknown_with_the_reason():
    fake = FakeNVML(load("h200_580"))
    fake.nvmlDeviceGetMaxClockInfo = None  # an nvidia-ml-py without the call
    (gpu,) = nvml.probe(fake)["gpus"]
    assert gpu["clocks_mhz"]["sm"] == 1980 and gpu["clocks_mhz"]["applications_sm"] == 1980
    assert "nvmlDeviceGetMaxClockInfo not provided by this pynvml" in str(gpu["clocks_mhz"]["max_sm"])


def test_a_probe_that_fails_records_unknown_with_the_reason():
    out = nvml.probe(FakeNVML(load("gtx1080ti_410")))
    ecc = out["gpus"][0]["ecc_mode"]
    assert is_unknown(ecc)
    assert ecc["reason"] == "NVMLError_NotSupported: Not Supported"


def test_no_driver_is_a_state_not_an_exception():
    out = nvml.probe(FakeNVML(load("no_driver")))
    assert out == {"available": False, "state": "no_driver", "reason": "NVMLError_LibraryNotFound: NVML Shared Library Not Found", "gpus": []}


@pytest.mark.parametrize("error, state", [("DriverNotLoaded", "no_driver"), ("LibRmVersionMismatch", "driver_mismatch"), ("NoPermission", "no_permission"), ("Unknown", "nvml_error")])
def test_init_failures_map_to_host_states(error, state):
    out = nvml.probe(FakeNVML({"init_error": error, "gpus": []}))
    assert out["available"] is False and out["state"] == state and out["reason"]


def test_missing_nvml_package_is_a_state(monkeypatch):
    monkeypatch.setattr(nvml, "load_module", lambda: None)
    assert nvml.probe()["state"] == "no_nvml_package"


def test_processes_on_a_gpu_are_listed_with_memory_and_name():
    data = load("h200_580")
    data["gpus"][0]["processes"] = [{"pid": 4242, "used_memory": 1024}, {"pid": 77, "used_memory": None}]
    procs = nvml.probe(FakeNVML(data))["gpus"][0]["processes"]
    assert procs[0]["pid"] == 77 and is_unknown(procs[0]["used_memory_bytes"]) and is_unknown(procs[0]["name"])
    assert procs[1] == {"pid": 4242, "used_memory_bytes": 1024, "name": "python3"}


def test_real_pynvml_without_a_driver_gives_the_no_driver_state():
    out = nvml.probe()
    if out["available"]:
        pytest.skip("this host has an NVIDIA driver")
    assert out["state"] in ("no_driver", "no_nvml_package") and out["reason"]
