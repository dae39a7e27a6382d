"""Every engine failure a user can meet becomes a KitError with a message and a remedy.

The texts below are what the Docker engine, the NVIDIA container CLI and pip
print (copied from their messages); no engine is needed.
"""

from __future__ import annotations

import pytest

from kit.errors import DockerError, EnvironmentCheckError
from kit.launch import engine
from kit.launch.engine import Context, explain

TOOLKIT_MISSING = 'Error response from daemon: could not select device driver "" with capabilities: [[gpu]]'
DRIVER_TOO_OLD = (
    "Error response from daemon: failed to create shim task: OCI runtime create failed: runc create failed: "
    "unable to start container process: error during container init: error running hook #0: error running hook: "
    "exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: requirement error: "
    "unsatisfied condition: cuda>=12.8, please update your driver to a newer version, or use an earlier cuda container: unknown"
)
BAD_GPU = (
    "Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create "
    "failed: runc create failed: unable to start container process: error during container init: error running hook #0: "
    "error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
    "nvidia-container-cli: device error: 3: unknown device: unknown"
)
DISK_FULL = (
    "failed to register layer: Error processing tar file(exit status 1): write "
    "/opt/venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9: no space left on device"
)
PIP_OFFLINE = (
    "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by "
    "'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new "
    "connection: [Errno -3] Temporary failure in name resolution')': /simple/torch/\n"
    "ERROR: Could not find a version that satisfies the requirement torch==2.9.1 (from versions: none)\n"
    "ERROR: No matching distribution found for torch==2.9.1\n"
    "The command '/bin/sh -c set -eu; pip-install.sh --no-deps -r /opt/kit/lock.txt' returned a non-zero code: 1"
)
PIP_TLS = (
    "WARNING: Retrying (Retry(total=4)) after connection broken by 'SSLError(SSLCertVerificationError(1, '[SSL: "
    "CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate (_ssl.c:1006)'))': /simple/torch/\n"
    "The command '/bin/sh -c ...' returned a non-zero code: 1"
)
BASE_GONE = "manifest for nvidia/cuda:10.1-cudnn7-devel-ubuntu18.04 not found: manifest unknown: manifest unknown"


def test_missing_container_toolkit_says_how_to_install_and_register_it():
    err = explain(TOOLKIT_MISSING, Context(during="run", stack="cuda12", gpus=("0",)))
    assert isinstance(err, DockerError)
    assert "NVIDIA Container Toolkit" in err.message
    assert "nvidia-ctk runtime configure --runtime=docker" in err.remedy
    assert "restart docker" in err.remedy.lower()


def test_driver_too_old_names_the_needed_cuda_and_driver():
    err = explain(DRIVER_TOO_OLD, Context(during="run", stack="cuda12", gpus=("0",), min_driver="570.26"))
    assert isinstance(err, EnvironmentCheckError)
    assert "cuda>=12.8" in err.message and "cuda12" in err.message
    assert "570.26" in err.remedy and "kit doctor" in err.remedy


def test_gpu_index_that_does_not_exist_is_named():
    err = explain(BAD_GPU, Context(during="run", stack="cuda12", gpus=("3",)))
    assert isinstance(err, EnvironmentCheckError)
    assert err.message.startswith("GPU 3 does not exist")
    assert "nvidia-smi -L" in err.remedy


def test_disk_full_during_build_says_where_to_free_space():
    err = explain(DISK_FULL, Context(during="build", stack="cuda12"))
    assert isinstance(err, DockerError)
    assert "disk is full" in err.message
    assert "docker builder prune" in err.remedy and "DockerRootDir" in err.remedy


def test_pip_without_network_suggests_ca_cert_and_mirrors():
    err = explain(PIP_OFFLINE, Context(during="build", stack="cpu"))
    assert isinstance(err, DockerError)
    assert "Network failure during the image build" in err.message
    for option in ("--ca-cert", "--pip-index-url", "--pip-extra-index-url", "--network host"):
        assert option in err.remedy


def test_tls_inspecting_proxy_points_at_ca_cert():
    err = explain(PIP_TLS, Context(during="build", stack="cpu"))
    assert isinstance(err, DockerError)
    assert "certificate" in err.message.lower()
    assert "--ca-cert" in err.remedy


def test_through_make_a_tls_failure_names_the_make_variable():
    """`make run` (KIT_LAUNCH_VIA=make) takes the build's options as make variables: the remedy
    names CA_CERT=, and ARGS= for an option without a variable of its own."""
    err = explain(PIP_TLS, Context(during="build", stack="cpu", via_make=True))
    assert err.remedy == (
        "The image build could not download packages. Behind a TLS-inspecting proxy, give its root certificate: "
        "add CA_CERT=/path/to/proxy-ca.pem to the make command (make run CA_CERT=/path/to/proxy-ca.pem). With a "
        "package mirror: ARGS='--pip-index-url URL' (or ARGS='--pip-extra-index-url URL' for a mirror beside PyPI). "
        "Builds use the host network by default (--network host). See docs/containers.md, 'Proxies and mirrors'.")
    assert "--ca-cert" not in err.remedy
    plain = explain(PIP_TLS, Context(during="build", stack="cpu"))
    assert "kit image build --ca-cert /path/to/proxy-ca.pem. With a package mirror: --pip-index-url URL " in plain.remedy


def test_missing_base_image_suggests_a_local_base():
    err = explain(BASE_GONE, Context(during="build", stack="cuda10", base="nvidia/cuda:10.1-cudnn7-devel-ubuntu18.04"))
    assert isinstance(err, DockerError)
    assert "nvidia/cuda:10.1" in err.message
    assert "--base" in err.remedy and "make_base_image.sh" in err.remedy


def test_unknown_engine_failure_still_reads_as_a_sentence():
    err = explain("Error response from daemon: conflict: unable to remove repository reference", Context(during="run"))
    assert isinstance(err, DockerError)
    assert err.message.startswith("The container failed to start: ")


class _Boom:
    """A client factory that fails like docker.from_env does."""

    def __init__(self, exc: BaseException):
        self.exc = exc

    def __call__(self, **_kw):
        raise self.exc


def _sdk_error(inner: BaseException) -> Exception:
    # docker.from_env() wraps requests' ConnectionError, which wraps urllib3's
    # ProtocolError('Connection aborted.', <OSError>): the OSError is in args.
    conn = ConnectionError("Connection aborted.", inner)
    try:
        raise RuntimeError(f"Error while fetching server API version: {conn}") from conn
    except RuntimeError as exc:
        return exc


def test_engine_not_running_when_the_socket_is_missing(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///tmp/nothing-here.sock")
    with pytest.raises(DockerError) as info:
        engine.connect(factory=_Boom(_sdk_error(FileNotFoundError(2, "No such file or directory"))))
    assert "not running" in info.value.message and "/tmp/nothing-here.sock" in info.value.message
    assert "systemctl start docker" in info.value.remedy


def test_engine_not_running_when_the_connection_is_refused(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    with pytest.raises(DockerError) as info:
        engine.connect(factory=_Boom(_sdk_error(ConnectionRefusedError(111, "Connection refused"))))
    assert "not running" in info.value.message


def test_no_permission_on_the_socket_suggests_the_docker_group():
    with pytest.raises(DockerError) as info:
        engine.connect(factory=_Boom(_sdk_error(PermissionError(13, "Permission denied"))))
    assert "No permission on the Docker socket" in info.value.message
    assert "usermod -aG docker" in info.value.remedy


class _InfoClient:
    def __init__(self, info: dict):
        self._info = info

    def info(self) -> dict:
        return self._info


def test_docker_info_without_nvidia_runtime_means_toolkit_missing(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr("shutil.which", lambda name: None)  # no toolkit hook on PATH either
    from kit.env import docker_probe

    monkeypatch.setattr(docker_probe.shutil, "which", lambda name: None)
    client = _InfoClient({"ServerVersion": "20.10.24", "Runtimes": {"runc": {}, "io.containerd.runc.v2": {}}})
    with pytest.raises(DockerError) as info:
        engine.require_gpu_support(client)
    from kit.env.doctor import NO_TOOLKIT_ERROR

    assert NO_TOOLKIT_ERROR in info.value.message
    assert "nvidia-ctk" in info.value.remedy


def test_docker_info_with_nvidia_runtime_passes():
    client = _InfoClient({"ServerVersion": "28.1.1", "Runtimes": {"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}}})
    engine.require_gpu_support(client)  # no exception


def test_a_download_that_arrives_cut_off_says_to_run_again():
    """pip 24 does not check a download's length: a wheel cut off mid-way is reported as invalid
    (measured with an index that breaks every download off, tests/containers)."""
    text = ("ERROR: Wheel 'torch' located at /tmp/pip-unpack-x/torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl is invalid.\n"
            "The command '/bin/sh -c pip-install.sh --no-deps -r /opt/kit/lock.txt' returned a non-zero code: 1\n"
            "ERROR: Wheel 'torch' located at /tmp/pip-unpack-x/torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl is invalid.")
    err = explain(text, Context(during="build", stack="cuda12"))
    assert isinstance(err, DockerError)
    assert err.message.startswith("A package download broke off or arrived damaged") and "Wheel 'torch'" in err.message
    assert "Run the same command again" in err.remedy and "--pip-index-url" in err.remedy
