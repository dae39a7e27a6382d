"""`kit doctor`: stack verdicts, messages, recommendation and exit codes on fake hosts.

The hosts are hand-written NVML fixtures (tests/fixtures/nvml/*.json, each
labelled as such) fed through fixtures.nvml_fake.FakeNVML, and fake Docker
clients answering `docker info`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.cli import run_main
from fixtures.nvml_fake import FakeNVML
from kit.env import bench_stack, docker_probe, doctor
from kit.env import nvml as nvml_mod
from kit.env.doctor_report import Report
from kit.errors import DockerError, EnvironmentCheckError
from kit.facts.stacks import STACKS

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"

DOCKER_WITH_NVIDIA = {"ServerVersion": "28.1.1", "Runtimes": {"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}}, "DefaultRuntime": "runc"}
DOCKER_WITHOUT_NVIDIA = {"ServerVersion": "20.10.24", "Runtimes": {"io.containerd.runc.v2": {}, "runc": {}}, "DefaultRuntime": "runc"}
#: `kit run`'s stack in the test's Python, as the doctor's probe finds a working one (fixture values)
HEALTHY_BENCH = {"torch": {"installed": "2.14.1", "imports": True, "version": "2.14.1"},
                 "torchvision": {"installed": "0.29.1", "imports": True, "version": "0.29.1"},
                 "fastai": {"installed": "2.8.12", "imports": True, "version": "2.8.12"}}
DOCKER_WITH_CDI = {"ServerVersion": "28.3.0", "Runtimes": {"runc": {}}, "DiscoveredDevices": [{"Source": "cdi", "ID": "nvidia.com/gpu=all"}]}


class FakeDockerClient:
    def __init__(self, info: dict | None = None, exc: BaseException | None = None):
        self._info, self._exc = info, exc

    def info(self) -> dict:
        if self._exc is not None:
            raise self._exc
        return self._info or {}


def fake_nvml(name: str) -> FakeNVML:
    return FakeNVML.from_file(FIXTURES / f"{name}.json")


def docker_probe_of(info: dict | None = None, exc: BaseException | None = None) -> dict:
    return docker_probe.probe(FakeDockerClient(info, exc), which=lambda _name: None)


def diagnose(host: str, stack: str = "auto", docker_info: dict | None = DOCKER_WITH_NVIDIA, gpu: int | None = None) -> Report:
    return doctor.diagnose(nvml=fake_nvml(host), docker=docker_probe_of(docker_info), stack=stack, gpu=gpu)


# -- verdicts per host ------------------------------------------------------------

EXPECTED = {
    # host: (cuda10, cuda12, cpu, recommended)
    "gtx1080ti_410": ("cannot", "cannot", "ok", "cpu"),
    "rtx2080ti_418": ("ok", "cannot", "ok", "cuda10"),
    "a100_525": ("cannot", "limited", "ok", "cuda12"),
    "h200_580": ("cannot", "ok", "ok", "cuda12"),
    "no_driver": ("cannot", "cannot", "ok", "cpu"),
}


@pytest.mark.parametrize("host", sorted(EXPECTED))
def test_every_stack_gets_the_expected_verdict_and_recommendation(host):
    report = diagnose(host)
    cuda10, cuda12, cpu, recommended = EXPECTED[host]
    assert report.verdicts["cuda10"].status == cuda10
    assert report.verdicts["cuda12"].status == cuda12
    assert report.verdicts["cpu"].status == cpu
    assert report.recommended == recommended
    assert report.ok  # auto: the recommended stack can always run
    for v in report.verdicts.values():
        if v.status != "ok":
            assert v.reasons, f"{host}/{v.stack}: a verdict other than ok must say why"
        if v.status == "cannot" and v.stack != "cpu":
            assert v.remedies, f"{host}/{v.stack}: a 'cannot' must come with a remedy"


def test_old_driver_on_pascal_is_too_old_for_cuda10_with_versions_named():
    v = diagnose("gtx1080ti_410").verdicts["cuda10"]
    text = " ".join(v.reasons)
    assert "driver too old for CUDA 10.1: need ≥ 418.39, have 410.78" in text
    assert "no minor-version compatibility" in text
    assert any("418.39" in r for r in v.remedies)


def test_pascal_is_too_old_for_the_cuda12_stack_and_cuda10_is_suggested():
    v = diagnose("gtx1080ti_410").verdicts["cuda12"]
    text = " ".join(v.reasons)
    assert "sm_61" in text and "Pascal" in text and "sm_70" in text
    assert "driver too old for CUDA 12.8" in text and "have 410.78" in text
    assert any("--stack cuda10" in r for r in v.remedies)


def test_turing_with_418_runs_cuda10_but_not_cuda12():
    report = diagnose("rtx2080ti_418")
    assert report.verdicts["cuda10"].reasons == []
    cuda12 = " ".join(report.verdicts["cuda12"].reasons)
    assert "need ≥ 570.26 (or ≥ 525.60.13 under minor-version compatibility" in cuda12 and "have 418.56" in cuda12


def test_ampere_is_not_supported_by_cuda10():
    v = diagnose("a100_525").verdicts["cuda10"]
    assert any("GPU 0 (NVIDIA A100-SXM4-40GB, sm_80, Ampere) not supported by CUDA 10.1" in r for r in v.reasons)
    assert any("--stack cuda12" in r for r in v.remedies)
    assert not any("driver" in r for r in v.reasons)  # 525 is new enough for 10.1; only the GPU is the problem


def test_driver_525_runs_cuda12_with_limits_under_minor_version_compatibility():
    v = diagnose("a100_525").verdicts["cuda12"]
    text = " ".join(v.reasons)
    assert "minor-version compatibility" in text and "features limited" in text and "error 222" in text
    assert any("570.26" in r for r in v.remedies)


def test_hopper_with_580_runs_cuda12_fully():
    report = diagnose("h200_580")
    assert report.verdicts["cuda12"].status == "ok" and report.verdicts["cuda12"].reasons == []
    assert "sm_90" in " ".join(report.verdicts["cuda10"].reasons)


def test_no_driver_says_so_and_only_cpu_can_run():
    report = diagnose("no_driver", docker_info=None)
    assert report.host["state"] == "no_driver"
    for stack in ("cuda10", "cuda12"):
        assert "no NVIDIA driver" in report.verdicts[stack].reasons[0]
        assert "only the cpu stack" in report.verdicts[stack].reasons[0]
    assert any("No NVIDIA driver found" in p.message for p in report.problems)
    assert report.gpu is None


def test_requesting_a_stack_that_cannot_run_raises_with_the_remedy():
    report = diagnose("rtx2080ti_418", stack="cuda12")
    assert not report.ok
    with pytest.raises(EnvironmentCheckError) as err:
        report.raise_if_not_ok()
    assert "cuda12 stack cannot run" in err.value.message
    assert "The cuda10 stack can" in err.value.message
    assert "570.26" in err.value.remedy
    assert err.value.exit_code == 6


def test_too_little_gpu_memory_means_cannot_and_busy_memory_means_limited():
    data = json.loads((FIXTURES / "h200_580.json").read_text())
    data["gpus"][0]["memory"] = {"total": 2 * 1024**3, "used": 0}
    v = doctor.diagnose(nvml=FakeNVML(data), docker=docker_probe_of(DOCKER_WITH_NVIDIA)).verdicts["cuda12"]
    assert v.status == "cannot" and any("not enough GPU memory" in r for r in v.reasons)

    data["gpus"][0]["memory"] = {"total": 150754820096, "used": 150754820096 - 1024**3}
    data["gpus"][0]["processes"] = [{"pid": 4242, "used_memory": 149 * 1024**3}]
    report = doctor.diagnose(nvml=FakeNVML(data), docker=docker_probe_of(DOCKER_WITH_NVIDIA))
    v = report.verdicts["cuda12"]
    assert v.status == "limited" and any("not enough free GPU memory" in r and "4242" in r for r in v.reasons)
    assert any("PID 4242 (python3)" in p.message for p in report.problems)


def test_gpu_that_does_not_exist_is_reported_not_crashed():
    report = diagnose("h200_580", gpu=3)
    assert report.verdicts["cuda12"].status == "cannot"
    assert any("GPU 3 not found" in p.message for p in report.problems)
    assert report.recommended == "cpu"


def test_unknown_compute_capability_is_limited_not_invented():
    data = json.loads((FIXTURES / "h200_580.json").read_text())
    data["gpus"][0]["compute_capability"] = {"error": "NotSupported"}
    v = doctor.diagnose(nvml=FakeNVML(data), docker=docker_probe_of(DOCKER_WITH_NVIDIA)).verdicts["cuda12"]
    assert v.status == "limited"
    assert any("compute capability" in r and "unknown" in r and "Not Supported" in r for r in v.reasons)


# -- Docker and the NVIDIA Container Toolkit ----------------------------------------


def test_missing_container_toolkit_gives_the_docker_error_and_the_fix():
    report = diagnose("h200_580", docker_info=DOCKER_WITHOUT_NVIDIA)
    assert report.docker["gpu_support"] == "none"
    v = report.verdicts["cuda12"]
    assert v.status == "cannot"
    assert any('could not select device driver "" with capabilities: [[gpu]]' in r for r in v.reasons)
    assert any("nvidia-ctk runtime configure --runtime=docker" in r and "restart docker" in r for r in v.remedies)
    assert report.recommended == "cpu"


@pytest.mark.parametrize("info, support", [(DOCKER_WITH_NVIDIA, "nvidia-runtime"), (DOCKER_WITH_CDI, "cdi")])
def test_nvidia_runtime_or_cdi_devices_count_as_gpu_support(info, support):
    report = diagnose("h200_580", docker_info=info)
    assert report.docker["gpu_support"] == support
    assert report.verdicts["cuda12"].status == "ok"


def test_toolkit_hook_on_path_counts_as_gpu_support():
    probe = docker_probe.probe(FakeDockerClient(DOCKER_WITHOUT_NVIDIA), which=lambda n: "/usr/bin/" + n if n == "nvidia-container-runtime-hook" else None)
    assert probe["gpu_support"] == "hook"


def test_permission_denied_on_the_socket_is_named_with_the_group_fix():
    exc = Exception("Error while fetching server API version: ('Connection aborted.', PermissionError(13, 'Permission denied'))")
    exc.__cause__ = PermissionError(13, "Permission denied")
    probe = docker_probe.probe(FakeDockerClient(exc=exc))
    assert probe["reachable"] is False and probe["state"] == "permission_denied"
    report = doctor.diagnose(nvml=fake_nvml("h200_580"), docker=probe)
    problem = next(p for p in report.problems if "permission" in p.message)
    assert "usermod -aG docker" in problem.remedy
    assert report.verdicts["cuda12"].status == "ok"  # an unreachable engine is a warning, not a verdict


def test_docker_not_running_is_a_warning_with_a_remedy():
    exc = Exception("Error while fetching server API version: ('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))")
    probe = docker_probe.probe(FakeDockerClient(exc=exc))
    assert probe["state"] == "not_running"
    report = doctor.diagnose(nvml=fake_nvml("no_driver"), docker=probe)
    problem = next(p for p in report.problems if "not reachable" in p.message)
    assert problem.severity == "warning" and "systemctl start docker" in problem.remedy


def test_check_stack_resolves_auto_and_raises_for_a_stack_that_cannot_run():
    verdict = doctor.check_stack("auto", nvml=fake_nvml("rtx2080ti_418"), docker=docker_probe_of(DOCKER_WITH_NVIDIA))
    assert verdict.stack == "cuda10" and verdict.runnable
    with pytest.raises(EnvironmentCheckError, match="sm_80"):
        doctor.check_stack("cuda10", nvml=fake_nvml("a100_525"), docker=docker_probe_of(DOCKER_WITH_NVIDIA))
    with pytest.raises(DockerError, match="not reachable"):
        doctor.check_stack("cpu", nvml=fake_nvml("no_driver"), docker={"reachable": False, "state": "not_running", "reason": "x"}, require_docker=True)


# -- the CLI ---------------------------------------------------------------------------


@pytest.fixture
def fake_host(monkeypatch):
    """Point the real probes at a fake NVML module and a fake Docker client."""

    def use(host: str, docker_info: dict | None = DOCKER_WITH_NVIDIA):
        monkeypatch.setattr(nvml_mod, "load_module", lambda: fake_nvml(host))
        monkeypatch.setattr(bench_stack, "probe", lambda *a, **kw: HEALTHY_BENCH)
        monkeypatch.setattr(docker_probe, "_default_client", lambda timeout: FakeDockerClient(docker_info))
        monkeypatch.setattr(docker_probe.shutil, "which", lambda _n: None)

    return use




@pytest.mark.parametrize(
    "host, args, code",
    [
        ("gtx1080ti_410", [], 0),
        ("gtx1080ti_410", ["--stack", "cuda10"], 6),
        ("rtx2080ti_418", ["--stack", "cuda10"], 0),
        ("rtx2080ti_418", ["--stack", "cuda12"], 6),
        ("a100_525", ["--stack", "cuda12"], 0),
        ("a100_525", ["--stack", "cuda10"], 6),
        ("h200_580", [], 0),
        ("no_driver", ["--stack", "cpu"], 0),
        ("no_driver", ["--stack", "cuda12"], 6),
    ],
)
def test_doctor_exit_code_follows_the_selected_stack(fake_host, capsys, host, args, code):
    fake_host(host)
    got, out, err = run_main(["doctor", *args], capsys)
    assert got == code, out + err
    got_json, out_json, _ = run_main(["doctor", "--json", "-", *args], capsys)
    assert got_json == code
    doc = json.loads(out_json)
    assert doc["ok"] is (code == 0)
    if code:
        assert "error:" in err and "what to do:" in err


def test_doctor_json_is_machine_readable(fake_host, capsys):
    fake_host("a100_525")
    code, out, _ = run_main(["doctor", "--json", "-"], capsys)
    doc = json.loads(out)
    assert code == 0
    assert doc["recommended_stack"] == "cuda12" and doc["selected_stack"] == "cuda12"
    assert doc["verdicts"]["cuda12"]["status"] == "limited"
    assert doc["verdicts"]["cuda10"]["runnable"] is False
    assert doc["nvml"]["driver_version"] == "525.85.12"
    assert doc["nvml"]["gpus"][0]["sm"] == "sm_80"
    assert doc["docker"]["gpu_support"] == "nvidia-runtime"


def test_doctor_table_names_the_gpu_and_the_recommendation(fake_host, capsys):
    fake_host("rtx2080ti_418")
    code, out, _ = run_main(["doctor"], capsys)
    assert code == 0
    assert "GeForce RTX 2080 Ti" in out and "418.56" in out
    assert "Recommended stack: cuda10" in out


def test_doctor_with_missing_toolkit_fails_the_gpu_stack_via_the_cli(fake_host, capsys):
    fake_host("h200_580", docker_info=DOCKER_WITHOUT_NVIDIA)
    code, out, err = run_main(["doctor", "--stack", "cuda12"], capsys)
    assert code == 6
    assert "could not select device driver" in err + out
    assert "nvidia-ctk runtime configure --runtime=docker" in err


def test_doctor_through_typer_cli_runner(fake_host):
    from typer.testing import CliRunner

    from kit.cli.main import app

    fake_host("no_driver", docker_info=None)
    result = CliRunner().invoke(app, ["doctor", "--json", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["recommended_stack"] == "cpu"
    result = CliRunner().invoke(app, ["doctor", "--stack", "cuda12"])
    assert isinstance(result.exception, EnvironmentCheckError) and result.exception.exit_code == 6


def test_real_doctor_on_a_host_without_an_nvidia_driver(capsys):
    """The real probes, on this machine. The CI machines have no NVIDIA driver."""
    if nvml_mod.probe().get("available"):
        pytest.skip("this host has an NVIDIA driver; this test checks the no-driver path")
    code, out, _ = run_main(["doctor"], capsys)
    assert code == 0 and "Recommended stack: cpu" in out and "NVIDIA driver none" in out
    code, out, _ = run_main(["doctor", "--json", "-"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["recommended_stack"] == "cpu" and doc["nvml"]["available"] is False
    code, _, err = run_main(["doctor", "--stack", "cuda12"], capsys)
    assert code == 6 and "no NVIDIA driver" in err


def test_driver_below_the_cuda12_minimum_names_the_driver_and_the_stack_it_runs():
    """Turing with driver 418: cuda12 needs ≥ 570.26 (or 525.60.13 with limits); the remedy says
    so and names cuda10, which this driver runs; both cuda12 variants say the same."""
    report = diagnose("rtx2080ti_418")
    for name in ("cuda12", "cuda12-fused"):
        v = report.verdicts[name]
        assert v.status == "cannot"
        assert v.remedies[0].startswith("Upgrade the NVIDIA driver to 570.26 or newer")
        assert any("--stack cuda10" in r and "runs fully" in r for r in v.remedies), v.remedies
    err = diagnose("rtx2080ti_418", stack="cuda12").error()
    assert "The cuda10 stack can" in err.message and "--stack cuda10" in err.remedy and "570.26" in err.remedy
    # where no stack runs on the driver, only the upgrade is offered
    pascal = diagnose("gtx1080ti_410").verdicts["cuda10"]
    assert not any(r.startswith("Or keep this driver") for r in pascal.remedies)


def test_the_fused_variant_is_judged_like_cuda12_but_never_recommended():
    report = diagnose("h200_580")
    assert report.verdicts["cuda12-fused"].status == report.verdicts["cuda12"].status == "ok"
    assert report.recommended == "cuda12"
    assert "Apex 25.07" in STACKS["cuda12-fused"].description and "Apex 25.01" in STACKS["cuda12"].description


def test_doctor_json_to_a_file_is_what_dash_prints_and_the_exit_code_still_follows(fake_host, capsys, tmp_path):
    fake_host("gtx1080ti_410")
    target = tmp_path / "doctor.json"
    code, out, err = run_main(["doctor", "--stack", "cuda10", "--json", str(target)], capsys)
    assert code == 6 and "GeForce GTX 1080 Ti" in out and f"JSON: {target}" in err  # the tables, the file, the verdict
    printed = run_main(["doctor", "--stack", "cuda10", "--json", "-"], capsys)[1]
    assert target.read_text() == printed and json.loads(printed)["ok"] is False
